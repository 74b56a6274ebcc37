//! Bad input through the real `tailor` binary: every case exits non-zero with a message that
//! names the file, key or tensor at fault (and both shapes where relevant), never panics,
//! leaves no output folder (nor staging folder) behind, and leaves an existing output folder
//! given with `--force` untouched.

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(name)
}

/// A writable copy of a fixture's checkpoint files (no reference outputs).
fn copy_fixture(name: &str, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(fixture(name)).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap();
        if !file.to_string_lossy().starts_with("reference") {
            std::fs::copy(&path, dst.join(file)).unwrap();
        }
    }
}

/// A safetensors tensor: dtype string, shape, bytes.
type Tensor = (String, Vec<usize>, Vec<u8>);

fn read_safetensors(path: &Path) -> Vec<(String, Tensor)> {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: Map<String, Value> = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    let mut out: Vec<(String, Tensor)> = header
        .into_iter()
        .filter(|(k, _)| k != "__metadata__")
        .map(|(name, v)| {
            let dtype = v["dtype"].as_str().unwrap().to_string();
            let shape = v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
            let offsets: Vec<usize> = v["data_offsets"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
            (name, (dtype, shape, data[offsets[0]..offsets[1]].to_vec()))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn write_safetensors(path: &Path, tensors: &[(String, Tensor)]) {
    let mut header = Map::new();
    let mut data = Vec::new();
    for (name, (dtype, shape, bytes)) in tensors {
        let start = data.len();
        data.extend_from_slice(bytes);
        header.insert(
            name.clone(),
            serde_json::json!({ "dtype": dtype, "shape": shape, "data_offsets": [start, data.len()] }),
        );
    }
    let mut text = serde_json::to_vec(&Value::Object(header)).unwrap();
    while !text.len().is_multiple_of(8) {
        text.push(b' ');
    }
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend(text);
    out.extend(data);
    std::fs::write(path, out).unwrap();
}

struct Outcome {
    status: std::process::ExitStatus,
    stderr: String,
}

fn tailor(model: &Path, output: &Path, extra: &[&str]) -> Outcome {
    let out = Command::new(env!("CARGO_BIN_EXE_tailor"))
        .args(["build", "--model"])
        .arg(model)
        .arg("--output")
        .arg(output)
        .args(extra)
        .output()
        .expect("run tailor");
    Outcome { status: out.status, stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
}

/// The folder's files and their bytes, to prove it was not touched.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

/// Runs a failing build twice: into a fresh path (nothing may exist afterwards) and with
/// `--force` over an existing package-like folder (it must be untouched). Both messages must
/// contain every string of `expect`.
fn assert_fails(model: &Path, extra: &[&str], expect: &[&str]) {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("pkg");
    let r = tailor(model, &out, extra);
    let ctx = format!("tailor build --model {} {extra:?}\nstderr:\n{}", model.display(), r.stderr);
    assert!(!r.status.success(), "expected failure: {ctx}");
    assert!(!r.stderr.contains("panicked"), "panicked: {ctx}");
    for e in expect {
        assert!(r.stderr.contains(e), "message lacks `{e}`: {ctx}");
    }
    assert!(!out.exists(), "output folder exists after a failed build: {ctx}");
    let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "left behind {left:?}: {ctx}");

    let existing = root.path().join("existing");
    std::fs::create_dir(&existing).unwrap();
    std::fs::write(existing.join("model.onnx"), b"previous package").unwrap();
    std::fs::write(existing.join("genai_config.json"), b"{}").unwrap();
    let before = snapshot(&existing);
    let mut forced = extra.to_vec();
    forced.push("--force");
    let r = tailor(model, &existing, &forced);
    assert!(!r.status.success(), "expected failure with --force: {}", r.stderr);
    assert!(!r.stderr.contains("panicked"), "panicked with --force: {}", r.stderr);
    assert_eq!(snapshot(&existing), before, "--force folder changed by a failed build: {}", r.stderr);
    let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("existing")], "left behind {left:?}");
}

/// A copy of tiny-llama with `edit` applied to its config.json object.
fn with_config(dir: &Path, edit: impl FnOnce(&mut Map<String, Value>)) -> PathBuf {
    let model = dir.join("model");
    copy_fixture("tiny-llama", &model);
    let mut config: Map<String, Value> = serde_json::from_slice(&std::fs::read(model.join("config.json")).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(model.join("config.json"), serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    model
}

#[test]
fn missing_config_json() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-llama", &model);
    std::fs::remove_file(model.join("config.json")).unwrap();
    assert_fails(&model, &[], &["config.json", "cannot read"]);
}

#[test]
fn malformed_config_json() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-llama", &model);
    std::fs::write(model.join("config.json"), b"{\"model_type\": \"llama\", \"hidden_size\": 64,").unwrap();
    assert_fails(&model, &[], &["config.json", "not valid JSON"]);
}

#[test]
fn config_key_of_the_wrong_type_or_missing() {
    let dir = tempfile::tempdir().unwrap();
    let model = with_config(dir.path(), |c| {
        c.insert("num_attention_heads".into(), Value::String("four".into()));
    });
    assert_fails(&model, &[], &["config.json", "`num_attention_heads`", "positive integer"]);
    let dir = tempfile::tempdir().unwrap();
    let model = with_config(dir.path(), |c| {
        c.remove("vocab_size");
    });
    assert_fails(&model, &[], &["config.json", "`vocab_size`", "missing"]);
    let dir = tempfile::tempdir().unwrap();
    let model = with_config(dir.path(), |c| {
        c.insert("rope_scaling".into(), serde_json::json!({"rope_type": "dynamic", "factor": 2.0}));
    });
    assert_fails(&model, &[], &["config.json", "dynamic", "default, linear, llama3, yarn, longrope"]);
}

#[test]
fn unknown_model_type_lists_the_supported_ones() {
    let dir = tempfile::tempdir().unwrap();
    let model = with_config(dir.path(), |c| {
        c.insert("model_type".into(), Value::String("falcon".into()));
    });
    assert_fails(&model, &[], &["config.json", "`falcon`", "llama", "mistral", "qwen2", "qwen3", "phi3", "gpt2"]);
}

#[test]
fn missing_tensor_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-llama", &model);
    let file = model.join("model.safetensors");
    let tensors: Vec<_> =
        read_safetensors(&file).into_iter().filter(|(n, _)| n != "model.layers.1.mlp.up_proj.weight").collect();
    write_safetensors(&file, &tensors);
    assert_fails(&model, &[], &["model.layers.1.mlp.up_proj.weight", "not found"]);
}

#[test]
fn mis_shaped_tensor_names_both_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-llama", &model);
    let file = model.join("model.safetensors");
    let mut tensors = read_safetensors(&file);
    for (name, (_, shape, bytes)) in &mut tensors {
        if name == "model.layers.0.self_attn.k_proj.weight" {
            // [32, 64] -> [16, 64]: half the rows.
            *shape = vec![16, 64];
            bytes.truncate(16 * 64 * 4);
        }
    }
    write_safetensors(&file, &tensors);
    assert_fails(&model, &[], &["model.safetensors", "model.layers.0.self_attn.k_proj.weight", "[16, 64]", "[32, 64]"]);
}

#[test]
fn truncated_safetensors_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-llama", &model);
    let file = model.join("model.safetensors");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    assert_fails(&model, &[], &["model.safetensors", "truncated or corrupt"]);
    // Cut inside the 8-byte length prefix, and an empty file.
    std::fs::write(&file, &bytes[..5]).unwrap();
    assert_fails(&model, &[], &["model.safetensors"]);
    std::fs::write(&file, b"").unwrap();
    assert_fails(&model, &[], &["model.safetensors"]);
}

#[test]
fn corrupt_safetensors_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-llama", &model);
    let file = model.join("model.safetensors");
    let mut bytes = std::fs::read(&file).unwrap();
    for b in &mut bytes[8..40] {
        *b = 0xff;
    }
    std::fs::write(&file, &bytes).unwrap();
    assert_fails(&model, &[], &["model.safetensors", "not a valid safetensors file"]);
    // A header length far beyond the file.
    bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(&file, &bytes).unwrap();
    assert_fails(&model, &[], &["model.safetensors"]);
}

#[test]
fn shard_index_naming_a_missing_shard() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-llama-sharded", &model);
    std::fs::remove_file(model.join("model-00002-of-00003.safetensors")).unwrap();
    assert_fails(&model, &[], &["model.safetensors.index.json", "model-00002-of-00003.safetensors"]);
}

#[test]
fn unsupported_dtype_lists_the_supported_ones() {
    assert_fails(&fixture("tiny-llama"), &["--dtype", "f64"], &["f64", "f32", "f16", "bf16"]);
    assert_fails(&fixture("tiny-llama"), &["--dtype", "int4"], &["int4", "f32, f16, bf16"]);
}

#[test]
fn non_empty_output_without_force_is_refused_and_untouched() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("pkg");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep.txt"), b"mine").unwrap();
    let before = snapshot(&out);
    let r = tailor(&fixture("tiny-llama"), &out, &[]);
    assert!(!r.status.success(), "{}", r.stderr);
    assert!(r.stderr.contains("not empty") && r.stderr.contains("--force"), "{}", r.stderr);
    assert!(r.stderr.contains(&out.display().to_string()), "message names the folder: {}", r.stderr);
    assert_eq!(snapshot(&out), before);
    let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("pkg")]);
}

/// The same checkpoint builds once the input is fixed: the cases above fail for their stated
/// reason, not because the harness cannot build at all.
#[test]
fn a_good_checkpoint_builds() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("pkg");
    let r = tailor(&fixture("tiny-llama"), &out, &[]);
    assert!(r.status.success(), "{}", r.stderr);
    assert!(out.join("model.onnx").is_file());
}

/// An (EP, dtype) pair no table lists is refused before any weight is read: the checkpoint
/// here has a corrupt weights file, and the message is about the pair, naming those that exist.
#[test]
fn unknown_ep_dtype_pair_is_refused_before_reading_weights() {
    let root = tempfile::tempdir().unwrap();
    let model = root.path().join("model");
    copy_fixture("tiny-llama", &model);
    std::fs::write(model.join("model.safetensors"), b"not a safetensors file").unwrap();
    assert_fails(&model, &["--ep", "cuda", "--dtype", "f32"], &["(cuda, f32)", "cpu/f32", "cuda/f16", "default/f32"]);
}

/// A cpu build reports what its rules did: one line per rule on stderr, per-node records with
/// `--explain`, JSON on stdout with `--diag-format json`, and build_report.json in the package.
#[test]
fn cpu_build_reports_its_rules() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("pkg");
    let r = tailor(&fixture("tiny-llama"), &out, &["--ep", "cpu", "--explain", "--diag-format", "json"]);
    assert!(r.status.success(), "{}", r.stderr);
    let output = Command::new(env!("CARGO_BIN_EXE_tailor"))
        .args(["build", "--ep", "cpu", "--force", "--diag-format", "json", "--model"])
        .arg(fixture("tiny-llama"))
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success());
    let json: Value = serde_json::from_slice(&output.stdout).expect("--diag-format json prints JSON on stdout");
    let rules = json["diagnostics"]["rules"].as_array().unwrap();
    let gqa = rules.iter().find(|r| r["rule"] == "fuse.gqa_rotary").expect("fuse.gqa_rotary reported");
    assert_eq!(gqa["fired"], 2);
    assert_eq!(gqa["candidates"], 2);

    let text = tailor(&fixture("tiny-llama"), &out, &["--ep", "cpu", "--force", "--explain"]);
    assert!(text.status.success(), "{}", text.stderr);
    assert!(text.stderr.contains("fuse.skip_rms_norm") && text.stderr.contains("candidates=5 fired=4"), "{}", text.stderr);
    assert!(text.stderr.contains("failed match.sum"), "explain shows the failed step: {}", text.stderr);

    let report: Value = serde_json::from_str(&std::fs::read_to_string(out.join("build_report.json")).unwrap()).unwrap();
    assert_eq!(report["ep"], "cpu");
    assert_eq!(report["dtype"], "f32");
    assert_eq!(report["validation"]["ok"], true);
    let config: Value = serde_json::from_str(&std::fs::read_to_string(out.join("genai_config.json")).unwrap()).unwrap();
    assert_eq!(config["search"]["past_present_share_buffer"], true, "GQA shares the KV buffer");
}

/// A write that fails midway (here a file-size limit, `ulimit -f`) is a clear error naming the
/// file, with a non-zero exit and nothing left behind, not a crash by signal.
#[test]
fn a_failing_write_is_reported_and_leaves_nothing() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("pkg");
    let script = "ulimit -f 64 && exec \"$0\" build --model \"$1\" --output \"$2\"";
    let r = Command::new("sh")
        .args(["-c", script, env!("CARGO_BIN_EXE_tailor")])
        .arg(fixture("tiny-llama"))
        .arg(&out)
        .output()
        .expect("run sh");
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "exits with an error, not a signal: {stderr}");
    assert!(stderr.contains("model.onnx.data") && stderr.contains("too large"), "names the file and the cause: {stderr}");
    let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "nothing left behind: {left:?}");
}
