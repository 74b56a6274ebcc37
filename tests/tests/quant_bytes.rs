//! ir::quant against ONNX Runtime's own quantizer, byte for byte.
//!
//! For a grid of settings (bits 4/8, symmetric/asymmetric, block 16..256, K a multiple of the
//! block or not, N = 1 or 24, f32 and f16 weights), a deterministic weight with outliers, an
//! all-zero block, a constant column and a negative-only column goes through
//! `onnxruntime.quantization.matmul_nbits_quantizer.MatMulNBitsQuantizer` (run by
//! tests/python/quant_reference.py with the interpreter in TAILOR_PYTHON) and through
//! `ir::quant::quantize`; B, scales and zero points must be the same bytes. Then ONNX Runtime's
//! CPU EP runs our bytes: MatMulNBits gives the quantizer model's output exactly, and
//! DequantizeLinear (blocked) and GatherBlockQuantized on the re-laid-out / shared bytes give
//! exactly our `dequantize`.
//!
//! Without TAILOR_PYTHON, or when the script fails, the test fails and says how to run it.

use half::f16;
use ir::quant::dq::{dq_lengths, to_dequantize_linear, DqOut, DqType};
use ir::quant::{dequantize, quantize, Bits, NBits, NBitsOut, QuantSettings, Rounding, Scale, WeightView};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

const HOW_TO_RUN: &str = "This test compares ir::quant with ONNX Runtime's Python quantizer and needs \
    TAILOR_PYTHON: a Python with tests/python/requirements.txt installed (onnxruntime==1.32.0, onnx, onnx-ir, numpy).\n\
    Run the tests with `scripts/test.sh` (it creates .venv and exports TAILOR_PYTHON=$PWD/.venv/bin/python),\n\
    or: python3 -m venv .venv && .venv/bin/pip install -r tests/python/requirements.txt && \
    TAILOR_PYTHON=$PWD/.venv/bin/python cargo test -p tailor-tests --test quant_bytes";

fn python() -> PathBuf {
    let py = std::env::var_os("TAILOR_PYTHON").unwrap_or_else(|| panic!("TAILOR_PYTHON is not set.\n{HOW_TO_RUN}"));
    let py = PathBuf::from(py);
    assert!(py.is_file(), "TAILOR_PYTHON={} is not a file.\n{HOW_TO_RUN}", py.display());
    py
}

fn script(mode: &str, dir: &Path) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/quant_reference.py");
    let out = Command::new(python())
        .arg(&path)
        .arg(mode)
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}\n{HOW_TO_RUN}", path.display()));
    assert!(
        out.status.success(),
        "{} {mode} failed ({}):\n{}\n{}\n{HOW_TO_RUN}",
        path.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// splitmix64 + Box-Muller: the same weights on every run and machine.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (((z ^ (z >> 31)) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f32 {
        let (u, v) = (self.next(), self.next());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
}

#[derive(Clone, Debug)]
struct Case {
    name: String,
    k: usize,
    n: usize,
    bits: Bits,
    block: usize,
    symmetric: bool,
    f16: bool,
}

impl Case {
    fn settings(&self) -> QuantSettings {
        QuantSettings::new(self.bits, self.block, self.symmetric).unwrap()
    }
}

fn case(k: usize, n: usize, bits: Bits, block: usize, symmetric: bool, f16: bool) -> Case {
    let name = format!(
        "int{}_{}_b{block}_k{k}_n{n}_{}",
        bits.count(),
        if symmetric { "sym" } else { "asym" },
        if f16 { "f16" } else { "f32" }
    );
    Case { name, k, n, bits, block, symmetric, f16 }
}

fn grid() -> Vec<Case> {
    let mut cases = Vec::new();
    for bits in [Bits::Int4, Bits::Int8] {
        for symmetric in [true, false] {
            for block in [16, 32, 64, 128] {
                for k in [64, 80, 256] {
                    for n in [1, 24] {
                        cases.push(case(k, n, bits, block, symmetric, false));
                    }
                }
            }
            // Beyond the required grid: block 256, an odd K (ONNX Runtime's stale padding
            // nibble), and f16 weights with f16 scales (rounded before the reciprocal).
            cases.push(case(300, 24, bits, 256, symmetric, false));
            cases.push(case(37, 3, bits, 16, symmetric, false));
            cases.push(case(17, 2, bits, 16, symmetric, false));
            cases.push(case(80, 24, bits, 32, symmetric, true));
        }
    }
    cases
}

/// The weight of a case, f32 (already rounded to f16 for f16 cases): N(0, 0.05) with every
/// 53rd value x20 (outliers), block 1 of column 0 (or block 0 of column 1) all zero, and when N
/// is large enough column 2 constant, column 3 negative-only and column 4 on rounding ties.
fn weight(c: &Case, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    let (k, n) = (c.k, c.n);
    let mut w: Vec<f32> = (0..k * n)
        .map(|i| {
            let v = rng.normal() * 0.05;
            if i % 53 == 7 { v * 20.0 } else { v }
        })
        .collect();
    let zero_rows = if k > c.block { (0, c.block..(2 * c.block).min(k)) } else { (1.min(n - 1), 0..k.min(c.block)) };
    if k > c.block || n > 1 {
        for r in zero_rows.1 {
            w[r * n + zero_rows.0] = 0.0;
        }
    }
    if n > 4 {
        let (mid, max_q) = (c.bits.mid() as f32, c.bits.max_q() as usize);
        let step = 0.01f32;
        for r in 0..k {
            w[r * n + 2] = 0.37;
            w[r * n + 3] = -w[r * n + 3].abs() - 0.01;
            // Column 4 sits on rounding ties: each block spans -mid..max_q-mid steps of 0.01
            // (so the scale is 0.01 up to f32 rounding, symmetric or not) and every other value
            // is a half step, where division vs reciprocal or half-even vs half-away differ.
            w[r * n + 4] = match r % c.block {
                0 => -mid * step,
                1 => (max_q as f32 - mid) * step,
                i => (((i * 7) % max_q) as f32 - mid + 0.5) * step,
            };
        }
    }
    if c.f16 {
        for v in &mut w {
            *v = f16::from_f32(*v).to_f32();
        }
    }
    w
}

/// Our quantization of a case.
struct Ours {
    b: Vec<u8>,
    scales: Vec<u8>,
    zero_points: Option<Vec<u8>>,
}

fn ours_typed<S: Scale>(c: &Case, w: &[f32], to_bytes: fn(&[S]) -> Vec<u8>) -> Ours {
    let s = c.settings();
    let l = s.layout(c.k).unwrap();
    let mut b = vec![0u8; c.n * l.b_per_column()];
    let mut scales = vec![S::default(); c.n * l.scales_per_column()];
    let mut zp = (!c.symmetric).then(|| vec![0u8; c.n * l.zero_points_per_column()]);
    let view = WeightView::new(w, c.k, c.n, c.n).unwrap();
    quantize(&s, &view, NBitsOut { b: &mut b, scales: &mut scales, zero_points: zp.as_deref_mut() })
        .unwrap_or_else(|e| panic!("{}: {e}", c.name));
    Ours { b, scales: to_bytes(&scales), zero_points: zp }
}

fn ours(c: &Case, w: &[f32]) -> Ours {
    if c.f16 {
        ours_typed::<f16>(c, w, |s| s.iter().flat_map(|x| x.to_le_bytes()).collect())
    } else {
        ours_typed::<f32>(c, w, |s| s.iter().flat_map(|x| x.to_le_bytes()).collect())
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn read_f32(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Where two byte strings of MatMulNBits' layout first differ, said in terms of the tensor
/// (column, block, byte).
fn first_difference(what: &str, ours: &[u8], theirs: &[u8], per_column: usize, per_block: usize) -> Option<String> {
    first_difference_at(what, ours, theirs, |i| format!("column {}, block {}, byte {} of it", i / per_column, (i % per_column) / per_block, i % per_block))
}

/// Where two byte strings first differ; `place` says where a byte index is in the tensor.
fn first_difference_at(what: &str, ours: &[u8], theirs: &[u8], place: impl Fn(usize) -> String) -> Option<String> {
    if ours.len() != theirs.len() {
        return Some(format!("{what}: {} bytes here, {} from ONNX Runtime", ours.len(), theirs.len()));
    }
    let count = ours.iter().zip(theirs).filter(|(a, b)| a != b).count();
    let i = ours.iter().zip(theirs).position(|(a, b)| a != b)?;
    Some(format!("{what}: {count} bytes differ; first at byte {i} ({}): ours {:#04x}, ONNX Runtime {:#04x}", place(i), ours[i], theirs[i]))
}

fn dequantized(c: &Case, q: &Ours, w: &[f32]) -> Vec<f32> {
    assert!(!c.f16);
    let scales: Vec<f32> = q.scales.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    let mut out = vec![0f32; w.len()];
    let nb = NBits { b: &q.b, scales: &scales, zero_points: q.zero_points.as_deref() };
    dequantize(&c.settings(), c.k, c.n, nb, &mut out).unwrap();
    out
}

/// Writes each case's weight and `cases.json` into `d`; returns the weights (f32).
fn write_cases(d: &Path, cases: &[Case]) -> Vec<Vec<f32>> {
    let mut listed = Vec::new();
    let mut weights = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let w = weight(c, 1000 + i as u64);
        let bytes: Vec<u8> = if c.f16 {
            w.iter().flat_map(|x| f16::from_f32(*x).to_le_bytes()).collect()
        } else {
            f32_bytes(&w)
        };
        std::fs::write(d.join(format!("{}.weight.bin", c.name)), bytes).unwrap();
        listed.push(json!({"name": c.name, "k": c.k, "n": c.n, "bits": c.bits.count(), "block_size": c.block,
            "symmetric": c.symmetric, "dtype": if c.f16 { "f16" } else { "f32" }}));
        weights.push(w);
    }
    std::fs::write(d.join("cases.json"), serde_json::to_string(&listed).unwrap()).unwrap();
    weights
}

#[test]
fn quantized_bytes_equal_onnx_runtimes_quantizer() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases = grid();
    let weights = write_cases(d, &cases);
    script("quantize", d);

    let mut failures = Vec::new();
    for (c, w) in cases.iter().zip(&weights) {
        let l = c.settings().layout(c.k).unwrap();
        let q = ours(c, w);
        let read = |role: &str| std::fs::read(d.join(format!("{}.ort.{role}.bin", c.name))).ok();
        let meta: Value = serde_json::from_str(&std::fs::read_to_string(d.join(format!("{}.ort.json", c.name))).unwrap()).unwrap();
        let attrs = &meta["attrs"];
        let expect_attrs = json!({"K": c.k, "N": c.n, "bits": c.bits.count(), "block_size": c.block});
        for key in ["K", "N", "bits", "block_size"] {
            if attrs[key] != expect_attrs[key] {
                failures.push(format!("{}: attribute {key} = {} from ONNX Runtime, expected {}", c.name, attrs[key], expect_attrs[key]));
            }
        }
        if meta["shapes"]["B"] != json!(l.b_shape(c.n)) || meta["shapes"]["scales"] != json!(l.scales_shape(c.n)) {
            failures.push(format!("{}: shapes {} from ONNX Runtime, ours {:?} {:?}", c.name, meta["shapes"], l.b_shape(c.n), l.scales_shape(c.n)));
        }
        let scale_size = if c.f16 { 2 } else { 4 };
        let mut diffs = vec![
            read("B").map_or(Some("B: missing".into()), |t| first_difference("B", &q.b, &t, l.b_per_column(), l.blob_size())),
            read("scales").map_or(Some("scales: missing".into()), |t| {
                first_difference("scales", &q.scales, &t, l.k_blocks() * scale_size, scale_size)
            }),
        ];
        match (&q.zero_points, read("zero_points")) {
            (None, None) => {}
            (Some(z), Some(t)) => {
                if meta["shapes"]["zero_points"] != json!(l.zero_points_shape(c.n).unwrap()) {
                    diffs.push(Some(format!("zero point shape {} from ONNX Runtime", meta["shapes"]["zero_points"])));
                }
                diffs.push(first_difference("zero points", z, &t, l.zero_points_per_column(), 1));
            }
            (ours, theirs) => diffs.push(Some(format!("zero points: ours {:?}, ONNX Runtime's {:?}", ours.is_some(), theirs.is_some()))),
        }
        failures.extend(diffs.into_iter().flatten().map(|m| format!("{}: {m}", c.name)));
    }
    eprintln!("{} cases compared with ONNX Runtime's quantizer, {} differences", cases.len(), failures.len());
    assert!(failures.is_empty(), "ir::quant differs from ONNX Runtime's quantizer:\n{}", failures.join("\n"));

    ort_runs_our_bytes(d, &cases, &weights);
}

/// Our DequantizeLinear form of a case, as the streaming writer makes it: quantized with the
/// QDQ quantizer's rounding, then re-laid out. Returns (x, x_scale bytes, x_zero_point).
fn ours_dq(c: &Case, w: &[f32]) -> (Vec<u8>, Vec<u8>, Option<Vec<u8>>) {
    fn typed<S: Scale>(c: &Case, w: &[f32], to_bytes: fn(&[S]) -> Vec<u8>) -> (Vec<u8>, Vec<u8>, Option<Vec<u8>>) {
        let s = c.settings().with_rounding(Rounding::Qdq);
        let l = s.layout(c.k).unwrap();
        let mut b = vec![0u8; c.n * l.b_per_column()];
        let mut scales = vec![S::default(); c.n * l.scales_per_column()];
        let mut zp = (!c.symmetric).then(|| vec![0u8; c.n * l.zero_points_per_column()]);
        let view = WeightView::new(w, c.k, c.n, c.n).unwrap();
        quantize(&s, &view, NBitsOut { b: &mut b, scales: &mut scales, zero_points: zp.as_deref_mut() }).unwrap();
        let (dl, sl, zl) = dq_lengths(&s, c.k, c.n).unwrap();
        let (mut data, mut dsc, mut dzp) = (vec![0u8; dl], vec![S::default(); sl], zl.map(|n| vec![0u8; n]));
        let nb = NBits { b: &b, scales: &scales, zero_points: zp.as_deref() };
        to_dequantize_linear(&s, c.k, c.n, nb, DqOut { data: &mut data, scales: &mut dsc, zero_points: dzp.as_deref_mut() }).unwrap();
        (data, to_bytes(&dsc), dzp)
    }
    if c.f16 {
        typed::<f16>(c, w, |s| s.iter().flat_map(|x| x.to_le_bytes()).collect())
    } else {
        typed::<f32>(c, w, |s| s.iter().flat_map(|x| x.to_le_bytes()).collect())
    }
}

/// The 4-bit cases of the grid (column 4 on rounding ties, where rounding before or after
/// adding the zero point differs) against `MatMulNBitsQuantizer` in QDQ format: our
/// DequantizeLinear x, x_scale and x_zero_point are its initializers' bytes, with its types
/// (int4 symmetric, uint4 with zero points), shapes and attributes. ONNX Runtime has no 8-bit
/// QDQ quantizer (it refuses QDQ at 8 bits), so 8-bit cases are not here.
#[test]
fn dequantize_linear_bytes_equal_onnx_runtimes_qdq_quantizer() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: Vec<Case> = grid().into_iter().filter(|c| c.bits == Bits::Int4).collect();
    let weights = write_cases(d, &cases);
    script("quantize_qdq", d);
    let mut failures = Vec::new();
    for (c, w) in cases.iter().zip(&weights) {
        let (x, scales, zp) = ours_dq(c, w);
        let read = |role: &str| std::fs::read(d.join(format!("{}.qdq.{role}.bin", c.name))).ok();
        let meta: Value = serde_json::from_str(&std::fs::read_to_string(d.join(format!("{}.qdq.json", c.name))).unwrap()).unwrap();
        let s = c.settings();
        let kb = s.layout(c.k).unwrap().k_blocks();
        let t = DqType::of(&s).onnx_data_type();
        let expect = json!({"attrs": {"axis": 0, "block_size": c.block}, "x": {"dtype": t, "dims": [c.k, c.n]},
            "scale": {"dtype": if c.f16 { 10 } else { 1 }, "dims": [kb, c.n]}});
        for key in ["attrs", "x", "scale"] {
            if meta[key] != expect[key] {
                failures.push(format!("{}: {key} {} from ONNX Runtime, expected {}", c.name, meta[key], expect[key]));
            }
        }
        // Flat [rows, N] tensors packed two 4-bit values per byte: byte i holds elements 2i, 2i+1.
        let n = c.n;
        let packed = move |i: usize| format!("elements [{}, {}] and [{}, {}]", 2 * i / n, 2 * i % n, (2 * i + 1) / n, (2 * i + 1) % n);
        let scale_size = if c.f16 { 2 } else { 4 };
        let mut diffs = vec![
            read("x").map_or(Some("x: missing".into()), |o| first_difference_at("x", &x, &o, packed)),
            read("scale").map_or(Some("x_scale: missing".into()), |o| {
                first_difference_at("x_scale", &scales, &o, |i| format!("block {}, column {}", i / scale_size / n, i / scale_size % n))
            }),
        ];
        match (&zp, read("zero_point")) {
            (None, None) => {}
            (Some(z), Some(o)) => {
                if meta["zero_point"] != json!({"dtype": t, "dims": [kb, c.n]}) {
                    diffs.push(Some(format!("x_zero_point {} from ONNX Runtime", meta["zero_point"])));
                }
                diffs.push(first_difference_at("x_zero_point", z, &o, packed));
            }
            (ours, theirs) => diffs.push(Some(format!("zero points: ours {:?}, ONNX Runtime's {:?}", ours.is_some(), theirs.is_some()))),
        }
        failures.extend(diffs.into_iter().flatten().map(|m| format!("{}: {m}", c.name)));
    }
    eprintln!("{} cases compared with ONNX Runtime's QDQ quantizer, {} differences", cases.len(), failures.len());
    assert!(failures.is_empty(), "ir::quant's DequantizeLinear form differs from ONNX Runtime's QDQ quantizer:\n{}", failures.join("\n"));
}

/// ONNX Runtime's CPU EP on our bytes. MatMulNBits: same output as the quantizer's own model
/// (equality of the bytes implies it; this checks the bytes are read as we think), and equal
/// to A x dequantize(W) up to f32 summation order. DequantizeLinear (blocked, axis 0) on our
/// re-laid-out bytes and GatherBlockQuantized on B as it is: exactly our dequantize.
fn ort_runs_our_bytes(d: &Path, cases: &[Case], weights: &[Vec<f32>]) {
    let find = |k: usize, n: usize, bits: Bits, block: usize, sym: bool| {
        let i = cases
            .iter()
            .position(|c| (c.k, c.n, c.bits, c.block, c.symmetric, c.f16) == (k, n, bits, block, sym, false))
            .unwrap();
        (&cases[i], &weights[i])
    };
    let mut jobs = Vec::new();
    let mut expect: Vec<(String, Vec<f32>, f32)> = Vec::new();
    let write = |name: &str, bytes: &[u8]| std::fs::write(d.join(name), bytes).unwrap();

    // MatMulNBits, int4 asymmetric, K not a multiple of the block.
    let (c, w) = find(80, 24, Bits::Int4, 32, false);
    let q = ours(c, w);
    let mut rng = Rng(99);
    let a: Vec<f32> = (0..c.k).map(|_| rng.normal()).collect();
    write("a.bin", &f32_bytes(&a));
    let l = c.settings().layout(c.k).unwrap();
    write("ours.B.bin", &q.b);
    write("ours.scales.bin", &q.scales);
    write("ours.zp.bin", q.zero_points.as_ref().unwrap());
    jobs.push(json!({"name": "reference", "kind": "quantizer_model", "model": format!("{}.ort.onnx", c.name),
        "input_file": "a.bin", "input_dims": [1, c.k]}));
    jobs.push(json!({"name": "ours_matmulnbits", "kind": "matmulnbits", "input_file": "a.bin", "input_dims": [1, c.k],
        "inputs": ["B", "scales", "zp"],
        "attrs": {"K": c.k, "N": c.n, "bits": 4, "block_size": c.block},
        "initializers": [
            {"name": "B", "file": "ours.B.bin", "dtype": 2, "dims": l.b_shape(c.n)},
            {"name": "scales", "file": "ours.scales.bin", "dtype": 1, "dims": l.scales_shape(c.n)},
            {"name": "zp", "file": "ours.zp.bin", "dtype": 2, "dims": l.zero_points_shape(c.n).unwrap()}]}));
    let deq = dequantized(c, &q, w);
    let matmul: Vec<f32> = (0..c.n).map(|j| (0..c.k).map(|r| a[r] * deq[r * c.n + j]).sum()).collect();
    expect.push(("ours_matmulnbits".into(), matmul, 1e-4));

    // DequantizeLinear, blocked on axis 0 of [K, N], for every bits x symmetry, K = 80.
    write("one.bin", &f32_bytes(&[0.0]));
    for (bits, sym) in [(Bits::Int4, true), (Bits::Int4, false), (Bits::Int8, true), (Bits::Int8, false)] {
        let (c, w) = find(80, 24, bits, 16, sym);
        let s = c.settings();
        let q = ours(c, w);
        let scales: Vec<f32> = q.scales.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        let (dl, sl, zl) = dq_lengths(&s, c.k, c.n).unwrap();
        let (mut data, mut dsc, mut dzp) = (vec![0u8; dl], vec![0f32; sl], zl.map(|n| vec![0u8; n]));
        let nb = NBits { b: &q.b, scales: &scales, zero_points: q.zero_points.as_deref() };
        to_dequantize_linear(&s, c.k, c.n, nb, DqOut { data: &mut data, scales: &mut dsc, zero_points: dzp.as_deref_mut() }).unwrap();
        let name = format!("dq_{}", c.name);
        let t = DqType::of(&s).onnx_data_type();
        let kb = s.layout(c.k).unwrap().k_blocks();
        write(&format!("{name}.x.bin"), &data);
        write(&format!("{name}.s.bin"), &f32_bytes(&dsc));
        let mut inits = vec![
            json!({"name": "x", "file": format!("{name}.x.bin"), "dtype": t, "dims": [c.k, c.n]}),
            json!({"name": "s", "file": format!("{name}.s.bin"), "dtype": 1, "dims": [kb, c.n]}),
        ];
        let mut inputs = vec!["x", "s"];
        if let Some(z) = &dzp {
            write(&format!("{name}.z.bin"), z);
            inits.push(json!({"name": "z", "file": format!("{name}.z.bin"), "dtype": t, "dims": [kb, c.n]}));
            inputs.push("z");
        }
        jobs.push(json!({"name": name, "kind": "dequantize_linear", "input_file": "one.bin", "input_dims": [1],
            "inputs": inputs, "attrs": {"axis": 0, "block_size": c.block}, "initializers": inits}));
        expect.push((name, dequantized(c, &q, w), 0.0));
    }

    // GatherBlockQuantized on B as MatMulNBits stores it, read as a [N, K] table (a tied
    // embedding): uint8 data with `bits`, K a multiple of the block.
    for (bits, sym) in [(Bits::Int4, true), (Bits::Int4, false), (Bits::Int8, true), (Bits::Int8, false)] {
        let (c, w) = find(64, 24, bits, 32, sym);
        let l = c.settings().layout(c.k).unwrap();
        let q = ours(c, w);
        let name = format!("gbq_{}", c.name);
        write(&format!("{name}.B.bin"), &q.b);
        write(&format!("{name}.s.bin"), &q.scales);
        let mut inits = vec![
            json!({"name": "data", "file": format!("{name}.B.bin"), "dtype": 2, "dims": [c.n, l.b_per_column()]}),
            json!({"name": "s", "file": format!("{name}.s.bin"), "dtype": 1, "dims": l.scales_shape(c.n)}),
        ];
        let mut inputs = vec!["data", "s"];
        if let Some(z) = &q.zero_points {
            write(&format!("{name}.z.bin"), z);
            inits.push(json!({"name": "z", "file": format!("{name}.z.bin"), "dtype": 2, "dims": l.zero_points_shape(c.n).unwrap()}));
            inputs.push("z");
        }
        let rows: Vec<f32> = (0..c.n).rev().map(|i| i as f32).collect();
        write(&format!("{name}.idx.bin"), &f32_bytes(&rows));
        jobs.push(json!({"name": name, "kind": "gather_block_quantized", "input_file": format!("{name}.idx.bin"),
            "input_dims": [c.n], "inputs": inputs,
            "attrs": {"gather_axis": 0, "quantize_axis": 1, "block_size": c.block, "bits": bits.count()},
            "initializers": inits}));
        let deq = dequantized(c, &q, w);
        let gathered: Vec<f32> = rows.iter().flat_map(|&j| (0..c.k).map(move |r| (r, j as usize))).map(|(r, j)| deq[r * c.n + j]).collect();
        expect.push((name, gathered, 0.0));
    }

    std::fs::write(d.join("run.json"), serde_json::to_string(&jobs).unwrap()).unwrap();
    script("run", d);

    let reference = read_f32(&d.join("reference.out.bin"));
    let ours_mm = read_f32(&d.join("ours_matmulnbits.out.bin"));
    assert_eq!(
        ours_mm.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        reference.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        "MatMulNBits on our bytes differs from the quantizer's model"
    );
    for (name, want, tol) in expect {
        let got = read_f32(&d.join(format!("{name}.out.bin")));
        assert_eq!(got.len(), want.len(), "{name}: {} values from ONNX Runtime, {} expected", got.len(), want.len());
        let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst <= tol, "{name}: ONNX Runtime differs from our dequantize by {worst:e} (allowed {tol:e})");
        eprintln!("{name}: ONNX Runtime vs ir::quant max diff {worst:e} over {} values", got.len());
    }
}
