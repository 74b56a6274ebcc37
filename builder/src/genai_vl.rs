//! What onnxruntime-genai needs of a vision-language package beyond a decoder's
//! genai_config.json: the model type, the image token ids, the `vision` and `embedding`
//! sections, and `processor_config.json`, the onnxruntime-extensions transform list its image
//! processor runs (never the Hugging Face file of the same name, which transformers 5 writes
//! into the checkpoint). Facts: ../shared/VL_PACKAGES.md (onnxruntime-genai 0.18, observed).

use crate::{Error, Result};
use ir::Graph;
use models::arch::vision::PixelGeometry;
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
                Value::Object(top) if top.contains_key("image_mean") || top.contains_key("image_processor_type") => top,
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

/// Qwen2VLImageProcessor's pixel budget `(min_pixels, max_pixels)` as transformers reads it:
/// `size.shortest_edge` / `size.longest_edge` (transformers 4.50 and later; 4.49 wrote
/// `size.min_pixels` / `size.max_pixels`), else its default, and the top-level `min_pixels` /
/// `max_pixels` (the published Qwen2.5-VL files' spelling) over either.
fn qwen_pixel_budget(p: &Map<String, Value>, bad: &dyn Fn(String) -> Error) -> Result<(i64, i64)> {
    let count = |v: &Value, key: &str| v.as_i64().filter(|n| *n > 0).ok_or_else(|| bad(format!("`{key}` must be a positive whole number (pixels), found {v}")));
    let (mut min, mut max) = QWEN_DEFAULT_PIXELS;
    match p.get("size") {
        None | Some(Value::Null) => {}
        Some(size @ Value::Object(_)) => {
            let pair = [("shortest_edge", "longest_edge"), ("min_pixels", "max_pixels")]
                .into_iter()
                .find(|(lo, hi)| size.get(*lo).is_some() && size.get(*hi).is_some());
            let Some((lo, hi)) = pair else {
                return Err(bad(format!("`size` must give `shortest_edge` and `longest_edge` (the pixel budget), found {size}")));
            };
            (min, max) = (count(&size[lo], &format!("size.{lo}"))?, count(&size[hi], &format!("size.{hi}"))?);
        }
        Some(v) => return Err(bad(format!("`size` must be an object, found {v}"))),
    }
    for (key, slot) in [("min_pixels", &mut min), ("max_pixels", &mut max)] {
        if let Some(v) = p.get(key).filter(|v| !v.is_null()) {
            *slot = count(v, key)?;
        }
    }
    if min > max {
        return Err(bad(format!("the pixel budget's minimum {min} is above its maximum {max}")));
    }
    Ok((min, max))
}

/// transformers' image processors' defaults where the checkpoint's settings leave a key out:
/// `rescale_factor` (both), Qwen2VLImageProcessor's patch geometry and pixel budget
/// (`size = {shortest_edge: 56*56, longest_edge: 28*28*1280}`), and each one's mean and std
/// (OpenAI CLIP's for Qwen, 0.5 for Gemma3ImageProcessor).
const DEFAULT_RESCALE: f64 = 1.0 / 255.0;
const QWEN_DEFAULT_PIXELS: (i64, i64) = (56 * 56, 28 * 28 * 1280);
const QWEN_DEFAULT_GEOMETRY: (i64, i64, i64) = (14, 2, 2);
const CLIP_MEAN: [f64; 3] = [0.48145466, 0.4578275, 0.40821073];
const CLIP_STD: [f64; 3] = [0.26862954, 0.26130258, 0.27577711];
const HALF: [f64; 3] = [0.5, 0.5, 0.5];

/// `processor_config.json` in onnxruntime-extensions form, from the checkpoint's image
/// processor settings (transformers' defaults for the keys they leave out), checked against
/// the tower's `geometry`: a processor that cuts other patches or sizes than the tower reads
/// would fail at run time, so it is refused here, naming both keys.
pub(crate) fn processor_config(dir: &Path, m: &Multimodal, geometry: PixelGeometry) -> Result<Value> {
    let kind = VlType::of(m).ok_or_else(|| Error::Request(format!("processor_config.json: no image processor for model_type `{}`", m.model_type)))?;
    let (path, p) = hf_image_processor(dir)?;
    let bad = |reason: String| Error::Config { path: path.clone(), reason };
    let number = |key: &str, default: f64| -> Result<f64> {
        match p.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v.as_f64().filter(|x| x.is_finite() && *x > 0.0).ok_or_else(|| bad(format!("`{key}` must be a positive number, found {v}"))),
        }
    };
    let whole = |key: &str, default: i64| -> Result<i64> {
        match p.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v
                .as_f64()
                .filter(|x| *x > 0.0 && x.fract() == 0.0 && *x < i64::MAX as f64)
                .map(|x| x as i64)
                .ok_or_else(|| bad(format!("`{key}` must be a positive whole number, found {v}"))),
        }
    };
    // How a key's value is named in a message: a default is said to be one.
    let given = |key: &str, value: i64| match p.get(key) {
        None | Some(Value::Null) => format!("`{key}` is {value} (absent: transformers' default)"),
        Some(_) => format!("`{key}` is {value}"),
    };
    // The transforms below always resize, rescale and normalize, as these processors do by
    // default; a checkpoint that turns one off would be fed other pixels than it expects.
    for key in ["do_resize", "do_rescale", "do_normalize"] {
        if p.get(key) == Some(&Value::Bool(false)) {
            return Err(bad(format!("`{key}` is false; the package's image processor always does that step (as transformers does by default), so it would not feed this model the pixels it expects")));
        }
    }
    // Gemma 3's pan and scan adds crops of a wide image as more images; genai feeds one.
    if p.get("do_pan_and_scan") == Some(&Value::Bool(true)) {
        return Err(bad("`do_pan_and_scan` is true; the package's image processor gives the model one image per image, not its crops".into()));
    }
    let op = |name: &str, kind: &str, attrs: Value| json!({ "operation": { "name": name, "type": kind, "attrs": attrs } });
    let (default_mean, default_std) = if kind == VlType::Gemma3 { (HALF, HALF) } else { (CLIP_MEAN, CLIP_STD) };
    let mean = p.get("image_mean").filter(|v| !v.is_null()).cloned().unwrap_or_else(|| json!(default_mean));
    let std = p.get("image_std").filter(|v| !v.is_null()).cloned().unwrap_or_else(|| json!(default_std));
    let rescale = number("rescale_factor", DEFAULT_RESCALE)?;
    let transforms = match kind {
        VlType::Qwen25Vl | VlType::Qwen3Vl => {
            let (min_pixels, max_pixels) = qwen_pixel_budget(&p, &bad)?;
            let (patch, merge, temporal) = (
                whole("patch_size", QWEN_DEFAULT_GEOMETRY.0)?,
                whole("merge_size", QWEN_DEFAULT_GEOMETRY.1)?,
                whole("temporal_patch_size", QWEN_DEFAULT_GEOMETRY.2)?,
            );
            let PixelGeometry::Patches { patch: tower_patch, merge: tower_merge, temporal: tower_temporal } = geometry else {
                return Err(Error::Request(format!("model_type `{}`: its tower does not read patches", m.model_type)));
            };
            for (key, here, tower_key, tower) in [
                ("patch_size", patch, "patch_size", tower_patch),
                ("merge_size", merge, "spatial_merge_size", tower_merge),
                ("temporal_patch_size", temporal, "temporal_patch_size", tower_temporal),
            ] {
                if here as usize != tower {
                    return Err(bad(format!("{} but config.json's `vision_config.{tower_key}` is {tower}: the processor must cut the patches the vision tower reads", given(key, here))));
                }
            }
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
            let size = p.get("size").ok_or_else(|| bad("the image processor settings lack `size` (the height and width images are resized to)".into()))?;
            let side = |k: &str| size.get(k).and_then(Value::as_i64).ok_or_else(|| bad(format!("`size.{k}` must be a whole number")));
            let (width, height) = (side("width")?, side("height")?);
            let PixelGeometry::Square { side: tower } = geometry else {
                return Err(Error::Request(format!("model_type `{}`: its tower does not read square images", m.model_type)));
            };
            if width as usize != tower || height as usize != tower {
                return Err(bad(format!("`size` is {width}x{height} but config.json's `vision_config.image_size` is {tower}: the processor must give the tower the image size it reads")));
            }
            // No ConvertRGB here: with it, genai 0.18's Gemma path gave BGR channels.
            vec![
                op("decode_image", "DecodeImage", json!({ "color_space": "RGB" })),
                op("resize", "Resize", json!({ "width": width, "height": height, "interpolation": "LINEAR", "keep_aspect_ratio": 0 })),
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
