//! Encoders (tasks feature-extraction and sentence-embedding): every encoder fixture's
//! `last_hidden_state` on ONNX Runtime's CPU EP against the transformers reference, for the
//! `default` and `cpu` packages; the pooling of `sentence_embedding` (mean, CLS, max,
//! normalized or not) against the same package's `last_hidden_state`; the task chosen from the
//! checkpoint; and the encoder role's plans, which never run a decoder's GroupQueryAttention or
//! KV-cache rules.

use builder::BuildRequest;
use ep_sets::{EpSets, Role};
use models::tasks::Task;
use ndarray::{ArrayD, Axis, IxDyn};
use std::path::Path;
use tailor_tests::*;

/// The graph inputs of an encoder package, fed from the fixture's reference (token types as
/// zeros when the reference has none and the graph takes them).
fn feeds(s: &ort::session::Session, r: &Reference) -> Vec<(String, Feed)> {
    let ids = r.get("input_ids").i64().clone();
    s.inputs()
        .iter()
        .map(|i| {
            let name = i.name().to_string();
            let feed = if r.has(&name) {
                r.get(&name).clone()
            } else {
                assert_eq!(name, "token_type_ids", "an encoder input the reference does not hold");
                Feed::I64(ArrayD::zeros(ids.raw_dim()))
            };
            (name, feed)
        })
        .collect()
}

fn build(fixture_dir: &Path, ep: &str, task: Option<Task>, out: &Path) -> builder::BuildReport {
    let req = BuildRequest { ep: ep.into(), task, ..BuildRequest::new(fixture_dir, out) };
    builder::build(&req, &mut |_| {}).unwrap_or_else(|e| panic!("{}: {ep} build failed: {e}", fixture_dir.display()))
}

fn check_parity(name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let reference = Reference::load(&fixture(name));
    for ep in ["default", "cpu"] {
        let pkg = dir.path().join(ep);
        let report = build(&fixture(name), ep, None, &pkg);
        assert_eq!(report.task, Task::FeatureExtraction, "{name}: a checkpoint without modules.json builds feature-extraction");
        assert_eq!(report.parts[0].pipeline.role, "encoder", "{name} {ep}");
        // An encoder package: no genai_config.json (the report says so), the tokenizer travels.
        assert!(!pkg.join("genai_config.json").exists(), "{name} {ep}: an encoder package has no genai_config.json");
        assert!(report.notes.iter().any(|n| n.contains("genai_config.json is not written")), "{name} {ep}: {:?}", report.notes);
        assert!(pkg.join("tokenizer.json").is_file(), "{name} {ep}: tokenizer.json travels with the package");
        let seen = builder::inspect::inspect(&pkg).unwrap();
        assert_eq!(seen.task.as_deref(), Some("feature-extraction"), "{name} {ep}: inspect reads the task");
        assert!(seen.genai_mismatches.iter().all(|m| m.starts_with("not written for a feature-extraction package")), "{:?}", seen.genai_mismatches);
        let model = ir::load_model(&pkg.join("model.onnx")).unwrap();
        assert!(!model.graph.nodes.iter().any(|n| n.op == "GroupQueryAttention"), "{name} {ep}: GroupQueryAttention in an encoder");
        assert!(!model.graph.inputs.iter().any(|i| i.name.starts_with("past_")), "{name} {ep}: a KV cache input in an encoder");
        if ep == "cpu" {
            assert!(model.graph.nodes.iter().any(|n| n.op == "MultiHeadAttention"), "{name}: cpu fuses the attention");
        }
        let mut s = session(&pkg.join("model.onnx"));
        let f = feeds(&s, &reference);
        let out = run(&mut s, &f);
        let diff = max_abs_diff(out["last_hidden_state"].f32(), reference.get("last_hidden_state").f32(), None);
        assert_within(&format!("{name} {ep} f32 last_hidden_state (every position)"), &[("last_hidden_state".into(), diff)], 1e-4);
    }
}

macro_rules! encoder_parity {
    ($($test:ident => $fixture:literal),* $(,)?) => {
        $(#[test] fn $test() { super::check_parity($fixture); })*
    };
}

/// One test per encoder of the fixture registry, named `encoder_parity::<fixture>`.
mod encoder_parity {
    tailor_tests::for_each_encoder!(encoder_parity);
}

/// A sentence-transformers folder made of tiny-bert plus `modules.json` and the pooling config.
fn sentence_folder(pooling: &str, normalize: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixture("tiny-bert")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    let mut modules = vec![
        r#"{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"}"#,
        r#"{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}"#,
    ];
    if normalize {
        modules.push(r#"{"idx":2,"name":"2","path":"2_Normalize","type":"sentence_transformers.models.Normalize"}"#);
    }
    std::fs::write(dir.path().join("modules.json"), format!("[{}]", modules.join(","))).unwrap();
    std::fs::create_dir(dir.path().join("1_Pooling")).unwrap();
    std::fs::write(dir.path().join("1_Pooling/config.json"), pooling).unwrap();
    dir
}

/// sentence-transformers' pooling of `h` [batch, seq, hidden] under `mask` [batch, seq].
fn pooled(h: &ArrayD<f32>, mask: &ArrayD<i64>, mode: &str, normalize: bool) -> ArrayD<f32> {
    let (b, s, d) = (h.shape()[0], h.shape()[1], h.shape()[2]);
    let mut out = ArrayD::<f32>::zeros(IxDyn(&[b, d]));
    for i in 0..b {
        for k in 0..d {
            let kept = (0..s).filter(|&j| mask[[i, j]] == 1);
            out[[i, k]] = match mode {
                "cls" => h[[i, 0, k]],
                "max" => (0..s).map(|j| if mask[[i, j]] == 1 { h[[i, j, k]] } else { -1e9 }).fold(f32::MIN, f32::max),
                "mean" => {
                    let n = kept.clone().count() as f32;
                    kept.map(|j| h[[i, j, k]]).sum::<f32>() / n.max(1e-9)
                }
                other => panic!("mode {other}"),
            };
        }
        if normalize {
            let norm = out.index_axis(Axis(0), i).iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            out.index_axis_mut(Axis(0), i).mapv_inplace(|x| x / norm);
        }
    }
    out
}

/// Each pooling mode the sentence-transformers files can name, with and without Normalize,
/// on a right-padded batch: `sentence_embedding` equals the pooling of the package's own
/// `last_hidden_state` (computed here), on the default and cpu packages.
#[test]
fn sentence_embedding_pools_as_the_checkpoint_files_say() {
    let reference = Reference::load(&fixture("tiny-bert"));
    let ids = reference.get("input_ids").i64();
    // Two rows: the reference sentence, and the same with its last 3 tokens padded away.
    let ids = ndarray::concatenate(Axis(0), &[ids.view(), ids.view()]).unwrap();
    let mut mask = ArrayD::<i64>::ones(ids.raw_dim());
    for j in 4..ids.shape()[1] {
        mask[[1, j]] = 0;
    }
    let feeds = vec![
        ("input_ids".to_string(), Feed::I64(ids.clone())),
        ("attention_mask".to_string(), Feed::I64(mask.clone())),
        ("token_type_ids".to_string(), Feed::I64(ArrayD::zeros(ids.raw_dim()))),
    ];
    let cases = [("mean", "pooling_mode_mean_tokens", true), ("mean", "pooling_mode_mean_tokens", false), ("cls", "pooling_mode_cls_token", true), ("max", "pooling_mode_max_tokens", false)];
    for (mode, key, normalize) in cases {
        let folder = sentence_folder(&format!(r#"{{"word_embedding_dimension":64,"{key}":true}}"#), normalize);
        for ep in ["default", "cpu"] {
            let out = tempfile::tempdir().unwrap();
            let pkg = out.path().join("pkg");
            let report = build(folder.path(), ep, None, &pkg);
            assert_eq!(report.task, Task::SentenceEmbedding, "modules.json makes the default task sentence-embedding");
            let mut s = session(&pkg.join("model.onnx"));
            let y = run(&mut s, &feeds);
            let expected = pooled(y["last_hidden_state"].f32(), &mask, mode, normalize);
            let diff = max_abs_diff(y["sentence_embedding"].f32(), &expected, None);
            assert!(diff < 1e-5, "{mode} normalize={normalize} {ep}: sentence_embedding is {diff} from the pooled last_hidden_state");
        }
    }
}

/// Max pooling in an f16 package (the GPU tables' dtype): the masked tokens' floor is f16's
/// lowest value, not sentence-transformers' -1e9 (past f16's range, which the build refuses).
#[test]
fn max_pooling_builds_in_f16_with_f16s_lowest_floor() {
    let folder = sentence_folder(r#"{"word_embedding_dimension":64,"pooling_mode_max_tokens":true}"#, false);
    let out = tempfile::tempdir().unwrap();
    let pkg = out.path().join("pkg");
    let req = BuildRequest { ep: "default".into(), dtype: ir::DType::F16, ..BuildRequest::new(folder.path(), &pkg) };
    builder::build(&req, &mut |_| {}).unwrap_or_else(|e| panic!("f16 max-pooling build failed: {e}"));
    let model = ir::load_model(&pkg.join("model.onnx")).unwrap();
    let floor = model.graph.initializers.iter().find(|(n, _)| n.ends_with("masked_value")).map(|(_, r)| r.materialize().unwrap()).expect("the pooling floor");
    assert_eq!(floor, half::f16::MIN.to_le_bytes().to_vec());
}

#[test]
fn the_task_defaults_from_the_checkpoint_and_a_wrong_one_is_refused() {
    let open = |p: &Path| models::Checkpoint::open(p).unwrap();
    assert_eq!(Task::default_for(&open(&fixture("tiny-bert"))).unwrap(), Task::FeatureExtraction);
    assert_eq!(Task::default_for(&open(&fixture("tiny-roberta"))).unwrap(), Task::FeatureExtraction);
    assert_eq!(Task::default_for(&open(&fixture("tiny-llama"))).unwrap(), Task::CausalLm);
    let folder = sentence_folder(r#"{"pooling_mode_mean_tokens":true}"#, true);
    assert_eq!(Task::default_for(&open(folder.path())).unwrap(), Task::SentenceEmbedding);
    let e = Task::CausalLm.check(&open(&fixture("tiny-bert"))).unwrap_err().to_string();
    assert!(e.contains("is an encoder") && e.contains("--task feature-extraction"), "{e}");
    let e = Task::FeatureExtraction.check(&open(&fixture("tiny-llama"))).unwrap_err().to_string();
    assert!(e.contains("is a decoder") && e.contains("--task causal-lm"), "{e}");
    let e = Task::SentenceEmbedding.check(&open(&fixture("tiny-bert"))).unwrap_err().to_string();
    assert!(e.contains("no modules.json"), "{e}");
    // The same checkpoint as feature-extraction: only last_hidden_state.
    let (model, _) = builder::optimized_model_for(folder.path(), Some(Task::FeatureExtraction), "cpu", ir::DType::F32, false, None).unwrap();
    let outputs: Vec<&str> = model.graph.outputs.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(outputs, ["last_hidden_state"]);
    let (model, _) = builder::optimized_model_for(folder.path(), None, "cpu", ir::DType::F32, false, None).unwrap();
    let outputs: Vec<&str> = model.graph.outputs.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(outputs, ["last_hidden_state", "sentence_embedding"]);
    // Inputs: token types only where the model has more than one.
    let inputs = |m: &ir::Model| m.graph.inputs.iter().map(|i| i.name.clone()).collect::<Vec<_>>();
    assert_eq!(inputs(&model), ["input_ids", "attention_mask", "token_type_ids"]);
    let (roberta, _) = builder::optimized_model(&fixture("tiny-roberta"), "cpu", ir::DType::F32, false).unwrap();
    assert_eq!(inputs(&roberta), ["input_ids", "attention_mask"]);
}

/// The tables say which rules run for which role: no encoder plan lists a rule that emits
/// GroupQueryAttention or reads a KV cache, every table that runs them for decoders excludes
/// them for encoders with a why, and a table without an encoder plan is refused by name.
#[test]
fn encoder_plans_never_run_the_decoder_rules() {
    let sets = EpSets::builtin().unwrap();
    let decoder_only = ["fuse.gqa_rotary", "fuse.gqa", "fuse.pack_qkv", "lower.if_to_where", "lower.separate_rope", "lower.rotary_to_contrib"];
    let mut plans = 0;
    for name in sets.names() {
        let t = sets.get(name).unwrap();
        for dtype in t.role_dtypes(Role::Encoder) {
            let plan = t.role_plan(Role::Encoder, dtype).unwrap();
            plans += 1;
            for (_, r) in plan.pipeline() {
                assert!(!decoder_only.contains(&r.id.as_str()), "{name} encoder {dtype} runs decoder rule {}", r.id);
            }
            for rule in ["fuse.gqa_rotary", "fuse.gqa"] {
                if t.dtype(dtype).is_some_and(|p| p.runs(rule)) {
                    let ex = t.excluded_for(Role::Encoder, rule, dtype).unwrap_or_else(|| panic!("{name}: {rule} not excluded for encoders"));
                    assert!(!ex.why.trim().is_empty());
                }
            }
        }
    }
    assert!(plans >= 10, "only {plans} encoder plans");
    // The decoder's plan is untouched by a role exclusion.
    let cpu = sets.get("cpu").unwrap();
    assert!(cpu.excluded("fuse.gqa", ir::DType::F32).is_none() && cpu.excluded_for(Role::Encoder, "fuse.gqa", ir::DType::F32).is_some());
    let text = "[ep]\nname = \"x\"\nprovider = \"CPUExecutionProvider\"\n[role.decoder.f32]\nfuse = []\n";
    let one = EpSets::from_sources([("x.toml".to_string(), text.to_string())]).unwrap();
    let e = one.role_plan("x", Role::Encoder, ir::DType::F32).unwrap_err().to_string();
    assert!(e.contains("has no [role.encoder.f32] section") && e.contains("encoder plans are: none"), "{e}");
}
