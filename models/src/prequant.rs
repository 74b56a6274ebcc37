//! Pre-quantized checkpoints: which format `quantization_config` names, refused by key when
//! it is one the tool cannot keep exact, and the packed tensors of each quantized Linear layer
//! gathered into [`PackedWeight`]s, which the checkpoint hands out as the layer's `.weight`.
//!
//! Read: GPTQ (`quant_method: gptq`, `checkpoint_format` `gptq` = v1 or `gptq_v2`, 4 or 8
//! bits, any group size that holds a 16-row block, `desc_act` either way) and AutoAWQ GEMM
//! (`quant_method: awq`, `version: gemm`, 4 bits, `zero_point: true`). Everything else that
//! says it is quantized is refused before a weight is read, naming the key: other methods
//! (compressed-tensors, bitsandbytes, fp8, mxfp4, hqq, ...), other bit widths, kernel-specific
//! layouts (Marlin, BitBLAS, exllama, GEMV), per-module overrides (GPTQModel's `dynamic`).

use crate::{Error, Result};
use ir::quant::Bits;
use ir::{PackedFormat, PackedSettings, PackedTensors, PackedWeight, SourceTensor};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// What the checkpoint's quantization config says its quantized layers hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuantSource {
    pub format: PackedFormat,
    pub bits: Bits,
    /// Rows per group; `None`: one group per column (`group_size: -1`).
    pub group_size: Option<usize>,
    pub symmetric: bool,
    /// GPTQ act-order: groups follow `g_idx`, not the row order.
    pub desc_act: bool,
    /// GPTQ's `lm_head: true`: the head is quantized too.
    pub lm_head: bool,
    /// The file and key the settings come from, for messages and the build report.
    pub origin: String,
    /// A GGUF file's tensor types with their counts (`Q4_1` 210, `F32` 61, ...); empty for
    /// GPTQ and AWQ, whose layers all have `bits`.
    pub types: Vec<(String, usize)>,
    /// The bit widths of the quantized tensors (GGUF files mix them; GPTQ/AWQ: `bits`).
    pub bit_widths: Vec<Bits>,
}

/// Methods transformers knows that are not imported, with what they store, for the refusal.
const OTHER_METHODS: &[(&str, &str)] = &[
    ("compressed-tensors", "llm-compressor's packed formats"),
    ("bitsandbytes", "bitsandbytes NF4/FP4/int8 blocks"),
    ("fp8", "FP8 weights with block scales"),
    ("fbgemm_fp8", "FP8 weights"),
    ("mxfp4", "MXFP4 blocks (gpt-oss)"),
    ("hqq", "HQQ's float zero points"),
    ("eetq", "EETQ int8 kernels' layout"),
    ("aqlm", "additive codebooks"),
    ("vptq", "vector codebooks"),
    ("quanto", "optimum-quanto tensors"),
    ("torchao", "torchao tensor subclasses"),
    ("bitnet", "ternary weights"),
    ("higgs", "HIGGS codebooks"),
    ("spqr", "SpQR outliers"),
    ("quark", "AMD Quark formats"),
    ("auto-round", "AutoRound's packing"),
    ("gptq_marlin", "Marlin-repacked GPTQ"),
    ("awq_marlin", "Marlin-repacked AWQ"),
];

impl QuantSource {
    /// The quantization settings of the checkpoint in `dir`: `quantization_config` in
    /// config.json, else AutoGPTQ's `quantize_config.json`; `None` when neither says it is
    /// quantized (or there is no config.json: opening the checkpoint reports that).
    pub fn detect(dir: &Path) -> Result<Option<QuantSource>> {
        if let Some(file) = crate::gguf::gguf_file(dir)? {
            return crate::gguf::import(&file).map(|i| i.source);
        }
        let config = dir.join("config.json");
        if let Some(map) = read_object(&config)? {
            if let Some(q) = map.get("quantization_config") {
                return Self::from_value(&config, "quantization_config", q).map(Some);
            }
        }
        let legacy = dir.join("quantize_config.json");
        match read_object(&legacy)? {
            // AutoGPTQ's own file has no quant_method: it is GPTQ by being there.
            Some(map) => {
                let mut map = map.clone();
                map.entry("quant_method").or_insert_with(|| Value::String("gptq".into()));
                Self::from_value(&legacy, "", &Value::Object(map)).map(Some)
            }
            None => Ok(None),
        }
    }

    /// Parses one quantization config (`key` names it inside `path` for messages).
    pub fn from_value(path: &Path, key: &str, value: &Value) -> Result<QuantSource> {
        let at = |k: &str| if key.is_empty() { format!("`{k}`") } else { format!("`{key}.{k}`") };
        let refuse = |reason: String| Error::Prequantized { path: path.to_path_buf(), reason };
        let Value::Object(q) = value else {
            return Err(refuse(format!("`{}` is {value}, not an object", if key.is_empty() { "the file" } else { key })));
        };
        let origin = format!("{} {}", path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(), if key.is_empty() { "" } else { key }).trim_end().to_string();
        let method = match q.get("quant_method").and_then(Value::as_str) {
            Some(m) => m.to_ascii_lowercase(),
            None if q.contains_key("load_in_4bit") || q.contains_key("load_in_8bit") => "bitsandbytes".into(),
            None => return Err(refuse(format!("{} is missing: the checkpoint says it is quantized but not how; only gptq and awq checkpoints are imported", at("quant_method")))),
        };
        let int = |k: &str| -> Result<Option<i64>> {
            match q.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v.as_i64().map(Some).ok_or_else(|| refuse(format!("{} is {v}, not an integer", at(k)))),
            }
        };
        let boolean = |k: &str, default: bool| -> Result<bool> {
            match q.get(k) {
                None | Some(Value::Null) => Ok(default),
                Some(Value::Bool(b)) => Ok(*b),
                Some(v) => Err(refuse(format!("{} is {v}, not true or false", at(k)))),
            }
        };
        let text = |k: &str| -> Option<String> { q.get(k).and_then(Value::as_str).map(str::to_ascii_lowercase) };
        let group = |keys: &[&str]| -> Result<Option<usize>> {
            let Some((k, g)) = keys.iter().find_map(|k| int(k).transpose().map(|g| (*k, g))) else {
                return Err(refuse(format!("{} is missing: the group size decides how the scales are laid out", at(keys[0]))));
            };
            match g? {
                -1 => Ok(None),
                g if g > 0 => Ok(Some(g as usize)),
                g => Err(refuse(format!("{} is {g}: a group size is positive, or -1 for one group per column", at(k)))),
            }
        };
        let bits_of = |keys: &[&str], allowed: &[i64], what: &str| -> Result<Bits> {
            let Some((k, b)) = keys.iter().find_map(|k| int(k).transpose().map(|b| (*k, b))) else {
                return Err(refuse(format!("{} is missing", at(keys[0]))));
            };
            match b? {
                4 if allowed.contains(&4) => Ok(Bits::Int4),
                8 if allowed.contains(&8) => Ok(Bits::Int8),
                b => Err(refuse(format!("{} is {b}: {what}", at(k)))),
            }
        };
        match method.as_str() {
            "gptq" => {
                let bits = bits_of(&["bits"], &[4, 8], "only 4- and 8-bit GPTQ maps onto MatMulNBits' packed blocks exactly (2- and 3-bit codes do not fill its bytes)")?;
                let format_key = if q.contains_key("checkpoint_format") { "checkpoint_format" } else { "format" };
                let format = match text(format_key).as_deref() {
                    None | Some("gptq") => PackedFormat::GptqV1,
                    Some("gptq_v2") => PackedFormat::GptqV2,
                    Some(other) => {
                        return Err(refuse(format!(
                            "{} is `{other}`: a kernel-specific repacking (Marlin, BitBLAS, IPEX, ...), not GPTQ's own layout; only `gptq` (v1) and `gptq_v2` are read. Export the checkpoint in gptq format",
                            at(format_key)
                        )))
                    }
                };
                if boolean("is_marlin_format", false)? {
                    return Err(refuse(format!("{} is true: Marlin-repacked weights are not GPTQ's own layout; export the checkpoint in gptq format", at("is_marlin_format"))));
                }
                if let Some(p) = text("pack_dtype").filter(|p| p != "int32") {
                    return Err(refuse(format!("{} is `{p}`: only int32 words are read (GPTQModel's default)", at("pack_dtype"))));
                }
                match q.get("dynamic") {
                    None | Some(Value::Null) => {}
                    Some(Value::Object(m)) if m.is_empty() => {}
                    Some(v) => {
                        return Err(refuse(format!(
                            "{} is {v}: per-module overrides of bits or groups (GPTQModel) are not imported; every layer must use the top-level settings",
                            at("dynamic")
                        )))
                    }
                }
                Ok(QuantSource {
                    format,
                    bits,
                    group_size: group(&["group_size"])?,
                    symmetric: boolean("sym", true)?,
                    desc_act: boolean("desc_act", false)?,
                    lm_head: boolean("lm_head", false)?,
                    origin,
                    types: Vec::new(),
                    bit_widths: vec![bits],
                })
            }
            "awq" => {
                let bits = bits_of(&["bits", "w_bit"], &[4], "AutoAWQ's GEMM layout packs 4-bit weights only")?;
                match text("version").as_deref() {
                    None | Some("gemm") => {}
                    Some(other) => {
                        return Err(refuse(format!(
                            "{} is `{other}`: only the GEMM layout is read (GEMV, GEMV-fast, Marlin, exllama and IPEX pack the same integers differently); export the checkpoint with version gemm",
                            at("version")
                        )))
                    }
                }
                if let Some(b) = text("backend").filter(|b| b != "autoawq") {
                    return Err(refuse(format!("{} is `{b}`: only AutoAWQ's packing is read (llm-awq orders the nibbles differently)", at("backend"))));
                }
                if !boolean("zero_point", true)? {
                    return Err(refuse(format!("{} is false: AutoAWQ's GEMM kernel packs zero points, and a checkpoint without them is not in its layout", at("zero_point"))));
                }
                Ok(QuantSource { format: PackedFormat::AwqGemm, bits, group_size: group(&["group_size", "q_group_size"])?, symmetric: false, desc_act: false, lm_head: false, origin, types: Vec::new(), bit_widths: vec![bits] })
            }
            other => {
                let what = OTHER_METHODS.iter().find(|(m, _)| *m == other).map(|(_, w)| format!(" ({w})")).unwrap_or_default();
                Err(refuse(format!(
                    "{} is `{other}`{what}: only gptq and awq (GEMM) checkpoints are imported, keeping their integers; use the float checkpoint (and --quant) instead",
                    at("quant_method")
                )))
            }
        }
    }

    /// The settings every packed layer is read with.
    pub fn packed_settings(&self) -> PackedSettings {
        PackedSettings { format: self.format, bits: self.bits, group_size: self.group_size, symmetric: self.symmetric }
    }

    /// One line for messages: `GPTQ v1, 4 bits, group 32, symmetric, desc_act false (config.json
    /// quantization_config)`.
    pub fn summary(&self) -> String {
        if self.format == PackedFormat::Gguf {
            let types: Vec<String> = self.types.iter().map(|(t, n)| format!("{n} {t}")).collect();
            return format!("GGUF, tensors {} ({})", types.join(", "), self.origin);
        }
        let method = match self.format {
            PackedFormat::Gguf => "GGUF",
            PackedFormat::AwqGemm => "AWQ GEMM",
            PackedFormat::GptqV2 => "GPTQ v2",
            PackedFormat::GptqV1 => "GPTQ v1",
        };
        let group = self.group_size.map_or("one group per column".to_string(), |g| format!("group {g}"));
        let sym = if self.symmetric { "symmetric" } else { "asymmetric" };
        let mut s = format!("{method}, {} bits, {group}, {sym}", self.bits.count());
        if self.format != PackedFormat::AwqGemm {
            s.push_str(&format!(", desc_act {}", self.desc_act));
        }
        if self.lm_head {
            s.push_str(", lm_head quantized");
        }
        format!("{s} ({})", self.origin)
    }
}

/// `path`'s JSON object, or `None` when the file does not exist.
fn read_object(path: &Path) -> Result<Option<Map<String, Value>>> {
    if !ir::regular_file(path)? {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).map_err(|e| Error::Config { path: path.to_path_buf(), reason: format!("cannot read it: {e}") })?;
    match serde_json::from_str(&text) {
        Ok(Value::Object(m)) => Ok(Some(m)),
        Ok(_) => Err(Error::Config { path: path.to_path_buf(), reason: "must hold a JSON object".into() }),
        Err(e) => Err(Error::Config { path: path.to_path_buf(), reason: format!("not valid JSON: {e}") }),
    }
}

/// The packed layers of a checkpoint, by the `.weight` name they stand for.
pub(crate) struct Packed {
    pub layers: BTreeMap<String, Arc<PackedWeight>>,
    /// Tensors no graph reads, with why (GPTQ's zero bias buffers of bias-free layers).
    pub unused: Vec<(String, String)>,
}

const SUFFIXES: [&str; 4] = ["qweight", "qzeros", "scales", "g_idx"];

/// Gathers every `<scope>.qweight` with its `qzeros`, `scales` and (GPTQ) `g_idx` into a
/// layer standing for `<scope>.weight`. A `.qweight` without a quantization config, or a
/// layer missing a part, is an error.
pub(crate) fn gather(dir: &Path, tensors: &BTreeMap<String, SourceTensor>, source: Option<&QuantSource>) -> Result<Packed> {
    let scopes: Vec<&str> = tensors.keys().filter_map(|k| k.strip_suffix(".qweight")).collect();
    let mut packed = Packed { layers: BTreeMap::new(), unused: Vec::new() };
    let Some(source) = source else {
        if let Some(scope) = scopes.first() {
            return Err(Error::Prequantized {
                path: dir.join("config.json"),
                reason: format!(
                    "has no quantization_config, but the checkpoint holds packed tensors (`{scope}.qweight` and {} more); add the config the quantizer wrote",
                    scopes.len() - 1
                ),
            });
        }
        return Ok(packed);
    };
    let path_of = |name: &str| tensors.get(name).map(|t| t.file.path.clone()).unwrap_or_else(|| dir.to_path_buf());
    for scope in scopes {
        let part = |suffix: &str| tensors.get(&format!("{scope}.{suffix}")).cloned();
        let need = |suffix: &str| {
            part(suffix).ok_or_else(|| Error::MissingTensor {
                path: path_of(&format!("{scope}.qweight")),
                name: format!("{scope}.{suffix}"),
                hint: format!("`{scope}.qweight` is there; a {} layer stores qweight, qzeros and scales", source.format.name()),
            })
        };
        let weight = format!("{scope}.weight");
        if tensors.contains_key(&weight) {
            return Err(Error::Checkpoint {
                path: path_of(&weight),
                reason: format!("holds both `{weight}` and `{scope}.qweight`: the layer is stored twice"),
            });
        }
        let g_idx = match source.format {
            PackedFormat::AwqGemm => None,
            _ => part("g_idx"),
        };
        let t = PackedTensors { qweight: need("qweight")?, qzeros: need("qzeros")?, scales: need("scales")?, g_idx };
        let layer = PackedWeight::new(scope, source.packed_settings(), t)?;
        if let Some(bias) = tensors.get(&format!("{scope}.bias")) {
            if is_zero(bias)? {
                packed.unused.push((bias.name.clone(), "all zeros: the bias buffer GPTQ's QuantLinear saves for a bias-free layer".into()));
            }
        }
        packed.layers.insert(weight, layer);
    }
    Ok(packed)
}

/// The names of a packed layer's tensors (what taking its `.weight` consumes).
pub(crate) fn parts_of(weight: &str) -> impl Iterator<Item = String> + '_ {
    let scope = weight.strip_suffix(".weight").unwrap_or(weight);
    SUFFIXES.iter().map(move |s| format!("{scope}.{s}"))
}

/// Whether a float tensor holds only zeros (either sign).
fn is_zero(t: &SourceTensor) -> Result<bool> {
    if !t.dtype.is_float() {
        return Ok(false);
    }
    let bytes = ir::Recipe::source(t.clone()).cast(ir::DType::F32).materialize()?;
    Ok(bytes.chunks_exact(4).all(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) == 0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(q: Value) -> Result<QuantSource> {
        QuantSource::from_value(Path::new("config.json"), "quantization_config", &q)
    }

    #[test]
    fn gptq_and_awq_settings_are_read_from_their_keys() {
        let s = parse(json!({"quant_method": "gptq", "bits": 8, "group_size": -1, "sym": false, "desc_act": true, "checkpoint_format": "gptq_v2"})).unwrap();
        assert_eq!((s.format, s.bits, s.group_size, s.symmetric, s.desc_act), (PackedFormat::GptqV2, Bits::Int8, None, false, true));
        // Defaults: v1, symmetric, no act-order; GPTQModel's `format` spelling is read too.
        let s = parse(json!({"quant_method": "GPTQ", "bits": 4, "group_size": 128})).unwrap();
        assert_eq!((s.format, s.group_size, s.symmetric, s.desc_act), (PackedFormat::GptqV1, Some(128), true, false));
        assert_eq!(parse(json!({"quant_method": "gptq", "bits": 4, "group_size": 32, "format": "gptq_v2"})).unwrap().format, PackedFormat::GptqV2);
        let s = parse(json!({"quant_method": "awq", "w_bit": 4, "q_group_size": 64, "version": "GEMM", "modules_to_not_convert": ["visual"]})).unwrap();
        assert_eq!((s.format, s.group_size, s.symmetric), (PackedFormat::AwqGemm, Some(64), false));
        assert!(s.summary().starts_with("AWQ GEMM, 4 bits, group 64, asymmetric"), "{}", s.summary());
        let e = parse(json!({"quant_method": "gptq", "bits": 4})).unwrap_err().to_string();
        assert!(e.contains("quantization_config.group_size` is missing"), "{e}");
        let e = parse(json!({"quant_method": "gptq", "bits": "4", "group_size": 32})).unwrap_err().to_string();
        assert!(e.contains("is \"4\", not an integer"), "{e}");
        let e = parse(json!({"quant_method": "gptq", "bits": 4, "group_size": 32, "sym": "yes"})).unwrap_err().to_string();
        assert!(e.contains("sym` is \"yes\""), "{e}");
    }

    /// AutoGPTQ checkpoints whose config.json has no quantization_config keep the settings in
    /// quantize_config.json, which has no quant_method.
    #[test]
    fn autogptqs_quantize_config_is_read_when_config_json_has_none() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), r#"{"model_type": "llama"}"#).unwrap();
        assert_eq!(QuantSource::detect(dir.path()).unwrap(), None);
        std::fs::write(dir.path().join("quantize_config.json"), r#"{"bits": 4, "group_size": 128, "desc_act": true, "sym": true}"#).unwrap();
        let s = QuantSource::detect(dir.path()).unwrap().unwrap();
        assert_eq!((s.format, s.group_size, s.desc_act), (PackedFormat::GptqV1, Some(128), true));
        assert_eq!(s.origin, "quantize_config.json");
        std::fs::write(dir.path().join("quantize_config.json"), r#"{"bits": 4, "group_size": 128, "is_marlin_format": true}"#).unwrap();
        let e = QuantSource::detect(dir.path()).unwrap_err().to_string();
        assert!(e.contains("quantize_config.json") && e.contains("`is_marlin_format` is true"), "{e}");
        // No config.json at all: nothing detected (opening the checkpoint says what is missing).
        assert_eq!(QuantSource::detect(&dir.path().join("absent")).unwrap(), None);
    }
}
