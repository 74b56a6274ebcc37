//! Rotary position embedding: cos/sin caches computed once per graph (`[max_positions,
//! rotary_dim / 2]`) and the opset-23 `RotaryEmbedding` op applied to q and k.
//!
//! Every scaling variant is folded into the caches at build time: linear, llama3, yarn and
//! explicit per-dimension factors (llama.cpp's `freq_factors`, from a GGUF file) change the
//! inverse frequencies; yarn and longrope also multiply cos/sin by an attention
//! factor (as transformers does). LongRoPE has two cache pairs, short and long, and the graph
//! picks one with an `If` on the total sequence length (`attention_mask`'s second dim), so one
//! graph serves prompts on both sides of `original_max_position_embeddings`. An `If` (not a
//! `Where`) is used because the `lower.if_to_where` rule expects the longrope selection to be
//! an `If`, and because it keeps the unused pair out of the computation.

use crate::{GraphBuilder, RopeConfig, RopeKind};
use ir::{Attr, DType, Dim, Graph, Node, Recipe, TrigFn, TrigTable, ValueInfo};
use std::collections::BTreeMap;

/// One set of inverse frequencies and the factor cos/sin are multiplied by.
#[derive(Clone, Debug, PartialEq)]
pub struct Frequencies {
    pub inv_freq: Vec<f32>,
    pub attention_scaling: f32,
}

/// The names of the cos/sin caches the `RotaryEmbedding` nodes read.
pub struct RopeCache {
    pub cos: String,
    pub sin: String,
    pub rotary_dim: usize,
    pub head_dim: usize,
    /// The caches are already per token (`[batch, seq, rotary_dim / 2]`, multimodal RoPE), so
    /// `RotaryEmbedding` takes no `position_ids`.
    pub per_token: bool,
    /// Rotate adjacent pairs `(2i, 2i + 1)` instead of halves (`interleaved = 1`: GLM, ERNIE 4.5).
    pub interleaved: bool,
}

/// `1 / base^(2i / dim)` in f32, as transformers computes it.
fn base_inverse_frequencies(theta: f64, rotary_dim: usize) -> Vec<f32> {
    let base = theta as f32;
    (0..rotary_dim / 2).map(|i| 1.0 / base.powf((2 * i) as f32 / rotary_dim as f32)).collect()
}

fn llama3(inv: Vec<f32>, factor: f64, low: f64, high: f64, old: f64) -> Vec<f32> {
    let (factor, low, high, old) = (factor as f32, low as f32, high as f32, old as f32);
    let low_wavelen = old / low;
    let high_wavelen = old / high;
    inv.iter()
        .map(|&f| {
            let wavelen = 2.0 * std::f32::consts::PI / f;
            if wavelen > low_wavelen {
                f / factor
            } else if wavelen < high_wavelen {
                f
            } else {
                let smooth = (old / wavelen - low) / (high - low);
                (1.0 - smooth) * f / factor + smooth * f
            }
        })
        .collect()
}

/// YaRN: a ramp over the rotary dimensions blends extrapolated (unscaled) and interpolated
/// (divided by `factor`) frequencies; the ramp's bounds come from the rotation counts
/// `beta_fast`/`beta_slow` at the pre-training length, in f64 as transformers does.
fn yarn(theta: f64, rotary_dim: usize, factor: f64, original: f64, beta_fast: f64, beta_slow: f64, truncate: bool) -> Vec<f32> {
    let dim = rotary_dim as f64;
    let correction_dim =
        |rotations: f64| dim * (original / (rotations * 2.0 * std::f64::consts::PI)).ln() / (2.0 * theta.ln());
    let (mut low, mut high) = (correction_dim(beta_fast), correction_dim(beta_slow));
    if truncate {
        low = low.floor();
        high = high.ceil();
    }
    let low = low.max(0.0);
    let mut high = high.min(dim - 1.0);
    if low == high {
        high += 0.001;
    }
    let base = theta as f32;
    (0..rotary_dim / 2)
        .map(|i| {
            let pos_freq = base.powf((2 * i) as f32 / rotary_dim as f32);
            let extrapolation = 1.0 / pos_freq;
            let interpolation = 1.0 / (factor as f32 * pos_freq);
            let ramp = ((i as f32 - low as f32) / (high as f32 - low as f32)).clamp(0.0, 1.0);
            let extrapolation_factor = 1.0 - ramp;
            interpolation * (1.0 - extrapolation_factor) + extrapolation * extrapolation_factor
        })
        .collect()
}

fn longrope(theta: f64, rotary_dim: usize, ext: &[f64]) -> Vec<f32> {
    let base = theta as f32;
    (0..rotary_dim / 2).map(|i| 1.0 / (ext[i] as f32 * base.powf((2 * i) as f32 / rotary_dim as f32))).collect()
}

/// The frequency sets of `rope`: one, or two for LongRoPE (short first, then long).
pub fn frequencies(rope: &RopeConfig, rotary_dim: usize) -> Vec<Frequencies> {
    let one = |inv_freq: Vec<f32>, scaling: f64| vec![Frequencies { inv_freq, attention_scaling: scaling as f32 }];
    match &rope.kind {
        RopeKind::Default => one(base_inverse_frequencies(rope.theta, rotary_dim), 1.0),
        RopeKind::Linear { factor } => {
            one(base_inverse_frequencies(rope.theta, rotary_dim).iter().map(|f| f / *factor as f32).collect(), 1.0)
        }
        RopeKind::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position_embeddings } => one(
            llama3(
                base_inverse_frequencies(rope.theta, rotary_dim),
                *factor,
                *low_freq_factor,
                *high_freq_factor,
                *original_max_position_embeddings,
            ),
            1.0,
        ),
        RopeKind::Yarn { factor, original_max_position_embeddings, attention_factor, beta_fast, beta_slow, truncate } => one(
            yarn(rope.theta, rotary_dim, *factor, *original_max_position_embeddings, *beta_fast, *beta_slow, *truncate),
            *attention_factor,
        ),
        // llama.cpp's freq_factors: ggml divides each dimension's angle by its factor.
        RopeKind::Factors { factors } => one(
            base_inverse_frequencies(rope.theta, rotary_dim).iter().zip(factors).map(|(f, d)| f / *d as f32).collect(),
            1.0,
        ),
        RopeKind::LongRope { short_factor, long_factor, attention_factor, .. } => {
            let (short, long) = rope.mscale.unwrap_or((*attention_factor, *attention_factor));
            vec![
                Frequencies { inv_freq: longrope(rope.theta, rotary_dim, short_factor), attention_scaling: short as f32 },
                Frequencies { inv_freq: longrope(rope.theta, rotary_dim, long_factor), attention_scaling: long as f32 },
            ]
        }
    }
}

/// Inverse frequencies of the first (or only) set; kept for callers that only need those.
pub fn inverse_frequencies(rope: &RopeConfig, rotary_dim: usize) -> Vec<f32> {
    frequencies(rope, rotary_dim).swap_remove(0).inv_freq
}

/// The cos and sin tables `[max_positions, half]` of one frequency set (f32, the attention
/// scaling applied after cos/sin, as transformers does), computed when the model is written.
fn tables(freqs: &Frequencies, max_positions: usize, label: &str) -> (Recipe, Recipe) {
    let table = |func| TrigTable { inv_freq: freqs.inv_freq.clone(), scale: freqs.attention_scaling, func };
    (
        Recipe::trig_table(format!("cos {label}"), max_positions, table(TrigFn::Cos)),
        Recipe::trig_table(format!("sin {label}"), max_positions, table(TrigFn::Sin)),
    )
}

impl RopeCache {
    /// Adds the cos/sin caches (and, for LongRoPE, the `If` that picks short or long) and
    /// returns the names the `RotaryEmbedding` nodes read.
    /// `name` scopes the cache initializers (`rotary_emb`; Gemma 3's sliding layers have their
    /// own, `rotary_emb_local`). `longest_total`: the longest total length the graph can see
    /// (a static cache's length), which lets LongRoPE drop the `If` when it is short enough.
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        b: &mut GraphBuilder,
        name: &str,
        rope: &RopeConfig,
        head_dim: usize,
        rotary_dim: usize,
        max_positions: usize,
        attention_mask: &str,
        longest_total: Option<usize>,
        reversed: bool,
    ) -> Self {
        let half = rotary_dim / 2;
        let mut sets = frequencies(rope, rotary_dim);
        // Turned the other way (NanoChat): negated frequencies give the same cos and negated sin.
        if reversed {
            for set in &mut sets {
                set.inv_freq.iter_mut().for_each(|f| *f = -*f);
            }
        }
        let float = b.float;
        let add = |b: &mut GraphBuilder, prefix: &str, set: &Frequencies| -> (String, String) {
            let mut label = format!("rope theta={} dim={rotary_dim} positions={max_positions} {:?}", rope.theta, rope.kind);
            if let Some((short, long)) = rope.mscale {
                label.push_str(&format!(" mscale short={short} long={long}"));
            }
            let label = if prefix.is_empty() { label } else { format!("{prefix} {label}") };
            let (cos, sin) = tables(set, max_positions, &label);
            let stem = if prefix.is_empty() { String::new() } else { format!("{prefix}_") };
            let cos = b.initializer(&format!("{name}.{stem}cos_cache"), cos.cast(float));
            let sin = b.initializer(&format!("{name}.{stem}sin_cache"), sin.cast(float));
            (cos, sin)
        };
        let (cos, sin) = match (&rope.kind, sets.as_slice()) {
            (RopeKind::LongRope { original_max_position_embeddings, .. }, [short, long]) => {
                // A static cache bounds the total length: when it never exceeds the pre-training
                // length the short factors always apply, and the graph needs no `If`.
                if longest_total.is_some_and(|n| n as f64 <= *original_max_position_embeddings) {
                    add(b, "short", short)
                } else {
                    let short = add(b, "short", short);
                    let long = add(b, "long", long);
                    select_by_length(b, attention_mask, *original_max_position_embeddings as i64, short, long, [max_positions, half])
                }
            }
            (_, [only, ..]) => add(b, "", only),
            (_, []) => unreachable!("frequencies() returns at least one set"),
        };
        RopeCache { cos, sin, rotary_dim, head_dim, per_token: false, interleaved: false }
    }

    /// The same caches, rotating adjacent pairs when `interleaved` (the cache is the same: pair
    /// `i` takes frequency `i` either way).
    pub fn with_interleaved(self, interleaved: bool) -> RopeCache {
        RopeCache { interleaved, ..self }
    }

    /// Multimodal RoPE: the per-token caches `[batch, seq, rotary_dim / 2]` for `position_ids`
    /// `[3, batch, seq]`, frequency `i` taking its angle from position row `rows[i]`. The rows
    /// are gathered from this cache and combined with one-hot weights (exact: one term is the
    /// value, the others are zero).
    pub fn multimodal(self, b: &mut GraphBuilder, position_ids: &str, rows: &[usize]) -> RopeCache {
        let half = self.rotary_dim / 2;
        let s = "rotary_emb/mrope";
        let mut onehot = vec![0.0f32; 3 * half];
        for (i, &row) in rows.iter().enumerate() {
            onehot[row * half + i] = 1.0;
        }
        let weights = b.initializer(
            &format!("{s}/row_weights"),
            Recipe::from_f32(format!("mrope rows {rows:?}"), vec![3, 1, 1, half], &onehot).cast(b.float),
        );
        let axis = b.const_i64_1d(&format!("{s}/row_axis"), &[0]);
        let pick = |b: &mut GraphBuilder, name: &str, cache: &str| -> String {
            let all = b.op(&format!("{s}/{name}_rows"), "Gather", &[cache, position_ids], vec![Attr::int("axis", 0)]);
            let weighted = b.op(&format!("{s}/{name}_weighted"), "Mul", &[&all, &weights], vec![]);
            b.op(&format!("{s}/{name}"), "ReduceSum", &[&weighted, &axis], vec![Attr::int("keepdims", 0)])
        };
        let cos = pick(b, "cos", &self.cos);
        let sin = pick(b, "sin", &self.sin);
        RopeCache { cos, sin, per_token: true, ..self }
    }

    /// `RotaryEmbedding(x, cos, sin, position_ids)` on a `[batch, seq, heads * head_dim]` input.
    pub fn apply(&self, b: &mut GraphBuilder, scope: &str, x: &str, num_heads: usize, position_ids: &str) -> String {
        let mut attrs = vec![Attr::int("interleaved", self.interleaved as i64), Attr::int("num_heads", num_heads as i64)];
        if self.rotary_dim != self.head_dim {
            attrs.push(Attr::int("rotary_embedding_dim", self.rotary_dim as i64));
        }
        let inputs: &[&str] = if self.per_token { &[x, &self.cos, &self.sin] } else { &[x, &self.cos, &self.sin, position_ids] };
        b.op(&format!("{scope}/RotaryEmbedding"), "RotaryEmbedding", inputs, attrs)
    }
}

/// `If(total_sequence_length > threshold)` -> the long pair, else the short pair. As in
/// transformers, the long factors apply once the sequence is longer than the pre-training
/// length; here "sequence" is the total length (past + current), the attention mask's width.
fn select_by_length(
    b: &mut GraphBuilder,
    attention_mask: &str,
    threshold: i64,
    short: (String, String),
    long: (String, String),
    shape: [usize; 2],
) -> (String, String) {
    let s = "rotary_emb/longrope";
    let total =
        b.op(&format!("{s}/total_len"), "Shape", &[attention_mask], vec![Attr::int("start", 1), Attr::int("end", 2)]);
    let limit = b.const_i64_1d(&format!("{s}/original_max_position_embeddings"), &[threshold]);
    let is_long = b.op(&format!("{s}/is_long"), "Greater", &[&total, &limit], vec![]);
    let dims = vec![Dim::Fixed(shape[0] as i64), Dim::Fixed(shape[1] as i64)];
    let branch = |name: &str, pair: &(String, String), float: DType| -> Graph {
        let outputs = [format!("{s}/{name}/cos"), format!("{s}/{name}/sin")];
        let nodes = [(&pair.0, &outputs[0]), (&pair.1, &outputs[1])]
            .iter()
            .enumerate()
            .map(|(i, (input, output))| Node {
                name: format!("{s}/{name}/Identity_{i}"),
                op: "Identity".into(),
                domain: String::new(),
                opset: ir::OPSET,
                inputs: vec![input.to_string()],
                outputs: vec![output.to_string()],
                attrs: vec![],
                metadata: BTreeMap::new(),
            })
            .collect();
        Graph {
            name: format!("longrope_{name}"),
            outputs: outputs.iter().map(|o| ValueInfo::new(o.clone(), float, dims.clone())).collect(),
            nodes,
            ..Default::default()
        }
    };
    let then_branch = branch("long", &long, b.float);
    let else_branch = branch("short", &short, b.float);
    let out = b.node(
        &format!("{s}/If"),
        "If",
        &[&is_long],
        vec![Attr::graph("then_branch", then_branch), Attr::graph("else_branch", else_branch)],
        2,
    );
    b.annotate(&out[0], b.float, dims.clone());
    b.annotate(&out[1], b.float, dims);
    (out[0].clone(), out[1].clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// llama.cpp's converter turns a llama3 `rope_scaling` into per-dimension factors
    /// (`rope_freqs.weight`: 1 for short wavelengths, `factor` for long ones,
    /// `1 / ((1 - smooth) / factor + smooth)` between); dividing the base frequencies by them
    /// gives transformers' llama3 frequencies up to f32 rounding.
    #[test]
    fn factors_as_llama_cpp_writes_them_give_the_llama3_frequencies() {
        let (theta, dim, factor, low, high, old) = (10000.0, 16, 8.0f64, 1.0f64, 4.0f64, 64.0f64);
        let base = base_inverse_frequencies(theta, dim);
        let factors: Vec<f64> = base
            .iter()
            .map(|&f| {
                let wavelen = 2.0 * std::f64::consts::PI / f as f64;
                if wavelen < old / high {
                    1.0
                } else if wavelen > old / low {
                    factor
                } else {
                    let smooth = (old / wavelen - low) / (high - low);
                    1.0 / ((1.0 - smooth) / factor + smooth)
                }
            })
            .collect();
        // These settings reach all three cases.
        assert!(factors.contains(&1.0) && factors.contains(&factor) && factors.iter().any(|&f| f > 1.0 && f < factor), "{factors:?}");
        let rope = |kind| RopeConfig { theta, kind, partial_rotary_factor: 1.0, mscale: None };
        let got = inverse_frequencies(&rope(RopeKind::Factors { factors }), dim);
        let want = inverse_frequencies(
            &rope(RopeKind::Llama3 { factor, low_freq_factor: low, high_freq_factor: high, original_max_position_embeddings: old }),
            dim,
        );
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-6 * w.abs(), "{got:?} vs {want:?}");
        }
        let sets = frequencies(&rope(RopeKind::Factors { factors: vec![2.0; dim / 2] }), dim);
        assert_eq!(sets.len(), 1);
        assert_eq!(sets[0].attention_scaling, 1.0);
        assert_eq!(sets[0].inv_freq[0], 0.5);
    }
}
