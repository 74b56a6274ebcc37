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

/// Qwen3-VL's deepstack: the tower's `image_features` hold the merger's output and the two
/// deepstack mergers' outputs side by side, the embedding part puts all three blocks at the
/// image tokens (zeros beside text tokens), and the decoder adds block j after layer j. Each
/// block equals transformers', the logits too (generic and cpu decoders), and dropping the
/// deepstack blocks changes the logits measurably (so the test would see them lost).
#[test]
fn qwen3_vl_deepstack_parts_match_transformers() {
    let (_dirs, mut emb, mut dec, shape, r) = parts("tiny-qwen3_vl");
    let dir = fixture("tiny-qwen3_vl");
    let ckpt = Checkpoint::open(&dir).unwrap();
    let h = ckpt.config.hidden_size;
    let tower = models::arch::vision::build_vision(&ckpt, &BuildOptions::default()).unwrap();
    let (_d, mut vision) = session_for(&tower);
    let feeds = [("pixel_values".to_string(), r.get("pixel_values").clone()), ("image_grid_thw".to_string(), r.get("image_grid_thw").clone())];
    let wide = run(&mut vision, &feeds)["image_features"].f32().clone();
    let deep = r.get("deepstack_features").f32();
    let k = deep.shape()[0];
    assert_eq!(wide.shape()[1], h * (1 + k), "image_features carry the {k} deepstack blocks");
    let block = |a: &ArrayD<f32>, j: usize| a.slice_axis(ndarray::Axis(a.ndim() - 1), (j * h..(j + 1) * h).into()).to_owned();
    let d = max_abs_diff(&block(&wide, 0), r.get("image_features").f32(), None);
    assert!(d <= 1e-4, "image_features differ from transformers by {d}");
    for j in 0..k {
        let d = max_abs_diff(&block(&wide, j + 1), &deep.index_axis(ndarray::Axis(0), j).to_owned(), None);
        assert!(d <= 1e-4, "deepstack block {j} differs from transformers by {d}");
    }

    let ids = r.get("input_ids").i64();
    let embeds = embed(&mut emb, ids, wide.clone());
    let d = max_abs_diff(&block(&embeds, 0), r.get("inputs_embeds").f32(), None);
    assert!(d <= 1e-4, "inputs_embeds differ by {d}");
    let image_rows: Vec<bool> = ids.iter().map(|&t| t == 5).collect();
    for j in 1..=k {
        let b = block(&embeds, j);
        for (s, &image) in image_rows.iter().enumerate() {
            let row = b.slice(ndarray::s![0, s, ..]);
            assert!(image || row.iter().all(|&x| x == 0.0), "deepstack block {j} is not zero at text token {s}");
        }
    }
    let logits = prefill(&mut dec, &shape, &embeds, r.get("attention_mask").i64(), r.get("position_ids").i64());
    let d = max_abs_diff(&logits, r.get("logits").f32(), None);
    assert!(d <= 1e-3, "image prompt logits differ by {d}");
    let mut without = embeds.clone();
    without.slice_axis_mut(ndarray::Axis(2), (h..).into()).fill(0.0);
    let lost = prefill(&mut dec, &shape, &without, r.get("attention_mask").i64(), r.get("position_ids").i64());
    assert!(max_abs_diff(&lost, r.get("logits").f32(), None) > 1e-2, "the deepstack blocks change the logits");

    // Decode steps feed no image rows.
    let text_ids = r.get("text_input_ids").i64();
    let text = embed(&mut emb, text_ids, ArrayD::zeros(IxDyn(&[0, h * (1 + k)])));
    let d = max_abs_diff(&block(&text, 0), r.get("text_inputs_embeds").f32(), None);
    assert!(d <= 1e-5, "text-only inputs_embeds differ by {d}");
    let logits = prefill(&mut dec, &shape, &text, r.get("text_attention_mask").i64(), &arange(Some(3), text_ids.shape()[1]));
    let d = max_abs_diff(&logits, r.get("text_logits").f32(), None);
    assert!(d <= 1e-3, "text-only logits differ by {d}");

    // The cpu decoder (GroupQueryAttention, skip norms) on the same wide rows.
    let sets = ep_sets::EpSets::builtin().unwrap();
    let (table, plan) = sets.role_plan("cpu", ir::Role::Decoder, ir::DType::F32).unwrap();
    let mut cpu = causal_lm::build_with(&ckpt, &builder::build_options(plan, ir::DType::F32), TokenInput::Embeds).unwrap();
    builder::pipeline::optimize(&mut cpu, table, plan, false, None).unwrap();
    assert_eq!(cpu.graph.nodes.iter().filter(|n| n.op == "GroupQueryAttention").count(), ckpt.config.num_hidden_layers);
    let (_d2, mut cpu) = session_for(&cpu);
    let logits = prefill(&mut cpu, &shape, &embeds, r.get("attention_mask").i64(), r.get("position_ids").i64());
    let d = max_abs_diff(&logits, r.get("logits").f32(), None);
    assert!(d <= 1e-3, "cpu image prompt logits differ by {d}");
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
    for (model_type, why) in [("qwen2_vl", "no vision tower"), ("llava", "no vision tower")] {
        config["model_type"] = serde_json::json!(model_type);
        std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
        let ckpt = Checkpoint::open(dir.path()).unwrap();
        let e = models::tasks::Task::CausalLm.parts(&ckpt).unwrap_err().to_string();
        assert!(e.contains(&format!("`{model_type}`")) && e.contains(why) && e.contains("qwen2_5_vl, qwen3_vl, gemma3"), "{e}");
    }
}

/// The cpu vision part: every block's attention is com.microsoft MultiHeadAttention (Gemma 3's
/// SigLIP blocks unmasked with packed biases, Qwen2.5-VL's under its window / per-image block
/// mask as a 3-D key_padding_mask), no ONNX Attention is left, and the part computes what the
/// generic tower computes (1e-5) and what transformers computes (1e-3) on ORT's CPU EP; for
/// Qwen also on two images of other grids in one call, where a wrong mask would mix them.
#[test]
fn cpu_vision_towers_fuse_attention_and_match_transformers() {
    for (name, grid) in [("tiny-qwen2_5_vl", true), ("tiny-qwen3_vl", true), ("tiny-gemma3-vl", false)] {
        let dir = fixture(name);
        let parts = builder::optimized_parts(&dir, None, "cpu", ir::DType::F32, false, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (_, vision, report) = parts.into_iter().find(|(p, _, _)| p.role == ir::Role::Vision).expect("a vision part");
        let ckpt = Checkpoint::open(&dir).unwrap();
        let depth = ckpt.config.multimodal.as_ref().unwrap().vision.get("depth").or_else(|| ckpt.config.multimodal.as_ref().unwrap().vision.get("num_hidden_layers")).and_then(|v| v.as_u64()).unwrap() as usize;
        let count = |op: &str| vision.graph.nodes.iter().filter(|n| n.op == op).count();
        assert_eq!((count("MultiHeadAttention"), count("Attention")), (depth, 0), "{name}: one MultiHeadAttention per block");
        let fired: usize = report.diagnostics.rules.iter().filter(|r| r.rule.starts_with("fuse.mha_tower")).map(|r| r.fired).sum();
        assert_eq!(fired, depth, "{name}");

        let generic = models::arch::vision::build_vision(&ckpt, &BuildOptions::default()).unwrap();
        let (_d1, mut fused) = session_for(&vision);
        let (_d2, mut plain) = session_for(&generic);
        let r = Reference::load(&dir);
        let mut feeds = vec![("pixel_values".to_string(), r.get("pixel_values").clone())];
        if grid {
            feeds.push(("image_grid_thw".to_string(), r.get("image_grid_thw").clone()));
        }
        let got = run(&mut fused, &feeds)["image_features"].f32().clone();
        let want = run(&mut plain, &feeds)["image_features"].f32().clone();
        let d = max_abs_diff(&got, &want, None);
        assert!(d <= 1e-5, "{name}: fused tower differs from the generic one by {d}");
        // Qwen3-VL's deepstack blocks follow the features (checked in qwen3_vl_deepstack_parts_match_transformers).
        let h = r.get("image_features").f32().shape()[1];
        let d = max_abs_diff(&got.slice_axis(ndarray::Axis(1), (0..h).into()).to_owned(), r.get("image_features").f32(), None);
        assert!(d <= 1e-3, "{name}: fused tower differs from transformers by {d}");
        if grid {
            // Two images of other grids (2x2 and 2x4 merged tokens) in one call.
            let grids = ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![1i64, 4, 4, 1, 4, 8]).unwrap();
            let width = r.get("pixel_values").f32().shape()[1];
            let pixels = ArrayD::from_shape_fn(IxDyn(&[16 + 32, width]), |i| ((i[0] * 31 + i[1] * 7) % 97) as f32 / 97.0 - 0.5);
            let feeds = vec![("pixel_values".to_string(), Feed::F32(pixels)), ("image_grid_thw".to_string(), Feed::I64(grids))];
            let got = run(&mut fused, &feeds)["image_features"].f32().clone();
            let want = run(&mut plain, &feeds)["image_features"].f32().clone();
            let d = max_abs_diff(&got, &want, None);
            assert!(d <= 1e-5, "{name}: two images, fused tower differs from the generic one by {d}");
        }
    }
}

/// A GPU table builds a vision-language package only where it has vision and embedding plans;
/// otherwise its `[[refuse]]` entry says why, and the build's error quotes that why before
/// anything is built. One check per table: each of them has a why for every dtype it lists.
fn refused_with_the_tables_why(ep: &str) {
    let sets = ep_sets::EpSets::builtin().unwrap();
    let table = sets.get(ep).unwrap();
    for dtype in table.dtypes() {
        for role in [ir::Role::Vision, ir::Role::Embedding] {
            if table.role_plan(role, dtype).is_some() {
                continue;
            }
            let why = table.refused(role, dtype).unwrap_or_else(|| panic!("{ep} {dtype}: neither a {role} plan nor a [[refuse]] entry")).why.trim().to_string();
            assert!(why.len() > 40, "{ep} {dtype} {role}: a why that says something: {why}");
        }
        for name in ["tiny-qwen2_5_vl", "tiny-gemma3-vl"] {
            let planned = [ir::Role::Vision, ir::Role::Embedding].iter().all(|r| table.role_plan(*r, dtype).is_some());
            match builder::optimized_parts(&fixture(name), None, ep, dtype, false, None) {
                Ok(_) => assert!(planned, "{ep} {dtype} {name}: built without plans"),
                Err(e) => {
                    let e = e.to_string();
                    let why = table.refused(ir::Role::Vision, dtype).or_else(|| table.refused(ir::Role::Embedding, dtype)).map(|r| r.why.trim().to_string());
                    let why = why.unwrap_or_else(|| panic!("{ep} {dtype} {name}: failed without a refusal: {e}"));
                    assert!(e.contains(&why) && e.contains("[[refuse]]"), "{ep} {dtype} {name}: the error quotes the table's why:\n{e}");
                }
            }
        }
    }
}

#[test]
fn cuda_refuses_vision_language_packages_with_its_why() {
    refused_with_the_tables_why("cuda");
}

#[test]
fn dml_refuses_vision_language_packages_with_its_why() {
    refused_with_the_tables_why("dml");
}

#[test]
fn webgpu_refuses_vision_language_packages_with_its_why() {
    refused_with_the_tables_why("webgpu");
}

#[test]
fn trt_rtx_refuses_vision_language_packages_with_its_why() {
    refused_with_the_tables_why("trt-rtx");
}
