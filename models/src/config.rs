//! `config.json` -> a typed decoder configuration. Keys are read one by one from the JSON so
//! every error names the key at fault, and unknown keys are kept (in `raw`), never an error.

use crate::{Error, Result};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// How rotary frequencies are scaled.
#[derive(Clone, Debug, PartialEq)]
pub enum RopeKind {
    Default,
    Linear { factor: f64 },
    Llama3 { factor: f64, low_freq_factor: f64, high_freq_factor: f64, original_max_position_embeddings: f64 },
}

#[derive(Clone, Debug, PartialEq)]
pub struct RopeConfig {
    pub theta: f64,
    pub kind: RopeKind,
    /// Fraction of each head's dimensions that is rotated.
    pub partial_rotary_factor: f64,
}

/// The hyper-parameters a decoder-only transformer needs, whatever its family.
#[derive(Clone, Debug)]
pub struct DecoderConfig {
    pub path: PathBuf,
    pub model_type: String,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub vocab_size: usize,
    pub max_position_embeddings: usize,
    pub rms_norm_eps: f64,
    pub tie_word_embeddings: bool,
    pub attention_bias: bool,
    pub mlp_bias: bool,
    pub rope: RopeConfig,
    pub bos_token_id: Option<i64>,
    pub eos_token_id: Vec<i64>,
    pub pad_token_id: Option<i64>,
    /// The whole JSON object, unknown keys included.
    pub raw: Map<String, Value>,
}

struct Reader<'a> {
    path: &'a Path,
    map: &'a Map<String, Value>,
}

impl Reader<'_> {
    fn err(&self, reason: String) -> Error {
        Error::Config { path: self.path.to_path_buf(), reason }
    }
    fn present(&self, key: &str) -> Option<&Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }
    fn usize_opt(&self, key: &str) -> Result<Option<usize>> {
        match self.present(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|&x| x > 0)
                .map(|x| Some(x as usize))
                .ok_or_else(|| self.err(format!("key `{key}` must be a positive integer, found {v}"))),
        }
    }
    fn usize(&self, key: &str) -> Result<usize> {
        self.usize_opt(key)?.ok_or_else(|| self.err(format!("required key `{key}` is missing")))
    }
    fn f64_opt(&self, key: &str) -> Result<Option<f64>> {
        match self.present(key) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| self.err(format!("key `{key}` must be a number, found {v}"))),
        }
    }
    fn bool_or(&self, key: &str, default: bool) -> Result<bool> {
        match self.present(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| self.err(format!("key `{key}` must be true or false, found {v}"))),
        }
    }
    fn token_ids(&self, key: &str) -> Result<Vec<i64>> {
        match self.present(key) {
            None => Ok(vec![]),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_i64().ok_or_else(|| self.err(format!("key `{key}` must hold integers, found {v}"))))
                .collect(),
            Some(v) => v.as_i64().map(|x| vec![x]).ok_or_else(|| self.err(format!("key `{key}` must be an integer, found {v}"))),
        }
    }
}

impl DecoderConfig {
    /// Reads `dir/config.json`.
    pub fn load(dir: &Path) -> Result<DecoderConfig> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::Config {
            path: path.clone(),
            reason: format!("cannot read it ({e}); a checkpoint folder must contain config.json"),
        })?;
        Self::parse(&path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<DecoderConfig> {
        let value: Value = serde_json::from_str(text).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            reason: format!("not valid JSON: {e}"),
        })?;
        let Value::Object(map) = value else {
            return Err(Error::Config { path: path.to_path_buf(), reason: "must hold a JSON object".into() });
        };
        let r = Reader { path, map: &map };
        let model_type = r
            .present("model_type")
            .and_then(Value::as_str)
            .ok_or_else(|| r.err("required key `model_type` is missing or not a string".into()))?
            .to_string();
        let hidden_size = r.usize("hidden_size")?;
        let num_attention_heads = r.usize("num_attention_heads")?;
        let num_key_value_heads = r.usize_opt("num_key_value_heads")?.unwrap_or(num_attention_heads);
        if num_attention_heads % num_key_value_heads != 0 {
            return Err(r.err(format!(
                "`num_attention_heads` ({num_attention_heads}) must be a multiple of `num_key_value_heads` ({num_key_value_heads})"
            )));
        }
        let head_dim = match r.usize_opt("head_dim")? {
            Some(d) => d,
            None if hidden_size % num_attention_heads == 0 => hidden_size / num_attention_heads,
            None => {
                return Err(r.err(format!(
                    "`hidden_size` ({hidden_size}) is not a multiple of `num_attention_heads` ({num_attention_heads}) and `head_dim` is not given"
                )))
            }
        };
        let rope = read_rope(&r)?;
        let rotary_dim = (head_dim as f64 * rope.partial_rotary_factor) as usize;
        if rotary_dim == 0 || rotary_dim % 2 != 0 || rotary_dim > head_dim {
            return Err(r.err(format!(
                "rotary dimension {rotary_dim} (head_dim {head_dim} x partial_rotary_factor {}) must be even and at most head_dim",
                rope.partial_rotary_factor
            )));
        }
        Ok(DecoderConfig {
            path: path.to_path_buf(),
            hidden_size,
            intermediate_size: r.usize("intermediate_size")?,
            num_hidden_layers: r.usize("num_hidden_layers")?,
            num_attention_heads,
            num_key_value_heads,
            head_dim,
            vocab_size: r.usize("vocab_size")?,
            max_position_embeddings: r.usize_opt("max_position_embeddings")?.unwrap_or(2048),
            rms_norm_eps: r.f64_opt("rms_norm_eps")?.unwrap_or(1e-6),
            tie_word_embeddings: r.bool_or("tie_word_embeddings", false)?,
            attention_bias: r.bool_or("attention_bias", false)?,
            mlp_bias: r.bool_or("mlp_bias", false)?,
            rope,
            bos_token_id: r.token_ids("bos_token_id")?.first().copied(),
            eos_token_id: r.token_ids("eos_token_id")?,
            pad_token_id: r.token_ids("pad_token_id")?.first().copied(),
            model_type,
            raw: map.clone(),
        })
    }

    /// Number of rotated dimensions per head.
    pub fn rotary_dim(&self) -> usize {
        (self.head_dim as f64 * self.rope.partial_rotary_factor) as usize
    }
}

/// RoPE settings from either spelling: the legacy top-level `rope_theta` + `rope_scaling`, or
/// the newer `rope_parameters` object (which carries `rope_theta` itself).
fn read_rope(r: &Reader) -> Result<RopeConfig> {
    let params = r.present("rope_parameters").or_else(|| r.present("rope_scaling"));
    let params = match params {
        None => None,
        Some(Value::Object(m)) => Some(m),
        Some(v) => return Err(r.err(format!("key `rope_scaling`/`rope_parameters` must be an object, found {v}"))),
    };
    let get = |k: &str| params.and_then(|m| m.get(k)).filter(|v| !v.is_null());
    let num = |k: &str| -> Result<Option<f64>> {
        match get(k) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| r.err(format!("rope key `{k}` must be a number, found {v}"))),
        }
    };
    let theta = match num("rope_theta")? {
        Some(t) => t,
        None => r.f64_opt("rope_theta")?.unwrap_or(10000.0),
    };
    let partial_rotary_factor = match num("partial_rotary_factor")? {
        Some(p) => p,
        None => r.f64_opt("partial_rotary_factor")?.unwrap_or(1.0),
    };
    let kind_name = get("rope_type").or_else(|| get("type")).and_then(Value::as_str).unwrap_or("default");
    let need = |k: &str| -> Result<f64> {
        num(k)?.ok_or_else(|| r.err(format!("rope type `{kind_name}` needs the key `{k}`")))
    };
    let kind = match kind_name {
        "default" => RopeKind::Default,
        "linear" => RopeKind::Linear { factor: need("factor")? },
        "llama3" => RopeKind::Llama3 {
            factor: need("factor")?,
            low_freq_factor: need("low_freq_factor")?,
            high_freq_factor: need("high_freq_factor")?,
            original_max_position_embeddings: need("original_max_position_embeddings")?,
        },
        other => {
            return Err(r.err(format!(
                "rope type `{other}` is not supported yet; supported: default, linear, llama3"
            )))
        }
    };
    Ok(RopeConfig { theta, kind, partial_rotary_factor })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<DecoderConfig> {
        DecoderConfig::parse(Path::new("config.json"), text)
    }

    const BASE: &str = r#""model_type":"llama","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":512"#;

    #[test]
    fn legacy_and_new_rope_keys_agree() {
        let legacy = parse(&format!(r#"{{{BASE},"rope_theta":500000.0,"rope_scaling":{{"type":"linear","factor":2.0}}}}"#)).unwrap();
        let newer = parse(&format!(r#"{{{BASE},"rope_parameters":{{"rope_type":"linear","factor":2.0,"rope_theta":500000.0}}}}"#)).unwrap();
        assert_eq!(legacy.rope, newer.rope);
        assert_eq!(legacy.rope.kind, RopeKind::Linear { factor: 2.0 });
        assert_eq!(legacy.num_key_value_heads, 4);
        assert_eq!(legacy.head_dim, 16);
    }

    #[test]
    fn unknown_keys_are_kept() {
        let c = parse(&format!(r#"{{{BASE},"some_future_key":{{"a":1}}}}"#)).unwrap();
        assert!(c.raw.contains_key("some_future_key"));
    }

    #[test]
    fn errors_name_the_key() {
        let e = parse(r#"{"model_type":"llama"}"#).unwrap_err().to_string();
        assert!(e.contains("`hidden_size`"), "{e}");
        let e = parse(&format!(r#"{{{BASE},"num_key_value_heads":3}}"#)).unwrap_err().to_string();
        assert!(e.contains("num_key_value_heads"), "{e}");
        let e = parse("{not json").unwrap_err().to_string();
        assert!(e.contains("not valid JSON"), "{e}");
        let e = parse(&format!(r#"{{{BASE},"rope_scaling":{{"type":"linear"}}}}"#)).unwrap_err().to_string();
        assert!(e.contains("`factor`"), "{e}");
    }
}
