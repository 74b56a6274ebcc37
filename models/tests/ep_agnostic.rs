//! `models` builds one EP-agnostic graph per architecture: no file under models/ may name an
//! execution provider. EP differences belong in ep-sets tables and rules; structural variants
//! reach a task as named flags.

use std::path::{Path, PathBuf};

const EP_WORDS: &[&str] = &[
    "cpu", "cuda", "dml", "directml", "webgpu", "trt", "tensorrt", "rtx", "executionprovider", "openvino", "qnn",
    "coreml", "rocm", "migraphx", "xnnpack",
];

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Words of a text: runs of ASCII letters, lower-cased (so `Cuda_graph` counts as `cuda`).
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_ascii_alphabetic()).filter(|w| !w.is_empty()).map(|w| w.to_ascii_lowercase())
}

#[test]
fn no_file_under_models_mentions_an_execution_provider() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    files(root, &mut all);
    assert!(all.len() > 10, "the scan must see the crate's files");
    let mut hits = Vec::new();
    let this_file = root.join(file!().trim_start_matches("models/"));
    for path in all.into_iter().filter(|p| *p != this_file) {
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        for (n, line) in text.lines().enumerate() {
            if let Some(w) = words(line).find(|w| EP_WORDS.contains(&w.as_str())) {
                hits.push(format!("{}:{}: `{w}` in: {}", path.strip_prefix(root).unwrap().display(), n + 1, line.trim()));
            }
        }
    }
    assert!(hits.is_empty(), "models/ must not mention an execution provider:\n{}", hits.join("\n"));
}

#[test]
fn the_scan_catches_a_mention() {
    assert!(words("if ep == \"CUDA\" {").any(|w| EP_WORDS.contains(&w.as_str())));
    assert!(words("// tuned for webgpu_concrete dims").any(|w| EP_WORDS.contains(&w.as_str())));
    assert!(!words("let concrete_dims = true;").any(|w| EP_WORDS.contains(&w.as_str())));
}
