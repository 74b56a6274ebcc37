//! `--model ORG/NAME`: a Hugging Face model id, resolved in the local hub cache.
//!
//! The cache is `HF_HUB_CACHE`, else `HF_HOME/hub`, else `~/.cache/huggingface/hub`; a model
//! is `models--ORG--NAME/`, whose `refs/<revision>` file holds a commit hash and whose
//! `snapshots/<hash>/` holds the files (relative symlinks into `blobs/`, which the reader
//! follows). A revision that is itself a commit hash names its snapshot directly.
//!
//! A model that is not cached (or not at that revision, or incomplete) is downloaded into
//! the same cache layout with the `hf-hub` crate ([`download`]), unless `HF_HUB_OFFLINE=1`;
//! `HF_ENDPOINT` and `HF_TOKEN` are honoured as by the Python hub client. Every error says
//! which of the two was tried and what was missing.

use std::path::{Path, PathBuf};

use crate::{Error, Result};

mod download;

/// The hub cache folder the environment names.
pub fn cache_dir() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("HF_HUB_CACHE")
        .or_else(|| var("HF_HOME").map(|h| h.join("hub")))
        .or_else(|| var("HOME").map(|h| h.join(".cache").join("huggingface").join("hub")))
}

/// Is `s` shaped like a hub id (`org/name`, no other separators, not a path that exists)?
fn looks_like_id(s: &str) -> bool {
    let mut parts = s.split('/');
    let ok = |p: &str| !p.is_empty() && p != "." && p != ".." && p.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    matches!((parts.next(), parts.next(), parts.next()), (Some(a), Some(b), None) if ok(a) && ok(b))
}

fn is_commit(rev: &str) -> bool {
    rev.len() == 40 && rev.chars().all(|c| c.is_ascii_hexdigit())
}

/// The checkpoint folder `--model` means: the path itself when it exists (or is not shaped
/// like a hub id), else the cached snapshot of that id at `revision` (default `main`).
pub fn resolve_model(model: &Path, revision: Option<&str>) -> Result<PathBuf> {
    let text = model.to_string_lossy();
    if model.exists() || !looks_like_id(&text) {
        if revision.is_some() && model.exists() {
            return Err(Error::Request(format!("--revision applies to a hub model id; {} is a local folder", model.display())));
        }
        return Ok(model.to_path_buf());
    }
    let rev = revision.unwrap_or("main");
    let Some(cache) = cache_dir() else {
        return Err(Error::Request(format!(
            "`{text}` is not a folder, and no Hugging Face cache is set (HF_HUB_CACHE, HF_HOME or HOME) to look it up in or download it to"
        )));
    };
    let missing = match cached_snapshot(&cache, &text, rev)? {
        Ok(snapshot) => return Ok(snapshot),
        Err(missing) => missing,
    };
    if download::offline() {
        return Err(Error::Request(format!(
            "`{text}` is neither a local folder nor in the Hugging Face cache at revision `{rev}` ({missing}), and HF_HUB_OFFLINE=1 forbids downloading it; unset HF_HUB_OFFLINE, or fetch it with `huggingface-cli download {text}{}`",
            if rev == "main" { String::new() } else { format!(" --revision {rev}") }
        )));
    }
    download::download(&cache, &text, rev).map_err(|e| {
        Error::Request(format!("`{text}` is not in the Hugging Face cache at revision `{rev}` ({missing}), and downloading it failed: {e} (check the network and HF_ENDPOINT; a gated or private model needs HF_TOKEN)"))
    })?;
    match cached_snapshot(&cache, &text, rev)? {
        Ok(snapshot) => Ok(snapshot),
        Err(missing) => Err(Error::Request(format!("`{text}` was downloaded, but the cache still lacks it: {missing}"))),
    }
}

/// The snapshot folder of `id` at `rev` in `cache`, or (inner `Err`) what is missing there.
/// The outer error is a cache that is there but wrong (a ref that holds no commit hash).
fn cached_snapshot(cache: &Path, id: &str, rev: &str) -> Result<std::result::Result<PathBuf, String>> {
    let repo = cache.join(format!("models--{}", id.replace('/', "--")));
    if !repo.is_dir() {
        return Ok(Err(format!("{} does not exist", repo.display())));
    }
    let commit = if is_commit(rev) {
        rev.to_string()
    } else {
        let r = repo.join("refs").join(rev);
        match std::fs::read_to_string(&r) {
            Ok(s) if is_commit(s.trim()) => s.trim().to_string(),
            Ok(s) => return Err(Error::Config { path: r, reason: format!("holds `{}`, not a commit hash", s.trim()) }),
            Err(_) => return Ok(Err(format!("{} is cached, but not at this revision: no {}", repo.display(), r.display()))),
        }
    };
    let snapshot = repo.join("snapshots").join(&commit);
    if !snapshot.join("config.json").exists() {
        return Ok(Err(format!("revision {commit} is not complete: {} has no config.json", snapshot.display())));
    }
    Ok(Ok(snapshot))
}

#[cfg(test)]
mod tests {
    use super::looks_like_id;

    #[test]
    fn ids_are_org_slash_name() {
        assert!(looks_like_id("Qwen/Qwen2.5-0.5B-Instruct"));
        assert!(looks_like_id("sentence-transformers/all-MiniLM-L6-v2"));
        for not in ["./model", "model", "a/b/c", "/abs/path", "../x", "a/", "org/na me"] {
            assert!(!looks_like_id(not), "{not}");
        }
    }
}
