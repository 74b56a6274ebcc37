//! Downloading a model into the hub cache with `hf-hub` (blocking, `ureq`): the repository's
//! file list (`/api/models/ORG/NAME/revision/REV`), then each file a build reads, each into
//! `blobs/` with a `snapshots/<commit>/` link and `refs/<revision>`, as the Python client lays
//! them out. Files already in the cache at that revision are not fetched again.

use std::path::Path;

use hf_hub::api::sync::ApiBuilder;
use hf_hub::{Cache, Repo, RepoType};

/// `HF_HUB_OFFLINE` set to a true value (`1`, `true`, `yes`, `on`), as the Python client reads it.
pub(super) fn offline() -> bool {
    std::env::var("HF_HUB_OFFLINE").is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"))
}

/// Does a build read `file` (a path in the repository)? Configs, safetensors weights and their
/// index, tokenizer and chat-template files, sentence-transformers module configs. Other weight
/// formats (`.bin`, `.gguf`, `onnx/`, ...) are never read, so never fetched.
pub(super) fn wanted(file: &str) -> bool {
    let name = file.rsplit('/').next().unwrap_or(file);
    let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
    let nested = file.contains('/');
    match ext {
        "safetensors" => !nested,
        // Top-level configs and tokenizer JSON; nested ones are sentence-transformers modules
        // (`1_Pooling/config.json`), never an exported model's folder.
        "json" => !nested || !(file.starts_with("onnx/") || file.starts_with("openvino/")),
        "txt" | "model" | "jinja" | "tiktoken" => !nested,
        _ => false,
    }
}

/// Downloads `id` at `rev` into `cache` (the hub folder holding `models--ORG--NAME`), with a
/// progress bar per file on stderr when it is a terminal.
pub(super) fn download(cache: &Path, id: &str, rev: &str) -> std::result::Result<(), String> {
    let endpoint = std::env::var("HF_ENDPOINT").ok().filter(|e| !e.is_empty());
    let mut builder = ApiBuilder::from_cache(Cache::new(cache.to_path_buf()))
        .with_progress(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_retries(2);
    if let Some(e) = &endpoint {
        builder = builder.with_endpoint(e.trim_end_matches('/').to_string());
    }
    if let Some(token) = std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty()) {
        builder = builder.with_token(Some(token));
    }
    let from = endpoint.as_deref().unwrap_or("https://huggingface.co");
    let api = builder.build().map_err(|e| format!("cannot set up the hub client: {e}"))?;
    let repo = api.repo(Repo::with_revision(id.to_string(), RepoType::Model, rev.to_string()));
    let info = repo.info().map_err(|e| format!("listing its files at {from} failed: {e}"))?;
    let files: Vec<&str> = info.siblings.iter().map(|s| s.rfilename.as_str()).filter(|f| wanted(f)).collect();
    if !files.contains(&"config.json") {
        return Err(format!("{from} lists no config.json for it at revision `{rev}` (files: {})", info.siblings.len()));
    }
    eprintln!("downloading {id} ({rev}, {} files) from {from} into {}", files.len(), cache.display());
    for f in files {
        repo.get(f).map_err(|e| format!("{f}: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::wanted;

    #[test]
    fn only_files_a_build_reads_are_fetched() {
        for yes in ["config.json", "model.safetensors", "model-00001-of-00002.safetensors", "model.safetensors.index.json", "tokenizer.json", "tokenizer.model", "merges.txt", "vocab.txt", "chat_template.jinja", "1_Pooling/config.json", "modules.json"] {
            assert!(wanted(yes), "{yes}");
        }
        for no in ["pytorch_model.bin", "model.gguf", "onnx/model.onnx", "onnx/config.json", "flax_model.msgpack", "README.md", ".gitattributes", "sub/model.safetensors", "tf_model.h5"] {
            assert!(!wanted(no), "{no}");
        }
    }
}
