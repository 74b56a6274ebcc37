use super::linear::{linear, LinearWeights};
use crate::{Checkpoint, GraphBuilder, Result};

/// The gated MLP of Llama-style models: `down(silu(gate(x)) * up(x))`, with SiLU written as
/// `x * Sigmoid(x)` (standard ONNX has no SiLU op at opset 24).
pub fn swiglu(
    b: &mut GraphBuilder,
    scope: &str,
    x: &str,
    gate: LinearWeights,
    up: LinearWeights,
    down: LinearWeights,
) -> Result<String> {
    let g = linear(b, &format!("{scope}.gate_proj"), x, gate);
    let u = linear(b, &format!("{scope}.up_proj"), x, up);
    let sig = b.op(&format!("{scope}.act/Sigmoid"), "Sigmoid", &[&g], vec![]);
    let act = b.op(&format!("{scope}.act/Mul"), "Mul", &[&g, &sig], vec![]);
    let h = b.op(&format!("{scope}/Mul"), "Mul", &[&act, &u], vec![]);
    Ok(linear(b, &format!("{scope}.down_proj"), &h, down))
}

/// Reads the three Llama-style projections of an MLP at `scope`.
pub fn swiglu_weights(
    ckpt: &Checkpoint,
    b: &GraphBuilder,
    scope: &str,
    hidden: usize,
    inter: usize,
    bias: bool,
) -> Result<(LinearWeights, LinearWeights, LinearWeights)> {
    Ok((
        LinearWeights::torch(ckpt, b, &format!("{scope}.gate_proj"), hidden, inter, bias)?,
        LinearWeights::torch(ckpt, b, &format!("{scope}.up_proj"), hidden, inter, bias)?,
        LinearWeights::torch(ckpt, b, &format!("{scope}.down_proj"), inter, hidden, bias)?,
    ))
}
