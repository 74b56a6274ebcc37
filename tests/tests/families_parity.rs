//! Every shared decoder fixture, built for the `default` EP in f32, computes what transformers
//! computed, on ONNX Runtime's CPU EP: prefill logits, every present tensor, the decode step,
//! the short prompt and both padded batches, within atol 1e-4.

use builder::{build, BuildRequest};
use tailor_tests::*;

fn check(name: &str) {
    check_with(name, BuildRequest::new(fixture(name), std::path::PathBuf::new()));
}

fn check_with(name: &str, req: BuildRequest) {
    let out = tempfile::tempdir().unwrap();
    let pkg = out.path().join("pkg");
    let req = BuildRequest { output: pkg.clone(), ..req };
    build(&req, &mut |_| {}).unwrap_or_else(|e| panic!("{name}: build failed: {e}"));
    let model = ir::load_model(&pkg.join("model.onnx")).unwrap();
    let shape = DecoderShape::of(&model);
    let mut s = session(&pkg.join("model.onnx"));
    let diffs = compare_decoder(&mut s, &shape, &Reference::load(&fixture(name)), Cases::ALL);
    assert_eq!(diffs.len(), 1 + 2 * shape.layers + 4, "every reference case is compared");
    let worst = diffs.iter().map(|(_, d)| *d).fold(0f32, f32::max);
    eprintln!("{name} default f32: max abs diff {worst:.3e}");
    assert_within(&format!("{name} default f32"), &diffs, 1e-4);
}

macro_rules! parity {
    ($($test:ident => $fixture:literal),* $(,)?) => {
        $(#[test] fn $test() { check($fixture); })*
    };
}

// One test per decoder of the fixture registry (tests/fixtures/fixtures.toml).
tailor_tests::for_each_decoder!(parity);

/// GPT-2 as openai-community/gpt2 ships it: saved from the bare `GPT2Model` (no
/// `transformer.` prefix) with the `attn.bias` / `attn.masked_bias` buffers. The buffers are
/// listed as intentionally unused, and the model still matches the reference.
#[test]
fn tiny_gpt2_saved_from_the_bare_model() {
    let src = tempfile::tempdir().unwrap();
    tailor_tests::checkpoints::rewrite_checkpoint(&fixture("tiny-gpt2"), src.path(), |tensors| {
        let mut out: Vec<_> = tensors
            .into_iter()
            .map(|(n, d, s, b)| (n.strip_prefix("transformer.").unwrap_or(&n).to_string(), d, s, b))
            .collect();
        for i in 0..2 {
            let tril: Vec<u8> = (0..256 * 256).flat_map(|k| if k % 256 <= k / 256 { 1f32 } else { 0f32 }.to_le_bytes()).collect();
            out.push((format!("h.{i}.attn.bias"), safetensors::Dtype::F32, vec![1, 1, 256, 256], tril));
            out.push((format!("h.{i}.attn.masked_bias"), safetensors::Dtype::F32, vec![], (-1e4f32).to_le_bytes().to_vec()));
        }
        out
    });
    let ckpt = models::Checkpoint::open(src.path()).unwrap();
    let model = models::tasks::causal_lm::build(&ckpt, &models::BuildOptions::default()).unwrap();
    let unused = ckpt.unused();
    assert_eq!(unused.len(), 4, "{unused:?}");
    assert!(unused.keys().all(|k| k.contains(".attn.bias") || k.contains(".attn.masked_bias")), "{unused:?}");
    assert!(ckpt.taken().values().all(|&n| n == 1));
    let shape = DecoderShape::of(&model);
    let (_dir, mut s) = session_for(&model);
    let diffs = compare_decoder(&mut s, &shape, &Reference::load(&fixture("tiny-gpt2")), Cases::ALL);
    assert_within("tiny-gpt2 without the transformer. prefix", &diffs, 1e-4);
}

/// `--tied-head copy` stores the transposed embedding as `lm_head.weight` (no Transpose node)
/// and computes the same logits as the shared form, for both tied fixtures.
#[test]
fn tied_head_copy_matches_the_reference() {
    for name in ["tiny-qwen2-tied-mqa", "tiny-gpt2"] {
        let req = BuildRequest { tied_head: models::TiedHead::Copy, ..BuildRequest::new(fixture(name), std::path::PathBuf::new()) };
        check_with(name, req);
        let out = tempfile::tempdir().unwrap();
        let req = BuildRequest { tied_head: models::TiedHead::Copy, ..BuildRequest::new(fixture(name), out.path().join("pkg")) };
        build(&req, &mut |_| {}).unwrap();
        let model = ir::load_model(&out.path().join("pkg/model.onnx")).unwrap();
        assert!(model.graph.initializers.iter().any(|(n, _)| n == "lm_head.weight"), "{name}: a stored lm_head.weight");
        assert!(!model.graph.nodes.iter().any(|n| n.op == "Transpose"), "{name}: no Transpose node");
    }
}

/// A tied head reads the embedding table unscaled: Gemma's sqrt(hidden) and Granite's
/// `embedding_multiplier` multiply the gathered rows only. The shared fixtures are untied, so
/// each is rewritten twice: untied with `lm_head.weight` a copy of the embedding, and tied
/// (`tie_word_embeddings: true`, no `lm_head.weight`). Both must compute the same logits; a
/// scale that reached the head would multiply them by it.
#[test]
fn a_tied_head_does_not_see_the_embedding_scale() {
    for name in ["tiny-gemma", "tiny-granite"] {
        let logits = |tied: bool| {
            let dir = tempfile::tempdir().unwrap();
            tailor_tests::checkpoints::rewrite_checkpoint(&fixture(name), dir.path(), |tensors| {
                let embed = tensors.iter().find(|t| t.0 == "model.embed_tokens.weight").unwrap().clone();
                let mut out: Vec<_> = tensors.into_iter().filter(|t| t.0 != "lm_head.weight").collect();
                if !tied {
                    out.push(("lm_head.weight".into(), embed.1, embed.2, embed.3));
                }
                out
            });
            let path = dir.path().join("config.json");
            let mut config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            config["tie_word_embeddings"] = serde_json::Value::Bool(tied);
            std::fs::write(&path, config.to_string()).unwrap();
            let ckpt = models::Checkpoint::open(dir.path()).unwrap();
            let model = models::tasks::causal_lm::build(&ckpt, &models::BuildOptions::default()).unwrap();
            let shape = DecoderShape::of(&model);
            let (_dir, mut s) = session_for(&model);
            let r = Reference::load(&fixture(name));
            let feeds = decoder_feeds(&shape, r.get("input_ids").i64(), r.get("attention_mask").i64(), r.get("position_ids").i64(), None);
            run(&mut s, &feeds)["logits"].f32().clone()
        };
        let (untied, tied) = (logits(false), logits(true));
        let diff = max_abs_diff(&untied, &tied, None);
        assert!(diff < 1e-5, "{name}: tied and untied heads over the same table differ by {diff}");
    }
}

/// Gemma 3 as most published configs spell it: `rope_theta` for full layers,
/// `rope_local_base_freq` for sliding ones, `sliding_window_pattern` instead of `layer_types`
/// (pattern 2 = tiny-gemma3's sliding-then-full), no nested `rope_parameters`. The same
/// weights must compute the same reference.
#[test]
fn tiny_gemma3_in_the_published_spelling() {
    let dir = tempfile::tempdir().unwrap();
    tailor_tests::checkpoints::rewrite_checkpoint(&fixture("tiny-gemma3"), dir.path(), |t| t);
    let path = dir.path().join("config.json");
    let mut config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let m = config.as_object_mut().unwrap();
    let ropes = m.remove("rope_parameters").unwrap();
    m.remove("layer_types");
    m.remove("_sliding_window_pattern");
    m.insert("rope_theta".into(), ropes["full_attention"]["rope_theta"].clone());
    m.insert("rope_local_base_freq".into(), ropes["sliding_attention"]["rope_theta"].clone());
    m.insert("sliding_window_pattern".into(), 2.into());
    assert_ne!(m["rope_theta"], m["rope_local_base_freq"], "the fixture has two RoPE bases");
    std::fs::write(&path, config.to_string()).unwrap();
    let ckpt = models::Checkpoint::open(dir.path()).unwrap();
    let model = models::tasks::causal_lm::build(&ckpt, &models::BuildOptions::default()).unwrap();
    let shape = DecoderShape::of(&model);
    let (_dir, mut s) = session_for(&model);
    let diffs = compare_decoder(&mut s, &shape, &Reference::load(&fixture("tiny-gemma3")), Cases::ALL);
    assert_within("tiny-gemma3 (rope_local_base_freq, sliding_window_pattern)", &diffs, 1e-4);
}

/// Falcon-RW's ALiBi as transformers' Falcon computes it: slopes, positions and their product
/// rounded to bf16, then divided by sqrt(head_dim). Positions past 256 move in bf16 steps, so a
/// 300-token prompt's last logits match transformers' only with that rounding (0.087 off with
/// exact f32 products, measured on the fixture). Built for `default` and `cpu` (the
/// GroupQueryAttention form, whose attention_bias is the same mask).
#[test]
fn falcon_rw_rounds_its_alibi_to_bf16_on_long_prompts() {
    let r = Reference::load(&fixture("tiny-falcon-rw"));
    let ids = r.get("long_input_ids").i64();
    let n = ids.shape()[1];
    let mask = ndarray::ArrayD::from_elem(vec![1, n], 1i64);
    let positions = ndarray::Array::from_iter(0..n as i64).into_shape_with_order(vec![1, n]).unwrap();
    for ep in ["default", "cpu"] {
        let out = tempfile::tempdir().unwrap();
        let pkg = out.path().join("pkg");
        let req = BuildRequest { ep: ep.into(), ..BuildRequest::new(fixture("tiny-falcon-rw"), pkg.clone()) };
        build(&req, &mut |_| {}).unwrap_or_else(|e| panic!("{ep}: {e}"));
        let model = ir::load_model(&pkg.join("model.onnx")).unwrap();
        let shape = DecoderShape::of(&model);
        let mut s = session(&pkg.join("model.onnx"));
        let feeds = decoder_feeds(&shape, ids, &mask, &positions, None);
        let logits = run(&mut s, &feeds)["logits"].f32().clone();
        let last = logits.slice(ndarray::s![.., n - 1..n, ..]).to_owned().into_dyn();
        let diff = max_abs_diff(&last, r.get("long_last_logits").f32(), None);
        assert!(diff < 1e-4, "{ep}: the 300-token prompt's last logits are {diff} off transformers'");
    }
}
