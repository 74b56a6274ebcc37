//! `--text-only`: the language model of a vision-language checkpoint built alone, a decoder
//! package on `input_ids`. Against transformers' text path of each vision-language fixture:
//! tiny-mistral3 (a Pixtral checkpoint whose tower this tool does not build) on every reference
//! case, and the text prompts of the fixtures whose full packages are built (their multimodal
//! RoPE sections reduce to plain RoPE for text).

use builder::{build, BuildRequest};
use std::path::Path;
use tailor_tests::*;

fn build_text_only(name: &str, ep: &str, pkg: &Path) -> builder::BuildReport {
    let req = BuildRequest { ep: ep.into(), text_only: true, ..BuildRequest::new(fixture(name), pkg) };
    build(&req, &mut |_| {}).unwrap_or_else(|e| panic!("{name} --text-only ({ep}): build failed: {e}"))
}

/// Ministral 3 as published (tiny-mistral3): every reference case of its text path, on
/// `default` and `cpu`, within the fixtures' f32 bound.
#[test]
fn mistral3_text_only_matches_transformers() {
    for ep in ["default", "cpu"] {
        let out = tempfile::tempdir().unwrap();
        let pkg = out.path().join("pkg");
        let report = build_text_only("tiny-mistral3", ep, &pkg);
        assert_eq!(report.parts.len(), 1, "one decoder part, no vision or embedding part");
        assert!(
            report.notes.iter().any(|n| n.contains("--text-only") && n.contains("`ministral3` language model of the `mistral3`")),
            "{:?}",
            report.notes
        );
        let model = ir::load_model(&pkg.join("model.onnx")).unwrap();
        assert!(model.graph.inputs.iter().any(|i| i.name == "input_ids"), "a text package reads input_ids");
        let shape = DecoderShape::of(&model);
        let mut s = session(&pkg.join("model.onnx"));
        let diffs = compare_decoder(&mut s, &shape, &Reference::load(&fixture("tiny-mistral3")), Cases::ALL);
        let worst = diffs.iter().map(|(_, d)| *d).fold(0f32, f32::max);
        eprintln!("tiny-mistral3 --text-only {ep} f32: max abs diff {worst:.3e}");
        assert_within(&format!("tiny-mistral3 --text-only {ep}"), &diffs, 1e-4);
        assert!(!pkg.join("vision.onnx").exists() && !pkg.join("processor_config.json").exists());
    }
}

/// Every tensor of the tower and projector is accounted as unused with the reason, every text
/// tensor is read once, nothing is left over.
#[test]
fn text_only_accounts_for_every_tensor() {
    for name in tailor_tests::vlm_fixtures() {
        let ckpt = models::Checkpoint::open(&fixture(name)).unwrap().into_text_only().unwrap();
        assert!(ckpt.config.multimodal.is_none() && ckpt.config.mrope.is_none());
        models::tasks::causal_lm::build(&ckpt, &models::BuildOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let unused = ckpt.unused();
        assert!(!unused.is_empty(), "{name}: the tower's tensors are unused");
        for (tensor, why) in &unused {
            let tied = why.starts_with("tie_word_embeddings");
            assert!(tied || why.contains("--text-only"), "{name}: {tensor}: {why}");
            assert!(tied || !tensor.contains("layers.") || tensor.contains("vision") || tensor.contains("visual"), "{name}: a text layer's tensor left unread: {tensor}");
        }
        assert_eq!(ckpt.unaccounted(), Vec::<String>::new(), "{name}");
        assert!(ckpt.taken().values().all(|&n| n == 1), "{name}: {:?}", ckpt.taken());
    }
}

/// The fixtures whose full packages are built: the text-only package on their text prompt
/// computes transformers' `text_logits` (Qwen's sections of multimodal RoPE as plain RoPE,
/// Gemma 3's text model as `gemma3_text`).
#[test]
fn vision_language_text_prompts_match_transformers() {
    for name in tailor_tests::vlm_fixtures().into_iter().filter(|n| *n != "tiny-mistral3") {
        let out = tempfile::tempdir().unwrap();
        let pkg = out.path().join("pkg");
        build_text_only(name, "cpu", &pkg);
        let model = ir::load_model(&pkg.join("model.onnx")).unwrap();
        let shape = DecoderShape::of(&model);
        let r = Reference::load(&fixture(name));
        let (ids, mask) = (r.get("text_input_ids").i64(), r.get("text_attention_mask").i64());
        let n = ids.shape()[1];
        let positions = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[1, n]), (0..n as i64).collect()).unwrap();
        let mut s = session(&pkg.join("model.onnx"));
        let got = run(&mut s, &decoder_feeds(&shape, ids, mask, &positions, None));
        let diff = max_abs_diff(got["logits"].f32(), r.get("text_logits").f32(), None);
        eprintln!("{name} --text-only cpu f32: text prompt logits max abs diff {diff:.3e}");
        assert!(diff < 1e-4, "{name}: text-only logits differ from transformers' by {diff}");
        let genai: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(pkg.join("genai_config.json")).unwrap()).unwrap();
        assert!(genai["model"].get("vision").is_none() && genai["model"].get("embedding").is_none(), "{name}: a text package");
    }
}

/// A checkpoint whose tower is not built is refused without the flag, naming it; the flag on
/// a text checkpoint is refused too; neither leaves an output folder.
#[test]
fn text_only_is_asked_for_and_only_where_it_means_something() {
    let out = tempfile::tempdir().unwrap();
    let pkg = out.path().join("pkg");
    let e = build(&BuildRequest::new(fixture("tiny-mistral3"), &pkg), &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("`mistral3` is not supported") && e.contains("--text-only") && e.contains("`ministral3`"), "{e}");
    assert!(!pkg.exists());
    let req = BuildRequest { text_only: true, ..BuildRequest::new(fixture("tiny-llama"), &pkg) };
    let e = build(&req, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("--text-only") && e.contains("drop the flag") && e.contains("config.json"), "{e}");
    assert!(!pkg.exists());
}
