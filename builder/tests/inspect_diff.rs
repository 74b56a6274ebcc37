//! `tailor inspect` and `tailor diff` on packages the binary builds: what inspect reports, its JSON form, a
//! genai_config.json that does not match the graph, and a folder that is no package.

mod common;

use common::*;
use serde_json::Value;
use std::process::Command;

fn inspect(dir: &std::path::Path, json: bool) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tailor"));
    cmd.arg("inspect").arg(dir);
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn reports_a_quantized_cpu_package() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-qwen2-tied-mqa", &model);
    let pkg = dir.path().join("pkg");
    let r = tailor(&model, &pkg, &["--ep", "cpu", "--quant", "int4"]);
    assert!(r.status.success(), "{}", r.stderr);

    let (ok, text, err) = inspect(&pkg, false);
    assert!(ok, "{err}");
    for needle in [
        "ep cpu, dtype f32, model type qwen2",
        "quantized: int4 matmul_nbits block 32 symmetric, 11 tensors",
        "input_ids i64[batch_size, sequence_length]",
        "com.microsoft: GatherBlockQuantized x1, GroupQueryAttention x2, MatMulNBits x11",
        "fired [decoder]: fuse.gqa_rotary x2",
        "model.embed_tokens.weight/quant/data u8[512, 2, 16] 16384 B",
        "genai_config.json: matches the graph's inputs and outputs",
    ] {
        assert!(text.contains(needle), "inspect lacks `{needle}`:\n{text}");
    }

    let (ok, json, _) = inspect(&pkg, true);
    assert!(ok);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["ops"]["com.microsoft"]["MatMulNBits"], 11);
    assert_eq!(v["quantization"]["tensors"], 11);
    assert_eq!(v["fused"]["decoder"]["fuse.skip_rms_norm"], 4);
    let data = std::fs::metadata(pkg.join("model.onnx.data")).unwrap().len();
    assert_eq!(v["data_bytes"], data);

    // A genai_config.json naming an input the graph lacks is reported.
    let cfg_path = pkg.join("genai_config.json");
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&cfg_path).unwrap()).unwrap();
    cfg["model"]["decoder"]["inputs"]["position_ids"] = "positions".into();
    std::fs::write(&cfg_path, serde_json::to_vec(&cfg).unwrap()).unwrap();
    let (ok, text, _) = inspect(&pkg, false);
    assert!(ok && text.contains("model.decoder.inputs.position_ids names `positions`, which the graph's inputs lack"), "{text}");
}

#[test]
fn a_float_package_and_a_folder_that_is_no_package() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-llama", &model);
    let pkg = dir.path().join("pkg");
    assert!(tailor(&model, &pkg, &[]).status.success());
    let (ok, text, _) = inspect(&pkg, false);
    assert!(ok && text.contains("float weights") && text.contains("ep default") && text.contains("ai.onnx: "), "{text}");
    assert!(!text.contains("com.microsoft"), "{text}");

    let (ok, _, err) = inspect(&model, false);
    assert!(!ok && err.contains("is not a package: it has no model.onnx") && !err.contains("panicked"), "{err}");
}

fn diff(a: &std::path::Path, b: &std::path::Path) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tailor")).arg("diff").arg(a).arg(b).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn diff_exit_codes_say_whether_two_packages_mean_the_same_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-llama", &model);
    let build = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let r = tailor(&model, &out, extra);
        assert!(r.status.success(), "{}", r.stderr);
        out
    };
    let (a, b) = (build("a", &["--ep", "cpu"]), build("b", &["--ep", "cpu"]));
    // Two builds of one checkpoint with the same options: the same model (their reports differ
    // in timings and paths).
    let (code, text, _) = diff(&a, &b);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.starts_with("same model"), "{text}");

    let c = build("c", &["--ep", "default"]);
    let (code, text, _) = diff(&a, &c);
    assert_eq!(code, Some(1), "{text}");
    for needle in ["different models", "op com.microsoft:GroupQueryAttention: 2 in A, 0 in B", "fired decoder fuse.gqa_rotary: 2 in A, 0 in B"] {
        assert!(text.contains(needle), "diff lacks `{needle}`:\n{text}");
    }

    // One byte of one tensor changed: named, exit 1.
    let data = b.join("model.onnx.data");
    let mut bytes = std::fs::read(&data).unwrap();
    let at = bytes.iter().position(|&x| x != 0).unwrap();
    bytes[at] ^= 0xff;
    std::fs::write(&data, bytes).unwrap();
    let (code, text, _) = diff(&a, &b);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("tensors with other bytes (1):"), "{text}");

    // Not a package: exit 2 with the reason.
    let (code, _, err) = diff(&a, &model);
    assert_eq!(code, Some(2));
    assert!(err.contains("is not a package"), "{err}");
}
