//! `--kv-cache` / `--max-length` through the real `tailor` binary: mistakes are refused with
//! what to change, a table that does not offer the static cache is refused with its reason
//! before any weight is read, and a static package's genai_config.json shares the buffer.

mod common;

use common::*;
use serde_json::Value;

#[test]
fn kv_cache_mistakes_are_refused_saying_what_to_change() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-llama", &model);
    fails(&model, &["--max-length", "64"], &["--max-length sizes a static KV cache", "--kv-cache static"]);
    fails(&model, &["--kv-cache", "static"], &["--kv-cache static needs --max-length"]);
    fails(&model, &["--kv-cache", "static", "--max-length", "0"], &["at least 1 slot"]);
    fails(&model, &["--kv-cache", "static", "--max-length", "x"], &["not a cache length"]);
    fails(&model, &["--kv-cache", "paged"], &["paged"]);
    let max_positions = {
        let c: Value = serde_json::from_slice(&std::fs::read(model.join("config.json")).unwrap()).unwrap();
        c["max_position_embeddings"].as_u64().unwrap()
    };
    let too_long = (max_positions + 1).to_string();
    fails(&model, &["--kv-cache", "static", "--max-length", &too_long], &["max_position_embeddings", "--max-length"]);
}

#[test]
fn a_table_without_the_static_form_refuses_it_with_its_reason_before_reading_weights() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-llama", &model);
    // Weights that cannot be read: a refusal that came after reading them would say so instead.
    std::fs::write(model.join("model.safetensors"), b"not safetensors").unwrap();
    for ep in ["dml", "webgpu", "trt-rtx"] {
        let dtype = "f16";
        fails(
            &model,
            &["--ep", ep, "--dtype", dtype, "--kv-cache", "static", "--max-length", "64"],
            &["--kv-cache static", &format!("({ep}, {dtype})"), "[kv_cache.static]", "Not yet"],
        );
    }
}

#[test]
fn an_encoder_has_no_kv_cache_to_make_static() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-bert", &model);
    fails(&model, &["--kv-cache", "static", "--max-length", "64"], &["has no KV cache"]);
}

#[test]
fn a_static_package_shares_the_buffer_in_genai_and_says_its_length() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-llama", &model);
    for (flags, share, max_length) in [(vec!["--kv-cache", "static", "--max-length", "48"], true, Some(48)), (vec![], false, None)] {
        let out = dir.path().join(format!("pkg{}", flags.len()));
        let r = tailor(&model, &out, &flags);
        assert!(r.status.success(), "{flags:?}: {}", r.stderr);
        let g: Value = serde_json::from_slice(&std::fs::read(out.join("genai_config.json")).unwrap()).unwrap();
        assert_eq!(g["search"]["past_present_share_buffer"], Value::Bool(share), "{flags:?}");
        if let Some(n) = max_length {
            assert_eq!(g["search"]["max_length"], Value::from(n), "{flags:?}");
        }
    }
}

/// cpu and cuda build the GroupQueryAttention static form: one GroupQueryAttention per layer
/// over the fixed past buffers, no TensorScatter left, genai sharing the buffer of N slots.
#[test]
fn cpu_and_cuda_build_the_group_query_attention_static_form() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-llama", &model);
    for (ep, dtype) in [("cpu", "f32"), ("cuda", "f16"), ("cuda", "bf16")] {
        let out = dir.path().join(format!("{ep}-{dtype}"));
        let r = tailor(&model, &out, &["--ep", ep, "--dtype", dtype, "--kv-cache", "static", "--max-length", "48"]);
        assert!(r.status.success(), "{ep} {dtype}: {}", r.stderr);
        let m = ir::load_model(&out.join("model.onnx")).unwrap();
        let ops = |op: &str| m.graph.nodes.iter().filter(|n| n.op == op).count();
        assert_eq!((ops("GroupQueryAttention"), ops("TensorScatter"), ops("Attention")), (2, 0, 0), "{ep} {dtype}");
        let past = m.graph.inputs.iter().find(|v| v.name == "past_key_values.0.key").unwrap();
        assert_eq!(past.shape.as_ref().unwrap()[2], ir::Dim::Fixed(48), "{ep} {dtype}");
        let g: Value = serde_json::from_slice(&std::fs::read(out.join("genai_config.json")).unwrap()).unwrap();
        assert_eq!((g["search"]["past_present_share_buffer"].clone(), g["search"]["max_length"].clone()), (Value::Bool(true), Value::from(48)), "{ep} {dtype}");
    }
}

#[test]
fn build_help_describes_the_kv_cache_flags() {
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_tailor")).args(["build", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    for needle in ["--kv-cache", "--max-length", "TensorScatter", "[kv_cache.static]"] {
        assert!(text.contains(needle), "build --help lacks `{needle}`:\n{text}");
    }
}
