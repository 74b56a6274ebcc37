//! `feature-extraction` and `sentence-embedding`: a bidirectional encoder without a cache.
//!
//! Inputs: `input_ids` and `attention_mask` [batch, sequence_length] i64, and
//! `token_type_ids` [batch, sequence_length] i64 when the model has more than one token type
//! (`type_vocab_size` > 1, BERT). Outputs: `last_hidden_state` [batch, sequence_length,
//! hidden]; with `sentence-embedding` also `sentence_embedding` [batch, hidden x modes],
//! pooled over the tokens `attention_mask` keeps (and L2-normalized when the checkpoint lists
//! a Normalize module).

use super::pooling::{PoolingMode, SentencePooling};
use crate::arch::{self, EncoderIo};
use crate::{BuildOptions, Checkpoint, Error, GraphBuilder, Result};
use ir::{Attr, DType, Dim, Model, Recipe};

pub const INPUT_IDS: &str = "input_ids";
pub const ATTENTION_MASK: &str = "attention_mask";
pub const TOKEN_TYPE_IDS: &str = "token_type_ids";
pub const LAST_HIDDEN_STATE: &str = "last_hidden_state";
pub const SENTENCE_EMBEDDING: &str = "sentence_embedding";

/// A graph dim: symbolic, unless the `concrete_dims` option fixes it.
fn dim(opts: &BuildOptions, name: &str) -> Dim {
    match opts.concrete_dims.get(name) {
        Some(&v) => Dim::Fixed(v),
        None => Dim::sym(name),
    }
}

/// The encoder family that builds `c`'s `model_type`, or an error listing the encoders.
pub fn family(c: &crate::DecoderConfig) -> Result<&'static arch::EncoderFamily> {
    arch::encoder_for(&c.model_type).ok_or_else(|| Error::UnsupportedModel {
        path: c.path.clone(),
        model_type: c.model_type.clone(),
        supported: arch::encoder_model_types().join(", "),
    })
}

/// Builds the generic encoder graph of `ckpt`; with `pooling`, the `sentence_embedding`
/// output too.
pub fn build(ckpt: &Checkpoint, opts: &BuildOptions, pooling: Option<&SentencePooling>) -> Result<Model> {
    let c = &ckpt.config;
    let family = family(c)?;
    if !opts.dtype.is_plan() {
        return Err(Error::Dtype { dtype: opts.dtype, supported: ir::DType::plan_names() });
    }
    let float = opts.dtype;
    let mut b = GraphBuilder::new("main_graph", float);
    let (batch, seq) = (dim(opts, "batch_size"), dim(opts, "sequence_length"));
    let tokens = vec![batch.clone(), seq.clone()];
    let input_ids = b.input(INPUT_IDS, DType::I64, tokens.clone());
    let attention_mask = b.input(ATTENTION_MASK, DType::I64, tokens.clone());
    // Token types are an input only when there is more than one: BERT tokenizers return them
    // (and optimum exports them as a required input), RoBERTa's have one type and return none.
    let token_type_ids =
        if arch::type_vocab_size(c)? > 1 { Some(b.input(TOKEN_TYPE_IDS, DType::I64, tokens.clone())) } else { None };
    let io = EncoderIo { input_ids, attention_mask: attention_mask.clone(), token_type_ids };
    let hidden = family.build(&mut b, ckpt, &io)?;

    let last = b.graph.nodes.iter_mut().rev().find(|n| n.outputs.contains(&hidden)).expect("the encoder output has a producer");
    for o in last.outputs.iter_mut().filter(|o| **o == hidden) {
        *o = LAST_HIDDEN_STATE.to_string();
    }
    b.output(LAST_HIDDEN_STATE, float, vec![batch.clone(), seq.clone(), Dim::Fixed(c.hidden_size as i64)]);
    let task = match pooling {
        None => "feature-extraction",
        Some(p) => {
            let pooled = pool(&mut b, LAST_HIDDEN_STATE, &attention_mask, p);
            let last = b.graph.nodes.iter_mut().rev().find(|n| n.outputs.contains(&pooled)).expect("the pooled vector has a producer");
            for o in last.outputs.iter_mut().filter(|o| **o == pooled) {
                *o = SENTENCE_EMBEDDING.to_string();
            }
            b.output(SENTENCE_EMBEDDING, float, vec![batch.clone(), Dim::Fixed(p.width(c.hidden_size) as i64)]);
            "sentence-embedding"
        }
    };
    let mut graph = b.finish();
    graph.toposort()?;
    let mut model = Model { graph, producer: "onnx-tailor".into(), ..Default::default() };
    model.metadata.insert("onnx_tailor.model_type".into(), c.model_type.clone());
    model.metadata.insert("onnx_tailor.task".into(), task.into());
    model.metadata.insert("onnx_tailor.dtype".into(), float.to_string());
    if let Some(p) = pooling {
        let modes: Vec<&str> = p.modes.iter().map(|m| m.key()).collect();
        model.metadata.insert("onnx_tailor.pooling".into(), format!("{}{}", modes.join("+"), if p.normalize { " then L2 normalize" } else { "" }));
    }
    Ok(model)
}

/// A float scalar constant in the graph's dtype.
fn scalar(b: &mut GraphBuilder, name: &str, value: f32) -> String {
    b.initializer(name, Recipe::from_f32(format!("{name} = {value}"), vec![], &[value]).cast(b.float))
}

/// The sentence vector `[batch, hidden x modes]` from `h` `[batch, seq, hidden]`, as
/// sentence-transformers' Pooling (and Normalize) modules compute it.
fn pool(b: &mut GraphBuilder, h: &str, attention_mask: &str, p: &SentencePooling) -> String {
    let s = "pooling";
    let to = |d: DType| vec![Attr::int("to", d.to_onnx() as i64)];
    let axes2 = b.const_i64_1d(&format!("{s}/axis2"), &[2]);
    let axis1 = b.const_i64_1d(&format!("{s}/axis1"), &[1]);
    let mask3 = b.op(&format!("{s}/mask_3d"), "Unsqueeze", &[attention_mask, &axes2], vec![]);
    let reduce = |b: &mut GraphBuilder, name: &str, op: &str, x: &str| b.op(&format!("{s}/{name}"), op, &[x, &axis1], vec![Attr::int("keepdims", 0)]);
    let mut parts = Vec::new();
    let mut sum_and_count: Option<(String, String)> = None;
    for mode in &p.modes {
        let part = match mode {
            PoolingMode::Cls => {
                let first = b.const_i64(&format!("{s}/first_token"), &[0]);
                b.op(&format!("{s}/cls"), "Gather", &[h, &first], vec![Attr::int("axis", 1)])
            }
            PoolingMode::Max => {
                let keep = b.op(&format!("{s}/keep"), "Cast", &[&mask3], to(DType::Bool));
                // sentence-transformers' -1e9, or f16's lowest (the masked tokens only need to
                // lose to every real value; -1e9 is past f16's range).
                let floor = scalar(b, &format!("{s}/masked_value"), if b.float == DType::F16 { half::f16::MIN.to_f32() } else { -1e9 });
                let masked = b.op(&format!("{s}/masked"), "Where", &[&keep, h, &floor], vec![]);
                reduce(b, "max", "ReduceMax", &masked)
            }
            PoolingMode::Mean | PoolingMode::MeanSqrtLen => {
                let (sum, count) = match &sum_and_count {
                    Some(pair) => pair.clone(),
                    None => {
                        let weights = b.op(&format!("{s}/mask_float"), "Cast", &[&mask3], to(b.float));
                        let kept = b.op(&format!("{s}/kept"), "Mul", &[h, &weights], vec![]);
                        let sum = reduce(b, "sum", "ReduceSum", &kept);
                        let count = reduce(b, "count", "ReduceSum", &weights);
                        // sentence-transformers clamps the count to at least 1e-9; adding 1e-9
                        // is the same in f32 (a count of 1 or more absorbs it, 0 becomes
                        // 1e-9) with ops every EP table claims (not every EP registers Max).
                        let min = scalar(b, &format!("{s}/min_count"), 1e-9);
                        let count = b.op(&format!("{s}/count_clamped"), "Add", &[&count, &min], vec![]);
                        sum_and_count = Some((sum.clone(), count.clone()));
                        (sum, count)
                    }
                };
                if *mode == PoolingMode::Mean {
                    b.op(&format!("{s}/mean"), "Div", &[&sum, &count], vec![])
                } else {
                    let root = b.op(&format!("{s}/sqrt_count"), "Sqrt", &[&count], vec![]);
                    b.op(&format!("{s}/mean_sqrt_len"), "Div", &[&sum, &root], vec![])
                }
            }
        };
        parts.push(part);
    }
    let mut v = if parts.len() == 1 {
        parts.remove(0)
    } else {
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        b.op(&format!("{s}/Concat"), "Concat", &refs, vec![Attr::int("axis", -1)])
    };
    if p.normalize {
        let s = "normalize";
        let last = b.const_i64_1d(&format!("{s}/axis"), &[-1]);
        // torch's normalize divides by max(||v||, 1e-12); sqrt(sum(v^2) + 1e-24) is the same in
        // f32 for any vector (a sum of squares above 1e-17 absorbs 1e-24; zero gives 1e-12), in
        // ops every table claims (no ReduceL2 or Max claims are needed).
        let squares = b.op(&format!("{s}/Mul"), "Mul", &[&v, &v], vec![]);
        let sum = b.op(&format!("{s}/ReduceSum"), "ReduceSum", &[&squares, &last], vec![Attr::int("keepdims", 1)]);
        let eps = scalar(b, &format!("{s}/eps_squared"), 1e-24);
        let sum = b.op(&format!("{s}/Add"), "Add", &[&sum, &eps], vec![]);
        let norm = b.op(&format!("{s}/Sqrt"), "Sqrt", &[&sum], vec![]);
        v = b.op(&format!("{s}/Div"), "Div", &[&v, &norm], vec![]);
    }
    v
}
