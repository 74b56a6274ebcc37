//! `--model ORG/NAME`: a Hugging Face model id, resolved in the local hub cache; and
//! `--model ORG/NAME:TAG`: one GGUF model of a repository of GGUF files ([`gguf`]).
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
mod gguf;
mod http;
mod names;
mod store;

use gguf::Tag;
use names::{Commit, Revision};

/// The hub cache folder the environment names.
pub fn cache_dir() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("HF_HUB_CACHE")
        .or_else(|| var("HF_HOME").map(|h| h.join("hub")))
        .or_else(|| var("XDG_CACHE_HOME").map(|h| h.join("huggingface").join("hub")))
        .or_else(|| var("HOME").map(|h| h.join(".cache").join("huggingface").join("hub")))
}

/// Is `s` shaped like a hub repository id (`org/name`, no other separators)?
fn looks_like_id(s: &str) -> bool {
    let mut parts = s.split('/');
    let ok = |p: &str| !p.is_empty() && p != "." && p != ".." && p.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    matches!((parts.next(), parts.next(), parts.next()), (Some(a), Some(b), None) if ok(a) && ok(b))
}

/// A hub model `--model` names: a repository, and for a GGUF repository maybe the tag of one
/// of its models (`ORG/NAME:Q4_K_M`, [`gguf`]).
#[derive(Debug)]
struct HubId<'a> {
    repo: &'a str,
    tag: Option<Tag>,
}

impl HubId<'_> {
    /// `s` as a hub id; `Ok(None)` when it is not shaped like one (a path), an error when the
    /// repository is but the tag after `:` is not a quantization name.
    fn parse(s: &str) -> std::result::Result<Option<HubId<'_>>, String> {
        let (repo, tag) = match s.split_once(':') {
            Some((repo, tag)) => (repo, Some(tag)),
            None => (s, None),
        };
        if !looks_like_id(repo) {
            return Ok(None);
        }
        let tag = match tag {
            None => None,
            Some(t) => Some(Tag::parse(t).ok_or_else(|| {
                format!("`{}`: the tag after `:` names one GGUF model of the repository by its quantization (`{repo}:Q4_K_M`): 1 to 64 letters, digits, `_`, `-` or `.`", names::shown(s))
            })?),
        };
        Ok(Some(HubId { repo, tag }))
    }
}

impl std::fmt::Display for HubId<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.tag {
            Some(t) => write!(f, "{}:{t}", self.repo),
            None => f.write_str(self.repo),
        }
    }
}

/// The checkpoint `--model` means: the path itself when it exists (or is not shaped like a
/// hub id), else the cached snapshot folder of that id at `revision` (default `main`), or a
/// GGUF file of it: the first file of the model `ORG/NAME:TAG` names, or of the one model of a
/// repository of GGUF files named without a tag.
///
/// A tag is matched against the hub's listing whenever the hub may be asked (a tag the cached
/// files name alone may name several of the repository's, e.g. `Q4_K_XL` beside
/// `UD-Q4_K_XL`): the listing costs one request, the cached files are not fetched again.
/// Offline, the cached files answer.
pub fn resolve_model(model: &Path, revision: Option<&str>) -> Result<PathBuf> {
    let text = model.to_string_lossy();
    let id = if model.exists() { None } else { HubId::parse(&text).map_err(Error::Request)? };
    let Some(id) = id else {
        if revision.is_some() && model.exists() {
            return Err(Error::Request(format!("--revision applies to a hub model id; {} is a local folder", model.display())));
        }
        return Ok(model.to_path_buf());
    };
    let rev = Revision::parse(revision.unwrap_or("main")).map_err(|e| Error::Request(format!("--revision {e}")))?;
    let Some(cache) = cache_dir() else {
        return Err(Error::Request(format!(
            "`{id}` is not a folder, and no Hugging Face cache is set (HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME or HOME) to look it up in or download it to"
        )));
    };
    let snapshot = cached_snapshot(&cache, id.repo, &rev)?;
    let found = snapshot.clone().and_then(|snapshot| model_in(&snapshot, &id));
    let offline = download::offline();
    if let Ok(path) = &found {
        if id.tag.is_none() || offline {
            return Ok(path.clone());
        }
    }
    let rev_text = rev.as_str();
    if offline {
        let missing = found.err().unwrap_or_default();
        if id.tag.is_none() {
            if let Some(held) = snapshot.as_ref().ok().map(|s| gguf::models(gguf_files_in(s).iter().map(String::as_str))).filter(|h| !h.is_empty()) {
                return Err(Error::Request(format!(
                    "`{id}` is cached at revision `{rev_text}` as GGUF files only, {}; name the model with its tag (`{}:TAG`)",
                    gguf::listing(&held, &held),
                    id.repo
                )));
            }
        }
        let revision = if rev_text == "main" { String::new() } else { format!(" --revision {rev_text}") };
        let include = id.tag.as_ref().map_or(String::new(), |t| format!(" --include '*{}*.gguf'", any_case(t.as_str())));
        return Err(Error::Request(format!(
            "`{id}` is neither a local folder nor in the Hugging Face cache at revision `{rev_text}` ({missing}), and HF_HUB_OFFLINE=1 forbids downloading it; unset HF_HUB_OFFLINE, or fetch it with `huggingface-cli download {}{revision}{include}`",
            id.repo
        )));
    }
    let fetched = download::download(&cache, id.repo, id.tag.as_ref(), &rev).map_err(|e| match &found {
        Ok(path) => Error::Request(format!(
            "asking the hub which model `{id}` names failed: {e}; the cache holds {} for it at revision `{rev_text}`: set HF_HUB_OFFLINE=1 to build that",
            path.display()
        )),
        Err(missing) => Error::Request(format!("`{id}` is not in the Hugging Face cache at revision `{rev_text}` ({missing}), and downloading it failed: {e}")),
    })?;
    let found = cached_snapshot(&cache, id.repo, &rev)?.and_then(|snapshot| match fetched {
        download::Fetched::Folder => model_in(&snapshot, &id),
        download::Fetched::Gguf(chosen) => gguf_in(&snapshot, &chosen),
    });
    found.map_err(|missing| Error::Request(format!("`{id}` was downloaded, but the cache still lacks it: {missing}")))
}

/// `tag` as a glob matching it in any case (`q4_k_m` -> `[Qq]4_[Kk]_[Mm]`): huggingface-cli's
/// `--include` is case-sensitive, a tag is not.
fn any_case(tag: &str) -> String {
    tag.chars().map(|c| if c.is_ascii_alphabetic() { format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase()) } else { c.to_string() }).collect()
}

/// The model `id` names in a complete snapshot folder: the folder itself (it has config.json),
/// or with a tag the first file of the GGUF model the tag names among the files it holds. The
/// `Err` says what is missing.
fn model_in(snapshot: &Path, id: &HubId) -> std::result::Result<PathBuf, String> {
    let Some(tag) = &id.tag else {
        if snapshot.join("config.json").exists() {
            return Ok(snapshot.to_path_buf());
        }
        return Err(format!("revision {} is not complete: {} has no config.json", snapshot.file_name().unwrap_or_default().to_string_lossy(), snapshot.display()));
    };
    let held = gguf::models(gguf_files_in(snapshot).iter().map(String::as_str));
    let chosen = gguf::choose(&held, Some(tag), id.repo, &format!("{} holds", snapshot.display()))?;
    gguf_in(snapshot, &chosen)
}

/// The first file of `chosen` in `snapshot`, once every one of its files is there.
fn gguf_in(snapshot: &Path, chosen: &gguf::GgufModel) -> std::result::Result<PathBuf, String> {
    match chosen.files.iter().find(|f| !snapshot.join(f).is_file()) {
        Some(absent) => Err(format!("{} has no {absent}", snapshot.display())),
        None => Ok(snapshot.join(&chosen.files[0])),
    }
}

/// The `.gguf` files under `snapshot` that lead to a file, as paths relative to it (`/`
/// separated), at most 16 folders deep as a repository path may be.
fn gguf_files_in(snapshot: &Path) -> Vec<String> {
    fn walk(dir: &Path, prefix: &str, depth: usize, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let Some(name) = e.file_name().to_str().map(str::to_string) else { continue };
            let path = e.path();
            let rel = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if depth < 16 {
                    walk(&path, &rel, depth + 1, out);
                }
            } else if name.to_ascii_lowercase().ends_with(".gguf") && path.is_file() {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(snapshot, "", 1, &mut out);
    out.sort();
    out
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
    if !snapshot.is_dir() {
        return Ok(Err(format!("revision {commit} is not complete: {} does not exist", snapshot.display())));
    }
    Ok(Ok(snapshot))
}

#[cfg(test)]
mod tests {
    use super::{looks_like_id, HubId};

    #[test]
    fn ids_are_org_slash_name() {
        assert!(looks_like_id("Qwen/Qwen2.5-0.5B-Instruct"));
        assert!(looks_like_id("sentence-transformers/all-MiniLM-L6-v2"));
        for not in ["./model", "model", "a/b/c", "/abs/path", "../x", "a/", "org/na me"] {
            assert!(!looks_like_id(not), "{not}");
        }
    }

    #[test]
    fn an_include_pattern_matches_a_tag_in_any_case() {
        assert_eq!(super::any_case("q4_K_m"), "[Qq]4_[Kk]_[Mm]");
        assert_eq!(super::any_case("UD-IQ2.x"), "[Uu][Dd]-[Ii][Qq]2.[Xx]");
    }

    #[test]
    fn a_tag_after_a_colon_names_a_gguf_model() {
        let id = HubId::parse("org/Model-GGUF:Q4_K_M").unwrap().unwrap();
        assert_eq!((id.repo, id.tag.as_ref().map(|t| t.as_str())), ("org/Model-GGUF", Some("Q4_K_M")));
        assert_eq!(id.to_string(), "org/Model-GGUF:Q4_K_M");
        assert!(HubId::parse("org/m").unwrap().unwrap().tag.is_none());
        let e = HubId::parse("org/m:../../etc").unwrap_err();
        assert!(e.contains("the tag after `:`") && e.contains("`org/m:Q4_K_M`"), "{e}");
        assert!(HubId::parse("./dir:x").unwrap().is_none(), "not a repository id: a path");
        assert!(HubId::parse("a/b/c:Q4_0").unwrap().is_none());
    }
}
