//! What onnxruntime-genai needs of a vision-language package beyond a decoder's
//! genai_config.json: the model type, the image token ids, the `vision` and `embedding`
//! sections, and `processor_config.json`, the onnxruntime-extensions transform list its image
//! processor runs (never the Hugging Face file of the same name, which transformers 5 writes
//! into the checkpoint). Facts: ../shared/VL_PACKAGES.md (onnxruntime-genai 0.18, observed).

use crate::{Error, Result};
use ir::Graph;
use models::Multimodal;
use serde_json::{json, Map, Value};
use std::path::Path;

/// The file genai's vision section names for its image processor's transforms.
pub(crate) const PROCESSOR_CONFIG: &str = "processor_config.json";

/// Hugging Face files that hold the image processor's settings, newest spelling first
/// (transformers 5 writes `processor_config.json` with an `image_processor` object; older
/// checkpoints `preprocessor_config.json` with the settings at the top level).
const HF_PROCESSOR_FILES: &[&str] = &["processor_config.json", "preprocessor_config.json"];

/// The vision-language families genai 0.18 runs, by the checkpoint's own model type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum VlType {
    Qwen25Vl,
    Qwen3Vl,
    Gemma3,
}

impl VlType {
    fn of(m: &Multimodal) -> Option<VlType> {
        match m.model_type.as_str() {
            "qwen2_5_vl" => Some(VlType::Qwen25Vl),
            "qwen3_vl" => Some(VlType::Qwen3Vl),
            "gemma3" => Some(VlType::Gemma3),
            _ => None,
        }
    }

    /// genai's Qwen path (3-D mRoPE ids, `image_grid_thw`, the vision start/video token ids).
    fn is_qwen(self) -> bool {
        matches!(self, VlType::Qwen25Vl | VlType::Qwen3Vl)
    }
}

fn int(raw: &Map<String, Value>, keys: &[&str]) -> Option<i64> {
    keys.iter().find_map(|k| raw.get(*k).and_then(Value::as_i64))
}

/// Turns a decoder's genai_config.json into the vision-language package's: `model.type`, the
/// token ids genai's processors need, and the `vision` / `embedding` sections naming the parts'
/// files and the vision graph's inputs. `decoder.hidden_size` becomes the width of the vision
/// graph's `image_features`: genai sizes both the features and the `inputs_embeds` buffers by
/// it, and a Qwen3-VL tower's features carry the deepstack blocks beside them
/// (`models::arch::vision::deepstack_count`).
pub(crate) fn extend_config(config: &mut Value, m: &Multimodal, vision_file: &str, vision: &Graph, embedding_file: &str) -> Result<()> {
    let kind = VlType::of(m).ok_or_else(|| Error::Request(format!("genai_config.json: no onnxruntime-genai model type for vision-language model_type `{}`", m.model_type)))?;
    let model = config.get_mut("model").and_then(Value::as_object_mut).expect("genai_config.json has a model object");
    model.insert("type".into(), json!(m.model_type));
    if let Some(id) = int(&m.raw, &["image_token_id", "image_token_index"]) {
        model.insert("image_token_id".into(), json!(id));
    }
    let mut inputs = Map::new();
    for name in ["pixel_values", "image_grid_thw"] {
        if vision.inputs.iter().any(|v| v.name == name) {
            inputs.insert(name.into(), json!(name));
        }
    }
    let mut section = json!({
        "filename": vision_file,
        "config_filename": PROCESSOR_CONFIG,
        "inputs": inputs,
        "outputs": { "image_features": "image_features" },
    });
    let width = vision.outputs.iter().find(|o| o.name == "image_features").and_then(|o| o.shape.as_ref()).and_then(|s| s.last()).and_then(|d| match d {
        ir::Dim::Fixed(n) => Some(*n),
        _ => None,
    });
    let width = width.ok_or_else(|| Error::Request("genai_config.json: the vision part has no image_features output of a fixed width".into()))?;
    if let Some(d) = model.get_mut("decoder").and_then(Value::as_object_mut) {
        d.insert("hidden_size".into(), json!(width));
    }
    if kind.is_qwen() {
        for (key, genai_key) in [("video_token_id", "video_token_id"), ("vision_start_token_id", "vision_start_token_id")] {
            if let Some(id) = int(&m.raw, &[key]) {
                model.insert(genai_key.into(), json!(id));
            }
        }
        let v = section.as_object_mut().expect("object");
        // Qwen3-VL has no windows: its config has no window_size, so none is written.
        for key in ["spatial_merge_size", "patch_size", "window_size"] {
            if let Some(n) = m.vision.get(key) {
                v.insert(key.into(), n.clone());
            }
        }
        if let Some(t) = m.vision.get("tokens_per_second").and_then(Value::as_f64) {
            v.insert("tokens_per_second".into(), json!(t));
        }
    }
    model.insert("vision".into(), section);
    model.insert(
        "embedding".into(),
        json!({
            "filename": embedding_file,
            "inputs": { "input_ids": "input_ids", "image_features": "image_features" },
            "outputs": { "inputs_embeds": "inputs_embeds" },
        }),
    );
    Ok(())
}

/// The checkpoint's image processor settings (`image_processor` of processor_config.json, or
/// preprocessor_config.json's top level), and which file they came from.
fn hf_image_processor(dir: &Path) -> Result<(std::path::PathBuf, Map<String, Value>)> {
    for name in HF_PROCESSOR_FILES {
        let path = dir.join(name);
        if !ir::regular_file(&path)? {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let value: Value = serde_json::from_str(&text).map_err(|e| Error::Config { path: path.clone(), reason: format!("not valid JSON: {e}") })?;
        let settings = match value.get("image_processor") {
            Some(Value::Object(p)) => p.clone(),
            _ => match value {
                Value::Object(top) if top.contains_key("image_mean") => top,
                _ => continue,
            },
        };
        return Ok((path, settings));
    }
    Err(Error::Config {
        path: dir.join(HF_PROCESSOR_FILES[0]),
        reason: format!("a vision-language package needs the checkpoint's image processor settings ({}); none holds them", HF_PROCESSOR_FILES.join(" or ")),
    })
}

/// `processor_config.json` in onnxruntime-extensions form, from the checkpoint's image
/// processor settings.
pub(crate) fn processor_config(dir: &Path, m: &Multimodal) -> Result<Value> {
    let kind = VlType::of(m).ok_or_else(|| Error::Request(format!("processor_config.json: no image processor for model_type `{}`", m.model_type)))?;
    let (path, p) = hf_image_processor(dir)?;
    let need = |key: &str| -> Result<&Value> { p.get(key).ok_or_else(|| Error::Config { path: path.clone(), reason: format!("the image processor settings lack `{key}`") }) };
    let number = |key: &str| -> Result<f64> {
        need(key)?.as_f64().ok_or_else(|| Error::Config { path: path.clone(), reason: format!("`{key}` must be a number") })
    };
    let op = |name: &str, kind: &str, attrs: Value| json!({ "operation": { "name": name, "type": kind, "attrs": attrs } });
    let mean = need("image_mean")?.clone();
    let std = need("image_std")?.clone();
    let rescale = number("rescale_factor")?;
    let transforms = match kind {
        VlType::Qwen25Vl | VlType::Qwen3Vl => {
            let size = need("size")?;
            let edge = |k: &str| size.get(k).and_then(Value::as_i64).ok_or_else(|| Error::Config { path: path.clone(), reason: format!("`size.{k}` must be a whole number (the pixel budget)") });
            let (min_pixels, max_pixels) = (edge("shortest_edge")?, edge("longest_edge")?);
            let (patch, merge, temporal) = (number("patch_size")? as i64, number("merge_size")? as i64, number("temporal_patch_size")? as i64);
            vec![
                op("decode_image", "DecodeImage", json!({ "color_space": "RGB" })),
                json!({ "operation": { "name": "convert_to_rgb", "type": "ConvertRGB" } }),
                op("resize", "Resize", json!({ "smart_resize": 1, "min_pixels": min_pixels, "max_pixels": max_pixels, "patch_size": patch, "merge_size": merge })),
                op("rescale", "Rescale", json!({ "rescale_factor": rescale })),
                op("normalize", "Normalize", json!({ "mean": mean, "std": std, "qwen2_5_vl": 1 })),
                op("patch_image", "PatchImage", json!({ "patch_size": patch, "temporal_patch_size": temporal, "merge_size": merge })),
            ]
        }
        VlType::Gemma3 => {
            let size = need("size")?;
            let side = |k: &str| size.get(k).and_then(Value::as_i64).ok_or_else(|| Error::Config { path: path.clone(), reason: format!("`size.{k}` must be a whole number") });
            // No ConvertRGB here: with it, genai 0.18's Gemma path gave BGR channels.
            vec![
                op("decode_image", "DecodeImage", json!({ "color_space": "RGB" })),
                op("resize", "Resize", json!({ "width": side("width")?, "height": side("height")?, "interpolation": "LINEAR", "keep_aspect_ratio": 0 })),
                op("rescale", "Rescale", json!({ "rescale_factor": rescale })),
                op("normalize", "Normalize", json!({ "mean": mean, "std": std })),
                op("permute", "Permute3D", json!({ "dims": [2, 0, 1] })),
            ]
        }
    };
    let name = match kind {
        VlType::Qwen25Vl | VlType::Qwen3Vl => "qwen2_5_image_processor",
        VlType::Gemma3 => "gemma_3_image_processing",
    };
    Ok(json!({ "processor": { "name": name, "transforms": transforms } }))
}
