//! Pre-quantized checkpoints (GPTQ, AWQ) are imported with their own integers: the package's
//! MatMulNBits codes, zero points and scales are the checkpoint's (unpacked here by the
//! layouts' definitions, tests/src/prequant.rs), its dequantized weights are the fixture's
//! `dequantized/` weights exactly, and its outputs are the reference's (transformers on the
//! dequantized model) at accuracy level 0, on MatMulNBits (cpu) and on DequantizeLinear +
//! MatMul (default). A requantized weight fails the same comparison.

use builder::{build, BuildRequest, QuantRequest};
use std::path::{Path, PathBuf};
use tailor_tests::prequant::{compare_integers, layers_of, package_weights, write_prequant, PrequantSpec};
use tailor_tests::*;

/// Builds `model` for `ep` (f32) into a fresh folder; `accuracy_level` as `--accuracy-level`.
fn build_pkg(model: &Path, ep: &str, quant: Option<QuantRequest>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("pkg");
    let req = BuildRequest { ep: ep.into(), quant, ..BuildRequest::new(model, &pkg) };
    build(&req, &mut |_| {}).unwrap_or_else(|e| panic!("{} ({ep}): build failed: {e}", model.display()));
    (dir, pkg)
}

/// `--accuracy-level N` alone (a pre-quantized checkpoint takes it without --quant).
fn level(n: i64) -> Option<QuantRequest> {
    Some(QuantRequest { bits: None, accuracy_level: Some(n), ..QuantRequest::new(ep_sets::QuantBits::Int4) })
}

/// A CPU session with ONNX Runtime's DequantizeLinear + MatMul fusion at accuracy level 0
/// (its default, 4, quantizes the activations to int8).
fn session_level0(model: &Path) -> ort::session::Session {
    ort::session::Session::builder(ort_environment())
        .and_then(|b| b.with_intra_threads(1).map_err(Into::into))
        .and_then(|b| b.with_config_entry("session.qdq_matmulnbits_accuracy_level", "0").map_err(Into::into))
        .and_then(|mut b| b.commit_from_file(model))
        .unwrap_or_else(|e| panic!("ONNX Runtime cannot load {}: {e}", model.display()))
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// The float weights of a checkpoint folder's model.safetensors.
fn float_weights(dir: &Path) -> std::collections::BTreeMap<String, Vec<f32>> {
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    st.tensors().into_iter().filter(|(_, v)| v.dtype() == safetensors::Dtype::F32).map(|(n, v)| (n, f32s(v.data()))).collect()
}

/// Every MatMulNBits weight of `pkg`, dequantized by the operator's definition, equals the
/// float checkpoint `dequantized`'s weight bit for bit; returns the layers compared.
fn dequantized_mismatches(pkg: &Path, dequantized: &Path) -> (usize, Vec<String>) {
    let float = float_weights(dequantized);
    let config: serde_json::Value = serde_json::from_slice(&std::fs::read(dequantized.join("config.json")).unwrap()).unwrap();
    // GPT-2's Conv1D weights are stored `[in, out]`, the others `[out, in]`.
    let conv1d = config["model_type"] == "gpt2";
    let mut problems = Vec::new();
    let mut compared = 0;
    for w in package_weights(pkg) {
        let mut at = 0;
        for (scope, rows) in layers_of(&w.data, &config) {
            let want = &float[&format!("{scope}.weight")];
            let outputs = want.len() / w.k;
            let rows = rows.unwrap_or(0..outputs);
            compared += 1;
            let index = |c: usize, r: usize| if conv1d { r * outputs + c } else { c * w.k + r };
            let bad = rows
                .clone()
                .enumerate()
                .flat_map(|(j, c)| (0..w.k).map(move |i| (j, c, i)))
                .filter(|&(j, c, i)| w.value(at + j, i).to_bits() != want[index(c, w.order[i])].to_bits())
                .count();
            if bad > 0 {
                problems.push(format!("{scope} rows {rows:?}: {bad} values differ from dequantized/"));
            }
            at += rows.len();
        }
    }
    (compared, problems)
}

/// The packed layers of the fixture's checkpoint.
fn packed_layers(dir: &Path) -> usize {
    tailor_tests::prequant::checkpoint_layers(dir).len()
}

fn integers_and_weights(name: &str) {
    let dir = fixture(name);
    let (_t, pkg) = build_pkg(&dir, "cpu", level(0));
    let (compared, problems) = compare_integers(&pkg, &dir);
    assert!(problems.is_empty(), "{name}: {problems:#?}");
    assert_eq!(compared, packed_layers(&dir), "{name}: every packed layer is a MatMulNBits weight");
    let (compared, problems) = dequantized_mismatches(&pkg, &dir.join("dequantized"));
    assert!(problems.is_empty() && compared > 0, "{name}: {problems:#?}");
    // The float layers are the checkpoint's, unquantized: the head stays a MatMul.
    let model = ir::load_model(&pkg.join("model.onnx")).unwrap();
    assert!(model.graph.nodes.iter().any(|n| n.op == "MatMul" && n.name.starts_with("lm_head/")), "{name}: lm_head stays float");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(pkg.join("build_report.json")).unwrap()).unwrap();
    let q = &report["parts"][0]["quantization"];
    assert_eq!(q["method"], "imported");
    let source = q["source"]["format"].as_str().unwrap();
    assert!(q["tensors"].as_array().unwrap().iter().all(|t| t["source"] == source && t["max_abs_error"] == 0.0), "{name}: {q}");
    assert!(q["kept_float"].as_array().unwrap().iter().any(|k| k["weight"] == "lm_head.weight"), "{name}: {q}");
}

fn logits(name: &str) {
    let dir = fixture(name);
    let reference = Reference::load(&dir);
    for (ep, form) in [("cpu", "MatMulNBits"), ("default", "DequantizeLinear")] {
        let (_t, pkg) = build_pkg(&dir, ep, level(0));
        let model = ir::load_model(&pkg.join("model.onnx")).unwrap();
        assert!(model.graph.nodes.iter().any(|n| n.op == form), "{name} {ep}: written as {form}");
        let mut s = session_level0(&pkg.join("model.onnx"));
        let diffs = compare_decoder(&mut s, &DecoderShape::of(&model), &reference, Cases::ALL);
        let worst = diffs.iter().map(|(_, d)| *d).fold(0f32, f32::max);
        eprintln!("{name} {ep} accuracy level 0: max abs diff {worst:.3e}");
        assert_within(&format!("{name} {ep}"), &diffs, 2e-5);
    }
}

macro_rules! prequant_tests {
    ($($test:ident => $fixture:literal),* $(,)?) => {
        mod integers { $(#[test] fn $test() { super::integers_and_weights($fixture); })* }
        mod reference_logits { $(#[test] fn $test() { super::logits($fixture); })* }
    };
}

tailor_tests::for_each_prequant!(prequant_tests);

/// The comparison can fail: the same weights requantized from their float (RTN, as `--quant`
/// does to the dequantized checkpoint) are other integers, and the comparisons say so.
#[test]
fn a_requantized_weight_fails_the_comparison() {
    for name in prequant_fixtures() {
        let dir = fixture(name);
        let symmetric = !name.contains("asym") && !name.contains("awq");
        let req = QuantRequest { symmetric, lm_head: Some(ep_sets::QuantChoice::None), embeddings: Some(ep_sets::QuantChoice::None), accuracy_level: Some(0), ..QuantRequest::new(ep_sets::QuantBits::Int4) };
        let (_t, pkg) = build_pkg(&dir.join("dequantized"), "cpu", Some(req));
        let (compared, problems) = compare_integers(&pkg, &dir);
        assert_eq!(compared, packed_layers(&dir), "{name}: the same layers are compared");
        assert!(!problems.is_empty(), "{name}: an RTN requantization must not pass for the checkpoint's integers");
        let (_, problems) = dequantized_mismatches(&pkg, &dir.join("dequantized"));
        assert!(!problems.is_empty(), "{name}: requantized weights are not the dequantized ones exactly");
    }
}

/// `reference.safetensors` sits beside `model.safetensors`: it is not read as weights.
#[test]
fn the_reference_beside_the_weights_is_not_read() {
    for name in prequant_fixtures() {
        let ckpt = models::Checkpoint::open(&fixture(name)).unwrap();
        assert!(ckpt.has("model.layers.0.self_attn.q_proj.weight"), "{name}: the packed layer stands for its weight");
        assert!(!ckpt.tensor_names().any(|t| t == "logits" || t.starts_with("present.")), "{name}: reference tensors are not weights");
    }
}

fn spec(method: &'static str, gptq_format: &'static str, bits: usize, group_size: Option<usize>, symmetric: bool, desc_act: bool) -> PrequantSpec {
    PrequantSpec { method, gptq_format, bits, group_size, symmetric, desc_act }
}

const PROJECTIONS: &[&str] = &["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "qkv_proj", "gate_up_proj", "c_attn", "c_proj", "c_fc"];

/// Layouts the shared fixtures lack, made from float fixtures: act-order (its rows gathered),
/// 8 bits, v2 zeros, one group per column, other group sizes, AWQ of Llama, GPTQ of Qwen2
/// (biases), Phi-3 (fused qkv_proj / gate_up_proj, split by row slices) and GPT-2 (Conv1D
/// layers, packed as Linear ones; the fused c_attn split by row slices). Each package's
/// integers are the checkpoint's and its outputs are those of the float package of the
/// dequantized weights, within 2e-5 at accuracy level 0.
#[test]
fn other_layouts_keep_their_integers_and_match_the_dequantized_model() {
    let cases = [
        ("tiny-llama", spec("gptq", "gptq", 4, Some(32), true, true)),
        ("tiny-llama", spec("gptq", "gptq", 4, Some(16), false, true)),
        ("tiny-llama", spec("gptq", "gptq_v2", 8, Some(32), false, false)),
        ("tiny-llama", spec("gptq", "gptq", 8, None, true, false)),
        ("tiny-llama", spec("awq", "", 4, Some(64), false, false)),
        ("tiny-qwen2", spec("gptq", "gptq_v2", 4, Some(32), false, true)),
        ("tiny-phi3", spec("gptq", "gptq", 4, Some(32), false, false)),
        ("tiny-mistral", spec("gptq", "gptq", 4, None, false, true)),
        ("tiny-gpt2", spec("gptq", "gptq", 4, Some(32), false, true)),
        ("tiny-gpt2", spec("awq", "", 4, Some(32), false, false)),
    ];
    for (i, (base, spec)) in cases.into_iter().enumerate() {
        let what = format!("{base} {spec:?}");
        let src = tempfile::tempdir().unwrap();
        write_prequant(&fixture(base), src.path(), spec, PROJECTIONS, 17 + i as u64);
        for ep in ["cpu", "default"] {
            let (_a, pkg) = build_pkg(src.path(), ep, level(0));
            if ep == "cpu" {
                let (compared, problems) = compare_integers(&pkg, src.path());
                assert!(problems.is_empty(), "{what}: {problems:#?}");
                assert_eq!(compared, packed_layers(src.path()), "{what}");
                let (_, problems) = dequantized_mismatches(&pkg, &src.path().join("dequantized"));
                assert!(problems.is_empty(), "{what}: {problems:#?}");
                let model = ir::load_model(&pkg.join("model.onnx")).unwrap();
                let gathers = model.graph.nodes.iter().filter(|n| n.op == "Gather" && n.name.contains("/act_order/")).count();
                // One group per column has nothing to reorder, act-order or not.
                assert_eq!(gathers > 0, spec.desc_act && spec.group_size.is_some(), "{what}: act-order rows are gathered");
            }
            let (_b, float_pkg) = build_pkg(&src.path().join("dequantized"), ep, None);
            let float_model = ir::load_model(&float_pkg.join("model.onnx")).unwrap();
            let reference = Reference::computed(&mut session(&float_pkg.join("model.onnx")), &DecoderShape::of(&float_model), &Reference::load(&fixture(base)));
            let model = ir::load_model(&pkg.join("model.onnx")).unwrap();
            let mut s = session_level0(&pkg.join("model.onnx"));
            let diffs = compare_decoder(&mut s, &DecoderShape::of(&model), &reference, Cases::ALL);
            assert_within(&format!("{what} {ep}"), &diffs, 2e-5);
        }
    }
}

/// GPTQ's `lm_head: true`: the head is packed too, imported like the projections; asking to
/// quantize it again is refused.
#[test]
fn a_packed_lm_head_is_imported_and_not_requantized() {
    let src = tempfile::tempdir().unwrap();
    let mut with_head = PROJECTIONS.to_vec();
    with_head.push("lm_head");
    write_prequant(&fixture("tiny-llama"), src.path(), spec("gptq", "gptq", 4, Some(32), false, false), &with_head, 3);
    let (_t, pkg) = build_pkg(src.path(), "cpu", level(0));
    let (compared, problems) = compare_integers(&pkg, src.path());
    assert!(problems.is_empty() && compared == packed_layers(src.path()), "{problems:?}");
    let model = ir::load_model(&pkg.join("model.onnx")).unwrap();
    assert!(model.graph.nodes.iter().any(|n| n.op == "MatMulNBits" && n.name.starts_with("lm_head/")), "the packed head is MatMulNBits");
    let out = tempfile::tempdir().unwrap();
    let req = BuildRequest { ep: "cpu".into(), quant: Some(QuantRequest { bits: None, lm_head: Some(ep_sets::QuantChoice::Int8), ..QuantRequest::new(ep_sets::QuantBits::Int4) }), ..BuildRequest::new(src.path(), out.path().join("pkg")) };
    let e = build(&req, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("--quant-lm-head") && e.contains("lm_head.weight") && e.contains("already quantized"), "{e}");
}

/// GPTQ's QuantLinear saves a bias buffer for every layer, zeros when the layer has none: for
/// a bias-free architecture those are listed as unused; a non-zero one is still an error.
#[test]
fn zero_bias_buffers_are_unused_and_a_real_bias_is_not_dropped() {
    let src = tempfile::tempdir().unwrap();
    write_prequant(&fixture("tiny-llama"), src.path(), spec("gptq", "gptq", 4, Some(32), true, false), PROJECTIONS, 5);
    let with_bias = |value: f32, dir: &Path| {
        tailor_tests::checkpoints::rewrite_checkpoint(src.path(), dir, |mut tensors| {
            let scopes: Vec<(String, usize)> = tensors
                .iter()
                .filter_map(|(n, _, s, _)| n.strip_suffix(".scales").map(|scope| (scope.to_string(), s[1])))
                .collect();
            for (scope, n) in scopes {
                tensors.push((format!("{scope}.bias"), safetensors::Dtype::F16, vec![n], half::f16::from_f32(value).to_le_bytes().repeat(n)));
            }
            tensors
        });
    };
    let zeros = tempfile::tempdir().unwrap();
    with_bias(0.0, zeros.path());
    let ckpt = models::Checkpoint::open(zeros.path()).unwrap();
    let unused = ckpt.unused();
    assert_eq!(unused.len(), 14, "{unused:?}");
    assert!(unused.values().all(|why| why.contains("bias buffer")), "{unused:?}");
    let (_t, pkg) = build_pkg(zeros.path(), "cpu", level(0));
    assert!(compare_integers(&pkg, src.path()).1.is_empty());
    let real = tempfile::tempdir().unwrap();
    with_bias(0.5, real.path());
    let out = tempfile::tempdir().unwrap();
    let req = BuildRequest { ep: "cpu".into(), ..BuildRequest::new(real.path(), out.path().join("pkg")) };
    let e = build(&req, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("would be ignored") && e.contains(".bias"), "{e}");
}

/// Every (EP, dtype) the tables list imports each pre-quantized fixture, every packed layer in
/// the table's form (MatMulNBits, or DequantizeLinear on default and trt-rtx), validated against
/// the table; scales are exact in f32 and f16 and rounded in bf16 (the report says by how
/// much). trt-rtx registers DequantizeLinear for int4 data, not uint4: an asymmetric checkpoint
/// is written there in the offset form (its offsets rounded to f16, reported as the error;
/// `trt_rtx_writes_asymmetric_checkpoints_in_the_offset_form` checks the values).
#[test]
fn every_table_imports_them_in_its_form() {
    let sets = ep_sets::EpSets::builtin().unwrap();
    for name in prequant_fixtures() {
        let dir = fixture(name);
        let layers = packed_layers(&dir);
        let symmetric = tailor_tests::prequant::checkpoint_layers(&dir).values().all(|l| l.zeros.iter().all(|&z| z == 1 << (l.bits - 1)));
        for (ep, dtype) in sets.pairs() {
            let table = sets.get(ep).unwrap();
            let Some(plan) = table.quant(ep_sets::QuantBits::Int4) else { continue };
            let out = tempfile::tempdir().unwrap();
            let req = BuildRequest { ep: ep.into(), dtype, ..BuildRequest::new(&dir, out.path().join("pkg")) };
            let what = format!("{name} {ep} {dtype}");
            let report = build(&req, &mut |_| {}).unwrap_or_else(|e| panic!("{what}: {e}"));
            let offsets = ep == "trt-rtx" && !symmetric;
            let model = ir::load_model(&out.path().join("pkg/model.onnx")).unwrap();
            let form = match plan.format {
                ep_sets::QuantFormat::MatmulNbits => "MatMulNBits",
                ep_sets::QuantFormat::DequantizeLinear => "DequantizeLinear",
            };
            assert!(model.graph.nodes.iter().filter(|n| n.op == form).count() >= layers / 3, "{what}: {form}");
            assert!(report.parts[0].quantized.iter().all(|t| t.source != "float"), "{what}: only the packed layers");
            let zero_points = if symmetric { "none" } else if offsets { "offsets" } else { "integers" };
            assert!(report.parts[0].quantized.iter().all(|t| t.zero_points == zero_points), "{what}: zero points written as {zero_points}");
            assert!(model.graph.initializers.iter().all(|(_, r)| r.dtype() != ir::DType::U4) || !offsets, "{what}: no uint4 data on trt-rtx");
            let worst = report.parts[0].quantized.iter().map(|t| t.max_abs_error).fold(0f32, f32::max);
            if offsets {
                // Each offset scale * (8 - zero) is exact in f32 and rounded once to f16: at
                // most half an f16 ulp of 8 scales (these scales are below 1).
                assert!(worst > 0.0 && worst <= 8.0 / 2048.0, "{what}: offsets rounded to f16, {worst}");
            } else if dtype == ir::DType::BF16 {
                assert!(worst > 0.0, "{what}: f16 scales rounded to bf16 are reported");
            } else {
                assert_eq!(worst, 0.0, "{what}: f16 scales are exact in {dtype}");
            }
        }
    }
}

/// trt-rtx's DequantizeLinear takes int4 data, not uint4, so an asymmetric checkpoint (GPTQ
/// with zero points, AWQ) is written in the offset form: each DequantizeLinear reads the
/// checkpoint's codes minus the mid point as int4, its scales unchanged and no zero points,
/// and the MatMul it feeds gets the activation's block sums times `<weight>/quant/offsets`,
/// each the f16 rounding of the checkpoint's scale * (8 - zero) (exact in f32).
#[test]
fn trt_rtx_writes_asymmetric_checkpoints_in_the_offset_form() {
    let mut checked = 0;
    for name in ["tiny-llama-gptq-asym", "tiny-qwen2-awq"] {
        let dir = fixture(name);
        let config: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
        let layers = tailor_tests::prequant::checkpoint_layers(&dir);
        let out = tempfile::tempdir().unwrap();
        let req = BuildRequest { ep: "trt-rtx".into(), dtype: ir::DType::F16, ..BuildRequest::new(&dir, out.path().join("pkg")) };
        build(&req, &mut |_| {}).unwrap_or_else(|e| panic!("{name}: {e}"));
        let model = ir::load_model(&out.path().join("pkg/model.onnx")).unwrap();
        let bytes = |n: &str| model.graph.initializer(n).unwrap_or_else(|| panic!("{name}: no `{n}`")).materialize().unwrap();
        let f16s = |b: Vec<u8>| -> Vec<f32> { b.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect() };
        let dqs: Vec<&ir::Node> = model.graph.nodes.iter().filter(|n| n.op == "DequantizeLinear").collect();
        assert_eq!(dqs.len(), layers.len(), "{name}: one DequantizeLinear per packed layer");
        for dq in dqs {
            assert_eq!(dq.inputs.len(), 2, "{name} {}: no zero point input", dq.name);
            let data = &dq.inputs[0];
            assert_eq!(model.graph.initializer(data).unwrap().dtype(), ir::DType::I4, "{name} {data}");
            let scope = tailor_tests::prequant::layers_of(data, &config).remove(0).0;
            let l = &layers[&scope];
            let weight = data.strip_suffix("/data").unwrap();
            let (codes, scales, offsets) = (bytes(data), f16s(bytes(&dq.inputs[1])), f16s(bytes(&format!("{weight}/offsets"))));
            let block = l.k / (scales.len() / l.n);
            for row in 0..l.k {
                for col in 0..l.n {
                    let i = row * l.n + col;
                    let nibble = (codes[i / 2] >> (4 * (i % 2))) & 0xf;
                    let signed = if nibble >= 8 { i32::from(nibble) - 16 } else { i32::from(nibble) };
                    assert_eq!(signed, i32::from(l.codes[i]) - 8, "{name} {scope} row {row} column {col}");
                    let (g, b) = (l.g_idx[row], row / block);
                    assert_eq!(scales[b * l.n + col], l.scales[g * l.n + col], "{name} {scope} scale of row {row} column {col}");
                    let exact = l.scales[g * l.n + col] * (8.0 - f32::from(l.zeros[g * l.n + col]));
                    assert_eq!(offsets[b * l.n + col], half::f16::from_f32(exact).to_f32(), "{name} {scope} offset of row {row} column {col}");
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "{checked} layers checked");
}

/// Pre-quantized experts keep their integers: on cpu (which fuses MoE and runs QMoE) the
/// per-expert GPTQ layers become com.microsoft.QMoE with the checkpoint's codes, scales and
/// zero points (report source `gptq`, no warning) and the package computes the dequantized
/// model at accuracy level 0; act-order experts (QMoE has no g_idx) and the `default` table's
/// dense experts are written as their exact float dequantization, with the reason and a
/// warning naming them.
#[test]
fn packed_experts_become_qmoe_or_their_dequantization_with_a_warning() {
    let moe = ["q_proj", "k_proj", "v_proj", "o_proj", "w1", "w2", "w3"];
    let cases = [(spec("gptq", "gptq", 4, Some(32), false, false), "cpu", true), (spec("gptq", "gptq", 4, Some(32), false, true), "cpu", false), (spec("gptq", "gptq", 4, Some(32), false, false), "default", false)];
    for (i, (spec, ep, qmoe)) in cases.into_iter().enumerate() {
        let what = format!("tiny-mixtral {spec:?} {ep}");
        let src = tempfile::tempdir().unwrap();
        write_prequant(&fixture("tiny-mixtral"), src.path(), spec, &moe, 9 + i as u64);
        let out = tempfile::tempdir().unwrap();
        let req = BuildRequest { ep: ep.into(), quant: level(0), ..BuildRequest::new(src.path(), out.path().join("pkg")) };
        let report = build(&req, &mut |_| {}).unwrap();
        let pkg = out.path().join("pkg");
        let model = ir::load_model(&pkg.join("model.onnx")).unwrap();
        let qmoe_nodes: Vec<&ir::Node> = model.graph.nodes.iter().filter(|n| n.op == "QMoE").collect();
        let experts: Vec<_> = report.parts[0].quantized.iter().filter(|t| t.role == "experts").collect();
        let warning = report.warnings.iter().find(|w| w.contains("pre-quantized tensor(s) are written as their float dequantization"));
        if qmoe {
            assert_eq!(qmoe_nodes.len(), 2, "{what}: one QMoE per layer");
            for n in &qmoe_nodes {
                assert_eq!((n.attr_int("expert_weight_bits"), n.attr_int("block_size")), (Some(4), Some(32)), "{what}");
                assert!(n.input(11).is_some(), "{what}: asymmetric GPTQ keeps its zero points");
            }
            assert_eq!(experts.len(), 4, "{what}: {experts:?}");
            assert!(experts.iter().all(|t| t.source == "gptq" && t.method == "imported" && t.max_abs_error == 0.0), "{what}: {experts:?}");
            assert!(warning.is_none(), "{what}: {:?}", report.warnings);
        } else {
            assert!(qmoe_nodes.is_empty() && experts.is_empty(), "{what}");
            let warning = warning.unwrap_or_else(|| panic!("{what}: {:?}", report.warnings));
            assert!(warning.contains("experts"), "{what}: {warning}");
        }
        assert!(report.parts[0].quantized.iter().all(|t| t.source == "gptq") && !report.parts[0].quantized.is_empty(), "{what}");
        let (_b, float_pkg) = build_pkg(&src.path().join("dequantized"), ep, None);
        let float_model = ir::load_model(&float_pkg.join("model.onnx")).unwrap();
        let reference = Reference::computed(&mut session(&float_pkg.join("model.onnx")), &DecoderShape::of(&float_model), &Reference::load(&fixture("tiny-mixtral")));
        let mut s = session_level0(&pkg.join("model.onnx"));
        let diffs = compare_decoder(&mut s, &DecoderShape::of(&model), &reference, Cases::ALL);
        assert_within(&what, &diffs, 2e-5);
    }
}
