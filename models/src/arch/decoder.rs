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

impl DecoderFamily {
    pub(crate) fn build(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, io: &DecoderIo) -> Result<String> {
        let c = &ckpt.config;
        let (n, l) = (&self.names, &self.layout);
        let heads = Heads { q: c.num_attention_heads, kv: c.num_key_value_heads, head_dim: c.head_dim };
        let (hidden, q_dim, kv_dim) = (c.hidden_size, heads.q * heads.head_dim, heads.kv * heads.head_dim);
        let eps = c.norm_eps;
        ckpt.set_optional_prefix(self.optional_prefix);

        // Token (and learned position) embeddings. A tied lm_head reads the same initializer.
        let embed = ckpt.tensor(n.embed_tokens, &[c.vocab_size, hidden])?;
        let wte = b.initializer(n.embed_tokens, embed.clone().cast(b.float));
        let scope = n.embed_tokens.trim_end_matches(".weight");
        let mut h = b.op(&format!("{scope}/Gather"), "Gather", &[&wte, &io.input_ids], vec![ir::Attr::int("axis", 0)]);
        if l.positions == Positions::Learned {
            let wpe_name = n.embed_positions.ok_or_else(|| Error::Config {
                path: c.path.clone(),
                reason: format!("the `{}` family table has learned positions but no embed_positions name", c.model_type),
            })?;
            let recipe = ckpt.tensor(wpe_name, &[c.max_position_embeddings, hidden])?.cast(b.float);
            let wpe = b.initializer(wpe_name, recipe);
            let scope = wpe_name.trim_end_matches(".weight");
            let pos = b.op(&format!("{scope}/Gather"), "Gather", &[&wpe, &io.position_ids], vec![ir::Attr::int("axis", 0)]);
            h = b.op(&format!("{scope}/Add"), "Add", &[&h, &pos], vec![]);
        }

        // One mask per distinct window, built once and shared by the layers that use it.
        let windows: Vec<Option<usize>> = (0..c.num_hidden_layers).map(|i| c.layer_window(i)).collect();
        let mut masks: BTreeMap<Option<usize>, String> = BTreeMap::new();
        for w in &windows {
            if !masks.contains_key(w) {
                let scope = match w {
                    None => "attn_mask".to_string(),
                    Some(size) => format!("attn_mask_window{size}"),
                };
                let m = causal_padding_mask(b, &scope, &io.input_ids, &io.attention_mask, *w);
                masks.insert(*w, m);
            }
        }
        let rope = match l.positions {
            Positions::Rotary => {
                Some(RopeCache::build(b, &c.rope, c.head_dim, c.rotary_dim(), c.max_position_embeddings, &io.attention_mask))
            }
            Positions::Learned => None,
        };
        let (qkv_bias, o_bias, mlp_bias) = (l.qkv_bias.resolve(c), l.o_bias.resolve(c), l.mlp_bias.resolve(c));
        // GPT-2's attention scale keys; absent everywhere else, which means the default.
        let scale_weights = c.flag("scale_attn_weights", true);
        let by_layer = c.flag("scale_attn_by_inverse_layer_idx", false);

        for (i, window) in windows.iter().enumerate() {
            let layer = n.layer.replace("{i}", &i.to_string());
            let s = |part: &str| format!("{layer}.{part}");
            let x = norm(b, ckpt, l.norm, &s(n.input_norm), &h, hidden, eps)?;

            let (q, k, v) = match &n.attention {
                AttentionNames::Separate { q, k, v } => {
                    let mut proj = |part: &str, out: usize| -> Result<String> {
                        let w = LinearWeights::read(ckpt, b, &s(part), hidden, out, qkv_bias, l.weights)?;
                        Ok(linear(b, &s(part), &x, w))
                    };
                    (proj(q, q_dim)?, proj(k, kv_dim)?, proj(v, kv_dim)?)
                }
                AttentionNames::Fused { qkv } => {
                    let parts = LinearWeights::read_fused(ckpt, b, &s(qkv), hidden, &[q_dim, kv_dim, kv_dim], qkv_bias, l.weights)?;
                    let [wq, wk, wv]: [LinearWeights; 3] = parts.try_into().map_err(|_| unreachable_parts())?;
                    (
                        linear(b, &format!("{}.q", s(qkv)), &x, wq),
                        linear(b, &format!("{}.k", s(qkv)), &x, wk),
                        linear(b, &format!("{}.v", s(qkv)), &x, wv),
                    )
                }
            };
            let (q, k) = match n.qk_norm {
                None => (q, k),
                Some((qn, kn)) => (
                    per_head_rms_norm(b, ckpt, &s(qn), &q, heads.q, heads.head_dim, eps)?,
                    per_head_rms_norm(b, ckpt, &s(kn), &k, heads.kv, heads.head_dim, eps)?,
                ),
            };
            let (q, k) = match &rope {
                None => (q, k),
                Some(rope) => (
                    rope.apply(b, &s("self_attn.q_rotary"), &q, heads.q, &io.position_ids),
                    rope.apply(b, &s("self_attn.k_rotary"), &k, heads.kv, &io.position_ids),
                ),
            };
            let scale = match (scale_weights, by_layer) {
                (true, false) => None,
                (true, true) => Some((heads.default_scale() / (i + 1) as f64) as f32),
                (false, false) => Some(1.0),
                (false, true) => Some(1.0 / (i + 1) as f32),
            };
            let (past_k, past_v) = &io.past[i];
            let (present_k, present_v) = &io.present[i];
            let attn_scope = s(n.o_proj.rsplit_once('.').map_or("self_attn", |(p, _)| p));
            let y = attention(b, &attn_scope, [&q, &k, &v], &masks[window], [past_k, past_v], [present_k, present_v], heads, scale);
            let o = LinearWeights::read(ckpt, b, &s(n.o_proj), q_dim, hidden, o_bias, l.weights)?;
            let o = linear(b, &s(n.o_proj), &y, o);
            h = b.op(&s("attn_residual/Add"), "Add", &[&h, &o], vec![]);

            let x = norm(b, ckpt, l.norm, &s(n.post_attention_norm), &h, hidden, eps)?;
            let inter = c.intermediate_size;
            let m = match &n.mlp {
                MlpNames::Gated { gate, up, down } => {
                    let g = LinearWeights::read(ckpt, b, &s(gate), hidden, inter, mlp_bias, l.weights)?;
                    let u = LinearWeights::read(ckpt, b, &s(up), hidden, inter, mlp_bias, l.weights)?;
                    let d = LinearWeights::read(ckpt, b, &s(down), inter, hidden, mlp_bias, l.weights)?;
                    let scopes = GatedScopes { gate: &s(gate), up: &s(up), down: &s(down) };
                    gated(b, &s(mlp_scope(down)), scopes, &x, [g, u, d], c.hidden_act)
                }
                MlpNames::GatedFused { gate_up, down } => {
                    let parts = LinearWeights::read_fused(ckpt, b, &s(gate_up), hidden, &[inter, inter], mlp_bias, l.weights)?;
                    let [g, u]: [LinearWeights; 2] = parts.try_into().map_err(|_| unreachable_parts())?;
                    let d = LinearWeights::read(ckpt, b, &s(down), inter, hidden, mlp_bias, l.weights)?;
                    let (gs, us) = (format!("{}.gate", s(gate_up)), format!("{}.up", s(gate_up)));
                    let scopes = GatedScopes { gate: &gs, up: &us, down: &s(down) };
                    gated(b, &s(mlp_scope(down)), scopes, &x, [g, u, d], c.hidden_act)
                }
                MlpNames::Plain { up, down } => {
                    let u = LinearWeights::read(ckpt, b, &s(up), hidden, inter, mlp_bias, l.weights)?;
                    let d = LinearWeights::read(ckpt, b, &s(down), inter, hidden, mlp_bias, l.weights)?;
                    plain(b, &s(mlp_scope(down)), &s(up), &s(down), &x, [u, d], c.hidden_act)
                }
            };
            h = b.op(&s("mlp_residual/Add"), "Add", &[&h, &m], vec![]);
        }

        let h = norm(b, ckpt, l.norm, n.final_norm, &h, hidden, eps)?;
        let lm_head_weight = format!("{}.weight", n.lm_head);
        let tied = c.tie_word_embeddings.unwrap_or(l.tie_default);
        let logits = if tied {
            if ckpt.has(&lm_head_weight) {
                ckpt.mark_unused(&lm_head_weight, "tie_word_embeddings: the output projection is the token embedding");
            }
            match io.tied_head {
                // The projection reads the embedding table through a Transpose node rather than
                // a transposed copy, so the package holds the [vocab, hidden] table once (272 MB
                // less for Qwen2.5-0.5B in f16). ONNX Runtime folds the constant Transpose when
                // the session is created (docs/generic-graph.md has the trade-off).
                TiedHead::Shared => {
                    let scope = n.lm_head;
                    let perm = vec![ir::Attr::ints("perm", &[1, 0])];
                    let table = b.op(&format!("{scope}/Transpose"), "Transpose", &[&wte], perm);
                    b.op(&format!("{scope}/MatMul"), "MatMul", &[&h, &table], vec![])
                }
                TiedHead::Copy => {
                    let head = LinearWeights { weight: embed.transpose(vec![1, 0]).cast(b.float), bias: None };
                    linear(b, n.lm_head, &h, head)
                }
            }
        } else {
            let head = LinearWeights::torch(ckpt, b, n.lm_head, hidden, c.vocab_size, false)?;
            linear(b, n.lm_head, &h, head)
        };
        self.account_for_every_tensor(ckpt)?;
        Ok(logits)
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
