//! A sentence-transformers folder's pooling, read from its files: `modules.json` lists the
//! modules in order (Transformer, Pooling, optionally Normalize) and the Pooling module's
//! `config.json` says which token statistics make the sentence vector. Everything is read
//! from those keys; a module or mode this tool does not build is an error naming it.

use crate::config::read_settings;
use crate::{Error, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

const MODULES: &str = "modules.json";
const TRANSFORMER: &str = "sentence_transformers.models.Transformer";
const POOLING: &str = "sentence_transformers.models.Pooling";
const NORMALIZE: &str = "sentence_transformers.models.Normalize";

/// One way of pooling token vectors into a sentence vector, in the order sentence-transformers
/// concatenates them when a config turns on several.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolingMode {
    /// The first token's vector (`pooling_mode_cls_token`).
    Cls,
    /// The per-dimension maximum over the tokens the mask keeps (`pooling_mode_max_tokens`;
    /// masked tokens count as -1e9, as sentence-transformers sets them).
    Max,
    /// The mean over the tokens the mask keeps (`pooling_mode_mean_tokens`; the count is
    /// clamped to at least 1e-9).
    Mean,
    /// The sum over kept tokens divided by the square root of their count
    /// (`pooling_mode_mean_sqrt_len_tokens`).
    MeanSqrtLen,
}

impl PoolingMode {
    /// The Pooling config key that turns the mode on.
    pub fn key(self) -> &'static str {
        match self {
            PoolingMode::Cls => "pooling_mode_cls_token",
            PoolingMode::Max => "pooling_mode_max_tokens",
            PoolingMode::Mean => "pooling_mode_mean_tokens",
            PoolingMode::MeanSqrtLen => "pooling_mode_mean_sqrt_len_tokens",
        }
    }
}

/// What the `sentence_embedding` output computes from `last_hidden_state`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentencePooling {
    /// The modes turned on, in sentence-transformers' concatenation order (at least one).
    pub modes: Vec<PoolingMode>,
    /// A Normalize module follows the pooling: the vector is divided by its L2 norm
    /// (clamped to at least 1e-12, as `torch.nn.functional.normalize`).
    pub normalize: bool,
    /// The pooling config file the modes were read from (for messages).
    pub config: PathBuf,
}

/// Whether `dir` is a sentence-transformers folder (it holds `modules.json`). A
/// `modules.json` that is there but not a regular file (a dangling link, a folder, a FIFO) is
/// an error naming it: taken as absent, the model would silently build without its
/// `sentence_embedding`.
pub fn is_sentence_transformers(dir: &Path) -> Result<bool> {
    let path = dir.join(MODULES);
    match ir::entry_kind(&path) {
        ir::EntryKind::Regular => Ok(true),
        ir::EntryKind::Absent => Ok(false),
        kind => Err(err(
            &path,
            format!(
                "{}; it says whether this is a sentence-transformers model, so the build does not guess: fix or remove it, or pass --task feature-extraction to build without the pooling",
                kind.describe()
            ),
        )),
    }
}

fn err(path: &Path, reason: impl Into<String>) -> Error {
    Error::Config { path: path.to_path_buf(), reason: reason.into() }
}

fn parse_json(path: &Path, text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| err(path, format!("not valid JSON: {e}")))
}

/// What a sentence-transformers module list says about pooling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleList {
    /// The Pooling module's folder, relative to the checkpoint (its `path`).
    pub pooling_dir: String,
    /// A Normalize module follows the pooling.
    pub normalize: bool,
}

/// Parses `modules.json` (`path` names it in errors): Transformer, Pooling and an optional
/// Normalize, in that order; the Pooling folder must lie inside the checkpoint.
pub fn parse_modules(path: &Path, text: &str) -> Result<ModuleList> {
    let modules = parse_json(path, text)?;
    let list = modules.as_array().ok_or_else(|| err(path, "must hold a JSON list of modules"))?;
    let mut types = Vec::new();
    for (i, m) in list.iter().enumerate() {
        let ty = m.get("type").and_then(Value::as_str).ok_or_else(|| err(path, format!("module {i} has no `type` string")))?;
        let sub = m.get("path").and_then(Value::as_str).unwrap_or("");
        types.push((ty, sub));
    }
    let (pooling_dir, normalize) = match types.as_slice() {
        [(TRANSFORMER, _), (POOLING, p)] => (*p, false),
        [(TRANSFORMER, _), (POOLING, p), (NORMALIZE, _)] => (*p, true),
        _ => {
            let names: Vec<&str> = types.iter().map(|(t, _)| *t).collect();
            return Err(err(
                path,
                format!(
                    "lists the modules [{}]; task sentence-embedding builds Transformer, Pooling and an optional Normalize, in that order (Dense and other modules are not built)",
                    names.join(", ")
                ),
            ));
        }
    };
    if pooling_dir.contains("..") || pooling_dir.starts_with('/') || pooling_dir.contains('\0') {
        return Err(err(path, format!("names the Pooling folder `{pooling_dir}`, which is not a folder inside the checkpoint")));
    }
    Ok(ModuleList { pooling_dir: pooling_dir.to_string(), normalize })
}

/// Parses a Pooling module's `config.json` (`path` names it in errors): the modes it turns
/// on, in concatenation order; `hidden` is the encoder's width, which
/// `word_embedding_dimension` must equal.
pub fn parse_pooling(path: &Path, text: &str, hidden: usize) -> Result<Vec<PoolingMode>> {
    let pooling = parse_json(path, text)?;
    if !pooling.is_object() {
        return Err(err(path, "must hold a JSON object of pooling settings"));
    }
    let flag = |key: &str| -> Result<bool> {
        match pooling.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(v) => v.as_bool().ok_or_else(|| err(path, format!("key `{key}` must be true or false, found {v}"))),
        }
    };
    for key in ["pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"] {
        if flag(key)? {
            return Err(err(path, format!("key `{key}` is true; that pooling is not built (cls, max, mean and mean_sqrt_len are)")));
        }
    }
    if pooling.get("include_prompt").and_then(Value::as_bool) == Some(false) {
        return Err(err(path, "key `include_prompt` is false: pooling without the prompt tokens needs the prompt length, which the graph does not take"));
    }
    let mut modes = Vec::new();
    for mode in [PoolingMode::Cls, PoolingMode::Max, PoolingMode::Mean, PoolingMode::MeanSqrtLen] {
        if flag(mode.key())? {
            modes.push(mode);
        }
    }
    if modes.is_empty() {
        return Err(err(path, "turns on no pooling mode (pooling_mode_cls_token, _mean_tokens, _max_tokens or _mean_sqrt_len_tokens)"));
    }
    if let Some(v) = pooling.get("word_embedding_dimension").filter(|v| !v.is_null()) {
        if v.as_u64() != Some(hidden as u64) {
            return Err(err(path, format!("key `word_embedding_dimension` is {v}, but config.json's hidden_size is {hidden}")));
        }
    }
    Ok(modes)
}

impl SentencePooling {
    /// Reads `dir/modules.json` and the Pooling module's `config.json` (regular files of
    /// bounded size, as config.json); `hidden` is the encoder's width, which the pooling
    /// config's `word_embedding_dimension` must equal.
    pub fn load(dir: &Path, hidden: usize) -> Result<SentencePooling> {
        let path = dir.join(MODULES);
        let Some(text) = read_settings(&path)? else {
            return Err(err(
                &path,
                "task sentence-embedding reads the pooling from a sentence-transformers folder, and this one has no modules.json; use --task feature-extraction",
            ));
        };
        let ModuleList { pooling_dir, normalize } = parse_modules(&path, &text)?;
        let config = dir.join(&pooling_dir).join("config.json");
        let Some(text) = read_settings(&config)? else {
            return Err(err(&config, format!("does not exist; {} names `{pooling_dir}` as the Pooling module's folder, which must hold its config.json", path.display())));
        };
        let modes = parse_pooling(&config, &text, hidden)?;
        Ok(SentencePooling { modes, normalize, config })
    }

    /// The width of the sentence vector: `hidden` per mode (they are concatenated).
    pub fn width(&self, hidden: usize) -> usize {
        hidden * self.modes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(modules: &str, pooling: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("modules.json"), modules).unwrap();
        std::fs::create_dir(dir.path().join("1_Pooling")).unwrap();
        std::fs::write(dir.path().join("1_Pooling/config.json"), pooling).unwrap();
        dir
    }
    const T: &str = r#"{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"}"#;
    const P: &str = r#"{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}"#;
    const N: &str = r#"{"idx":2,"name":"2","path":"2_Normalize","type":"sentence_transformers.models.Normalize"}"#;

    #[test]
    fn modes_and_normalize_come_from_the_files() {
        let d = folder(&format!("[{T},{P},{N}]"), r#"{"word_embedding_dimension":8,"pooling_mode_mean_tokens":true}"#);
        let p = SentencePooling::load(d.path(), 8).unwrap();
        assert_eq!((p.modes.as_slice(), p.normalize), ([PoolingMode::Mean].as_slice(), true));
        let d = folder(&format!("[{T},{P}]"), r#"{"pooling_mode_cls_token":true,"pooling_mode_max_tokens":true}"#);
        let p = SentencePooling::load(d.path(), 8).unwrap();
        assert_eq!((p.modes.as_slice(), p.normalize), ([PoolingMode::Cls, PoolingMode::Max].as_slice(), false));
        assert_eq!(p.width(8), 16);
    }

    #[test]
    fn what_is_not_built_is_refused_naming_it() {
        let e = |modules: String, pooling: &str| SentencePooling::load(folder(&modules, pooling).path(), 8).unwrap_err().to_string();
        let dense = r#"{"idx":2,"name":"2","path":"2_Dense","type":"sentence_transformers.models.Dense"}"#;
        assert!(e(format!("[{T},{P},{dense}]"), r#"{"pooling_mode_mean_tokens":true}"#).contains("Dense"));
        assert!(e(format!("[{T},{P}]"), r#"{"pooling_mode_lasttoken":true}"#).contains("`pooling_mode_lasttoken`"));
        assert!(e(format!("[{T},{P}]"), r#"{}"#).contains("no pooling mode"));
        assert!(e(format!("[{T},{P}]"), r#"{"pooling_mode_mean_tokens":true,"word_embedding_dimension":9}"#).contains("hidden_size is 8"));
        assert!(e(format!("[{T},{P}]"), r#"{"pooling_mode_mean_tokens":"yes"}"#).contains("`pooling_mode_mean_tokens`"));
    }

    /// Makes an entry at a path.
    type Make = fn(&Path);

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    /// A pooling config that is a FIFO is refused at once (the test would hang otherwise), a
    /// link to /dev/zero is refused rather than read without end, and a folder in its place
    /// is named: each error names the file.
    #[test]
    fn pooling_configs_that_are_not_regular_files_are_named() {
        let cases: [(&str, Make); 3] = [
            ("FIFO", |p| mkfifo(p)),
            ("not a regular file", |p| std::os::unix::fs::symlink("/dev/zero", p).unwrap()),
            ("folder", |p| std::fs::create_dir(p).unwrap()),
        ];
        for (expect, make) in cases {
            let d = folder(&format!("[{T},{P}]"), "{}");
            let config = d.path().join("1_Pooling/config.json");
            std::fs::remove_file(&config).unwrap();
            make(&config);
            let e = SentencePooling::load(d.path(), 8).unwrap_err().to_string();
            assert!(e.contains(expect) && e.contains("1_Pooling/config.json"), "{expect}: {e}");
        }
        let d = folder(&format!("[{T},{P}]"), "{}");
        std::fs::remove_file(d.path().join("1_Pooling/config.json")).unwrap();
        let e = SentencePooling::load(d.path(), 8).unwrap_err().to_string();
        assert!(e.contains("1_Pooling/config.json") && e.contains("does not exist") && e.contains("modules.json"), "{e}");
    }

    /// A modules.json that is a dangling link, a FIFO or a folder is an error naming it, not
    /// "no sentence-transformers folder" (which would build without `sentence_embedding`).
    #[test]
    fn a_module_list_that_is_not_a_regular_file_is_an_error() {
        let cases: [(&str, Make); 3] = [
            ("does not exist", |p| std::os::unix::fs::symlink("nowhere.json", p).unwrap()),
            ("FIFO", |p| mkfifo(p)),
            ("folder", |p| std::fs::create_dir(p).unwrap()),
        ];
        for (expect, make) in cases {
            let d = tempfile::tempdir().unwrap();
            make(&d.path().join("modules.json"));
            let e = is_sentence_transformers(d.path()).unwrap_err().to_string();
            assert!(e.contains(expect) && e.contains("modules.json") && e.contains("--task feature-extraction"), "{expect}: {e}");
            assert!(SentencePooling::load(d.path(), 8).unwrap_err().to_string().contains("modules.json"));
        }
        let d = tempfile::tempdir().unwrap();
        assert!(!is_sentence_transformers(d.path()).unwrap());
        std::fs::write(d.path().join("modules.json"), "[]").unwrap();
        assert!(is_sentence_transformers(d.path()).unwrap());
    }
}
