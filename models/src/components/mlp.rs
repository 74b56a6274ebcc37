use super::linear::{linear, LinearWeights};
use crate::{Activation, GraphBuilder};
use ir::Attr;

/// The activation in standard ONNX: SiLU as `x * Sigmoid(x)` (opset 24 has no SiLU op), GELU
/// as `Gelu` (opset 20+, `approximate="tanh"` for the tanh variant), squared ReLU as
/// `Max(x, 0)` squared by a `Mul`.
pub fn activation(b: &mut GraphBuilder, scope: &str, x: &str, act: Activation) -> String {
    match act {
        Activation::Silu => {
            let sig = b.op(&format!("{scope}/Sigmoid"), "Sigmoid", &[x], vec![]);
            b.op(&format!("{scope}/Mul"), "Mul", &[x, &sig], vec![])
        }
        Activation::Gelu => b.op(&format!("{scope}/Gelu"), "Gelu", &[x], vec![]),
        Activation::GeluTanh => b.op(&format!("{scope}/Gelu"), "Gelu", &[x], vec![Attr::string("approximate", "tanh")]),
        Activation::Relu2 => {
            let zero = b.initializer(&format!("{scope}.zero"), ir::Recipe::from_f32(format!("{scope} zero"), vec![], &[0.0]).cast(b.float));
            let r = b.op(&format!("{scope}/Max"), "Max", &[x, &zero], vec![]);
            b.op(&format!("{scope}/Mul"), "Mul", &[&r, &r], vec![])
        }
    }
}

/// Scopes (checkpoint names) of a gated MLP's three projections.
pub struct GatedScopes<'a> {
    pub gate: &'a str,
    pub up: &'a str,
    pub down: &'a str,
}

/// The gated MLP of Llama-style models: `down(act(gate(x)) * up(x))`.
pub fn gated(
    b: &mut GraphBuilder,
    scope: &str,
    names: GatedScopes,
    x: &str,
    [gate, up, down]: [LinearWeights; 3],
    act: Activation,
) -> String {
    let g = linear(b, names.gate, x, gate);
    let u = linear(b, names.up, x, up);
    let a = activation(b, &format!("{scope}.act"), &g, act);
    let h = b.op(&format!("{scope}/Mul"), "Mul", &[&a, &u], vec![]);
    linear(b, names.down, &h, down)
}

/// The plain MLP of GPT-2: `down(act(up(x)))`.
pub fn plain(b: &mut GraphBuilder, scope: &str, up_scope: &str, down_scope: &str, x: &str, [up, down]: [LinearWeights; 2], act: Activation) -> String {
    let u = linear(b, up_scope, x, up);
    let a = activation(b, &format!("{scope}.act"), &u, act);
    linear(b, down_scope, &a, down)
}
