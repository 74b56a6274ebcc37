//! The one generic encoder builder (BERT-style: post-LayerNorm blocks, learned absolute
//! positions, token types), reading an [`EncoderFamily`] table and the config. No family has
//! code of its own: BERT and RoBERTa differ only in their table's [`EncoderPositions`].

use super::family::Unused;
use crate::components::attention::{bidirectional_attention, Heads};
use crate::components::linear::{linear, LinearWeights};
use crate::components::mask::key_padding_mask;
use crate::components::mlp::activation;
use crate::components::norm::layer_norm;
use crate::{Activation, Checkpoint, Error, GraphBuilder, Result};
use ir::{Attr, DType};

/// One declarative description of an encoder-only family.
pub struct EncoderFamily {
    /// `model_type` values in config.json that this table builds.
    pub model_types: &'static [&'static str],
    pub names: EncoderNames,
    pub positions: EncoderPositions,
    /// A prefix of the table's names that checkpoints saved from a task model carry
    /// (`bert.` in `BertForMaskedLM`) and bare ones (`BertModel`, sentence-transformers) omit.
    pub optional_prefix: Option<&'static str>,
    /// Checkpoint tensors the graph deliberately does not read, matched by name suffix.
    pub unused: &'static [Unused],
}

/// Checkpoint tensor names: model-level ones in full, per-layer ones relative to `layer`
/// (which holds `{i}`); norms and projections are scopes (`.weight`, `.bias` appended).
pub struct EncoderNames {
    pub word_embeddings: &'static str,
    pub position_embeddings: &'static str,
    pub token_type_embeddings: &'static str,
    pub embeddings_norm: &'static str,
    pub layer: &'static str,
    pub query: &'static str,
    pub key: &'static str,
    pub value: &'static str,
    pub attention_output: &'static str,
    /// The LayerNorm after the attention's residual add.
    pub attention_norm: &'static str,
    pub intermediate: &'static str,
    pub output: &'static str,
    /// The LayerNorm after the MLP's residual add.
    pub output_norm: &'static str,
}

/// Where the learned position embeddings are gathered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncoderPositions {
    /// `0 .. sequence_length` for every row (BERT's `position_ids` buffer).
    Absolute,
    /// RoBERTa's `create_position_ids_from_input_ids`: a token that is not `pad_token_id`
    /// gets `padding_idx + its count of non-pad tokens so far` (the first real token
    /// `padding_idx + 1`), a pad token gets `padding_idx`; `padding_idx` is config.json's
    /// `pad_token_id` (transformers' default for RoBERTa: 1).
    PaddingOffset { default_pad: i64 },
}

/// The graph inputs an encoder reads, named by the task.
pub struct EncoderIo {
    pub input_ids: String,
    pub attention_mask: String,
    /// `None` when the model has one token type (`type_vocab_size` 1): its row is added as a
    /// constant and the tokenizer's token types are not an input.
    pub token_type_ids: Option<String>,
}

/// `type_vocab_size` (transformers' default 2 for BERT; RoBERTa configs write 1).
pub fn type_vocab_size(c: &crate::DecoderConfig) -> Result<usize> {
    Ok(c.count("type_vocab_size")?.unwrap_or(2))
}

impl EncoderFamily {
    /// Builds embeddings and every layer; returns `last_hidden_state` `[batch, seq, hidden]`.
    pub fn build(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, io: &EncoderIo) -> Result<String> {
        let c = &ckpt.config;
        ckpt.set_optional_prefix(None);
        let n = &self.names;
        // Graph names are the checkpoint's: with the task model's prefix when it has one.
        let prefix = self.optional_prefix.filter(|p| ckpt.tensor_names().any(|t| t.starts_with(p))).unwrap_or("");
        let prefixed = |name: &str| format!("{prefix}{name}");
        if let Some(kind) = c.raw.get("position_embedding_type").and_then(|v| v.as_str()).filter(|k| *k != "absolute") {
            return Err(Error::Config {
                path: c.path.clone(),
                reason: format!("key `position_embedding_type` is \"{kind}\"; only \"absolute\" position embeddings are built"),
            });
        }
        if c.raw.get("is_decoder").and_then(|v| v.as_bool()) == Some(true) {
            return Err(Error::Config {
                path: c.path.clone(),
                reason: "key `is_decoder` is true: a causal BERT is not built as an encoder; set it to false or remove it".into(),
            });
        }
        let act = c.activation("hidden_act", Activation::Gelu)?;
        if act == Activation::Xielu {
            return Err(Error::Config { path: c.path.clone(), reason: "key `hidden_act` is `xielu`, whose learned per-layer scalars only Apertus' MLP stores; an encoder has none".into() });
        }
        let eps = c.norm_eps;
        let hidden = c.hidden_size;
        let heads = Heads { q: c.num_attention_heads, kv: c.num_attention_heads, head_dim: c.head_dim };
        if heads.q * heads.head_dim != hidden {
            return Err(Error::Config {
                path: c.path.clone(),
                reason: format!("`head_dim` {} x `num_attention_heads` {} is not `hidden_size` {hidden}; encoders need hidden = heads x head_dim", heads.head_dim, heads.q),
            });
        }

        // Embeddings: words + positions + token types, then LayerNorm. The sums are ordered so
        // that the embedding LayerNorm is a residual pattern the skip-norm fusions take: with
        // token types as an input, (words + positions) + types; with one type, its row as a
        // [hidden] vector added to the words first, (words + type) + positions.
        let word = ckpt.tensor(&prefixed(n.word_embeddings), &[c.vocab_size, hidden])?.cast(b.float);
        let word = b.initializer(&prefixed(n.word_embeddings), word);
        let words = b.op(&format!("{}/Gather", prefixed("embeddings.word_embeddings")), "Gather", &[&word, &io.input_ids], vec![]);
        let pos_table = ckpt.tensor(&prefixed(n.position_embeddings), &[c.max_position_embeddings, hidden])?.cast(b.float);
        let pos_table = b.initializer(&prefixed(n.position_embeddings), pos_table);
        let position_ids = self.position_ids(b, c, io)?;
        // Range and CumSum are not shape-inferred; the ids have the input's sequence (and for
        // RoBERTa batch) dims, which the fusions' shape checks need downstream.
        let ids_shape = b.graph.inputs.iter().find(|i| i.name == io.input_ids).and_then(|i| i.shape.clone()).unwrap_or_default();
        let pos_shape = match self.positions {
            EncoderPositions::Absolute => ids_shape.get(1..).unwrap_or_default().to_vec(),
            EncoderPositions::PaddingOffset { .. } => ids_shape.clone(),
        };
        b.annotate(&position_ids, DType::I64, pos_shape);
        let positions = b.op(&format!("{}/Gather", prefixed("embeddings.position_embeddings")), "Gather", &[&pos_table, &position_ids], vec![]);
        let types = type_vocab_size(c)?;
        let type_table = ckpt.tensor(&prefixed(n.token_type_embeddings), &[types, hidden])?;
        let e = match &io.token_type_ids {
            Some(ids) => {
                let type_table = b.initializer(&prefixed(n.token_type_embeddings), type_table.cast(b.float));
                let token_types =
                    b.op(&format!("{}/Gather", prefixed("embeddings.token_type_embeddings")), "Gather", &[&type_table, ids], vec![]);
                let e = b.op(&prefixed("embeddings/Add_positions"), "Add", &[&words, &positions], vec![]);
                b.op(&prefixed("embeddings/Add_token_types"), "Add", &[&e, &token_types], vec![])
            }
            // One token type: its row, as a [hidden] vector, is added to every token.
            None => {
                let row = b.initializer(&prefixed(n.token_type_embeddings), type_table.reshape(vec![hidden]).cast(b.float));
                let e = b.op(&prefixed("embeddings/Add_token_types"), "Add", &[&words, &row], vec![]);
                b.op(&prefixed("embeddings/Add_positions"), "Add", &[&positions, &e], vec![])
            }
        };
        let mut h = layer_norm(b, ckpt, &prefixed(n.embeddings_norm), &e, hidden, eps)?;

        let mask = key_padding_mask(b, "attn_mask", &io.attention_mask);
        for i in 0..c.num_hidden_layers {
            let layer = prefixed(&n.layer.replace("{i}", &i.to_string()));
            let s = |part: &str| format!("{layer}.{part}");
            let proj = |b: &mut GraphBuilder, part: &str, inp: usize, out: usize, x: &str| -> Result<String> {
                let w = LinearWeights::torch(ckpt, b, &s(part), inp, out, true)?;
                Ok(linear(b, &s(part), x, w))
            };
            let q = proj(b, n.query, hidden, hidden, &h)?;
            let k = proj(b, n.key, hidden, hidden, &h)?;
            let v = proj(b, n.value, hidden, hidden, &h)?;
            let scope = s(n.query.rsplit_once('.').map_or("attention", |(p, _)| p));
            let y = bidirectional_attention(b, &scope, [&q, &k, &v], &mask, heads);
            let o = proj(b, n.attention_output, hidden, hidden, &y)?;
            let sum = b.op(&s("attention/residual/Add"), "Add", &[&o, &h], vec![]);
            h = layer_norm(b, ckpt, &s(n.attention_norm), &sum, hidden, eps)?;
            let up = proj(b, n.intermediate, hidden, c.intermediate_size, &h)?;
            let a = activation(b, &s(n.intermediate), &up, act);
            let down = proj(b, n.output, c.intermediate_size, hidden, &a)?;
            let sum = b.op(&s("output/residual/Add"), "Add", &[&down, &h], vec![]);
            h = layer_norm(b, ckpt, &s(n.output_norm), &sum, hidden, eps)?;
        }
        super::decoder::account_for_every_tensor(ckpt, self.unused)?;
        Ok(h)
    }

    /// The position ids `Gather` reads: `[seq]` (absolute) or `[batch, seq]` (padding offset).
    fn position_ids(&self, b: &mut GraphBuilder, c: &crate::DecoderConfig, io: &EncoderIo) -> Result<String> {
        let s = "embeddings/position_ids";
        Ok(match self.positions {
            EncoderPositions::Absolute => {
                let seq = b.op(&format!("{s}/seq_len"), "Shape", &[&io.input_ids], vec![Attr::int("start", 1), Attr::int("end", 2)]);
                let axes0 = b.const_i64_1d(&format!("{s}/axis0"), &[0]);
                let seq = b.op(&format!("{s}/seq_scalar"), "Squeeze", &[&seq, &axes0], vec![]);
                let zero = b.const_i64(&format!("{s}/zero"), &[0]);
                let one = b.const_i64(&format!("{s}/one"), &[1]);
                b.op(&format!("{s}/Range"), "Range", &[&zero, &seq, &one], vec![])
            }
            EncoderPositions::PaddingOffset { default_pad } => {
                let pad = c.pad_token_id.unwrap_or(default_pad);
                let pad = b.const_i64(&format!("{s}/padding_idx"), &[pad]);
                let is_pad = b.op(&format!("{s}/is_pad"), "Equal", &[&io.input_ids, &pad], vec![]);
                let real = b.op(&format!("{s}/is_token"), "Not", &[&is_pad], vec![]);
                let real = b.op(&format!("{s}/token_count"), "Cast", &[&real], vec![Attr::int("to", DType::I64.to_onnx() as i64)]);
                let axis1 = b.const_i64(&format!("{s}/axis1"), &[1]);
                let count = b.op(&format!("{s}/CumSum"), "CumSum", &[&real, &axis1], vec![]);
                let count = b.op(&format!("{s}/Mul"), "Mul", &[&count, &real], vec![]);
                b.op(&format!("{s}/Add"), "Add", &[&count, &pad], vec![])
            }
        })
    }
}
