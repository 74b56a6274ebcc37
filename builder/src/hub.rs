//! `--model ORG/NAME`: a Hugging Face model id, resolved in the local hub cache.
//!
//! The cache is `HF_HUB_CACHE`, else `HF_HOME/hub`, else `XDG_CACHE_HOME/huggingface/hub`,
//! else `~/.cache/huggingface/hub`; a model is `models--ORG--NAME/`, whose `refs/<revision>`
//! file holds a commit hash and whose `snapshots/<hash>/` holds the files (relative symlinks
//! into `blobs/`, which the reader follows). A revision that is itself a commit hash names its
//! snapshot directly; any other must be a git ref name ([`names::Revision`]), checked before
//! the cache is looked at, so `refs/<revision>` never leaves `refs/`.
//!
//! A model that is not cached (or not at that revision, or incomplete) is downloaded into
//! the same cache layout ([`download`]), unless `HF_HUB_OFFLINE=1`; `HF_ENDPOINT`, `HF_TOKEN`,
//! `HF_HUB_ETAG_TIMEOUT` and `HF_HUB_DOWNLOAD_TIMEOUT` are honoured as by the Python hub
//! client. Every error says which of the two was tried and what was missing.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

mod download;
mod http;
mod names;
mod store;

use names::{Commit, Revision};

/// The hub cache folder the environment names.
pub fn cache_dir() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("HF_HUB_CACHE")
        .or_else(|| var("HF_HOME").map(|h| h.join("hub")))
        .or_else(|| var("XDG_CACHE_HOME").map(|h| h.join("huggingface").join("hub")))
        .or_else(|| var("HOME").map(|h| h.join(".cache").join("huggingface").join("hub")))
}

/// Is `s` shaped like a hub id (`org/name`, no other separators, not a path that exists)?
fn looks_like_id(s: &str) -> bool {
    let mut parts = s.split('/');
    let ok = |p: &str| !p.is_empty() && p != "." && p != ".." && p.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    matches!((parts.next(), parts.next(), parts.next()), (Some(a), Some(b), None) if ok(a) && ok(b))
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
    let rev = Revision::parse(revision.unwrap_or("main")).map_err(|e| Error::Request(format!("--revision {e}")))?;
    let Some(cache) = cache_dir() else {
        return Err(Error::Request(format!(
            "`{text}` is not a folder, and no Hugging Face cache is set (HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME or HOME) to look it up in or download it to"
        )));
    };
    let missing = match cached_snapshot(&cache, &text, &rev)? {
        Ok(snapshot) => return Ok(snapshot),
        Err(missing) => missing,
    };
    let rev_text = rev.as_str();
    if download::offline() {
        return Err(Error::Request(format!(
            "`{text}` is neither a local folder nor in the Hugging Face cache at revision `{rev_text}` ({missing}), and HF_HUB_OFFLINE=1 forbids downloading it; unset HF_HUB_OFFLINE, or fetch it with `huggingface-cli download {text}{}`",
            if rev_text == "main" { String::new() } else { format!(" --revision {rev_text}") }
        )));
    }
    download::download(&cache, &text, &rev).map_err(|e| {
        Error::Request(format!("`{text}` is not in the Hugging Face cache at revision `{rev_text}` ({missing}), and downloading it failed: {e}"))
    })?;
    match cached_snapshot(&cache, &text, &rev)? {
        Ok(snapshot) => Ok(snapshot),
        Err(missing) => Err(Error::Request(format!("`{text}` was downloaded, but the cache still lacks it: {missing}"))),
    }
}

/// The most a `refs/<revision>` file is read of (it holds 40 characters).
const REF_LIMIT: u64 = 1024;

/// The commit a `refs/` file holds; `None` when there is no such file. Read without
/// blocking (a FIFO is refused, not waited on) and at most [`REF_LIMIT`] bytes; an error
/// never quotes the file's content (`--revision` once led to files outside the cache).
fn read_ref(path: &Path) -> std::result::Result<Option<Commit>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path) {
        Ok(f) => f,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => return Ok(None),
        Err(e) => return Err(format!("cannot be read: {e}")),
    };
    let fix = "; remove it, and the model is fetched again";
    match file.metadata() {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err(format!("is not a regular file (a ref file holds a commit hash){fix}")),
        Err(e) => return Err(format!("cannot be read: {e}")),
    }
    let mut buf = Vec::new();
    (&mut file).take(REF_LIMIT + 1).read_to_end(&mut buf).map_err(|e| format!("cannot be read: {e}"))?;
    let commit = (buf.len() as u64 <= REF_LIMIT).then(|| std::str::from_utf8(&buf).ok().and_then(|s| Commit::parse(s.trim()))).flatten();
    match commit {
        Some(c) => Ok(Some(c)),
        None => Err(format!("holds something that is not a commit hash (40 lowercase hex digits){fix}")),
    }
}

/// The snapshot folder of `id` at `rev` in `cache`, or (inner `Err`) what is missing there.
/// The outer error is a cache that is there but wrong (a ref that holds no commit hash).
fn cached_snapshot(cache: &Path, id: &str, rev: &Revision) -> Result<std::result::Result<PathBuf, String>> {
    let repo = cache.join(format!("models--{}", id.replace('/', "--")));
    if !repo.is_dir() {
        return Ok(Err(format!("{} does not exist", repo.display())));
    }
    let commit = match rev {
        Revision::Commit(c) => c.clone(),
        Revision::Ref(name) => {
            let r = repo.join("refs").join(name.as_str());
            match read_ref(&r) {
                Ok(Some(c)) => c,
                Ok(None) => return Ok(Err(format!("{} is cached, but not at this revision: no {}", repo.display(), r.display()))),
                Err(reason) => return Err(Error::Config { path: r, reason }),
            }
        }
    };
    let snapshot = repo.join("snapshots").join(commit.as_str());
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
