//! Rotary position embedding: cos/sin caches computed once per graph (`[max_positions,
//! rotary_dim / 2]`) and the opset-23 `RotaryEmbedding` op applied to q and k.

use crate::{GraphBuilder, RopeConfig, RopeKind};
use ir::{Attr, Recipe};

/// The names of the shared cos/sin cache initializers.
pub struct RopeCache {
    pub cos: String,
    pub sin: String,
    pub rotary_dim: usize,
    pub head_dim: usize,
}

/// Inverse frequencies, computed in f32 as transformers does, with the scaling of `kind`.
pub fn inverse_frequencies(rope: &RopeConfig, rotary_dim: usize) -> Vec<f32> {
    let base = rope.theta as f32;
    let inv: Vec<f32> =
        (0..rotary_dim / 2).map(|i| 1.0 / base.powf((2 * i) as f32 / rotary_dim as f32)).collect();
    match &rope.kind {
        RopeKind::Default => inv,
        RopeKind::Linear { factor } => inv.iter().map(|f| f / *factor as f32).collect(),
        RopeKind::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position_embeddings } => {
            let (factor, low, high, old) =
                (*factor as f32, *low_freq_factor as f32, *high_freq_factor as f32, *original_max_position_embeddings as f32);
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
    }
}

impl RopeCache {
    pub fn build(b: &mut GraphBuilder, rope: &RopeConfig, head_dim: usize, rotary_dim: usize, max_positions: usize) -> Self {
        let inv = inverse_frequencies(rope, rotary_dim);
        let half = rotary_dim / 2;
        let mut cos = Vec::with_capacity(max_positions * half);
        let mut sin = Vec::with_capacity(max_positions * half);
        for p in 0..max_positions {
            for &f in &inv {
                let angle = p as f32 * f;
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        let label = format!("rope theta={} dim={rotary_dim} positions={max_positions} {:?}", rope.theta, rope.kind);
        let float = b.float;
        let cos = b.initializer(
            "rotary_emb.cos_cache",
            Recipe::from_f32(format!("cos {label}"), vec![max_positions, half], &cos).cast(float),
        );
        let sin = b.initializer(
            "rotary_emb.sin_cache",
            Recipe::from_f32(format!("sin {label}"), vec![max_positions, half], &sin).cast(float),
        );
        RopeCache { cos, sin, rotary_dim, head_dim }
    }

    /// `RotaryEmbedding(x, cos, sin, position_ids)` on a `[batch, seq, heads * head_dim]` input.
    pub fn apply(&self, b: &mut GraphBuilder, scope: &str, x: &str, num_heads: usize, position_ids: &str) -> String {
        let mut attrs = vec![Attr::int("interleaved", 0), Attr::int("num_heads", num_heads as i64)];
        if self.rotary_dim != self.head_dim {
            attrs.push(Attr::int("rotary_embedding_dim", self.rotary_dim as i64));
        }
        b.op(&format!("{scope}/RotaryEmbedding"), "RotaryEmbedding", &[x, &self.cos, &self.sin, position_ids], attrs)
    }
}
