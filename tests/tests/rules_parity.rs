//! Each fusion rule, applied to the real tiny-llama generic graph, computes the same outputs
//! as the original graph on ONNX Runtime's CPU EP (f32, atol 1e-5): unpadded prefill, a decode
//! step on the prefill's cache and a right-padded batch. A GQA graph cannot express a
//! left-padded prefill (keys are taken as [0, seqlens_k]), so that case is not compared.

use models::{tasks::causal_lm, BuildOptions, Checkpoint};
use ndarray::{ArrayD, IxDyn};
use std::collections::BTreeMap;
use tailor_tests::*;

const ATOL: f32 = 1e-5;

fn generic(name: &str) -> ir::Model {
    let ckpt = Checkpoint::open(&fixture(name)).unwrap();
    causal_lm::build(&ckpt, &BuildOptions::default()).unwrap()
}

fn rewritten(name: &str, ids: &[&str]) -> (ir::Model, rules::Report) {
    let mut m = generic(name);
    let report = rules::apply(&mut m, ids, &rules::Options::default()).unwrap();
    (m, report)
}

/// Max |a - b| over every output, restricted to valid (batch, seq) rows for logits when
/// `mask` is given (padded rows are garbage in both graphs, differently).
fn diff_outputs(a: &BTreeMap<String, Feed>, b: &BTreeMap<String, Feed>, mask: Option<&ArrayD<i64>>) -> Vec<(String, f32)> {
    let mut out = Vec::new();
    for (name, x) in a {
        let y = &b[name];
        if name == "logits" {
            out.push((name.clone(), max_abs_diff(x.f32(), y.f32(), mask)));
        } else if mask.is_none() {
            out.push((name.clone(), max_abs_diff(x.f32(), y.f32(), None)));
        }
    }
    out
}

fn compare(ids: &[&str], expect_op: &str) {
    compare_on("tiny-llama", ids, expect_op);
}

fn compare_on(name: &str, ids: &[&str], expect_op: &str) {
    let original = generic(name);
    let (fused, report) = rewritten(name, ids);
    assert!(fused.graph.nodes.iter().any(|n| n.op == expect_op), "{expect_op} missing after {ids:?}:\n{}", report.text());
    let shape = DecoderShape::of(&original);
    let reference = Reference::load(&fixture(name));
    let (_d1, mut s1) = session_for(&original);
    let (_d2, mut s2) = session_for(&fused);
    let mut diffs = Vec::new();

    // Unpadded prefill.
    let ids_ = reference.get("input_ids").i64();
    let mask = reference.get("attention_mask").i64();
    let pos = reference.get("position_ids").i64();
    let feeds = decoder_feeds(&shape, ids_, mask, pos, None);
    let (p1, p2) = (run(&mut s1, &feeds), run(&mut s2, &feeds));
    diffs.extend(diff_outputs(&p1, &p2, None).into_iter().map(|(n, d)| (format!("prefill {n}"), d)));

    // One decode step on each graph's own cache.
    let seq = ids_.shape()[1];
    let dec_ids = reference.get("decode_input_ids").i64();
    let dec_mask = ArrayD::from_elem(IxDyn(&[1, seq + 1]), 1i64);
    let dec_pos = ArrayD::from_elem(IxDyn(&[1, 1]), seq as i64);
    let d1 = run(&mut s1, &decoder_feeds(&shape, dec_ids, &dec_mask, &dec_pos, Some(&p1)));
    let d2 = run(&mut s2, &decoder_feeds(&shape, dec_ids, &dec_mask, &dec_pos, Some(&p2)));
    diffs.extend(diff_outputs(&d1, &d2, None).into_iter().map(|(n, d)| (format!("decode {n}"), d)));

    // Right-padded batch prefill: logits compared where the mask is 1.
    let rmask = reference.get("rbatch_attention_mask").i64();
    let feeds = decoder_feeds(&shape, reference.get("rbatch_input_ids").i64(), rmask, reference.get("rbatch_position_ids").i64(), None);
    let (r1, r2) = (run(&mut s1, &feeds), run(&mut s2, &feeds));
    diffs.extend(diff_outputs(&r1, &r2, Some(rmask)).into_iter().map(|(n, d)| (format!("right-padded {n}"), d)));

    eprintln!("{ids:?}: {diffs:?}");
    assert!(diffs.len() >= 3 + 2 * shape.layers, "every case compared: {diffs:?}");
    assert_within(&format!("{ids:?} vs generic"), &diffs, ATOL);

    // And against transformers itself, right padding only.
    let theirs = compare_decoder(&mut s2, &shape, &reference, Cases { left_padding: false, right_padding: true });
    assert_within(&format!("{ids:?} vs transformers"), &theirs, 1e-4);
}

#[test]
fn skip_rms_norm_matches_generic_graph() {
    compare(&["fuse.skip_rms_norm"], "SkipSimplifiedLayerNormalization");
}

#[test]
fn gqa_rotary_matches_generic_graph() {
    compare(&["fuse.gqa_rotary"], "GroupQueryAttention");
}

#[test]
fn gqa_matches_generic_graph() {
    compare(&["fuse.gqa"], "GroupQueryAttention");
}

#[test]
fn all_three_together_match_generic_graph() {
    compare(&["fuse.gqa_rotary", "fuse.gqa", "fuse.skip_rms_norm"], "SkipSimplifiedLayerNormalization");
}

/// GPT-2 (no rotary embedding, multi-head attention) takes fuse.gqa.
#[test]
fn gqa_on_gpt2_matches_generic_graph() {
    compare_on("tiny-gpt2", &["fuse.gqa_rotary", "fuse.gqa"], "GroupQueryAttention");
}

/// Phi-3 LongRoPE picks its cos/sin caches with an `If` on the length. fuse.gqa_rotary
/// declines them (`length_free_caches`: rotated at the slots of a padded row, a query rotated
/// with the long tables would meet keys cached with the short ones at other positions than
/// the tokens'), so RotaryEmbedding stays a node on position_ids and fuse.gqa fuses.
#[test]
fn gqa_on_phi3_longrope_matches_generic_graph() {
    let (fused, report) = rewritten("tiny-phi3-longrope", &["fuse.gqa_rotary", "fuse.gqa"]);
    assert_eq!((report.fired("fuse.gqa_rotary"), report.fired("fuse.gqa")), (0, 2), "{}", report.text());
    assert!(report.text().contains("failed length_free_caches x2"), "{}", report.text());
    assert_eq!(fused.graph.nodes.iter().filter(|n| n.op == "RotaryEmbedding").count(), 4);
    compare_on("tiny-phi3-longrope", &["fuse.gqa_rotary", "fuse.gqa"], "GroupQueryAttention");
}

/// Sliding-window attention (Mistral, window 3 in the fixture, shorter than the prompt) takes
/// fuse.gqa_rotary.window, with local_window_size = width - 1.
#[test]
fn gqa_rotary_window_on_mistral_sw_matches_generic_graph() {
    let (fused, report) = rewritten("tiny-mistral-sw", &["fuse.gqa_rotary.window"]);
    assert_eq!(report.fired("fuse.gqa_rotary.window"), 2, "{}", report.text());
    let gqa = fused.graph.nodes.iter().find(|n| n.op == "GroupQueryAttention").unwrap();
    assert_eq!(gqa.attr_int("local_window_size"), Some(3));
    compare_on("tiny-mistral-sw", &["fuse.gqa_rotary.window"], "GroupQueryAttention");
}
