use crate::{Checkpoint, GraphBuilder, Result};
use ir::Attr;

/// Which normalization a family uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormKind {
    /// `RMSNormalization` with a weight (Llama, Qwen, Mistral, Phi-3).
    Rms,
    /// `LayerNormalization` with a weight and a bias (GPT-2).
    Layer,
    /// RMSNorm that multiplies by `1 + weight` (Gemma): the same `RMSNormalization` node, its
    /// weight recipe `offset[+1](weight)` computed in f32 and then cast, so the `+ 1` costs
    /// nothing at run time and every RMSNorm rule applies unchanged.
    RmsUnitOffset,
    /// LayerNorm1P (Nemotron): `LayerNormalization` with `1 + weight` and a bias, the `+ 1`
    /// folded into the weight recipe as for `RmsUnitOffset`.
    LayerUnitOffset,
    /// LayerNorm without weight or bias (OLMo 1: none in the checkpoint): `LayerNormalization`
    /// with constant ones and zeros, so the LayerNorm rules still see their op.
    LayerNoAffine,
    /// LayerNorm with a weight and no bias (Cohere's mean-centred `CohereLayerNorm`): a
    /// constant zero bias, as for `LayerNoAffine`.
    LayerNoBias,
    /// RMSNorm without a weight (NanoChat's, Llama 4's `WeightlessRMSNorm`: none in the
    /// checkpoint): `RMSNormalization` with a constant of ones, so the RMSNorm rules still see
    /// their op.
    RmsNoAffine,
}

/// `RMSNormalization(x, weight)` over the last axis (opset 23+, computed in f32 internally:
/// `stash_type` keeps its default of 1).
pub fn rms_norm(b: &mut GraphBuilder, ckpt: &Checkpoint, scope: &str, x: &str, dim: usize, eps: f64) -> Result<String> {
    rms_norm_of(b, ckpt, NormKind::Rms, scope, x, dim, eps)
}

/// [`rms_norm`] of any RMS kind (`RmsUnitOffset` folds the `+ 1` into the weight,
/// `RmsNoAffine` reads nothing and scales by a constant of ones).
fn rms_norm_of(b: &mut GraphBuilder, ckpt: &Checkpoint, kind: NormKind, scope: &str, x: &str, dim: usize, eps: f64) -> Result<String> {
    let w = if kind == NormKind::RmsNoAffine {
        let ones = ir::Recipe::from_f32(format!("{scope} ones (no weight)"), vec![dim], &vec![1.0; dim]).cast(b.float);
        b.initializer(&format!("{scope}.ones"), ones)
    } else {
        let stored = ckpt.tensor(&format!("{scope}.weight"), &[dim])?;
        let recipe = if kind == NormKind::RmsUnitOffset { stored.offset(1.0) } else { stored }.cast(b.float);
        b.initializer(&format!("{scope}.weight"), recipe)
    };
    Ok(b.op(
        &format!("{scope}/RMSNormalization"),
        "RMSNormalization",
        &[x, &w],
        vec![Attr::int("axis", -1), Attr::float("epsilon", eps as f32)],
    ))
}

/// `LayerNormalization(x, weight, bias)` over the last axis (f32 internally, `stash_type` 1).
pub fn layer_norm(b: &mut GraphBuilder, ckpt: &Checkpoint, scope: &str, x: &str, dim: usize, eps: f64) -> Result<String> {
    layer_norm_of(b, ckpt, NormKind::Layer, scope, x, dim, eps)
}

/// [`layer_norm`] of any LayerNorm kind: `LayerUnitOffset` folds the `+ 1` into the weight,
/// `LayerNoAffine` reads nothing and scales by a constant of ones (no bias input).
fn layer_norm_of(b: &mut GraphBuilder, ckpt: &Checkpoint, kind: NormKind, scope: &str, x: &str, dim: usize, eps: f64) -> Result<String> {
    let attrs = vec![Attr::int("axis", -1), Attr::float("epsilon", eps as f32)];
    let op = format!("{scope}/LayerNormalization");
    if kind == NormKind::LayerNoAffine {
        // A zero bias too, though optional in ONNX: fuse.skip_layer_norm's pattern reads both
        // (`gamma_beta_1d`), so the residual Adds fuse as for any LayerNorm.
        let ones = ir::Recipe::from_f32(format!("{scope} ones (no weight)"), vec![dim], &vec![1.0; dim]).cast(b.float);
        let zeros = ir::Recipe::from_f32(format!("{scope} zeros (no bias)"), vec![dim], &vec![0.0; dim]).cast(b.float);
        let w = b.initializer(&format!("{scope}.ones"), ones);
        let bias = b.initializer(&format!("{scope}.zeros"), zeros);
        return Ok(b.op(&op, "LayerNormalization", &[x, &w, &bias], attrs));
    }
    let stored = ckpt.tensor(&format!("{scope}.weight"), &[dim])?;
    let weight = if kind == NormKind::LayerUnitOffset { stored.offset(1.0) } else { stored }.cast(b.float);
    let bias = if kind == NormKind::LayerNoBias {
        ir::Recipe::from_f32(format!("{scope} zeros (no bias)"), vec![dim], &vec![0.0; dim]).cast(b.float)
    } else {
        ckpt.tensor(&format!("{scope}.bias"), &[dim])?.cast(b.float)
    };
    let w = b.initializer(&format!("{scope}.weight"), weight);
    let bias = b.initializer(&format!("{scope}.bias"), bias);
    Ok(b.op(&op, "LayerNormalization", &[x, &w, &bias], attrs))
}

/// The family's norm over the last axis.
pub fn norm(b: &mut GraphBuilder, ckpt: &Checkpoint, kind: NormKind, scope: &str, x: &str, dim: usize, eps: f64) -> Result<String> {
    match kind {
        NormKind::Rms | NormKind::RmsUnitOffset | NormKind::RmsNoAffine => rms_norm_of(b, ckpt, kind, scope, x, dim, eps),
        NormKind::Layer | NormKind::LayerUnitOffset | NormKind::LayerNoAffine | NormKind::LayerNoBias => layer_norm_of(b, ckpt, kind, scope, x, dim, eps),
    }
}

/// The family's norm applied per head (Qwen3's `q_norm`/`k_norm`; Gemma 3's with `kind`
/// `RmsUnitOffset`; Phi's `q_layernorm`/`k_layernorm`, a LayerNorm): `[batch, seq, heads *
/// head_dim]` is reshaped to `[batch, seq, heads, head_dim]`, normalized over `head_dim`, and
/// reshaped back.
#[allow(clippy::too_many_arguments)]
pub fn per_head_norm(
    b: &mut GraphBuilder,
    ckpt: &Checkpoint,
    kind: NormKind,
    scope: &str,
    x: &str,
    heads: usize,
    head_dim: usize,
    eps: f64,
) -> Result<String> {
    let split = b.const_i64_1d(&format!("{scope}/heads_shape"), &[0, 0, heads as i64, head_dim as i64]);
    let merged = b.const_i64_1d(&format!("{scope}/merged_shape"), &[0, 0, (heads * head_dim) as i64]);
    let x4 = b.op(&format!("{scope}/Reshape_heads"), "Reshape", &[x, &split], vec![]);
    let y4 = norm(b, ckpt, kind, scope, &x4, head_dim, eps)?;
    Ok(b.op(&format!("{scope}/Reshape_merge"), "Reshape", &[&y4, &merged], vec![]))
}

/// A mean-centred LayerNorm over each head's `head_dim` values whose weight is its own per head
/// (`weight` `[heads, head_dim]`, f32; no bias): `[batch, seq, heads * head_dim]` reshaped to
/// `[batch, seq, heads, head_dim]`, normalized without an affine, multiplied by the weight, and
/// reshaped back. `LayerNormalization`'s scale covers the normalized axes only, so the per-head
/// weight is a separate `Mul` (Cohere's `CohereLayerNorm((heads, head_dim))`, StableLM's
/// `StableLmLayerNormPerHead`).
#[allow(clippy::too_many_arguments)]
pub fn per_head_weighted_layer_norm(b: &mut GraphBuilder, ckpt: &Checkpoint, scope: &str, x: &str, weight: ir::Recipe, heads: usize, head_dim: usize, eps: f64) -> Result<String> {
    let split = b.const_i64_1d(&format!("{scope}/heads_shape"), &[0, 0, heads as i64, head_dim as i64]);
    let merged = b.const_i64_1d(&format!("{scope}/merged_shape"), &[0, 0, (heads * head_dim) as i64]);
    let x4 = b.op(&format!("{scope}/Reshape_heads"), "Reshape", &[x, &split], vec![]);
    let y4 = layer_norm_of(b, ckpt, NormKind::LayerNoAffine, scope, &x4, head_dim, eps)?;
    let w = b.initializer(&format!("{scope}.weight"), weight.cast(b.float));
    let y4 = b.op(&format!("{scope}/Mul_head_weight"), "Mul", &[&y4, &w], vec![]);
    Ok(b.op(&format!("{scope}/Reshape_merge"), "Reshape", &[&y4, &merged], vec![]))
}
