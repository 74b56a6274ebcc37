//! A PEFT LoRA adapter folder (what `PeftModel.save_pretrained` writes): `adapter_config.json`
//! read key by key, and `adapter_model.safetensors` read into one (A, B) pair per projection.
//! Everything an adapter means that a slot `y = base(x) + (x A) B` cannot compute is refused by
//! its key or tensor, before anything is written.

use super::{lora_error, Result};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The config file of a PEFT adapter folder.
pub const CONFIG_FILE: &str = "adapter_config.json";
/// The weights file of a PEFT adapter folder.
pub const WEIGHTS_FILE: &str = "adapter_model.safetensors";
/// The prefix PEFT puts before the base model's module paths.
const KEY_PREFIX: &str = "base_model.model.";

/// What `adapter_config.json` says, as far as the conversion reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct LoraConfig {
    pub r: usize,
    pub alpha: f64,
    pub use_rslora: bool,
    /// The listed target module names (`None`: a pattern string such as `all-linear`, which the
    /// tensors resolve).
    pub target_modules: Option<Vec<String>>,
    /// `layers_to_transform` (`None`: every layer).
    pub layers: Option<BTreeSet<usize>>,
    /// `rank_pattern`: per-module ranks, in the file's order (the first match wins).
    pub rank_pattern: Vec<(Pattern, usize)>,
    /// `alpha_pattern`: per-module alphas, in the file's order.
    pub alpha_pattern: Vec<(Pattern, f64)>,
}

/// A `rank_pattern` / `alpha_pattern` key: a regular expression PEFT matches against the end
/// of a module path (`re.match(rf"(.*\.)?({key})$", module)`), so `q_proj` matches every
/// layer's `...self_attn.q_proj` and `model.layers.0.self_attn.q_proj` that one module.
#[derive(Clone, Debug)]
pub struct Pattern {
    pub key: String,
    re: regex::Regex,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Pattern {
    fn new(key: &str) -> std::result::Result<Pattern, regex::Error> {
        Ok(Pattern { key: key.to_string(), re: regex::Regex::new(&format!("^(?:.*\\.)?(?:{key})$"))? })
    }

    /// Does the pattern name `module` (PEFT's module path)?
    pub fn matches(&self, module: &str) -> bool {
        self.re.is_match(module)
    }
}

impl LoraConfig {
    /// PEFT's scaling with the adapter-wide `r` and `lora_alpha`.
    pub fn scaling(&self) -> f64 {
        self.scaling_of(self.r, self.alpha)
    }

    /// PEFT's scaling for rank `r` and `alpha`: `alpha / r`, or `alpha / sqrt(r)` with rsLoRA.
    pub fn scaling_of(&self, r: usize, alpha: f64) -> f64 {
        if self.use_rslora {
            alpha / (r as f64).sqrt()
        } else {
            alpha / r as f64
        }
    }

    /// The rank and alpha of `module` (PEFT's module path): the first matching `rank_pattern`
    /// / `alpha_pattern` entry's, else `r` / `lora_alpha`, as PEFT's `get_pattern_key`.
    pub fn rank_and_alpha(&self, module: &str) -> (usize, f64) {
        let r = self.rank_pattern.iter().find(|(p, _)| p.matches(module)).map_or(self.r, |(_, r)| *r);
        let alpha = self.alpha_pattern.iter().find(|(p, _)| p.matches(module)).map_or(self.alpha, |(_, a)| *a);
        (r, alpha)
    }
}

/// One projection's pair, as float32 in PEFT's layout.
#[derive(Clone, Debug)]
pub struct Pair {
    /// The base model's module path (`model.layers.0.self_attn.q_proj`).
    pub module: String,
    /// The safetensors keys, for messages.
    pub a_key: String,
    pub b_key: String,
    /// `lora_A.weight`: `[r, in]`.
    pub a: Vec<f32>,
    /// `lora_B.weight`: `[out, r]`.
    pub b: Vec<f32>,
    /// PEFT's scaling of this module (its rank and alpha, `rank_pattern` / `alpha_pattern`
    /// included).
    pub scaling: f64,
    pub r: usize,
    pub inp: usize,
    pub out: usize,
}

/// A PEFT adapter read from its folder.
#[derive(Clone, Debug)]
pub struct PeftAdapter {
    pub dir: PathBuf,
    pub config: LoraConfig,
    /// One pair per targeted projection, by module path.
    pub pairs: BTreeMap<String, Pair>,
}

impl PeftAdapter {
    /// Reads and checks the folder `dir`.
    pub fn read(dir: &Path) -> Result<PeftAdapter> {
        let config_path = dir.join(CONFIG_FILE);
        let bytes = ir::read_regular(&config_path, ir::SETTINGS_LIMIT)?
            .ok_or_else(|| lora_error(&config_path, "not found: a PEFT adapter folder holds adapter_config.json and adapter_model.safetensors"))?;
        let json: Value = serde_json::from_slice(&bytes).map_err(|e| lora_error(&config_path, format!("not valid JSON: {e}")))?;
        let config = read_config(&config_path, &json)?;
        let weights_path = dir.join(WEIGHTS_FILE);
        let bytes = ir::read_regular(&weights_path, super::FILE_LIMIT)?.ok_or_else(|| {
            lora_error(&weights_path, "not found (PEFT's older adapter_model.bin pickles are not read: save the adapter with safe_serialization)")
        })?;
        let pairs = read_pairs(&weights_path, &bytes, &config)?;
        Ok(PeftAdapter { dir: dir.to_path_buf(), config, pairs })
    }
}

/// Keys whose value changes what the adapter computes beyond `(x A) B * scaling`: refused
/// unless absent, `null`, `false` or empty, each with why. (`fan_in_fan_out`, set for GPT-2's
/// Conv1D projections, is not among them: it only transposes the merged delta; unmerged, PEFT
/// computes `lora_B(lora_A(x))` with A `[r, in]` and B `[out, r]` for Conv1D as for Linear.)
const REFUSED: &[(&str, &str)] = &[
    ("use_dora", "DoRA rescales each output column by a learned magnitude over the merged weight's norm, which a slot adding (x A) B cannot compute"),
    ("modules_to_save", "whole modules saved beside the adapter replace base weights, which a LoRA slot cannot switch"),
    ("lora_bias", "a bias on lora_B is not read yet"),
    ("use_qalora", "QA-LoRA pools the input per group before A, which the slot does not compute"),
    ("trainable_token_indices", "trained token embeddings replace base weights, which a LoRA slot cannot switch"),
    ("layer_replication", "replicated layers change the base model's layer stack"),
    ("target_parameters", "LoRA on parameters (MoE expert stacks) is not a projection slot"),
    ("alora_invocation_tokens", "activated LoRA switches on after invocation tokens, which the graph does not track"),
    ("use_bdlora", "block-diagonal LoRA is not read yet"),
    ("kasa_config", "KaSA truncates the base weight's smallest singular components and puts a learned diagonal between A and B, which a slot adding (x A) B to the untouched base cannot compute"),
    ("monteclora_config", "Monte Carlo LoRA samples perturbations of A at every call"),
    ("arrow_config", "Arrow routes each token among several adapters"),
];

/// Where PEFT finds a vision-language model's text decoder (its module path, which follows the
/// transformers version it was trained under) and the table's name for it: transformers 4.52
/// and later nest it as `model.language_model.*`; Gemma 3 under earlier 4.x as
/// `language_model.model.*` with `language_model.lm_head`. The vision tower's modules keep
/// their paths (they have no slot, so such a target is refused by name).
const TEXT_MODULE_PATHS: &[(&str, &str)] = &[("model.language_model.", "model."), ("language_model.model.", "model."), ("language_model.lm_head", "lm_head")];

/// `module` (a PEFT module path) under the table's names (see [`TEXT_MODULE_PATHS`]).
fn table_module(module: &str) -> String {
    TEXT_MODULE_PATHS
        .iter()
        .find_map(|(peft, table)| module.strip_prefix(peft).map(|rest| format!("{table}{rest}")))
        .unwrap_or_else(|| module.to_string())
}

fn read_config(path: &Path, json: &Value) -> Result<LoraConfig> {
    let bad = |key: &str, why: String| lora_error(path, format!("`{key}`: {why}"));
    let peft_type = json.get("peft_type").and_then(Value::as_str).unwrap_or("LORA");
    if peft_type != "LORA" {
        return Err(bad("peft_type", format!("`{peft_type}` is not LoRA; only LORA adapters convert")));
    }
    for (key, why) in REFUSED {
        let set = match json.get(*key) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => false,
            Some(Value::Object(m)) => !m.is_empty(),
            Some(Value::Array(a)) => !a.is_empty(),
            Some(_) => true,
        };
        if set {
            return Err(bad(key, format!("{} is set; {why}", json[*key])));
        }
    }
    // Initializations that move the principal part of each weight out of the base: the adapter
    // was trained against `W - s * B0 A0`, which PEFT rebuilds when it loads the adapter and
    // this conversion does not (it would count that part twice).
    if let Some(init) = json.get("init_lora_weights").and_then(Value::as_str) {
        let lowered = init.to_ascii_lowercase();
        if ["pissa", "olora", "corda", "loftq", "lora_ga"].iter().any(|p| lowered.starts_with(p)) {
            return Err(bad(
                "init_lora_weights",
                format!(
                    "`{init}` trains against a base with the adapter's initial product removed, which PEFT restores when it loads the adapter and a slot adding (x A) B does not; convert it to a plain LoRA first (PEFT's `save_pretrained(..., path_initial_model_for_weight_conversion=...)`)"
                ),
            ));
        }
    }
    match json.get("bias").and_then(Value::as_str) {
        None | Some("none") => {}
        Some(other) => return Err(bad("bias", format!("`{other}`: trained biases change base weights; only `none` converts"))),
    }
    let r = json.get("r").and_then(Value::as_u64).filter(|&r| r > 0).ok_or_else(|| bad("r", "must be a positive integer".into()))? as usize;
    let alpha = match json.get("lora_alpha") {
        None => 8.0, // PEFT's default
        Some(v) => v.as_f64().filter(|a| a.is_finite()).ok_or_else(|| bad("lora_alpha", format!("{v} is not a number")))?,
    };
    let use_rslora = match json.get("use_rslora") {
        None | Some(Value::Null) => false,
        Some(v) => v.as_bool().ok_or_else(|| bad("use_rslora", format!("{v} is not true or false")))?,
    };
    let target_modules = match json.get("target_modules") {
        Some(Value::Array(a)) => Some(
            a.iter()
                .map(|v| v.as_str().map(str::to_string).ok_or_else(|| bad("target_modules", format!("{v} is not a module name"))))
                .collect::<Result<Vec<_>>>()?,
        ),
        Some(Value::String(_)) => None,
        None | Some(Value::Null) => return Err(bad("target_modules", "missing: which projections the adapter trains".into())),
        Some(v) => return Err(bad("target_modules", format!("{v} is not a list of module names or a pattern"))),
    };
    let layers = match json.get("layers_to_transform") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(BTreeSet::from([n.as_u64().ok_or_else(|| bad("layers_to_transform", format!("{n} is not a layer index")))? as usize])),
        Some(Value::Array(a)) => Some(
            a.iter()
                .map(|v| v.as_u64().map(|i| i as usize).ok_or_else(|| bad("layers_to_transform", format!("{v} is not a layer index"))))
                .collect::<Result<BTreeSet<_>>>()?,
        ),
        Some(v) => return Err(bad("layers_to_transform", format!("{v} is not a layer index or a list of them"))),
    };
    let rank_pattern = read_pattern(path, json, "rank_pattern", |v| v.as_u64().filter(|&r| r > 0).map(|r| r as usize))?;
    let alpha_pattern = read_pattern(path, json, "alpha_pattern", |v| v.as_f64().filter(|a| a.is_finite()))?;
    Ok(LoraConfig { r, alpha, use_rslora, target_modules, layers, rank_pattern, alpha_pattern })
}

/// A `rank_pattern` / `alpha_pattern` object: pattern -> value, in the file's order.
fn read_pattern<T>(path: &Path, json: &Value, key: &str, value: impl Fn(&Value) -> Option<T>) -> Result<Vec<(Pattern, T)>> {
    let what = if key == "rank_pattern" { "a positive integer (a rank)" } else { "a number (an alpha)" };
    match json.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| {
                let pattern = Pattern::new(k).map_err(|e| lora_error(path, format!("`{key}`: `{k}` is not a regular expression this tool reads: {e}")))?;
                let v = value(v).ok_or_else(|| lora_error(path, format!("`{key}.{k}`: {v} is not {what}")))?;
                Ok((pattern, v))
            })
            .collect(),
        Some(v) => Err(lora_error(path, format!("`{key}`: {v} is not an object of module patterns"))),
    }
}

/// The layer index in a module path (`model.layers.3.mlp.up_proj` -> 3).
fn layer_of(module: &str) -> Option<usize> {
    let parts: Vec<&str> = module.split('.').collect();
    parts.windows(2).find(|w| w[0] == "layers" || w[0] == "h" || w[0] == "blocks").and_then(|w| w[1].parse().ok())
}

/// One half of a pair as read: the tensor's key, shape and values.
type Half = (String, Vec<usize>, Vec<f32>);

fn read_pairs(path: &Path, bytes: &[u8], config: &LoraConfig) -> Result<BTreeMap<String, Pair>> {
    let st = safetensors::SafeTensors::deserialize(bytes).map_err(|e| lora_error(path, format!("not a safetensors file: {e}")))?;
    let mut halves: BTreeMap<String, [Option<Half>; 2]> = BTreeMap::new();
    // Each module's PEFT path, which `rank_pattern` / `alpha_pattern` are matched against.
    let mut peft_paths: BTreeMap<String, String> = BTreeMap::new();
    let mut names: Vec<String> = st.names().into_iter().map(|s| s.to_string()).collect();
    names.sort();
    for key in names {
        let tensor = |why: &str| lora_error(path, format!("tensor `{key}`: {why}"));
        let Some(rest) = key.strip_prefix(KEY_PREFIX) else {
            return Err(tensor(&format!("not under `{KEY_PREFIX}`; not a PEFT LoRA tensor")));
        };
        let (module, half) = if let Some(m) = rest.strip_suffix(".lora_A.weight") {
            (m, 0)
        } else if let Some(m) = rest.strip_suffix(".lora_B.weight") {
            (m, 1)
        } else {
            let why = if rest.contains(".lora_A.") || rest.contains(".lora_B.") {
                "a lora_A/lora_B tensor with an adapter name in its key (`lora_A.<name>.weight`, a raw state dict); save the adapter with PEFT's `save_pretrained`, which writes `lora_A.weight`"
            } else {
                "not a lora_A/lora_B weight (embedding LoRA, DoRA magnitudes and saved modules are not converted)"
            };
            return Err(tensor(why));
        };
        let leaf = module.rsplit('.').next().unwrap_or(module);
        if let Some(targets) = &config.target_modules {
            if !targets.iter().any(|t| t == leaf || module.ends_with(&format!(".{t}")) || module == t) {
                return Err(tensor(&format!("module `{module}` is not in target_modules {targets:?}")));
            }
        }
        if let Some(layers) = &config.layers {
            match layer_of(module) {
                Some(i) if layers.contains(&i) => {}
                Some(i) => return Err(tensor(&format!("layer {i} is not in layers_to_transform {layers:?}"))),
                None => return Err(tensor("no layer index in its module path, but layers_to_transform is set")),
            }
        }
        let view = st.tensor(&key).map_err(|e| tensor(&e.to_string()))?;
        let shape = view.shape().to_vec();
        if shape.len() != 2 || shape.contains(&0) {
            return Err(tensor(&format!("shape {shape:?}; a LoRA factor is a non-empty matrix")));
        }
        let values = to_f32(view.dtype(), view.data()).ok_or_else(|| tensor(&format!("dtype {:?}; adapters hold F32, F16 or BF16", view.dtype())))?;
        halves.entry(table_module(module)).or_default()[half] = Some((key.clone(), shape, values));
        peft_paths.entry(table_module(module)).or_insert_with(|| module.to_string());
    }
    let mut pairs = BTreeMap::new();
    for (module, [a, b]) in halves {
        let (Some((a_key, a_shape, a)), Some((b_key, b_shape, b))) = (a, b) else {
            return Err(lora_error(path, format!("module `{module}` has only one of lora_A and lora_B")));
        };
        let (r, inp, out) = (a_shape[0], a_shape[1], b_shape[0]);
        if b_shape[1] != r {
            return Err(lora_error(
                path,
                format!("the ranks of A and B disagree: `{a_key}` is {a_shape:?} (rank {r}) but `{b_key}` is {b_shape:?} (rank {})", b_shape[1]),
            ));
        }
        let (want_r, alpha) = config.rank_and_alpha(&peft_paths[&module]);
        if r != want_r {
            let said = match config.rank_pattern.iter().find(|(p, _)| p.matches(&peft_paths[&module])) {
                Some((p, _)) => format!("`rank_pattern` entry `{}` gives {want_r}", p.key),
                None => format!("adapter_config.json's `r` is {want_r}"),
            };
            return Err(lora_error(path, format!("tensor `{a_key}` has rank {r}, but {said}")));
        }
        let scaling = config.scaling_of(r, alpha);
        pairs.insert(module.clone(), Pair { module, a_key, b_key, a, b, scaling, r, inp, out });
    }
    if pairs.is_empty() {
        return Err(lora_error(path, "holds no lora_A/lora_B tensors"));
    }
    Ok(pairs)
}

fn to_f32(dtype: safetensors::Dtype, data: &[u8]) -> Option<Vec<f32>> {
    use safetensors::Dtype;
    Some(match dtype {
        Dtype::F32 => data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect(),
        Dtype::F16 => data.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
        Dtype::BF16 => data.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
        _ => return None,
    })
}
