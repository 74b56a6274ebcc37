//! The embedding part of a vision-language package: `input_ids` [batch, sequence_length] i64
//! and `image_features` [num_image_tokens, hidden] -> `inputs_embeds` [batch,
//! sequence_length, hidden], what its decoder reads. Image token rows take the image
//! features in order (every image's features, batch row by batch row); the others are the
//! token embedding, scaled as the text family scales it (Gemma's sqrt(hidden); image features
//! are not scaled). onnxruntime-genai runs it at every step, with 0 image rows at decode steps.
//! With Qwen3-VL's deepstack blocks both `image_features` and `inputs_embeds` are
//! `hidden * (1 + k)` wide ([`crate::arch::vision::deepstack_count`]).

use crate::tasks::causal_lm::{self, INPUTS_EMBEDS, INPUT_IDS};
use crate::{BuildOptions, Checkpoint, Error, GraphBuilder, Result};
use ir::{DType, Dim, Model};

/// The image features input and the vision part's output.
pub const IMAGE_FEATURES: &str = "image_features";

/// Keys a vision-language config names its image placeholder token by.
const IMAGE_TOKEN_KEYS: &[&str] = &["image_token_id", "image_token_index"];

/// The id of the image placeholder token of a vision-language checkpoint.
pub fn image_token_id(ckpt: &Checkpoint) -> Result<i64> {
    let c = &ckpt.config;
    let m = c.multimodal.as_ref().ok_or_else(|| Error::Config {
        path: c.path.clone(),
        reason: "an embedding part needs a vision-language config.json (with text_config and vision_config)".into(),
    })?;
    let found = IMAGE_TOKEN_KEYS.iter().find_map(|k| m.raw.get(*k).map(|v| (*k, v)));
    match found {
        Some((_, v)) if v.as_i64().is_some_and(|id| id >= 0 && (id as usize) < c.vocab_size) => Ok(v.as_i64().unwrap_or_default()),
        Some((k, v)) => Err(Error::Config { path: c.path.clone(), reason: format!("key `{k}` is {v}: it must be a token id below vocab_size ({})", c.vocab_size) }),
        None => Err(Error::Config { path: c.path.clone(), reason: format!("a vision-language config needs the image token id (key {})", IMAGE_TOKEN_KEYS.join(" or ")) }),
    }
}

/// Builds the embedding part's graph.
pub fn build(ckpt: &Checkpoint, opts: &BuildOptions) -> Result<Model> {
    let c = &ckpt.config;
    let family = causal_lm::family(c)?;
    let image_token = image_token_id(ckpt)?;
    let float = opts.dtype;
    let mut b = GraphBuilder::new("embedding_graph", float);
    let dim = |name: &str| opts.concrete_dims.get(name).map_or_else(|| Dim::sym(name), |&v| Dim::Fixed(v));
    let (batch, seq) = (dim("batch_size"), dim("sequence_length"));
    // Wider than hidden when deepstack blocks ride beside the features (Qwen3-VL).
    let width = c.hidden_size * (1 + crate::arch::vision::deepstack_count(c)?);
    let hidden = Dim::Fixed(width as i64);
    let input_ids = b.input(INPUT_IDS, DType::I64, vec![batch.clone(), seq.clone()]);
    let features = b.input(IMAGE_FEATURES, float, vec![Dim::sym("num_image_tokens"), hidden.clone()]);
    let out = family.build_embedding(&mut b, ckpt, &input_ids, &features, image_token, width)?;
    let last = b.graph.nodes.iter_mut().rev().find(|n| n.outputs.contains(&out)).expect("inputs_embeds has a producer");
    for o in last.outputs.iter_mut().filter(|o| **o == out) {
        *o = INPUTS_EMBEDS.to_string();
    }
    b.output(INPUTS_EMBEDS, float, vec![batch, seq, hidden]);
    let mut graph = b.finish();
    graph.toposort()?;
    let mut model = Model { graph, producer: "onnx-tailor".into(), ..Default::default() };
    model.metadata.insert("onnx_tailor.model_type".into(), c.model_type.clone());
    model.metadata.insert("onnx_tailor.part".into(), "embedding".into());
    model.metadata.insert("onnx_tailor.dtype".into(), float.to_string());
    Ok(model)
}
