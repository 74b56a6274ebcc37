//! `models` builds one EP-agnostic graph per architecture: no file under models/ may name an
//! execution provider. EP differences belong in ep-sets tables and rules; structural variants
//! reach a task as named flags.

use std::path::{Path, PathBuf};

/// EP names no builtin table spells the same way (vendor and product words, EPs without a
/// table yet).
const VENDOR_WORDS: &[&str] = &[
    "directml", "tensorrt", "executionprovider", "openvino", "qnn", "coreml", "rocm", "migraphx", "xnnpack",
];

/// The words that name an EP: the vendor words, and the words of every builtin EP table's name
/// and provider (`trt-rtx` gives `trt` and `rtx`), so a new table's EP is covered without
/// editing this test. `default` names no EP.
fn ep_words() -> Vec<String> {
    let sets = ep_sets::EpSets::builtin().unwrap();
    let mut out: Vec<String> = VENDOR_WORDS.iter().map(|w| w.to_string()).collect();
    for name in sets.names().filter(|n| *n != "default") {
        out.extend(words(name));
        out.extend(words(&sets.get(name).unwrap().provider));
    }
    out.sort();
    out.dedup();
    out
}

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
    let ep_words = ep_words();
    let mut hits = Vec::new();
    let this_file = root.join(file!().trim_start_matches("models/"));
    for path in all.into_iter().filter(|p| *p != this_file) {
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        for (n, line) in text.lines().enumerate() {
            if let Some(w) = words(line).find(|w| ep_words.contains(w)) {
                hits.push(format!("{}:{}: `{w}` in: {}", path.strip_prefix(root).unwrap().display(), n + 1, line.trim()));
            }
        }
    }
    assert!(hits.is_empty(), "models/ must not mention an execution provider:\n{}", hits.join("\n"));
}

#[test]
fn the_scan_catches_a_mention() {
    let ep_words = ep_words();
    assert!(words("if ep == \"CUDA\" {").any(|w| ep_words.contains(&w)));
    assert!(words("// tuned for webgpu_concrete dims").any(|w| ep_words.contains(&w)));
    assert!(!words("let concrete_dims = true;").any(|w| ep_words.contains(&w)));
}
