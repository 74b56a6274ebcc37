//! LoRA slots: `y = base(x) + MatMul(MatMul(x, A), B)` on the projections a package's adapters
//! target, with A and B graph inputs that onnxruntime-genai binds from an `.onnx_adapter` file
//! (docs/adapters.md).
//!
//! Each slot's inputs are named after the projection's checkpoint scope (`{module}.lora_A.weight`,
//! `{module}.lora_B.weight`): genai does no name mapping, it feeds every adapter parameter to the
//! graph input of exactly that name. Each slot has its own symbolic rank dim (`{module}.r`):
//! ONNX Runtime's memory planner treats equal dim names as equal sizes, so one shared rank name
//! breaks an adapter that covers some slots at rank r while the others keep rank 0. Each input
//! has a same-name empty initializer (`[in, 0]`, `[0, out]`): the default that makes it
//! optional, so no adapter, or one covering only some slots, runs (the branch adds zeros).

use crate::GraphBuilder;
use ir::{Dim, Recipe};

/// Suffix of a slot's A input (`[in, r]`, the PEFT `lora_A.weight` transposed).
pub const A_SUFFIX: &str = ".lora_A.weight";
/// Suffix of a slot's B input (`[r, out]`, the PEFT `lora_B.weight` transposed and pre-scaled).
pub const B_SUFFIX: &str = ".lora_B.weight";

/// The parts of a fused projection, in the order its output stacks them: q/k/v of a fused
/// attention projection (Phi-3 `qkv_proj`, GPT-2 `c_attn`), gate/up of a fused MLP one (Phi-3's,
/// GLM's and GLM-4's `gate_up_proj`). The graph builds each part as its own projection `{module}.{part}`
/// ([`part_scope`]) with its own slot; an adapter on the fused module gives each part its A and
/// that part's rows of B, which is the adapter's `(x A) B` split as the weight is split.
pub const FUSED_PARTS: &[&[&str]] = &[&QKV_PARTS, &GATE_UP_PARTS];
/// A fused attention projection's parts.
pub const QKV_PARTS: [&str; 3] = ["q", "k", "v"];
/// A fused gated MLP projection's parts.
pub const GATE_UP_PARTS: [&str; 2] = ["gate", "up"];

/// The scope of part `part` of the fused projection `module`.
pub fn part_scope(module: &str, part: &str) -> String {
    format!("{module}.{part}")
}

/// The A input of the slot on `module` (a projection's checkpoint scope).
pub fn a_input(module: &str) -> String {
    format!("{module}{A_SUFFIX}")
}

/// The B input of the slot on `module`.
pub fn b_input(module: &str) -> String {
    format!("{module}{B_SUFFIX}")
}

/// The slot's own symbolic rank dim.
pub fn rank_dim(module: &str) -> String {
    format!("{module}.r")
}

/// Adds the slot on `scope` to the projection output `y = base(x)` (bias included) of `x`:
/// returns `y + (x A) B`. `inp`/`out` are the projection's widths.
pub(crate) fn branch(b: &mut GraphBuilder, scope: &str, x: &str, y: &str, inp: usize, out: usize) -> String {
    let (a, bn, r) = (a_input(scope), b_input(scope), Dim::sym(&rank_dim(scope)));
    let float = b.float;
    let a = b.input(&a, float, vec![Dim::Fixed(inp as i64), r.clone()]);
    let bn = b.input(&bn, float, vec![r, Dim::Fixed(out as i64)]);
    // The empty defaults: rank 0, so the branch is an all-zero [.., out] when nothing is bound.
    // Same-name initializers: pushed directly, since `initializer` would rename a taken name.
    b.graph.initializers.push((a.clone(), Recipe::data(a.clone(), float, vec![inp, 0], Vec::new())));
    b.graph.initializers.push((bn.clone(), Recipe::data(bn.clone(), float, vec![0, out], Vec::new())));
    let xa = b.op(&format!("{scope}/lora/MatMul_A"), "MatMul", &[x, &a], vec![]);
    let l = b.op(&format!("{scope}/lora/MatMul_B"), "MatMul", &[&xa, &bn], vec![]);
    b.op(&format!("{scope}/lora/Add"), "Add", &[y, &l], vec![])
}
