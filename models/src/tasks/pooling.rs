//! A sentence-transformers folder's pooling, read from its files: `modules.json` lists the
//! modules in order (Transformer, Pooling, optionally Normalize) and the Pooling module's
//! `config.json` says which token statistics make the sentence vector. Everything is read
//! from those keys; a module or mode this tool does not build is an error naming it.

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

/// Whether `dir` is a sentence-transformers folder (it holds `modules.json`).
pub fn is_sentence_transformers(dir: &Path) -> bool {
    dir.join(MODULES).is_file()
}

fn err(path: &Path, reason: impl Into<String>) -> Error {
    Error::Config { path: path.to_path_buf(), reason: reason.into() }
}

fn read_json(path: &Path, what: &str) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| err(path, format!("cannot read {what} ({e})")))?;
    serde_json::from_str(&text).map_err(|e| err(path, format!("not valid JSON: {e}")))
}

impl SentencePooling {
    /// Reads `dir/modules.json` and the Pooling module's `config.json`; `hidden` is the
    /// encoder's width, which the pooling config's `word_embedding_dimension` must equal.
    pub fn load(dir: &Path, hidden: usize) -> Result<SentencePooling> {
        let path = dir.join(MODULES);
        if !path.is_file() {
            return Err(err(
                &path,
                "task sentence-embedding reads the pooling from a sentence-transformers folder, and this one has no modules.json; use --task feature-extraction",
            ));
        }
        let modules = read_json(&path, "the sentence-transformers module list")?;
        let list = modules.as_array().ok_or_else(|| err(&path, "must hold a JSON list of modules"))?;
        let mut types = Vec::new();
        for (i, m) in list.iter().enumerate() {
            let ty = m.get("type").and_then(Value::as_str).ok_or_else(|| err(&path, format!("module {i} has no `type` string")))?;
            let sub = m.get("path").and_then(Value::as_str).unwrap_or("");
            types.push((ty, sub));
        }
        let (pooling_dir, normalize) = match types.as_slice() {
            [(TRANSFORMER, _), (POOLING, p)] => (*p, false),
            [(TRANSFORMER, _), (POOLING, p), (NORMALIZE, _)] => (*p, true),
            _ => {
                let names: Vec<&str> = types.iter().map(|(t, _)| *t).collect();
                return Err(err(
                    &path,
                    format!(
                        "lists the modules [{}]; task sentence-embedding builds Transformer, Pooling and an optional Normalize, in that order (Dense and other modules are not built)",
                        names.join(", ")
                    ),
                ));
            }
        };
        if pooling_dir.contains("..") || pooling_dir.starts_with('/') {
            return Err(err(&path, format!("names the Pooling folder `{pooling_dir}`, which is not a folder inside the checkpoint")));
        }
        let config = dir.join(pooling_dir).join("config.json");
        let pooling = read_json(&config, "the Pooling module's config")?;
        let flag = |key: &str| -> Result<bool> {
            match pooling.get(key) {
                None | Some(Value::Null) => Ok(false),
                Some(v) => v.as_bool().ok_or_else(|| err(&config, format!("key `{key}` must be true or false, found {v}"))),
            }
        };
        for key in ["pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"] {
            if flag(key)? {
                return Err(err(&config, format!("key `{key}` is true; that pooling is not built (cls, max, mean and mean_sqrt_len are)")));
            }
        }
        if pooling.get("include_prompt").and_then(Value::as_bool) == Some(false) {
            return Err(err(&config, "key `include_prompt` is false: pooling without the prompt tokens needs the prompt length, which the graph does not take"));
        }
        let mut modes = Vec::new();
        for mode in [PoolingMode::Cls, PoolingMode::Max, PoolingMode::Mean, PoolingMode::MeanSqrtLen] {
            if flag(mode.key())? {
                modes.push(mode);
            }
        }
        if modes.is_empty() {
            return Err(err(&config, "turns on no pooling mode (pooling_mode_cls_token, _mean_tokens, _max_tokens or _mean_sqrt_len_tokens)"));
        }
        if let Some(v) = pooling.get("word_embedding_dimension").filter(|v| !v.is_null()) {
            if v.as_u64() != Some(hidden as u64) {
                return Err(err(&config, format!("key `word_embedding_dimension` is {v}, but config.json's hidden_size is {hidden}")));
            }
        }
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
}
