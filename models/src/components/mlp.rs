use super::linear::{linear, LinearWeights};
use crate::{Activation, GraphBuilder};
use ir::Attr;

/// The activation in standard ONNX: SiLU as `x * Sigmoid(x)` (opset 24 has no SiLU op), GELU
/// as `Gelu` (opset 20+, `approximate="tanh"` for the tanh variant), ReLU as `Max(x, 0)` (every
/// table claims `Max`), squared ReLU as that squared by a `Mul`.
pub fn activation(b: &mut GraphBuilder, scope: &str, x: &str, act: Activation) -> String {
    match act {
        Activation::Silu => {
            let sig = b.op(&format!("{scope}/Sigmoid"), "Sigmoid", &[x], vec![]);
            b.op(&format!("{scope}/Mul"), "Mul", &[x, &sig], vec![])
        }
        Activation::Gelu => b.op(&format!("{scope}/Gelu"), "Gelu", &[x], vec![]),
        Activation::GeluTanh => b.op(&format!("{scope}/Gelu"), "Gelu", &[x], vec![Attr::string("approximate", "tanh")]),
        Activation::Relu | Activation::Relu2 => {
            let zero = b.initializer(&format!("{scope}.zero"), ir::Recipe::from_f32(format!("{scope} zero"), vec![], &[0.0]).cast(b.float));
            let r = b.op(&format!("{scope}/Max"), "Max", &[x, &zero], vec![]);
            if act == Activation::Relu {
                return r;
            }
            b.op(&format!("{scope}/Mul"), "Mul", &[&r, &r], vec![])
        }
        // The families refuse `xielu` unless their MLP names its parameters
        // (`DecoderFamily::scalars`), and that MLP calls `xielu` with them.
        Activation::Xielu => unreachable!("xIELU without its per-layer parameters: refused by DecoderFamily::scalars"),
    }
}

/// xIELU's scalars as the forward uses them: `alpha_p = softplus(alpha_p)`, `alpha_n = beta +
/// softplus(alpha_n)` of the stored parameters, `beta` and `eps` as stored.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct XieluParams {
    pub alpha_p: f32,
    pub alpha_n: f32,
    pub beta: f32,
    pub eps: f32,
}

/// xIELU (Apertus, transformers' `XIELUActivation`): `alpha_p * x * x + beta * x` where `x > 0`,
/// else `(expm1(min(x, eps)) - x) * alpha_n + beta * x`. `expm1(m)` is written `2t / (1 - t)`
/// with `t = tanh(m / 2)`, an identity that keeps its relative accuracy near 0 (where `exp(m) - 1`
/// loses all of it in f32 and the term is then `x^2 / 2`-small), with ops every table claims;
/// `min(x, eps)` is a `Where` (not every table claims `Min`).
pub fn xielu(b: &mut GraphBuilder, scope: &str, x: &str, p: XieluParams) -> String {
    let constant = |b: &mut GraphBuilder, name: &str, v: f32| b.initializer(&format!("{scope}.{name}"), ir::Recipe::from_f32(format!("{scope} {name} = {v}"), vec![], &[v]).cast(b.float));
    // Named for what they hold (the checkpoint's `alpha_p` / `alpha_n` are before softplus).
    let (alpha_p, alpha_n) = (constant(b, "softplus_alpha_p", p.alpha_p), constant(b, "beta_plus_softplus_alpha_n", p.alpha_n));
    let (beta, eps) = (constant(b, "beta", p.beta), constant(b, "eps", p.eps));
    let (zero, half, one, two) = (constant(b, "zero", 0.0), constant(b, "half", 0.5), constant(b, "one", 1.0), constant(b, "two", 2.0));
    let op = |b: &mut GraphBuilder, name: &str, kind: &str, inputs: &[&str]| b.op(&format!("{scope}/{name}"), kind, inputs, vec![]);
    let bx = op(b, "beta_x", "Mul", &[&beta, x]);
    // x > 0: (alpha_p * x) * x + beta * x, in transformers' order.
    let ax = op(b, "alpha_p_x", "Mul", &[&alpha_p, x]);
    let axx = op(b, "alpha_p_x_x", "Mul", &[&ax, x]);
    let positive = op(b, "positive", "Add", &[&axx, &bx]);
    // x <= 0: (expm1(min(x, eps)) - x) * alpha_n + beta * x.
    let above = op(b, "above_eps", "Greater", &[x, &eps]);
    let m = op(b, "min_eps", "Where", &[&above, &eps, x]);
    let h = op(b, "half_m", "Mul", &[&m, &half]);
    let t = op(b, "Tanh", "Tanh", &[&h]);
    let num = op(b, "two_t", "Mul", &[&two, &t]);
    let den = op(b, "one_minus_t", "Sub", &[&one, &t]);
    let expm1 = op(b, "expm1", "Div", &[&num, &den]);
    let d = op(b, "expm1_minus_x", "Sub", &[&expm1, x]);
    let n = op(b, "alpha_n_mul", "Mul", &[&d, &alpha_n]);
    let negative = op(b, "negative", "Add", &[&n, &bx]);
    let is_pos = op(b, "is_positive", "Greater", &[x, &zero]);
    op(b, "Where", "Where", &[&is_pos, &positive, &negative])
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
