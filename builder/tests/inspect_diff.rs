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
        "quantized: int4 matmul_nbits block 32 symmetric, method rtn, 11 tensors",
        "input_ids i64[batch_size, sequence_length]",
        "com.microsoft: GatherBlockQuantized x1, GroupQueryAttention x2, MatMulNBits x11",
        "fired [decoder]: fuse.gqa_rotary x2",
        "model.embed_tokens.weight/quant/data u8[512, 2, 16] 16384 B",
        "genai_config.json: matches every part's inputs and outputs",
        "part model.onnx (decoder, plan [role.decoder.f32])",
    ] {
        assert!(text.contains(needle), "inspect lacks `{needle}`:\n{text}");
    }

    let (ok, json, _) = inspect(&pkg, true);
    assert!(ok);
    let v: Value = serde_json::from_str(&json).unwrap();
    let part = &v["parts"][0];
    assert_eq!((part["file"].as_str(), part["role"].as_str(), part["plan"].as_str()), (Some("model.onnx"), Some("decoder"), Some("[role.decoder.f32]")));
    assert_eq!(part["ops"]["com.microsoft"]["MatMulNBits"], 11);
    assert_eq!(part["quantization"]["tensors"], 11);
    assert_eq!(part["fused"]["fuse.skip_rms_norm"], 4);
    let data = std::fs::metadata(pkg.join("model.onnx.data")).unwrap().len();
    assert_eq!(part["data_bytes"], data);
    assert_eq!(part["external_data"]["files"][0], "model.onnx.data");

    // A genai_config.json naming an input the graph lacks is reported.
    let cfg_path = pkg.join("genai_config.json");
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&cfg_path).unwrap()).unwrap();
    cfg["model"]["decoder"]["inputs"]["position_ids"] = "positions".into();
    std::fs::write(&cfg_path, serde_json::to_vec(&cfg).unwrap()).unwrap();
    let (ok, text, _) = inspect(&pkg, false);
    assert!(ok && text.contains("model.decoder.inputs.position_ids names `positions`, which the model.onnx graph's inputs lack"), "{text}");

    // Tensors of two widths (an int8 table and head beside int4 projections) show both.
    let mixed = dir.path().join("mixed");
    let r = tailor(&model, &mixed, &["--ep", "cpu", "--quant", "int4", "--quant-embeddings", "int8"]);
    assert!(r.status.success(), "{}", r.stderr);
    let (ok, text, _) = inspect(&mixed, false);
    assert!(ok && text.contains("quantized: int4+int8 matmul_nbits block 32 symmetric"), "{text}");
    let (_, json, _) = inspect(&mixed, true);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["parts"][0]["quantization"]["bit_widths"], serde_json::json!([4, 8]));

    // A view the writer stored once (the tied int4 table's bytes on `default`) says so.
    let portable = dir.path().join("portable");
    let r = tailor(&model, &portable, &["--ep", "default", "--quant", "int4", "--quant-embeddings", "int4"]);
    assert!(r.status.success(), "{}", r.stderr);
    let (ok, text, _) = inspect(&portable, false);
    let needle = "model.embed_tokens.weight/quant/data/bytes u8[16384] 16384 B (shares its stored bytes with model.embed_tokens.weight/quant/data)";
    assert!(ok && text.contains(needle), "inspect lacks `{needle}`:\n{text}");
    let (_, json, _) = inspect(&portable, true);
    let v: Value = serde_json::from_str(&json).unwrap();
    let largest = v["parts"][0]["largest"].as_array().unwrap();
    let head = largest.iter().find(|t| t["name"] == "model.embed_tokens.weight/quant/data").expect("the head's data is listed");
    assert!(head.get("same_bytes_as").is_none(), "{head}");
    let view = largest.iter().find(|t| t["name"] == "model.embed_tokens.weight/quant/data/bytes").expect("the view is listed");
    assert_eq!(view["same_bytes_as"], "model.embed_tokens.weight/quant/data");
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

/// A vision-language package: inspect lists its three parts, each with its file, role, plan,
/// ops, fusions, sizes and external data, and checks genai_config.json's vision and embedding
/// sections against their parts; the decoder alone is quantized.
#[test]
fn inspect_shows_every_part_of_a_vision_language_package() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-qwen2_5_vl", &model);
    let pkg = dir.path().join("pkg");
    let r = tailor(&model, &pkg, &["--ep", "cpu", "--quant", "int4"]);
    assert!(r.status.success(), "{}", r.stderr);

    let (ok, text, err) = inspect(&pkg, false);
    assert!(ok, "{err}");
    for needle in [
        "ep cpu, dtype f32, model type qwen2_5_vl",
        "parts: vision.onnx (vision), embedding.onnx (embedding), model.onnx (decoder)",
        "part vision.onnx (vision, plan [role.vision.f32])",
        "part embedding.onnx (embedding, plan [role.embedding.f32])",
        "part model.onnx (decoder, plan [role.decoder.f32])",
        "    pixel_values f32[",
        "    image_grid_thw i64[",
        "    inputs_embeds f32[",
        "external data: ",
        "fired [decoder]: ",
        "genai_config.json: matches every part's inputs and outputs",
    ] {
        assert!(text.contains(needle), "inspect lacks `{needle}`:\n{text}");
    }
    // Each part's section holds its own ops: the vision section has no GroupQueryAttention.
    let vision = text.split("part vision.onnx").nth(1).unwrap().split("\npart ").next().unwrap();
    assert!(!vision.contains("GroupQueryAttention") && vision.contains("float weights"), "{vision}");
    assert!(vision.contains("size: vision.onnx ") && vision.contains("vision.onnx.data"), "{vision}");

    let (ok, json, _) = inspect(&pkg, true);
    assert!(ok);
    let v: Value = serde_json::from_str(&json).unwrap();
    let parts = v["parts"].as_array().unwrap();
    let files: Vec<(&str, &str)> = parts.iter().map(|p| (p["file"].as_str().unwrap(), p["role"].as_str().unwrap())).collect();
    assert_eq!(files, [("vision.onnx", "vision"), ("embedding.onnx", "embedding"), ("model.onnx", "decoder")]);
    for p in parts {
        let file = p["file"].as_str().unwrap();
        let data = std::fs::metadata(pkg.join(format!("{file}.data"))).map(|m| m.len()).unwrap_or(0);
        assert_eq!(p["data_bytes"], data, "{file}");
        assert_eq!(p["model_bytes"], std::fs::metadata(pkg.join(file)).unwrap().len(), "{file}");
        let external = p["external_data"]["tensors"].as_u64().unwrap();
        assert_eq!(external > 0, data > 0, "{file}: {}", p["external_data"]);
    }
    assert!(parts[0]["quantization"].is_null() && parts[1]["quantization"].is_null(), "only the decoder is quantized");
    assert_eq!(parts[2]["quantization"]["bits"], 4);
    assert!(parts[2]["ops"]["com.microsoft"]["MatMulNBits"].as_u64().unwrap() > 0);
    assert!(parts[0]["ops"]["com.microsoft"].get("MatMulNBits").is_none(), "{}", parts[0]["ops"]);
    assert!(parts[1]["ops"]["ai.onnx"]["Gather"].as_u64().unwrap() > 0, "{}", parts[1]["ops"]);

    // genai_config.json's vision section naming an input the vision graph lacks, and an
    // embedding file that is no part, are reported against their sections.
    let cfg_path = pkg.join("genai_config.json");
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&cfg_path).unwrap()).unwrap();
    cfg["model"]["vision"]["inputs"]["image_grid_thw"] = "grid".into();
    cfg["model"]["embedding"]["filename"] = "embed.onnx".into();
    std::fs::write(&cfg_path, serde_json::to_vec(&cfg).unwrap()).unwrap();
    let (ok, text, _) = inspect(&pkg, false);
    assert!(ok, "{text}");
    for needle in [
        "model.vision.inputs.image_grid_thw names `grid`, which the vision.onnx graph's inputs lack",
        "model.embedding.filename names `embed.onnx`, which is no part of the package",
    ] {
        assert!(text.contains(needle), "inspect lacks `{needle}`:\n{text}");
    }

    // A part the report lists and the package lacks is an error naming it.
    std::fs::remove_file(pkg.join("vision.onnx")).unwrap();
    let (ok, _, err) = inspect(&pkg, false);
    assert!(!ok && err.contains("lacks its vision part vision.onnx") && !err.contains("panicked"), "{err}");
}

/// diff compares two vision-language packages part by part: two builds are the same model;
/// cpu against default differs in the decoder's ops and fusions, each under its part; a part
/// one package lacks is a difference.
#[test]
fn diff_compares_vision_language_packages_part_by_part() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-qwen2_5_vl", &model);
    let build = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let r = tailor(&model, &out, extra);
        assert!(r.status.success(), "{}", r.stderr);
        out
    };
    let (a, b, c) = (build("a", &["--ep", "cpu"]), build("b", &["--ep", "cpu"]), build("c", &["--ep", "default"]));
    let (code, text, _) = diff(&a, &b);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.starts_with("same model"), "{text}");

    let (code, text, _) = diff(&a, &c);
    assert_eq!(code, Some(1), "{text}");
    let decoder = text.split("part model.onnx (decoder): differs").nth(1).unwrap_or_else(|| panic!("no decoder part:\n{text}"));
    assert!(decoder.contains("op com.microsoft:GroupQueryAttention: 2 in A, 0 in B") && decoder.contains("fired decoder fuse.gqa: 2 in A, 0 in B"), "{text}");
    assert!(text.contains("part embedding.onnx (embedding): same"), "{text}");

    let out = Command::new(env!("CARGO_BIN_EXE_tailor")).args(["diff", "--json"]).arg(&a).arg(&c).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let parts: Vec<(&str, bool)> = v["parts"].as_array().unwrap().iter().map(|p| (p["file"].as_str().unwrap(), p["same_model"].as_bool().unwrap())).collect();
    assert_eq!(parts[1..], [("embedding.onnx", true), ("model.onnx", false)], "{v}");
    assert_eq!(v["same_model"], false);

    // B without its vision part (the report no longer lists it): that part is only in A.
    let report_path = b.join("build_report.json");
    let mut report: Value = serde_json::from_slice(&std::fs::read(&report_path).unwrap()).unwrap();
    report["parts"].as_array_mut().unwrap().retain(|p| p["role"] != "vision");
    std::fs::write(&report_path, serde_json::to_vec(&report).unwrap()).unwrap();
    std::fs::remove_file(b.join("vision.onnx")).unwrap();
    let (code, text, _) = diff(&a, &b);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("part vision.onnx (vision) only in A") && text.contains("part model.onnx (decoder): same"), "{text}");
    let (code, text, _) = diff(&b, &a);
    assert_eq!(code, Some(1));
    assert!(text.contains("part vision.onnx (vision) only in B"), "{text}");
}
