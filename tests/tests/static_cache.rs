//! `--kv-cache static` (docs/generic-graph.md, "Static KV cache"): for every decoder fixture the
//! `default` (and the `cpu`) f32 package with a 64-slot cache, run on ONNX Runtime as onnxruntime-genai feeds it
//! (input_ids, a growing attention_mask, position_ids when the graph has it, caches of 64
//! slots), matches transformers for prefill, the decode step, the short prompt and both padded
//! batches; with rows past the valid length poisoned (1e4) nothing changes; decoding after a
//! left- and a right-padded prefill (left only for the GroupQueryAttention form, which rotates
//! at slots) matches the dynamic `default` package step by step; and the graph has fixed
//! caches of 64, no `If` on the cache path, and per layer two TensorScatter and one Attention
//! (`default`: the standard form) or one GroupQueryAttention on the cache buffers (`cpu`).

use tailor_tests::{assert_within, compare_decoder, decode_after_prefill, fixture, max_abs_diff, session, Cases, DecoderShape, Reference};

const N: usize = 64;

fn build(name: &str, ep: &str, kv_cache: models::KvCache, dir: &std::path::Path) -> (ir::Model, DecoderShape, ort::session::Session) {
    let pkg = dir.join(format!("{ep}-{kv_cache:?}").replace(['{', '}', ' ', ':'], ""));
    let req = builder::BuildRequest { ep: ep.into(), kv_cache, ..builder::BuildRequest::new(fixture(name), &pkg) };
    builder::build(&req, &mut |_| {}).unwrap_or_else(|e| panic!("{name}: {ep} {kv_cache:?} build failed: {e}"));
    let model = ir::load_model(&pkg.join("model.onnx")).unwrap();
    let shape = DecoderShape::of(&model);
    (model, shape, session(&pkg.join("model.onnx")))
}

/// How a table builds the static cache (docs/generic-graph.md, "Static KV cache").
#[derive(Clone, Copy, Debug, PartialEq)]
enum Form {
    /// TensorScatter writes the buffers, a 4-input Attention reads them (`default`).
    Standard,
    /// GroupQueryAttention reads the past buffers and writes the present ones, the same
    /// buffers when genai shares them (`cpu`).
    GroupQuery,
}

/// Every cache [batch, kv_heads, N, head_dim] with N fixed, no `If` but LongRoPE's table
/// choice (its `rotary_emb/longrope/If`, when N exceeds original_max_position_embeddings), and
/// per layer: two TensorScatter writing the past inputs to the present outputs and one
/// 4-input Attention (the standard form), or one GroupQueryAttention reading the past inputs
/// and writing the present outputs and nothing else on the cache (the GroupQueryAttention form).
fn check_structure(name: &str, model: &ir::Model, shape: &DecoderShape, form: Form) {
    let g = &model.graph;
    let scatters: Vec<_> = g.nodes.iter().filter(|n| n.op == "TensorScatter").collect();
    let gqa: Vec<_> = g.nodes.iter().filter(|n| n.op == "GroupQueryAttention").collect();
    let attention: Vec<_> = g.nodes.iter().filter(|n| n.op == "Attention").collect();
    match form {
        Form::Standard => {
            assert_eq!(scatters.len(), 2 * shape.layers, "{name}: two TensorScatter per layer");
            assert_eq!(attention.len(), shape.layers, "{name}: one Attention per layer");
            assert!(attention.iter().all(|n| n.inputs.len() == 4), "{name}: Attention reads the cache as k/v, no past inputs");
            assert!(gqa.is_empty(), "{name}: no GroupQueryAttention in the standard form");
        }
        Form::GroupQuery => {
            assert!(scatters.is_empty() && attention.is_empty(), "{name}: no TensorScatter or Attention left: {} and {}", scatters.len(), attention.len());
            assert_eq!(gqa.len(), shape.layers, "{name}: one GroupQueryAttention per layer");
        }
    }
    for i in 0..shape.layers {
        let [past_k, past_v] = [format!("past_key_values.{i}.key"), format!("past_key_values.{i}.value")];
        let [present_k, present_v] = [format!("present.{i}.key"), format!("present.{i}.value")];
        match form {
            Form::Standard => {
                for (past, present) in [(&past_k, &present_k), (&past_v, &present_v)] {
                    assert!(
                        scatters.iter().any(|n| &n.inputs[0] == past && &n.outputs[0] == present && n.attr_int("axis") == Some(2)),
                        "{name}: {present} is TensorScatter(axis 2) of {past}"
                    );
                }
            }
            Form::GroupQuery => {
                let node = gqa.iter().find(|n| n.inputs.get(3) == Some(&past_k));
                let node = node.unwrap_or_else(|| panic!("{name}: no GroupQueryAttention reads {past_k}"));
                assert_eq!(node.inputs[4], past_v, "{name}: {}", node.name);
                assert_eq!(node.outputs[1..3], [present_k.clone(), present_v.clone()], "{name}: {} writes the present buffers", node.name);
                // Every other reader of the cache would see a buffer written in place.
                let readers = g.nodes.iter().filter(|n| n.inputs.iter().any(|x| *x == past_k || *x == past_v)).count();
                assert_eq!(readers, 1, "{name}: the past buffers of layer {i} have one reader");
            }
        }
        for v in g.inputs.iter().filter(|v| v.name == past_k || v.name == past_v).chain(g.outputs.iter().filter(|v| v.name == present_k || v.name == present_v)) {
            let dims = v.shape.as_ref().unwrap();
            assert_eq!(dims[2], ir::Dim::Fixed(N as i64), "{name}: {} has the fixed length {N}", v.name);
            assert_eq!(dims[1], ir::Dim::Fixed(shape.kv_heads as i64), "{name}: {}", v.name);
            assert_eq!(dims[3], ir::Dim::Fixed(shape.head_dim as i64), "{name}: {}", v.name);
        }
    }
    for n in g.nodes.iter().filter(|n| n.op == "If") {
        assert_eq!(n.name, "rotary_emb/longrope/If", "{name}: an If on the cache path");
    }
}

fn check_static(name: &str, ep: &str, form: Form) {
    let out = tempfile::tempdir().unwrap();
    if tailor_tests::fixtures().get(name).is_some_and(|f| f.has("attention_sinks") || f.has("sinks")) {
        // Attention sinks have no static form: refused by name, nothing written.
        let pkg = out.path().join("pkg");
        let req = builder::BuildRequest { ep: ep.into(), kv_cache: models::KvCache::Static { max_length: N }, ..builder::BuildRequest::new(fixture(name), &pkg) };
        let e = builder::build(&req, &mut |_| {}).expect_err("sinks have no static cache").to_string();
        assert!(e.contains("attention sinks have no static KV cache form"), "{name}: {e}");
        assert!(!pkg.exists(), "{name}: a refused build writes nothing");
        return;
    }
    let (model, mut shape, mut fixed) = build(name, ep, models::KvCache::Static { max_length: N }, out.path());
    assert_eq!(shape.static_len, Some(N), "{name}: caches of {N} slots");
    check_structure(name, &model, &shape, form);
    let reference = Reference::load(&fixture(name));
    let diffs = compare_decoder(&mut fixed, &shape, &reference, Cases::ALL);
    assert!(diffs.iter().any(|(c, _)| c == "rbatch_logits") && diffs.iter().any(|(c, _)| c == "batch_logits"));
    assert_within(&format!("{name} {ep} f32 static"), &diffs, 1e-4);
    // Rows past the valid length hold large finite values (genai zero-fills; NaN would leak
    // through 0 x NaN in any masked softmax): the outputs are unchanged.
    shape.fill = 1e4;
    let diffs = compare_decoder(&mut fixed, &shape, &reference, Cases::ALL);
    assert_within(&format!("{name} {ep} f32 static, poisoned cache"), &diffs, 1e-4);

    let (_, dynamic_shape, mut dynamic) = build(name, "default", models::KvCache::Dynamic, out.path());
    let next = vec![vec![7, 11], vec![8, 12], vec![9, 13]];
    // Decoding after a right-padded prefill: exact in the standard form; the GroupQueryAttention
    // form rotates a new token at its slot (past the pads) where transformers and the dynamic
    // package rotate it at its own position, as the dynamic GroupQueryAttention form does
    // (docs/rule-language.md, "GroupQueryAttention facts"); onnxruntime-genai pads on the left.
    let cases: &[(&str, &str, usize)] = match form {
        Form::Standard => &[("left-padded batch", "batch", 0), ("right-padded batch", "rbatch", 1)],
        Form::GroupQuery => &[("left-padded batch", "batch", 0)],
    };
    for &(case, prefix, first) in cases {
        let (ids, mask) = (reference.get(&format!("{prefix}_input_ids")).i64(), reference.get(&format!("{prefix}_attention_mask")).i64());
        let got = decode_after_prefill(&mut fixed, &shape, ids, mask, &next);
        let want = decode_after_prefill(&mut dynamic, &dynamic_shape, ids, mask, &next);
        // A right-padded prefill's last position is a pad in one row: compare from the first
        // decode step there.
        let diffs: Vec<(String, f32)> = got
            .iter()
            .zip(&want)
            .enumerate()
            .skip(first)
            .map(|(t, (g, w))| (format!("{case} step {t}"), max_abs_diff(g, w, None)))
            .collect();
        assert_eq!(diffs.len(), 4 - first);
        assert_within(&format!("{name} {ep} static vs default dynamic, {case}"), &diffs, 1e-4);
    }
}

macro_rules! static_parity {
    ($($test:ident => $fixture:literal),* $(,)?) => {
        $(#[test] fn $test() { super::check_static($fixture, "default", super::Form::Standard); })*
    };
}

/// One test per decoder of the fixture registry, named `static_parity::<fixture>`.
mod static_parity {
    tailor_tests::for_each_decoder!(static_parity);
}

/// The cpu table's static form: GroupQueryAttention over the fixed buffers (fuse.gqa_static).
macro_rules! cpu_static_parity {
    ($($test:ident => $fixture:literal),* $(,)?) => {
        $(#[test] fn $test() { super::check_static($fixture, "cpu", super::Form::GroupQuery); })*
    };
}

/// One test per decoder of the fixture registry, named `cpu_static_parity::<fixture>`.
mod cpu_static_parity {
    tailor_tests::for_each_decoder!(cpu_static_parity);
}
