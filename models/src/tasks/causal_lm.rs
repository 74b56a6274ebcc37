//! `causal-lm`: a decoder with an external KV cache, compatible with onnxruntime-genai.
//!
//! Inputs: `input_ids` [batch, sequence_length] i64, `attention_mask` [batch,
//! total_sequence_length] i64, `position_ids` [batch, sequence_length] i64,
//! `past_key_values.N.key/.value` [batch, kv_heads, past_sequence_length, head_dim].
//! Outputs: `logits` [batch, sequence_length, vocab], `present.N.key/.value` [batch, kv_heads,
//! total_sequence_length, head_dim]. With a static cache (`KvCache::Static`) the past and
//! present caches are both [batch, kv_heads, max_length, head_dim].

use crate::arch::{self, DecoderIo};
use crate::{BuildOptions, Checkpoint, Error, GraphBuilder, Result};
use ir::{DType, Dim, Model};

pub const INPUT_IDS: &str = "input_ids";
pub const ATTENTION_MASK: &str = "attention_mask";
pub const POSITION_IDS: &str = "position_ids";
pub const LOGITS: &str = "logits";

pub fn past_key(i: usize) -> String {
    format!("past_key_values.{i}.key")
}
pub fn past_value(i: usize) -> String {
    format!("past_key_values.{i}.value")
}
pub fn present_key(i: usize) -> String {
    format!("present.{i}.key")
}
pub fn present_value(i: usize) -> String {
    format!("present.{i}.value")
}

/// A graph dim: symbolic, unless the `concrete_dims` option fixes it.
fn dim(opts: &BuildOptions, name: &str) -> Dim {
    match opts.concrete_dims.get(name) {
        Some(&v) => Dim::Fixed(v),
        None => Dim::sym(name),
    }
}

/// The decoder family that builds `c`'s `model_type`, or an error listing the supported ones
/// (checked before the build announces a graph it cannot make).
pub fn family(c: &crate::DecoderConfig) -> Result<&'static arch::DecoderFamily> {
    arch::decoder_for(&c.model_type).ok_or_else(|| Error::UnsupportedModel {
        path: c.path.clone(),
        model_type: c.model_type.clone(),
        supported: arch::supported_model_types().join(", "),
    })
}

/// `inputs_embeds` [batch, sequence_length, hidden]: what a vision-language package's
/// embedding part gives its decoder.
pub const INPUTS_EMBEDS: &str = "inputs_embeds";

/// What the decoder starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenInput {
    /// `input_ids`, gathered from the decoder's own embedding table.
    Ids,
    /// `inputs_embeds`, made by a separate embedding part.
    Embeds,
}

/// Builds the generic causal-LM graph of `ckpt` on `input_ids`.
pub fn build(ckpt: &Checkpoint, opts: &BuildOptions) -> Result<Model> {
    build_with(ckpt, opts, TokenInput::Ids)
}

/// Builds the generic causal-LM graph of `ckpt` starting from `input`. With multimodal RoPE
/// (`mrope_section`), `position_ids` is `[3, batch, sequence_length]`.
pub fn build_with(ckpt: &Checkpoint, opts: &BuildOptions, input: TokenInput) -> Result<Model> {
    let c = &ckpt.config;
    let family = family(c)?;
    if !opts.dtype.is_plan() {
        return Err(Error::Dtype {
            dtype: opts.dtype,
            supported: DType::plan_names(),
        });
    }
    if let Some(n) = opts.kv_cache.max_length() {
        // Positions index the RoPE tables (max_position_embeddings rows) and a step needs a slot.
        if n == 0 || n > c.max_position_embeddings {
            return Err(Error::Config {
                path: c.path.clone(),
                reason: format!(
                    "a static KV cache of {n} slots: max_length must be between 1 and max_position_embeddings ({}); pass a --max-length in that range",
                    c.max_position_embeddings
                ),
            });
        }
    }
    let float = opts.dtype;
    // Deepstack blocks arrive only through an embedding part's `inputs_embeds`.
    let deepstack = match input {
        TokenInput::Embeds => crate::arch::vision::deepstack_count(c)?,
        TokenInput::Ids => 0,
    };
    let mut b = GraphBuilder::new("main_graph", float);
    b.lora = opts.lora.clone();
    let (batch, seq, total, past) =
        (dim(opts, "batch_size"), dim(opts, "sequence_length"), dim(opts, "total_sequence_length"), dim(opts, "past_sequence_length"));
    // A static cache has one fixed length for past and present alike.
    let (past, total_kv) = match opts.kv_cache.max_length() {
        Some(n) => (Dim::Fixed(n as i64), Dim::Fixed(n as i64)),
        None => (past, total.clone()),
    };
    let kv = |len: &Dim| vec![batch.clone(), Dim::Fixed(c.num_key_value_heads as i64), len.clone(), Dim::Fixed(c.head_dim as i64)];

    let (input_ids, inputs_embeds) = match input {
        TokenInput::Ids => (b.input(INPUT_IDS, DType::I64, vec![batch.clone(), seq.clone()]), None),
        TokenInput::Embeds => {
            let width = c.hidden_size * (1 + deepstack);
            let e = b.input(INPUTS_EMBEDS, float, vec![batch.clone(), seq.clone(), Dim::Fixed(width as i64)]);
            (e.clone(), Some(e))
        }
    };
    let attention_mask = b.input(ATTENTION_MASK, DType::I64, vec![batch.clone(), total.clone()]);
    let position_dims = match c.mrope {
        Some(_) => vec![Dim::Fixed(3), batch.clone(), seq.clone()],
        None => vec![batch.clone(), seq.clone()],
    };
    let position_ids = b.input(POSITION_IDS, DType::I64, position_dims);
    let mut io_past = Vec::new();
    let mut io_present = Vec::new();
    for i in 0..c.num_hidden_layers {
        let k = b.input(&past_key(i), float, kv(&past));
        let v = b.input(&past_value(i), float, kv(&past));
        io_past.push((k, v));
        io_present.push((present_key(i), present_value(i)));
    }
    let io = DecoderIo {
        input_ids,
        inputs_embeds,
        attention_mask,
        position_ids,
        past: io_past,
        present: io_present.clone(),
        tied_head: opts.tied_head,
        kv_cache: opts.kv_cache,
        deepstack,
    };
    let logits = arch::build_decoder(family, &mut b, ckpt, &io)?;

    // Name the logits output exactly, then declare every output with its type.
    let last = b.graph.nodes.iter_mut().rev().find(|n| n.outputs.contains(&logits)).expect("logits has a producer");
    for o in last.outputs.iter_mut().filter(|o| **o == logits) {
        *o = LOGITS.to_string();
    }
    b.output(LOGITS, float, vec![batch.clone(), seq.clone(), Dim::Fixed(c.vocab_size as i64)]);
    for (k, v) in &io_present {
        b.output(k, float, kv(&total_kv));
        b.output(v, float, kv(&total_kv));
    }
    let mut graph = b.finish();
    graph.toposort()?;
    let mut model = Model { graph, producer: "onnx-tailor".into(), ..Default::default() };
    model.metadata.insert("onnx_tailor.model_type".into(), c.model_type.clone());
    model.metadata.insert("onnx_tailor.task".into(), "causal-lm".into());
    model.metadata.insert("onnx_tailor.dtype".into(), float.to_string());
    if let Some(n) = opts.kv_cache.max_length() {
        model.metadata.insert("onnx_tailor.kv_cache".into(), format!("static max_length={n}"));
    }
    Ok(model)
}
