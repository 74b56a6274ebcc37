//! The one generic decoder builder: reads a [`DecoderFamily`] table and the config, and
//! composes components into the generic graph. No family has code of its own.

use super::family::{AttentionNames, AttentionScale, BlockShape, DecoderFamily, EmbeddingScale, FinalNorm, HeadWeights, MlpNames, NormEps, NormOver, Positions, QkNorm, RotaryPairs};
use super::DecoderIo;
use crate::components::attention::{attention, sink_attention, Heads};
use crate::components::linear::{linear, LinearWeights, WeightLayout};
use crate::components::kv_cache::{static_attention, write_indices};
use crate::components::alibi::alibi_mask;
use crate::components::mask::causal_padding_mask;
use crate::components::mlp::{gated, plain, xielu, GatedScopes, XieluParams};
use crate::components::norm::{norm, per_head_norm, per_head_weighted_layer_norm};
use crate::components::rope::RopeCache;
use crate::{Activation, Checkpoint, Error, GraphBuilder, Result, RopeConfig, RopeKind, TiedHead};
use std::collections::BTreeMap;

mod latent;

/// What every layer of one build shares: dimensions, biases, masks, the RoPE cache.
struct Shared<'a> {
    c: &'a crate::DecoderConfig,
    io: &'a DecoderIo,
    heads: Heads,
    hidden: usize,
    q_dim: usize,
    kv_dim: usize,
    biases: (bool, bool, bool),
    /// How each block is arranged (the family's shape, or the one its `block_when` key asks).
    block: BlockShape,
    /// One causal/padding mask per distinct sliding window, built once.
    masks: BTreeMap<Option<usize>, String>,
    /// Each layer's sliding window (`None`: full attention).
    windows: Vec<Option<usize>>,
    /// Whether each layer applies RoPE (false: a NoPE layer, SmolLM3).
    rotates: Vec<bool>,
    /// `clip_qkv`: q, k and v clamped to `[-c, c]`, the bounds' constants built once.
    clip: Option<(String, String)>,
    /// A static cache's per-row write indices, built once (`None`: a dynamic cache).
    write: Option<String>,
    rope: Option<RopeCache>,
    /// The sliding layers' own RoPE (Gemma 3), when the family has one.
    local_rope: Option<RopeCache>,
    /// The family's scalars, read from their config keys.
    scalars: Scalars,
    /// The residual multiplier's constant, shared by every layer.
    residual: Option<String>,
    /// Each query position's scale `[batch, seq, 1]` (Ministral 3), built once.
    query_position: Option<String>,
}

/// A family's scalars and per-family keys, read once per build (each error names its key).
struct Scalars {
    eps: f64,
    act: Activation,
    /// Token embeddings multiplied by this (input path only).
    embedding: Option<f64>,
    /// Each block's output multiplied by this before its residual add.
    residual: Option<f64>,
    /// `None`: the generic rule (`1 / sqrt(head_dim)`, GPT-2's keys).
    attention_scale: Option<f32>,
    attention_softcap: Option<f32>,
    final_softcap: Option<f64>,
    logits_divisor: Option<f64>,
    logits_multiplier: Option<f64>,
    /// `(beta, original)` of the position-dependent query scale (Ministral 3).
    query_position: Option<(f64, f64)>,
}

/// Columns `[k * hidden, (k + 1) * hidden)` of a wide `inputs_embeds` (block 0: the
/// embeddings, block k > 0: deepstack block k - 1; see [`crate::arch::vision::deepstack_count`]).
fn deepstack_block(b: &mut GraphBuilder, embeds: &str, hidden: usize, k: usize) -> String {
    let s = format!("inputs_embeds/block{k}");
    let start = b.const_i64_1d(&format!("{s}/start"), &[(k * hidden) as i64]);
    let end = b.const_i64_1d(&format!("{s}/end"), &[((k + 1) * hidden) as i64]);
    let axis = b.const_i64_1d(&format!("{s}/axis"), &[2]);
    let out = b.op(&format!("{s}/Slice"), "Slice", &[embeds, &start, &end, &axis], vec![]);
    // Shape inference does not evaluate Slice; the fusions downstream need [batch, seq, hidden].
    let input = b.graph.inputs.iter().find(|v| v.name == embeds).and_then(|v| v.shape.clone().map(|s| (v.dtype, s)));
    if let Some((dtype, mut shape)) = input {
        if let Some(last) = shape.last_mut() {
            *last = ir::Dim::Fixed(hidden as i64);
        }
        b.annotate(&out, dtype, shape);
    }
    out
}

/// The token embedding: its initializer (a tied head reads it too) and its recipe.
struct Embedding {
    table: String,
    recipe: ir::Recipe,
}

impl DecoderFamily {
    /// The family's positions, or the ones its `positions_when` key asks for (Falcon's `alibi`).
    pub(crate) fn positions(&self, c: &crate::DecoderConfig) -> Positions {
        match self.layout.positions_when {
            Some(switch) if c.flag(switch.key, switch.default) => switch.on,
            _ => self.layout.positions,
        }
    }

    pub(crate) fn build(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, io: &DecoderIo) -> Result<String> {
        let c = &ckpt.config;
        ckpt.set_optional_prefix(self.optional_prefix);
        let scalars = self.scalars(c)?;
        let (embedding, mut h) = match &io.inputs_embeds {
            // The embedding part gathered (and scaled) the rows; a tied head still reads the table.
            Some(embeds) if io.deepstack == 0 => (self.embedding_table(b, ckpt)?, embeds.clone()),
            Some(embeds) => (self.embedding_table(b, ckpt)?, deepstack_block(b, embeds, c.hidden_size, 0)),
            None => self.embed(b, ckpt, io, scalars.embedding)?,
        };
        let shared = self.shared(b, c, io, scalars)?;
        if let Some(scope) = self.layout.embedding_norm {
            h = norm(b, ckpt, self.layout.norm, scope, &h, c.hidden_size, shared.scalars.eps)?;
        }
        for i in 0..c.num_hidden_layers {
            h = self.layer(b, ckpt, &shared, i, &h)?;
            if let (Some(embeds), true) = (&io.inputs_embeds, i < io.deepstack) {
                // Qwen3-VL's deepstack: block i (zeros at text tokens) joins after layer i.
                let block = deepstack_block(b, embeds, c.hidden_size, i + 1);
                h = b.op(&format!("model.layers.{i}/deepstack/Add"), "Add", &[&h, &block], vec![]);
            }
        }
        let final_norm = match self.layout.final_norm {
            FinalNorm::Always => true,
            FinalNorm::Never => false,
            FinalNorm::When { key, default } => c.flag(key, default),
        };
        let h = if final_norm { norm(b, ckpt, self.layout.norm, self.names.final_norm, &h, shared.hidden, shared.scalars.eps)? } else { h };
        let h = match self.embed_projection(c)? {
            Some((p, width)) => {
                let w = LinearWeights::read(ckpt, b, p.out, c.hidden_size, width, false, self.layout.weights)?;
                linear(b, p.out, &h, w)
            }
            None => h,
        };
        let logits = self.head(b, ckpt, io, &embedding, &h)?;
        let logits = scale_logits(b, &logits, &shared.scalars);
        self.mark_prediction_layers(ckpt)?;
        account_for_every_tensor(ckpt, self.unused)?;
        Ok(logits)
    }

    /// The multi-token prediction layers stored after the decoder's (DeepSeek-V3's
    /// `model.layers.{L}`, counted by `num_nextn_predict_layers`): trained to draft tokens,
    /// not run by generation (transformers does not load them), so recorded as unused.
    fn mark_prediction_layers(&self, ckpt: &Checkpoint) -> Result<()> {
        let Some((keys, default)) = self.layout.prediction_layers else { return Ok(()) };
        let c = &ckpt.config;
        let mut extra = None;
        for key in keys {
            extra = extra.or(c.count_or_zero(key)?);
        }
        let (extra, key) = (extra.unwrap_or(default), keys.first().copied().unwrap_or("num_nextn_predict_layers"));
        let prefixes: Vec<String> = (c.num_hidden_layers..c.num_hidden_layers + extra).map(|i| format!("{}.", self.names.layer.replace("{i}", &i.to_string()))).collect();
        let names: Vec<String> = ckpt.tensor_names().filter(|n| prefixes.iter().any(|p| n.starts_with(p.as_str()))).map(str::to_string).collect();
        let why = format!("a multi-token prediction layer (`{key}`): it drafts tokens in training; generation does not run it");
        for name in names {
            ckpt.mark_unused(&name, &why);
        }
        Ok(())
    }

    /// Reads the family's scalar keys (absent: the family's default; `null`: off).
    fn scalars(&self, c: &crate::DecoderConfig) -> Result<Scalars> {
        let sc = &self.scaling;
        let key = |k: Option<super::Key>| -> Result<Option<f64>> {
            match k {
                None => Ok(None),
                Some(k) => c.number(k.name, k.default),
            }
        };
        let eps = match self.layout.norm_eps {
            NormEps::Generic => c.norm_eps,
            NormEps::Key(k) => c.number(k.name, k.default)?.unwrap_or(c.norm_eps),
            NormEps::Fixed(eps) => eps,
        };
        let act = match self.layout.activation {
            None => c.hidden_act,
            Some((k, default)) => c.activation(k, default)?,
        };
        if act == Activation::Xielu && !matches!(self.names.mlp, MlpNames::PlainParametric { .. }) {
            return Err(Error::Config {
                path: c.path.clone(),
                reason: format!("`hidden_act` is `xielu`, whose learned per-layer scalars only Apertus' MLP stores; the `{}` family has no such parameters", c.model_type),
            });
        }
        let embedding = match sc.embedding {
            EmbeddingScale::None => None,
            EmbeddingScale::SqrtHidden => Some((c.hidden_size as f64).sqrt()),
            EmbeddingScale::SqrtHiddenIf(flag) => c.flag(flag, false).then(|| (c.hidden_size as f64).sqrt()),
            EmbeddingScale::Key(k) => key(Some(k))?,
        };
        let attention_scale = match sc.attention {
            AttentionScale::Default => None,
            AttentionScale::Key(k) => key(Some(k))?.map(|v| v as f32),
            AttentionScale::InverseSqrt(k) => key(Some(k))?.map(|v| (1.0 / v.sqrt()) as f32),
            AttentionScale::Fixed(v) => Some(v as f32),
        };
        Ok(Scalars {
            eps,
            act,
            embedding,
            residual: key(sc.residual)?,
            attention_scale,
            attention_softcap: key(sc.attention_softcap)?.map(|v| v as f32),
            final_softcap: key(sc.final_softcap)?,
            logits_divisor: key(sc.logits_divisor)?,
            // `null` is no "off" here: transformers multiplies the logits by it and fails.
            logits_multiplier: match sc.logits_multiplier {
                Some(k) if c.raw.get(k.name).is_some_and(serde_json::Value::is_null) => {
                    return Err(Error::Config { path: c.path.clone(), reason: format!("key `{}` is null; give the logit scale (transformers multiplies the logits by it)", k.name) })
                }
                k => key(k)?,
            },
            query_position: match sc.query_position {
                None => None,
                Some(qp) => self.query_position_keys(c, qp)?,
            },
        })
    }

    /// `(beta, original)` of [`super::QueryPositionScale`]: beta from config.json's RoPE object
    /// (or the family's default one when config.json has none); the length YaRN's own (which
    /// transformers standardizes from the top-level key first, as [`crate::RopeConfig`] is
    /// read), else the RoPE object's key.
    /// A beta of 0 is no scaling: `None`, so no table or Mul is built (Mistral Small 3.x GGUF
    /// files, `mistral3` without a temperature key).
    fn query_position_keys(&self, c: &crate::DecoderConfig, qp: super::QueryPositionScale) -> Result<Option<(f64, f64)>> {
        use serde_json::Value;
        let given = ["rope_parameters", "rope_scaling"].into_iter().find_map(|k| c.raw.get(k).and_then(Value::as_object).map(|m| (k, m.clone())));
        let default = self.layout.rope_default.scaling.and_then(|t| serde_json::from_str::<serde_json::Map<String, Value>>(t).ok());
        let (where_, params) = match (given, default) {
            (Some((k, m)), _) => (k, m),
            (None, Some(m)) => ("the family's default RoPE parameters", m),
            (None, None) => ("rope_parameters", serde_json::Map::new()),
        };
        let read = |k: &str, why: &str| -> Result<f64> {
            params.get(k).and_then(Value::as_f64).filter(|v| v.is_finite()).ok_or_else(|| Error::Config {
                path: c.path.clone(),
                reason: format!(
                    "`{where_}` has no number `{k}`: the `{}` family scales each query by `1 + {} * ln(1 + floor(position / {}))` ({why})",
                    c.model_type, qp.beta, qp.original
                ),
            })
        };
        let beta = read(qp.beta, "transformers fails without it")?;
        if beta == 0.0 {
            return Ok(None);
        }
        let original = match &c.rope.kind {
            RopeKind::Yarn { original_max_position_embeddings, .. } => *original_max_position_embeddings,
            _ => read(qp.original, "without YaRN the length is the RoPE object's key")?,
        };
        if original <= 0.0 {
            return Err(Error::Config { path: c.path.clone(), reason: format!("`{where_}.{}` must be positive, found {original}", qp.original) });
        }
        Ok(Some((beta, original)))
    }

    /// Each layer's sliding window (`None`: full attention): [`Self::window`]'s size on the
    /// layers [`Self::sliding_layers`] makes slide.
    pub(crate) fn windows(&self, c: &crate::DecoderConfig) -> Result<Vec<Option<usize>>> {
        Ok(match self.window(c)? {
            None => vec![None; c.num_hidden_layers],
            Some(size) => self.sliding_layers(c)?.into_iter().map(|s| s.then_some(size)).collect(),
        })
    }

    /// The window the sliding layers use: `sliding_window`, else the family's default when the
    /// key is absent. None for a family without windows ([`super::LayerKinds::reads_window`]),
    /// with `use_sliding_window: false` where the family reads that switch
    /// ([`super::LayerKinds::qwen_window_keys`]), or with `sliding_window: null`. A family with
    /// a default window whose layers slide by `layer_types` or its pattern builds a sliding mask
    /// in transformers, which raises without a window: `null` there is refused unless no layer
    /// slides (`layer_types` all full); under the generic rule (Mistral, Ministral without
    /// `layer_types`, dots.llm1 by `max_window_layers`) `null` is no window, as there.
    fn window(&self, c: &crate::DecoderConfig) -> Result<Option<usize>> {
        let w = &c.sliding_window;
        if !self.layers.reads_window || (self.layers.qwen_window_keys && w.enabled == Some(false)) {
            return Ok(None);
        }
        match (w.size, w.null) {
            (Some(size), _) => Ok(Some(size)),
            (None, false) => Ok(self.layers.default_window),
            // Sliding layers named by `layer_types` or the family's pattern (the generic rule, every
            // layer sliding, is read as none: Mistral's null window).
            (None, true) if self.layers.default_window.is_some() && (self.layer_types(c).is_some() || self.layers.full_every.is_some() || self.layers.full_pattern.is_some()) && self.sliding_layers(c)?.contains(&true) => Err(Error::Config {
                path: c.path.clone(),
                reason: format!(
                    "`sliding_window` is null but the `{}` layers slide by `layer_types` or the family's pattern: transformers builds their sliding mask from the window and cannot run this config; give the window, or `layer_types` with full layers only",
                    c.model_type
                ),
            }),
            (None, true) => Ok(None),
        }
    }

    /// Which layers slide when there is a window: `layer_types` when present, else SmolLM3's
    /// NoPE layers ([`super::LayerKinds::slide_nope_layers`]), else the family's "every nth
    /// layer is full" pattern or its own rule ([`super::LayerKinds::full_pattern`]), else `max_window_layers` (layers at or above it slide; the Qwen
    /// families' key), else every layer.
    fn sliding_layers(&self, c: &crate::DecoderConfig) -> Result<Vec<bool>> {
        let (w, layers) = (&c.sliding_window, c.num_hidden_layers);
        let max_window_layers = w.max_window_layers.filter(|_| self.layers.qwen_window_keys);
        if self.layer_types(c).is_none() && self.layers.slide_nope_layers {
            // SmolLM3: the layers without RoPE (its NoPE list; `rope_layers` is `All` there, so
            // the windows are not consulted).
            return Ok(self.rotates(c, &vec![None; layers])?.into_iter().map(|r| !r).collect());
        }
        Ok(match (self.layer_types(c), &self.layers.full_every, max_window_layers) {
            (Some(types), _, _) => types.iter().map(|t| t == "sliding_attention").collect(),
            (None, Some(every), _) => {
                let mut n = every.default;
                for k in every.keys {
                    if let Some(v) = c.count(k)? {
                        n = v;
                        break;
                    }
                }
                let full = |i: usize| if every.first { i.is_multiple_of(n) } else { (i + 1).is_multiple_of(n) };
                (0..layers).map(|i| !full(i)).collect()
            }
            (None, None, _) if self.layers.full_pattern.is_some() => {
                let full = self.layers.full_pattern.unwrap_or(|_, _| false);
                (0..layers).map(|i| !full(i, layers)).collect()
            }
            (None, None, Some(first)) => (0..layers).map(|i| i >= first).collect(),
            (None, None, None) => vec![true; layers],
        })
    }

    /// config.json's `layer_types`, where the family's model reads them.
    fn layer_types<'c>(&self, c: &'c crate::DecoderConfig) -> Option<&'c Vec<String>> {
        c.sliding_window.layer_types.as_ref().filter(|_| self.layers.reads_layer_types)
    }

    /// Whether each layer applies RoPE: the sliding layers only where the family's
    /// [`super::RopeLayers`] says so (EXAONE 4 with a window set, Cohere 2 always); else all of
    /// them, unless the family has NoPE layers ([`super::NoRope`]): the config's 0/1 list (0: no
    /// RoPE), else every `interval`th layer without.
    fn rotates(&self, c: &crate::DecoderConfig, windows: &[Option<usize>]) -> Result<Vec<bool>> {
        let layers = c.num_hidden_layers;
        let sliding_only = match self.layers.rope_layers {
            super::RopeLayers::All => false,
            // Windowed: the config has a window, whether or not a layer slides
            // (`Exaone4Attention`: RoPE when `sliding_window is None or self.is_sliding`).
            super::RopeLayers::SlidingIfWindowed => self.window(c)?.is_some(),
            super::RopeLayers::Sliding => true,
        };
        if sliding_only {
            return Ok(windows.iter().map(Option::is_some).collect());
        }
        let Some(nope) = &self.layers.no_rope else { return Ok(vec![true; layers]) };
        let err = |reason: String| Error::Config { path: c.path.clone(), reason };
        match c.raw.get(nope.list) {
            None | Some(serde_json::Value::Null) => {
                let n = c.count(nope.interval)?.unwrap_or(nope.interval_default);
                Ok((0..layers).map(|i| !(i + 1).is_multiple_of(n)).collect())
            }
            Some(serde_json::Value::Array(items)) if items.len() == layers => items
                .iter()
                .map(|v| match v.as_u64() {
                    Some(0) => Ok(false),
                    Some(1) => Ok(true),
                    _ => Err(err(format!("key `{}` must hold 0 (no RoPE) or 1 per layer, found {v}", nope.list))),
                })
                .collect(),
            Some(v) => Err(err(format!("key `{}` must list 0 or 1 for each of the {layers} layers (`num_hidden_layers`), found {v}", nope.list))),
        }
    }

    /// The family's embedding projection and the embeddings' width, when the config asks for one
    /// (its width key set and not the hidden size).
    fn embed_projection(&self, c: &crate::DecoderConfig) -> Result<Option<(super::EmbedProjection, usize)>> {
        let Some(p) = self.layout.embed_projection else { return Ok(None) };
        match c.number(p.width, None)? {
            None => Ok(None),
            Some(w) if w >= 1.0 && w.fract() == 0.0 => Ok((w as usize != c.hidden_size).then_some((p, w as usize))),
            Some(w) => Err(Error::Config { path: c.path.clone(), reason: format!("key `{}` is {w}: the embeddings' width must be a positive whole number", p.width) }),
        }
    }

    /// The width of the token embeddings (and of the head's input): the hidden size, or the
    /// projected embeddings' own.
    fn embed_width(&self, c: &crate::DecoderConfig) -> Result<usize> {
        Ok(self.embed_projection(c)?.map_or(c.hidden_size, |(_, w)| w))
    }

    /// The token embedding table as an initializer, without gathering from it.
    fn embedding_table(&self, b: &mut GraphBuilder, ckpt: &Checkpoint) -> Result<Embedding> {
        let (c, n) = (&ckpt.config, &self.names);
        let recipe = ckpt.tensor(n.embed_tokens, &[c.vocab_size, self.embed_width(c)?])?;
        let table = b.initializer(n.embed_tokens, recipe.clone().cast(b.float));
        Ok(Embedding { table, recipe })
    }

    /// The multimodal embedding part's graph: `input_ids` rows of the token embedding (scaled
    /// as the family scales text embeddings), with the rows of `image_token_id` replaced, in
    /// order, by the rows of `image_features` (`[N, hidden]`, N = 0 at decode steps: the
    /// features get one zero row appended so the gather always has a row to read).
    /// `width` is the features' width: `hidden`, or wider when deepstack blocks ride beside
    /// them (Qwen3-VL, [`crate::arch::vision::deepstack_count`]); then text rows are padded
    /// with zeros to that width, so a deepstack block adds nothing at text tokens.
    pub(crate) fn build_embedding(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, input_ids: &str, image_features: &str, image_token_id: i64, width: usize) -> Result<String> {
        let c = &ckpt.config;
        ckpt.set_optional_prefix(self.optional_prefix);
        let scalars = self.scalars(c)?;
        let Embedding { table, .. } = self.embedding_table(b, ckpt)?;
        let scope = self.names.embed_tokens.trim_end_matches(".weight");
        let mut text = b.op(&format!("{scope}/Gather"), "Gather", &[&table, input_ids], vec![ir::Attr::int("axis", 0)]);
        if let Some(scale) = scalars.embedding {
            let k = scalar(b, &format!("{scope}.embedding_scale"), scale);
            text = b.op(&format!("{scope}/Mul"), "Mul", &[&text, &k], vec![]);
        }
        let s = "image_features/scatter";
        let token = b.const_i64_1d(&format!("{s}/image_token_id"), &[image_token_id]);
        let is_image = b.op(&format!("{s}/is_image"), "Equal", &[input_ids, &token], vec![]);
        let flat_shape = b.const_i64_1d(&format!("{s}/flat_shape"), &[-1]);
        let flat = b.op(&format!("{s}/flat"), "Reshape", &[&is_image, &flat_shape], vec![]);
        let counts = b.op(&format!("{s}/counts"), "Cast", &[&flat], vec![ir::Attr::int("to", ir::DType::I64.to_onnx() as i64)]);
        let axis = b.const_i64_1d(&format!("{s}/axis"), &[0]);
        let rank = b.op(&format!("{s}/rank"), "CumSum", &[&counts, &axis], vec![]);
        let one = b.const_i64_1d(&format!("{s}/one"), &[1]);
        let zero = b.const_i64_1d(&format!("{s}/zero"), &[0]);
        let index = b.op(&format!("{s}/index"), "Sub", &[&rank, &one], vec![]);
        let index = b.op(&format!("{s}/index_clipped"), "Max", &[&index, &zero], vec![]);
        let pad = b.initializer(&format!("{s}/zero_row"), ir::Recipe::from_f32("one zero row".to_string(), vec![1, width], &vec![0.0; width]).cast(b.float));
        let rows = b.op(&format!("{s}/rows"), "Concat", &[image_features, &pad], vec![ir::Attr::int("axis", 0)]);
        let picked = b.op(&format!("{s}/picked"), "Gather", &[&rows, &index], vec![ir::Attr::int("axis", 0)]);
        let tokens = b.op(&format!("{s}/tokens"), "Shape", &[input_ids], vec![]);
        let hidden = b.const_i64_1d(&format!("{s}/hidden"), &[width as i64]);
        let shape = b.op(&format!("{s}/shape"), "Concat", &[&tokens, &hidden], vec![ir::Attr::int("axis", 0)]);
        let picked = b.op(&format!("{s}/picked_3d"), "Reshape", &[&picked, &shape], vec![]);
        let mask_axis = b.const_i64_1d(&format!("{s}/mask_axis"), &[-1]);
        let is_image = b.op(&format!("{s}/is_image_3d"), "Unsqueeze", &[&is_image, &mask_axis], vec![]);
        if width > c.hidden_size {
            // Text rows carry zeros in the deepstack columns (ConstantOfShape + Concat, which
            // every table claims).
            let extra = b.const_i64_1d(&format!("{s}/deepstack_width"), &[(width - c.hidden_size) as i64]);
            let zeros_shape = b.op(&format!("{s}/deepstack_shape"), "Concat", &[&tokens, &extra], vec![ir::Attr::int("axis", 0)]);
            let zero = ir::Recipe::from_f32(format!("{s}/deepstack_value"), vec![1], &[0.0]).cast(b.float);
            let zeros = b.op(&format!("{s}/deepstack_zeros"), "ConstantOfShape", &[&zeros_shape], vec![ir::Attr::tensor("value", zero)]);
            text = b.op(&format!("{s}/text_and_zeros"), "Concat", &[&text, &zeros], vec![ir::Attr::int("axis", -1)]);
        }
        Ok(b.op(&format!("{s}/Where"), "Where", &[&is_image, &picked, &text], vec![]))
    }

    /// Token (and learned position) embeddings of `input_ids`.
    /// `scale` multiplies the gathered rows (Gemma's sqrt(hidden), Granite's
    /// `embedding_multiplier`) with a `Mul` node, not in the table's recipe, so a tied head,
    /// which reads the same table, never sees it.
    fn embed(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, io: &DecoderIo, scale: Option<f64>) -> Result<(Embedding, String)> {
        let (c, n) = (&ckpt.config, &self.names);
        let recipe = ckpt.tensor(n.embed_tokens, &[c.vocab_size, self.embed_width(c)?])?;
        let table = b.initializer(n.embed_tokens, recipe.clone().cast(b.float));
        let scope = n.embed_tokens.trim_end_matches(".weight");
        let mut h = b.op(&format!("{scope}/Gather"), "Gather", &[&table, &io.input_ids], vec![ir::Attr::int("axis", 0)]);
        if let Some(scale) = scale {
            let k = scalar(b, &format!("{scope}.embedding_scale"), scale);
            h = b.op(&format!("{scope}/Mul"), "Mul", &[&h, &k], vec![]);
        }
        // OPT-350m: the narrower rows projected to the hidden size before the positions join.
        if let Some((p, width)) = self.embed_projection(c)? {
            let w = LinearWeights::read(ckpt, b, p.into, width, c.hidden_size, false, self.layout.weights)?;
            h = linear(b, p.into, &h, w);
        }
        if let Positions::Learned { offset } = self.positions(c) {
            let wpe_name = n.embed_positions.ok_or_else(|| Error::Config {
                path: c.path.clone(),
                reason: format!("the `{}` family table has learned positions but no embed_positions name", c.model_type),
            })?;
            // OPT's rows start `offset` on: the table is written from there, so position p
            // reads row p + offset with no index arithmetic (which not every table runs on i64).
            let rows = c.max_position_embeddings + offset;
            let positions = ckpt.tensor(wpe_name, &[rows, c.hidden_size])?;
            let positions = if offset == 0 { positions } else { positions.slice(0, offset, rows) }.cast(b.float);
            let wpe = b.initializer(wpe_name, positions);
            let scope = wpe_name.trim_end_matches(".weight");
            let pos = b.op(&format!("{scope}/Gather"), "Gather", &[&wpe, &io.position_ids], vec![ir::Attr::int("axis", 0)]);
            h = b.op(&format!("{scope}/Add"), "Add", &[&h, &pos], vec![]);
        }
        if let Positions::Sinusoidal { offset } = self.positions(c) {
            let rows = c.max_position_embeddings;
            // fairseq zeroes the padding id's row of the whole table (`padding_idx`): read at
            // position `pad - offset` when the pad id is at least the offset.
            let pad = c.pad_token_id.and_then(|p| usize::try_from(p).ok());
            let values = sinusoidal_positions(offset, rows, c.hidden_size, pad);
            let name = "embed_positions.sinusoidal";
            let wpe = b.initializer(name, ir::Recipe::from_f32(name, vec![rows, c.hidden_size], &values).cast(b.float));
            let pos = b.op("embed_positions/Gather", "Gather", &[&wpe, &io.position_ids], vec![ir::Attr::int("axis", 0)]);
            h = b.op("embed_positions/Add", "Add", &[&h, &pos], vec![]);
        }
        Ok((Embedding { table, recipe }, h))
    }

    /// Dimensions, biases, one mask per distinct window and the RoPE cache(s).
    fn shared<'a>(&self, b: &mut GraphBuilder, c: &'a crate::DecoderConfig, io: &'a DecoderIo, scalars: Scalars) -> Result<Shared<'a>> {
        let l = &self.layout;
        let heads = Heads { q: c.num_attention_heads, kv: c.num_key_value_heads, head_dim: c.head_dim };
        let windows = self.windows(c)?;
        let mut masks = BTreeMap::new();
        for &w in &windows {
            masks.entry(w).or_insert_with(|| {
                let scope = w.map_or("attn_mask".to_string(), |size| format!("attn_mask_window{size}"));
                let causal = causal_padding_mask(b, &scope, &io.input_ids, &io.attention_mask, w, io.kv_cache.max_length());
                match self.positions(c) {
                    Positions::Alibi(slopes) => {
                        let dim = |name: &str, axis: usize| b.graph.inputs.iter().find(|v| v.name == name).and_then(|v| v.shape.as_ref()?.get(axis).cloned());
                        let keys = match io.kv_cache.max_length() {
                            Some(n) => Some(ir::Dim::Fixed(n as i64)),
                            None => dim(&io.attention_mask, 1),
                        };
                        let unknown = || ir::Dim::sym("unk");
                        let dims = [dim(&io.input_ids, 0).unwrap_or_else(unknown), dim(&io.input_ids, 1).unwrap_or_else(unknown), keys.unwrap_or_else(unknown)];
                        alibi_mask(b, &format!("{scope}/alibi"), &causal, slopes, heads, c.max_position_embeddings, dims)
                    }
                    _ => causal.mask,
                }
            });
        }
        let rotates = self.rotates(c, &windows)?;
        let rotary = self.positions(c) == Positions::Rotary && rotates.iter().any(|&r| r);
        let interleaved = l.rotary == RotaryPairs::Interleaved;
        if interleaved && c.mrope.is_some() {
            return Err(Error::Config { path: c.path.clone(), reason: format!("the `{}` family rotates interleaved pairs, which multimodal RoPE (`mrope_section`) does not", c.model_type) });
        }
        let rope = rotary.then(|| {
            let cache = RopeCache::build(b, "rotary_emb", &c.rope, c.head_dim, c.rotary_dim(), c.max_position_embeddings, &io.attention_mask, io.kv_cache.max_length(), l.rope_reversed);
            match &c.mrope {
                Some(m) => cache.multimodal(b, &io.position_ids, &m.rows()),
                None => cache.with_interleaved(interleaved),
            }
        });
        let clip = match l.clip_qkv {
            None => None,
            Some(key) => c.number(key, None)?.map(|v| (scalar(b, &format!("{key}.min"), -v), scalar(b, &format!("{key}.max"), v))),
        };
        let local_rope = match self.layers.local_rope {
            Some(default) if rotary && windows.iter().any(Option::is_some) => {
                let theta = match default {
                    super::LocalRope::Base(theta) => theta,
                    super::LocalRope::Unscaled => c.rope.theta,
                };
                let local = c.sliding_rope.clone().unwrap_or(RopeConfig {
                    theta,
                    kind: RopeKind::Default,
                    partial_rotary_factor: c.rope.partial_rotary_factor,
                    mscale: None,
                });
                let dim = (c.head_dim as f64 * local.partial_rotary_factor) as usize;
                Some(RopeCache::build(b, "rotary_emb_local", &local, c.head_dim, dim, c.max_position_embeddings, &io.attention_mask, io.kv_cache.max_length(), l.rope_reversed).with_interleaved(interleaved))
            }
            _ => None,
        };
        let block = match l.block_when {
            Some(switch) if c.flag(switch.key, switch.default) => switch.on,
            _ => l.block,
        };
        Ok(Shared {
            c,
            io,
            heads,
            block,
            hidden: c.hidden_size,
            q_dim: heads.q * heads.head_dim,
            kv_dim: heads.kv * heads.head_dim,
            biases: (l.qkv_bias.resolve(c), l.o_bias.resolve(c), l.mlp_bias.resolve(c)),
            masks,
            windows,
            rotates,
            clip,
            write: io.kv_cache.max_length().map(|_| write_indices(b, "kv_cache/write_indices", &io.input_ids, &io.attention_mask)),
            rope,
            local_rope,
            residual: scalars.residual.map(|r| scalar(b, "residual_multiplier", r)),
            query_position: scalars.query_position.map(|(beta, original)| query_position_scale(b, &io.position_ids, beta, original, c.max_position_embeddings)),
            scalars,
        })
    }

    /// Decoder layer `i`: the attention and MLP blocks, each with the norms the table lists
    /// around it, an optional residual multiplier, and its residual add.
    fn layer(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, sh: &Shared, i: usize, h: &str) -> Result<String> {
        let (n, l) = (&self.names, &self.layout);
        let layer = n.layer.replace("{i}", &i.to_string());
        let s = |part: &str| format!("{layer}.{part}");
        let eps = sh.scalars.eps;
        let around = |b: &mut GraphBuilder, scope: Option<&str>, x: &str| -> Result<String> {
            match scope {
                None => Ok(x.to_string()),
                Some(scope) => norm(b, ckpt, l.norm, &s(scope), x, sh.hidden, eps),
            }
        };
        if sh.block == BlockShape::PostNorm {
            // OPT-350m: `ln1(h + attn(h))`, then `ln2(h + mlp(h))`, in transformers' order. Its
            // norms are the before-attention and before-MLP ones; a table naming after-norms too
            // describes another block.
            if let Some(extra) = n.norms.after_attention.or(n.norms.after_mlp) {
                return Err(Error::Config {
                    path: sh.c.path.clone(),
                    reason: format!("internal: the `{}` table's post-norm block names an after-norm (`{extra}`), which that block does not apply", sh.c.model_type),
                });
            }
            let o = self.attention_block(b, ckpt, sh, i, &layer, h)?;
            let o = residual_scale(b, sh, &s("attn_residual/Mul"), &o);
            let h = b.op(&s("attn_residual/Add"), "Add", &[h, &o], vec![]);
            let h = around(b, n.norms.before_attention, &h)?;
            let m = self.mlp_block(b, ckpt, sh, i, &layer, &h)?;
            let m = residual_scale(b, sh, &s("mlp_residual/Mul"), &m);
            let h = b.op(&s("mlp_residual/Add"), "Add", &[&h, &m], vec![]);
            return around(b, n.norms.before_mlp, &h);
        }
        let x = around(b, n.norms.before_attention, h)?;
        let o = self.attention_block(b, ckpt, sh, i, &layer, &x)?;
        if matches!(sh.block, BlockShape::Parallel | BlockShape::ParallelSharedNorm) {
            // Phi: `(attn(ln(h)) + mlp(ln(h))) + h`, in transformers' order; GPT-NeoX's MLP reads
            // its own norm of `h` (`mlp + attn` first there: the same rounding, `+` commutes);
            // Falcon's parallel block the attention's, its table's before-MLP norm being the
            // sequential block's.
            let mx = match (n.norms.before_mlp, sh.block) {
                (Some(_), BlockShape::Parallel) => around(b, n.norms.before_mlp, h)?,
                _ => x.clone(),
            };
            let m = self.mlp_block(b, ckpt, sh, i, &layer, &mx)?;
            let both = b.op(&s("parallel/Add"), "Add", &[&o, &m], vec![]);
            let both = residual_scale(b, sh, &s("parallel_residual/Mul"), &both);
            return Ok(b.op(&s("parallel_residual/Add"), "Add", &[&both, h], vec![]));
        }
        if sh.block == BlockShape::ParallelResidualFirst {
            // Cohere: `(h + attn(ln(h))) + mlp(ln(h))`, in transformers' order.
            let m = self.mlp_block(b, ckpt, sh, i, &layer, &x)?;
            let o = residual_scale(b, sh, &s("attn_residual/Mul"), &o);
            let h = b.op(&s("attn_residual/Add"), "Add", &[h, &o], vec![]);
            let m = residual_scale(b, sh, &s("mlp_residual/Mul"), &m);
            return Ok(b.op(&s("mlp_residual/Add"), "Add", &[&h, &m], vec![]));
        }
        let after = |scope: Option<&'static str>| scope.filter(|_| l.after_norms_when.is_none_or(|(key, default)| sh.c.flag(key, default)));
        // A.X K1: the after-MLP norm is the MoE block's; a dense layer's stored copy is unused.
        let after_mlp = match (&n.mlp, l.after_mlp_norm_sparse_only) {
            (MlpNames::Experts(moe), true) if !super::moe::MoeSettings::read(moe, sh.c)?.sparse(i) => {
                if let Some(norm) = n.norms.after_mlp {
                    let name = format!("{}.weight", s(norm));
                    if ckpt.has(&name) {
                        ckpt.mark_unused(&name, "the after-MLP norm of a dense layer: the family applies it to its mixture of experts only");
                    }
                }
                None
            }
            _ => after(n.norms.after_mlp),
        };
        let o = around(b, after(n.norms.after_attention), &o)?;
        let o = residual_scale(b, sh, &s("attn_residual/Mul"), &o);
        let h = b.op(&s("attn_residual/Add"), "Add", &[h, &o], vec![]);
        let x = around(b, n.norms.before_mlp, &h)?;
        let m = self.mlp_block(b, ckpt, sh, i, &layer, &x)?;
        let m = around(b, after_mlp, &m)?;
        let m = residual_scale(b, sh, &s("mlp_residual/Mul"), &m);
        Ok(b.op(&s("mlp_residual/Add"), "Add", &[&h, &m], vec![]))
    }

    /// q/k/v projections, optional per-head q/k norms, RoPE, attention over the cache, and the
    /// output projection.
    fn attention_block(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, sh: &Shared, i: usize, layer: &str, x: &str) -> Result<String> {
        let (n, l, heads) = (&self.names, &self.layout, sh.heads);
        let s = |part: &str| format!("{layer}.{part}");
        let (qkv_bias, o_bias, _) = sh.biases;
        if let (AttentionNames::Latent(names), Some(dims)) = (&n.attention, &sh.c.latent) {
            if n.output_gate.is_some() {
                return Err(Error::Config { path: sh.c.path.clone(), reason: format!("the `{}` family's latent attention is not built together with an output gate", sh.c.model_type) });
            }
            return latent::block(b, ckpt, sh, self, names, dims, i, layer, x);
        }
        // MiniCPM5-MoE's per-head gate, read with the query ([`AttentionNames::GatedQuery`]).
        let mut query_gate = None;
        let (q, k, v) = match &n.attention {
            AttentionNames::Latent(_) => {
                return Err(Error::Config { path: sh.c.path.clone(), reason: "internal: a latent-attention family's config was read without its sizes".into() })
            }
            AttentionNames::Separate { q, k, v } => {
                // A slot on any of q, k, v is a slot on all three (empty where no adapter
                // targets it), so the packed QKV projection still forms (fuse.pack_qkv.lora).
                let group = [s(q), s(k), s(v)];
                if group.iter().any(|m| b.lora.contains(m)) {
                    b.lora.extend(group);
                }
                let mut proj = |part: &str, out: usize| -> Result<String> {
                    let w = LinearWeights::read(ckpt, b, &s(part), sh.hidden, out, qkv_bias, l.weights)?;
                    Ok(linear(b, &s(part), x, w))
                };
                (proj(q, sh.q_dim)?, proj(k, sh.kv_dim)?, proj(v, sh.kv_dim)?)
            }
            AttentionNames::GatedQuery { q_gate, k, v } => {
                let parts = LinearWeights::read_grouped(ckpt, b, &s(q_gate), sh.hidden, heads.q, &[1, 1], heads.head_dim, qkv_bias)?;
                let [wq, wg]: [LinearWeights; 2] = parts.try_into().map_err(|_| unreachable_parts())?;
                let scope = |p: &str| format!("{}.{p}", s(q_gate));
                query_gate = Some(linear(b, &scope("gate"), x, wg));
                let mut proj = |part: &str, out: usize| -> Result<String> {
                    let w = LinearWeights::read(ckpt, b, &s(part), sh.hidden, out, qkv_bias, l.weights)?;
                    Ok(linear(b, &s(part), x, w))
                };
                let (k, v) = (proj(k, sh.kv_dim)?, proj(v, sh.kv_dim)?);
                (linear(b, &scope("q"), x, wq), k, v)
            }
            AttentionNames::FusedPerHead { qkv } => {
                if heads.q != heads.kv {
                    return Err(Error::Config {
                        path: sh.c.path.clone(),
                        reason: format!("`{}`'s per-head fused q/k/v has one key/value head per query head; `num_key_value_heads` is {}", sh.c.model_type, heads.kv),
                    });
                }
                if l.weights != WeightLayout::Linear {
                    return Err(Error::Config { path: sh.c.path.clone(), reason: format!("`{}`'s per-head fused q/k/v is read as `[out, in]` (Linear) rows only", sh.c.model_type) });
                }
                let parts = LinearWeights::read_fused_per_head(ckpt, b, &s(qkv), sh.hidden, heads.q, heads.head_dim, qkv_bias)?;
                let [wq, wk, wv]: [LinearWeights; 3] = parts.try_into().map_err(|_| unreachable_parts())?;
                let scope = |p: &str| format!("{}.{p}", s(qkv));
                (linear(b, &scope("q"), x, wq), linear(b, &scope("k"), x, wk), linear(b, &scope("v"), x, wv))
            }
            AttentionNames::FusedPerGroup { qkv } => {
                if l.weights != WeightLayout::Linear {
                    return Err(Error::Config { path: sh.c.path.clone(), reason: format!("`{}`'s grouped fused q/k/v is read as `[out, in]` (Linear) rows only", sh.c.model_type) });
                }
                let parts = LinearWeights::read_fused_per_group(ckpt, b, &s(qkv), sh.hidden, heads.kv, heads.q / heads.kv, heads.head_dim, qkv_bias)?;
                let [wq, wk, wv]: [LinearWeights; 3] = parts.try_into().map_err(|_| unreachable_parts())?;
                let scope = |p: &str| format!("{}.{p}", s(qkv));
                (linear(b, &scope("q"), x, wq), linear(b, &scope("k"), x, wk), linear(b, &scope("v"), x, wv))
            }
            AttentionNames::FusedShards { qkv, shards } => {
                // transformers splits by width (`hidden / shards` rows per part and shard), so
                // a head may straddle two shards: rows, not heads, are the unit.
                if heads.q != heads.kv || !sh.q_dim.is_multiple_of(*shards) {
                    return Err(Error::Config {
                        path: sh.c.path.clone(),
                        reason: format!(
                            "`{}`'s q/k/v projection is laid out in {shards} shards: its width {} must split evenly over them, with as many key/value heads as query heads ({} and {})",
                            sh.c.model_type, sh.q_dim, heads.kv, heads.q
                        ),
                    });
                }
                if l.weights != WeightLayout::Linear {
                    return Err(Error::Config { path: sh.c.path.clone(), reason: format!("`{}`'s sharded fused q/k/v is read as `[out, in]` (Linear) rows only", sh.c.model_type) });
                }
                let local = sh.q_dim / shards;
                let parts = LinearWeights::read_grouped(ckpt, b, &s(qkv), sh.hidden, *shards, &[local, local, local], 1, qkv_bias)?;
                let [wq, wv, wk]: [LinearWeights; 3] = parts.try_into().map_err(|_| unreachable_parts())?;
                let scope = |p: &str| format!("{}.{p}", s(qkv));
                (linear(b, &scope("q"), x, wq), linear(b, &scope("k"), x, wk), linear(b, &scope("v"), x, wv))
            }
            AttentionNames::Fused { qkv } => {
                let dims = [sh.q_dim, sh.kv_dim, sh.kv_dim];
                let parts = LinearWeights::read_fused(ckpt, b, &s(qkv), sh.hidden, &dims, qkv_bias, l.weights)?;
                let [wq, wk, wv]: [LinearWeights; 3] = parts.try_into().map_err(|_| unreachable_parts())?;
                let [sq, sk, sv] = fused_scopes(b, &s(qkv), crate::lora::QKV_PARTS);
                (linear(b, &sq, x, wq), linear(b, &sk, x, wk), linear(b, &sv, x, wv))
            }
        };
        let clip = |b: &mut GraphBuilder, (q, k, v): (String, String, String)| match &sh.clip {
            None => (q, k, v),
            Some((lo, hi)) => {
                let mut clamp = |name: &str, x: String| {
                    let x = b.op(&s(&format!("self_attn.clip_qkv.{name}/Max")), "Max", &[&x, lo], vec![]);
                    b.op(&s(&format!("self_attn.clip_qkv.{name}/Min")), "Min", &[&x, hi], vec![])
                };
                (clamp("q", q), clamp("k", k), clamp("v", v))
            }
        };
        // OLMo 1 clamps the projections; OLMoE clamps what its q/k norms give.
        let (q, k, v) = if l.clip_after_qk_norm { (q, k, v) } else { clip(b, (q, k, v)) };
        let qk_norm = n.qk_norm.as_ref().filter(|qk| qk.when.is_none_or(|key| sh.c.flag(key, false)));
        let (q, k) = match qk_norm {
            Some(qk) if !qk.after_rope => self.qk_norms(b, ckpt, sh, layer, qk, q, k)?,
            _ => (q, k),
        };
        let (q, k, v) = if l.clip_after_qk_norm { clip(b, (q, k, v)) } else { (q, k, v) };
        // Ministral 3's position scale, before RoPE: the rotation is linear and the factor is
        // the query's own position's, so this is transformers' scaling after it.
        let q = match &sh.query_position {
            None => q,
            Some(scale) => b.op(&s("self_attn.query_position_scale/Mul"), "Mul", &[&q, scale], vec![]),
        };
        let window = sh.windows[i];
        let rope = if window.is_some() { sh.local_rope.as_ref().or(sh.rope.as_ref()) } else { sh.rope.as_ref() };
        let rope = rope.filter(|_| sh.rotates[i]);
        let (q, k) = match rope {
            None => (q, k),
            Some(rope) => (
                rope.apply(b, &s("self_attn.q_rotary"), &q, heads.q, &sh.io.position_ids),
                rope.apply(b, &s("self_attn.k_rotary"), &k, heads.kv, &sh.io.position_ids),
            ),
        };
        // HunYuan normalizes the rotated q and k.
        let (q, k) = match qk_norm {
            Some(qk) if qk.after_rope => self.qk_norms(b, ckpt, sh, layer, qk, q, k)?,
            _ => (q, k),
        };
        let scale = sh.scalars.attention_scale.or_else(|| sh.c.attention_scale(i, heads.default_scale()));
        let (past_k, past_v) = &sh.io.past[i];
        let (present_k, present_v) = &sh.io.present[i];
        let attn_scope = s(n.o_proj.rsplit_once('.').map_or("self_attn", |(p, _)| p));
        let mask = &sh.masks[&window];
        let (scale, softcap) = (scale, sh.scalars.attention_softcap);
        if let Some(sinks) = n.sinks {
            if n.output_gate.is_some() || query_gate.is_some() {
                return Err(Error::Config { path: sh.c.path.clone(), reason: format!("the `{}` family's attention sinks are not built together with an output gate", sh.c.model_type) });
            }
            return self.sink_attention_block(b, ckpt, sh, i, layer, [&q, &k, &v], sinks, scale, &attn_scope);
        }
        let y = match &sh.write {
            None => attention(b, &attn_scope, [&q, &k, &v], mask, [past_k, past_v], [present_k, present_v], heads, scale, softcap),
            Some(write) => {
                static_attention(b, &attn_scope, [&q, &k, &v], mask, write, [past_k, past_v], [present_k, present_v], heads, scale, softcap)
            }
        };
        // AFMoE gates the heads' output by the attention's input; MiniCPM5-MoE by the gate its
        // query projection gave.
        let y = match (n.output_gate, query_gate) {
            (None, None) => y,
            (Some(_), Some(_)) => {
                return Err(Error::Config { path: sh.c.path.clone(), reason: format!("the `{}` family names two output gates", sh.c.model_type) });
            }
            (Some(gate), None) => {
                let w = LinearWeights::read(ckpt, b, &s(gate), sh.hidden, sh.q_dim, false, l.weights)?;
                let g = linear(b, &s(gate), x, w);
                let g = b.op(&s(&format!("{gate}/Sigmoid")), "Sigmoid", &[&g], vec![]);
                b.op(&s("self_attn.output_gate/Mul"), "Mul", &[&y, &g], vec![])
            }
            (None, Some(g)) => {
                let g = b.op(&s("self_attn.query_gate/Sigmoid"), "Sigmoid", &[&g], vec![]);
                b.op(&s("self_attn.output_gate/Mul"), "Mul", &[&y, &g], vec![])
            }
        };
        let o = LinearWeights::read(ckpt, b, &s(n.o_proj), sh.q_dim, sh.hidden, o_bias, l.weights)?;
        Ok(linear(b, &s(n.o_proj), &y, o))
    }

    /// q and k through the family's q/k norms: per head, per head with a weight of its own per
    /// head, or over the whole projection.
    #[allow(clippy::too_many_arguments)]
    fn qk_norms(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, sh: &Shared, layer: &str, qk: &QkNorm, q: String, k: String) -> Result<(String, String)> {
        let (l, heads, eps) = (&self.layout, sh.heads, sh.scalars.eps);
        let s = |part: &str| format!("{layer}.{part}");
        Ok(match qk.over {
            NormOver::Head => (
                per_head_norm(b, ckpt, l.norm, &s(qk.q), &q, heads.q, heads.head_dim, eps)?,
                per_head_norm(b, ckpt, l.norm, &s(qk.k), &k, heads.kv, heads.head_dim, eps)?,
            ),
            NormOver::EachHead(stored) => {
                let mut each = |scope: &str, x: &str, count: usize| -> Result<String> {
                    let weight = head_weights(ckpt, scope, stored, count, heads.head_dim)?;
                    per_head_weighted_layer_norm(b, ckpt, scope, x, weight, count, heads.head_dim, eps)
                };
                (each(&s(qk.q), &q, heads.q)?, each(&s(qk.k), &k, heads.kv)?)
            }
            NormOver::Projection => (norm(b, ckpt, l.norm, &s(qk.q), &q, sh.q_dim, eps)?, norm(b, ckpt, l.norm, &s(qk.k), &k, sh.kv_dim, eps)?),
        })
    }

    /// The attention of a family with sinks (gpt-oss) over the dynamic cache, and the output
    /// projection. The static cache and softcapping are refused here (before anything is
    /// written): the sink block has no form of either yet.
    #[allow(clippy::too_many_arguments)]
    fn sink_attention_block(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, sh: &Shared, i: usize, layer: &str, qkv: [&str; 3], sinks: &str, scale: Option<f32>, attn_scope: &str) -> Result<String> {
        let (n, l, heads) = (&self.names, &self.layout, sh.heads);
        let s = |part: &str| format!("{layer}.{part}");
        let refuse = |reason: String| Error::Config { path: sh.c.path.clone(), reason };
        if sh.write.is_some() {
            return Err(refuse(format!("the `{}` family's attention sinks have no static KV cache form; build with the dynamic cache (no --kv-cache static)", sh.c.model_type)));
        }
        if sh.scalars.attention_softcap.is_some() {
            return Err(refuse(format!("the `{}` family's attention sinks are not built together with attention softcapping", sh.c.model_type)));
        }
        let name = s(sinks);
        let recipe = ckpt.tensor(&name, &[heads.q])?.cast(b.float);
        let sinks = b.initializer(&name, recipe);
        let scale = scale.unwrap_or(heads.default_scale() as f32);
        let (past_k, past_v) = &sh.io.past[i];
        let (present_k, present_v) = &sh.io.present[i];
        let mask = &sh.masks[&sh.windows[i]];
        let input_ids = &sh.io.input_ids;
        let token_dims = b.graph.inputs.iter().find(|v| &v.name == input_ids).and_then(|v| v.shape.clone()).unwrap_or_default();
        let token_dims = token_dims.into_iter().take(2).collect();
        let y = sink_attention(b, attn_scope, qkv, mask, [past_k, past_v], [present_k, present_v], heads, scale, &sinks, token_dims);
        let o = LinearWeights::read(ckpt, b, &s(n.o_proj), sh.q_dim, sh.hidden, sh.biases.1, l.weights)?;
        Ok(linear(b, &s(n.o_proj), &y, o))
    }

    /// The MLP in the family's layout (gated, gated with a fused gate/up, or plain).
    fn mlp_block(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, sh: &Shared, i: usize, layer: &str, x: &str) -> Result<String> {
        self.mlp(b, ckpt, sh, &self.names.mlp, i, layer, x)
    }

    /// The MLP `names` describe; a mixture of experts builds its own block, or its dense MLP
    /// on the layers that are not sparse.
    #[allow(clippy::too_many_arguments)]
    fn mlp(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, sh: &Shared, names: &MlpNames, i: usize, layer: &str, x: &str) -> Result<String> {
        let l = &self.layout;
        let s = |part: &str| format!("{layer}.{part}");
        let (hidden, inter, act, mlp_bias) = (sh.hidden, sh.c.intermediate_size, sh.scalars.act, sh.biases.2);
        Ok(match names {
            MlpNames::Experts(moe) => {
                let settings = super::moe::MoeSettings::read(moe, sh.c)?;
                if !settings.sparse(i) {
                    let dense = moe.dense.as_ref().ok_or_else(|| Error::Config {
                        path: sh.c.path.clone(),
                        reason: format!("layer {i} is dense by the config (`decoder_sparse_step` / `mlp_only_layers`, `first_k_dense_replace` or `mlp_layer_types`), but the `{}` table has no dense MLP", sh.c.model_type),
                    })?;
                    return self.mlp(b, ckpt, sh, dense, i, layer, x);
                }
                super::moe::block(b, ckpt, moe, &settings, layer, x, &sh.io.input_ids, hidden, l.weights, act, mlp_bias)?
            }
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
                let [gs, us] = fused_scopes(b, &s(gate_up), crate::lora::GATE_UP_PARTS);
                let scopes = GatedScopes { gate: &gs, up: &us, down: &s(down) };
                gated(b, &s(mlp_scope(down)), scopes, x, [g, u, d], act)
            }
            MlpNames::PlainParametric { up, down, act: params } if act == Activation::Xielu => {
                let u = LinearWeights::read(ckpt, b, &s(up), hidden, inter, mlp_bias, l.weights)?;
                let d = LinearWeights::read(ckpt, b, &s(down), inter, hidden, mlp_bias, l.weights)?;
                let u = linear(b, &s(up), x, u);
                let a = xielu(b, &s(params), &u, xielu_params(ckpt, &s(params))?);
                linear(b, &s(down), &a, d)
            }
            MlpNames::Plain { up, down } | MlpNames::PlainParametric { up, down, .. } => {
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
        let bias = self.layout.lm_head_bias.resolve(c);
        if !c.tie_word_embeddings.unwrap_or(self.layout.tie_default) {
            let head = LinearWeights::torch(ckpt, b, n.lm_head, self.embed_width(c)?, c.vocab_size, bias)?;
            return Ok(linear(b, HEAD_SCOPE, h, head));
        }
        if bias {
            return Err(Error::Config {
                path: c.path.clone(),
                reason: format!("`tie_word_embeddings` is true but the `{}` head has a bias (`lm_head.bias`), which a tied head cannot hold", c.model_type),
            });
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
                let scope = HEAD_SCOPE;
                let perm = vec![ir::Attr::ints("perm", &[1, 0])];
                let table = b.op(&format!("{scope}/Transpose"), "Transpose", &[&embedding.table], perm);
                b.op(&format!("{scope}/MatMul"), "MatMul", &[h, &table], vec![])
            }
            TiedHead::Copy => {
                let head = LinearWeights { weight: embedding.recipe.clone().transpose(vec![1, 0]).cast(b.float), bias: None };
                linear(b, HEAD_SCOPE, h, head)
            }
        })
    }
}

/// The head's node scope whatever the checkpoint calls the module (GPT-NeoX's `embed_out`): the
/// quantize step finds the head by it (`builder/src/quantize/select.rs`); the weight keeps its
/// checkpoint name in the recipe.
const HEAD_SCOPE: &str = "lm_head";

/// The `[heads, head_dim]` weight of a per-head q/k LayerNorm (f32), from one stacked tensor
/// or from one tensor per head.
fn head_weights(ckpt: &Checkpoint, scope: &str, stored: HeadWeights, heads: usize, head_dim: usize) -> Result<ir::Recipe> {
    match stored {
        HeadWeights::Stacked => Ok(ckpt.tensor(&format!("{scope}.weight"), &[heads, head_dim])?.cast(ir::DType::F32)),
        HeadWeights::Split(each) => {
            let rows = (0..heads)
                .map(|h| {
                    let name = format!("{scope}.{}.weight", each.replace("{h}", &h.to_string()));
                    Ok(ckpt.tensor(&name, &[head_dim])?.cast(ir::DType::F32).reshape(vec![1, head_dim]))
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(ir::Recipe::concat(rows, 0)?)
        }
    }
}

/// `1 + beta * ln(1 + floor(position / original))` per token, `[batch, seq, 1]` in the graph's
/// float type: a table over the positions the RoPE cache covers, computed in f32 as transformers
/// computes it (`get_llama_4_attn_scale`), gathered by `position_ids` as the cos/sin caches are
/// (no op beyond Gather, which every table claims).
fn query_position_scale(b: &mut GraphBuilder, position_ids: &str, beta: f64, original: f64, positions: usize) -> String {
    let (beta, original) = (beta as f32, original as f32);
    let table: Vec<f32> = (0..positions).map(|p| 1.0 + beta * (1.0 + (p as f32 / original).floor()).ln()).collect();
    let label = format!("query position scale 1 + {beta} ln(1 + floor(p / {original})), p < {positions}");
    let table = b.initializer("query_position_scale.table", ir::Recipe::from_f32(label, vec![positions, 1], &table).cast(b.float));
    b.op("query_position_scale/Gather", "Gather", &[&table, position_ids], vec![ir::Attr::int("axis", 0)])
}

/// xIELU's scalars of one layer (`{scope}.alpha_p`, `.alpha_n`, `.beta`, `.eps`, one value
/// each), read when the graph is built (four numbers, not weights) and turned into what the
/// forward uses: `softplus(alpha_p)`, `beta + softplus(alpha_n)` (computed in f64, rounded once).
fn xielu_params(ckpt: &Checkpoint, scope: &str) -> Result<XieluParams> {
    let value = |name: &str| ckpt.scalar_value(&format!("{scope}.{name}"), "xIELU's scalar, a graph constant (after softplus for the alphas)");
    // torch's softplus (threshold 20: the identity above it).
    let softplus = |v: f64| if v > 20.0 { v } else { v.exp().ln_1p() };
    let beta = value("beta")?;
    Ok(XieluParams { alpha_p: softplus(value("alpha_p")?) as f32, alpha_n: (beta + softplus(value("alpha_n")?)) as f32, beta: beta as f32, eps: value("eps")? as f32 })
}

/// A scalar constant in the graph's dtype (rounded to it, as transformers rounds its
/// multipliers to the activations' dtype).
fn scalar(b: &mut GraphBuilder, name: &str, value: f64) -> String {
    let label = format!("{name} = {value}");
    b.initializer(name, ir::Recipe::from_f32(label, vec![], &[value as f32]).cast(b.float))
}

/// Rows `offset..offset + rows` of fairseq's sinusoidal table (`[rows, dim]`, row-major), in
/// f32 as torch computes it: each frequency `exp(i * -(ln 10000 / (half - 1)))` and each angle
/// `position * frequency` rounded to f32, the sines of the first half, then the cosines, a zero
/// column when `dim` is odd, and the row of the padding id (`padding`, a row of the whole
/// table) zero ([`Positions::Sinusoidal`]).
fn sinusoidal_positions(offset: usize, rows: usize, dim: usize, padding: Option<usize>) -> Vec<f32> {
    let half = dim / 2;
    let step = -((10000f64.ln() / (half.max(2) - 1) as f64) as f32);
    let freqs: Vec<f32> = (0..half).map(|i| (i as f32 * step).exp()).collect();
    let mut out = vec![0f32; rows * dim];
    for (r, row) in out.chunks_exact_mut(dim).enumerate() {
        let p = (r + offset) as f32;
        for (i, f) in freqs.iter().enumerate() {
            let angle = p * f;
            row[i] = angle.sin();
            row[half + i] = angle.cos();
        }
    }
    if let Some(r) = padding.and_then(|p| p.checked_sub(offset)).filter(|&r| r < rows) {
        out[r * dim..(r + 1) * dim].fill(0.0);
    }
    out
}

/// `x * residual_multiplier` (Granite), or `x` when the family has none.
fn residual_scale(b: &mut GraphBuilder, sh: &Shared, name: &str, x: &str) -> String {
    match &sh.residual {
        None => x.to_string(),
        Some(k) => b.op(name, "Mul", &[x, k], vec![]),
    }
}

/// Logits divided by `logits_scaling` (Granite) or multiplied by `logit_scale` (Cohere), then
/// soft-capped as `cap * tanh(logits / cap)` (Gemma 2), in transformers' order; unchanged when
/// the family has none.
fn scale_logits(b: &mut GraphBuilder, logits: &str, sc: &Scalars) -> String {
    let mut y = logits.to_string();
    if let Some(d) = sc.logits_divisor {
        let k = scalar(b, "logits_scaling", d);
        y = b.op("logits_scaling/Div", "Div", &[&y, &k], vec![]);
    }
    if let Some(m) = sc.logits_multiplier {
        let k = scalar(b, "logit_scale", m);
        y = b.op("logit_scale/Mul", "Mul", &[&y, &k], vec![]);
    }
    if let Some(cap) = sc.final_softcap {
        let k = scalar(b, "final_logit_softcapping", cap);
        let x = b.op("final_logit_softcapping/Div", "Div", &[&y, &k], vec![]);
        let t = b.op("final_logit_softcapping/Tanh", "Tanh", &[&x], vec![]);
        y = b.op("final_logit_softcapping/Mul", "Mul", &[&t, &k], vec![]);
    }
    y
}

/// The MLP's scope from its down projection's name (`mlp.down_proj` -> `mlp`).
fn mlp_scope(down: &str) -> &str {
    down.rsplit_once('.').map_or("mlp", |(p, _)| p)
}

/// The part scopes of the fused projection `module` (`{module}.q`, ...). A LoRA target on the
/// fused module is a slot on every part (its B split by rows at conversion, `models::lora::FUSED_PARTS`).
pub(super) fn fused_scopes<const N: usize>(b: &mut GraphBuilder, module: &str, parts: [&str; N]) -> [String; N] {
    let scopes = parts.map(|p| crate::lora::part_scope(module, p));
    if b.lora.contains(module) {
        b.lora.extend(scopes.iter().cloned());
    }
    scopes
}

fn unreachable_parts() -> Error {
    Error::Checkpoint { path: Default::default(), reason: "internal: a fused projection split into the wrong number of parts".into() }
}

/// Marks the tensors `unused` lists as unused, then fails if any tensor is still unaccounted
/// for: a weight nobody reads means config.json and the checkpoint disagree (a bias the config
/// does not announce, say), and the model would be silently wrong. Shared by the decoder and
/// encoder builders.
pub(super) fn account_for_every_tensor(ckpt: &Checkpoint, unused: &[super::Unused]) -> Result<()> {
    for name in ckpt.unaccounted() {
        if let Some(u) = unused.iter().find(|u| u.matches(&name)) {
            ckpt.mark_unused(&name, u.reason);
        } else if !ckpt.is_text_tensor(&name) {
            ckpt.mark_unused(&name, "not the text model's: a vision-language checkpoint's vision and embedding parts read it");
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

#[cfg(test)]
mod tests {
    use crate::arch::{APERTUS, COHERE2, CWM, DOTS1, EXAONE4, GEMMA, GEMMA2, GEMMA3, GLM4, GPT_OSS, GRANITE, LLAMA, MINISTRAL, MINISTRAL3, MISTRAL, OLMO, PHI, QWEN2, SMOLLM3};
    use crate::{Activation, RopeKind};
    use crate::DecoderConfig;
    use std::path::Path;

    fn config(model_type: &str, extra: &str) -> DecoderConfig {
        let text = format!(
            r#"{{"model_type":"{model_type}","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":7,"intermediate_size":128,"vocab_size":512{extra}}}"#
        );
        DecoderConfig::parse(Path::new("config.json"), &text).unwrap()
    }

    /// Ministral 3's query scale keys come from the RoPE parameters config.json gives, else from
    /// the family's default object; a given object without them is refused (transformers fails).
    #[test]
    fn ministral3_reads_its_query_scale_from_the_rope_parameters() {
        let read = |extra: &str| MINISTRAL3.scalars(&config("ministral3", extra)).map(|s| s.query_position);
        assert_eq!(read("").unwrap(), Some((0.1, 16384.0)));
        let given = r#","rope_parameters":{"rope_type":"yarn","rope_theta":1e6,"factor":8.0,"original_max_position_embeddings":8192,"llama_4_scaling_beta":0.25}"#;
        assert_eq!(read(given).unwrap(), Some((0.25, 8192.0)));
        // A beta of 0 is no scaling at all (no table, no Mul).
        assert_eq!(read(&given.replace("0.25", "0.0")).unwrap(), None);
        let legacy = r#","rope_scaling":{"type":"yarn","factor":8.0,"original_max_position_embeddings":4096,"llama_4_scaling_beta":0.3}"#;
        assert_eq!(read(legacy).unwrap(), Some((0.3, 4096.0)));
        let e = read(r#","rope_parameters":{"rope_type":"yarn","rope_theta":1e6,"factor":8.0,"original_max_position_embeddings":8192}"#).expect_err("refused").to_string();
        assert!(e.contains("`rope_parameters` has no number `llama_4_scaling_beta`"), "{e}");
        // Mistral reads no such key.
        assert_eq!(MISTRAL.scalars(&config("mistral", given)).unwrap().query_position, None);
    }

    /// xIELU's scalars are per layer: a family whose MLP does not name them refuses the key.
    #[test]
    fn xielu_is_refused_where_the_mlp_stores_no_parameters() {
        let e = LLAMA.scalars(&config("llama", r#","hidden_act":"xielu""#)).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("`hidden_act` is `xielu`"), "{e}");
        assert_eq!(APERTUS.scalars(&config("apertus", "")).map(|s| s.act).ok(), Some(Activation::Xielu));
        assert_eq!(APERTUS.scalars(&config("apertus", r#","hidden_act":"silu""#)).map(|s| s.act).ok(), Some(Activation::Silu));
    }

    #[test]
    fn layer_kinds_follow_layer_types_then_the_family_pattern() {
        let w = |f: &crate::arch::DecoderFamily, model_type: &str, extra: &str| f.windows(&config(model_type, extra)).unwrap();
        let (s, f) = (Some(5), None);
        // Gemma 2 without layer_types: sliding on even layers; window 4096 when absent.
        assert_eq!(w(&GEMMA2, "gemma2", r#","sliding_window":5"#), [s, f, s, f, s, f, s]);
        assert_eq!(w(&GEMMA2, "gemma2", "")[0], Some(4096));
        // Gemma 3: every `sliding_window_pattern`th layer full (published spelling or the
        // underscored one transformers writes), default 6.
        assert_eq!(w(&GEMMA3, "gemma3_text", r#","sliding_window":5,"sliding_window_pattern":3"#), [s, s, f, s, s, f, s]);
        assert_eq!(w(&GEMMA3, "gemma3_text", r#","sliding_window":5,"_sliding_window_pattern":2"#), [s, f, s, f, s, f, s]);
        assert_eq!(w(&GEMMA3, "gemma3_text", r#","sliding_window":5"#), [s, s, s, s, s, f, s]);
        // layer_types wins over the pattern.
        let types = r#","sliding_window":5,"sliding_window_pattern":2,"layer_types":["full_attention","sliding_attention","full_attention","full_attention","full_attention","full_attention","sliding_attention"]"#;
        assert_eq!(w(&GEMMA3, "gemma3_text", types), [f, s, f, f, f, f, s]);
        // Mistral keeps the generic rule: a window, when given, applies to every layer.
        assert_eq!(w(&MISTRAL, "mistral", r#","sliding_window":5"#), [s; 7]);
        // `MistralConfig`'s default window when config.json has no key; none when it says null.
        assert_eq!(w(&MISTRAL, "mistral", ""), [Some(4096); 7]);
        assert_eq!(w(&MISTRAL, "mistral", r#","sliding_window":null"#), [None; 7]);
        // Ministral: every layer slides without layer_types; CWM: the first of every four full,
        // window 8192 when absent.
        assert_eq!(w(&MINISTRAL, "ministral", r#","sliding_window":5"#), [s; 7]);
        assert_eq!(w(&CWM, "cwm", r#","sliding_window":5"#), [f, s, s, s, f, s, s]);
        assert_eq!(w(&CWM, "cwm", "")[1], Some(8192));
        // Mistral's model reads no layer_types: the window applies to every layer, and a null
        // window is none whatever they say; Ministral's does read them.
        let sliding_types = r#","layer_types":["sliding_attention","full_attention","sliding_attention","sliding_attention","sliding_attention","sliding_attention","sliding_attention"]"#;
        assert_eq!(w(&MISTRAL, "mistral", &format!(r#","sliding_window":5{sliding_types}"#)), [s; 7]);
        assert_eq!(w(&MISTRAL, "mistral", &format!(r#","sliding_window":null{sliding_types}"#)), [None; 7]);
        assert_eq!(w(&MINISTRAL, "ministral", &format!(r#","sliding_window":5{sliding_types}"#)), [s, f, s, s, s, s, s]);
        assert!(MINISTRAL.windows(&config("ministral", &format!(r#","sliding_window":null{sliding_types}"#))).is_err());
        // dots.llm1 (a default window, Qwen's keys): null is no window.
        assert_eq!(w(&DOTS1, "dots1", r#","sliding_window":null,"max_window_layers":3"#), [None; 7]);
        // Families whose transformers attention has no window ignore every window key.
        let keys = r#","sliding_window":5,"use_sliding_window":true,"layer_types":["sliding_attention","sliding_attention","sliding_attention","sliding_attention","sliding_attention","sliding_attention","sliding_attention"]"#;
        for (family, model_type) in [(&LLAMA, "llama"), (&GRANITE, "granite"), (&GEMMA, "gemma"), (&PHI, "phi"), (&GLM4, "glm4")] {
            assert_eq!(w(family, model_type, keys), [None; 7], "{model_type}");
        }
        assert_eq!(w(&QWEN2, "qwen2", keys), [s; 7]);
        let e = GEMMA3.windows(&config("gemma3_text", r#","sliding_window_pattern":0"#)).unwrap_err().to_string();
        assert!(e.contains("`sliding_window_pattern`"), "{e}");
    }

    #[test]
    fn gpt_oss_alternates_from_layer_0_and_defaults_to_yarn() {
        let (s, f) = (Some(128), None);
        assert_eq!(GPT_OSS.windows(&config("gpt_oss", "")).unwrap(), [s, f, s, f, s, f, s]);
        let types = r#","sliding_window":4,"layer_types":["full_attention","full_attention","sliding_attention","full_attention","full_attention","full_attention","sliding_attention"]"#;
        assert_eq!(GPT_OSS.windows(&config("gpt_oss", types)).unwrap(), [f, f, Some(4), f, f, f, Some(4)]);
        // No RoPE keys: transformers' GptOssConfig defaults (theta 150000, YaRN).
        let c = config("gpt_oss", "");
        assert_eq!(c.rope.theta, 150000.0);
        let RopeKind::Yarn { factor, original_max_position_embeddings, beta_fast, beta_slow, truncate, .. } = c.rope.kind else { panic!("{:?}", c.rope) };
        assert_eq!((factor, original_max_position_embeddings, beta_fast, beta_slow, truncate), (32.0, 4096.0, 32.0, 1.0, false));
        // The legacy keys and rope_parameters are read as written.
        let c = config("gpt_oss", r#","rope_theta":1000.0,"rope_scaling":{"rope_type":"yarn","factor":8.0,"original_max_position_embeddings":256,"truncate":true}"#);
        let RopeKind::Yarn { factor, original_max_position_embeddings, truncate, .. } = c.rope.kind else { panic!() };
        assert_eq!((c.rope.theta, factor, original_max_position_embeddings, truncate), (1000.0, 8.0, 256.0, true));
        let c = config("gpt_oss", r#","rope_parameters":{"rope_type":"default","rope_theta":5000.0}"#);
        assert_eq!((c.rope.theta, &c.rope.kind), (5000.0, &RopeKind::Default));
        // Other families keep theta 10000 and no scaling.
        assert_eq!((config("llama", "").rope.theta, config("llama", "").rope.kind), (10000.0, RopeKind::Default));
        let e = DecoderConfig::parse(Path::new("config.json"), r#"{"model_type":"gpt_oss","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":2,"intermediate_size":64,"vocab_size":512,"rope_scaling":{"rope_type":"ntk-by-parts","factor":2.0}}"#).unwrap_err().to_string();
        assert!(e.contains("ntk-by-parts"), "{e}");
    }

    #[test]
    fn nope_layers_follow_the_list_then_the_interval() {
        let r = |extra: &str| {
            let c = config("smollm3", extra);
            SMOLLM3.rotates(&c, &SMOLLM3.windows(&c).unwrap())
        };
        let (y, n) = (true, false);
        // transformers' default interval 4: every 4th layer has no RoPE.
        assert_eq!(r("").unwrap(), [y, y, y, n, y, y, y]);
        assert_eq!(r(r#","no_rope_layer_interval":2"#).unwrap(), [y, n, y, n, y, n, y]);
        // The list wins over the interval.
        assert_eq!(r(r#","no_rope_layer_interval":2,"no_rope_layers":[0,1,1,1,1,1,0]"#).unwrap(), [n, y, y, y, y, y, n]);
        let e = r(r#","no_rope_layers":[1,1]"#).unwrap_err().to_string();
        assert!(e.contains("`no_rope_layers`") && e.contains("7 layers"), "{e}");
        let e = r(r#","no_rope_layers":[1,1,1,2,1,1,1]"#).unwrap_err().to_string();
        assert!(e.contains("`no_rope_layers`"), "{e}");
        let e = r(r#","no_rope_layer_interval":0"#).unwrap_err().to_string();
        assert!(e.contains("`no_rope_layer_interval`"), "{e}");
        // SmolLM3's windows, when switched on without `layer_types`, are on its NoPE layers only.
        let c = config("smollm3", r#","use_sliding_window":true,"sliding_window":5"#);
        assert_eq!(SMOLLM3.windows(&c).unwrap(), [None, None, None, Some(5), None, None, None]);
        let c = config("smollm3", r#","sliding_window":5"#);
        assert_eq!(SMOLLM3.windows(&c).unwrap(), [None; 7], "the switch defaults to off");
        // A family without NoPE layers rotates everywhere, whatever the keys say.
        assert_eq!(LLAMA.rotates(&config("llama", r#","no_rope_layers":[0,0,0,0,0,0,0]"#), &[None; 7]).unwrap(), [y; 7]);
    }

    /// EXAONE 4: every `sliding_window_pattern`th layer full (default 4), window 4096 when the
    /// key is absent; with a window set the full layers have no RoPE (even when no layer
    /// slides); `null` with all-full `layer_types` is no window and every layer rotates, `null`
    /// with sliding layers is refused (transformers cannot build it).
    #[test]
    fn full_layers_skip_rope_in_exaone4_when_windowed_and_in_cohere2_always() {
        let exaone = |extra: &str| {
            let c = config("exaone4", extra);
            let w = EXAONE4.windows(&c)?;
            let r = EXAONE4.rotates(&c, &w)?;
            Ok::<_, crate::Error>((w, r))
        };
        let kinds = |extra: &str| exaone(extra).unwrap();
        let (s, f, y, n) = (Some(4096), None, true, false);
        let all_full = r#""layer_types":["full_attention","full_attention","full_attention","full_attention","full_attention","full_attention","full_attention"]"#;
        assert_eq!(kinds(""), (vec![s, s, s, f, s, s, s], vec![y, y, y, n, y, y, y]));
        let (w, r) = kinds(r#","sliding_window":8,"sliding_window_pattern":2"#);
        assert_eq!((w, r), (vec![Some(8), f, Some(8), f, Some(8), f, Some(8)], vec![y, n, y, n, y, n, y]));
        assert_eq!(kinds(&format!(r#","sliding_window":null,{all_full}"#)), (vec![f; 7], vec![y; 7]));
        assert_eq!(kinds(&format!(r#","sliding_window":8,{all_full}"#)), (vec![f; 7], vec![n; 7]), "a window set: no layer rotates");
        let e = exaone(r#","sliding_window":null"#).unwrap_err().to_string();
        assert!(e.contains("`sliding_window` is null") && e.contains("exaone4"), "{e}");
        // A published "LLLG" pattern comes with `layer_types`, which wins.
        let types = r#","sliding_window":3,"sliding_window_pattern":"LLLG","layer_types":["sliding_attention","full_attention","full_attention","full_attention","full_attention","full_attention","sliding_attention"]"#;
        assert_eq!(kinds(types), (vec![Some(3), f, f, f, f, f, Some(3)], vec![y, n, n, n, n, n, y]));
        // Cohere 2 rotates where a window is set: its full layers never. `use_sliding_window`
        // is not its key (only the Qwen families' and SmolLM3's).
        let cohere2 = |extra: &str| {
            let c = config("cohere2", extra);
            let w = COHERE2.windows(&c).unwrap();
            (w.clone(), COHERE2.rotates(&c, &w).unwrap())
        };
        assert_eq!(cohere2(""), (vec![s, s, s, f, s, s, s], vec![y, y, y, n, y, y, y]));
        assert_eq!(cohere2(r#","use_sliding_window":false,"max_window_layers":5"#), (vec![s, s, s, f, s, s, s], vec![y, y, y, n, y, y, y]));
        // A null `logit_scale` is refused (transformers multiplies the logits by it).
        let e = COHERE2.scalars(&config("cohere2", r#","logit_scale":null"#)).err().expect("refused").to_string();
        assert!(e.contains("`logit_scale` is null"), "{e}");
        // `null` where layers slide is refused for the other families with a default window too
        // (Gemma 2: 4096 when absent); a family without one reads `null` as no window.
        assert!(GEMMA2.windows(&config("gemma2", r#","sliding_window":null"#)).is_err());
        assert_eq!(MISTRAL.windows(&config("mistral", r#","sliding_window":null"#)).unwrap(), [f; 7]);
    }

    #[test]
    fn olmo_norm_epsilon_is_fixed_and_clip_qkv_is_read_by_key() {
        let sc = OLMO.scalars(&config("olmo", r#","rms_norm_eps":0.5"#)).unwrap();
        assert_eq!(sc.eps, 1e-5, "OLMo's LayerNorm epsilon is fixed in transformers' code");
        let c = config("olmo", r#","clip_qkv":"big""#);
        let e = c.number("clip_qkv", None).unwrap_err().to_string();
        assert!(e.contains("`clip_qkv`"), "{e}");
    }

    /// BLOOM's config as published: `n_embed`, `n_layer`, `n_head`, no width or position keys.
    /// The MLP is 4 x hidden whatever a stray width key says, the activation tanh-GELU whatever
    /// `hidden_act` says, the context `seq_length` else 2048; the post-norm residual is refused.
    #[test]
    fn bloom_reads_its_own_spellings_and_derives_the_rest() {
        let parse = |text: &str| DecoderConfig::parse(Path::new("config.json"), text);
        let base = r#"{"model_type":"bloom","n_embed":96,"n_layer":3,"n_head":6,"vocab_size":512"#;
        let c = parse(&format!("{base}}}")).unwrap();
        assert_eq!((c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.head_dim), (96, 3, 6, 16));
        assert_eq!((c.intermediate_size, c.num_key_value_heads, c.max_position_embeddings), (384, 6, 2048));
        let c = parse(&format!(r#"{base},"seq_length":4096,"intermediate_size":100,"n_inner":7,"hidden_act":"relu","hidden_size":64}}"#)).unwrap();
        assert_eq!((c.hidden_size, c.intermediate_size, c.max_position_embeddings), (96, 384, 4096), "n_embed wins, as BloomConfig reads it");
        assert_eq!(crate::arch::BLOOM.scalars(&c).unwrap().act, Activation::GeluTanh);
        let e = parse(&format!(r#"{base},"apply_residual_connection_post_layernorm":true}}"#)).unwrap_err().to_string();
        assert!(e.contains("`apply_residual_connection_post_layernorm`"), "{e}");
    }

    /// MPT's config as published: `d_model`, `n_heads`, `n_layers`, `max_seq_len`, the
    /// attention's keys nested in `attn_config` (read from there; a clip of 0 is none). What
    /// transformers' MptModel would not run as the config says is refused, naming the key.
    #[test]
    fn mpt_reads_its_nested_attention_keys_and_refuses_what_transformers_ignores() {
        let parse = |extra: &str| DecoderConfig::parse(Path::new("config.json"), &format!(r#"{{"model_type":"mpt","d_model":96,"n_heads":6,"n_layers":3,"vocab_size":512{extra}}}"#));
        let c = parse(r#","attn_config":{"clip_qkv":2.5,"softmax_scale":0.3}"#).unwrap();
        assert_eq!((c.hidden_size, c.num_attention_heads, c.num_hidden_layers, c.intermediate_size, c.max_position_embeddings), (96, 6, 3, 384, 2048));
        assert_eq!(c.number("clip_qkv", None).unwrap(), Some(2.5));
        assert_eq!(crate::arch::MPT.scalars(&c).unwrap().attention_scale, Some(0.3));
        let c = parse(r#","max_seq_len":4096,"clip_qkv":9,"softmax_scale":9,"attn_config":{"clip_qkv":0,"softmax_scale":null}"#).unwrap();
        assert_eq!(c.max_position_embeddings, 4096);
        assert_eq!(c.number("clip_qkv", None).unwrap(), None, "attn_config's clip 0 is none, a stray top-level one ignored");
        assert_eq!(crate::arch::MPT.scalars(&c).unwrap().attention_scale, None);
        for (extra, key) in [
            (r#","attn_config":{"alibi":false}"#, "`attn_config.alibi`"),
            (r#","attn_config":{"qk_ln":true}"#, "`attn_config.qk_ln`"),
            (r#","attn_config":{"prefix_lm":true}"#, "`attn_config.prefix_lm`"),
            (r#","attn_config":{"attn_type":"multiquery_attention"}"#, "`attn_config.attn_type`"),
            (r#","attn_config":{"alibi_bias_max":16}"#, "`attn_config.alibi_bias_max`"),
            (r#","expansion_ratio":2"#, "`expansion_ratio`"),
            (r#","no_bias":false"#, "`no_bias`"),
            (r#","logit_scale":"inv_sqrt_d_model""#, "`logit_scale`"),
            (r#","attn_config":[1]"#, "`attn_config`"),
        ] {
            let e = parse(extra).unwrap_err().to_string();
            assert!(e.contains(key), "{extra}: {e}");
        }
    }

    /// DBRX's config as published: the attention's and the mixture's keys nested in
    /// `attn_config` / `ffn_config` (class defaults where absent), the RoPE base in
    /// `attn_config.rope_theta` unless config.json gives one at the top level; what is not
    /// built is refused by key.
    #[test]
    fn dbrx_reads_its_nested_keys() {
        let parse = |extra: &str| DecoderConfig::parse(Path::new("config.json"), &format!(r#"{{"model_type":"dbrx","d_model":64,"n_heads":4,"n_layers":2,"vocab_size":512{extra}}}"#));
        let c = parse(r#","attn_config":{"kv_n_heads":2,"clip_qkv":8,"rope_theta":500000},"ffn_config":{"ffn_hidden_size":32,"moe_num_experts":16,"moe_top_k":4,"ffn_act_fn":{"name":"gelu"}}"#).unwrap();
        assert_eq!((c.num_key_value_heads, c.intermediate_size, c.max_position_embeddings, c.rope.theta), (2, 32, 2048, 500000.0));
        assert_eq!(c.number("clip_qkv", None).unwrap(), Some(8.0));
        assert_eq!((c.count("moe_num_experts").unwrap(), c.count("num_experts_per_tok").unwrap()), (Some(16), Some(4)));
        assert!(c.flag("norm_topk_prob", false), "moe_normalize_expert_weights defaults to 1");
        assert_eq!(c.hidden_act, Activation::Gelu);
        // The class defaults: one key/value head, 4 experts top 1, SiLU; a top-level base wins.
        let c = parse(r#","rope_theta":20000,"attn_config":{"rope_theta":500000},"ffn_config":{"moe_normalize_expert_weights":null}"#).unwrap();
        assert_eq!((c.num_key_value_heads, c.intermediate_size, c.rope.theta), (1, 3584, 20000.0));
        assert_eq!((c.count("moe_num_experts").unwrap(), c.count("num_experts_per_tok").unwrap()), (Some(4), Some(1)));
        assert!(!c.flag("norm_topk_prob", true));
        assert_eq!(c.hidden_act, Activation::Silu);
        for (extra, key) in [
            (r#","ffn_config":{"moe_normalize_expert_weights":2}"#, "`ffn_config.moe_normalize_expert_weights`"),
            (r#","ffn_config":{"ffn_act_fn":{"name":"gelu","approximate":"tanh"}}"#, "`ffn_config.ffn_act_fn`"),
            (r#","tie_word_embeddings":true"#, "`tie_word_embeddings`"),
            (r#","attn_config":"x""#, "`attn_config`"),
        ] {
            let e = parse(extra).unwrap_err().to_string();
            assert!(e.contains(key), "{extra}: {e}");
        }
    }

    /// fairseq's sinusoidal table as transformers' `XGLMSinusoidalPositionalEmbedding.get_embedding(2050,
    /// 10, padding_idx=1)` computes it in torch 2.15 (rows 2, 3, 1002 and 2049: positions 0, 1, 1000
    /// and 2047 read two rows on), within f32 rounding of the sines of large angles.
    #[test]
    fn sinusoidal_positions_are_fairseqs_table() {
        let table = super::sinusoidal_positions(2, 2048, 10, Some(1));
        let torch: [(usize, [f32; 10]); 4] = [
            (0, [0.909_297_4, 0.198_669_31, 0.019_998_666, 0.001_999_998_5, 0.000_199_999_98, -0.416_146_84, 0.980_066_6, 0.999_8, 0.999_998_03, 1.0]),
            (1, [0.141_12, 0.295_520_2, 0.029_995_5, 0.002_999_995_4, 0.000_299_999_96, -0.989_992_5, 0.955_336_5, 0.999_550_04, 0.999_995_5, 0.999_999_94]),
            (1000, [0.167_266_55, -0.324_958_62, -0.560_692_2, 0.842_549_86, 0.100_032_404, -0.985_911_7, 0.945_728_24, -0.828_024_27, 0.538_618_3, 0.994_984_15]),
            (2047, [0.630_028_5, -0.641_514_9, 0.997_575_6, 0.887_823_1, 0.203_469_23, 0.776_572, -0.767_110_6, -0.069_591_23, -0.460_184_9, 0.979_081_3]),
        ];
        for (p, row) in torch {
            for (i, want) in row.iter().enumerate() {
                let got = table[p * 10 + i];
                assert!((got - want).abs() <= 2e-7, "position {p}, column {i}: {got} against torch's {want}");
            }
        }
        // An odd width ends in a zero column.
        assert!(super::sinusoidal_positions(2, 4, 5, None).chunks(5).all(|r| r[4] == 0.0));
        // A padding id of 3 zeroes the row position 1 reads (the table's row 3), and only it.
        let padded = super::sinusoidal_positions(2, 4, 10, Some(3));
        assert!(padded[10..20].iter().all(|&v| v == 0.0));
        assert_eq!((&padded[..10], &padded[20..]), (&table[..10], &table[20..40]));
    }

    #[test]
    fn scalar_keys_take_the_family_default_null_turns_them_off() {
        let sc = GEMMA2.scalars(&config("gemma2", "")).unwrap();
        assert_eq!((sc.attention_softcap, sc.final_softcap), (Some(50.0), Some(30.0)));
        assert_eq!(sc.attention_scale, Some(1.0 / 16.0), "query_pre_attn_scalar defaults to 256");
        assert_eq!(sc.embedding, Some(8.0));
        let sc = GEMMA2.scalars(&config("gemma2", r#","attn_logit_softcapping":null,"query_pre_attn_scalar":64"#)).unwrap();
        assert_eq!((sc.attention_softcap, sc.attention_scale), (None, Some(0.125)));
        let sc = GEMMA3.scalars(&config("gemma3_text", "")).unwrap();
        assert_eq!((sc.attention_softcap, sc.final_softcap), (None, None));
        let sc = GRANITE.scalars(&config("granite", r#","embedding_multiplier":12.0,"logits_scaling":8"#)).unwrap();
        assert_eq!((sc.embedding, sc.residual, sc.attention_scale, sc.logits_divisor), (Some(12.0), Some(1.0), Some(1.0), Some(8.0)));
        let e = GRANITE.scalars(&config("granite", r#","residual_multiplier":"big""#)).err().unwrap().to_string();
        assert!(e.contains("`residual_multiplier`"), "{e}");
        let e = GEMMA2.scalars(&config("gemma2", r#","hidden_activation":"mish""#)).err().unwrap().to_string();
        assert!(e.contains("`hidden_activation`"), "{e}");
        // BioGPT: torch's LayerNorm epsilon whatever `layer_norm_eps` says, embeddings scaled by
        // sqrt(hidden) unless `scale_embedding` is false, exact GELU by default; GPT-Neo's scores
        // unscaled and tanh GELU by default.
        let sc = super::super::BIOGPT.scalars(&config("biogpt", r#","layer_norm_eps":1e-12"#)).unwrap();
        assert_eq!((sc.eps, sc.embedding, sc.act, sc.attention_scale), (1e-5, Some(8.0), Activation::Gelu, None));
        assert_eq!(super::super::BIOGPT.scalars(&config("biogpt", r#","scale_embedding":false"#)).unwrap().embedding, None);
        let neo = config("gpt_neo", r#","num_layers":7,"attention_types":[[["global"],7]]"#);
        let sc = super::super::GPT_NEO.scalars(&neo).unwrap();
        assert_eq!((sc.attention_scale, sc.act), (Some(1.0), Activation::GeluTanh));
    }
}
