//! Pre-quantized checkpoints in tests, read and written independently of `ir::packed`:
//!
//! * [`checkpoint_layers`] unpacks a GPTQ / AWQ checkpoint's integers from its safetensors, by
//!   the layouts' definitions (GPTQ: packed along K, v1 zeros minus one; AWQ: packed along N
//!   in nibble order 0,2,4,6,1,3,5,7);
//! * [`package_weights`] unpacks every MatMulNBits weight of a built package, with the row
//!   order of the act-order Gather in front of it;
//! * [`compare_integers`] says where the two disagree;
//! * [`write_prequant`] makes a pre-quantized checkpoint (and its dequantized float twin) of
//!   a float fixture, in layouts the shared fixtures do not have (act-order, 8 bits, v2,
//!   one group per column, AWQ or GPTQ of other families).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

/// One layer's integers as the checkpoint defines them.
#[derive(Clone, Debug)]
pub struct CheckpointLayer {
    pub k: usize,
    pub n: usize,
    pub bits: usize,
    /// `[K, N]`.
    pub codes: Vec<u8>,
    /// `[G, N]`, the zero point the dequantization subtracts.
    pub zeros: Vec<u16>,
    /// `[G, N]`.
    pub scales: Vec<f32>,
    /// Group of each row.
    pub g_idx: Vec<usize>,
}

fn read_st(path: &Path) -> BTreeMap<String, (safetensors::Dtype, Vec<usize>, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    st.tensors().into_iter().map(|(n, v)| (n, (v.dtype(), v.shape().to_vec(), v.data().to_vec()))).collect()
}

fn words(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn floats(dtype: safetensors::Dtype, b: &[u8]) -> Vec<f32> {
    match dtype {
        safetensors::Dtype::F16 => b.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
        safetensors::Dtype::BF16 => b.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
        safetensors::Dtype::F32 => b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect(),
        other => panic!("scales of dtype {other:?}"),
    }
}

const AWQ_ORDER: [usize; 8] = [0, 2, 4, 6, 1, 3, 5, 7];

/// Every packed layer of the checkpoint in `dir` (`model.safetensors`), by scope, unpacked as
/// its config's `quantization_config` says.
pub fn checkpoint_layers(dir: &Path) -> BTreeMap<String, CheckpointLayer> {
    let config: Value = serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    let q = &config["quantization_config"];
    let method = q["quant_method"].as_str().unwrap();
    let bits = q["bits"].as_u64().unwrap() as usize;
    let v1 = method == "gptq" && q.get("checkpoint_format").and_then(Value::as_str).unwrap_or("gptq") == "gptq";
    let tensors = read_st(&dir.join("model.safetensors"));
    let mut out = BTreeMap::new();
    for scope in tensors.keys().filter_map(|k| k.strip_suffix(".qweight")) {
        let (_, qshape, qw) = &tensors[&format!("{scope}.qweight")];
        let (_, zshape, qz) = &tensors[&format!("{scope}.qzeros")];
        let (sdtype, sshape, sc) = &tensors[&format!("{scope}.scales")];
        let (qw, qz) = (words(qw), words(qz));
        let scales = floats(*sdtype, sc);
        let (groups, n) = (sshape[0], sshape[1]);
        let per = 32 / bits;
        let mask = (1u32 << bits) - 1;
        let (k, codes, zeros) = if method == "awq" {
            let k = qshape[0];
            let unpack = |w: &[u32], rows: usize| -> Vec<u8> {
                let mut v = vec![0u8; rows * n];
                for r in 0..rows {
                    for c in 0..n / 8 {
                        for (i, &j) in AWQ_ORDER.iter().enumerate() {
                            v[r * n + 8 * c + j] = ((w[r * (n / 8) + c] >> (4 * i)) & 0xf) as u8;
                        }
                    }
                }
                v
            };
            (k, unpack(&qw, k), unpack(&qz, groups).into_iter().map(u16::from).collect())
        } else {
            let k = qshape[0] * per;
            let mut codes = vec![0u8; k * n];
            for row in 0..k {
                for col in 0..n {
                    codes[row * n + col] = ((qw[(row / per) * n + col] >> (bits * (row % per))) & mask) as u8;
                }
            }
            let mut zeros = vec![0u16; groups * n];
            for g in 0..groups {
                for col in 0..n {
                    zeros[g * n + col] = ((qz[g * zshape[1] + col / per] >> (bits * (col % per))) & mask) as u16 + v1 as u16;
                }
            }
            (k, codes, zeros)
        };
        let g_idx = match tensors.get(&format!("{scope}.g_idx")) {
            Some((_, _, b)) => b.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap()) as usize).collect(),
            None => {
                let gs = k.div_ceil(groups);
                (0..k).map(|r| r / gs).collect()
            }
        };
        out.insert(scope.to_string(), CheckpointLayer { k, n, bits, codes, zeros, scales, g_idx });
    }
    out
}

/// One MatMulNBits weight of a package, unpacked: `[N, K]` codes in the kernel's row order,
/// per-block zero points (the implicit mid value when there is no input) and scales, and the
/// checkpoint row of each kernel row (the act-order Gather's indices; identity without one).
#[derive(Clone, Debug)]
pub struct PackageWeight {
    /// The initializer of `B`.
    pub data: String,
    pub k: usize,
    pub n: usize,
    pub bits: usize,
    pub block: usize,
    pub codes: Vec<u8>,
    pub zeros: Vec<u8>,
    pub scales: Vec<f32>,
    pub order: Vec<usize>,
}

impl PackageWeight {
    fn kb(&self) -> usize {
        self.k.div_ceil(self.block)
    }
    /// The dequantized value `(q - zero) * scale` of output `n`, kernel row `i`, as the
    /// operator defines it.
    pub fn value(&self, n: usize, i: usize) -> f32 {
        let b = n * self.kb() + i / self.block;
        (self.codes[n * self.k + i] as f32 - self.zeros[b] as f32) * self.scales[b]
    }
}

fn bytes_of(model: &ir::Model, name: &str) -> Vec<u8> {
    model.graph.initializer(name).unwrap_or_else(|| panic!("no initializer `{name}`")).materialize().unwrap()
}

/// Every MatMulNBits weight of the package at `pkg`, in node order.
pub fn package_weights(pkg: &Path) -> Vec<PackageWeight> {
    let model = ir::load_model(&pkg.join("model.onnx")).unwrap();
    let mut out = Vec::new();
    for node in model.graph.nodes.iter().filter(|n| n.op == "MatMulNBits") {
        let attr = |a: &str| node.attr_int(a).unwrap_or_else(|| panic!("{}: no `{a}`", node.name)) as usize;
        let (k, n, bits, block) = (attr("K"), attr("N"), attr("bits"), attr("block_size"));
        let kb = k.div_ceil(block);
        let blob = block * bits / 8;
        let b = bytes_of(&model, &node.inputs[1]);
        let get = |bytes: &[u8], i: usize| -> u8 {
            if bits == 8 {
                bytes[i]
            } else {
                (bytes[i / 2] >> (4 * (i % 2))) & 0xf
            }
        };
        let mut codes = vec![0u8; n * k];
        for col in 0..n {
            for i in 0..k {
                codes[col * k + i] = get(&b[col * kb * blob + (i / block) * blob..], i % block);
            }
        }
        let scales = floats(safetensors::Dtype::F32, &bytes_of(&model, &node.inputs[2]));
        let zeros = match node.inputs.get(3).filter(|z| !z.is_empty()) {
            Some(z) => {
                let zb = bytes_of(&model, z);
                let per_col = zb.len() / n;
                (0..n).flat_map(|col| (0..kb).map(move |blk| (col, blk))).map(|(col, blk)| get(&zb[col * per_col..], blk)).collect()
            }
            None => vec![1u8 << (bits - 1); n * kb],
        };
        let order = match model.graph.producer(&node.inputs[0]).map(|p| &model.graph.nodes[p]) {
            Some(g) if g.op == "Gather" => {
                let idx = bytes_of(&model, &g.inputs[1]);
                idx.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap()) as usize).collect()
            }
            _ => (0..k).collect(),
        };
        out.push(PackageWeight { data: node.inputs[1].clone(), k, n, bits, block, codes, zeros, scales, order });
    }
    out
}

/// The checkpoint layers (scope and rows) a MatMulNBits weight stacks along N, from its
/// initializer's name: `<weight>/quant/data`, where fuse.pack_qkv names a packed Q/K/V
/// `<q weight>/packed_weight`, and a fused projection's parts are `<scope>.q` / `.k` / `.v`
/// (Phi-3's `qkv_proj`, split by the heads in `config`) and `.gate` / `.up` (halves).
pub fn layers_of(data: &str, config: &Value) -> Vec<(String, Option<std::ops::Range<usize>>)> {
    let weight = data.strip_suffix("/quant/data").unwrap_or_else(|| panic!("`{data}` is not a quantized weight's data"));
    let (weight, packed) = match weight.strip_suffix("/packed_weight") {
        Some(q) => (q, true),
        None => (weight, false),
    };
    let scope = weight.trim_end_matches(".weight");
    // GPT-2 spells the sizes n_embd / n_head.
    fn alias(k: &str) -> &str {
        match k {
            "hidden_size" => "n_embd",
            "num_attention_heads" => "n_head",
            other => other,
        }
    }
    let dim = |k: &str| config[k].as_u64().or_else(|| config[alias(k)].as_u64()).unwrap_or(0) as usize;
    let hd = config.get("head_dim").and_then(Value::as_u64).map_or(dim("hidden_size") / dim("num_attention_heads").max(1), |d| d as usize);
    let (q, kv) = (dim("num_attention_heads") * hd, config.get("num_key_value_heads").and_then(Value::as_u64).map_or(dim("num_attention_heads"), |v| v as usize) * hd);
    let inter = dim("intermediate_size");
    let part = |s: &str| -> Option<(String, Option<std::ops::Range<usize>>)> {
        let (base, p) = s.rsplit_once('.')?;
        let rows = match p {
            "q" => 0..q,
            "k" => q..q + kv,
            "v" => q + kv..q + 2 * kv,
            "gate" => 0..inter,
            "up" => inter..2 * inter,
            _ => return None,
        };
        Some((base.to_string(), Some(rows)))
    };
    if packed {
        if let Some((base, _)) = part(scope) {
            // q, k and v of one fused projection, in order: all of it.
            return vec![(base, None)];
        }
        return ["q_proj", "k_proj", "v_proj"].iter().map(|p| (scope.replace("q_proj", p), None)).collect();
    }
    vec![part(scope).unwrap_or((scope.to_string(), None))]
}

/// The scopes of [`layers_of`] (for weights of whole layers).
pub fn scopes_of(data: &str) -> Vec<String> {
    layers_of(data, &Value::Null).into_iter().map(|(s, _)| s).collect()
}

/// Where the package's MatMulNBits integers, zero points and scales differ from the
/// checkpoint's (empty: equal), and how many layers were compared.
pub fn compare_integers(pkg: &Path, ckpt: &Path) -> (usize, Vec<String>) {
    let layers = checkpoint_layers(ckpt);
    let config: Value = serde_json::from_slice(&std::fs::read(ckpt.join("config.json")).unwrap()).unwrap();
    let mut problems = Vec::new();
    let mut compared = std::collections::BTreeSet::new();
    for w in package_weights(pkg) {
        let mut at = 0;
        for (scope, rows) in layers_of(&w.data, &config) {
            let Some(l) = layers.get(&scope) else {
                problems.push(format!("{}: `{scope}` is not packed in the checkpoint", w.data));
                continue;
            };
            compared.insert(scope.clone());
            let rows = rows.unwrap_or(0..l.n);
            let mut bad = 0;
            for (j, col) in rows.clone().enumerate() {
                let n = at + j;
                for i in 0..w.k {
                    let row = w.order[i];
                    let g = l.g_idx[row];
                    let b = n * w.kb() + i / w.block;
                    if w.codes[n * w.k + i] != l.codes[row * l.n + col] || w.zeros[b] as u16 != l.zeros[g * l.n + col] || w.scales[b] != l.scales[g * l.n + col] {
                        bad += 1;
                    }
                }
            }
            if bad > 0 {
                problems.push(format!("{scope} rows {rows:?}: {bad} of {} values differ from the checkpoint's (codes, zero points or scales)", rows.len() * w.k));
            }
            at += rows.len();
        }
        if at != w.n && problems.is_empty() {
            problems.push(format!("{}: N = {} but its layers have {at} outputs", w.data, w.n));
        }
    }
    (compared.len(), problems)
}

/// How [`write_prequant`] quantizes.
#[derive(Clone, Copy, Debug)]
pub struct PrequantSpec {
    /// `gptq` or `awq`.
    pub method: &'static str,
    /// GPTQ `checkpoint_format`: `gptq` (v1) or `gptq_v2`.
    pub gptq_format: &'static str,
    pub bits: usize,
    /// `None`: one group per column (`group_size: -1`).
    pub group_size: Option<usize>,
    pub symmetric: bool,
    pub desc_act: bool,
}

/// Writes a pre-quantized checkpoint of the float checkpoint at `src` into `dst` and the float
/// checkpoint of its dequantized weights into `dst/dequantized`. Every projection named in
/// `projections` (a suffix such as `self_attn.q_proj`) is quantized per group by round to
/// nearest from its min/max (symmetric: zero point at mid), with f16 scales; act-order shuffles
/// the rows into groups. The dequantized weight is `scale * (q - zero)` in f32, exactly. GPT-2's
/// Conv1D weights (`[in, out]`) are packed as GPTQ and AWQ pack them, transposed to a Linear
/// layer's `[out, in]` first; their dequantized twin keeps the Conv1D layout.
pub fn write_prequant(src: &Path, dst: &Path, spec: PrequantSpec, projections: &[&str], seed: u64) {
    std::fs::create_dir_all(dst.join("dequantized")).unwrap();
    let mut config: Value = serde_json::from_slice(&std::fs::read(src.join("config.json")).unwrap()).unwrap();
    let conv1d = config["model_type"] == "gpt2";
    for f in std::fs::read_dir(src).unwrap() {
        let p = f.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_file() && name != "model.safetensors" && name != "config.json" && !name.starts_with("reference") {
            std::fs::copy(&p, dst.join(&name)).unwrap();
            std::fs::copy(&p, dst.join("dequantized").join(&name)).unwrap();
        }
    }
    std::fs::write(dst.join("dequantized/config.json"), serde_json::to_string_pretty(&config).unwrap()).unwrap();
    let mut q = serde_json::json!({
        "quant_method": spec.method,
        "bits": spec.bits,
        "group_size": spec.group_size.map_or(-1, |g| g as i64),
    });
    if spec.method == "gptq" {
        q["sym"] = spec.symmetric.into();
        q["desc_act"] = spec.desc_act.into();
        q["checkpoint_format"] = spec.gptq_format.into();
    } else {
        q["version"] = "gemm".into();
        q["zero_point"] = true.into();
    }
    config["quantization_config"] = q;
    std::fs::write(dst.join("config.json"), serde_json::to_string_pretty(&config).unwrap()).unwrap();

    let mut rng = seed.wrapping_mul(2862933555777941757).wrapping_add(3037000493);
    let mut next = move || {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (rng >> 33) as usize
    };
    let tensors = read_st(&src.join("model.safetensors"));
    let mut orders: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut packed: Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    let mut float: Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, (dtype, shape, data)) in &tensors {
        let scope = name.strip_suffix(".weight");
        let quantize = scope.is_some_and(|s| projections.iter().any(|p| s.ends_with(p))) && shape.len() == 2;
        if !quantize {
            packed.push((name.clone(), *dtype, shape.clone(), data.clone()));
            float.push((name.clone(), *dtype, shape.clone(), data.clone()));
            continue;
        }
        let scope = scope.unwrap();
        let (n, k) = if conv1d { (shape[1], shape[0]) } else { (shape[0], shape[1]) };
        let stored = floats(*dtype, data);
        // `[n, k]` row-major, whatever the stored layout.
        let w: Vec<f32> = if conv1d { (0..n * k).map(|i| stored[(i % k) * n + i / k]).collect() } else { stored };
        let gs = spec.group_size.unwrap_or(k);
        let groups = k.div_ceil(gs);
        // Act-order sorts the rows by the Hessian of the layer's input, which layers reading
        // one input share (q/k/v, gate/up): one shuffle per input, as GPTQ writes it.
        let input = scope.replace("k_proj", "q_proj").replace("v_proj", "q_proj").replace("up_proj", "gate_proj");
        let rows = orders
            .entry(input)
            .or_insert_with(|| {
                let mut rows: Vec<usize> = (0..k).collect();
                if spec.desc_act {
                    for i in (1..k).rev() {
                        rows.swap(i, next() % (i + 1));
                    }
                }
                rows
            })
            .clone();
        let mut g_idx = vec![0usize; k];
        for (i, &r) in rows.iter().enumerate() {
            g_idx[r] = i / gs;
        }
        let maxq = (1u32 << spec.bits) - 1;
        let mid = 1u32 << (spec.bits - 1);
        let (mut codes, mut zeros, mut scales) = (vec![0u8; k * n], vec![0u8; groups * n], vec![0f32; groups * n]);
        let mut deq = vec![0f32; n * k];
        for g in 0..groups {
            let members: Vec<usize> = rows[g * gs..((g + 1) * gs).min(k)].to_vec();
            for col in 0..n {
                let vals: Vec<f32> = members.iter().map(|&r| w[col * k + r]).collect();
                let (lo, hi) = vals.iter().fold((0f32, 0f32), |(a, b), &v| (a.min(v), b.max(v)));
                let (scale, zero) = if spec.symmetric {
                    let s = hi.abs().max(lo.abs()) / mid as f32;
                    (half::f16::from_f32(if s > 0.0 { s } else { 1e-3 }).to_f32(), mid)
                } else {
                    let s = half::f16::from_f32(((hi - lo) / maxq as f32).max(1e-3)).to_f32();
                    // v1 cannot store a zero point of 0 (zero - 1 underflows): keep it at 1 or more.
                    (s, ((-lo / s).round() as u32).clamp(1, maxq))
                };
                scales[g * n + col] = scale;
                zeros[g * n + col] = zero as u8;
                for &r in &members {
                    let qv = ((w[col * k + r] / scale).round() + zero as f32).clamp(0.0, maxq as f32) as u8;
                    codes[r * n + col] = qv;
                    deq[col * k + r] = scale * (qv as f32 - zero as f32);
                }
            }
        }
        let bytes = |v: Vec<u32>| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let per = 32 / spec.bits;
        if spec.method == "awq" {
            packed.push((format!("{scope}.qweight"), safetensors::Dtype::I32, vec![k, n / 8], bytes(ir::packed::pack::awq(&codes, k, n))));
            packed.push((format!("{scope}.qzeros"), safetensors::Dtype::I32, vec![groups, n / 8], bytes(ir::packed::pack::awq(&zeros, groups, n))));
        } else {
            let v1 = spec.gptq_format == "gptq";
            packed.push((format!("{scope}.qweight"), safetensors::Dtype::I32, vec![k / per, n], bytes(ir::packed::pack::gptq_qweight(&codes, k, n, spec.bits))));
            packed.push((format!("{scope}.qzeros"), safetensors::Dtype::I32, vec![groups, n / per], bytes(ir::packed::pack::gptq_qzeros(&zeros, groups, n, spec.bits, v1))));
            let gi: Vec<u8> = g_idx.iter().flat_map(|&g| (g as i32).to_le_bytes()).collect();
            packed.push((format!("{scope}.g_idx"), safetensors::Dtype::I32, vec![k], gi));
        }
        let sc: Vec<u8> = scales.iter().flat_map(|s| half::f16::from_f32(*s).to_le_bytes()).collect();
        packed.push((format!("{scope}.scales"), safetensors::Dtype::F16, vec![groups, n], sc));
        let (deq, deq_shape) = if conv1d { ((0..k * n).map(|i| deq[(i % n) * k + i / n]).collect(), vec![k, n]) } else { (deq, vec![n, k]) };
        float.push((name.clone(), safetensors::Dtype::F32, deq_shape, deq.iter().flat_map(|v| v.to_le_bytes()).collect()));
    }
    let write = |path: &Path, list: &[(String, safetensors::Dtype, Vec<usize>, Vec<u8>)]| {
        let views: Vec<(String, safetensors::tensor::TensorView)> =
            list.iter().map(|(n, d, s, b)| (n.clone(), safetensors::tensor::TensorView::new(*d, s.clone(), b).unwrap())).collect();
        std::fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
    };
    write(&dst.join("model.safetensors"), &packed);
    write(&dst.join("dequantized/model.safetensors"), &float);
}
