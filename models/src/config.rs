//! `config.json` -> a typed decoder configuration. Keys are read one by one from the JSON so
//! every error names the key at fault, and unknown keys are kept (in `raw`), never an error.

use crate::{Error, Result};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// How rotary frequencies are scaled. Every variant is computed the way transformers computes
/// it (in f32), so caches match the reference bit for bit where the math allows.
#[derive(Clone, Debug, PartialEq)]
pub enum RopeKind {
    Default,
    Linear { factor: f64 },
    Llama3 { factor: f64, low_freq_factor: f64, high_freq_factor: f64, original_max_position_embeddings: f64 },
    /// YaRN: frequencies blended between interpolated and extrapolated by a ramp over the
    /// rotary dimensions; cos/sin multiplied by `attention_factor`.
    Yarn { factor: f64, original_max_position_embeddings: f64, attention_factor: f64, beta_fast: f64, beta_slow: f64, truncate: bool },
    /// LongRoPE (Phi-3): per-dimension `short_factor` while the total sequence length is at
    /// most `original_max_position_embeddings`, `long_factor` beyond it; cos/sin multiplied by
    /// `attention_factor`.
    LongRope { short_factor: Vec<f64>, long_factor: Vec<f64>, original_max_position_embeddings: f64, attention_factor: f64 },
    /// Explicit per-dimension divisors: inverse frequency `i` is `1 / theta^(2i / dim)` divided
    /// by `factors[i]`, cos/sin unscaled. This is llama.cpp's `freq_factors` (ggml's rope
    /// divides each dimension's angle by its factor), which a GGUF file stores as
    /// `rope_freqs.weight`: the GGUF import writes it as rope type `freq_factors` with the
    /// file's values under `factors`, so a Llama 3.1/3.2 file keeps the exact factors its
    /// converter computed from the llama3 scaling (see models/src/gguf.rs).
    Factors { factors: Vec<f64> },
}

#[derive(Clone, Debug, PartialEq)]
pub struct RopeConfig {
    pub theta: f64,
    pub kind: RopeKind,
    /// Fraction of each head's dimensions that is rotated.
    pub partial_rotary_factor: f64,
    /// LongRoPE's own cos/sin factors for the short and the long set (PhiMoE's `short_mscale`,
    /// `long_mscale`), replacing `attention_factor`; `None` for every other config.
    pub mscale: Option<(f64, f64)>,
}

/// Multi-head latent attention's sizes (DeepSeek-V2/V3): queries through a low-rank
/// `q_lora_rank` projection (or one `q_proj` when it is null), keys and values through one
/// shared `kv_lora_rank` latent plus a `qk_rope_head_dim` rotary key shared by every head. The
/// graph attends in the latent space (the per-head key/value up-projection folded into the
/// query and the output), over one key/value head of `kv_lora_rank + qk_rope_head_dim`: the
/// cache holds the latent and the rotary key, as transformers' does.
#[derive(Clone, Debug, PartialEq)]
pub struct LatentDims {
    pub sizes: LatentSizes,
    /// The softmax scale: `1 / sqrt(nope + rope)`, times `mscale(factor, mscale_all_dim)^2`
    /// when the RoPE is scaled and `mscale_all_dim` is set (transformers' `yarn_apply_mscale`).
    pub scale: f64,
}

/// Latent attention's sizes, as a config class defaults them and as config.json sets them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatentSizes {
    /// `q_lora_rank`; `None`: the queries come from one `q_proj`.
    pub q_rank: Option<usize>,
    /// `kv_lora_rank`.
    pub kv_rank: usize,
    /// `qk_nope_head_dim`: the query/key dims per head without RoPE.
    pub nope: usize,
    /// `qk_rope_head_dim`: the rotated dims (the query's per head, the key's shared).
    pub rope: usize,
    /// `v_head_dim`.
    pub v: usize,
    /// `rope_interleave`: the rotary dims rotate as interleaved pairs (read by de-interleaving
    /// their weight rows, so the graph and the cache use rotate-half pairs as transformers'
    /// output does).
    pub interleaved: bool,
}

impl LatentDims {
    /// `default_rope`: the family's RoPE object when config.json gives none (Mistral 4's YaRN),
    /// whose `mscale_all_dim` scales the softmax as a written one would.
    fn read(r: &Reader, names: &crate::arch::LatentNames, default_rope: Option<&str>) -> Result<LatentDims> {
        let d = &names.defaults;
        let size = |key: &str, default: usize| -> Result<usize> { Ok(r.usize_opt(key)?.unwrap_or(default)) };
        // `q_lora_rank: null` is the uncompressed query; only an absent key takes the default.
        let q_rank = match r.map.get("q_lora_rank") {
            Some(Value::Null) => None,
            None => d.q_rank,
            Some(_) => r.usize_opt("q_lora_rank")?,
        };
        let (kv_rank, nope, rope, v) = (size("kv_lora_rank", d.kv_rank)?, size("qk_nope_head_dim", d.nope)?, size("qk_rope_head_dim", d.rope)?, size("v_head_dim", d.v)?);
        if !rope.is_multiple_of(2) {
            return Err(r.err(format!("`qk_rope_head_dim` ({rope}) must be even: RoPE rotates pairs")));
        }
        let interleaved = match names.interleave_key {
            Some(key) => r.bool_opt(key)?.unwrap_or(d.interleaved),
            None => false,
        };
        let mut scale = 1.0 / ((nope + rope) as f64).sqrt();
        let default: Option<Map<String, Value>> = default_rope.and_then(|text| serde_json::from_str(text).ok());
        let params = match r.first(&["rope_parameters", "rope_scaling"]) {
            Some((key, Value::Object(p))) => Some((key, p)),
            _ => default.as_ref().map(|p| ("rope_parameters (the family's default)", p)),
        };
        if let Some((key, p)) = params {
            let kind = p.get("rope_type").or_else(|| p.get("type")).and_then(Value::as_str).unwrap_or("default");
            let all_dim = p.get("mscale_all_dim").and_then(Value::as_f64).unwrap_or(0.0);
            if kind != "default" && all_dim != 0.0 {
                let factor = p.get("factor").and_then(Value::as_f64).ok_or_else(|| r.err(format!("`{key}` has `mscale_all_dim` but no numeric `factor`")))?;
                let m = yarn_mscale(factor, all_dim);
                scale *= m * m;
            }
        }
        Ok(LatentDims { sizes: LatentSizes { q_rank, kv_rank, nope, rope, v, interleaved }, scale })
    }
}

/// YaRN's magnitude factor for a context stretched by `scale` (transformers'
/// `get_mscale` / `yarn_get_mscale`): 1 up to the original length, else `0.1 m ln(scale) + 1`.
fn yarn_mscale(scale: f64, m: f64) -> f64 {
    if scale <= 1.0 {
        1.0
    } else {
        0.1 * m * scale.ln() + 1.0
    }
}

/// The hidden activation of the MLP (`hidden_act`, or GPT-2's `activation_function`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `x * sigmoid(x)` (`silu`, `swish`).
    Silu,
    /// Exact erf GELU (`gelu`).
    Gelu,
    /// tanh-approximated GELU (`gelu_new`, `gelu_pytorch_tanh`, `gelu_fast`).
    GeluTanh,
    /// ReLU, `max(x, 0)` (`relu`, OPT): a `Max` with zero, as the squared one's (a table without
    /// a `Max` kernel schedules `lower.minmax_to_clip`).
    Relu,
    /// Squared ReLU, `max(x, 0)^2` (`relu2`, Nemotron): `Max` and `Mul` (a table that claims no
    /// `Max` fails validation naming the node; tests/expectations/ops.toml [pending]).
    Relu2,
    /// xIELU (`xielu`, Apertus): four learned scalars per layer, so only a family whose MLP
    /// names them builds it (`MlpNames::PlainParametric`); the others refuse it by key.
    Xielu,
}

impl Activation {
    /// The config spellings this tool accepts, for error messages. Only activations every
    /// EP table runs are listed: one the tables cannot run is refused here, by its key, before
    /// any weight is read.
    pub const NAMES: &'static str = "silu, swish, gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, relu, relu2, xielu (Apertus)";

    pub(crate) fn parse(name: &str) -> Option<Activation> {
        Some(match name {
            "silu" | "swish" => Activation::Silu,
            "gelu" => Activation::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Activation::GeluTanh,
            "relu" => Activation::Relu,
            "relu2" => Activation::Relu2,
            "xielu" => Activation::Xielu,
            _ => return None,
        })
    }
}

/// Sliding-window settings as written in config.json; which layers use a window is decided
/// by [`DecoderConfig::layer_windows`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlidingWindowConfig {
    /// `sliding_window`: how many keys (the query's own included) a windowed layer sees.
    pub size: Option<usize>,
    /// `use_sliding_window` (Qwen2/Qwen3): `false` switches the window off entirely.
    pub enabled: Option<bool>,
    /// `max_window_layers` (Qwen2/Qwen3): layers below this index use full attention.
    pub max_window_layers: Option<usize>,
    /// `layer_types`: `full_attention` / `sliding_attention` per layer.
    pub layer_types: Option<Vec<String>>,
    /// `sliding_window: null` written out: no window, where an absent key takes the family's
    /// default ([`crate::arch::LayerKinds::default_window`]), as the config classes read it.
    pub null: bool,
}

/// The hyper-parameters a decoder-only transformer needs, whatever its family. GPT-2's key
/// spellings (`n_embd`, `n_head`, `n_layer`, `n_positions`, `n_inner`,
/// `layer_norm_epsilon`, `activation_function`) are read as aliases.
#[derive(Clone, Debug)]
pub struct DecoderConfig {
    pub path: PathBuf,
    pub model_type: String,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    /// The attention head size of the graph: `head_dim` (or hidden / heads); for latent
    /// attention ([`LatentDims`]) the width of the one shared key/value head, `kv_lora_rank +
    /// qk_rope_head_dim`.
    pub head_dim: usize,
    pub vocab_size: usize,
    pub max_position_embeddings: usize,
    /// Epsilon of every norm (`rms_norm_eps`, `layer_norm_epsilon` or `layer_norm_eps`).
    pub norm_eps: f64,
    /// `tie_word_embeddings`; `None` when absent, so the family's default applies.
    pub tie_word_embeddings: Option<bool>,
    pub hidden_act: Activation,
    pub rope: RopeConfig,
    /// Sliding layers' own RoPE, when config.json gives one (Gemma 3: `rope_local_base_freq`,
    /// or `rope_parameters.sliding_attention`); used only by families whose table says so.
    pub sliding_rope: Option<RopeConfig>,
    pub sliding_window: SlidingWindowConfig,
    pub bos_token_id: Option<i64>,
    pub eos_token_id: Vec<i64>,
    pub pad_token_id: Option<i64>,
    /// The whole JSON object, unknown keys included.
    pub raw: Map<String, Value>,
    /// Multimodal RoPE (Qwen2.5-VL, Qwen3-VL): `position_ids` is `[3, batch, seq]` (temporal,
    /// height, width ids) and each rotary frequency takes its angle from one of the three.
    pub mrope: Option<MropeConfig>,
    /// A vision-language checkpoint's top level (its own `model_type`, `vision_config`, token
    /// ids); the fields above are then its `text_config`'s.
    pub multimodal: Option<Multimodal>,
    /// Multi-head latent attention's sizes, for a family whose table stores it (DeepSeek-V3).
    pub latent: Option<LatentDims>,
}

/// The largest dimension or count a config may give (u32::MAX): a larger one is refused with
/// its key before any shape is built from it.
pub const MAX_DIMENSION: u64 = u32::MAX as u64;

/// A config integer of at least `min` (0 or 1), at most [`MAX_DIMENSION`]; otherwise what is
/// wrong with it, to follow "key `k` ": not an integer at all, or an integer that is too
/// large (JSON holds integers past u64 as floats: `99999999999999999999` reads as 1e20).
fn dimension(v: &Value, min: u64) -> std::result::Result<usize, String> {
    let kind = if min == 0 { "a non-negative integer" } else { "a positive integer" };
    if let Some(x) = v.as_u64() {
        return match x {
            x if x < min => Err(format!("must be {kind}, found {v}")),
            x if x > MAX_DIMENSION => Err(format!("is too large: at most {MAX_DIMENSION}, found {v}")),
            x => Ok(x as usize),
        };
    }
    match v.as_f64() {
        Some(x) if x.is_finite() && x.fract() == 0.0 && x > MAX_DIMENSION as f64 => Err(format!("is too large: at most {MAX_DIMENSION}, found {v}")),
        _ => Err(format!("must be {kind}, found {v}")),
    }
}

/// GPT-2's spellings of keys other families spell the Hugging Face way (transformers'
/// `GPT2Config.attribute_map`: `n_embd` is `hidden_size`, ...), read as aliases. A config that
/// writes any of them follows GPT-2's convention, and a key it lacks is asked for in it.
const GPT2_SPELLINGS: &[&str] = &["n_embd", "n_head", "n_layer", "n_positions", "n_inner"];

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
    /// The first of `keys` that is present (aliases such as GPT-2's `n_embd`).
    fn first<'k>(&self, keys: &[&'k str]) -> Option<(&'k str, &Value)> {
        keys.iter().find_map(|k| self.present(k).map(|v| (*k, v)))
    }
    fn usize_any(&self, keys: &[&str]) -> Result<Option<usize>> {
        match self.first(keys) {
            None => Ok(None),
            Some((key, v)) => dimension(v, 1).map(Some).map_err(|why| self.err(format!("key `{key}` {why}"))),
        }
    }
    fn usize_opt(&self, key: &str) -> Result<Option<usize>> {
        self.usize_any(&[key])
    }
    /// A required positive integer under any of `keys`; a missing one is asked for by the
    /// spelling this config's family writes ([`Reader::missing`]).
    fn usize_req(&self, keys: &[&str]) -> Result<usize> {
        self.usize_any(keys)?.ok_or_else(|| self.missing(keys))
    }
    /// "required key ... is missing" for a key spelled any of `keys`, naming first the spelling
    /// of the convention this config follows: GPT-2's (`n_layer`) when it writes any GPT-2
    /// spelling ([`GPT2_SPELLINGS`]), the Hugging Face one (`num_hidden_layers`) otherwise;
    /// the other spellings follow in parentheses.
    fn missing(&self, keys: &[&str]) -> Error {
        let gpt2 = GPT2_SPELLINGS.iter().any(|k| self.map.contains_key(*k));
        let named = keys.iter().find(|k| GPT2_SPELLINGS.contains(k) == gpt2).unwrap_or(&keys[0]);
        let others: Vec<String> = keys.iter().filter(|k| *k != named).map(|k| format!("`{k}`")).collect();
        let also = if others.is_empty() { String::new() } else { format!(" (or {})", others.join(", ")) };
        self.err(format!("required key `{named}`{also} is missing"))
    }
    /// The spelling of `keys` this config uses (the first when none is present), so messages
    /// about a value name the key the user wrote: GPT-2's `n_head`, not `num_attention_heads`.
    fn key_of<'k>(&self, keys: &[&'k str]) -> &'k str {
        self.first(keys).map(|(k, _)| k).unwrap_or(keys[0])
    }
    /// Like [`Reader::usize_any`], but zero is allowed (e.g. `max_window_layers: 0`).
    fn count_opt(&self, key: &str) -> Result<Option<usize>> {
        match self.present(key) {
            None => Ok(None),
            Some(v) => dimension(v, 0).map(Some).map_err(|why| self.err(format!("key `{key}` {why}"))),
        }
    }
    fn f64_any(&self, keys: &[&str]) -> Result<Option<f64>> {
        match self.first(keys) {
            None => Ok(None),
            Some((key, v)) => v.as_f64().map(Some).ok_or_else(|| self.err(format!("key `{key}` must be a number, found {v}"))),
        }
    }
    fn bool_opt(&self, key: &str) -> Result<Option<bool>> {
        match self.present(key) {
            None => Ok(None),
            Some(v) => v.as_bool().map(Some).ok_or_else(|| self.err(format!("key `{key}` must be true or false, found {v}"))),
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
    fn strings_opt(&self, key: &str) -> Result<Option<Vec<String>>> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_string).ok_or_else(|| self.err(format!("key `{key}` must hold strings, found {v}"))))
                .collect::<Result<Vec<_>>>()
                .map(Some),
            Some(v) => Err(self.err(format!("key `{key}` must be a list of strings, found {v}"))),
        }
    }
}

/// Reads the settings file at `path` (a JSON file of the checkpoint: config.json, the shard
/// index, sentence-transformers' module list and pooling config) as text: `Ok(None)` when
/// nothing is there; an error naming it when it is not a regular file (a dangling link, a
/// folder, a FIFO or device, never opened in a way that blocks), is larger than
/// [`ir::SETTINGS_LIMIT`], or is not UTF-8.
pub fn read_settings(path: &Path) -> Result<Option<String>> {
    let Some(bytes) = ir::read_regular(path, ir::SETTINGS_LIMIT)? else { return Ok(None) };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|e| Error::Config { path: path.to_path_buf(), reason: format!("not UTF-8 text ({e}); a JSON file must be UTF-8") })
}

impl DecoderConfig {
    /// Reads `dir/config.json`.
    pub fn load(dir: &Path) -> Result<DecoderConfig> {
        let path = dir.join("config.json");
        let Some(text) = read_settings(&path)? else {
            return Err(Error::Config {
                path,
                reason: "cannot read it (it does not exist); a checkpoint folder must contain config.json".into(),
            });
        };
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
        if let Some(text) = Multimodal::text_config(path, &map)? {
            let mut config = Self::parse_map(path, text)?;
            config.multimodal = Some(Multimodal::read(path, map)?);
            return Ok(config);
        }
        Self::parse_map(path, map)
    }

    /// The decoder config of one JSON object (a text-only config.json, or a multimodal one's
    /// `text_config`).
    fn parse_map(path: &Path, mut map: Map<String, Value>) -> Result<DecoderConfig> {
        let model_type = Reader { path, map: &map }
            .present("model_type")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::Config { path: path.to_path_buf(), reason: "required key `model_type` is missing or not a string".into() })?
            .to_string();
        // Keys the family's config class gives when config.json leaves them out (Gemma 3's
        // sparse multimodal `text_config`); kept in `raw` too, so every reader sees them.
        let family = crate::arch::decoder_for(&model_type).map(|f| &f.layout);
        if let Some(f) = family {
            for (key, value) in f.key_defaults {
                if map.get(*key).is_none_or(Value::is_null) {
                    map.insert((*key).to_string(), value.to_json());
                }
            }
            for key in f.ignored_keys {
                map.remove(*key);
            }
            for key in f.per_layer_keys {
                if let Some(Value::Array(items)) = map.get(*key) {
                    let one = match items.split_first() {
                        Some((first, rest)) if rest.iter().all(|v| v == first) => first.clone(),
                        _ => {
                            return Err(Error::Config {
                                path: path.to_path_buf(),
                                reason: format!("key `{key}` lists {} per layer; only one value for every layer is supported", Value::Array(items.clone())),
                            })
                        }
                    };
                    map.insert((*key).to_string(), one);
                }
            }
            if let Some(rule) = f.config_rule {
                rule(&mut map).map_err(|reason| Error::Config { path: path.to_path_buf(), reason })?;
            }
            for (old, generic) in f.key_aliases {
                if let (true, Some(v)) = (map.get(*generic).is_none_or(Value::is_null), map.get(*old).cloned()) {
                    map.insert((*generic).to_string(), v);
                }
            }
            if let Some(key) = f.rotary_dims_key {
                let given = |k: &str| map.get(k).and_then(Value::as_f64);
                if let (None, Some(dims)) = (given("partial_rotary_factor"), given(key)) {
                    // The head size as read below: the key, the family's default, else hidden / heads.
                    let per_head = given("head_dim").or(f.head_dim_default.map(|d| d as f64)).or_else(|| Some(given("hidden_size").or(given("n_embd"))? / given("num_attention_heads").or(given("n_head"))?));
                    match per_head.filter(|d| *d > 0.0) {
                        Some(d) if dims > 0.0 && dims <= d && dims % 2.0 == 0.0 => {
                            map.insert("partial_rotary_factor".into(), serde_json::json!(dims / d));
                        }
                        Some(d) => {
                            return Err(Error::Config {
                                path: path.to_path_buf(),
                                reason: format!("key `{key}` ({dims}) must be an even count of rotated dimensions, at most the head size {d}"),
                            })
                        }
                        None => return Err(Error::Config { path: path.to_path_buf(), reason: format!("key `{key}` ({dims}) needs the head size, which config.json does not give") }),
                    }
                }
            }
        }
        let r = Reader { path, map: &map };
        const HIDDEN: &[&str] = &["hidden_size", "n_embd"];
        const HEADS: &[&str] = &["num_attention_heads", "n_head"];
        let (hidden_key, heads_key) = (r.key_of(HIDDEN), r.key_of(HEADS));
        let hidden_size = r.usize_req(HIDDEN)?;
        let num_attention_heads = r.usize_req(HEADS)?;
        let num_key_value_heads = r.usize_opt("num_key_value_heads")?.unwrap_or(num_attention_heads);
        if num_attention_heads % num_key_value_heads != 0 {
            return Err(r.err(format!(
                "`{heads_key}` ({num_attention_heads}) must be a multiple of `num_key_value_heads` ({num_key_value_heads})"
            )));
        }
        // transformers' per-family defaults of generic keys, from the family's table (GLM's
        // head_dim 128, Nemotron's partial_rotary_factor 0.5); none for an unknown model_type.
        // `head_dim: null` means hidden / heads (ERNIE 4.5's and Seed-OSS's config classes):
        // only an absent key takes the family's default.
        let head_dim_null = map.get("head_dim").is_some_and(Value::is_null);
        let head_dim = match (r.usize_opt("head_dim")?, family.and_then(|f| f.head_dim_default).filter(|_| !head_dim_null)) {
            (Some(d), _) | (None, Some(d)) => d,
            (None, None) if hidden_size % num_attention_heads == 0 => hidden_size / num_attention_heads,
            (None, None) => {
                return Err(r.err(format!(
                    "`{hidden_key}` ({hidden_size}) is not a multiple of `{heads_key}` ({num_attention_heads}) and `head_dim` is not given"
                )))
            }
        };
        let latent = match crate::arch::decoder_for(&model_type).and_then(|f| f.names.attention.latent().map(|n| (n, f.layout.rope_default.scaling))) {
            Some((names, default_rope)) => Some(LatentDims::read(&r, names, default_rope)?),
            None => None,
        };
        // Latent attention attends over one shared key/value head of the compressed width
        // (see `LatentDims`); `head_dim` in its configs is the rotary width.
        let (head_dim, num_key_value_heads) = match &latent {
            Some(l) => (l.sizes.kv_rank + l.sizes.rope, 1),
            None => (head_dim, num_key_value_heads),
        };
        // GPT-2 writes `n_inner: null` to mean 4 * hidden.
        let intermediate_size = match r.usize_any(&["intermediate_size", "n_inner"])? {
            Some(n) => n,
            None if map.contains_key("n_inner") => 4 * hidden_size,
            None => return Err(r.missing(&["intermediate_size", "n_inner"])),
        };
        const POSITIONS: &[&str] = &["max_position_embeddings", "n_positions"];
        let positions_key = r.key_of(POSITIONS);
        let max_position_embeddings = r.usize_any(POSITIONS)?.unwrap_or(2048);
        let partial_default = family.map_or(1.0, |f| f.partial_rotary_default);
        let rope_default = family.map_or(crate::arch::RopeDefault { theta: 10000.0, scaling: None, renamed: &[], ntk_alpha: false }, |f| f.rope_default);
        let (rope, sliding_rope) = read_ropes(&r, max_position_embeddings, head_dim, partial_default, rope_default)?;
        let rotary_dim = latent.as_ref().map_or((head_dim as f64 * rope.partial_rotary_factor) as usize, |l| l.sizes.rope);
        if rotary_dim == 0 || !rotary_dim.is_multiple_of(2) || rotary_dim > head_dim {
            return Err(r.err(format!(
                "rotary dimension {rotary_dim} (head_dim {head_dim} x partial_rotary_factor {}) must be even and at most head_dim",
                rope.partial_rotary_factor
            )));
        }
        check_rope_tables(&r, positions_key, max_position_embeddings, rotary_dim, &rope.kind)?;
        if let Some(local) = &sliding_rope {
            let local_dim = (head_dim as f64 * local.partial_rotary_factor) as usize;
            if local_dim == 0 || !local_dim.is_multiple_of(2) || local_dim > head_dim {
                return Err(r.err(format!(
                    "sliding layers' rotary dimension {local_dim} (head_dim {head_dim} x partial_rotary_factor {}) must be even and at most head_dim",
                    local.partial_rotary_factor
                )));
            }
            check_rope_tables(&r, positions_key, max_position_embeddings, local_dim, &local.kind)?;
            if matches!(local.kind, RopeKind::LongRope { .. }) {
                return Err(r.err("longrope for sliding layers (`rope_parameters.sliding_attention`) is not supported".into()));
            }
            if let RopeKind::Factors { factors } = &local.kind {
                if factors.len() != local_dim / 2 {
                    return Err(r.err(format!("rope key `rope_parameters.sliding_attention.factors` has {} entries; rotary dimension {local_dim} needs {}", factors.len(), local_dim / 2)));
                }
            }
        }
        // Per-dimension factor lists (LongRoPE's two, llama.cpp's freq_factors) cover the rotary half.
        let factor_lists: Vec<(&str, &Vec<f64>)> = match &rope.kind {
            RopeKind::LongRope { short_factor, long_factor, .. } => vec![("short_factor", short_factor), ("long_factor", long_factor)],
            RopeKind::Factors { factors } => vec![("factors", factors)],
            _ => vec![],
        };
        for (key, f) in factor_lists {
            if f.len() != rotary_dim / 2 {
                return Err(r.err(format!("rope key `{key}` has {} entries; rotary dimension {rotary_dim} needs {}", f.len(), rotary_dim / 2)));
            }
        }
        let act_key = if r.present("hidden_act").is_some() { "hidden_act" } else { "activation_function" };
        let hidden_act = match r.present(act_key) {
            None => Activation::Silu,
            Some(v) => v.as_str().and_then(Activation::parse).ok_or_else(|| {
                r.err(format!("key `{act_key}` is {v}, which is not supported; supported: {}", Activation::NAMES))
            })?,
        };
        let num_hidden_layers = r.usize_req(&["num_hidden_layers", "n_layer"])?;
        let enabled = r.bool_opt("use_sliding_window")?;
        // transformers 5.x saves `sliding_window: 0` when `use_sliding_window` is false: no
        // window, not a bad value. With the window on, 0 stays an error.
        let size = if enabled == Some(false) { r.count_opt("sliding_window")?.filter(|&w| w > 0) } else { r.usize_opt("sliding_window")? };
        let sliding_window = SlidingWindowConfig {
            size,
            enabled,
            max_window_layers: r.count_opt("max_window_layers")?,
            layer_types: r.strings_opt("layer_types")?,
            null: map.get("sliding_window").is_some_and(Value::is_null),
        };
        if let Some(types) = &sliding_window.layer_types {
            if types.len() != num_hidden_layers {
                return Err(r.err(format!(
                    "key `layer_types` lists {} layers but `num_hidden_layers` is {num_hidden_layers}",
                    types.len()
                )));
            }
            if let Some(bad) = types.iter().find(|t| *t != "full_attention" && *t != "sliding_attention") {
                return Err(r.err(format!(
                    "key `layer_types` holds `{bad}`; supported: full_attention, sliding_attention"
                )));
            }
        }
        // Boolean switches read later through `flag`: check their type here, so a typo such as
        // `"attention_bias": "true"` is an error naming the key, not a silent default.
        for key in BOOLEAN_KEYS {
            r.bool_opt(key)?;
        }
        // EmbeddingGemma (`gemma3_text` with this switch): every token attends to every other
        // (and a sliding layer to `window / 2` either side); a causal decoder computes another
        // model.
        if r.bool_opt("use_bidirectional_attention")? == Some(true) {
            return Err(r.err(
                "key `use_bidirectional_attention` is true: the model attends in both directions (an embedding model such as EmbeddingGemma), which a causal decoder does not compute and no encoder here builds for this family".into(),
            ));
        }
        Ok(DecoderConfig {
            path: path.to_path_buf(),
            hidden_size,
            intermediate_size,
            num_hidden_layers,
            num_attention_heads,
            num_key_value_heads,
            head_dim,
            vocab_size: r.usize_req(&["vocab_size"])?,
            max_position_embeddings,
            norm_eps: read_norm_eps(&r)?,
            tie_word_embeddings: r.bool_opt("tie_word_embeddings")?,
            hidden_act,
            rope,
            sliding_rope,
            sliding_window,
            bos_token_id: r.token_ids("bos_token_id")?.first().copied(),
            eos_token_id: r.token_ids("eos_token_id")?,
            pad_token_id: r.token_ids("pad_token_id")?.first().copied(),
            model_type,
            mrope: read_mrope(&r, rotary_dim)?,
            raw: map.clone(),
            multimodal: None,
            latent,
        })
    }

    /// The softmax scale of layer `layer` (0-based) when it is not `default` (1/sqrt(head_dim)):
    /// GPT-2's `scale_attn_weights` (false: no scaling) and `scale_attn_by_inverse_layer_idx`
    /// (divide by layer + 1); absent in other families, which means the default.
    pub fn attention_scale(&self, layer: usize, default: f64) -> Option<f32> {
        let by_layer = (layer + 1) as f64;
        match (self.flag("scale_attn_weights", true), self.flag("scale_attn_by_inverse_layer_idx", false)) {
            (true, false) => None,
            (true, true) => Some((default / by_layer) as f32),
            (false, false) => Some(1.0),
            (false, true) => Some(1.0 / (layer + 1) as f32),
        }
    }

    /// A family's number key (see [`crate::arch::Key`]): absent -> `default`, JSON `null` ->
    /// `None` (the feature is off, as transformers reads `attn_logit_softcapping: null`), else a
    /// finite positive number; anything else is an error naming the key.
    pub fn number(&self, key: &str, default: Option<f64>) -> Result<Option<f64>> {
        match self.raw.get(key) {
            None => Ok(default),
            Some(Value::Null) => Ok(None),
            Some(v) => match v.as_f64() {
                Some(x) if x > 0.0 && x.is_finite() => Ok(Some(x)),
                _ => Err(self.err(format!("key `{key}` must be a positive number (or null), found {v}"))),
            },
        }
    }

    /// A family's positive integer key: absent or `null` -> `None`.
    pub fn count(&self, key: &str) -> Result<Option<usize>> {
        match self.raw.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => dimension(v, 1).map(Some).map_err(|why| self.err(format!("key `{key}` {why}"))),
        }
    }

    /// Like [`DecoderConfig::count`], but zero is allowed (`first_k_dense_replace: 0`,
    /// `num_nextn_predict_layers: 0`).
    pub fn count_or_zero(&self, key: &str) -> Result<Option<usize>> {
        match self.raw.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => dimension(v, 0).map(Some).map_err(|why| self.err(format!("key `{key}` {why}"))),
        }
    }

    /// A family's activation key (Gemma's `hidden_activation`): absent or `null` -> `default`.
    pub fn activation(&self, key: &str, default: Activation) -> Result<Activation> {
        match self.raw.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v.as_str().and_then(Activation::parse).ok_or_else(|| {
                self.err(format!("key `{key}` is {v}, which is not supported; supported: {}", Activation::NAMES))
            }),
        }
    }

    fn err(&self, reason: String) -> Error {
        Error::Config { path: self.path.clone(), reason }
    }

    /// Number of rotated dimensions per head.
    pub fn rotary_dim(&self) -> usize {
        match &self.latent {
            Some(l) => l.sizes.rope,
            None => (self.head_dim as f64 * self.rope.partial_rotary_factor) as usize,
        }
    }

    /// A boolean config key: `default` when absent, false when `null` (transformers keeps the
    /// `None` and its truth test reads it as false: `use_parallel_residual: null` is the
    /// sequential block, `attention_bias: null` no bias, whatever the class default), `default`
    /// when not a boolean (parse time has already checked the keys it knows).
    pub fn flag(&self, key: &str, default: bool) -> bool {
        match self.raw.get(key) {
            None => default,
            Some(Value::Null) => false,
            Some(v) => v.as_bool().unwrap_or(default),
        }
    }

    /// Each layer's sliding window (`None`: full attention), as the family that builds this
    /// `model_type` reads its window keys (`DecoderFamily::windows`: which keys the family
    /// reads, its default window and pattern); an error for a `model_type` no family builds or
    /// a window config transformers cannot run.
    pub fn layer_windows(&self) -> Result<Vec<Option<usize>>> {
        match crate::arch::decoder_for(&self.model_type) {
            Some(family) => family.windows(self),
            None => Err(Error::Config { path: self.path.clone(), reason: format!("no decoder family builds model_type `{}`", self.model_type) }),
        }
    }
}

/// RoPE settings from either spelling: the legacy top-level `rope_theta` + `rope_scaling`, or
/// the newer `rope_parameters` object (which carries `rope_theta` itself). As in transformers,
/// a top-level `original_max_position_embeddings` (Phi-3) wins over the one inside the
/// scaling object, and `max_position_embeddings` is the last fallback.
///
/// Gemma 3 has one RoPE per layer type: the nested `rope_parameters` form (`{"full_attention":
/// {...}, "sliding_attention": {...}}`) gives both, each read like a whole `rope_parameters`;
/// the published spelling gives the full layers' as usual and the sliding layers' base as
/// `rope_local_base_freq` (no scaling). Returns `(rope, sliding-layer rope if the config gives
/// one)`; the family table decides whether sliding layers use it.
///
/// `defaults`: the family's `rope_theta` when none is given, and its scaling when the config
/// has neither `rope_parameters` nor `rope_scaling` (gpt-oss: YaRN).
fn read_ropes(r: &Reader, max_positions: usize, head_dim: usize, partial_default: f64, defaults: crate::arch::RopeDefault) -> Result<(RopeConfig, Option<RopeConfig>)> {
    let nested = match r.present("rope_parameters") {
        Some(Value::Object(m)) if LAYER_TYPES.iter().any(|t| m.get(*t).is_some_and(Value::is_object)) => Some(m),
        _ => None,
    };
    if let Some(m) = nested {
        if let Some(bad) = m.keys().find(|k| !LAYER_TYPES.contains(&k.as_str())) {
            return Err(r.err(format!(
                "key `rope_parameters` holds per-layer-type entries and `{bad}`; expected only {}",
                LAYER_TYPES.join(", ")
            )));
        }
        let read = |t: &str| -> Result<Option<RopeConfig>> {
            match m.get(t) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Object(p)) => read_rope(r, &format!("rope_parameters.{t}"), Some(p), max_positions, head_dim, partial_default, defaults).map(Some),
                Some(v) => Err(r.err(format!("key `rope_parameters.{t}` must be an object, found {v}"))),
            }
        };
        let full = match read("full_attention")? {
            Some(f) => f,
            None => read_rope(r, "rope_parameters.full_attention", None, max_positions, head_dim, partial_default, defaults)?,
        };
        return Ok((full, read("sliding_attention")?));
    }
    // The family's default scaling (transformers fills `rope_parameters` with it when the config
    // gives none); a JSON literal in the table, so a parse failure is a table bug.
    let default_params: Option<Map<String, Value>> = match defaults.scaling {
        Some(text) => match serde_json::from_str(text) {
            Ok(Value::Object(m)) => Some(m),
            _ => return Err(r.err(format!("internal: the `{}` table's default RoPE scaling is not a JSON object", r.present("model_type").and_then(Value::as_str).unwrap_or("?")))),
        },
        None => None,
    };
    let (params_key, params) = match r.first(&["rope_parameters", "rope_scaling"]) {
        None if default_params.is_some() => ("rope_parameters (the family's default)", default_params.as_ref()),
        None => ("rope_scaling", None),
        Some((k, Value::Object(m))) => (k, Some(m)),
        Some((k, v)) => return Err(r.err(format!("key `{k}` must be an object, found {v}"))),
    };
    let rope = read_rope(r, params_key, params, max_positions, head_dim, partial_default, defaults)?;
    let local = match r.f64_any(&["rope_local_base_freq"])? {
        None => None,
        Some(theta) if theta > 1.0 && theta.is_finite() => {
            Some(RopeConfig { theta, kind: RopeKind::Default, partial_rotary_factor: rope.partial_rotary_factor, mscale: None })
        }
        Some(theta) => return Err(r.err(format!("`rope_local_base_freq` must be a finite number above 1, found {theta}"))),
    };
    Ok((rope, local))
}

/// The layer types `layer_types` may hold.
const LAYER_TYPES: &[&str] = &["full_attention", "sliding_attention"];

/// One RoPE settings object (`params`, under the key `params_key`), with the top-level keys
/// as fallbacks.
/// `partial_default`: `partial_rotary_factor` when neither `params` nor the top level gives it
/// (the family's default, 1 for most).
fn read_rope(
    r: &Reader,
    params_key: &str,
    params: Option<&Map<String, Value>>,
    max_positions: usize,
    head_dim: usize,
    partial_default: f64,
    defaults: crate::arch::RopeDefault,
) -> Result<RopeConfig> {
    let get = |k: &str| params.and_then(|m| m.get(k)).filter(|v| !v.is_null());
    let num = |k: &str| -> Result<Option<f64>> {
        match get(k) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| r.err(format!("key `{params_key}.{k}` must be a number, found {v}"))),
        }
    };
    let mut theta = match num("rope_theta")? {
        Some(t) => t,
        None => r.f64_any(&["rope_theta"])?.unwrap_or(defaults.theta),
    };
    let partial_rotary_factor = match num("partial_rotary_factor")? {
        Some(p) => p,
        None => r.f64_any(&["partial_rotary_factor"])?.unwrap_or(partial_default),
    };
    if !(theta > 1.0 && theta.is_finite()) {
        return Err(r.err(format!("`rope_theta` must be a finite number above 1, found {theta}")));
    }
    if !(partial_rotary_factor > 0.0 && partial_rotary_factor <= 1.0) {
        return Err(r.err(format!("`partial_rotary_factor` must lie in (0, 1], found {partial_rotary_factor}")));
    }
    let kind_name = match get("rope_type").or_else(|| get("type")) {
        // transformers refuses a scaling object without a type; reading it as `default` would
        // drop its `factor` in silence. Only the base keys may stand without one.
        None if params.is_some_and(|m| m.keys().any(|k| !UNTYPED_ROPE_KEYS.contains(&k.as_str()))) => {
            let keys: Vec<&str> = params.into_iter().flat_map(|m| m.keys().map(String::as_str)).collect();
            return Err(r.err(format!(
                "key `{params_key}` has no `rope_type` (or `type`) but holds {}; say which scaling it is, \
                 e.g. \"rope_type\": \"linear\" (supported: {SUPPORTED_ROPE_TYPES})",
                keys.join(", ")
            )));
        }
        None => "default",
        Some(v) => v.as_str().ok_or_else(|| r.err(format!("key `{params_key}.rope_type` must be a string, found {v}")))?,
    };
    // Names the family's config class reads as another type (Phi3Config: `su` and `yarn`,
    // from Phi-3's first configs, are LongRoPE).
    let kind_name = defaults.renamed.iter().find(|(from, _)| *from == kind_name).map_or(kind_name, |(_, to)| *to);
    let need = |k: &str| -> Result<f64> {
        num(k)?.ok_or_else(|| r.err(format!("rope type `{kind_name}` needs the key `{params_key}.{k}`")))
    };
    let positive = |k: &str, v: f64| -> Result<f64> {
        if v > 0.0 && v.is_finite() {
            Ok(v)
        } else {
            Err(r.err(format!("key `{params_key}.{k}` must be a positive number, found {v}")))
        }
    };
    let original_max = || -> Result<f64> {
        let v = match r.f64_any(&["original_max_position_embeddings"])? {
            Some(v) => v,
            None => num("original_max_position_embeddings")?.unwrap_or(max_positions as f64),
        };
        positive("original_max_position_embeddings", v)
    };
    let factors = |k: &str| -> Result<Vec<f64>> {
        match get(k) {
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_f64()
                        .filter(|x| *x > 0.0)
                        .ok_or_else(|| r.err(format!("key `{params_key}.{k}` must hold positive numbers, found {v}")))
                })
                .collect(),
            Some(v) => Err(r.err(format!("key `{params_key}.{k}` must be a list of numbers, found {v}"))),
            None => Err(r.err(format!("rope type `{kind_name}` needs the key `{params_key}.{k}`"))),
        }
    };
    let kind = match kind_name {
        "default" => RopeKind::Default,
        // Qwen2.5-VL's published configs say `"type": "mrope"`; transformers reads that as
        // `default` (the sections are `mrope_section`, read by `read_mrope`).
        "mrope" if get("mrope_section").is_some() => RopeKind::Default,
        "linear" => RopeKind::Linear { factor: positive("factor", need("factor")?)? },
        "llama3" => RopeKind::Llama3 {
            factor: positive("factor", need("factor")?)?,
            low_freq_factor: positive("low_freq_factor", need("low_freq_factor")?)?,
            high_freq_factor: positive("high_freq_factor", need("high_freq_factor")?)?,
            original_max_position_embeddings: original_max()?,
        },
        "yarn" => {
            let original = original_max()?;
            let factor = match num("factor")? {
                Some(f) => positive("factor", f)?,
                None => max_positions as f64 / original,
            };
            let mscale = yarn_mscale;
            let attention_factor = match (num("attention_factor")?, num("mscale")?, num("mscale_all_dim")?) {
                (Some(a), _, _) => a,
                (None, Some(m), Some(all)) if m != 0.0 && all != 0.0 => mscale(factor, m) / mscale(factor, all),
                _ => mscale(factor, 1.0),
            };
            let truncate = match get("truncate") {
                None => true,
                Some(v) => v.as_bool().ok_or_else(|| r.err(format!("key `{params_key}.truncate` must be true or false, found {v}")))?,
            };
            RopeKind::Yarn {
                factor,
                original_max_position_embeddings: original,
                attention_factor,
                // `or` in transformers: a 0 counts as absent.
                beta_fast: num("beta_fast")?.filter(|b| *b != 0.0).unwrap_or(32.0),
                beta_slow: num("beta_slow")?.filter(|b| *b != 0.0).unwrap_or(1.0),
                truncate,
            }
        }
        "longrope" => {
            let original = original_max()?;
            let factor = match num("factor")? {
                Some(f) => f,
                None => max_positions as f64 / original,
            };
            let attention_factor = match num("attention_factor")? {
                Some(a) => a,
                None if factor <= 1.0 => 1.0,
                None => (1.0 + factor.ln() / original.ln()).sqrt(),
            };
            RopeKind::LongRope {
                short_factor: factors("short_factor")?,
                long_factor: factors("long_factor")?,
                original_max_position_embeddings: original,
                attention_factor,
            }
        }
        "freq_factors" => RopeKind::Factors { factors: factors("factors")? },
        // HunYuan's `dynamic` with a fixed `alpha` (`compute_ntk_alpha_rope_parameters`): the
        // base stretched once, `theta * alpha^(head_dim / (head_dim - 2))`, no length dependence.
        "dynamic" if defaults.ntk_alpha && get("alpha").is_some() => {
            let alpha = positive("alpha", need("alpha")?)?;
            if head_dim <= 2 {
                return Err(r.err(format!("NTK-alpha RoPE needs head_dim above 2, found {head_dim}")));
            }
            theta *= alpha.powf(head_dim as f64 / (head_dim as f64 - 2.0));
            if !theta.is_finite() {
                return Err(r.err(format!("`{params_key}.alpha` {alpha} stretches the RoPE base past any finite number")));
            }
            RopeKind::Default
        }
        // Dynamic NTK (`_compute_dynamic_ntk_parameters`): the base grows with the running length
        // only once it passes max_position_embeddings; below that the frequencies are the default
        // ones. The graph's cos/sin caches end at max_position_embeddings (genai's context length,
        // and a static cache's longest), so no position it accepts sees the stretch: exact.
        "dynamic" => {
            // (transformers warns on a factor below 1; within the positions none changes anything)
            let factor = need("factor")?;
            if !(factor.is_finite() && factor > 0.0) {
                return Err(r.err(format!("`{params_key}.factor` must be a positive number for dynamic NTK RoPE, found {factor}")));
            }
            RopeKind::Default
        }
        other => return Err(r.err(format!("rope type `{other}` is not supported; supported: {SUPPORTED_ROPE_TYPES}"))),
    };
    // PhiMoE's LongRoPE scales each set by its own factor (`short_mscale`, `long_mscale`).
    let mscale = match (&kind, num("short_mscale")?, num("long_mscale")?) {
        (RopeKind::LongRope { attention_factor, .. }, short, long) if short.is_some() || long.is_some() => {
            Some((positive("short_mscale", short.unwrap_or(*attention_factor))?, positive("long_mscale", long.unwrap_or(*attention_factor))?))
        }
        _ => None,
    };
    Ok(RopeConfig { theta, kind, partial_rotary_factor, mscale })
}

/// The norms' epsilon under any of its spellings: a positive finite number (a negative or
/// zero epsilon would divide by zero on an all-zero row).
fn read_norm_eps(r: &Reader) -> Result<f64> {
    const KEYS: &[&str] = &["rms_norm_eps", "layer_norm_epsilon", "layer_norm_eps"];
    match r.f64_any(KEYS)? {
        None => Ok(1e-6),
        Some(e) if e > 0.0 && e.is_finite() => Ok(e),
        Some(e) => Err(r.err(format!("key `{}` must be a positive number, found {e}", r.key_of(KEYS)))),
    }
}

/// The most bytes of cos/sin tables a build computes in memory: Qwen2.5-1M's million positions
/// at rotary dimension 128 need 0.5 GiB; a value far beyond any published model (a typo, or a
/// corrupt config) must be an error naming its key, not an aborted allocation.
pub const MAX_ROPE_TABLE_BYTES: u64 = 2 << 30;

/// Refuses a position count whose cos/sin tables (f32, one pair per frequency set) would not
/// fit [`MAX_ROPE_TABLE_BYTES`], before anything is allocated.
fn check_rope_tables(r: &Reader, key: &str, positions: usize, rotary_dim: usize, kind: &RopeKind) -> Result<()> {
    let sets: u64 = if matches!(kind, RopeKind::LongRope { .. }) { 2 } else { 1 };
    let bytes = (positions as u64).saturating_mul(rotary_dim as u64 / 2).saturating_mul(2 * 4 * sets);
    if bytes > MAX_ROPE_TABLE_BYTES {
        return Err(r.err(format!(
            "`{key}` ({positions}) is too large to build: its cos/sin tables (positions x rotary_dim/2 = {rotary_dim}/2 \
             values, x 2 tables x 4 bytes{}) would take {:.1} GiB, more than the {} GiB this tool builds; \
             set `{key}` to the context length the model is meant to run",
            if sets > 1 { " x 2 factor sets" } else { "" },
            bytes as f64 / (1u64 << 30) as f64,
            MAX_ROPE_TABLE_BYTES >> 30
        )));
    }
    Ok(())
}

/// Boolean keys the families read through [`DecoderConfig::flag`].
const BOOLEAN_KEYS: &[&str] = &[
    "attention_bias",
    "attention_out_bias",
    "mlp_bias",
    "use_bias",
    "qkv_bias",
    "use_qkv_bias",
    "lm_head_bias",
    "tie_word_embeddings",
    "use_sliding_window",
    "scale_attn_weights",
    "scale_attn_by_inverse_layer_idx",
    "use_qk_norm",
    "qk_layernorm",
    "use_parallel_residual",
    "norm_topk_prob",
];

/// Keys a RoPE object may hold without a `rope_type`: they describe the base frequencies, not
/// a scaling.
const UNTYPED_ROPE_KEYS: &[&str] = &["rope_theta", "partial_rotary_factor"];

/// The `rope_type` values this tool builds.
pub const SUPPORTED_ROPE_TYPES: &str = "default, linear, dynamic, llama3, yarn, longrope, freq_factors";

/// Multimodal RoPE: which of the three position rows (temporal, height, width) each of the
/// `rotary_dim / 2` frequencies reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MropeConfig {
    /// `mrope_section`: how many frequencies each row owns (sum: `rotary_dim / 2`).
    pub section: Vec<usize>,
    /// `mrope_interleaved` (Qwen3-VL): the rows take turns frequency by frequency (t, h, w, t,
    /// ...) while each has frequencies left; otherwise (Qwen2.5-VL) contiguous chunks.
    pub interleaved: bool,
}

impl MropeConfig {
    /// For each frequency, the position row (0 temporal, 1 height, 2 width) it reads.
    pub fn rows(&self) -> Vec<usize> {
        let half: usize = self.section.iter().sum();
        if !self.interleaved {
            return self.section.iter().enumerate().flat_map(|(row, &n)| std::iter::repeat_n(row, n)).collect();
        }
        // transformers' interleaved layout: frequency i reads height when i % 3 == 1 and
        // i < 3 * section[1], width when i % 3 == 2 and i < 3 * section[2], else temporal.
        (0..half)
            .map(|i| match i % 3 {
                1 if i < 3 * self.section[1] => 1,
                2 if i < 3 * self.section[2] => 2,
                _ => 0,
            })
            .collect()
    }
}

/// `mrope_section` (in `rope_parameters` or legacy `rope_scaling`), checked against the rotary
/// width; absent: no multimodal RoPE.
fn read_mrope(r: &Reader, rotary_dim: usize) -> Result<Option<MropeConfig>> {
    let Some((key, Value::Object(params))) = r.first(&["rope_parameters", "rope_scaling"]) else { return Ok(None) };
    let Some(section) = params.get("mrope_section").filter(|v| !v.is_null()) else { return Ok(None) };
    let counts: Option<Vec<usize>> = section.as_array().and_then(|a| a.iter().map(|v| v.as_u64().map(|n| n as usize)).collect());
    let section = match counts {
        Some(c) if c.len() == 3 => c,
        _ => return Err(r.err(format!("key `{key}.mrope_section` must list three whole numbers (temporal, height, width), found {section}"))),
    };
    if section.iter().sum::<usize>() != rotary_dim / 2 {
        return Err(r.err(format!(
            "key `{key}.mrope_section` {section:?} sums to {}, but the rotary dimension {rotary_dim} has {} frequencies",
            section.iter().sum::<usize>(),
            rotary_dim / 2
        )));
    }
    let interleaved = match params.get("mrope_interleaved") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => return Err(r.err(format!("key `{key}.mrope_interleaved` must be true or false, found {v}"))),
    };
    Ok(Some(MropeConfig { section, interleaved }))
}

/// The top level of a vision-language config.json: `text_config` is the decoder
/// ([`DecoderConfig`] reads it), `vision_config` the vision tower, and the rest (image token
/// ids, projector settings) what the vision and embedding parts and genai_config.json read.
#[derive(Clone, Debug, PartialEq)]
pub struct Multimodal {
    /// The checkpoint's own `model_type` (`qwen2_5_vl`, `gemma3`), not the text model's.
    pub model_type: String,
    /// `vision_config`.
    pub vision: Map<String, Value>,
    /// Every top-level key.
    pub raw: Map<String, Value>,
}

/// Top-level keys a multimodal config carries for its text model when `text_config` lacks them.
const INHERITED_TEXT_KEYS: &[&str] = &["bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings"];

/// Vision-language types whose published config.json is flat: the text model's keys at the top
/// level beside `vision_config`, no `text_config` (Qwen2.5-VL as released; transformers then
/// builds the text config from the top-level keys), with the `model_type` transformers gives
/// that text config.
const FLAT_TEXT_CONFIGS: &[(&str, &str)] = &[("qwen2_5_vl", "qwen2_5_vl_text")];

impl Multimodal {
    /// `text_config` with the inherited top-level keys, when `map` is a vision-language config
    /// (it has both `text_config` and `vision_config`, or is one of the [`FLAT_TEXT_CONFIGS`]
    /// with `vision_config`); `None` for a text-only config.
    fn text_config(path: &Path, map: &Map<String, Value>) -> Result<Option<Map<String, Value>>> {
        if map.get("vision_config").is_none() {
            return Ok(None);
        }
        let Some(text) = map.get("text_config").filter(|t| !t.is_null()) else {
            let model_type = map.get("model_type").and_then(Value::as_str);
            let Some((_, text_type)) = FLAT_TEXT_CONFIGS.iter().find(|(t, _)| Some(*t) == model_type) else { return Ok(None) };
            let mut text: Map<String, Value> = map.iter().filter(|(k, _)| k.as_str() != "vision_config").map(|(k, v)| (k.clone(), v.clone())).collect();
            text.insert("model_type".into(), Value::String((*text_type).to_string()));
            return Ok(Some(text));
        };
        let Value::Object(text) = text else {
            return Err(Error::Config { path: path.to_path_buf(), reason: format!("key `text_config` must be an object, found {text}") });
        };
        let mut text = text.clone();
        for key in INHERITED_TEXT_KEYS {
            if let (false, Some(v)) = (text.contains_key(*key), map.get(*key)) {
                text.insert((*key).to_string(), v.clone());
            }
        }
        Ok(Some(text))
    }

    fn read(path: &Path, map: Map<String, Value>) -> Result<Multimodal> {
        let err = |reason: String| Error::Config { path: path.to_path_buf(), reason };
        let model_type = match map.get("model_type") {
            Some(Value::String(t)) => t.clone(),
            _ => return Err(err("required key `model_type` is missing or not a string".into())),
        };
        let vision = match map.get("vision_config") {
            Some(Value::Object(v)) => v.clone(),
            other => return Err(err(format!("key `vision_config` must be an object, found {}", other.map_or("nothing".to_string(), |v| v.to_string())))),
        };
        Ok(Multimodal { model_type, vision, raw: map })
    }
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
    fn gemma3_ropes_in_both_spellings() {
        let nested = parse(&format!(
            r#"{{{BASE},"rope_parameters":{{"full_attention":{{"rope_type":"linear","factor":8.0,"rope_theta":1000000.0}},"sliding_attention":{{"rope_type":"default","rope_theta":10000.0}}}}}}"#
        ))
        .unwrap();
        let published = parse(&format!(
            r#"{{{BASE},"rope_theta":1000000.0,"rope_scaling":{{"rope_type":"linear","factor":8.0}},"rope_local_base_freq":10000.0}}"#
        ))
        .unwrap();
        for c in [&nested, &published] {
            assert_eq!((c.rope.theta, &c.rope.kind), (1e6, &RopeKind::Linear { factor: 8.0 }));
            let local = c.sliding_rope.as_ref().unwrap();
            assert_eq!((local.theta, &local.kind), (1e4, &RopeKind::Default));
        }
        assert!(parse(BASE_OBJECT).unwrap().sliding_rope.is_none());
        let e = parse(&format!(r#"{{{BASE},"rope_parameters":{{"full_attention":{{"rope_theta":10.0}},"chunked":{{}}}}}}"#))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`rope_parameters`") && e.contains("chunked"), "{e}");
        let e = parse(&format!(r#"{{{BASE},"rope_parameters":{{"sliding_attention":{{"rope_type":"linear"}}}}}}"#))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`rope_parameters.sliding_attention.factor`"), "{e}");
    }

    const BASE_OBJECT: &str = r#"{"model_type":"llama","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":512}"#;

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
        let e = parse(&format!(r#"{{{BASE},"attention_bias":"yes"}}"#)).unwrap_err().to_string();
        assert!(e.contains("`attention_bias`"), "{e}");
        let e = parse("{not json").unwrap_err().to_string();
        assert!(e.contains("not valid JSON"), "{e}");
        let e = parse(&format!(r#"{{{BASE},"rope_scaling":{{"type":"linear"}}}}"#)).unwrap_err().to_string();
        assert!(e.contains("`rope_scaling.factor`"), "{e}");
    }

    #[test]
    fn phi3_top_level_original_max_wins_and_factor_defaults_to_the_ratio() {
        let c = parse(&format!(
            r#"{{{BASE},"max_position_embeddings":64,"original_max_position_embeddings":4,
            "rope_scaling":{{"type":"longrope","short_factor":[1,1,1,1,1,1,1,1],"long_factor":[2,2,2,2,2,2,2,2],"original_max_position_embeddings":999}}}}"#
        ))
        .unwrap();
        let RopeKind::LongRope { original_max_position_embeddings, attention_factor, .. } = c.rope.kind else { panic!() };
        assert_eq!(original_max_position_embeddings, 4.0);
        // factor = 64 / 4 = 16: sqrt(1 + ln 16 / ln 4) = sqrt(3).
        assert!((attention_factor - 3f64.sqrt()).abs() < 1e-12);
        let e = parse(&format!(r#"{{{BASE},"rope_scaling":{{"type":"longrope","short_factor":[1],"long_factor":[1]}}}}"#))
            .unwrap_err()
            .to_string();
        assert!(e.contains("short_factor") && e.contains("needs 8"), "{e}");
    }

    #[test]
    fn freq_factors_are_read_as_given_and_must_cover_the_rotary_half() {
        // BASE: head_dim 16, so 8 factors.
        let c = parse(&format!(r#"{{{BASE},"rope_scaling":{{"rope_type":"freq_factors","factors":[1,1,1,1,2.5,4,4,4]}}}}"#)).unwrap();
        assert_eq!(c.rope.kind, RopeKind::Factors { factors: vec![1.0, 1.0, 1.0, 1.0, 2.5, 4.0, 4.0, 4.0] });
        let e = parse(&format!(r#"{{{BASE},"rope_scaling":{{"rope_type":"freq_factors","factors":[1,1]}}}}"#)).unwrap_err().to_string();
        assert!(e.contains("`factors`") && e.contains("needs 8"), "{e}");
        let e = parse(&format!(r#"{{{BASE},"rope_scaling":{{"rope_type":"freq_factors","factors":[1,1,1,1,1,1,1,0]}}}}"#)).unwrap_err().to_string();
        assert!(e.contains("rope_scaling.factors") && e.contains("positive"), "{e}");
        let e = parse(&format!(r#"{{{BASE},"rope_scaling":{{"rope_type":"freq_factors"}}}}"#)).unwrap_err().to_string();
        assert!(e.contains("`rope_scaling.factors`"), "{e}");
    }

    /// Families whose transformers config defaults `head_dim` or `partial_rotary_factor`
    /// differently from the generic reader (GLM: 128 and 0.5; Nemotron, Phi: 0.5) get their
    /// table's default; a given key wins, at the top level or in `rope_parameters`.
    #[test]
    fn family_defaults_of_generic_keys() {
        let obj = |fields: String| format!("{{{fields}}}");
        let glm = parse(&obj(BASE.replace("llama", "glm").replace(r#""hidden_size":64"#, r#""hidden_size":512"#))).unwrap();
        assert_eq!((glm.head_dim, glm.rope.partial_rotary_factor, glm.rotary_dim()), (128, 0.5, 64));
        let nemotron = parse(&obj(BASE.replace("llama", "nemotron"))).unwrap();
        assert_eq!((nemotron.head_dim, nemotron.rope.partial_rotary_factor), (16, 0.5));
        let given = parse(&format!(r#"{{{},"partial_rotary_factor":0.25,"head_dim":32}}"#, BASE.replace("llama", "phi"))).unwrap();
        assert_eq!((given.head_dim, given.rope.partial_rotary_factor), (32, 0.25));
        let nested = parse(&format!(r#"{{{},"rope_parameters":{{"rope_type":"default","rope_theta":10000.0,"partial_rotary_factor":0.75}}}}"#, BASE.replace("llama", "phi"))).unwrap();
        assert_eq!(nested.rope.partial_rotary_factor, 0.75);
        let llama = parse(BASE_OBJECT).unwrap();
        assert_eq!((llama.head_dim, llama.rope.partial_rotary_factor), (16, 1.0));
    }

    /// Qwen2.5-VL as released (7B's config.json): the text model's keys at the top level, no
    /// `text_config`, and the legacy `"type": "mrope"` that transformers reads as `default`.
    const QWEN2_5_VL_7B: &str = r#"{
      "architectures": ["Qwen2_5_VLForConditionalGeneration"], "attention_dropout": 0.0,
      "bos_token_id": 151643, "eos_token_id": 151645, "vision_start_token_id": 151652,
      "vision_end_token_id": 151653, "vision_token_id": 151654, "image_token_id": 151655,
      "video_token_id": 151656, "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02,
      "intermediate_size": 18944, "max_position_embeddings": 128000, "max_window_layers": 28,
      "model_type": "qwen2_5_vl", "num_attention_heads": 28, "num_hidden_layers": 28,
      "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768,
      "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.41.2",
      "use_cache": true, "use_sliding_window": false,
      "vision_config": {"depth": 32, "hidden_act": "silu", "hidden_size": 1280, "intermediate_size": 3420,
        "num_heads": 16, "in_chans": 3, "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2,
        "spatial_patch_size": 14, "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31],
        "tokens_per_second": 2, "temporal_patch_size": 2},
      "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
      "vocab_size": 152064
    }"#;

    #[test]
    fn published_qwen2_5_vl_config_is_read_flat() {
        let c = parse(QWEN2_5_VL_7B).unwrap();
        assert_eq!(c.model_type, "qwen2_5_vl_text");
        assert_eq!((c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.vocab_size), (3584, 28, 4, 128, 152064));
        assert_eq!((c.rope.theta, &c.rope.kind), (1e6, &RopeKind::Default));
        assert_eq!(c.mrope.as_ref().map(|m| (m.section.clone(), m.interleaved)), Some((vec![16, 24, 24], false)));
        assert_eq!((c.eos_token_id.clone(), c.tie_word_embeddings), (vec![151645], Some(false)));
        let m = c.multimodal.as_ref().expect("a vision-language config");
        assert_eq!(m.model_type, "qwen2_5_vl");
        assert!(!m.vision.is_empty() && m.raw.contains_key("image_token_id"));
        assert_eq!(
            crate::arch::vision::pixel_geometry(&c).unwrap(),
            crate::arch::vision::PixelGeometry::Patches { patch: 14, merge: 2, temporal: 2 }
        );
        // `mrope` without sections is no multimodal RoPE: refused as an unknown type.
        let bare = QWEN2_5_VL_7B.replace(r#""type": "mrope", "mrope_section": [16, 24, 24]"#, r#""type": "mrope""#);
        assert!(parse(&bare).unwrap_err().to_string().contains("rope type `mrope` is not supported"));
        // A flat config of a type whose text keys are not at the top level stays a text config.
        let other = QWEN2_5_VL_7B.replace(r#""model_type": "qwen2_5_vl""#, r#""model_type": "qwen2""#);
        assert!(parse(&other).unwrap().multimodal.is_none());
    }

    /// Gemma 3 4B and 12B as released: `text_config` gives only what differs from
    /// `Gemma3TextConfig`'s defaults (4B: no heads; neither: no vocabulary size; 12B: no
    /// head_dim, which is 256, not hidden / heads = 240).
    #[test]
    fn published_gemma3_text_configs_take_the_familys_defaults() {
        let config = |text: &str| {
            format!(
                r#"{{"architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
                "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
                "model_type": "gemma3", "text_config": {text}, "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
                "vision_config": {{"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304, "model_type": "siglip_vision_model",
                "num_attention_heads": 16, "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": false}}}}"#
            )
        };
        let four = parse(&config(
            r#"{"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text", "num_hidden_layers": 34,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024}"#,
        ))
        .unwrap();
        assert_eq!((four.num_attention_heads, four.num_key_value_heads, four.head_dim, four.vocab_size), (8, 4, 256, 262_208));
        assert_eq!((four.max_position_embeddings, four.norm_eps, four.eos_token_id.clone()), (131_072, 1e-6, vec![1, 106]));
        assert_eq!((four.rope.theta, &four.rope.kind), (1e6, &RopeKind::Linear { factor: 8.0 }));
        // No `rope_local_base_freq`: the sliding layers take the family's own default (10000,
        // `LayerKinds::local_rope`), not the full layers' scaled RoPE.
        assert!(four.sliding_rope.is_none());
        assert_eq!(crate::arch::GEMMA3.layers.local_rope, Some(crate::arch::LocalRope::Base(10000.0)));
        assert_eq!(four.sliding_window.size, Some(1024));
        assert_eq!(crate::arch::vision::pixel_geometry(&four).unwrap(), crate::arch::vision::PixelGeometry::Square { side: 896 });
        let twelve = parse(&config(
            r#"{"hidden_size": 3840, "intermediate_size": 15360, "model_type": "gemma3_text", "num_attention_heads": 16,
            "num_hidden_layers": 48, "num_key_value_heads": 8, "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024}"#,
        ))
        .unwrap();
        assert_eq!((twelve.head_dim, twelve.num_attention_heads, twelve.num_key_value_heads), (256, 16, 8));
        // What a config gives wins over the defaults; other families get none of Gemma 3's.
        let given = parse(&config(r#"{"model_type": "gemma3_text", "vocab_size": 300, "head_dim": 128, "rope_theta": 5000.0}"#)).unwrap();
        assert_eq!((given.vocab_size, given.head_dim, given.rope.theta), (300, 128, 5000.0));
        assert!(parse(r#"{"model_type":"gemma2","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":2,"intermediate_size":128}"#)
            .unwrap_err()
            .to_string()
            .contains("vocab_size"));
    }

    /// PhiMoE's `short_mscale`/`long_mscale` give each LongRoPE set its own cos/sin factor; Phi-3's
    /// configs have neither (one `attention_factor` for both).
    #[test]
    fn longrope_mscale_pair_is_read_per_set() {
        let scaling = |extra: &str| {
            format!(r#"{{{BASE},"rope_scaling":{{"type":"longrope","short_factor":[1,1,1,1,1,1,1,1],"long_factor":[2,2,2,2,2,2,2,2]{extra}}}}}"#)
        };
        let c = parse(&scaling(r#","short_mscale":1.1,"long_mscale":1.3"#)).unwrap();
        assert_eq!(c.rope.mscale, Some((1.1, 1.3)));
        assert_eq!(parse(&scaling("")).unwrap().rope.mscale, None);
        let e = parse(&scaling(r#","long_mscale":-1"#)).unwrap_err().to_string();
        assert!(e.contains("long_mscale"), "{e}");
    }

    #[test]
    fn yarn_defaults_follow_transformers() {
        let c = parse(&format!(
            r#"{{{BASE},"max_position_embeddings":128,"rope_scaling":{{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32}}}}"#
        ))
        .unwrap();
        let RopeKind::Yarn { attention_factor, beta_fast, beta_slow, truncate, .. } = c.rope.kind else { panic!() };
        assert!((attention_factor - (0.1 * 4f64.ln() + 1.0)).abs() < 1e-12);
        assert_eq!((beta_fast, beta_slow, truncate), (32.0, 1.0, true));
    }

    /// DeepSeek-V3's latent sizes: the class defaults, `q_lora_rank: null` as no query
    /// compression, the graph's head as the latent plus the rotary key (one key/value head),
    /// the softmax scale with YaRN's `mscale_all_dim`, an odd rotary width refused.
    #[test]
    fn latent_attention_sizes_come_from_the_keys_and_the_class_defaults() {
        let base = r#""model_type":"deepseek_v3","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":4,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":512"#;
        let c = parse(&format!("{{{base}}}")).unwrap();
        let l = c.latent.clone().unwrap();
        assert_eq!(l.sizes, LatentSizes { q_rank: Some(1536), kv_rank: 512, nope: 128, rope: 64, v: 128, interleaved: true });
        assert_eq!((c.head_dim, c.num_key_value_heads, c.rotary_dim()), (576, 1, 64));
        assert!((l.scale - 1.0 / 192f64.sqrt()).abs() < 1e-15);
        let c = parse(&format!(
            r#"{{{base},"q_lora_rank":null,"kv_lora_rank":24,"qk_nope_head_dim":16,"qk_rope_head_dim":8,"v_head_dim":12,"rope_interleave":false,"head_dim":8,
            "rope_scaling":{{"type":"yarn","factor":4.0,"original_max_position_embeddings":64,"mscale":1.0,"mscale_all_dim":1.0}}}}"#
        ))
        .unwrap();
        let l = c.latent.clone().unwrap();
        assert_eq!(l.sizes, LatentSizes { q_rank: None, kv_rank: 24, nope: 16, rope: 8, v: 12, interleaved: false });
        assert_eq!((c.head_dim, c.num_key_value_heads, c.rotary_dim()), (32, 1, 8));
        let m = 0.1 * 4f64.ln() + 1.0;
        assert!((l.scale - m * m / 24f64.sqrt()).abs() < 1e-15, "{}", l.scale);
        let e = parse(&format!(r#"{{{base},"qk_rope_head_dim":7}}"#)).unwrap_err().to_string();
        assert!(e.contains("`qk_rope_head_dim`") && e.contains("even"), "{e}");
        assert!(parse(BASE_OBJECT).unwrap().latent.is_none());
        // GLM-4.7-Flash's config class reads `head_dim` as the rotary width; DeepSeek-V3's
        // derives `head_dim` and ignores the key.
        let lite = base.replace("deepseek_v3", "glm4_moe_lite");
        assert_eq!(parse(&format!(r#"{{{lite},"head_dim":32}}"#)).unwrap().latent.unwrap().sizes.rope, 32);
        assert_eq!(parse(&format!(r#"{{{lite},"head_dim":32,"qk_rope_head_dim":16}}"#)).unwrap().latent.unwrap().sizes.rope, 16);
        assert_eq!(parse(&format!(r#"{{{base},"head_dim":32}}"#)).unwrap().latent.unwrap().sizes.rope, 64);
        // Mistral 4 without a RoPE object: its default YaRN x128 with `mscale_all_dim` 1.
        let c = parse(r#"{"model_type":"mistral4","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":512}"#).unwrap();
        let l = c.latent.unwrap();
        let m = 0.1 * 128f64.ln() + 1.0;
        assert!((l.scale - m * m / 128f64.sqrt()).abs() < 1e-15, "{}", l.scale);
    }

    /// An absent `head_dim` takes the family's default (Seed-OSS 128); `null` means hidden /
    /// heads, as the config classes read it.
    #[test]
    fn head_dim_null_is_hidden_over_heads_and_absent_is_the_family_default() {
        let seed = BASE.replace("llama", "seed_oss");
        assert_eq!(parse(&format!("{{{seed}}}")).unwrap().head_dim, 128);
        assert_eq!(parse(&format!(r#"{{{seed},"head_dim":null}}"#)).unwrap().head_dim, 16);
        assert_eq!(parse(&format!(r#"{{{seed},"head_dim":8}}"#)).unwrap().head_dim, 8);
        assert_eq!(parse(&format!(r#"{{{BASE},"head_dim":null}}"#)).unwrap().head_dim, 16);
    }

    /// `Phi3Config` renames `su` and `yarn` to LongRoPE before validating (Phi-3's first
    /// configs); other families keep `su` unknown and `yarn` as YaRN.
    #[test]
    fn phi3_reads_su_and_yarn_as_longrope() {
        let phi3 = BASE.replace("llama", "phi3");
        let factors = r#""short_factor":[1,1,1,1,1,1,1,1],"long_factor":[2,2,2,2,2,2,2,2]"#;
        let longrope = parse(&format!(r#"{{{phi3},"rope_scaling":{{"type":"longrope",{factors}}}}}"#)).unwrap();
        for old in ["su", "yarn"] {
            let c = parse(&format!(r#"{{{phi3},"rope_scaling":{{"type":"{old}",{factors}}}}}"#)).unwrap();
            assert!(matches!(c.rope.kind, RopeKind::LongRope { .. }), "{old}: {:?}", c.rope.kind);
            assert_eq!(c.rope, longrope.rope, "{old}");
        }
        // A Phi-3 `yarn` is LongRoPE, so without the factor lists it is refused as transformers does.
        let e = parse(&format!(r#"{{{phi3},"rope_scaling":{{"type":"yarn","factor":2.0}}}}"#)).unwrap_err().to_string();
        assert!(e.contains("`rope_scaling.short_factor`"), "{e}");
        let llama = parse(&format!(r#"{{{BASE},"rope_scaling":{{"type":"yarn","factor":2.0}}}}"#)).unwrap();
        assert!(matches!(llama.rope.kind, RopeKind::Yarn { .. }), "{:?}", llama.rope.kind);
        let e = parse(&format!(r#"{{{BASE},"rope_scaling":{{"type":"su",{factors}}}}}"#)).unwrap_err().to_string();
        assert!(e.contains("`su`") && e.contains(SUPPORTED_ROPE_TYPES), "{e}");
    }

    #[test]
    fn unknown_rope_types_are_refused_with_the_supported_list() {
        let e = parse(&format!(r#"{{{BASE},"rope_scaling":{{"type":"su","factor":2.0}}}}"#)).unwrap_err().to_string();
        assert!(e.contains("su") && e.contains(SUPPORTED_ROPE_TYPES), "{e}");
    }

    /// Dynamic NTK stretches the base only past max_position_embeddings, where the graph's
    /// caches end (genai's context length, a static cache's longest): the default frequencies,
    /// exactly; its `factor` is still required and checked.
    #[test]
    fn dynamic_ntk_is_the_default_rope_within_the_positions() {
        let c = parse(&format!(r#"{{{BASE},"rope_theta":50000000.0,"rope_scaling":{{"rope_type":"dynamic","factor":6.0}}}}"#)).unwrap();
        assert!(matches!(c.rope.kind, RopeKind::Default) && c.rope.theta == 50000000.0, "{:?}", c.rope);
        let e = parse(&format!(r#"{{{BASE},"rope_scaling":{{"type":"dynamic"}}}}"#)).unwrap_err().to_string();
        assert!(e.contains("factor"), "{e}");
        let e = parse(&format!(r#"{{{BASE},"rope_scaling":{{"type":"dynamic","factor":-2.0}}}}"#)).unwrap_err().to_string();
        assert!(e.contains("positive number"), "{e}");
    }

    /// HunYuan reads `dynamic` with an `alpha` as a fixed stretch of the base (`theta *
    /// alpha^(d / (d - 2))`).
    #[test]
    fn hunyuan_reads_dynamic_with_alpha_as_a_stretched_base() {
        let hunyuan = BASE.replace("llama", "hunyuan_v1_dense");
        let c = parse(&format!(r#"{{{hunyuan},"rope_theta":10000.0,"rope_scaling":{{"type":"dynamic","alpha":1000.0,"factor":1.0}}}}"#)).unwrap();
        let want = 10000.0 * 1000f64.powf(16.0 / 14.0);
        assert!((c.rope.theta - want).abs() < 1e-6 * want && matches!(c.rope.kind, RopeKind::Default), "{:?}", c.rope);
        // The exponent is the head's width, not hidden / heads.
        let c = parse(&format!(r#"{{{hunyuan},"head_dim":32,"rope_theta":10000.0,"rope_scaling":{{"type":"dynamic","alpha":1000.0,"factor":1.0}}}}"#)).unwrap();
        let want = 10000.0 * 1000f64.powf(32.0 / 30.0);
        assert!((c.rope.theta - want).abs() < 1e-6 * want, "{:?}", c.rope);
        let e = parse(&format!(r#"{{{hunyuan},"rope_scaling":{{"type":"dynamic","alpha":1e300}}}}"#)).unwrap_err().to_string();
        assert!(e.contains("past any finite number"), "{e}");
        // Without `alpha`, and in other families, `dynamic` is dynamic NTK: the default base
        // within the positions (its `factor` required).
        let c = parse(&format!(r#"{{{hunyuan},"rope_theta":10000.0,"rope_scaling":{{"type":"dynamic","factor":2.0}}}}"#)).unwrap();
        assert!(c.rope.theta == 10000.0 && matches!(c.rope.kind, RopeKind::Default), "{:?}", c.rope);
        let e = parse(&format!(r#"{{{BASE},"rope_scaling":{{"type":"dynamic","alpha":1000.0}}}}"#)).unwrap_err().to_string();
        assert!(e.contains("factor"), "{e}");
    }

    /// A `null` switch is false, as transformers' truth test reads the `None` it keeps, whatever
    /// the family's default (GPT-NeoX's `use_parallel_residual` and `attention_bias` default true).
    #[test]
    fn a_null_switch_is_false() {
        let neox = BASE.replace("llama", "gpt_neox");
        let c = parse(&format!(r#"{{{neox},"use_parallel_residual":null,"attention_bias":null}}"#)).unwrap();
        assert!(!c.flag("use_parallel_residual", true) && !c.flag("attention_bias", true));
        let c = parse(&format!(r#"{{{neox}}}"#)).unwrap();
        assert!(c.flag("use_parallel_residual", true) && c.flag("attention_bias", true));
    }

    /// GPT-NeoX: `rotary_pct` / `rotary_emb_base` stand for the generic keys when those are
    /// absent or null, and a stray `num_key_value_heads` (no key of `GPTNeoXConfig`) is dropped.
    #[test]
    fn gpt_neox_reads_its_own_rotary_keys_and_no_kv_heads() {
        let neox = BASE.replace("llama", "gpt_neox");
        let c = parse(&format!(r#"{{{neox},"rotary_pct":0.5,"rotary_emb_base":500,"rope_theta":null,"num_key_value_heads":2}}"#)).unwrap();
        assert_eq!((c.rope.partial_rotary_factor, c.rope.theta, c.num_key_value_heads), (0.5, 500.0, 4));
        let c = parse(&format!(r#"{{{neox}}}"#)).unwrap();
        assert_eq!((c.rope.partial_rotary_factor, c.rope.theta), (0.25, 10000.0));
    }

    /// The Qwen families' `use_sliding_window` defaults to false (transformers' config classes):
    /// a `sliding_window` alone is no window there, as it is one for Mistral.
    #[test]
    fn a_qwen_window_needs_its_switch() {
        let qwen = |extra: &str| parse(&format!(r#"{{{},"sliding_window":2{extra}}}"#, BASE.replace("llama", "qwen2"))).unwrap().layer_windows().unwrap();
        assert_eq!(qwen(""), vec![None, None]);
        assert_eq!(qwen(r#","use_sliding_window":true"#), vec![Some(2), Some(2)]);
        let mistral = parse(&format!(r#"{{{},"sliding_window":2}}"#, BASE.replace("llama", "mistral"))).unwrap();
        assert_eq!(mistral.layer_windows().unwrap()[0], Some(2));
    }

    #[test]
    fn bidirectional_gemma_is_refused_by_key() {
        let e = parse(&format!(r#"{{{},"use_bidirectional_attention":true}}"#, BASE.replace("llama", "gemma3_text"))).unwrap_err().to_string();
        assert!(e.contains("`use_bidirectional_attention` is true"), "{e}");
        assert!(parse(&format!(r#"{{{},"use_bidirectional_attention":false}}"#, BASE.replace("llama", "gemma3_text"))).is_ok());
    }

    /// Mistral applies `sliding_window` as given; the Qwen switches (`use_sliding_window`,
    /// `max_window_layers`) and `layer_types` decide for the Qwen families.
    #[test]
    fn sliding_window_honours_the_switches() {
        let windows = |model_type: &str, extra: &str| {
            parse(&format!(r#"{{{},{extra}}}"#, BASE.replace("llama", model_type))).unwrap().layer_windows().unwrap()
        };
        assert_eq!(windows("mistral", r#""sliding_window":3"#), vec![Some(3), Some(3)], "mistral: as given");
        assert_eq!(windows("mistral", r#""sliding_window":null"#), vec![None, None]);
        assert_eq!(windows("qwen2", r#""sliding_window":0,"use_sliding_window":false"#), vec![None, None], "transformers 5.x: off");
        assert_eq!(windows("qwen2", r#""sliding_window":2,"use_sliding_window":false,"max_window_layers":0"#), vec![None, None]);
        assert_eq!(windows("qwen2", r#""sliding_window":2,"use_sliding_window":true,"max_window_layers":1"#), vec![None, Some(2)]);
        assert_eq!(
            windows("qwen2", r#""sliding_window":2,"use_sliding_window":true,"layer_types":["sliding_attention","full_attention"]"#),
            vec![Some(2), None]
        );
        assert!(parse(&format!(r#"{{{BASE},"layer_types":["full_attention"]}}"#)).is_err());
    }

    /// GPTBigCode: `multi_query` (default true) is one key/value head; false is refused by key.
    #[test]
    fn gpt_bigcode_reads_multi_query_as_one_kv_head() {
        let base = r#""model_type":"gpt_bigcode","n_embd":64,"n_head":4,"n_layer":2,"n_inner":null,"vocab_size":512"#;
        for extra in ["", r#","multi_query":true"#] {
            let c = parse(&format!("{{{base}{extra}}}")).unwrap();
            assert_eq!((c.num_key_value_heads, c.num_attention_heads, c.intermediate_size), (1, 4, 256), "{extra}");
        }
        let e = parse(&format!(r#"{{{base},"multi_query":false}}"#)).unwrap_err().to_string();
        assert!(e.contains("`multi_query` is false"), "{e}");
        // transformers 5 saves the derived count beside the switch: the switch still decides.
        let e = parse(&format!(r#"{{{base},"multi_query":false,"num_key_value_heads":4}}"#)).unwrap_err().to_string();
        assert!(e.contains("`multi_query` is false"), "{e}");
        let e = parse(&format!(r#"{{{base},"multi_query":1}}"#)).unwrap_err().to_string();
        assert!(e.contains("key `multi_query` must be true or false"), "{e}");
    }

    /// GPT-J: RoPE on `rotary_dim` dimensions of each head (64 when absent) at the fixed base
    /// 10000 whatever RoPE keys the file holds, GPT-2's spellings, `n_inner` null 4 x hidden.
    #[test]
    fn gptj_reads_rotary_dim_and_no_rope_keys() {
        let base = r#""model_type":"gptj","n_embd":512,"n_head":4,"n_layer":2,"n_positions":4096,"n_inner":null,"vocab_size":512"#;
        let c = parse(&format!("{{{base}}}")).unwrap();
        assert_eq!((c.head_dim, c.intermediate_size, c.max_position_embeddings), (128, 2048, 4096));
        assert_eq!((c.rope.partial_rotary_factor, c.rope.theta), (0.5, 10000.0), "rotary_dim 64 of 128 when absent");
        let c = parse(&format!(r#"{{{base},"rotary_dim":32,"rope_theta":500000.0,"rope_scaling":{{"type":"linear","factor":4.0}},"partial_rotary_factor":1.0,"head_dim":64}}"#)).unwrap();
        assert_eq!((c.head_dim, c.rope.partial_rotary_factor, c.rope.theta), (128, 0.25, 10000.0));
        assert!(matches!(c.rope.kind, crate::RopeKind::Default), "{:?}", c.rope.kind);
        // No `n_inner` key at all is GPTJConfig's None too: 4 x hidden.
        let c = parse(r#"{"model_type":"gptj","n_embd":512,"n_head":4,"n_layer":2,"vocab_size":512}"#).unwrap();
        assert_eq!(c.intermediate_size, 2048);
        let e = parse(&format!(r#"{{{base},"rotary_dim":256}}"#)).unwrap_err().to_string();
        assert!(e.contains("key `rotary_dim` (256) must be an even count of rotated dimensions, at most the head size 128"), "{e}");
    }

    /// Falcon: the key/value heads as `FalconConfig.__post_init__` derives them, the 4 x hidden
    /// MLP when `ffn_hidden_size` is absent, Falcon-RW's `alibi` and `parallel_attn`, and the
    /// forms not built refused by their key.
    #[test]
    fn falcon_derives_its_heads_and_refuses_what_it_does_not_build() {
        let base = r#""model_type":"falcon","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":2,"vocab_size":512"#;
        let kv_and_mlp = |extra: &str| parse(&format!("{{{base}{extra}}}")).map(|c| (c.num_key_value_heads, c.intermediate_size));
        // multi_query (the default) is one key/value head whatever num_kv_heads says.
        assert_eq!(kv_and_mlp("").unwrap(), (1, 256));
        assert_eq!(kv_and_mlp(r#","multi_query":true,"num_kv_heads":4,"ffn_hidden_size":96"#).unwrap(), (1, 96));
        // Without it (false or null): num_kv_heads, every head when absent.
        assert_eq!(kv_and_mlp(r#","multi_query":false"#).unwrap(), (4, 256));
        assert_eq!(kv_and_mlp(r#","multi_query":null,"num_kv_heads":4"#).unwrap(), (4, 256));
        // The new architecture reads num_kv_heads, with one LayerNorm only.
        assert_eq!(kv_and_mlp(r#","new_decoder_architecture":true,"num_ln_in_parallel_attn":1,"num_kv_heads":2"#).unwrap(), (2, 256));
        let e = |extra: &str| kv_and_mlp(extra).unwrap_err().to_string();
        assert!(e(r#","new_decoder_architecture":true,"num_kv_heads":2"#).contains("`num_ln_in_parallel_attn` is absent (2 there)"));
        assert!(e(r#","new_decoder_architecture":true,"num_ln_in_parallel_attn":2"#).contains("`ln_attn`, `ln_mlp`"));
        // Falcon-RW's switches are built (read as transformers' truth values); the new
        // architecture without the parallel block is not (transformers fails on it).
        let rw = parse(&format!(r#"{{{base},"alibi":true,"parallel_attn":null}}"#)).unwrap();
        assert_eq!((rw.flag("alibi", false), rw.flag("parallel_attn", true)), (true, false));
        assert_eq!(crate::arch::FALCON.positions(&rw), crate::arch::Positions::Alibi(crate::arch::Alibi::Falcon));
        assert!(e(r#","new_decoder_architecture":true,"num_ln_in_parallel_attn":1,"parallel_attn":false"#).contains("`parallel_attn` false"));
        assert!(e(r#","multi_query":"yes""#).contains("key `multi_query` must be true or false"));
    }

    /// A.X K1: without `mlp_layer_types`, the list `AXK1Config` derives from the legacy keys.
    #[test]
    fn axk1_derives_its_mlp_layer_types() {
        let base = r#""model_type":"axk1","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":5,"vocab_size":512,"intermediate_size":96,"kv_lora_rank":24,"q_lora_rank":32,"qk_nope_head_dim":16,"qk_rope_head_dim":8,"v_head_dim":12"#;
        let types = |extra: &str| parse(&format!("{{{base}{extra}}}")).map(|c| c.raw["mlp_layer_types"].clone());
        let list = |v: &[&str]| serde_json::json!(v);
        assert_eq!(types("").unwrap(), list(&["dense", "sparse", "sparse", "sparse", "sparse"]));
        assert_eq!(types(r#","first_k_dense_replace":2,"moe_layer_freq":2"#).unwrap(), list(&["dense", "dense", "sparse", "dense", "sparse"]));
        // A written list is the model's.
        assert_eq!(types(r#","mlp_layer_types":["sparse","dense","dense","dense","dense"],"moe_layer_freq":2"#).unwrap(), list(&["sparse", "dense", "dense", "dense", "dense"]));
        let e = types(r#","moe_layer_freq":0"#).unwrap_err().to_string();
        assert!(e.contains("`moe_layer_freq` must be at least 1"), "{e}");
    }

    /// GraniteSWA: `layer_rope_theta` read as NoPE layers (base 0) and one RoPE per layer type,
    /// `layer_types` defaulting to a full layer every fourth from layer 0; a type with two
    /// non-zero bases and lists of the wrong length refused by key.
    #[test]
    fn granite_swa_reads_a_rope_base_per_layer() {
        let base = r#""model_type":"granite_swa","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":5,"vocab_size":512,"intermediate_size":96"#;
        let read = |extra: &str| {
            parse(&format!("{{{base}{extra}}}")).map(|c| (c.raw["no_rope_layers"].clone(), c.rope.theta, c.sliding_rope.map(|r| r.theta), c.sliding_window.layer_types.clone()))
        };
        let (no_rope, full, sliding, types) = read(r#","layer_rope_theta":[0,10000.0,10000.0,10000.0,500000.0]"#).unwrap();
        assert_eq!(no_rope, serde_json::json!([0, 1, 1, 1, 1]));
        assert_eq!((full, sliding), (500000.0, Some(10000.0)));
        let types = types.unwrap();
        assert_eq!(types.iter().map(String::as_str).collect::<Vec<_>>(), ["full_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]);
        // Without the list every layer rotates at the global base (GraniteConfig's 10000).
        let (no_rope, full, sliding, _) = read("").unwrap();
        assert_eq!((no_rope, full, sliding), (serde_json::json!([1, 1, 1, 1, 1]), 10000.0, Some(10000.0)));
        let (_, full, sliding, _) = read(r#","rope_parameters":{"rope_type":"default","rope_theta":50000.0}"#).unwrap();
        assert_eq!((full, sliding), (50000.0, Some(50000.0)));
        let e = |extra: &str| read(extra).unwrap_err().to_string();
        assert!(e(r#","layer_rope_theta":[0,10000.0,20000.0,10000.0,0]"#).contains("gives the sliding_attention layers 2 different RoPE bases"));
        assert!(e(r#","layer_rope_theta":[0,10000.0]"#).contains("must list one RoPE base per layer (5)"));
        assert!(e(r#","layer_rope_theta":[0,-1,10,10,10]"#).contains("a RoPE base above 1, or 0 for no RoPE"));
        assert!(e(r#","layer_rope_theta":[0,0.5,10,10,10]"#).contains("key `layer_rope_theta` holds 0.5"));
        // A legacy `rope_scaling` with `type` keeps its scaling on both layer types.
        let c = parse(&format!(r#"{{{base},"rope_scaling":{{"type":"linear","factor":4.0,"rope_theta":10000.0}}}}"#)).unwrap();
        assert!(matches!(c.rope.kind, RopeKind::Linear { .. }) && matches!(c.sliding_rope.map(|r| r.kind), Some(RopeKind::Linear { .. })), "{:?}", c.rope.kind);
        assert!(e(r#","layer_types":["full_attention"]"#).contains("lists 1 layers; `num_hidden_layers` is 5"));
    }

    /// Llama under other config classes: EXAONE's and InternLM3's own key names, the defaults of
    /// each class, IQuestCoder's refusals.
    #[test]
    fn llama_shaped_config_classes_read_their_own_keys() {
        let exaone = parse(r#"{"model_type":"exaone","hidden_size":64,"num_attention_heads":8,"num_layers":3,"vocab_size":512,"intermediate_size":96,"layer_norm_epsilon":1e-5,"activation_function":"silu"}"#).unwrap();
        assert_eq!((exaone.num_hidden_layers, exaone.num_key_value_heads, exaone.norm_eps, exaone.rope.theta, exaone.eos_token_id.clone()), (3, 8, 1e-5, 500000.0, vec![361]));
        // EXAONE's epsilon default is its class's 1e-5, not the generic 1e-6.
        let exaone = parse(r#"{"model_type":"exaone","hidden_size":64,"num_attention_heads":8,"num_layers":3,"vocab_size":512,"intermediate_size":96}"#).unwrap();
        assert_eq!(exaone.norm_eps, 1e-5);
        let internlm3 = |bias: &str| parse(&format!(r#"{{"model_type":"internlm3","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":2,"vocab_size":512,"intermediate_size":96{bias}}}"#));
        let both = internlm3(r#","qkv_bias":true,"bias":true"#).unwrap();
        assert_eq!((both.head_dim, both.num_key_value_heads, both.norm_eps), (128, 2, 1e-5));
        assert_eq!((both.raw["attention_bias"].as_bool(), both.raw["mlp_bias"].as_bool()), (Some(true), Some(true)));
        // Biases that differ are refused, as InternLM3Config refuses them.
        let e = internlm3(r#","qkv_bias":true,"bias":false"#).unwrap_err().to_string();
        assert!(e.contains("`qkv_bias` true and `bias` false differ"), "{e}");
        let e = internlm3(r#","attention_bias":true"#).unwrap_err().to_string();
        assert!(e.contains("`attention_bias` true and `bias` absent (false) differ"), "{e}");
        assert!(internlm3("").is_ok());
        let base = r#""model_type":"iquestcoder","hidden_size":64,"num_attention_heads":8,"num_hidden_layers":2,"vocab_size":512,"intermediate_size":96"#;
        assert_eq!(parse(&format!("{{{base}}}")).unwrap().head_dim, 128);
        let e = parse(&format!(r#"{{{base},"clip_qkv":8.0}}"#)).unwrap_err().to_string();
        assert!(e.contains("`clip_qkv`"), "{e}");
        for on in ["true", "1", "\"yes\""] {
            let e = parse(&format!(r#"{{{base},"use_sliding_window":{on}}}"#)).unwrap_err().to_string();
            assert!(e.contains("`use_sliding_window`"), "{e}");
        }
        assert!(parse(&format!(r#"{{{base},"use_sliding_window":false,"clip_qkv":null}}"#)).is_ok());
    }

    /// Sarvam-MoE and Param-2: their classes' defaults where GLM-4.5's differ (RoPE over the
    /// whole head, the base, q/k norms on, Param-2's tied head and expert counts), the published
    /// spellings carried to the generic keys.
    #[test]
    fn sarvam_moe_and_param2_read_their_classes_defaults() {
        let read = |model_type: &str, extra: &str| {
            parse(&format!(r#"{{"model_type":"{model_type}","hidden_size":64,"num_attention_heads":8,"num_hidden_layers":3,"vocab_size":512{extra}}}"#)).unwrap()
        };
        let sarvam = read("sarvam_moe", "");
        assert_eq!((sarvam.rope.partial_rotary_factor, sarvam.rope.theta, sarvam.head_dim, sarvam.num_key_value_heads, sarvam.tie_word_embeddings), (1.0, 8_000_000.0, 64, 4, None));
        assert_eq!((sarvam.raw["use_qk_norm"].as_bool(), sarvam.raw["routed_scaling_factor"].as_f64()), (Some(true), Some(2.5)));
        let param2 = read("param2moe", "");
        assert_eq!((param2.rope.theta, param2.num_key_value_heads, param2.raw["n_routed_experts"].as_u64(), param2.raw["n_shared_experts"].as_u64()), (500_000.0, 8, Some(64), Some(2)));
        // A published count wins over the class default; the generic spelling too.
        let given = read("param2moe", r#","num_experts":8,"num_shared_experts":1,"use_qkv_bias":true"#);
        assert_eq!((given.raw["n_routed_experts"].as_u64(), given.raw["n_shared_experts"].as_u64(), given.raw["attention_bias"].as_bool()), (Some(8), Some(1), Some(true)));
        assert_eq!(read("sarvam_moe", r#","n_routed_experts":16"#).raw["n_routed_experts"].as_u64(), Some(16));
        assert_eq!(read("sarvam_moe", r#","partial_rotary_factor":0.5"#).rope.partial_rotary_factor, 0.5);
    }

    /// OpenAI GPT: GPT-2's spellings, the MLP 4 x `n_embd` (no width key), `afn` as transformers'
    /// ACT_FNS maps it (`gelu` the tanh form, `swish` SiLU); another activation refused by key.
    #[test]
    fn openai_gpt_reads_afn_as_transformers_maps_it() {
        let base = r#""model_type":"openai-gpt","n_embd":64,"n_head":4,"n_layer":2,"n_positions":256,"vocab_size":512"#;
        let act = |afn: &str| parse(&format!(r#"{{{base},"afn":"{afn}"}}"#)).unwrap().activation("afn", Activation::GeluTanh).unwrap();
        assert_eq!((act("gelu"), act("swish"), act("relu")), (Activation::GeluTanh, Activation::Silu, Activation::Relu));
        let c = parse(&format!("{{{base}}}")).unwrap();
        assert_eq!((c.hidden_size, c.intermediate_size, c.max_position_embeddings, c.activation("afn", Activation::GeluTanh).unwrap()), (64, 256, 256, Activation::GeluTanh));
        let e = parse(&format!(r#"{{{base},"afn":"tanh"}}"#)).unwrap_err().to_string();
        assert!(e.contains("key `afn` is `tanh`"), "{e}");
    }

    /// OPT: `ffn_dim` as the MLP width, ReLU from `activation_function`, the fixed LayerNorm
    /// epsilon; OPT-350m's post-norm blocks and projected embeddings read; the switches it does
    /// not follow refused by key.
    #[test]
    fn opt_reads_its_keys_and_refuses_what_it_does_not_build() {
        let base = r#""model_type":"opt","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":2,"vocab_size":512,"ffn_dim":128,"activation_function":"relu""#;
        let c = parse(&format!("{{{base}}}")).unwrap();
        assert_eq!((c.intermediate_size, c.hidden_act, c.max_position_embeddings, c.tie_word_embeddings), (128, Activation::Relu, 2048, None));
        let e = |extra: &str| parse(&format!("{{{base}{extra}}}")).unwrap_err().to_string();
        assert!(e(r#","layer_norm_elementwise_affine":false"#).contains("`layer_norm_elementwise_affine`"));
        assert!(e(r#","_remove_final_layer_norm":true"#).contains("`_remove_final_layer_norm`"));
        // OPT-350m: post-norm (where the final norm is absent anyway) with 32-wide embeddings.
        let c = parse(&format!(r#"{{{base},"word_embed_proj_dim":32,"do_layer_norm_before":false,"_remove_final_layer_norm":true}}"#)).unwrap();
        assert_eq!((c.hidden_size, c.number("word_embed_proj_dim", None).unwrap()), (64, Some(32.0)));
        assert!(parse(&format!(r#"{{{base},"word_embed_proj_dim":64,"do_layer_norm_before":true}}"#)).is_ok());
    }

    /// GPT-Neo: `attention_types` expanded as `GPTNeoConfig` does (each entry's kinds repeated
    /// its count of times) into one window per layer, `window_size` on the local ones (256 by
    /// default), the class's default pattern when absent, 4 x hidden when `intermediate_size`
    /// is null; a list that does not cover the layers, or an unknown kind, refused by key.
    #[test]
    fn gpt_neo_expands_attention_types_into_windows() {
        let base = r#""model_type":"gpt_neo","hidden_size":64,"num_heads":4,"vocab_size":512,"intermediate_size":null"#;
        let read = |extra: &str| parse(&format!("{{{base}{extra}}}"));
        let c = read(r#","num_layers":5,"window_size":3,"attention_types":[[["global"],1],[["local","global"],2]]"#).unwrap();
        assert_eq!(c.layer_windows().unwrap(), vec![None, Some(3), None, Some(3), None]);
        assert_eq!((c.intermediate_size, c.num_hidden_layers, c.num_attention_heads, c.norm_eps), (256, 5, 4, 1e-5));
        // GPTNeoConfig's defaults: 24 layers alternating global and local, a window of 256.
        let d = read(r#","num_layers":24"#).unwrap().layer_windows().unwrap();
        assert_eq!((d.len(), d[0], d[1], d[23]), (24, None, Some(256), Some(256)));
        let e = |extra: &str| read(extra).unwrap_err().to_string();
        assert!(e(r#","num_layers":3"#).contains("gives 24 layers; `num_layers` is 3"));
        assert!(e(r#","num_layers":2,"attention_types":[[["global","sparse"],1]]"#).contains("names \"sparse\""));
        assert!(e(r#","num_layers":2,"attention_types":[["global",2]]"#).contains("each entry is"));
        assert!(e(r#","num_layers":2,"window_size":0,"attention_types":[[["local"],2]]"#).contains("`window_size` must be a positive"));
        // The saved expansion must agree with the pattern (GPTNeoBlock reads `attention_layers`).
        let pattern = r#","num_layers":2,"attention_types":[[["global","local"],1]]"#;
        assert!(read(&format!(r#"{pattern},"attention_layers":["global","local"]"#)).is_ok());
        assert!(e(&format!(r#"{pattern},"attention_layers":["local","local"]"#)).contains("key `attention_layers`"));
    }

    /// Cohere2-MoE: `Cohere2MoeConfig`'s layer derivation (a dense prefix with its own window
    /// pattern, the rest every 4th full), RoPE on sliding layers and on dense ones when the
    /// prefix pattern is 1, the experts' and the dense layers' widths; RMSNorm layers and
    /// sigmoid routing refused by key.
    #[test]
    fn cohere2_moe_derives_its_layers_rope_and_widths() {
        let base = r#""model_type":"cohere2_moe","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":6,"vocab_size":512,"head_dim":16,"intermediate_size":64"#;
        let read = |extra: &str| parse(&format!("{{{base}{extra}}}"));
        let c = read(r#","first_k_dense_replace":2,"prefix_dense_intermediate_size":96"#).unwrap();
        let raw = |k: &str| c.raw[k].clone();
        assert_eq!(raw("layer_types"), serde_json::json!(["full_attention", "full_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]));
        assert_eq!(raw("mlp_layer_types"), serde_json::json!(["dense", "dense", "sparse", "sparse", "sparse", "sparse"]));
        assert_eq!(raw("no_rope_layers"), serde_json::json!([1, 1, 1, 1, 1, 0]));
        assert_eq!((c.intermediate_size, raw("moe_intermediate_size")), (96, serde_json::json!(64)));
        // A prefix pattern other than 1: dense layers rotate only where they slide.
        let c = read(r#","first_k_dense_replace":2,"prefix_dense_sliding_window_pattern":2"#).unwrap();
        assert_eq!(c.raw["layer_types"][0], "sliding_attention");
        assert_eq!(c.raw["no_rope_layers"], serde_json::json!([1, 0, 1, 1, 1, 0]));
        assert_eq!(c.intermediate_size, 64, "no prefix width: the experts'");
        let e = |extra: &str| read(extra).unwrap_err().to_string();
        assert!(e(r#","rms_norm_eps":1e-6"#).contains("key `rms_norm_eps`"));
        assert!(e(r#","expert_selection_fn":"sigmoid""#).contains("key `expert_selection_fn`"));
        // Every layer dense: the routing key is not read.
        assert!(read(r#","first_k_dense_replace":6,"expert_selection_fn":"sigmoid""#).is_ok());
        assert!(e(r#","mlp_layer_types":["dense"]"#).contains("key `mlp_layer_types` must list one entry for each of the 6 layers"));
    }

    /// GraniteMoeHybrid: built only when every layer is attention (a Mamba2 layer refused by its
    /// index, a missing list too); RoPE by `position_embedding_type`; without experts each
    /// layer is dense at the shared MLP's width.
    #[test]
    fn granitemoehybrid_reads_attention_only_layers() {
        let base = r#""model_type":"granitemoehybrid","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":3,"vocab_size":512,"intermediate_size":64,"shared_intermediate_size":96"#;
        let read = |extra: &str| {
            parse(&format!("{{{base}{extra}}}")).map(|c| (c.raw["no_rope_layers"].clone(), c.raw["mlp_layer_types"].clone(), c.intermediate_size, c.raw.get("num_local_experts").cloned()))
        };
        let attention = r#","layer_types":["attention","attention","full_attention"]"#;
        let (no_rope, mlp, width, experts) = read(&format!(r#"{attention},"position_embedding_type":"rope","num_local_experts":0,"num_experts_per_tok":0"#)).unwrap();
        assert_eq!((no_rope, mlp, width, experts), (serde_json::json!([1, 1, 1]), serde_json::json!(["dense", "dense", "dense"]), 96, None));
        // The config class's defaults: 8 experts (every layer sparse, experts `intermediate_size`
        // wide), no RoPE.
        let (no_rope, mlp, width, experts) = read(attention).unwrap();
        assert_eq!((no_rope, mlp, width, experts), (serde_json::json!([0, 0, 0]), serde_json::json!(["sparse", "sparse", "sparse"]), 64, Some(serde_json::json!(8))));
        assert_eq!(read(&format!(r#"{attention},"position_embedding_type":"nope""#)).unwrap().0, serde_json::json!([0, 0, 0]));
        let e = |extra: &str| read(extra).unwrap_err().to_string();
        assert!(e(r#","layer_types":["attention","mamba","attention"]"#).contains("layer 1 is a Mamba2 layer (`layer_types` says `mamba`)"));
        assert!(e("").contains("key `layer_types` is missing"));
        // The class's other spelling.
        assert_eq!(read(r#","layers_block_type":["attention","attention","attention"]"#).unwrap().1, serde_json::json!(["sparse", "sparse", "sparse"]));
        assert!(e(r#","layer_types":["attention"]"#).contains("for each of the 3 layers"));
        assert!(e(&format!(r#"{attention},"position_embedding_type":"alibi""#)).contains("key `position_embedding_type` is \"alibi\""));
        assert!(e(&format!(r#"{attention},"num_local_experts":0,"shared_intermediate_size":0"#)).contains("would have no MLP"));
    }

    /// MiniCPM5-MoE: the default RoPE rotates the whole head whatever `partial_rotary_factor`
    /// says, top-level or inside `rope_parameters` (as transformers 5 saves it); the key
    /// holds for another RoPE type; the config class's defaults fill absent keys.
    #[test]
    fn minicpm5_moe_rotates_the_whole_head_by_default() {
        let base = r#""model_type":"minicpm5_moe","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":2,"vocab_size":512,"intermediate_size":96,"head_dim":32"#;
        let rope = |extra: &str| parse(&format!("{{{base}{extra}}}")).map(|c| (c.rope.partial_rotary_factor, c.num_key_value_heads, c.eos_token_id.clone()));
        assert_eq!(rope("").unwrap(), (1.0, 2, vec![1, 130073]));
        assert_eq!(rope(r#","partial_rotary_factor":0.5"#).unwrap().0, 1.0);
        assert_eq!(rope(r#","rope_parameters":{"rope_type":"default","rope_theta":5000000.0,"partial_rotary_factor":0.5}"#).unwrap().0, 1.0);
        let linear = rope(r#","rope_parameters":{"rope_type":"linear","factor":2.0,"rope_theta":5000000.0,"partial_rotary_factor":0.5}"#).unwrap();
        assert_eq!(linear.0, 0.5);
    }

    /// MiniCPM3: `v_head_dim`, the residual multiplier and the logits divisor as
    /// `MiniCPM3Config` derives them (null `scale_depth` / `dim_model_base`: no scaling).
    #[test]
    fn minicpm3_derives_its_scalings() {
        let base = r#""model_type":"minicpm3","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":4,"vocab_size":512,"intermediate_size":96,"kv_lora_rank":24,"q_lora_rank":32,"qk_nope_head_dim":16,"qk_rope_head_dim":8"#;
        let read = |extra: &str| parse(&format!("{{{base}{extra}}}")).map(|c| (c.raw["v_head_dim"].as_u64(), c.raw["residual_multiplier"].as_f64(), c.raw["logits_scaling"].as_f64()));
        assert_eq!(read("").unwrap(), (Some(16), Some(0.7), Some(0.25)));
        assert_eq!(read(r#","v_head_dim":12,"scale_depth":null,"dim_model_base":null"#).unwrap(), (Some(12), Some(1.0), Some(1.0)));
        assert_eq!(read(r#","scale_depth":2.0,"dim_model_base":32"#).unwrap(), (Some(16), Some(1.0), Some(2.0)));
        let e = read(r#","scale_depth":-1"#).unwrap_err().to_string();
        assert!(e.contains("key `scale_depth` must be a positive number"), "{e}");
    }

    #[test]
    fn gpt2_spellings_are_aliases() {
        let c = parse(
            r#"{"model_type":"gpt2","n_embd":64,"n_head":4,"n_layer":2,"n_positions":256,"n_inner":null,"vocab_size":512,
            "layer_norm_epsilon":1e-5,"activation_function":"gelu_new"}"#,
        )
        .unwrap();
        assert_eq!((c.hidden_size, c.num_attention_heads, c.num_hidden_layers), (64, 4, 2));
        assert_eq!((c.intermediate_size, c.max_position_embeddings, c.norm_eps), (256, 256, 1e-5));
        assert_eq!(c.hidden_act, Activation::GeluTanh);
        let e = parse(&format!(r#"{{{BASE},"hidden_act":"mish"}}"#)).unwrap_err().to_string();
        assert!(e.contains("`hidden_act`") && e.contains("mish"), "{e}");
        // Values are named by the key the config wrote.
        let e = parse(r#"{"model_type":"gpt2","n_embd":65,"n_head":4,"n_layer":2,"n_inner":null,"vocab_size":512}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`n_embd` (65)") && e.contains("`n_head` (4)"), "{e}");
        assert!(!e.contains("hidden_size") && !e.contains("num_attention_heads"), "{e}");
    }

    /// A key a GPT-2 config lacks is asked for by GPT-2's name for it; a Llama-style config's
    /// by the Hugging Face name.
    #[test]
    fn a_missing_key_is_asked_for_by_the_familys_spelling() {
        let gpt2 = r#""model_type":"gpt2","n_embd":64,"n_head":4,"n_layer":2,"n_inner":null,"vocab_size":512"#;
        for (drop, named, other) in [("n_layer", "n_layer", "num_hidden_layers"), ("n_embd", "n_embd", "hidden_size"), ("n_head", "n_head", "num_attention_heads")] {
            let text = format!("{{{}}}", gpt2.replace(&format!(r#""{drop}":"#), r#""dropped":"#));
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.contains(&format!("required key `{named}` (or `{other}`) is missing")), "{drop}: {e}");
        }
        let e = parse(&format!("{{{}}}", gpt2.replace(r#""n_inner":null"#, r#""x":null"#))).unwrap_err().to_string();
        assert!(e.contains("required key `n_inner` (or `intermediate_size`) is missing"), "{e}");
        let e = parse(&format!("{{{}}}", BASE.replace(r#""num_hidden_layers":2"#, r#""x":2"#))).unwrap_err().to_string();
        assert!(e.contains("required key `num_hidden_layers` (or `n_layer`) is missing"), "{e}");
    }

    #[test]
    fn activations_no_table_runs_are_refused_by_key() {
        let e = parse(&format!(r#"{{{BASE},"hidden_act":"mish"}}"#)).unwrap_err().to_string();
        assert!(e.contains("`hidden_act`") && e.contains("mish") && e.contains(Activation::NAMES), "{e}");
        let e = parse(
            r#"{"model_type":"gpt2","n_embd":64,"n_head":4,"n_layer":2,"n_inner":null,"vocab_size":512,"activation_function":"mish"}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`activation_function`"), "{e}");
    }

    #[test]
    fn norm_epsilon_must_be_positive_under_its_own_key() {
        let e = parse(&format!(r#"{{{BASE},"rms_norm_eps":-1e-6}}"#)).unwrap_err().to_string();
        assert!(e.contains("`rms_norm_eps`"), "{e}");
        let e = parse(r#"{"model_type":"gpt2","n_embd":64,"n_head":4,"n_layer":2,"n_inner":null,"vocab_size":512,"layer_norm_epsilon":0}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`layer_norm_epsilon`"), "{e}");
    }

    #[test]
    fn rope_scaling_without_a_type_is_refused() {
        let e = parse(&format!(r#"{{{BASE},"rope_scaling":{{"factor":8.0}}}}"#)).unwrap_err().to_string();
        assert!(e.contains("`rope_scaling`") && e.contains("rope_type") && e.contains("factor"), "{e}");
        // The base keys alone need no type.
        let c = parse(&format!(r#"{{{BASE},"rope_parameters":{{"rope_theta":1000.0}}}}"#)).unwrap();
        assert_eq!((c.rope.theta, &c.rope.kind), (1000.0, &RopeKind::Default));
    }

    #[test]
    fn position_counts_too_large_to_build_name_the_key() {
        let e = parse(&format!(r#"{{{BASE},"max_position_embeddings":2147483648}}"#)).unwrap_err().to_string();
        assert!(e.contains("`max_position_embeddings` (2147483648)") && e.contains("GiB"), "{e}");
        let e = parse(
            r#"{"model_type":"gpt2","n_embd":64,"n_head":4,"n_layer":2,"n_inner":null,"vocab_size":512,"n_positions":4000000000}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`n_positions`"), "{e}");
        // A real long context still builds: one million positions at head 16.
        assert!(parse(&format!(r#"{{{BASE},"max_position_embeddings":1048576}}"#)).is_ok());
    }
}
