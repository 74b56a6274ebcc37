//! Pre-quantized checkpoints: which format `quantization_config` names, refused by key when
//! it is one the tool cannot keep exact, and the packed tensors of each quantized Linear layer
//! gathered into [`PackedWeight`]s, which the checkpoint hands out as the layer's `.weight`.
//!
//! Read: GPTQ (`quant_method: gptq`, `checkpoint_format` `gptq` = v1 or `gptq_v2`, 4 or 8
//! bits, any group size that holds a 16-row block, `desc_act` either way), AutoAWQ GEMM
//! (`quant_method: awq`, `version: gemm`, 4 bits, `zero_point: true`) and transformers' MXFP4
//! (`quant_method: mxfp4`, gpt-oss's expert stacks `<name>_blocks` / `<name>_scales`, handed
//! out as the float `<name>` the model reads). Everything else that says it is quantized is
//! refused before a weight is read, naming the key: other methods (compressed-tensors,
//! bitsandbytes, fp8, hqq, ...), other bit widths, kernel-specific layouts (Marlin, BitBLAS,
//! exllama, GEMV), per-module overrides (GPTQModel's `dynamic`).

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
            None => return Err(refuse(format!("{} is missing: the checkpoint says it is quantized but not how; only gptq, awq and mxfp4 checkpoints are imported", at("quant_method")))),
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
            // transformers' Mxfp4Config has no settings of the stored form: E2M1 values, an e8m0
            // scale per 32 along the input, only the expert stacks packed (the rest float,
            // whatever `modules_to_not_convert` lists), written in ggml MXFP4's exact 8-bit form.
            "mxfp4" => Ok(QuantSource {
                format: PackedFormat::Mxfp4,
                bits: Bits::Int8,
                group_size: Some(32),
                symmetric: true,
                desc_act: false,
                lm_head: false,
                origin,
                types: Vec::new(),
                bit_widths: vec![Bits::Int8],
            }),
            other => {
                let what = OTHER_METHODS.iter().find(|(m, _)| *m == other).map(|(_, w)| format!(" ({w})")).unwrap_or_default();
                Err(refuse(format!(
                    "{} is `{other}`{what}: only gptq, awq (GEMM) and mxfp4 checkpoints are imported, keeping their integers; use the float checkpoint (and --quant) instead",
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
        if self.format == PackedFormat::Mxfp4 {
            return format!("MXFP4 expert stacks (E2M1 values, an e8m0 scale per 32 inputs; kept exactly as 8-bit codes), the rest float ({})", self.origin);
        }
        let method = match self.format {
            PackedFormat::Gguf => "GGUF",
            PackedFormat::Mxfp4 => "MXFP4",
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
    /// Float tensors the checkpoint stores packed under other names (MXFP4's `<name>_blocks`
    /// and `<name>_scales` stand for `<name>`), by the name they stand for.
    pub views: BTreeMap<String, ir::Recipe>,
    /// Tensors no graph reads, with why (GPTQ's zero bias buffers of bias-free layers).
    pub unused: Vec<(String, String)>,
}

const SUFFIXES: [&str; 4] = ["qweight", "qzeros", "scales", "g_idx"];

/// Gathers every `<scope>.qweight` with its `qzeros`, `scales` and (GPTQ) `g_idx` into a
/// layer standing for `<scope>.weight`. A `.qweight` without a quantization config, or a
/// layer missing a part, is an error.
pub(crate) fn gather(dir: &Path, tensors: &BTreeMap<String, SourceTensor>, source: Option<&QuantSource>) -> Result<Packed> {
    let scopes: Vec<&str> = tensors.keys().filter_map(|k| k.strip_suffix(".qweight")).collect();
    // MXFP4 stacks: u8 `_blocks`; outside an mxfp4 config only those with their u8 `_scales`
    // count (a float model may name a tensor `..._blocks`).
    let u8_named = |name: &str| tensors.get(name).is_some_and(|t| t.dtype == ir::DType::U8);
    let stacks: Vec<&str> = tensors.keys().filter_map(|k| k.strip_suffix(MXFP4_SUFFIXES[0])).filter(|s| u8_named(&format!("{s}_blocks"))).collect();
    let paired: Vec<&str> = stacks.iter().copied().filter(|s| u8_named(&format!("{s}_scales"))).collect();
    let mut packed = Packed { layers: BTreeMap::new(), views: BTreeMap::new(), unused: Vec::new() };
    let path_of = |name: &str| tensors.get(name).map(|t| t.file.path.clone()).unwrap_or_else(|| dir.to_path_buf());
    let Some(source) = source else {
        let first = scopes.first().map(|s| (format!("{s}.qweight"), scopes.len())).or_else(|| paired.first().map(|s| (format!("{s}_blocks"), paired.len())));
        if let Some((name, count)) = first {
            return Err(Error::Prequantized {
                path: dir.join("config.json"),
                reason: format!("has no quantization_config, but the checkpoint holds packed tensors (`{name}` and {} more); add the config the quantizer wrote", count - 1),
            });
        }
        return Ok(packed);
    };
    if source.format == PackedFormat::Mxfp4 {
        if let Some(scope) = scopes.first() {
            return Err(Error::Prequantized {
                path: path_of(&format!("{scope}.qweight")),
                reason: format!("holds `{scope}.qweight`, a GPTQ/AWQ tensor, but {} says mxfp4", source.origin),
            });
        }
        if stacks.is_empty() {
            return Err(Error::Prequantized {
                path: dir.join("config.json"),
                reason: "says `quant_method: mxfp4`, but the checkpoint holds no MXFP4 tensors (`<name>_blocks` with `<name>_scales`); remove quantization_config if the weights are float".into(),
            });
        }
        for stack in stacks {
            let view = mxfp4_stack(stack, tensors, &path_of)?;
            packed.views.insert(stack.to_string(), view);
        }
        return Ok(packed);
    }
    if let Some(stack) = paired.first() {
        return Err(Error::Prequantized {
            path: path_of(&format!("{stack}_blocks")),
            reason: format!("holds `{stack}_blocks`, an MXFP4 tensor, but {} says {}", source.origin, source.format.name()),
        });
    }
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

/// The suffixes of transformers' MXFP4 pair: nibbles and e8m0 exponents.
const MXFP4_SUFFIXES: [&str; 2] = ["_blocks", "_scales"];

/// The float view `<stack>` of an MXFP4 expert stack: blocks `[E, rows, K/32, 16]` and scales
/// `[E, rows, K/32]` are the `[E, rows, K]` weight transformers' `convert_moe_packed_tensors`
/// forms, which it then transposes to the `[E, K, rows]` the model reads (gpt-oss's
/// `gate_up_proj` `[E, hidden, 2 * inter]`, `down_proj` `[E, inter, hidden]`).
fn mxfp4_stack(stack: &str, tensors: &BTreeMap<String, SourceTensor>, path_of: &dyn Fn(&str) -> std::path::PathBuf) -> Result<ir::Recipe> {
    let [blocks, scales] = MXFP4_SUFFIXES.map(|s| format!("{stack}{s}"));
    let scales = tensors.get(&scales).cloned().ok_or_else(|| Error::MissingTensor {
        path: path_of(&blocks),
        name: scales.clone(),
        hint: format!("`{blocks}` is there; an MXFP4 tensor stores its blocks and their scales"),
    })?;
    let blocks = tensors[&blocks].clone();
    if tensors.contains_key(stack) {
        return Err(Error::Checkpoint { path: path_of(stack), reason: format!("holds both `{stack}` and `{}`: the tensor is stored twice", blocks.name) });
    }
    let [experts, rows, _, _] = blocks.shape[..] else {
        return Err(Error::Checkpoint {
            path: blocks.file.path.clone(),
            reason: format!(
                "MXFP4 tensor `{}` has shape {:?}; only expert stacks [experts, rows, K/32, 16] are read (transformers' gpt-oss layout)",
                blocks.name, blocks.shape
            ),
        });
    };
    let w = PackedWeight::mxfp4(stack, blocks, scales)?;
    let k = w.k();
    Ok(ir::Recipe::Packed(w).reshape(vec![experts, rows, k]).transpose(vec![0, 2, 1]))
}

/// The stored tensors a view of [`Packed::views`] reads (what taking it consumes).
pub(crate) fn view_parts(name: &str) -> impl Iterator<Item = String> + '_ {
    MXFP4_SUFFIXES.iter().map(move |s| format!("{name}{s}"))
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

    /// transformers' Mxfp4Config: no key changes the stored form; the experts are read as
    /// 8-bit codes in blocks of 32 with no zero points (ggml MXFP4's exact form).
    #[test]
    fn mxfp4_settings_are_the_exact_8_bit_form() {
        let s = parse(json!({"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]})).unwrap();
        assert_eq!((s.format, s.bits, s.group_size, s.symmetric, s.desc_act, s.lm_head), (PackedFormat::Mxfp4, Bits::Int8, Some(32), true, false, false));
        assert!(s.summary().starts_with("MXFP4 expert stacks") && s.summary().ends_with("(config.json quantization_config)"), "{}", s.summary());
        let e = parse(json!({"quant_method": "fp8"})).unwrap_err().to_string();
        assert!(e.contains("only gptq, awq (GEMM) and mxfp4"), "{e}");
    }

    /// The MXFP4 fixture (tests/python/data/mxfp4, transformers' gpt-oss layout): each expert
    /// stack is the float view of its `_blocks`/`_scales` pair, equal to the dequantized
    /// checkpoint's tensor bit for bit; building the decoder takes every stored tensor (the
    /// pairs through their views), leaving none unaccounted; a wrong expected shape names the
    /// pair and its file.
    #[test]
    fn mxfp4_stacks_are_views_of_their_pairs_and_all_taken() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/data/mxfp4/tiny-gpt-oss-mxfp4");
        let ckpt = crate::Checkpoint::open(&dir).unwrap();
        let float = ir::MappedFile::open(&dir.join("dequantized.safetensors")).unwrap().safetensors_tensors().unwrap();
        let mut stacks = 0;
        for t in float.iter().filter(|t| t.name.contains(".mlp.experts.") && !t.name.ends_with("_bias")) {
            let view = ckpt.tensor(&t.name, &t.shape).unwrap();
            assert_eq!(view.materialize().unwrap(), ir::Recipe::source(t.clone()).materialize().unwrap(), "{}", t.name);
            stacks += 1;
        }
        assert_eq!(stacks, 2 * ckpt.config.num_hidden_layers);
        let e = ckpt.tensor("model.layers.0.mlp.experts.down_proj", &[4, 64, 65]).unwrap_err().to_string();
        assert!(e.contains("packed in model.layers.0.mlp.experts.down_proj_blocks and model.layers.0.mlp.experts.down_proj_scales") && e.contains("model.safetensors"), "{e}");
        let ckpt = crate::Checkpoint::open(&dir).unwrap();
        crate::tasks::causal_lm::build(&ckpt, &crate::BuildOptions::default()).unwrap();
        assert_eq!(ckpt.unaccounted(), Vec::<String>::new());
        assert!(ckpt.taken().contains_key("model.layers.1.mlp.experts.gate_up_proj_scales"));
    }

    /// A safetensors file of `(name, dtype, shape, bytes)` tensors in `dir`, and its tensors.
    fn safetensors(dir: &Path, tensors: &[(&str, &str, Vec<usize>, Vec<u8>)]) -> BTreeMap<String, SourceTensor> {
        let (mut header, mut data) = (serde_json::Map::new(), Vec::new());
        for (name, dtype, shape, bytes) in tensors {
            header.insert(name.to_string(), json!({"dtype": dtype, "shape": shape, "data_offsets": [data.len(), data.len() + bytes.len()]}));
            data.extend_from_slice(bytes);
        }
        let header = serde_json::to_vec(&header).unwrap();
        let path = dir.join("model.safetensors");
        std::fs::write(&path, [&(header.len() as u64).to_le_bytes()[..], &header, &data].concat()).unwrap();
        ir::MappedFile::open(&path).unwrap().safetensors_tensors().unwrap().into_iter().map(|t| (t.name.clone(), t)).collect()
    }

    /// Without an mxfp4 config, only a u8 `_blocks` with its u8 `_scales` is taken for MXFP4 (a
    /// float tensor named `..._blocks` is a float model's own); under one, a `_blocks` without
    /// its scales is an error naming the missing tensor.
    #[test]
    fn only_u8_pairs_are_mxfp4_outside_an_mxfp4_config() {
        let dir = tempfile::tempdir().unwrap();
        let t = safetensors(dir.path(), &[("a.conv_blocks", "F32", vec![2], vec![0; 8]), ("a.conv_scales", "U8", vec![2], vec![0; 2]), ("b.x_blocks", "U8", vec![1, 1, 1, 16], vec![0; 16])]);
        let packed = gather(dir.path(), &t, None).unwrap();
        assert!(packed.layers.is_empty() && packed.views.is_empty());
        let gptq = parse(json!({"quant_method": "gptq", "bits": 4, "group_size": 32})).unwrap();
        assert!(gather(dir.path(), &t, Some(&gptq)).unwrap().views.is_empty());
        let mxfp4 = parse(json!({"quant_method": "mxfp4"})).unwrap();
        let e = gather(dir.path(), &t, Some(&mxfp4)).err().unwrap().to_string();
        assert!(e.contains("b.x_scales") && e.contains("`b.x_blocks` is there"), "{e}");
        let t = safetensors(dir.path(), &[("b.x_blocks", "U8", vec![1, 1, 1, 16], vec![0x21; 16]), ("b.x_scales", "U8", vec![1, 1, 1], vec![127])]);
        let e = gather(dir.path(), &t, None).err().unwrap().to_string();
        assert!(e.contains("no quantization_config") && e.contains("`b.x_blocks`"), "{e}");
        let view = &gather(dir.path(), &t, Some(&mxfp4)).unwrap().views["b.x"];
        assert_eq!(view.shape(), vec![1, 32, 1]);
        let values: Vec<f32> = view.materialize().unwrap().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        // Byte 0x21: value 2j = fp4[1] = 0.5, value 2j + 1 = fp4[2] = 1.0, scale 2^0.
        assert_eq!(values[..4], [0.5, 1.0, 0.5, 1.0]);
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
