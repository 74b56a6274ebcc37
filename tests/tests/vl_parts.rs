//! The embedding and decoder parts of the vision-language fixtures compute what transformers
//! computes, on ONNX Runtime's CPU EP, from the reference's own inputs: the embedding part
//! turns `input_ids` + `image_features` into `inputs_embeds` (and accepts 0 image rows, as at
//! every decode step); the decoder turns `inputs_embeds` + position ids (Qwen: 3-D mRoPE ids)
//! into the prefill logits.

use ndarray::{ArrayD, IxDyn};
use models::tasks::causal_lm::{self, TokenInput};
use models::tasks::embedding;
use models::{BuildOptions, Checkpoint};
use tailor_tests::*;

fn empty_past(shape: &DecoderShape, batch: usize) -> Vec<(String, Feed)> {
    (0..shape.layers)
        .flat_map(|i| ["key", "value"].map(|kv| (format!("past_key_values.{i}.{kv}"), Feed::F32(ArrayD::zeros(IxDyn(&[batch, shape.kv_heads, 0, shape.head_dim]))))))
        .collect()
}

/// `inputs_embeds` of the embedding part for `ids` and `features`.
fn embed(session: &mut ort::session::Session, ids: &ArrayD<i64>, features: ArrayD<f32>) -> ArrayD<f32> {
    let out = run(session, &[("input_ids".into(), Feed::I64(ids.clone())), ("image_features".into(), Feed::F32(features))]);
    out["inputs_embeds"].f32().clone()
}

/// Prefill logits of the decoder part.
fn prefill(session: &mut ort::session::Session, shape: &DecoderShape, embeds: &ArrayD<f32>, mask: &ArrayD<i64>, positions: &ArrayD<i64>) -> ArrayD<f32> {
    let mut feeds = vec![
        ("inputs_embeds".to_string(), Feed::F32(embeds.clone())),
        ("attention_mask".to_string(), Feed::I64(mask.clone())),
        ("position_ids".to_string(), Feed::I64(positions.clone())),
    ];
    feeds.extend(empty_past(shape, embeds.shape()[0]));
    run(session, &feeds)["logits"].f32().clone()
}

/// Positions 0..n as `[rows, 1, n]` (rows 3: text-only mRoPE ids, all rows equal) or `[1, n]`.
fn arange(rows: Option<usize>, n: usize) -> ArrayD<i64> {
    let one: Vec<i64> = (0..n as i64).collect();
    match rows {
        Some(r) => ArrayD::from_shape_vec(IxDyn(&[r, 1, n]), one.repeat(r)).unwrap(),
        None => ArrayD::from_shape_vec(IxDyn(&[1, n]), one).unwrap(),
    }
}

/// Both parts of `name`: (embedding session, decoder session, decoder shape, reference).
fn parts(name: &str) -> (Vec<tempfile::TempDir>, ort::session::Session, ort::session::Session, DecoderShape, Reference) {
    let dir = fixture(name);
    let ckpt = Checkpoint::open(&dir).unwrap();
    let opts = BuildOptions::default();
    let embedding = embedding::build(&ckpt, &opts).unwrap();
    let decoder = causal_lm::build_with(&ckpt, &opts, TokenInput::Embeds).unwrap();
    let shape = DecoderShape::of(&decoder);
    let (d1, e) = session_for(&embedding);
    let (d2, d) = session_for(&decoder);
    (vec![d1, d2], e, d, shape, Reference::load(&dir))
}

#[test]
fn qwen2_5_vl_embedding_and_decoder_match_transformers() {
    let (_dirs, mut emb, mut dec, shape, r) = parts("tiny-qwen2_5_vl");
    let ids = r.get("input_ids").i64();
    let embeds = embed(&mut emb, ids, r.get("image_features").f32().clone());
    let d = max_abs_diff(&embeds, r.get("inputs_embeds").f32(), None);
    assert!(d <= 1e-6, "inputs_embeds differ by {d}");
    // A decode step feeds no image rows.
    let text_ids = r.get("text_input_ids").i64();
    let text = embed(&mut emb, text_ids, ArrayD::zeros(IxDyn(&[0, 64])));
    let d = max_abs_diff(&text, r.get("text_inputs_embeds").f32(), None);
    assert!(d <= 1e-6, "text-only inputs_embeds differ by {d}");

    let position_ids = r.get("position_ids").i64();
    assert_eq!(position_ids.shape()[0], 3, "the reference has 3-D mRoPE ids");
    let logits = prefill(&mut dec, &shape, r.get("inputs_embeds").f32(), r.get("attention_mask").i64(), position_ids);
    let d = max_abs_diff(&logits, r.get("logits").f32(), None);
    assert!(d <= 1e-3, "image prompt logits differ by {d}");
    let n = text_ids.shape()[1];
    let logits = prefill(&mut dec, &shape, r.get("text_inputs_embeds").f32(), r.get("text_attention_mask").i64(), &arange(Some(3), n));
    let d = max_abs_diff(&logits, r.get("text_logits").f32(), None);
    assert!(d <= 1e-3, "text-only logits differ by {d}");
    // The 3-D ids matter: the image prompt with plain 1-D positions is measurably different.
    let plain = prefill(&mut dec, &shape, r.get("inputs_embeds").f32(), r.get("attention_mask").i64(), &arange(Some(3), ids.shape()[1]));
    assert!(max_abs_diff(&plain, r.get("logits").f32(), None) > 1e-2, "the mRoPE ids change the logits");
}

#[test]
fn gemma3_vl_embedding_and_causal_decoder_match_transformers() {
    let (_dirs, mut emb, mut dec, shape, r) = parts("tiny-gemma3-vl");
    let ids = r.get("input_ids").i64();
    let embeds = embed(&mut emb, ids, r.get("image_features").f32().clone());
    let d = max_abs_diff(&embeds, r.get("inputs_embeds").f32(), None);
    assert!(d <= 1e-5, "inputs_embeds (text rows scaled by sqrt(hidden), image rows not) differ by {d}");
    let text_ids = r.get("text_input_ids").i64();
    let text = embed(&mut emb, text_ids, ArrayD::zeros(IxDyn(&[0, 64])));
    let d = max_abs_diff(&text, r.get("text_inputs_embeds").f32(), None);
    assert!(d <= 1e-5, "text-only inputs_embeds differ by {d}");
    // The causal decoder: transformers' bidirectional image block is `logits`, the causal
    // form `logits_causal` (docs/models.md says why the package is causal).
    let logits = prefill(&mut dec, &shape, r.get("inputs_embeds").f32(), r.get("attention_mask").i64(), &arange(None, ids.shape()[1]));
    let d = max_abs_diff(&logits, r.get("logits_causal").f32(), None);
    assert!(d <= 1e-3, "causal image prompt logits differ by {d}");
    let bidirectional = max_abs_diff(&logits, r.get("logits").f32(), None);
    println!("gemma3 VL causal decoder vs transformers' bidirectional image attention: max |diff| {bidirectional}");
    let n = text_ids.shape()[1];
    let logits = prefill(&mut dec, &shape, r.get("text_inputs_embeds").f32(), r.get("text_attention_mask").i64(), &arange(None, n));
    let d = max_abs_diff(&logits, r.get("text_logits").f32(), None);
    assert!(d <= 1e-3, "text-only logits differ by {d}");
}

/// The decoder part through the cpu table's decoder plan: it validates, every attention is a
/// GroupQueryAttention (Qwen's per-token mRoPE caches keep RotaryEmbedding as a node before it:
/// `fuse.gqa`), and it computes the same logits as the generic graph's reference.
#[test]
fn vl_decoders_on_cpu_fuse_attention_and_match_transformers() {
    for (name, logits_key, positions_3d) in [("tiny-qwen2_5_vl", "logits", true), ("tiny-gemma3-vl", "logits_causal", false)] {
        let dir = fixture(name);
        let ckpt = Checkpoint::open(&dir).unwrap();
        let sets = ep_sets::EpSets::builtin().unwrap();
        let (table, plan) = sets.role_plan("cpu", ir::Role::Decoder, ir::DType::F32).unwrap();
        let mut decoder = causal_lm::build_with(&ckpt, &builder::build_options(plan, ir::DType::F32), TokenInput::Embeds).unwrap();
        builder::pipeline::optimize(&mut decoder, table, plan, false, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        let gqa = decoder.graph.nodes.iter().filter(|n| n.op == "GroupQueryAttention").count();
        assert_eq!(gqa, ckpt.config.num_hidden_layers, "{name}: one GroupQueryAttention per layer");
        let shape = DecoderShape::of(&decoder);
        let (_d, mut dec) = session_for(&decoder);
        let r = Reference::load(&dir);
        let n = r.get("input_ids").i64().shape()[1];
        let positions = if positions_3d { r.get("position_ids").i64().clone() } else { arange(None, n) };
        let logits = prefill(&mut dec, &shape, r.get("inputs_embeds").f32(), r.get("attention_mask").i64(), &positions);
        let d = max_abs_diff(&logits, r.get(logits_key).f32(), None);
        assert!(d <= 1e-3, "{name}: cpu image prompt logits differ by {d}");
    }
}

/// A vision-language checkpoint this build has no package for is refused by its `model_type`
/// before any graph is built, saying why.
#[test]
fn unsupported_vision_language_types_are_refused_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("tiny-qwen2_5_vl");
    for f in ["model.safetensors", "tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
    }
    let mut config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(src.join("config.json")).unwrap()).unwrap();
    for (model_type, why) in [("qwen3_vl", "deepstack"), ("llava", "no vision tower")] {
        config["model_type"] = serde_json::json!(model_type);
        std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
        let ckpt = Checkpoint::open(dir.path()).unwrap();
        let e = models::tasks::Task::CausalLm.parts(&ckpt).unwrap_err().to_string();
        assert!(e.contains(&format!("`{model_type}`")) && e.contains(why) && e.contains("qwen2_5_vl, gemma3"), "{e}");
    }
}
