//! LoRA slots on ONNX Runtime's CPU EP (docs/adapters.md): a base package built with both
//! adapters of tests/fixtures/tiny-llama-lora, each `.onnx_adapter` file loaded with the `ort`
//! crate's `Adapter` and bound through `RunOptions` (what onnxruntime-genai does on every run):
//! prefill and decode logits within 1e-3 of the adapter's transformers + peft reference, and of
//! the base reference with no adapter bound.

use builder::lora::LoraRequest;
use builder::{build, BuildRequest};
use ndarray::{ArrayD, IxDyn};
use ort::session::{Adapter, RunOptions};
use std::path::Path;
use tailor_tests::*;

const LORA: &str = "tiny-llama-lora";

fn adapters() -> Vec<String> {
    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(fixture(LORA).join("lora.json")).unwrap()).unwrap();
    meta["adapters"].as_object().expect("lora.json lists adapters").keys().cloned().collect()
}

fn base() -> String {
    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(fixture(LORA).join("lora.json")).unwrap()).unwrap();
    meta["base_fixture"].as_str().unwrap().trim_start_matches("../").to_string()
}

fn build_with_adapters(ep: &str, dir: &Path) -> std::path::PathBuf {
    let pkg = dir.join("pkg");
    let mut req = BuildRequest::new(fixture(&base()), pkg.clone());
    req.ep = ep.into();
    req.lora = adapters().into_iter().map(|n| LoraRequest { dir: fixture(LORA).join(&n), name: n }).collect();
    build(&req, &mut |_| {}).expect("build with --lora succeeds");
    pkg
}

/// Prefill then one decode step with `adapter` bound (or none): (prefill logits, decode logits).
fn prefill_and_decode(pkg: &Path, adapter: Option<&str>, reference: &Reference) -> (ArrayD<f32>, ArrayD<f32>) {
    let model = ir::load_model(&pkg.join("model.onnx")).unwrap();
    let shape = DecoderShape::of(&model);
    let mut s = session(&pkg.join("model.onnx"));
    ort_environment();
    let mut options = RunOptions::new().unwrap();
    let _loaded = adapter.map(|name| {
        let a = Adapter::from_file(pkg.join("adapters").join(format!("{name}.onnx_adapter")), None).expect("ORT loads the adapter file");
        options.add_adapter(&a).expect("adapter binds");
        a
    });
    let ids = reference.get("input_ids").i64();
    let mask = reference.get("attention_mask").i64();
    let pos = reference.get("position_ids").i64();
    let out = run_with(&mut s, &decoder_feeds(&shape, ids, mask, pos, None), Some(&options));
    let n = ids.shape()[1];
    let step_mask = ArrayD::from_elem(IxDyn(&[1, n + 1]), 1i64);
    let step_pos = ArrayD::from_shape_vec(IxDyn(&[1, 1]), vec![n as i64]).unwrap();
    let step = run_with(&mut s, &decoder_feeds(&shape, reference.get("decode_input_ids").i64(), &step_mask, &step_pos, Some(&out)), Some(&options));
    (out["logits"].f32().clone(), step["logits"].f32().clone())
}

fn check(ep: &str) {
    let dir = tempfile::tempdir().unwrap();
    let pkg = build_with_adapters(ep, dir.path());
    let mut cases: Vec<(Option<String>, std::path::PathBuf)> = vec![(None, fixture(&base()))];
    cases.extend(adapters().into_iter().map(|n| (Some(n.clone()), fixture(LORA).join(n))));
    let base_logits = Reference::load(&fixture(&base())).get("logits").f32().clone();
    for (name, ref_dir) in cases {
        let reference = Reference::load(&ref_dir);
        let (logits, decode) = prefill_and_decode(&pkg, name.as_deref(), &reference);
        let what = format!("{ep} with adapter {name:?}");
        let diffs = vec![
            ("prefill logits".to_string(), max_abs_diff(&logits, reference.get("logits").f32(), None)),
            ("decode logits".to_string(), max_abs_diff(&decode, reference.get("decode_logits").f32(), None)),
        ];
        assert_within(&what, &diffs, 1e-3);
        if name.is_some() {
            // The adapter moves the logits far more than the tolerance: the check has teeth.
            assert!(max_abs_diff(&logits, &base_logits, None) > 0.1, "{what}: the adapter changes nothing");
        }
    }
}

#[test]
fn default_package_with_each_adapter_bound_matches_its_reference() {
    check("default");
}

#[test]
fn cpu_package_with_each_adapter_bound_matches_its_reference() {
    check("cpu");
}
