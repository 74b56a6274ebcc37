//! Shared by the CLI test files: fixture copies, safetensors editing, running the binary,
//! and listing folders.
#![allow(dead_code)]

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../../../tests/registry/mod.rs"]
mod fixture_registry;
pub use fixture_registry::fixture;

/// A writable copy of a fixture's checkpoint files (no reference outputs, no sub-folders such
/// as a pre-quantized fixture's `dequantized/`).
pub fn copy_fixture(name: &str, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(fixture(name)).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap();
        if path.is_file() && !file.to_string_lossy().starts_with("reference") {
            std::fs::copy(&path, dst.join(file)).unwrap();
        }
    }
}

/// A safetensors tensor: dtype string, shape, bytes.
pub type Tensor = (String, Vec<usize>, Vec<u8>);

pub fn read_safetensors(path: &Path) -> Vec<(String, Tensor)> {
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

pub fn write_safetensors(path: &Path, tensors: &[(String, Tensor)]) {
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

pub struct Outcome {
    pub status: std::process::ExitStatus,
    pub stderr: String,
}

pub fn tailor(model: &Path, output: &Path, extra: &[&str]) -> Outcome {
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
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
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

/// The names in `dir`, sorted: what a test expects to be left after a build.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// A copy of tiny-llama in `dir/model` with `edit` applied to its config.json object.
pub fn with_config(dir: &Path, edit: impl FnOnce(&mut Map<String, Value>)) -> PathBuf {
    let model = dir.join("model");
    copy_fixture("tiny-llama", &model);
    let mut config: Map<String, Value> = serde_json::from_slice(&std::fs::read(model.join("config.json")).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(model.join("config.json"), serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    model
}

/// A llama checkpoint of about `mib` MiB of bf16 zeros, written sparse (no disk blocks, no
/// time), whose f32 build (twice `mib` on disk) is long enough to be caught mid-write by
/// [`stop_in_write`]; the config is a real llama config at that size.
pub fn big_checkpoint(dir: &Path, mib: usize) -> PathBuf {
    let model = dir.join("big-model");
    std::fs::create_dir_all(&model).unwrap();
    let (hidden, inter, vocab) = (1024usize, 2816usize, 4096usize);
    let per_layer = 4 * hidden * hidden + 3 * hidden * inter + 2 * hidden;
    let layers = ((mib << 20) / 2).saturating_sub(2 * vocab * hidden) / per_layer;
    let layers = layers.max(1);
    let config = serde_json::json!({
        "model_type": "llama", "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
        "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": vocab, "max_position_embeddings": 256,
        "rms_norm_eps": 1e-5, "tie_word_embeddings": false, "hidden_act": "silu"
    });
    std::fs::write(model.join("config.json"), serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    let mut shapes: Vec<(String, Vec<usize>)> =
        vec![("model.embed_tokens.weight".into(), vec![vocab, hidden]), ("lm_head.weight".into(), vec![vocab, hidden])];
    shapes.push(("model.norm.weight".into(), vec![hidden]));
    for i in 0..layers {
        let p = format!("model.layers.{i}");
        for (n, s) in [
            ("input_layernorm.weight", vec![hidden]),
            ("post_attention_layernorm.weight", vec![hidden]),
            ("self_attn.q_proj.weight", vec![hidden, hidden]),
            ("self_attn.k_proj.weight", vec![hidden, hidden]),
            ("self_attn.v_proj.weight", vec![hidden, hidden]),
            ("self_attn.o_proj.weight", vec![hidden, hidden]),
            ("mlp.gate_proj.weight", vec![inter, hidden]),
            ("mlp.up_proj.weight", vec![inter, hidden]),
            ("mlp.down_proj.weight", vec![hidden, inter]),
        ] {
            shapes.push((format!("{p}.{n}"), s));
        }
    }
    let mut header = Map::new();
    let mut offset = 0usize;
    for (name, shape) in &shapes {
        let len = shape.iter().product::<usize>() * 2;
        header.insert(name.clone(), serde_json::json!({"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + len]}));
        offset += len;
    }
    let mut text = serde_json::to_vec(&Value::Object(header)).unwrap();
    while !text.len().is_multiple_of(8) {
        text.push(b' ');
    }
    let mut bytes = (text.len() as u64).to_le_bytes().to_vec();
    bytes.extend(text);
    let path = model.join("model.safetensors");
    std::fs::write(&path, &bytes).unwrap();
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len((bytes.len() + offset) as u64).unwrap();
    model
}

/// Starts `tailor build` in the background.
pub fn spawn_tailor(model: &Path, output: &Path, extra: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_tailor"))
        .args(["build", "--model"])
        .arg(model)
        .arg("--output")
        .arg(output)
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run tailor")
}

/// Waits until `child`, a build of output `name` in `parent`, is writing `file` into its
/// staging folder, then stops it (SIGSTOP) so a test acts while the build is in the middle of
/// its write however fast the machine is, and however small the checkpoint (CI's disk is not
/// ours to fill); [`resume`] lets it go on. A signal sent while it is stopped is delivered on
/// [`resume`].
pub fn stop_in_write(child: &std::process::Child, parent: &Path, name: &str, file: &str) -> PathBuf {
    let staging = wait_for_staging(parent, name, file, 120);
    signal(child, libc::SIGSTOP);
    staging
}

/// Lets a build stopped by [`stop_in_write`] go on.
pub fn resume(child: &std::process::Child) {
    signal(child, libc::SIGCONT);
}

/// Sends `sig` to a child process of the test.
pub fn signal(child: &std::process::Child, sig: i32) {
    // SAFETY: sending a signal to a child process we own.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// Waits until a staging folder of output `name` holding `file` appears in `parent`
/// (the build is then writing), or panics after `secs`.
pub fn wait_for_staging(parent: &Path, name: &str, file: &str, secs: u64) -> PathBuf {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let prefix = format!(".{name}.tailor-");
    loop {
        for e in std::fs::read_dir(parent).unwrap().flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) && e.path().join(file).exists() {
                return e.path();
            }
        }
        assert!(std::time::Instant::now() < deadline, "no staging folder with {file} appeared in {secs} s");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Waits for `child` and returns its exit code (None if a signal killed it) and stderr.
pub fn finish(mut child: std::process::Child) -> (Option<i32>, String) {
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    (status.code(), stderr)
}

/// A build that must fail: non-zero exit, no panic, every string of `expect` in stderr, and
/// nothing left in the parent folder (no output, no staging folder).
#[allow(dead_code)] // not every test binary that includes `common` uses it
pub fn fails(model: &Path, extra: &[&str], expect: &[&str]) {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("pkg");
    let r = tailor(model, &out, extra);
    let ctx = format!("{extra:?}\nstderr:\n{}", r.stderr);
    assert!(!r.status.success(), "expected failure: {ctx}");
    assert!(!r.stderr.contains("panicked"), "panicked: {ctx}");
    for e in expect {
        assert!(r.stderr.contains(e), "message lacks `{e}`: {ctx}");
    }
    assert!(!out.exists() && std::fs::read_dir(root.path()).unwrap().next().is_none(), "left output behind: {ctx}");
}
