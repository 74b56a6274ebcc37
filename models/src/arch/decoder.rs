//! The one generic decoder builder: reads a [`DecoderFamily`] table and the config, and
//! composes components into the generic graph. No family has code of its own.

use super::family::{AttentionNames, DecoderFamily, MlpNames, Positions};
use super::DecoderIo;
use crate::components::attention::{attention, Heads};
use crate::components::linear::{linear, LinearWeights};
use crate::components::mask::causal_padding_mask;
use crate::components::mlp::{gated, plain, GatedScopes};
use crate::components::norm::{norm, per_head_rms_norm};
use crate::components::rope::RopeCache;
use crate::{Checkpoint, Error, GraphBuilder, Result, TiedHead};
use std::collections::BTreeMap;

/// What every layer of one build shares: dimensions, biases, masks, the RoPE cache.
struct Shared<'a> {
    c: &'a crate::DecoderConfig,
    io: &'a DecoderIo,
    heads: Heads,
    hidden: usize,
    q_dim: usize,
    kv_dim: usize,
    biases: (bool, bool, bool),
    /// One causal/padding mask per distinct sliding window, built once.
    masks: BTreeMap<Option<usize>, String>,
    rope: Option<RopeCache>,
}

/// The token embedding: its initializer (a tied head reads it too) and its recipe.
struct Embedding {
    table: String,
    recipe: ir::Recipe,
}

impl DecoderFamily {
    pub(crate) fn build(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, io: &DecoderIo) -> Result<String> {
        let c = &ckpt.config;
        ckpt.set_optional_prefix(self.optional_prefix);
        let (embedding, mut h) = self.embed(b, ckpt, io)?;
        let shared = self.shared(b, c, io);
        for i in 0..c.num_hidden_layers {
            h = self.layer(b, ckpt, &shared, i, &h)?;
        }
        let h = norm(b, ckpt, self.layout.norm, self.names.final_norm, &h, shared.hidden, c.norm_eps)?;
        let logits = self.head(b, ckpt, io, &embedding, &h)?;
        self.account_for_every_tensor(ckpt)?;
        Ok(logits)
    }

    /// Token (and learned position) embeddings of `input_ids`.
    fn embed(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, io: &DecoderIo) -> Result<(Embedding, String)> {
        let (c, n) = (&ckpt.config, &self.names);
        let recipe = ckpt.tensor(n.embed_tokens, &[c.vocab_size, c.hidden_size])?;
        let table = b.initializer(n.embed_tokens, recipe.clone().cast(b.float));
        let scope = n.embed_tokens.trim_end_matches(".weight");
        let mut h = b.op(&format!("{scope}/Gather"), "Gather", &[&table, &io.input_ids], vec![ir::Attr::int("axis", 0)]);
        if self.layout.positions == Positions::Learned {
            let wpe_name = n.embed_positions.ok_or_else(|| Error::Config {
                path: c.path.clone(),
                reason: format!("the `{}` family table has learned positions but no embed_positions name", c.model_type),
            })?;
            let positions = ckpt.tensor(wpe_name, &[c.max_position_embeddings, c.hidden_size])?.cast(b.float);
            let wpe = b.initializer(wpe_name, positions);
            let scope = wpe_name.trim_end_matches(".weight");
            let pos = b.op(&format!("{scope}/Gather"), "Gather", &[&wpe, &io.position_ids], vec![ir::Attr::int("axis", 0)]);
            h = b.op(&format!("{scope}/Add"), "Add", &[&h, &pos], vec![]);
        }
        Ok((Embedding { table, recipe }, h))
    }

    /// Dimensions, biases, one mask per distinct window and the RoPE cache.
    fn shared<'a>(&self, b: &mut GraphBuilder, c: &'a crate::DecoderConfig, io: &'a DecoderIo) -> Shared<'a> {
        let l = &self.layout;
        let heads = Heads { q: c.num_attention_heads, kv: c.num_key_value_heads, head_dim: c.head_dim };
        let mut masks = BTreeMap::new();
        for w in (0..c.num_hidden_layers).map(|i| c.layer_window(i)) {
            masks.entry(w).or_insert_with(|| {
                let scope = w.map_or("attn_mask".to_string(), |size| format!("attn_mask_window{size}"));
                causal_padding_mask(b, &scope, &io.input_ids, &io.attention_mask, w)
            });
        }
        let rope = (l.positions == Positions::Rotary).then(|| {
            RopeCache::build(b, &c.rope, c.head_dim, c.rotary_dim(), c.max_position_embeddings, &io.attention_mask)
        });
        Shared {
            c,
            io,
            heads,
            hidden: c.hidden_size,
            q_dim: heads.q * heads.head_dim,
            kv_dim: heads.kv * heads.head_dim,
            biases: (l.qkv_bias.resolve(c), l.o_bias.resolve(c), l.mlp_bias.resolve(c)),
            masks,
            rope,
        }
    }

    /// Decoder layer `i`: pre-norm attention and MLP blocks with their residual adds.
    fn layer(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, sh: &Shared, i: usize, h: &str) -> Result<String> {
        let (n, l) = (&self.names, &self.layout);
        let layer = n.layer.replace("{i}", &i.to_string());
        let s = |part: &str| format!("{layer}.{part}");
        let x = norm(b, ckpt, l.norm, &s(n.input_norm), h, sh.hidden, sh.c.norm_eps)?;
        let o = self.attention_block(b, ckpt, sh, i, &layer, &x)?;
        let h = b.op(&s("attn_residual/Add"), "Add", &[h, &o], vec![]);
        let x = norm(b, ckpt, l.norm, &s(n.post_attention_norm), &h, sh.hidden, sh.c.norm_eps)?;
        let m = self.mlp_block(b, ckpt, sh, &layer, &x)?;
        Ok(b.op(&s("mlp_residual/Add"), "Add", &[&h, &m], vec![]))
    }

    /// q/k/v projections, optional per-head q/k norms, RoPE, attention over the cache, and the
    /// output projection.
    fn attention_block(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, sh: &Shared, i: usize, layer: &str, x: &str) -> Result<String> {
        let (n, l, heads) = (&self.names, &self.layout, sh.heads);
        let s = |part: &str| format!("{layer}.{part}");
        let (qkv_bias, o_bias, _) = sh.biases;
        let (q, k, v) = match &n.attention {
            AttentionNames::Separate { q, k, v } => {
                let mut proj = |part: &str, out: usize| -> Result<String> {
                    let w = LinearWeights::read(ckpt, b, &s(part), sh.hidden, out, qkv_bias, l.weights)?;
                    Ok(linear(b, &s(part), x, w))
                };
                (proj(q, sh.q_dim)?, proj(k, sh.kv_dim)?, proj(v, sh.kv_dim)?)
            }
            AttentionNames::Fused { qkv } => {
                let dims = [sh.q_dim, sh.kv_dim, sh.kv_dim];
                let parts = LinearWeights::read_fused(ckpt, b, &s(qkv), sh.hidden, &dims, qkv_bias, l.weights)?;
                let [wq, wk, wv]: [LinearWeights; 3] = parts.try_into().map_err(|_| unreachable_parts())?;
                (
                    linear(b, &format!("{}.q", s(qkv)), x, wq),
                    linear(b, &format!("{}.k", s(qkv)), x, wk),
                    linear(b, &format!("{}.v", s(qkv)), x, wv),
                )
            }
        };
        let (q, k) = match n.qk_norm {
            None => (q, k),
            Some((qn, kn)) => (
                per_head_rms_norm(b, ckpt, &s(qn), &q, heads.q, heads.head_dim, sh.c.norm_eps)?,
                per_head_rms_norm(b, ckpt, &s(kn), &k, heads.kv, heads.head_dim, sh.c.norm_eps)?,
            ),
        };
        let (q, k) = match &sh.rope {
            None => (q, k),
            Some(rope) => (
                rope.apply(b, &s("self_attn.q_rotary"), &q, heads.q, &sh.io.position_ids),
                rope.apply(b, &s("self_attn.k_rotary"), &k, heads.kv, &sh.io.position_ids),
            ),
        };
        let scale = sh.c.attention_scale(i, heads.default_scale());
        let (past_k, past_v) = &sh.io.past[i];
        let (present_k, present_v) = &sh.io.present[i];
        let attn_scope = s(n.o_proj.rsplit_once('.').map_or("self_attn", |(p, _)| p));
        let mask = &sh.masks[&sh.c.layer_window(i)];
        let y = attention(b, &attn_scope, [&q, &k, &v], mask, [past_k, past_v], [present_k, present_v], heads, scale);
        let o = LinearWeights::read(ckpt, b, &s(n.o_proj), sh.q_dim, sh.hidden, o_bias, l.weights)?;
        Ok(linear(b, &s(n.o_proj), &y, o))
    }

    /// The MLP in the family's layout (gated, gated with a fused gate/up, or plain).
    fn mlp_block(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, sh: &Shared, layer: &str, x: &str) -> Result<String> {
        let (n, l) = (&self.names, &self.layout);
        let s = |part: &str| format!("{layer}.{part}");
        let (hidden, inter, act, mlp_bias) = (sh.hidden, sh.c.intermediate_size, sh.c.hidden_act, sh.biases.2);
        Ok(match &n.mlp {
            MlpNames::Gated { gate, up, down } => {
                let g = LinearWeights::read(ckpt, b, &s(gate), hidden, inter, mlp_bias, l.weights)?;
                let u = LinearWeights::read(ckpt, b, &s(up), hidden, inter, mlp_bias, l.weights)?;
                let d = LinearWeights::read(ckpt, b, &s(down), inter, hidden, mlp_bias, l.weights)?;
                let scopes = GatedScopes { gate: &s(gate), up: &s(up), down: &s(down) };
                gated(b, &s(mlp_scope(down)), scopes, x, [g, u, d], act)
            }
            MlpNames::GatedFused { gate_up, down } => {
                let parts = LinearWeights::read_fused(ckpt, b, &s(gate_up), hidden, &[inter, inter], mlp_bias, l.weights)?;
                let [g, u]: [LinearWeights; 2] = parts.try_into().map_err(|_| unreachable_parts())?;
                let d = LinearWeights::read(ckpt, b, &s(down), inter, hidden, mlp_bias, l.weights)?;
                let (gs, us) = (format!("{}.gate", s(gate_up)), format!("{}.up", s(gate_up)));
                let scopes = GatedScopes { gate: &gs, up: &us, down: &s(down) };
                gated(b, &s(mlp_scope(down)), scopes, x, [g, u, d], act)
            }
            MlpNames::Plain { up, down } => {
                let u = LinearWeights::read(ckpt, b, &s(up), hidden, inter, mlp_bias, l.weights)?;
                let d = LinearWeights::read(ckpt, b, &s(down), inter, hidden, mlp_bias, l.weights)?;
                plain(b, &s(mlp_scope(down)), &s(up), &s(down), x, [u, d], act)
            }
        })
    }

    /// The output projection: its own weight, or the token embedding when tied.
    fn head(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, io: &DecoderIo, embedding: &Embedding, h: &str) -> Result<String> {
        let (c, n) = (&ckpt.config, &self.names);
        let lm_head_weight = format!("{}.weight", n.lm_head);
        if !c.tie_word_embeddings.unwrap_or(self.layout.tie_default) {
            let head = LinearWeights::torch(ckpt, b, n.lm_head, c.hidden_size, c.vocab_size, false)?;
            return Ok(linear(b, n.lm_head, h, head));
        }
        if ckpt.has(&lm_head_weight) {
            ckpt.mark_unused(&lm_head_weight, "tie_word_embeddings: the output projection is the token embedding");
        }
        Ok(match io.tied_head {
            // The projection reads the embedding table through a Transpose node rather than
            // a transposed copy, so the package holds the [vocab, hidden] table once (272 MB
            // less for Qwen2.5-0.5B in f16). ONNX Runtime folds the constant Transpose when
            // the session is created (docs/generic-graph.md has the trade-off).
            TiedHead::Shared => {
                let scope = n.lm_head;
                let perm = vec![ir::Attr::ints("perm", &[1, 0])];
                let table = b.op(&format!("{scope}/Transpose"), "Transpose", &[&embedding.table], perm);
                b.op(&format!("{scope}/MatMul"), "MatMul", &[h, &table], vec![])
            }
            TiedHead::Copy => {
                let head = LinearWeights { weight: embedding.recipe.clone().transpose(vec![1, 0]).cast(b.float), bias: None };
                linear(b, n.lm_head, h, head)
            }
        })
    }

    /// Marks the tensors the table lists as unused, then fails if any tensor is still
    /// unaccounted for: a weight nobody reads means config.json and the checkpoint disagree
    /// (a bias the config does not announce, say), and the model would be silently wrong.
    fn account_for_every_tensor(&self, ckpt: &Checkpoint) -> Result<()> {
        for name in ckpt.unaccounted() {
            if let Some(u) = self.unused.iter().find(|u| name.ends_with(u.suffix)) {
                ckpt.mark_unused(&name, u.reason);
            }
        }
        let left = ckpt.unaccounted();
        if left.is_empty() {
            return Ok(());
        }
        let shown: Vec<&str> = left.iter().take(8).map(String::as_str).collect();
        let more = if left.len() > shown.len() { format!(" and {} more", left.len() - shown.len()) } else { String::new() };
        Err(Error::UnusedTensors {
            path: ckpt.dir.clone(),
            model_type: ckpt.config.model_type.clone(),
            count: left.len(),
            names: format!("{}{more}", shown.join(", ")),
        })
    }
}

/// The MLP's scope from its down projection's name (`mlp.down_proj` -> `mlp`).
fn mlp_scope(down: &str) -> &str {
    down.rsplit_once('.').map_or("mlp", |(p, _)| p)
}

fn unreachable_parts() -> Error {
    Error::Checkpoint { path: Default::default(), reason: "internal: a fused projection split into the wrong number of parts".into() }
}
