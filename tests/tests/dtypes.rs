//! Half-precision builds. f16 builds run on ONNX Runtime's CPU EP (through an f32 interface,
//! see `tailor_tests::f16`) and stay within atol 5e-2 of the float32 transformers reference.
//! bf16 does not run on the CPU EP, so bf16 builds are checked structurally: every float
//! initializer, graph input/output, value_info, subgraph output and float Cast target is bf16,
//! and a bf16 source written to a bf16 target keeps its bytes exactly.

use builder::{build, BuildRequest};
use ir::{AttrValue, DType, Graph, Recipe};
use std::path::Path;
use tailor_tests::checkpoints::convert_checkpoint;
use tailor_tests::f16::f32_interface;
use tailor_tests::*;

fn build_model(model_dir: &Path, out: &Path, dtype: DType) -> ir::Model {
    let mut req = BuildRequest::new(model_dir, out);
    req.dtype = dtype;
    build(&req, &mut |_| {}).unwrap_or_else(|e| panic!("{}: {dtype} build failed: {e}", model_dir.display()));
    ir::load_model(&out.join("model.onnx")).unwrap()
}

/// Runs the reference cases on an f16 package and returns the diffs against the f32 reference.
fn f16_diffs(model_dir: &Path, reference: &Path) -> Vec<(String, f32)> {
    let out = tempfile::tempdir().unwrap();
    let model = build_model(model_dir, &out.path().join("pkg"), DType::F16);
    assert_structure(&model.graph, DType::F16, "f16 build");
    let wrapped = f32_interface(&model);
    let shape = DecoderShape::of(&wrapped);
    let (_dir, mut s) = session_for(&wrapped);
    compare_decoder(&mut s, &shape, &Reference::load(reference), Cases::ALL)
}

/// The reference's f16 tolerance. tiny-phi3-longrope meets it because the `default` f16 plan
/// rotates in f32 (`lower.rotary_f32`): with ONNX Runtime's f16 CPU RotaryEmbedding one position
/// of its padded batches (long factors, cos/sin scaled by sqrt(3)) was 6.3e-2 off.
const F16_ATOL: f32 = 5e-2;

/// Fixtures whose left/right-padded batch transformers itself cannot run within [`F16_ATOL`] in
/// float16, with the bound their batch cases are held to instead (twice transformers' own f16
/// error there) and the measurement. Every other case of theirs keeps [`F16_ATOL`].
const F16_BATCH_BOUNDS: &[(&str, f32, &str)] = &[(
    "tiny-gpt-oss",
    0.14,
    "transformers 5.23 in float16 (eager) is 6.9e-2 off this reference at the unpadded row's first \
     token (measured once with the reference venv; 2.3e-2 on the prompt): a token that attends \
     only to itself and the sink, after two clamped-SwiGLU layers; this build is 9.5e-2 there",
)];

/// Fixtures that transformers itself cannot run within [`F16_ATOL`] of their f32 reference in
/// float16 on every case, with the bound all their cases are held to instead (twice
/// transformers' own f16 error, `tolerance.float16.transformers_float16_err` of their
/// reference.json) and the measurement. Every other fixture keeps [`F16_ATOL`].
const F16_FIXTURE_BOUNDS: &[(&str, f32, &str)] = &[
    (
        "tiny-deepseek_v3-lite",
        0.129,
        "transformers 5.25 in float16 is 6.45e-2 off this reference (its unnormalized routing times 1.5 over two shared experts' width); this build is 6.6e-2",
    ),
    (
        "tiny-mistral4",
        0.0622,
        "transformers 5.25 in float16 is 3.1e-2 off this reference (its queries grow by up to 1.17x with position); this build is 5.7e-2, 1.85x that, where the order of the f16 scale and rotation differs (before RoPE here, after it in transformers); not analysed further",
    ),
    (
        "tiny-gpt_neo",
        0.0748,
        "transformers 5.25 in float16 is 3.74e-2 off this reference: GPT-Neo never scales q.k by 1/sqrt(head_dim), so its scores are 4x those of a scaled model of these heads (16 wide) and their f16 rounding 4x larger; this build is 5.4e-2 (the last layer's values, then the logits), 1.43x transformers'",
    ),
];

/// A fixture's f16 bound: [`F16_ATOL`], or its [`F16_FIXTURE_BOUNDS`] entry.
fn f16_atol(name: &str) -> f32 {
    F16_FIXTURE_BOUNDS.iter().find(|(n, _, _)| *n == name).map_or(F16_ATOL, |(_, b, _)| *b)
}

#[test]
fn f16_builds_match_the_f32_reference_within_5e_2() {
    let mut failures = Vec::new();
    for name in decoder_fixtures() {
        let diffs = f16_diffs(&fixture(name), &fixture(name));
        let worst = diffs.iter().map(|(_, d)| *d).fold(0f32, f32::max);
        eprintln!("{name} default f16: max abs diff {worst:.3e}");
        let batch_bound = F16_BATCH_BOUNDS.iter().find(|(n, _, _)| *n == name).map(|(_, b, _)| *b);
        let atol = f16_atol(name);
        let bound = |case: &str| match batch_bound {
            Some(b) if case.contains("batch") => b,
            _ => atol,
        };
        if diffs.iter().any(|(case, d)| d.is_nan() || *d > bound(case)) {
            failures.push(format!("{name}: {diffs:?}"));
        }
    }
    assert!(failures.is_empty(), "outside the f16 tolerance:\n{}", failures.join("\n"));
}

/// An f16 checkpoint built as f16 is the same model as the f32 checkpoint built as f16 (one
/// rounding either way), so it meets the same tolerance.
#[test]
fn f16_source_to_f16_target_matches_the_reference() {
    let src = tempfile::tempdir().unwrap();
    convert_checkpoint(&fixture("tiny-qwen2"), src.path(), DType::F16);
    let diffs = f16_diffs(src.path(), &fixture("tiny-qwen2"));
    assert_within("tiny-qwen2 f16 source, f16 build", &diffs, 5e-2);
}

/// A bf16 checkpoint can be built as f16 (bf16 -> f32 -> f16, exact then one rounding); its
/// weights carry bf16's 8-bit mantissa, so only the structure and finite outputs are checked.
#[test]
fn bf16_source_to_f16_target_runs() {
    let src = tempfile::tempdir().unwrap();
    convert_checkpoint(&fixture("tiny-phi3"), src.path(), DType::BF16);
    let diffs = f16_diffs(src.path(), &fixture("tiny-phi3"));
    assert!(diffs.iter().all(|(_, d)| d.is_finite()), "{diffs:?}");
}

/// Asserts every float-typed thing in `g` (recursively) is `dtype`.
fn assert_structure(g: &Graph, dtype: DType, what: &str) {
    let float = |d: DType| d.is_float();
    for v in g.inputs.iter().chain(&g.outputs).chain(&g.value_info) {
        if float(v.dtype) {
            assert_eq!(v.dtype, dtype, "{what}: value `{}` is {}", v.name, v.dtype);
        }
    }
    // DeepSeek's routing keeps its router weight, correction bias and scaling factor in f32
    // (as transformers does), and its top-k constants (one form for fuse.moe.grouped in every
    // dtype): an f32 initializer is allowed where only routing nodes
    // (`<block>/routing_f32/...`, models/src/components/moe.rs) read it.
    // ALiBi's bias is computed in f32 and cast, as transformers computes it
    // (`<mask>/alibi_f32/...`, models/src/components/alibi.rs).
    let f32_island = |node: &str| node.contains("/routing_f32/") || node.contains("/alibi_f32/");
    let f32_island_only = |name: &str| {
        let readers: Vec<&ir::Node> = g.nodes.iter().filter(|n| n.inputs.iter().any(|i| i == name)).collect();
        !readers.is_empty() && readers.iter().all(|n| f32_island(&n.name))
    };
    for (name, r) in &g.initializers {
        if float(r.dtype()) && !(r.dtype() == DType::F32 && f32_island_only(name)) {
            assert_eq!(r.dtype(), dtype, "{what}: initializer `{name}` is {}", r.dtype());
        }
    }
    for n in &g.nodes {
        // The one deliberate widening: `lower.rotary_f32` rotates f16 in f32 (its nodes say so).
        let widened_rotary = n.metadata.get("rule").is_some_and(|r| r == "lower.rotary_f32") && dtype == DType::F16;
        // And the MoE routing, in f32 as transformers routes (models/src/components/moe.rs),
        // and ALiBi's bias.
        let widened_routing = f32_island(&n.name);
        if n.op == "Cast" && !widened_rotary && !widened_routing {
            let to = n.attr_int("to").and_then(|t| DType::from_onnx(t as i32)).expect("Cast has a known `to`");
            if float(to) {
                assert_eq!(to, dtype, "{what}: Cast `{}` targets {to}", n.name);
            }
        }
        for a in &n.attrs {
            if let AttrValue::Tensor(r) = &a.value {
                if float(r.dtype()) {
                    assert_eq!(r.dtype(), dtype, "{what}: attribute tensor of `{}` is {}", n.name, r.dtype());
                }
            }
        }
        for sub in n.subgraphs() {
            assert_structure(sub, dtype, what);
        }
    }
}

#[test]
fn bf16_builds_are_bf16_throughout() {
    for name in decoder_fixtures() {
        let out = tempfile::tempdir().unwrap();
        let model = build_model(&fixture(name), &out.path().join("pkg"), DType::BF16);
        assert_structure(&model.graph, DType::BF16, &format!("{name} bf16"));
    }
    // From an f16 source too.
    let src = tempfile::tempdir().unwrap();
    convert_checkpoint(&fixture("tiny-qwen3"), src.path(), DType::F16);
    let out = tempfile::tempdir().unwrap();
    let model = build_model(src.path(), &out.path().join("pkg"), DType::BF16);
    assert_structure(&model.graph, DType::BF16, "tiny-qwen3 f16 source, bf16 build");
}

/// Computes what an initializer must hold from the raw source bytes, independently of
/// `Recipe::materialize`: only copies, 2-D transposes and slices are allowed, never a cast.
fn expected_bytes(r: &Recipe) -> (Vec<u8>, Vec<usize>) {
    match r {
        Recipe::Source(t) => {
            let all = std::fs::read(&t.file.path).unwrap();
            (all[t.offset..t.offset + t.len].to_vec(), t.shape.clone())
        }
        Recipe::Transpose { input, perm } if perm == &vec![1, 0] => {
            let (bytes, s) = expected_bytes(input);
            let mut out = Vec::with_capacity(bytes.len());
            for c in 0..s[1] {
                for row in 0..s[0] {
                    let at = (row * s[1] + c) * 2;
                    out.extend_from_slice(&bytes[at..at + 2]);
                }
            }
            (out, vec![s[1], s[0]])
        }
        Recipe::Slice { input, axis, start, end } => {
            let (bytes, s) = expected_bytes(input);
            let inner: usize = s[axis + 1..].iter().product::<usize>() * 2;
            let outer: usize = s[..*axis].iter().product();
            let row = s[*axis] * inner;
            let mut out = Vec::new();
            for o in 0..outer {
                out.extend_from_slice(&bytes[o * row + start * inner..o * row + end * inner]);
            }
            let mut shape = s.clone();
            shape[*axis] = end - start;
            (out, shape)
        }
        other => panic!("a bf16 -> bf16 weight went through {}", other.describe()),
    }
}

#[test]
fn bf16_source_to_bf16_target_is_byte_identical() {
    // phi3 (fused slices, no bias) and gpt2 (Conv1D layout, biases, LayerNorm, tied head).
    for name in ["tiny-phi3", "tiny-gpt2", "tiny-qwen2"] {
        let src = tempfile::tempdir().unwrap();
        convert_checkpoint(&fixture(name), src.path(), DType::BF16);
        let ckpt = models::Checkpoint::open(src.path()).unwrap();
        let built = models::tasks::causal_lm::build(&ckpt, &models::BuildOptions { dtype: DType::BF16, ..Default::default() }).unwrap();
        let out = tempfile::tempdir().unwrap();
        let pkg = out.path().join("pkg");
        let saved = build_model(src.path(), &pkg, DType::BF16);
        assert_structure(&saved.graph, DType::BF16, &format!("{name} bf16 from bf16"));
        let mut checked = 0;
        for (init, recipe) in &built.graph.initializers {
            if recipe.sources().is_empty() {
                continue;
            }
            let (expected, shape) = expected_bytes(recipe);
            let stored = saved.graph.initializer(init).unwrap_or_else(|| panic!("{name}: `{init}` not saved"));
            assert_eq!(stored.shape(), shape, "{name}: `{init}` shape");
            assert!(stored.materialize().unwrap() == expected, "{name}: `{init}` bytes differ from the bf16 source");
            checked += 1;
        }
        assert!(checked >= ckpt.tensor_names().count(), "{name}: only {checked} weights checked");
    }
}
