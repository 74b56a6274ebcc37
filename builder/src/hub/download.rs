//! Downloading a model into the hub cache: the repository's file list
//! (`/api/models/ORG/NAME/revision/REV`: its commit and file names), then each file a build
//! reads (`/ORG/NAME/resolve/COMMIT/FILE`), each into `blobs/` with a `snapshots/<commit>/`
//! link, and `refs/<revision>` last, as the Python client lays them out. Files already in the
//! snapshot are not fetched again. Every name the server sends is checked before it names a
//! file ([`super::names`]); the HTTP side is [`super::http`], the writing [`super::store`].

use std::path::Path;

use super::gguf::{self, GgufModel, Tag};
use super::http::{with_retries, Client, Failure};
use super::names::{encode_segment, shown, BlobName, Commit, RepoFile, Revision};
use super::store::{Partial, RepoCache};

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

/// The most a file listing may weigh (the hub's are kilobytes; a repository of 100 000 files
/// is a few MB).
const LISTING_LIMIT: u64 = 32 << 20;

/// What a download fetched.
pub(super) enum Fetched {
    /// A Transformers model: the files a build reads, `config.json` last.
    Folder,
    /// One GGUF model of the repository: its file, or the files of its split set.
    Gguf(GgufModel),
}

/// Downloads the files a build reads of `id` at `rev` into `cache` (the folder holding
/// `models--ORG--NAME`), `refs/<rev>` last, with a progress bar per file on stderr when it is
/// a terminal. Files already in the snapshot are not fetched. A repository with `config.json`
/// and safetensors weights (and no `tag`) is a Transformers model: `config.json` is fetched
/// last, so a snapshot that has it is complete. With a `tag`, or with GGUF files and no
/// safetensors, it is a GGUF repository: only the files of the model the tag names (the only
/// model, without one) are fetched.
pub(super) fn download(cache: &Path, id: &str, tag: Option<&Tag>, rev: &Revision) -> std::result::Result<Fetched, String> {
    let client = Client::from_env()?;
    let from = client.endpoint();
    let url = format!("{from}/api/models/{id}/revision/{}", encode_segment(rev.as_str()));
    let (commit, names) = with_retries(|| listing(&client, &url)).map_err(|e| format!("listing its files failed: {e}"))?;
    if let Revision::Commit(asked) = rev {
        if *asked != commit {
            return Err(format!("{url} lists commit {commit}, not the commit {asked} that was asked for"));
        }
    }
    // A Transformers model has config.json and its weights; some GGUF repositories carry a
    // config.json beside their GGUF files and no safetensors, which is not one.
    let has_config = names.iter().any(|n| n == "config.json");
    let has_weights = names.iter().any(|n| wanted(n) && n.ends_with(".safetensors"));
    let models = gguf::models(names.iter().map(String::as_str));
    let fetched = if tag.is_none() && has_config && (has_weights || models.is_empty()) {
        Fetched::Folder
    } else {
        if models.is_empty() && tag.is_none() {
            return Err(format!(
                "{url} lists no config.json (a Transformers model) and no GGUF model file for it at revision `{}` ({} files listed)",
                rev.as_str(),
                names.len()
            ));
        }
        Fetched::Gguf(gguf::choose(&models, tag, id, &format!("{url} lists"))?)
    };
    let mut files = Vec::new();
    let chosen: Vec<&String> = match &fetched {
        Fetched::Folder => names.iter().filter(|n| wanted(n)).collect(),
        Fetched::Gguf(model) => model.files.iter().collect(),
    };
    for name in chosen {
        files.push(RepoFile::parse(name).map_err(|e| format!("{url}: the listing's {e}; check HF_ENDPOINT"))?);
    }
    if let Fetched::Folder = fetched {
        files.sort_by_key(|f| (f.as_str() == "config.json", f.clone()));
        files.dedup();
    }
    let repo = RepoCache::new(cache, id);
    let get = |file: &RepoFile| {
        let url = format!("{from}/{id}/resolve/{commit}/{}", file.url_path());
        // What an attempt that broke off wrote, for the next attempt to continue.
        let mut partial = None;
        with_retries(|| fetch(&client, &repo, &commit, file, &url, &mut partial)).map_err(|e| match partial.as_ref().and_then(Partial::kept) {
            Some((got, path)) => format!("{file}: {e}; its first {got} bytes are kept in {}, and the next run continues from there", path.display()),
            None => format!("{file}: {e}"),
        })
    };
    if let Fetched::Folder = fetched {
        files = weights_read(files, &repo, &commit, &get)?;
    }
    let todo: Vec<&RepoFile> = files.iter().filter(|f| !repo.is_cached(&commit, f)).collect();
    let what = match &fetched {
        Fetched::Folder => id.to_string(),
        Fetched::Gguf(model) => format!("{id}'s GGUF model {}", shown(&model.label)),
    };
    eprintln!("downloading {what} ({}, {} of {} files) from {from} into {}", rev.as_str(), todo.len(), files.len(), cache.display());
    for file in todo {
        get(file)?;
    }
    if let Revision::Ref(name) = rev {
        with_retries(|| repo.write_ref(name, &commit))?;
    }
    Ok(fetched)
}

/// The shard index a build reads first.
const SHARD_INDEX: &str = "model.safetensors.index.json";
/// The single weights file a build reads when there is no index.
const SINGLE_WEIGHTS: &str = "model.safetensors";

/// `files` without the safetensors a build would not read, by the checkpoint's own rule
/// (`models::Checkpoint::open`): with `model.safetensors.index.json`, the shards it maps
/// (the index is fetched first, with `get`, and read from the snapshot); else with
/// `model.safetensors`, that file; else every one. Mistral's repositories carry their weights
/// twice, the transformers shards and a `consolidated.safetensors` in Mistral's own names as
/// large: the second copy is not downloaded.
fn weights_read(
    files: Vec<RepoFile>,
    repo: &RepoCache,
    commit: &Commit,
    get: &dyn Fn(&RepoFile) -> std::result::Result<(), String>,
) -> std::result::Result<Vec<RepoFile>, String> {
    let named = |n: &str| files.iter().find(|f| f.as_str() == n).cloned();
    let index = named(SHARD_INDEX);
    let keep: Box<dyn Fn(&str) -> bool> = if let Some(index) = &index {
        if !repo.is_cached(commit, index) {
            get(index)?;
        }
        let path = repo.cached_path(commit, index);
        let text = match models::read_settings(&path) {
            Ok(Some(text)) => text,
            Ok(None) => return Err(format!("{index} is not in the snapshot after its download")),
            Err(e) => return Err(e.to_string()),
        };
        let shards = models::index_shards(&path, &text).map_err(|e| e.to_string())?;
        Box::new(move |n: &str| shards.contains(n))
    } else if named(SINGLE_WEIGHTS).is_some() {
        Box::new(|n: &str| n == SINGLE_WEIGHTS)
    } else {
        return Ok(files);
    };
    let (kept, skipped): (Vec<RepoFile>, Vec<RepoFile>) = files.into_iter().partition(|f| !f.as_str().ends_with(".safetensors") || keep(f.as_str()));
    if !skipped.is_empty() {
        let names: Vec<&str> = skipped.iter().map(RepoFile::as_str).collect();
        let reads = if index.is_some() { format!("the shards {SHARD_INDEX} names") } else { SINGLE_WEIGHTS.to_string() };
        eprintln!("not downloading {}: a build reads {reads}", names.join(", "));
    }
    Ok(kept)
}

/// The listing at `url`: its commit (`sha`) and file names (`siblings[].rfilename`).
fn listing(client: &Client, url: &str) -> Result<(Commit, Vec<String>), Failure> {
    let json = client.get_json(url, LISTING_LIMIT)?;
    let fatal = |what: String| Failure::Fatal(format!("{url} {what}; check HF_ENDPOINT"));
    let commit = match json.get("sha") {
        Some(serde_json::Value::String(s)) => Commit::parse(s).ok_or_else(|| fatal(format!("gives the commit `{}` (`sha`), not a commit hash (40 lowercase hex digits)", shown(s))))?,
        _ => return Err(fatal("has no `sha` (the commit) in its answer".into())),
    };
    let Some(siblings) = json.get("siblings").and_then(|s| s.as_array()) else {
        return Err(fatal("has no `siblings` list (the files) in its answer".into()));
    };
    let mut names = Vec::with_capacity(siblings.len());
    for s in siblings {
        match s.get("rfilename") {
            Some(serde_json::Value::String(n)) => names.push(n.clone()),
            _ => return Err(fatal("lists a file without an `rfilename` string".into())),
        }
    }
    Ok((commit, names))
}

/// One attempt at `file` of `commit`: its headers checked (the commit is the listing's, the
/// ETag is a hash, the size is known), its bytes into `blobs/` unless that blob is already
/// cached (continuing `partial`, what an earlier attempt wrote, where the server sends the
/// rest), then its snapshot link.
fn fetch(client: &Client, repo: &RepoCache, commit: &Commit, file: &RepoFile, url: &str, partial: &mut Option<Partial>) -> Result<(), Failure> {
    let resolved = client.resolve(url)?;
    let at = resolved.url.clone();
    let Some(got) = resolved.commit.as_deref() else {
        return Err(Failure::Fatal(format!(
            "{at} answered without an X-Repo-Commit header, so it is not a Hugging Face hub (or a proxy removes its headers); check HF_ENDPOINT"
        )));
    };
    if got != commit.as_str() {
        return Err(Failure::Fatal(format!(
            "{at} says it serves commit `{}` (X-Repo-Commit), not the listing's commit {commit}; check HF_ENDPOINT",
            shown(got)
        )));
    }
    let Some(etag) = resolved.etag.as_deref() else {
        return Err(Failure::Fatal(format!("{at} answered without an ETag (the file's hash, which names it in the cache)")));
    };
    let blob = BlobName::from_etag(etag).map_err(|e| Failure::Fatal(format!("{at}: {e}; check HF_ENDPOINT")))?;
    let size = resolved.size;
    if !size.is_some_and(|s| repo.has_blob(&blob, s)) {
        // Kept bytes are continued where the bytes come from a redirect's target (LFS files:
        // the hub's own answers are whole, and small).
        let ranged = Client::ranged(&resolved);
        let resume = match size {
            Some(s) if ranged => repo.resume_from(partial, &blob, s)?,
            _ => 0,
        };
        let body = client.body(resolved, resume, size.unwrap_or_default())?;
        let size = match (size, body.len) {
            (Some(s), Some(l)) if s.checked_sub(body.start) != Some(l) => {
                return Err(Failure::Fatal(format!(
                    "{} sends {l} bytes (Content-Length) from byte {}, but {at} announced {s} (X-Linked-Size)",
                    body.url, body.start
                )));
            }
            (Some(s), _) => s,
            (None, Some(s)) if body.start == 0 => s,
            (None, _) => {
                return Err(Failure::Fatal(format!("{} sends no size (X-Linked-Size or Content-Length), so a broken-off download could not be told from a whole one", body.url)));
            }
        };
        repo.write_blob(&blob, size, body, file, partial, ranged)?;
    }
    repo.link(commit, file, &blob)
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
