//! Vision towers of vision-language checkpoints: the `vision.onnx` part of a VL package,
//! `pixel_values` (+ `image_grid_thw` for Qwen) -> `image_features [num_image_tokens,
//! text_hidden]`, already merged and projected into the text model's embedding space.
//!
//! Every graph is standard ONNX (default domain, opset 24) and computes everything an image
//! needs from its inputs: onnxruntime-genai feeds only what its processor returns and computes
//! none of a tower's index bookkeeping (window permutation, attention windows, rotary ids).
//!
//! [`supported`] refuses, by config key, what a tower does not build before any weight is
//! read; [`build_vision`] builds the tower `multimodal.model_type` names.

mod grid;
pub mod qwen2_5_vl;
pub mod qwen3_vl;
pub mod siglip;

use crate::{Activation, BuildOptions, Checkpoint, DecoderConfig, Error, Multimodal, Result};
use ir::Dim;
use serde_json::{Map, Value};
use std::path::Path;

/// The vision tower's graph input of pixels.
pub const PIXEL_VALUES: &str = "pixel_values";
/// Qwen's `[num_images, 3]` (t, h, w) patch grid of each image.
pub const IMAGE_GRID_THW: &str = "image_grid_thw";
/// The tower's output, one row per image token.
pub const IMAGE_FEATURES: &str = "image_features";

/// The top-level `model_type`s with a vision tower, for error messages.
pub const VISION_MODEL_TYPES: &str = "qwen2_5_vl, qwen3_vl, gemma3";

/// Checks, before anything is built, that this build handles every vision option `config`
/// (a vision-language config.json) sets; the error names the key and its value.
pub fn supported(config: &DecoderConfig) -> Result<()> {
    let mm = multimodal(config)?;
    match mm.model_type.as_str() {
        "qwen2_5_vl" => qwen2_5_vl::QwenVision::read(&config.path, mm, config.hidden_size).map(|_| ()),
        "qwen3_vl" => {
            let v = qwen3_vl::Qwen3Vision::read(&config.path, mm, config.hidden_size)?;
            if v.deepstack.len() > config.num_hidden_layers {
                return Err(Error::Config {
                    path: config.path.clone(),
                    reason: format!(
                        "key `vision_config.deepstack_visual_indexes` lists {} blocks, but the text model has only {} layers to add them after (`text_config.num_hidden_layers`)",
                        v.deepstack.len(),
                        config.num_hidden_layers
                    ),
                });
            }
            Ok(())
        }
        "gemma3" => siglip::Gemma3Vision::read(&config.path, mm, config.hidden_size).map(|_| ()),
        other => Err(unsupported_type(&config.path, other)),
    }
}

/// What the image processor must give the tower, read from `vision_config` with the tower's
/// own defaults: the package's processor settings are checked against it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PixelGeometry {
    /// Qwen: patches of `patch` pixels, `temporal` frames deep, merged `merge` x `merge`.
    Patches { patch: usize, merge: usize, temporal: usize },
    /// SigLIP (Gemma 3): one square image of `side` pixels.
    Square { side: usize },
}

/// The tower's [`PixelGeometry`], after [`supported`]'s checks.
pub fn pixel_geometry(config: &DecoderConfig) -> Result<PixelGeometry> {
    let mm = multimodal(config)?;
    match mm.model_type.as_str() {
        "qwen2_5_vl" => {
            let v = qwen2_5_vl::QwenVision::read(&config.path, mm, config.hidden_size)?;
            Ok(PixelGeometry::Patches { patch: v.patch, merge: v.merge, temporal: v.temporal_patch })
        }
        "qwen3_vl" => {
            let v = qwen3_vl::Qwen3Vision::read(&config.path, mm, config.hidden_size)?;
            Ok(PixelGeometry::Patches { patch: v.patch, merge: v.merge, temporal: v.temporal_patch })
        }
        "gemma3" => Ok(PixelGeometry::Square { side: siglip::Gemma3Vision::read(&config.path, mm, config.hidden_size)?.image_size }),
        other => Err(unsupported_type(&config.path, other)),
    }
}

/// Builds the vision tower of `ckpt` (`vision.onnx`): the graph `multimodal.model_type` names,
/// after [`supported`].
pub fn build_vision(ckpt: &Checkpoint, opts: &BuildOptions) -> Result<ir::Model> {
    supported(&ckpt.config)?;
    if !opts.dtype.is_plan() {
        return Err(Error::Dtype { dtype: opts.dtype, supported: ir::DType::plan_names() });
    }
    match multimodal(&ckpt.config)?.model_type.as_str() {
        "qwen2_5_vl" => qwen2_5_vl::build(ckpt, opts),
        "qwen3_vl" => qwen3_vl::build(ckpt, opts),
        "gemma3" => siglip::build(ckpt, opts),
        other => Err(unsupported_type(&ckpt.config.path, other)),
    }
}

/// How many deepstack feature blocks travel beside the image features (Qwen3-VL: one per
/// `vision_config.deepstack_visual_indexes` entry; 0 for every other tower).
///
/// onnxruntime-genai 0.18 moves exactly one tensor from the vision part to the embedding part
/// (`image_features`) and one from the embedding part to the decoder (`inputs_embeds`), each
/// `decoder.hidden_size` wide. Qwen3-VL's deepstack features therefore ride in the same
/// tensors: `image_features [tokens, hidden * (1 + k)]` holds the merger's output and then the
/// k deepstack mergers' outputs side by side, the embedding part puts them at the image tokens
/// (zeros at text tokens), and the decoder adds block j to its hidden states after layer j.
pub fn deepstack_count(config: &DecoderConfig) -> Result<usize> {
    match &config.multimodal {
        Some(mm) if mm.model_type == "qwen3_vl" => Ok(qwen3_vl::Qwen3Vision::read(&config.path, mm, config.hidden_size)?.deepstack.len()),
        _ => Ok(0),
    }
}

fn multimodal(config: &DecoderConfig) -> Result<&Multimodal> {
    config.multimodal.as_ref().ok_or_else(|| Error::Config {
        path: config.path.clone(),
        reason: format!(
            "model_type `{}` has no `vision_config`: only a vision-language checkpoint ({VISION_MODEL_TYPES}) has a vision tower",
            config.model_type
        ),
    })
}

fn unsupported_type(path: &Path, model_type: &str) -> Error {
    let reason = match model_type {
        "qwen2_vl" => "the Qwen2-VL vision tower (LayerNorm blocks, quick_gelu MLP, no window attention) is not built yet".to_string(),
        _ => "no vision tower is built for it".to_string(),
    };
    Error::UnsupportedModel { path: path.to_path_buf(), model_type: model_type.to_string(), supported: format!("{VISION_MODEL_TYPES} ({reason})") }
}

/// A graph dim: symbolic, unless the `concrete_dims` option fixes it.
pub(crate) fn dim(opts: &BuildOptions, name: &str) -> Dim {
    match opts.concrete_dims.get(name) {
        Some(&v) => Dim::Fixed(v),
        None => Dim::sym(name),
    }
}

/// Typed reads of one JSON object of config.json (`vision_config`, or the top level), every
/// error naming the key as `<scope>.<key>` and its value.
pub(crate) struct Keys<'a> {
    pub path: &'a Path,
    /// `vision_config`, or empty for the top level.
    pub scope: &'static str,
    pub map: &'a Map<String, Value>,
}

impl<'a> Keys<'a> {
    pub fn new(path: &'a Path, scope: &'static str, map: &'a Map<String, Value>) -> Self {
        Keys { path, scope, map }
    }

    /// `key` as the user sees it: `vision_config.depth`.
    pub fn name(&self, key: &str) -> String {
        if self.scope.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.scope)
        }
    }

    pub fn err(&self, reason: String) -> Error {
        Error::Config { path: self.path.to_path_buf(), reason }
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// A positive integer; absent or null -> `default`, and an error when there is none.
    pub fn count(&self, key: &str, default: Option<usize>) -> Result<usize> {
        match self.get(key) {
            None => default.ok_or_else(|| self.err(format!("required key `{}` is missing", self.name(key)))),
            Some(v) => v
                .as_u64()
                .filter(|&x| x > 0 && x <= u32::MAX as u64)
                .map(|x| x as usize)
                .ok_or_else(|| self.err(format!("key `{}` must be a positive integer, found {v}", self.name(key)))),
        }
    }

    /// The first of `keys` present (spellings of one setting, newest first), else `default`.
    pub fn count_of(&self, keys: &[&str], default: Option<usize>) -> Result<usize> {
        match keys.iter().find(|k| self.get(k).is_some()) {
            Some(k) => self.count(k, None),
            None => default.ok_or_else(|| self.err(format!("required key `{}` is missing", self.name(keys[0])))),
        }
    }

    /// A positive finite number; absent or null -> `default`.
    pub fn number(&self, key: &str, default: f64) -> Result<f64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .filter(|x| *x > 0.0 && x.is_finite())
                .ok_or_else(|| self.err(format!("key `{}` must be a positive number, found {v}", self.name(key)))),
        }
    }

    /// A list of non-negative integers; absent or null -> `default`.
    pub fn indexes(&self, key: &str, default: &[usize]) -> Result<Vec<usize>> {
        match self.get(key) {
            None => Ok(default.to_vec()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_u64().filter(|&x| x <= u32::MAX as u64).map(|x| x as usize))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| self.err(format!("key `{}` must be a list of non-negative integers, found {}", self.name(key), Value::Array(items.clone())))),
            Some(v) => Err(self.err(format!("key `{}` must be a list of non-negative integers, found {v}", self.name(key)))),
        }
    }

    /// A boolean; absent or null -> `default`.
    pub fn flag(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| self.err(format!("key `{}` must be true or false, found {v}", self.name(key)))),
        }
    }

    /// A string; absent or null -> `None`.
    pub fn string(&self, key: &str) -> Result<Option<&'a str>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_str().map(Some).ok_or_else(|| self.err(format!("key `{}` must be a string, found {v}", self.name(key)))),
        }
    }

    /// An activation name this build runs; absent or null -> `default`.
    pub fn activation(&self, key: &str, default: Activation) -> Result<Activation> {
        match self.string(key)? {
            None => Ok(default),
            // xIELU's learned scalars belong to Apertus' MLP; no vision tower stores them.
            Some("xielu") => Err(self.err(format!("key `{}` is \"xielu\", whose learned per-layer scalars only Apertus' MLP stores; no vision tower has them", self.name(key)))),
            Some(name) => Activation::parse(name).ok_or_else(|| {
                self.err(format!("key `{}` is \"{name}\", which is not supported; supported: {}", self.name(key), Activation::NAMES))
            }),
        }
    }

    /// The nested object `key`, if present.
    pub fn object(&self, key: &str) -> Result<Option<&'a Map<String, Value>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            Some(v) => Err(self.err(format!("key `{}` must be an object, found {v}", self.name(key)))),
        }
    }

    /// Refuses `key` unless its value (absent: `None`) is one of `allowed`; `why` says what
    /// the tower does instead.
    pub fn only(&self, key: &str, allowed: &[&str], why: &str) -> Result<()> {
        match self.string(key)? {
            Some(v) if !allowed.contains(&v) => Err(self.err(format!(
                "key `{}` is \"{v}\", which this build does not handle ({why}); supported: {}",
                self.name(key),
                allowed.join(", ")
            ))),
            _ => Ok(()),
        }
    }
}

/// The first of `candidates` under which the checkpoint stores `probe` (`<prefix><probe>`):
/// where this checkpoint keeps a tower (transformers 4 and 5 name them differently).
pub(crate) fn find_prefix(ckpt: &Checkpoint, candidates: &[&'static str], probe: &str, what: &str) -> Result<&'static str> {
    candidates.iter().copied().find(|p| ckpt.has(&format!("{p}{probe}"))).ok_or_else(|| Error::MissingTensor {
        path: ckpt.dir.clone(),
        name: format!("{}{probe}", candidates[0]),
        hint: format!(
            "the {what} was looked for as {}; is the checkpoint complete and of the declared model_type?",
            candidates.iter().map(|p| format!("`{p}{probe}`")).collect::<Vec<_>>().join(", ")
        ),
    })
}

/// Fails when a tensor under one of `prefixes` was not read: a tower option this build does
/// not know about (another merger, a pooling head) would otherwise be dropped silently.
pub(crate) fn account_for_prefixes(ckpt: &Checkpoint, prefixes: &[&str]) -> Result<()> {
    let taken = ckpt.taken();
    let left: Vec<String> = ckpt
        .tensor_names()
        .filter(|n| prefixes.iter().any(|p| n.starts_with(p)) && !taken.contains_key(*n))
        .map(str::to_string)
        .collect();
    if left.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = left.iter().take(8).map(String::as_str).collect();
    let more = if left.len() > shown.len() { format!(" and {} more", left.len() - shown.len()) } else { String::new() };
    Err(Error::UnusedTensors {
        path: ckpt.dir.clone(),
        model_type: ckpt.config.multimodal.as_ref().map_or_else(|| ckpt.config.model_type.clone(), |m| format!("{} vision", m.model_type)),
        count: left.len(),
        names: format!("{}{more}", shown.join(", ")),
    })
}

/// The model around a finished tower graph, with the metadata every part carries.
pub(crate) fn finish(mut b: crate::GraphBuilder, ckpt: &Checkpoint) -> Result<ir::Model> {
    let float = b.float;
    let mut graph = std::mem::take(&mut b.graph);
    // Bookkeeping a tower computes for one form and not the other (Qwen's window ids when
    // every block reads padded windows) is not kept.
    graph.remove_dead_nodes();
    graph.toposort()?;
    let mut model = ir::Model { graph, producer: "onnx-tailor".into(), ..Default::default() };
    let model_type = ckpt.config.multimodal.as_ref().map_or_else(|| ckpt.config.model_type.clone(), |m| m.model_type.clone());
    model.metadata.insert("onnx_tailor.model_type".into(), model_type);
    model.metadata.insert("onnx_tailor.part".into(), "vision".into());
    model.metadata.insert("onnx_tailor.dtype".into(), float.to_string());
    Ok(model)
}

#[cfg(test)]
mod tests;
