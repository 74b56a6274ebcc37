//! Issue 6's rules on ONNX Runtime's CPU EP (f32, atol 1e-5): each rule's rewritten graph
//! computes what the graph before it computes, on real built graphs (tiny-llama, tiny-qwen2,
//! tiny-qwen3, tiny-gpt2, tiny-phi3-longrope) or small synthetic graphs. Cases: unpadded
//! prefill and one decode step on each graph's own cache. Lowerings also get a round trip:
//! lower(fuse(g)) against g.

use models::{tasks::causal_lm, BuildOptions, Checkpoint};
use ndarray::{ArrayD, IxDyn};
use std::collections::BTreeMap;
use tailor_tests::*;

const ATOL: f32 = 1e-5;

fn generic(fixture_name: &str) -> ir::Model {
    let ckpt = Checkpoint::open(&fixture(fixture_name)).unwrap();
    causal_lm::build(&ckpt, &BuildOptions::default()).unwrap()
}

fn with_rules(fixture_name: &str, ids: &[&str]) -> (ir::Model, rules::Report) {
    let mut m = generic(fixture_name);
    let report = rules::apply(&mut m, ids, &rules::Options::default()).unwrap();
    (m, report)
}

fn count(m: &ir::Model, op: &str) -> usize {
    m.graph.nodes.iter().filter(|n| n.op == op).count()
}

fn diffs(a: &BTreeMap<String, Feed>, b: &BTreeMap<String, Feed>, case: &str) -> Vec<(String, f32)> {
    a.iter().map(|(name, x)| (format!("{case} {name}"), max_abs_diff(x.f32(), b[name].f32(), None))).collect()
}

/// Prefill + one decode step of `a` and `b` on the fixture's reference prompt; every output.
fn decoder_parity(fixture_name: &str, a: &ir::Model, b: &ir::Model) -> Vec<(String, f32)> {
    let shape = DecoderShape::of(a);
    let reference = Reference::load(&fixture(fixture_name));
    let (_d1, mut s1) = session_for(a);
    let (_d2, mut s2) = session_for(b);
    let ids = reference.get("input_ids").i64();
    let feeds = decoder_feeds(&shape, ids, reference.get("attention_mask").i64(), reference.get("position_ids").i64(), None);
    let (p1, p2) = (run(&mut s1, &feeds), run(&mut s2, &feeds));
    let mut out = diffs(&p1, &p2, "prefill");
    let seq = ids.shape()[1];
    let dec_ids = reference.get("decode_input_ids").i64();
    let dec_mask = ArrayD::from_elem(IxDyn(&[1, seq + 1]), 1i64);
    let dec_pos = ArrayD::from_elem(IxDyn(&[1, 1]), seq as i64);
    let d1 = run(&mut s1, &decoder_feeds(&shape, dec_ids, &dec_mask, &dec_pos, Some(&p1)));
    let d2 = run(&mut s2, &decoder_feeds(&shape, dec_ids, &dec_mask, &dec_pos, Some(&p2)));
    out.extend(diffs(&d1, &d2, "decode"));
    assert!(out.len() >= 2 * (1 + 2 * shape.layers), "every output compared: {out:?}");
    out
}

/// The graph after `before` against the graph after `before` + `rule`; `rule` must fire
/// `fired` times (variants included) and leave `op` in the graph.
fn rule_parity(fixture_name: &str, before: &[&str], rule: &[&str], fired: &[(&str, usize)], op: &str) {
    let (a, _) = with_rules(fixture_name, before);
    let all: Vec<&str> = before.iter().chain(rule).copied().collect();
    let (b, report) = with_rules(fixture_name, &all);
    for (id, n) in fired {
        assert_eq!(report.fired(id), *n, "{id} on {fixture_name}:\n{}", report.text());
    }
    assert!(count(&b, op) > 0, "{op} missing after {all:?}:\n{}", report.text());
    let d = decoder_parity(fixture_name, &a, &b);
    eprintln!("{fixture_name} {rule:?}: {d:?}");
    assert_within(&format!("{fixture_name}: {rule:?}"), &d, ATOL);
}

#[test]
fn pack_qkv_on_llama() {
    rule_parity("tiny-llama", &["fuse.gqa_rotary"], &["fuse.pack_qkv"], &[("fuse.pack_qkv", 2)], "GroupQueryAttention");
    let (m, _) = with_rules("tiny-llama", &["fuse.gqa_rotary", "fuse.pack_qkv"]);
    assert_eq!(count(&m, "MatMul"), 2 * 2 + 2 * 3 + 1, "one q/k/v MatMul per layer, o_proj, mlp x3, lm_head");
    let gqa = m.graph.nodes.iter().find(|n| n.op == "GroupQueryAttention").unwrap();
    assert_eq!((gqa.inputs[1].as_str(), gqa.inputs[2].as_str()), ("", ""), "packed query input");
    assert!(m.graph.initializer("model.layers.0.self_attn.k_proj.weight").is_none(), "old weights dropped");
}

/// lower.unpack_qkv after fuse.pack_qkv on tiny-llama: against the packed graph, and the round
/// trip unpack(pack(g)) against g = gqa_rotary(generic).
#[test]
fn unpack_qkv_on_llama_and_round_trip() {
    rule_parity("tiny-llama", &["fuse.gqa_rotary", "fuse.pack_qkv"], &["lower.unpack_qkv"], &[("lower.unpack_qkv", 2)], "GroupQueryAttention");
    let (g, _) = with_rules("tiny-llama", &["fuse.gqa_rotary"]);
    let (b, report) = with_rules("tiny-llama", &["fuse.gqa_rotary", "fuse.pack_qkv", "lower.unpack_qkv"]);
    assert_eq!(report.fired("fuse.pack_qkv"), 2, "{}", report.text());
    assert_eq!(report.fired("lower.unpack_qkv"), 2, "{}", report.text());
    assert_eq!(count(&b, "MatMul"), count(&g, "MatMul"), "three projections per layer again");
    // The packed weight is cut into sliced initializers (helper slice_weight), not by a Split.
    assert_eq!(count(&b, "Split"), 0, "{}", report.text());
    assert_eq!(constant_shapes(&b, "MatMul", 1), constant_shapes(&g, "MatMul", 1), "the slices have the original weights' shapes");
    assert!(b.graph.nodes.iter().filter(|n| n.op == "GroupQueryAttention").all(|n| n.input(1).is_some() && n.input(2).is_some()), "key/value slots filled");
    let d = decoder_parity("tiny-llama", &g, &b);
    eprintln!("tiny-llama unpack(pack(g)): {d:?}");
    assert_within("tiny-llama: unpack_qkv(pack_qkv(g)) vs g", &d, ATOL);
    // An unpacked GroupQueryAttention is not a candidate: its key slot is present.
    let (_, again) = with_rules("tiny-llama", &["fuse.gqa_rotary", "lower.unpack_qkv"]);
    assert_eq!(again.fired("lower.unpack_qkv"), 0, "{}", again.text());
}

/// The shapes of the initializers that `op` nodes read in input `slot`, sorted.
fn constant_shapes(m: &ir::Model, op: &str, slot: usize) -> Vec<Vec<usize>> {
    let mut v: Vec<Vec<usize>> = m.graph.nodes.iter().filter(|n| n.op == op).filter_map(|n| n.input(slot).and_then(|i| m.graph.initializer(i))).map(|r| r.shape()).collect();
    v.sort();
    v
}

/// lower.unpack_qkv's `.bias` (tiny-qwen2: packed MatMul + Add bias) and `.split` (tiny-qwen3:
/// packed MatMul + Split feeding the per-head q/k norms) after fuse.pack_qkv: against the
/// packed graph, and the round trip unpack(pack(g)) against g = gqa_rotary(generic). Both
/// fire once per layer, leave no Split and give back weights (and biases) of the original
/// shapes.
#[test]
fn unpack_qkv_bias_and_split_round_trips() {
    for (fx, pack, unpack) in [("tiny-qwen2", "fuse.pack_qkv.bias", "lower.unpack_qkv.bias"), ("tiny-qwen3", "fuse.pack_qkv.split", "lower.unpack_qkv.split")] {
        rule_parity(fx, &["fuse.gqa_rotary", "fuse.pack_qkv"], &["lower.unpack_qkv"], &[(unpack, 2), ("lower.unpack_qkv", 0)], "GroupQueryAttention");
        let (g, _) = with_rules(fx, &["fuse.gqa_rotary"]);
        let (b, report) = with_rules(fx, &["fuse.gqa_rotary", "fuse.pack_qkv", "lower.unpack_qkv"]);
        assert_eq!((report.fired(pack), report.fired(unpack)), (2, 2), "{fx}:\n{}", report.text());
        assert_eq!(count(&b, "MatMul"), count(&g, "MatMul"), "{fx}: three projections per layer again");
        assert_eq!(count(&b, "Split"), count(&g, "Split"), "{fx}: the packing's Split is gone");
        assert_eq!(constant_shapes(&b, "MatMul", 1), constant_shapes(&g, "MatMul", 1), "{fx}: weight slices");
        assert_eq!(constant_shapes(&b, "Add", 1), constant_shapes(&g, "Add", 1), "{fx}: bias slices");
        assert!(b.graph.nodes.iter().filter(|n| n.op == "GroupQueryAttention").all(|n| n.input(1).is_some() && n.input(2).is_some()), "{fx}: key/value slots filled");
        let d = decoder_parity(fx, &g, &b);
        eprintln!("{fx} unpack(pack(g)): {d:?}");
        assert_within(&format!("{fx}: {unpack}(pack_qkv(g)) vs g"), &d, ATOL);
    }
}

/// Per GroupQueryAttention (graph order), the bytes of the weight and bias behind its q, k and
/// v slots, each `Add{MatMul(x, W), b}` with W and b initializers.
fn projection_tensors(m: &ir::Model) -> Vec<[(Vec<u8>, Vec<u8>); 3]> {
    let g = &m.graph;
    let init = |v: &str| g.initializer(v).unwrap_or_else(|| panic!("`{v}` is not an initializer")).materialize().unwrap();
    let projection = |v: &str| {
        let add = &g.nodes[g.producer(v).unwrap_or_else(|| panic!("nothing produces `{v}`"))];
        assert_eq!(add.op, "Add", "`{v}`");
        let (mm, b) = if g.initializer(&add.inputs[1]).is_some() { (&add.inputs[0], &add.inputs[1]) } else { (&add.inputs[1], &add.inputs[0]) };
        let mm = &g.nodes[g.producer(mm).unwrap()];
        assert_eq!(mm.op, "MatMul", "`{v}`");
        (init(&mm.inputs[1]), init(b))
    };
    g.nodes.iter().filter(|n| n.op == "GroupQueryAttention").map(|n| [0, 1, 2].map(|i| projection(n.input(i).expect("q/k/v slot filled")))).collect()
}

/// lower.unpack_qkv's `.bias.no_rotary` (tiny-gpt2: the 7-input GroupQueryAttention fuse.gqa
/// emits, packed by fuse.pack_qkv.bias.no_rotary): against the packed graph, and the round trip
/// unpack(pack(g)) against g = gqa(generic). Fires once per layer, the packed weight and bias
/// are gone, and each projection reads a weight and a bias with the original bytes again.
#[test]
fn unpack_qkv_without_rotary_round_trip_on_gpt2() {
    let (pack, unpack) = ("fuse.pack_qkv.bias.no_rotary", "lower.unpack_qkv.bias.no_rotary");
    rule_parity("tiny-gpt2", &["fuse.gqa", "fuse.pack_qkv"], &["lower.unpack_qkv"], &[(unpack, 2), ("lower.unpack_qkv.bias", 0), ("lower.unpack_qkv", 0)], "GroupQueryAttention");
    let (g, _) = with_rules("tiny-gpt2", &["fuse.gqa"]);
    let (b, report) = with_rules("tiny-gpt2", &["fuse.gqa", "fuse.pack_qkv", "lower.unpack_qkv"]);
    assert_eq!((report.fired(pack), report.fired(unpack)), (2, 2), "{}", report.text());
    assert_eq!(count(&b, "MatMul"), count(&g, "MatMul"), "three projections per layer again");
    assert_eq!(count(&b, "Split"), count(&g, "Split"), "no Split from the unpacking");
    for layer in 0..2 {
        for part in ["weight", "bias"] {
            let packed = format!("transformer.h.{layer}.attn.c_attn.q.{part}/packed_weight");
            assert!(b.graph.initializer(&packed).is_none(), "`{packed}` dropped");
        }
    }
    assert_eq!(constant_shapes(&b, "MatMul", 1), constant_shapes(&g, "MatMul", 1), "weight slices");
    assert_eq!(constant_shapes(&b, "Add", 1), constant_shapes(&g, "Add", 1), "bias slices");
    assert!(b.graph.nodes.iter().filter(|n| n.op == "GroupQueryAttention").all(|n| n.inputs.len() == 11), "11 inputs kept (the bias in slot 10)");
    let original = projection_tensors(&g);
    assert_eq!(original.len(), 2, "one GroupQueryAttention per layer");
    assert!(original == projection_tensors(&b), "each q/k/v weight and bias has its original bytes");
    let d = decoder_parity("tiny-gpt2", &g, &b);
    eprintln!("tiny-gpt2 unpack(pack(g)): {d:?}");
    assert_within(&format!("tiny-gpt2: {unpack}(pack_qkv(g)) vs g"), &d, ATOL);
}

#[test]
fn pack_qkv_with_bias_on_qwen2() {
    rule_parity("tiny-qwen2", &["fuse.gqa_rotary"], &["fuse.pack_qkv"], &[("fuse.pack_qkv.bias", 2), ("fuse.pack_qkv", 0)], "GroupQueryAttention");
}

/// GPT-2's 7-input GroupQueryAttention (fuse.gqa, no rotary slots): `.bias.no_rotary` packs
/// the three biased projections into one MatMul + Add feeding the query slot.
#[test]
fn pack_qkv_without_rotary_on_gpt2() {
    rule_parity("tiny-gpt2", &["fuse.gqa"], &["fuse.pack_qkv"], &[("fuse.pack_qkv.bias.no_rotary", 2), ("fuse.pack_qkv.bias", 0), ("fuse.pack_qkv", 0)], "GroupQueryAttention");
    let (m, _) = with_rules("tiny-gpt2", &["fuse.gqa", "fuse.pack_qkv"]);
    let gqa: Vec<_> = m.graph.nodes.iter().filter(|n| n.op == "GroupQueryAttention").collect();
    assert_eq!(gqa.len(), 2);
    assert!(gqa.iter().all(|n| n.inputs.len() == 11 && n.inputs[1].is_empty() && n.inputs[2].is_empty()), "packed query, 11 inputs");
    assert!(m.graph.initializer("transformer.h.0.attn.c_attn.k.weight").is_none(), "old weights dropped");
    assert!(m.graph.initializer("transformer.h.0.attn.c_attn.k.bias").is_none(), "old biases dropped");
}

#[test]
fn pack_qkv_with_per_head_norm_on_qwen3() {
    rule_parity("tiny-qwen3", &["fuse.gqa_rotary"], &["fuse.pack_qkv"], &[("fuse.pack_qkv.split", 2)], "Split");
}

#[test]
fn separate_rope_on_llama_and_round_trip() {
    rule_parity("tiny-llama", &["fuse.gqa_rotary"], &["lower.separate_rope"], &[("lower.separate_rope", 2)], "RotaryEmbedding");
    // lower(fuse(g)) against g itself.
    let g = generic("tiny-llama");
    let (b, report) = with_rules("tiny-llama", &["fuse.gqa_rotary", "lower.separate_rope"]);
    assert_eq!(b.graph.nodes.iter().filter(|n| n.op == "RotaryEmbedding" && n.domain == "com.microsoft").count(), 4, "{}", report.text());
    let d = decoder_parity("tiny-llama", &g, &b);
    assert_within("tiny-llama: separate_rope(gqa_rotary(g)) vs g", &d, ATOL);
}

#[test]
fn rotary_to_contrib_on_llama() {
    rule_parity("tiny-llama", &[], &["lower.rotary_to_contrib"], &[("lower.rotary_to_contrib", 4)], "RotaryEmbedding");
    let (b, _) = with_rules("tiny-llama", &["lower.rotary_to_contrib"]);
    assert!(b.graph.nodes.iter().filter(|n| n.op == "RotaryEmbedding").all(|n| n.domain == "com.microsoft" && n.inputs[1] == "position_ids"));
}

/// RotaryEmbedding -> Gather/Reshape/Split/Mul/Concat on tiny-llama (4 rotations) and
/// tiny-qwen2 (biased projections, a different head layout), against the generic graph.
#[test]
fn decompose_rotary_embedding_on_llama_and_qwen2() {
    for fx in ["tiny-llama", "tiny-qwen2"] {
        rule_parity(fx, &[], &["lower.decompose_rotary_embedding"], &[("lower.decompose_rotary_embedding", 4)], "Split");
        let (b, _) = with_rules(fx, &["lower.decompose_rotary_embedding"]);
        assert_eq!(count(&b, "RotaryEmbedding"), 0, "{fx}: every rotation decomposed");
    }
}

#[test]
fn rms_norm_to_simplified_on_llama_and_qwen3() {
    rule_parity("tiny-llama", &[], &["lower.rms_norm_to_simplified"], &[("lower.rms_norm_to_simplified", 5)], "SimplifiedLayerNormalization");
    // qwen3's per-head q/k norms run on [batch, seq, heads, head_dim].
    rule_parity("tiny-qwen3", &[], &["lower.rms_norm_to_simplified"], &[("lower.rms_norm_to_simplified", 9)], "SimplifiedLayerNormalization");
}

/// A tied head as Gemm(transB) over the flattened rows, against MatMul(x, Transpose(table)).
#[test]
fn tied_head_gemm_on_gpt2_and_qwen2_tied() {
    rule_parity("tiny-gpt2", &[], &["fold.tied_head_gemm"], &[("fold.tied_head_gemm", 1)], "Gemm");
    rule_parity("tiny-qwen2-tied-mqa", &[], &["fold.tied_head_gemm"], &[("fold.tied_head_gemm", 1)], "Gemm");
    // An untied head is transposed at write time: nothing to rewrite.
    let (_, report) = with_rules("tiny-llama", &["fold.tied_head_gemm"]);
    assert_eq!(report.fired("fold.tied_head_gemm"), 0, "{}", report.text());
}

/// fuse.moe (renormalized: tiny-mixtral, tiny-qwen3-moe) and fuse.moe.unnormalized
/// (tiny-qwen2-moe, its shared expert kept beside the MoE node) against the generic dense
/// block: one MoE per sparse layer (a router's Softmax each in the generic graph), nothing of
/// the routing left, prefill and decode within 1e-5.
#[test]
fn moe_on_mixtral_qwen3_moe_and_qwen2_moe() {
    for (fx, variant, other) in [
        ("tiny-mixtral", "fuse.moe", "fuse.moe.unnormalized"),
        ("tiny-qwen3-moe", "fuse.moe", "fuse.moe.unnormalized"),
        ("tiny-qwen2-moe", "fuse.moe.unnormalized", "fuse.moe"),
    ] {
        let sparse = count(&generic(fx), "Softmax");
        assert!(sparse > 0, "{fx}: no router in the generic graph");
        rule_parity(fx, &[], &["fuse.moe"], &[(variant, sparse), (other, 0)], "MoE");
        let (b, _) = with_rules(fx, &["fuse.moe"]);
        assert_eq!((count(&b, "MoE"), count(&b, "Softmax"), count(&b, "Greater")), (sparse, 0, 0), "{fx}");
    }
}

/// fuse.moe.grouped against the generic dense block, on DeepSeek-V3 (sigmoid scores with a
/// correction bias, groups, renormalized, scaled) and DeepSeek-V2 (softmax scores, greedy
/// groups, not renormalized): one MoE per sparse layer (top-k scores per layer in the generic
/// graph), the softmax rules fire nowhere, prefill and decode within 1e-5.
#[test]
fn grouped_moe_on_deepseek_v3_and_v2() {
    for fx in ["tiny-deepseek_v3", "tiny-deepseek_v2"] {
        let sparse = generic(fx).graph.nodes.iter().filter(|n| n.name.ends_with("/top_k_weights")).count();
        assert!(sparse > 0, "{fx}: no routing in the generic graph");
        rule_parity(fx, &[], &["fuse.moe"], &[("fuse.moe.grouped", sparse), ("fuse.moe", 0), ("fuse.moe.unnormalized", 0)], "MoE");
    }
}

#[path = "../../rules/tests/cases/synth.rs"]
mod synth;

/// `a` and `b` (one input `x` [2, 5, 8], one output `y`) on the same deterministic input.
fn synthetic_parity(what: &str, a: &ir::Model, b: &ir::Model) -> f32 {
    synthetic_parity_in(what, a, b, session_for)
}

/// [`synthetic_parity`] on sessions made by `session`.
fn synthetic_parity_in(what: &str, a: &ir::Model, b: &ir::Model, session: fn(&ir::Model) -> (tempfile::TempDir, ort::session::Session)) -> f32 {
    let n = 2 * 5 * synth::HIDDEN;
    let x = ArrayD::from_shape_vec(IxDyn(&[2, 5, synth::HIDDEN]), (0..n).map(|i| ((i * 37) % n) as f32 / n as f32 * 6.0 - 3.0).collect()).unwrap();
    let feeds = vec![("x".to_string(), Feed::F32(x))];
    let (_d1, mut s1) = session(a);
    let (_d2, mut s2) = session(b);
    let d = max_abs_diff(run(&mut s1, &feeds)["y"].f32(), run(&mut s2, &feeds)["y"].f32(), None);
    eprintln!("{what}: {d}");
    assert!(d <= ATOL, "{what}: max abs diff {d} > {ATOL}");
    d
}

/// A CPU session without ONNX Runtime's graph optimizations, so that arithmetic it could fold
/// when loading (a rank the declared types give) runs as written.
fn unoptimized_session(model: &ir::Model) -> (tempfile::TempDir, ort::session::Session) {
    use ort::session::builder::GraphOptimizationLevel;
    let dir = tempfile::tempdir().expect("temp dir");
    ir::save_model(model, dir.path(), "model.onnx").expect("save model");
    let path = dir.path().join("model.onnx");
    let s = ort::session::Session::builder(ort_environment())
        .and_then(|b| b.with_optimization_level(GraphOptimizationLevel::Disable).map_err(Into::into))
        .and_then(|b| b.with_intra_threads(1).map_err(Into::into))
        .and_then(|mut b| b.commit_from_file(&path))
        .unwrap_or_else(|e| panic!("ONNX Runtime cannot load {}: {e}", path.display()));
    (dir, s)
}

fn synthetic_rule(what: &str, g: fn() -> ir::Model, ids: &[&str], fired: &str, op: &str) {
    let a = g();
    let mut b = g();
    let report = rules::apply(&mut b, ids, &rules::Options::default()).unwrap();
    assert_eq!(report.fired(fired), 1, "{what}:\n{}", report.text());
    assert!(count(&b, op) == 1, "{what}: {op} missing");
    synthetic_parity(what, &a, &b);
}

#[test]
fn skip_layer_norm_on_gpt2() {
    rule_parity("tiny-gpt2", &[], &["fuse.skip_layer_norm"], &[("fuse.skip_layer_norm.bias", 4), ("fuse.skip_layer_norm", 1)], "SkipLayerNormalization");
    let (m, _) = with_rules("tiny-gpt2", &["fuse.skip_layer_norm"]);
    assert_eq!(count(&m, "LayerNormalization"), 0);
}

#[test]
fn bias_gelu_on_gpt2_and_erf_synthetic() {
    rule_parity("tiny-gpt2", &[], &["fuse.bias_gelu"], &[("fuse.bias_gelu", 2)], "FastGelu");
    synthetic_rule("BiasGelu", synth::erf_gelu_with_bias, &["fuse.bias_gelu"], "fuse.bias_gelu.erf", "BiasGelu");
}

/// The four decomposed RMS chains (Pow or x*x; Reciprocal-Mul or Div) -> RMSNormalization,
/// and the two layer-norm chains -> LayerNormalization, on synthetic graphs.
#[test]
fn norm_decompositions_synthetic() {
    synthetic_rule("RMS pow/recip", synth::rms_norm_pow, &["fuse.rms_norm"], "fuse.rms_norm", "RMSNormalization");
    synthetic_rule("RMS mul/recip", synth::rms_norm_mul, &["fuse.rms_norm"], "fuse.rms_norm.mul", "RMSNormalization");
    synthetic_rule("RMS pow/div", synth::rms_norm_div, &["fuse.rms_norm"], "fuse.rms_norm.div", "RMSNormalization");
    synthetic_rule("RMS mul/div", synth::rms_norm_div_mul, &["fuse.rms_norm"], "fuse.rms_norm.div.mul", "RMSNormalization");
    synthetic_rule("LN mul", synth::layer_norm_mul, &["fuse.layer_norm"], "fuse.layer_norm", "LayerNormalization");
    synthetic_rule("LN pow", synth::layer_norm_pow, &["fuse.layer_norm"], "fuse.layer_norm.pow", "LayerNormalization");
    for g in [synth::rms_norm_pow(), synth::layer_norm_mul()] {
        let mut b = g.clone();
        rules::apply(&mut b, &["fuse.rms_norm", "fuse.layer_norm"], &rules::Options::default()).unwrap();
        assert_eq!(b.graph.nodes.len(), 1, "the whole chain is replaced: {:?}", b.graph.nodes.iter().map(|n| &n.op).collect::<Vec<_>>());
    }
}

#[test]
fn gelu_decompositions_synthetic() {
    synthetic_rule("erf Gelu", synth::gelu_erf, &["fuse.gelu"], "fuse.gelu", "Gelu");
    synthetic_rule("tanh Gelu", synth::gelu_tanh, &["fuse.gelu"], "fuse.gelu.tanh", "Gelu");
}

#[test]
fn gelu_to_contrib_on_gpt2_and_synthetic() {
    rule_parity("tiny-gpt2", &[], &["lower.gelu_to_contrib"], &[("lower.gelu_to_contrib.tanh", 2)], "FastGelu");
    synthetic_rule("contrib Gelu", synth::erf_gelu, &["lower.gelu_to_contrib"], "lower.gelu_to_contrib", "Gelu");
    // Round trip: the contrib lowering of a fused decomposition computes the decomposition.
    synthetic_rule("fuse.gelu then contrib Gelu", synth::gelu_erf, &["fuse.gelu", "lower.gelu_to_contrib"], "lower.gelu_to_contrib", "Gelu");
}

/// Round trips: decompose(fuse(g)) against g, for both skip norms.
#[test]
fn decompose_skip_layer_norm_round_trips() {
    for (fx, fuse, variant, n) in [
        ("tiny-gpt2", "fuse.skip_layer_norm", "lower.decompose_skip_layer_norm.bias", 4),
        ("tiny-llama", "fuse.skip_rms_norm", "lower.decompose_skip_layer_norm.simplified", 4),
    ] {
        let g = generic(fx);
        let (b, report) = with_rules(fx, &[fuse, "lower.decompose_skip_layer_norm"]);
        assert_eq!(report.fired(variant), n, "{fx}:\n{}", report.text());
        assert_eq!(count(&b, "SkipLayerNormalization") + count(&b, "SkipSimplifiedLayerNormalization"), 0);
        let d = decoder_parity(fx, &g, &b);
        eprintln!("{fx} decompose(fuse): {d:?}");
        assert_within(&format!("{fx}: decompose(fuse(g)) vs g"), &d, ATOL);
    }
    rule_parity("tiny-gpt2", &["fuse.skip_layer_norm"], &["lower.decompose_skip_layer_norm"], &[("lower.decompose_skip_layer_norm", 1)], "LayerNormalization");
}

/// fuse.gqa on a sliding-window graph (RoPE left in place, as dml builds it) takes the
/// `.window` variant with local_window_size = the window width (3 in tiny-mistral-sw).
#[test]
fn gqa_window_on_mistral_sw() {
    rule_parity("tiny-mistral-sw", &[], &["fuse.gqa"], &[("fuse.gqa.window", 2), ("fuse.gqa", 0)], "GroupQueryAttention");
    let (m, _) = with_rules("tiny-mistral-sw", &["fuse.gqa"]);
    assert_eq!(count(&m, "Attention"), 0, "no ONNX Attention left");
    assert_eq!(count(&m, "RotaryEmbedding"), 4, "RoPE stays in place");
    let gqa = m.graph.nodes.iter().find(|n| n.op == "GroupQueryAttention").unwrap();
    assert_eq!(gqa.attr_int("local_window_size"), Some(3));
}

/// lower.if_to_where on Phi-3 LongRoPE's short/long cache choice (a two-output If: one
/// Where per output), alone and followed by the GQA fusions (fuse.gqa_rotary declines the
/// computed caches, `length_free_caches`; fuse.gqa fuses with RotaryEmbedding reading the
/// Wheres), both against the generic graph. The fixture's prompt is longer than
/// original_max_position_embeddings (4), so the long pair is live; the synthetic test below
/// takes both paths.
#[test]
fn if_to_where_on_phi3_longrope() {
    rule_parity("tiny-phi3-longrope", &[], &["lower.if_to_where"], &[("lower.if_to_where", 1)], "Where");
    let (m, _) = with_rules("tiny-phi3-longrope", &["lower.if_to_where"]);
    assert_eq!(count(&m, "If"), 0);
    assert_eq!(count(&m, "Where"), 2, "one Where per If output");
    let g = generic("tiny-phi3-longrope");
    let (b, report) = with_rules("tiny-phi3-longrope", &["lower.if_to_where", "fuse.gqa_rotary", "fuse.gqa"]);
    assert_eq!((report.fired("fuse.gqa_rotary"), report.fired("fuse.gqa")), (0, 2), "{}", report.text());
    let rope = b.graph.nodes.iter().find(|n| n.op == "RotaryEmbedding").unwrap();
    assert!(rope.inputs[1].contains("Where"), "cos cache from the Where: {rope:?}");
    let d = decoder_parity("tiny-phi3-longrope", &g, &b);
    eprintln!("phi3-longrope gqa(if_to_where(g)): {d:?}");
    assert_within("tiny-phi3-longrope: gqa(if_to_where(g)) vs g", &d, ATOL);
}

#[test]
fn if_to_where_synthetic_both_paths() {
    for threshold in [3, 9] {
        let a = synth::if_select(threshold);
        let mut b = synth::if_select(threshold);
        let report = rules::apply(&mut b, &["lower.if_to_where"], &rules::Options::default()).unwrap();
        assert_eq!(report.fired("lower.if_to_where"), 1, "{}", report.text());
        assert_eq!((count(&b, "If"), count(&b, "Where")), (0, 1));
        // The else branch's own initializer was carried over under a fresh name.
        assert!(b.graph.initializers.iter().any(|(n, _)| n.ends_with("/e")), "{:?}", b.graph.initializers.iter().map(|(n, _)| n).collect::<Vec<_>>());
        synthetic_parity(&format!("If -> Where, threshold {threshold}"), &a, &b);
    }
}

/// The fixture's generic graph after `ids`, with webgpu's limits (batch 1, max_context 4096).
fn with_webgpu_limits(fixture_name: &str, ids: &[&str]) -> (ir::Model, rules::Report) {
    let mut m = generic(fixture_name);
    let limits = [("batch".to_string(), 1), ("max_context".to_string(), 4096)].into_iter().collect();
    let report = rules::apply(&mut m, ids, &rules::Options { limits, ..Default::default() }).unwrap();
    (m, report)
}

/// lower.int64_to_int32 on tiny-llama (GroupQueryAttention's seqlens_k computed in int32, in
/// the right-padded form webgpu's lower.gqa_right_padding restores) and on Phi-3 LongRoPE
/// (`.compare`: the long/short condition in int32), against the graph before it; without
/// limits it declines.
#[test]
fn int64_to_int32_on_llama_and_phi3_longrope() {
    for (fx, before, fired) in [
        ("tiny-llama", vec!["fuse.gqa_rotary", "lower.gqa_right_padding"], vec![("lower.int64_to_int32", 1), ("lower.int64_to_int32.gather", 1)]),
        ("tiny-phi3-longrope", vec!["lower.if_to_where", "fuse.gqa_rotary", "fuse.gqa", "lower.gqa_right_padding"], vec![("lower.int64_to_int32", 1), ("lower.int64_to_int32.compare", 1), ("lower.int64_to_int32.gather", 1)]),
    ] {
        let (a, _) = with_rules(fx, &before);
        let all: Vec<&str> = before.iter().copied().chain(["lower.int64_to_int32"]).collect();
        let (b, report) = with_webgpu_limits(fx, &all);
        for (id, n) in &fired {
            assert_eq!(report.fired(id), *n, "{fx}:\n{}", report.text());
            let per_firing = if id.ends_with(".gather") { 1 } else { 2 };
            assert_eq!(report.rule(id).unwrap().casts, per_firing * n, "{per_firing} Cast(s) per firing of {id}:\n{}", report.text());
        }
        let i64_arith = b.graph.nodes.iter().filter(|n| matches!(n.op.as_str(), "ReduceSum" | "Sub" | "Greater")).count();
        assert!(i64_arith > 0);
        let d = decoder_parity(fx, &a, &b);
        eprintln!("{fx} int64_to_int32: {d:?}");
        assert_within(&format!("{fx}: int64_to_int32"), &d, ATOL);
        let (_, unbounded) = with_rules(fx, &all);
        assert_eq!(unbounded.fired("lower.int64_to_int32"), 0, "no limits, no narrowing:\n{}", unbounded.text());
    }
}

/// `lower.int64_to_int32.gather` alone on the generic graphs (nothing fused first): the
/// embedding lookups read `Cast<int32>(input_ids)` (GPT-2 also `Cast<int32>(position_ids)` for
/// its position table), one Cast per firing in the report, the graph's inputs stay int64, and
/// the outputs match the original's on ORT's CPU EP.
#[test]
fn int64_to_int32_gather_on_generic_llama_and_gpt2() {
    for (fx, lookups) in [("tiny-llama", 1), ("tiny-gpt2", 2)] {
        let a = generic(fx);
        let (b, report) = with_webgpu_limits(fx, &["lower.int64_to_int32"]);
        assert_eq!(report.fired("lower.int64_to_int32.gather"), lookups, "{fx}:\n{}", report.text());
        assert_eq!(report.rule("lower.int64_to_int32.gather").unwrap().casts, lookups, "one Cast per lookup:\n{}", report.text());
        let inputs = |m: &ir::Model| m.graph.inputs.iter().map(|v| (v.name.clone(), v.dtype)).collect::<Vec<_>>();
        assert_eq!(inputs(&a), inputs(&b), "{fx}: graph inputs keep their dtypes");
        let graph_input = |v: &str| b.graph.inputs.iter().any(|i| i.name == v);
        let gathers: Vec<_> = b.graph.nodes.iter().filter(|n| n.op == "Gather").collect();
        assert!(gathers.iter().all(|n| !graph_input(&n.inputs[1])), "{fx}: a Gather still reads an int64 graph input");
        let casts = b.graph.nodes.iter().filter(|n| n.op == "Cast" && n.metadata.get("rule").map(String::as_str) == Some("lower.int64_to_int32.gather")).count();
        assert_eq!(casts, lookups, "{fx}: Casts in the graph");
        let d = decoder_parity(fx, &a, &b);
        eprintln!("{fx} int64_to_int32.gather: {d:?}");
        assert_within(&format!("{fx}: int64_to_int32.gather"), &d, ATOL);
    }
}

/// `lower.int64_to_int32.shape` (a graph input's dimension times a constant) and `.rank` (a
/// rank minus a constant) on synthetic graphs, one per input ONNX requires as int64: Reshape's
/// and Expand's shape and ConstantOfShape's input (through a Concat), TopK's k (directly), and
/// ReduceSum's axes. Each time: one firing, 3 Casts in the report (two to int32, one back to
/// int64), the arithmetic reads the int32 Casts, the consumer's input is the Cast back or a
/// Concat of it, and the outputs match the original's on ORT's CPU EP. Without limits `.shape`
/// declines; `.rank`, bounded by the rank the graph declares, does not need them.
#[test]
fn int64_to_int32_casts_back_before_int64_inputs_on_synthetic_graphs() {
    let limits: BTreeMap<String, i64> = [("batch".to_string(), 1), ("max_context".to_string(), 4096)].into_iter().collect();
    // (what, synthetic graph, variant, consumer op, the consumer's int64 input slot)
    type Case = (&'static str, fn() -> ir::Model, &'static str, &'static str, usize);
    let cases: [Case; 5] = [
        ("Reshape shape", synth::scaled_reshape, "lower.int64_to_int32.shape", "Reshape", 1),
        ("Expand shape", synth::scaled_expand, "lower.int64_to_int32.shape", "Expand", 1),
        ("ConstantOfShape input", synth::scaled_constant_of_shape, "lower.int64_to_int32.shape", "ConstantOfShape", 0),
        ("TopK k", synth::scaled_topk, "lower.int64_to_int32.shape", "TopK", 1),
        ("ReduceSum axes", synth::rank_axes, "lower.int64_to_int32.rank", "ReduceSum", 1),
    ];
    for (what, g, id, consumer, slot) in cases {
        let a = g();
        let mut b = g();
        let report = rules::apply(&mut b, &["lower.int64_to_int32"], &rules::Options { limits: limits.clone(), ..Default::default() }).unwrap();
        assert_eq!(report.fired(id), 1, "{what}:\n{}", report.text());
        let casts = report.rule(id).unwrap().casts;
        assert_eq!(casts, 3, "{what}:\n{}", report.text());
        let cast_to = |to: i64| -> Vec<&ir::Node> { b.graph.nodes.iter().filter(|n| n.op == "Cast" && n.attr_int("to") == Some(to)).collect() };
        let back = cast_to(7);
        assert_eq!(back.len(), 1, "{what}: one Cast back to int64");
        let narrowed: Vec<&str> = cast_to(6).iter().map(|n| n.outputs[0].as_str()).collect();
        let arith = b.graph.nodes.iter().find(|n| n.outputs[0] == back[0].inputs[0]).expect("the Cast back reads the arithmetic");
        assert!(arith.inputs.iter().all(|i| narrowed.contains(&i.as_str())), "{what}: {} reads int32 Casts", arith.op);
        let input = b.graph.nodes.iter().find(|n| n.op == consumer).and_then(|n| n.input(slot)).expect("consumer input").to_string();
        let via_concat = b.graph.nodes.iter().any(|n| n.op == "Concat" && n.outputs[0] == input && n.inputs.contains(&back[0].outputs[0]));
        assert!(input == back[0].outputs[0] || via_concat, "{what}: {consumer} input {slot} is `{input}`, not the Cast back");
        let d = synthetic_parity(&format!("int64 -> int32 + Cast back before {what}"), &a, &b);
        let unfolded = synthetic_parity_in(&format!("the same, no ORT graph optimizations, {what}"), &a, &b, unoptimized_session);
        eprintln!("{id} before {what}: {casts} Casts, max diff {d} ({unfolded} unoptimized)");
        let mut c = g();
        let unbounded = rules::apply(&mut c, &["lower.int64_to_int32"], &rules::Options::default()).unwrap();
        let expect = usize::from(id.ends_with(".rank"));
        assert_eq!(unbounded.fired(id), expect, "{what} without limits:\n{}", unbounded.text());
    }
}

/// `lower.if_to_where` on synthetic Ifs with 1, 2, 5 and 6 outputs (each a graph output),
/// taking each branch: one rule for any count (`..?ys` + `for`), one Where per output, no If
/// left, every output equal on ORT's CPU EP.
#[test]
fn if_to_where_multi_output_synthetic() {
    for n in [1, 2, 5, 6] {
        for threshold in [3, 9] {
            let a = synth::if_select_n(threshold, n);
            let mut b = synth::if_select_n(threshold, n);
            let report = rules::apply(&mut b, &["lower.if_to_where"], &rules::Options::default()).unwrap();
            assert_eq!(report.fired("lower.if_to_where"), 1, "{}", report.text());
            assert_eq!((count(&b, "If"), count(&b, "Where")), (0, n), "{}", report.text());
            let m = 2 * 5 * synth::HIDDEN;
            let x = ArrayD::from_shape_vec(IxDyn(&[2, 5, synth::HIDDEN]), (0..m).map(|i| ((i * 37) % m) as f32 / m as f32 * 6.0 - 3.0).collect()).unwrap();
            let feeds = vec![("x".to_string(), Feed::F32(x))];
            let (_d1, mut s1) = session_for(&a);
            let (_d2, mut s2) = session_for(&b);
            let (o1, o2) = (run(&mut s1, &feeds), run(&mut s2, &feeds));
            assert_eq!((o1.len(), o2.len()), (n, n));
            let d = diffs(&o1, &o2, &format!("{n} outputs, threshold {threshold}"));
            eprintln!("lower.if_to_where, {n} outputs, threshold {threshold}: max {}", d.iter().map(|x| x.1).fold(0.0f32, f32::max));
            assert_within("lower.if_to_where", &d, ATOL);
            // The outputs differ from each other, so a Where wired to the wrong output would show.
            for k in 1..n {
                assert!(max_abs_diff(o1[&format!("y{}", k - 1)].f32(), o1[&format!("y{k}")].f32(), None) > 0.1, "y{} and y{k} too close", k - 1);
            }
        }
    }
}

/// fuse.gqa_sink on Flint: its sliding layers rotate in the kernel (fuse.gqa_sink.window), its
/// full layers have no RoPE and fuse without rotary (fuse.gqa_sink.unrotated); then the
/// right-padded form of both, the sinks kept in slot 11 (lower.gqa_right_padding.sink and
/// .sink_no_rotary), against transformers on the right-padded batch. On gpt-oss, whose
/// blocks are rotated, the unrotated rule alone takes the full layer with its RotaryEmbedding
/// left in place, as a table without the rotary forms would.
#[test]
fn gqa_sink_unrotated_on_flint_and_gpt_oss() {
    rule_parity("tiny-flint", &[], &["fuse.gqa_sink"], &[("fuse.gqa_sink.window", 3), ("fuse.gqa_sink.unrotated", 3), ("fuse.gqa_sink", 0)], "GroupQueryAttention");
    let ids = [("lower.gqa_right_padding.sink", 3), ("lower.gqa_right_padding.sink_no_rotary", 3)];
    rule_parity("tiny-flint", &["fuse.gqa_sink"], &["lower.gqa_right_padding"], &ids, "GroupQueryAttention");
    let (m, _) = with_rules("tiny-flint", &["fuse.gqa_sink", "lower.gqa_right_padding"]);
    let gqa: Vec<_> = m.graph.nodes.iter().filter(|n| n.op == "GroupQueryAttention").collect();
    assert!(gqa.iter().all(|n| n.inputs.len() == 12 && !n.inputs[11].is_empty() && n.inputs[10].is_empty()), "the sinks stay, no bias: {:?}", gqa[0].inputs);
    let shape = DecoderShape::of(&m);
    let (_d, mut s) = session_for(&m);
    let diffs = compare_decoder(&mut s, &shape, &Reference::load(&fixture("tiny-flint")), Cases { left_padding: false, right_padding: true });
    assert_within("tiny-flint: right-padded sink form vs transformers", &diffs, 1e-4);
    rule_parity("tiny-gpt-oss", &[], &["fuse.gqa_sink.unrotated"], &[("fuse.gqa_sink.unrotated", 1)], "GroupQueryAttention");
    let (m, _) = with_rules("tiny-gpt-oss", &["fuse.gqa_sink.unrotated"]);
    assert_eq!(count(&m, "RotaryEmbedding"), 4, "q and k still rotate before the kernel");
}

/// lower.gqa_right_padding (webgpu, dml, trt-rtx) turns the any-padding GroupQueryAttention
/// back into the right-padded form: seqlens_k a row sum again, no attention bias. Against the
/// graph before it on the unpadded prefill and decode step, and against transformers on the
/// right-padded batch; every variant (rotary in the kernel: tiny-llama; not: tiny-gpt2; with
/// attention sinks, which stay in slot 11: tiny-gpt-oss).
#[test]
fn gqa_right_padding_on_llama_gpt2_and_gpt_oss() {
    for (fx, before, id) in [
        ("tiny-llama", "fuse.gqa_rotary", "lower.gqa_right_padding"),
        ("tiny-gpt2", "fuse.gqa", "lower.gqa_right_padding.no_rotary"),
        ("tiny-gpt-oss", "fuse.gqa_sink", "lower.gqa_right_padding.sink"),
    ] {
        rule_parity(fx, &[before], &["lower.gqa_right_padding"], &[(id, 2)], "GroupQueryAttention");
        let (m, _) = with_rules(fx, &[before, "lower.gqa_right_padding"]);
        let gqa: Vec<_> = m.graph.nodes.iter().filter(|n| n.op == "GroupQueryAttention").collect();
        let no_bias = |n: &&ir::Node| n.inputs.get(10).is_none_or(|b| b.is_empty());
        assert!(gqa.iter().all(no_bias), "{fx}: no attention bias left: {:?}", gqa[0].inputs);
        let before_sums = count(&with_rules(fx, &[before]).0, "ReduceSum");
        assert_eq!(count(&m, "ReduceSum"), before_sums + 1, "{fx}: seqlens_k is the row sum again, once");
        if id.ends_with(".sink") {
            assert!(gqa.iter().all(|n| n.inputs.len() == 12 && !n.inputs[11].is_empty()), "{fx}: the sinks stay: {:?}", gqa[0].inputs);
        } else {
            assert!(gqa.iter().all(|n| n.inputs.len() <= 9), "{fx}: the 9-input form at most: {:?}", gqa[0].inputs);
        }
        let shape = DecoderShape::of(&m);
        let (_d, mut s) = session_for(&m);
        let diffs = compare_decoder(&mut s, &shape, &Reference::load(&fixture(fx)), Cases { left_padding: false, right_padding: true });
        assert_within(&format!("{fx}: right-padded form vs transformers"), &diffs, 1e-4);
    }
}
