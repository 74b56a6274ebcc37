//! A mixture-of-experts block in standard ONNX: a router, top-k routing, every expert's gated
//! MLP, and the routing-weighted sum (docs/generic-graph.md, "Mixture-of-experts block").
//!
//! The experts are computed densely: each token goes through all `E` experts as one batched
//! `MatMul` over stacked weights, and the experts it was not routed to get weight 0. Standard
//! ONNX has no data-dependent dispatch outside `Loop`/`If`, and gathering the routed experts'
//! weights per token copies `k` weight matrices per token (gigabytes per prefill at real
//! sizes), so dense is the portable form; execution-provider rules replace the block with a
//! fused kernel where one exists (`com.microsoft.MoE`).
//!
//! The top-k selection is a rank count (`rank[e]` = experts with a higher probability, ties
//! broken towards the lower index, as `torch.topk`), so the graph needs no `TopK` or scatter:
//! the ops are the comparisons, `Where` and `ReduceSum` every table already claims. Routing
//! runs in f32, as transformers does (`softmax(..., dtype=torch.float)`), whatever the build
//! dtype: the Casts to f32 are named `<scope>/routing_f32/...`, the one widening besides
//! `lower.rotary_f32` that the dtype tests allow (tests/tests/dtypes.rs).

use super::mlp::activation;
use crate::{Activation, GraphBuilder};
use ir::{Attr, DType, Recipe};

/// The stacked weights of one MoE block. Fused kernels take these layouts as they are; the
/// dense graph reads them through a `Transpose` node.
pub enum ExpertStacks {
    /// Each in the checkpoint's `[out, in]` orientation per expert: `gate`, `up` `[E, inter,
    /// hidden]`, `down` `[E, hidden, inter]`, no biases (Mixtral, Qwen, PhiMoE).
    Separate { gate: Recipe, up: Recipe, down: Recipe },
    /// gpt-oss: `gate_up` `[E, 2 * inter, hidden]` with gate and up on even and odd rows (the
    /// layout com.microsoft MoE calls `swiglu_fusion` 1), its bias `[E, 2 * inter]`, `down`
    /// `[E, hidden, inter]` and its bias `[E, hidden]`.
    Interleaved { gate_up: Recipe, gate_up_bias: Recipe, down: Recipe, down_bias: Recipe, inter: usize },
}

/// The experts' activation between the gate/up and the down projections.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ExpertAct {
    /// `act(gate) * up`.
    Gated(Activation),
    /// gpt-oss: `(clamp(up, -limit, limit) + 1) * g * sigmoid(alpha * g)`, `g = min(gate, limit)`.
    ClampedSwiglu { alpha: f32, limit: f32 },
}

/// Where the block's weights go and how it routes.
pub struct MoeBlock<'a> {
    /// Node-name scope (the checkpoint's MoE module, `model.layers.0.block_sparse_moe`).
    pub scope: &'a str,
    /// Initializer name of the router weight (`{router}.weight`, stored `[hidden, experts]`).
    pub router: &'a str,
    /// `[hidden, experts]` router weight recipe.
    pub router_weight: Recipe,
    /// `[experts]` router bias (gpt-oss), added to the logits.
    pub router_bias: Option<Recipe>,
    /// Initializer name prefix of the stacks (`{experts}.gate.weight`, ...).
    pub experts: &'a str,
    pub stacks: ExpertStacks,
    pub hidden: usize,
    /// `[batch, seq]` as the graph's token input declares them.
    pub token_dims: Vec<ir::Dim>,
    pub num_experts: usize,
    pub top_k: usize,
    /// Renormalize the top-k probabilities to sum to 1 (Mixtral; Qwen with `norm_topk_prob`;
    /// gpt-oss's softmax over the chosen logits is the same weights).
    pub normalize: bool,
    /// Sparsemixer routing with this jitter (PhiMoE) instead of softmax top-k.
    pub sparse_mixer: Option<f32>,
    /// DeepSeek's grouped routing instead of softmax top-k.
    pub grouped: Option<GroupedRouting>,
    pub act: ExpertAct,
}

/// DeepSeek's routing: sigmoid (V3) or softmax (V2) scores, a per-expert correction added for
/// the choice only (V3), groups of experts scored by their `group_best` best choices with the
/// best `topk_groups` groups open, the top k open experts by choice weighted by their score
/// (renormalized when the block's `normalize` says, plus 1e-20) times `scale`.
pub struct GroupedRouting {
    pub sigmoid: bool,
    /// The router weight is f32 (the block's `router_weight`) and the projection runs in f32 on
    /// the hidden states cast up, its nodes named `<block>/routing_f32/...`.
    pub f32_router: bool,
    /// `[experts]` correction (`e_score_correction_bias`) and its initializer name.
    pub bias: Option<(Recipe, String)>,
    /// The correction joins the logits, not the scores, for the choice (Kolibri 1).
    pub choose_on_logits: bool,
    pub group_best: usize,
    pub groups: usize,
    pub topk_groups: usize,
    /// `routed_scaling_factor`.
    pub scale: f32,
}

/// The routed experts' weighted sum for `x` `[batch, seq, hidden]`; returns a value of the
/// same shape. The experts' MatMuls broadcast `x` as `[batch, 1, seq, hidden]` against the
/// `[experts, hidden, inter]` stacks, so no reshape hides the shapes from the rules.
pub fn moe_block(b: &mut GraphBuilder, m: MoeBlock, x: &str) -> String {
    let s = m.scope;
    let weights = routing_weights(b, &m, x);
    let stack = |b: &mut GraphBuilder, part: &str, recipe: Recipe| -> String {
        let w = b.initializer(&format!("{}.{part}.weight", m.experts), recipe);
        b.op(&format!("{}.{part}/Transpose", m.experts), "Transpose", &[&w], vec![Attr::ints("perm", &[0, 2, 1])])
    };
    let e = m.experts;
    // The stacks' initializers first, then the tokens by expert (the order the graph's text
    // lists them in).
    let (stacks, inter) = match m.stacks {
        ExpertStacks::Separate { gate, up, down } => ((stack(b, "gate", gate), stack(b, "up", up), stack(b, "down", down), None), None),
        ExpertStacks::Interleaved { gate_up, gate_up_bias, down, down_bias, inter } => {
            ((stack(b, "gate_up", gate_up), String::new(), stack(b, "down", down), Some((gate_up_bias, down_bias))), Some(inter))
        }
    };
    let axis1 = b.const_i64_1d(&format!("{s}/axis1"), &[1]);
    let x4 = b.op(&format!("{s}/by_expert"), "Unsqueeze", &[x, &axis1], vec![]);
    // A `[E, n]` bias added to `[batch, E, seq, n]` as `[E, 1, n]`.
    let add_bias = |b: &mut GraphBuilder, part: &str, y: &str, recipe: Recipe| -> String {
        let bias = b.initializer(&format!("{e}.{part}.bias"), recipe);
        let bias = b.op(&format!("{e}.{part}/bias_by_expert"), "Unsqueeze", &[&bias, &axis1], vec![]);
        b.op(&format!("{e}.{part}/Add"), "Add", &[y, &bias], vec![])
    };
    let y = match (stacks, inter) {
        ((wgu, _, wd, Some((gate_up_bias, down_bias))), Some(inter)) => {
            let gu = b.op(&format!("{e}.gate_up/MatMul"), "MatMul", &[&x4, &wgu], vec![]);
            let gu = add_bias(b, "gate_up", &gu, gate_up_bias);
            // [batch, E, seq, 2 * inter] -> [.., inter, 2]: gate on even columns, up on odd.
            let pairs_shape = b.const_i64_1d(&format!("{e}.gate_up/pairs_shape"), &[0, 0, 0, inter as i64, 2]);
            let pairs = b.op(&format!("{e}.gate_up/pairs"), "Reshape", &[&gu, &pairs_shape], vec![]);
            let (even, odd) = (b.const_i64(&format!("{e}.gate_up/even"), &[0]), b.const_i64(&format!("{e}.gate_up/odd"), &[1]));
            let g = b.op(&format!("{e}.gate/Gather"), "Gather", &[&pairs, &even], vec![Attr::int("axis", -1)]);
            let u = b.op(&format!("{e}.up/Gather"), "Gather", &[&pairs, &odd], vec![Attr::int("axis", -1)]);
            let h = expert_activation(b, e, &g, &u, m.act);
            let y = b.op(&format!("{e}.down/MatMul"), "MatMul", &[&h, &wd], vec![]);
            add_bias(b, "down", &y, down_bias)
        }
        ((wg, wu, wd, _), _) => {
            let g = b.op(&format!("{e}.gate/MatMul"), "MatMul", &[&x4, &wg], vec![]);
            let u = b.op(&format!("{e}.up/MatMul"), "MatMul", &[&x4, &wu], vec![]);
            let h = expert_activation(b, e, &g, &u, m.act);
            b.op(&format!("{e}.down/MatMul"), "MatMul", &[&h, &wd], vec![])
        }
    };
    // [batch, seq, experts] -> [batch, experts, seq, 1], beside y [batch, experts, seq, hidden].
    let per_expert = b.op(&format!("{s}/weights_by_expert"), "Transpose", &[&weights], vec![Attr::ints("perm", &[0, 2, 1])]);
    let last = b.const_i64_1d(&format!("{s}/last_axis"), &[-1]);
    let per_expert = b.op(&format!("{s}/weights_column"), "Unsqueeze", &[&per_expert, &last], vec![]);
    let weighted = b.op(&format!("{s}/weighted"), "Mul", &[&y, &per_expert], vec![]);
    let out = b.op(&format!("{s}/ReduceSum"), "ReduceSum", &[&weighted, &axis1], vec![Attr::int("keepdims", 0)]);
    // The sum has x's shape, [batch, seq, hidden]: recorded, so the residual Add after it keeps a
    // known shape for the rules that check it (the skip-norm and attention fusions downstream).
    let mut shape = m.token_dims.clone();
    shape.push(ir::Dim::Fixed(m.hidden as i64));
    b.annotate(&out, b.float, shape);
    out
}

/// The experts' hidden activations from their gate and up projections `[batch, E, seq, inter]`.
fn expert_activation(b: &mut GraphBuilder, e: &str, g: &str, u: &str, act: ExpertAct) -> String {
    match act {
        ExpertAct::Gated(act) => {
            let a = activation(b, &format!("{e}.act"), g, act);
            b.op(&format!("{e}/Mul"), "Mul", &[&a, u], vec![])
        }
        ExpertAct::ClampedSwiglu { alpha, limit } => {
            let float = b.float;
            let constant = |b: &mut GraphBuilder, name: &str, v: f32| -> String {
                let init = format!("{e}.act/{name}");
                b.initializer(&init, Recipe::from_f32(format!("{init} = {v}"), vec![], &[v]).cast(float))
            };
            let (hi, lo, one, a) = (constant(b, "limit", limit), constant(b, "minus_limit", -limit), constant(b, "one", 1.0), constant(b, "alpha", alpha));
            let g = b.op(&format!("{e}.act/gate_clamp"), "Min", &[g, &hi], vec![]);
            let u = b.op(&format!("{e}.act/up_floor"), "Max", &[u, &lo], vec![]);
            let u = b.op(&format!("{e}.act/up_clamp"), "Min", &[&u, &hi], vec![]);
            let scaled = b.op(&format!("{e}.act/alpha_gate"), "Mul", &[&g, &a], vec![]);
            let sig = b.op(&format!("{e}.act/Sigmoid"), "Sigmoid", &[&scaled], vec![]);
            let glu = b.op(&format!("{e}.act/glu"), "Mul", &[&g, &sig], vec![]);
            let u1 = b.op(&format!("{e}.act/up_plus_one"), "Add", &[&u, &one], vec![]);
            b.op(&format!("{e}/Mul"), "Mul", &[&u1, &glu], vec![])
        }
    }
}

/// `[batch, seq, experts]` routing weights in the build dtype: the softmax of the router logits
/// where an expert is among the token's top k, else 0, renormalized over the top k when the
/// family does.
fn routing_weights(b: &mut GraphBuilder, m: &MoeBlock, x: &str) -> String {
    let s = m.scope;
    let router = b.initializer(&format!("{}.weight", m.router), m.router_weight.clone());
    if let Some(g) = m.grouped.as_ref().filter(|g| g.f32_router) {
        // DeepSeek's f32 router: the hidden states cast up, the f32 weight, f32 logits.
        let x = cast(b, &format!("{s}/routing_f32/hidden"), x, DType::F32, b.float);
        let logits = b.op(&format!("{s}/routing_f32/router/MatMul"), "MatMul", &[&x, &router], vec![]);
        return grouped_routing(b, m, g, &logits);
    }
    let mut logits = b.op(&format!("{}/MatMul", m.router), "MatMul", &[x, &router], vec![]);
    if let Some(bias) = &m.router_bias {
        let bias = b.initializer(&format!("{}.bias", m.router), bias.clone());
        logits = b.op(&format!("{}/Add", m.router), "Add", &[&logits, &bias], vec![]);
    }
    let logits = cast(b, &format!("{s}/routing_f32/logits"), &logits, DType::F32, b.float);
    if let Some(g) = &m.grouped {
        return grouped_routing(b, m, g, &logits);
    }
    let p = b.op(&format!("{s}/Softmax"), "Softmax", &[&logits], vec![Attr::int("axis", -1)]);
    let rank = rank_count(b, &format!("{s}/rank"), &format!("{s}/routing_f32"), &p, m.num_experts);
    if let Some(jitter) = m.sparse_mixer {
        let w = sparse_mixer(b, s, &logits, &rank, jitter);
        let float = b.float;
        return cast(b, &format!("{s}/routing_weights"), &w, float, DType::F32);
    }
    let w = top_k_weights(b, m, &rank, &p);
    let float = b.float;
    cast(b, &format!("{s}/routing_weights"), &w, float, DType::F32)
}

/// `Where(rank < k, scores, 0)` (f32), divided by its sum when the block renormalizes.
fn top_k_weights(b: &mut GraphBuilder, m: &MoeBlock, rank: &str, scores: &str) -> String {
    let s = m.scope;
    let k = f32_constant(b, s, "top_k", m.top_k as f32);
    let chosen = b.op(&format!("{s}/chosen"), "Less", &[rank, &k], vec![]);
    let zero = f32_constant(b, s, "zero", 0.0);
    let w = b.op(&format!("{s}/top_k_weights"), "Where", &[&chosen, scores, &zero], vec![]);
    if !m.normalize {
        return w;
    }
    let total = expert_sum(b, s, &w);
    b.op(&format!("{s}/normalize/Div"), "Div", &[&w, &total], vec![])
}

/// `ReduceSum(w, -1) [keepdims 1]`: a token's total over its experts, for the renormalization.
fn expert_sum(b: &mut GraphBuilder, s: &str, w: &str) -> String {
    let axes = b.const_i64_1d(&format!("{s}/normalize/axes"), &[-1]);
    b.op(&format!("{s}/normalize/ReduceSum"), "ReduceSum", &[w, &axes], vec![Attr::int("keepdims", 1)])
}

/// `rank[e]` = #{j : v[j] > v[e]} + #{j < e : v[j] == v[e]} over the last axis of `v` (`n`
/// wide), in f32: the place `torch.topk` gives entry `e` (ties towards the lower index). The
/// two counts are disjoint, so they add (no `Or`: not every table claims it). `scope` names
/// the nodes, `casts` (under `<block>/routing_f32`) the Casts.
fn rank_count(b: &mut GraphBuilder, scope: &str, casts: &str, v: &str, n: usize) -> String {
    let (own_axis, other_axis) = (b.const_i64_1d(&format!("{scope}/own_axis"), &[-1]), b.const_i64_1d(&format!("{scope}/other_axis"), &[-2]));
    let own = b.op(&format!("{scope}/own"), "Unsqueeze", &[v, &own_axis], vec![]);
    let other = b.op(&format!("{scope}/other"), "Unsqueeze", &[v, &other_axis], vec![]);
    let higher = b.op(&format!("{scope}/higher"), "Greater", &[&other, &own], vec![]);
    let equal = b.op(&format!("{scope}/equal"), "Equal", &[&other, &own], vec![]);
    let before = earlier_experts(b, &format!("{scope}/earlier"), n);
    let tie = b.op(&format!("{scope}/tie"), "And", &[&equal, &before], vec![]);
    let to_f32 = || vec![Attr::int("to", DType::F32.to_onnx() as i64)];
    let higher = b.op(&format!("{casts}/higher_count"), "Cast", &[&higher], to_f32());
    let tie = b.op(&format!("{casts}/tie_count"), "Cast", &[&tie], to_f32());
    let ahead = b.op(&format!("{scope}/ahead"), "Add", &[&higher, &tie], vec![]);
    b.op(scope, "ReduceSum", &[&ahead, &own_axis], vec![Attr::int("keepdims", 0)])
}

/// DeepSeek's routing weights `[batch, seq, experts]` (see [`GroupedRouting`]) from the f32
/// router logits, with the rank count of [`rank_count`] in place of `topk` (within a group
/// for its best, over the groups, over the open experts). In the build dtype.
fn grouped_routing(b: &mut GraphBuilder, m: &MoeBlock, g: &GroupedRouting, logits: &str) -> String {
    let s = m.scope;
    let float = b.float;
    let scores = match g.sigmoid {
        true => b.op(&format!("{s}/Sigmoid"), "Sigmoid", &[logits], vec![]),
        false => b.op(&format!("{s}/Softmax"), "Softmax", &[logits], vec![Attr::int("axis", -1)]),
    };
    let choice = match &g.bias {
        None => scores.clone(),
        // An f32 initializer in every build (transformers keeps the buffer in f32).
        Some((bias, name)) => {
            let bias = b.initializer(name, bias.clone().cast(DType::F32));
            let base = if g.choose_on_logits { logits } else { scores.as_str() };
            b.op(&format!("{s}/routing_f32/choice"), "Add", &[base, &bias], vec![])
        }
    };
    let open = if g.groups > 1 {
        let per = m.num_experts / g.groups;
        let shape = b.const_i64_1d(&format!("{s}/groups/shape"), &[0, 0, g.groups as i64, per as i64]);
        let grouped = b.op(&format!("{s}/groups/Reshape"), "Reshape", &[&choice, &shape], vec![]);
        // A group's score: the sum of its best choices.
        let inner = rank_count(b, &format!("{s}/groups/rank"), &format!("{s}/routing_f32/groups"), &grouped, per);
        let n = f32_constant(b, s, "groups/best_count", g.group_best as f32);
        let best = b.op(&format!("{s}/groups/best"), "Less", &[&inner, &n], vec![]);
        let zero = f32_constant(b, s, "groups/zero", 0.0);
        let kept = b.op(&format!("{s}/groups/best_choices"), "Where", &[&best, &grouped, &zero], vec![]);
        let last = b.const_i64_1d(&format!("{s}/groups/last_axis"), &[-1]);
        let score = b.op(&format!("{s}/groups/score"), "ReduceSum", &[&kept, &last], vec![Attr::int("keepdims", 0)]);
        let group_rank = rank_count(b, &format!("{s}/groups/group_rank"), &format!("{s}/routing_f32/group_rank"), &score, g.groups);
        let topk_groups = f32_constant(b, s, "groups/topk_groups", g.topk_groups as f32);
        let is_open = b.op(&format!("{s}/groups/open"), "Less", &[&group_rank, &topk_groups], vec![]);
        let is_open = b.op(&format!("{s}/groups/open_column"), "Unsqueeze", &[&is_open, &last], vec![]);
        let neg_inf = f32_constant(b, s, "groups/neg_inf", f32::NEG_INFINITY);
        let masked = b.op(&format!("{s}/groups/masked"), "Where", &[&is_open, &grouped, &neg_inf], vec![]);
        let flat = b.const_i64_1d(&format!("{s}/groups/flat_shape"), &[0, 0, m.num_experts as i64]);
        b.op(&format!("{s}/groups/flat"), "Reshape", &[&masked, &flat], vec![])
    } else {
        choice
    };
    let rank = rank_count(b, &format!("{s}/rank"), &format!("{s}/routing_f32"), &open, m.num_experts);
    // The top k by the rank count, with f32 constants in every build (no Casts: the one form
    // fuse.moe.grouped matches in f32 and f16 builds alike).
    let k = f32_initializer(b, s, "top_k", m.top_k as f32);
    let chosen = b.op(&format!("{s}/routing_f32/chosen"), "Less", &[&rank, &k], vec![]);
    let zero = f32_initializer(b, s, "zero", 0.0);
    let sel = b.op(&format!("{s}/routing_f32/top_k_weights"), "Where", &[&chosen, &scores, &zero], vec![]);
    // One per-token factor: `scale / (sum + 1e-20)` renormalized, else `scale` (also when it
    // is 1), so the weights are always `Mul(top-k scores, factor)`, the one form
    // fuse.moe.grouped matches.
    let scale = f32_initializer(b, s, "routed_scaling_factor", g.scale);
    let factor = if m.normalize {
        let total = expert_sum(b, s, &sel);
        let tiny = f32_initializer(b, s, "normalize/epsilon", 1e-20);
        let total = b.op(&format!("{s}/routing_f32/normalize/Add"), "Add", &[&total, &tiny], vec![]);
        // `[batch, seq, 1]` (inferred: fuse.moe.grouped checks the factor scales a token's
        // experts alike).
        b.op(&format!("{s}/routing_f32/normalize/factor"), "Div", &[&scale, &total], vec![])
    } else {
        scale
    };
    let w = b.op(&format!("{s}/routing_f32/routed_scaling/Mul"), "Mul", &[&sel, &factor], vec![]);
    cast(b, &format!("{s}/routing_weights"), &w, float, DType::F32)
}

/// PhiMoE's sparsemixer routing at inference (transformers' `sparsemixer` without jitter):
/// two picks in turn, the top expert, then the top of the others; pick `r` with logit `t_r`
/// gets weight `softmax(masked)[pick]`, where `masked` drops (to -inf) every expert whose
/// `(t_r - logit) / max(|logit|, t_r)` exceeds `2 * jitter` (the second pick also drops the
/// first). Built from the rank count of [`routing_weights`] and comparisons, `Where`,
/// `Softmax` and `ReduceSum` (no Max, Abs, TopK or scatter), in f32. Returns `[batch, seq,
/// experts]` f32 weights, zero off the two picks.
fn sparse_mixer(b: &mut GraphBuilder, s: &str, logits: &str, rank: &str, jitter: f32) -> String {
    let zero = f32_constant(b, s, "sparsemixer/zero", 0.0);
    let neg_inf = f32_constant(b, s, "sparsemixer/neg_inf", f32::NEG_INFINITY);
    // In the build dtype like every float constant (f16 rounds 0.2 to 0.19995).
    let eps2 = f32_constant(b, s, "sparsemixer/two_jitter", 2.0 * jitter);
    let axes = b.const_i64_1d(&format!("{s}/sparsemixer/axes"), &[-1]);
    // |logits| as Where(logits < 0, 0 - logits, logits).
    let negative = b.op(&format!("{s}/sparsemixer/negative"), "Less", &[logits, &zero], vec![]);
    let flipped = b.op(&format!("{s}/sparsemixer/flipped"), "Sub", &[&zero, logits], vec![]);
    let abs = b.op(&format!("{s}/sparsemixer/abs"), "Where", &[&negative, &flipped, logits], vec![]);
    let mut total = String::new();
    let mut scores = logits.to_string();
    for pick in 0..2 {
        let p = format!("{s}/sparsemixer/pick{pick}");
        // The pick: the expert of rank `pick` (ranks are whole numbers in f32).
        let r = f32_constant(b, s, &format!("sparsemixer/rank{pick}"), pick as f32);
        let chosen = b.op(&format!("{p}/chosen"), "Equal", &[rank, &r], vec![]);
        // t: the pick's logit, [batch, seq, 1].
        let only = b.op(&format!("{p}/logit_only"), "Where", &[&chosen, logits, &zero], vec![]);
        let t = b.op(&format!("{p}/threshold"), "ReduceSum", &[&only, &axes], vec![Attr::int("keepdims", 1)]);
        // factor = max(|logits|, t); drop where (t - logits) / factor > 2 * jitter.
        let above = b.op(&format!("{p}/abs_above"), "Greater", &[&abs, &t], vec![]);
        let factor = b.op(&format!("{p}/factor"), "Where", &[&above, &abs, &t], vec![]);
        let gap = b.op(&format!("{p}/gap"), "Sub", &[&t, logits], vec![]);
        let rel = b.op(&format!("{p}/relative_gap"), "Div", &[&gap, &factor], vec![]);
        let drop = b.op(&format!("{p}/drop"), "Greater", &[&rel, &eps2], vec![]);
        let masked = b.op(&format!("{p}/masked"), "Where", &[&drop, &neg_inf, &scores], vec![]);
        let gates = b.op(&format!("{p}/Softmax"), "Softmax", &[&masked], vec![Attr::int("axis", -1)]);
        let w = b.op(&format!("{p}/weight"), "Where", &[&chosen, &gates, &zero], vec![]);
        total = if pick == 0 { w } else { b.op(&format!("{s}/sparsemixer/weights"), "Add", &[&total, &w], vec![]) };
        // The second pick's scores: the first pick dropped.
        scores = b.op(&format!("{p}/drop_pick"), "Where", &[&chosen, &neg_inf, &scores], vec![]);
    }
    total
}

/// `x` cast from `from` to `to` (no node when they are the same).
fn cast(b: &mut GraphBuilder, name: &str, x: &str, to: DType, from: DType) -> String {
    if to == from {
        return x.to_string();
    }
    b.op(name, "Cast", &[x], vec![Attr::int("to", to.to_onnx() as i64)])
}

/// An f32 scalar for the routing arithmetic, stored in the build dtype (a small integer, exact
/// in f16 and bf16) and cast to f32 in the graph.
fn f32_constant(b: &mut GraphBuilder, scope: &str, name: &str, v: f32) -> String {
    let float = b.float;
    let init = format!("{scope}/{name}");
    let c = b.initializer(&init, Recipe::from_f32(format!("{init} = {v}"), vec![], &[v]).cast(float));
    cast(b, &format!("{scope}/routing_f32/{name}"), &c, DType::F32, float)
}

/// An f32 scalar that rounding would change (DeepSeek's `routed_scaling_factor`, the
/// normalization's 1e-20, which transformers keeps in f32): an f32 initializer in every build,
/// named `<block>/routing_f32/<name>` and read only by routing nodes.
fn f32_initializer(b: &mut GraphBuilder, scope: &str, name: &str, v: f32) -> String {
    let init = format!("{scope}/routing_f32/{name}");
    b.initializer(&init, Recipe::from_f32(format!("{init} = {v}"), vec![], &[v]))
}

/// `earlier[e, j] = j < e`, `[experts, experts]` boolean: the tie-break of the rank count.
fn earlier_experts(b: &mut GraphBuilder, name: &str, n: usize) -> String {
    let bytes: Vec<u8> = (0..n * n).map(|i| u8::from(i % n < i / n)).collect();
    b.initializer(name, Recipe::data(format!("{name}: j < e"), DType::Bool, vec![n, n], bytes))
}
