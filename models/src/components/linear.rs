use crate::{Checkpoint, GraphBuilder, Result};
use ir::Recipe;

/// How a checkpoint stores a projection's weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightLayout {
    /// `torch.nn.Linear`: `[out, in]`; the graph's `MatMul(x, W)` needs `[in, out]`, so the
    /// recipe transposes.
    Linear,
    /// GPT-2's `Conv1D`: already `[in, out]`; used as stored.
    Conv1D,
}

/// Where a linear layer's weight comes from.
pub struct LinearWeights {
    /// `[in, out]` weight recipe, already in the graph's dtype.
    pub weight: Recipe,
    /// Optional `[out]` bias recipe.
    pub bias: Option<Recipe>,
}

impl LinearWeights {
    /// Reads `{scope}.weight` (`[out, in]`) and, when `bias`, `{scope}.bias`.
    pub fn torch(ckpt: &Checkpoint, b: &GraphBuilder, scope: &str, inp: usize, out: usize, bias: bool) -> Result<Self> {
        Self::read(ckpt, b, scope, inp, out, bias, WeightLayout::Linear)
    }

    /// Reads `{scope}.weight` in `layout` and, when `bias`, `{scope}.bias`.
    pub fn read(
        ckpt: &Checkpoint,
        b: &GraphBuilder,
        scope: &str,
        inp: usize,
        out: usize,
        bias: bool,
        layout: WeightLayout,
    ) -> Result<Self> {
        Ok(Self::read_fused(ckpt, b, scope, inp, &[out], bias, layout)?.remove(0))
    }

    /// Reads a fused projection (Phi-3's `qkv_proj`/`gate_up_proj`, GPT-2's `c_attn`) whose
    /// outputs are `parts` stacked along the output axis, and splits it into one weight per
    /// part with Slice recipes. The tensor is taken from the checkpoint once; the generic graph
    /// has one MatMul per part (a packing rule may fuse them again).
    pub fn read_fused(
        ckpt: &Checkpoint,
        b: &GraphBuilder,
        scope: &str,
        inp: usize,
        parts: &[usize],
        bias: bool,
        layout: WeightLayout,
    ) -> Result<Vec<Self>> {
        let total: usize = parts.iter().sum();
        let name = format!("{scope}.weight");
        let (weight, out_axis) = match layout {
            WeightLayout::Linear => (ckpt.tensor(&name, &[total, inp])?, 0),
            // GPTQ and AWQ pack a Conv1D layer as a Linear one (`[out, in]`, transposed before
            // packing): read as such, and seen `[in, out]` through a transpose that keeps its
            // integers visible (as GGUF's GPT-2 rows are).
            WeightLayout::Conv1D if ckpt.is_packed(&name) => (ckpt.tensor(&name, &[total, inp])?.transpose(vec![1, 0]), 1),
            WeightLayout::Conv1D => (ckpt.tensor(&name, &[inp, total])?, 1),
        };
        let bias = if bias { Some(ckpt.tensor(&format!("{scope}.bias"), &[total])?) } else { None };
        Ok(Self::split(b, weight, bias, out_axis, parts, layout))
    }

    /// [`Self::read_fused`] for a `[heads * 3 * head_dim, inp]` (`[out, in]`) projection whose
    /// rows are per head `[q | k | v]` (GPT-NeoX's `query_key_value`): [`Self::read_fused_per_group`]
    /// with one group per head.
    pub fn read_fused_per_head(ckpt: &Checkpoint, b: &GraphBuilder, scope: &str, inp: usize, heads: usize, head_dim: usize, bias: bool) -> Result<Vec<Self>> {
        Self::read_fused_per_group(ckpt, b, scope, inp, heads, 1, head_dim, bias)
    }

    /// [`Self::read_fused`] for a projection whose rows are, per key/value group, that group's
    /// `q_per_group` query heads, then its key head, then its value head (Falcon's
    /// `query_key_value`: one group holding every query head for multi-query attention, one per
    /// key/value head for the grouped form; GPT-NeoX's per-head `[q | k | v]` is one query head
    /// per group): [`Self::read_grouped`] with parts of `q_per_group`, 1 and 1 heads.
    #[allow(clippy::too_many_arguments)]
    pub fn read_fused_per_group(ckpt: &Checkpoint, b: &GraphBuilder, scope: &str, inp: usize, groups: usize, q_per_group: usize, head_dim: usize, bias: bool) -> Result<Vec<Self>> {
        Self::read_grouped(ckpt, b, scope, inp, groups, &[q_per_group, 1, 1], head_dim, bias)
    }

    /// [`Self::read_fused`] for a projection whose rows repeat `groups` times a block of parts,
    /// part `j` being `parts[j]` heads of `head_dim` rows (Falcon's per-group q/k/v, MiniCPM5's
    /// per-head query then gate): part `j` is the rows `reshape [groups, sum(parts), head_dim,
    /// inp] -> slice on axis 1 -> reshape`, the bias alike. Whole rows only, so a pre-quantized
    /// layer keeps its integers (a transpose of the rows would not), and no part reads more than
    /// its rows.
    #[allow(clippy::too_many_arguments)]
    pub fn read_grouped(ckpt: &Checkpoint, b: &GraphBuilder, scope: &str, inp: usize, groups: usize, parts: &[usize], head_dim: usize, bias: bool) -> Result<Vec<Self>> {
        let per: usize = parts.iter().sum();
        let rows = groups * per * head_dim;
        let weight = ckpt.tensor(&format!("{scope}.weight"), &[rows, inp])?;
        let bias = if bias { Some(ckpt.tensor(&format!("{scope}.bias"), &[rows])?) } else { None };
        let part = |r: &ir::Recipe, (start, end): (usize, usize), rest: &[usize]| {
            let mut split = vec![groups, per, head_dim];
            split.extend_from_slice(rest);
            let mut merged = vec![groups * (end - start) * head_dim];
            merged.extend_from_slice(rest);
            r.clone().reshape(split).slice(1, start, end).reshape(merged)
        };
        let ranges = parts.iter().scan(0, |at, &n| {
            let range = (*at, *at + n);
            *at += n;
            Some(range)
        });
        Ok(ranges
            .map(|range| LinearWeights {
                weight: part(&weight, range, &[inp]).transpose(vec![1, 0]).cast(b.float),
                bias: bias.as_ref().map(|r| part(r, range, &[]).cast(b.float)),
            })
            .collect())
    }

    /// `weight` (and `bias`) cut into `parts` along the output axis, each transposed to
    /// `[in, out]` when stored `[out, in]`, in the graph's dtype.
    fn split(b: &GraphBuilder, weight: ir::Recipe, bias: Option<ir::Recipe>, out_axis: usize, parts: &[usize], layout: WeightLayout) -> Vec<Self> {
        let mut start = 0;
        let mut out = Vec::with_capacity(parts.len());
        for &n in parts {
            let whole = parts.len() == 1;
            let mut w = if whole { weight.clone() } else { weight.clone().slice(out_axis, start, start + n) };
            if layout == WeightLayout::Linear {
                w = w.transpose(vec![1, 0]);
            }
            let bias = bias.as_ref().map(|r| if whole { r.clone() } else { r.clone().slice(0, start, start + n) }.cast(b.float));
            out.push(LinearWeights { weight: w.cast(b.float), bias });
            start += n;
        }
        out
    }
}

/// `x @ W (+ bias)`; initializers are named after the checkpoint scope. When the build gives
/// `scope` a LoRA slot, `+ (x A) B` after the bias ([`crate::lora`]).
pub fn linear(b: &mut GraphBuilder, scope: &str, x: &str, w: LinearWeights) -> String {
    let shape = w.weight.shape();
    let weight = b.initializer(&format!("{scope}.weight"), w.weight);
    let y = b.op(&format!("{scope}/MatMul"), "MatMul", &[x, &weight], vec![]);
    let y = match w.bias {
        None => y,
        Some(bias) => {
            let bias = b.initializer(&format!("{scope}.bias"), bias);
            b.op(&format!("{scope}/Add"), "Add", &[&y, &bias], vec![])
        }
    };
    match shape[..] {
        [inp, out] if b.lora.contains(scope) => crate::lora::branch(b, scope, x, &y, inp, out),
        _ => y,
    }
}
