//! Quantized experts: a fused `com.microsoft.MoE` node (the `fuse.moe` rule) whose expert
//! stacks are initializers becomes `com.microsoft.QMoE` reading block-quantized stacks
//! (docs/quantization.md, "Quantized experts").
//!
//! QMoE with `weights_prepacked = 0` reads, per expert, exactly the bytes ONNX Runtime's
//! MatMulNBits quantizer writes for that expert's `[N, K]` weight (`fc1` `[E, 2I, H]`, `fc2`
//! `[E, H, I]`): data `[E, N, K * bits / 8]`, scales `[E, N, K / block]`, zero points
//! `[E, N, ceil(K / block * bits / 8)]`. Quantization runs along K within a row, so a stack
//! quantized as one `[E * N, K]` weight has those bytes, and each part is that group's part
//! viewed 3-D: one [`QuantGroup`] per stack, streamed by rows like any MatMul weight.
//!
//! Facts pinned on ORT 1.32 CPU in tests/python/test_qmoe_facts.py: the raw layout is exact on
//! the dequantized weights; the kernel renormalizes the top-k weights whatever
//! `normalize_routing_weights` says unless `router_weights` is given (then it gathers those,
//! unrenormalized with 0), so a family that does not renormalize gets `router_weights` =
//! the softmax of the router logits.

use std::sync::Arc;

use ir::quant::QuantSettings;
use ir::{Attr, AttrValue, Graph, Node, PackedStack, QuantForm, QuantGroup, QuantPart, Recipe};

use super::{QuantOutcome, QuantStep, QuantizedTensor, Role};
use crate::Result;

const MS: &str = "com.microsoft";
/// MoE input slots (ORT's schema): the stacks, their biases, and fc3 (which fused SwiGLU has not).
const MOE_FC1: usize = 2;
const MOE_FC1_BIAS: usize = 3;
const MOE_FC2: usize = 4;
const MOE_FC2_BIAS: usize = 5;
const MOE_FC3: usize = 6;
/// QMoE input slots.
const QMOE_SLOTS: usize = 15;
const Q_FC1: usize = 2;
const Q_FC1_SCALES: usize = 3;
const Q_FC1_BIAS: usize = 4;
const Q_FC2: usize = 5;
const Q_FC2_SCALES: usize = 6;
const Q_FC2_BIAS: usize = 7;
const Q_FC1_ZERO_POINTS: usize = 11;
const Q_FC2_ZERO_POINTS: usize = 12;
const Q_ROUTER_WEIGHTS: usize = 14;

/// A fused MoE node whose two expert stacks are float initializers.
#[derive(Clone, Debug)]
pub struct ExpertsCandidate {
    pub node: String,
    pub fc1: String,
    pub fc2: String,
}

fn float_3d<'g>(graph: &'g Graph, name: &str) -> Option<&'g Recipe> {
    graph.initializer(name).filter(|r| r.dtype().is_float() && r.shape().len() == 3)
}

/// Every `com.microsoft.MoE` node with float `[E, N, K]` stacks and no fc3, in graph order.
pub fn candidates(graph: &Graph) -> Vec<ExpertsCandidate> {
    graph
        .nodes
        .iter()
        .filter(|n| n.op == "MoE" && n.domain == MS && n.input(MOE_FC3).is_none())
        .filter_map(|n| {
            let (fc1, fc2) = (n.input(MOE_FC1)?, n.input(MOE_FC2)?);
            (float_3d(graph, fc1).is_some() && float_3d(graph, fc2).is_some())
                .then(|| ExpertsCandidate { node: n.name.clone(), fc1: fc1.into(), fc2: fc2.into() })
        })
        .collect()
}

/// The expert stacks of dense (unfused) MoE blocks: 3-D float initializers that a batched
/// MatMul reads through a `[0, 2, 1]` Transpose. No table's quantized form covers them (a
/// MatMulNBits or DequantizeLinear weight is 2-D), so they stay float, and the report says so.
pub fn dense_stacks(graph: &Graph) -> Vec<String> {
    let matmul_b: std::collections::HashSet<&str> = graph.nodes.iter().filter(|m| m.op == "MatMul").filter_map(|m| m.input(1)).collect();
    let mut out: Vec<String> = Vec::new();
    for t in graph.nodes.iter().filter(|n| n.op == "Transpose" && ep_sets::Domain::is_onnx(&n.domain)) {
        let (Some(w), Some(AttrValue::Ints(perm))) = (t.input(0), t.attr("perm")) else { continue };
        let feeds_matmul = t.outputs.first().is_some_and(|o| matmul_b.contains(o.as_str()));
        if perm == &[0, 2, 1] && feeds_matmul && float_3d(graph, w).is_some() && !out.iter().any(|o| o == w) {
            out.push(w.to_string());
        }
    }
    out
}

/// Why a candidate cannot be quantized with `settings`, if it cannot.
fn unfit(graph: &Graph, c: &ExpertsCandidate, settings: &QuantSettings) -> Option<String> {
    let bs = settings.block_size();
    let fc1 = float_3d(graph, &c.fc1)?.shape();
    let fc2 = float_3d(graph, &c.fc2)?.shape();
    let (hidden, inter) = (fc1[2], fc2[2]);
    (!hidden.is_multiple_of(bs) || !inter.is_multiple_of(bs)).then(|| {
        format!("QMoE needs the hidden size ({hidden}) and the expert intermediate size ({inter}) to be multiples of --block-size {bs}; choose a block size dividing both")
    })
}

/// Quantizes every expert candidate with the linear setting, or writes pre-quantized expert
/// stacks with their own integers, in place; a node that stays float is recorded in
/// `outcome.kept_float` with why (`--quant-exclude`, the table, the sizes, a packed form QMoE
/// cannot hold).
pub fn apply(graph: &mut Graph, step: &QuantStep, outcome: &mut QuantOutcome) -> Result<()> {
    for c in candidates(graph) {
        let packed = [&c.fc1, &c.fc2].into_iter().any(|w| graph.initializer(w).is_some_and(Recipe::has_packed));
        if packed {
            match packed_groups(graph, &c, step)? {
                Ok((fc1, fc2)) => to_qmoe(graph, &c, fc1, fc2, step, outcome),
                Err(why) => match requantized(graph, &c, step, &why)? {
                    Ok((fc1, fc2)) => {
                        // A float stack beside a packed one is quantized here for the first time.
                        for name in [&c.fc1, &c.fc2].into_iter().filter(|n| graph.initializer(n).is_some_and(Recipe::has_packed)) {
                            outcome.requantized.push((name.clone(), source_types(graph, name)));
                        }
                        to_qmoe(graph, &c, fc1, fc2, step, outcome);
                    }
                    // Reported as dequantized tensors (import::dequantized_warning), not as
                    // experts the table failed to quantize.
                    Err(why) => {
                        outcome.kept_float.push((c.fc1.clone(), why.clone()));
                        outcome.kept_float.push((c.fc2.clone(), why));
                    }
                },
            }
            continue;
        }
        let Some(settings) = step.settings(Role::Experts) else {
            // An import: experts that are float in the checkpoint stay float.
            let why = "float in the pre-quantized checkpoint: it stays float".to_string();
            outcome.kept_float.push((c.fc1.clone(), why.clone()));
            outcome.kept_float.push((c.fc2.clone(), why));
            continue;
        };
        let excluded = [&c.fc1, &c.fc2].into_iter().find_map(|w| step.exclusion(graph, w));
        let why = match (&excluded, step.no_qmoe.clone().or_else(|| step.hqq_experts())) {
            (_, Some(why)) => Some(why),
            (Some(x), None) => Some(format!(
                "matches --quant-exclude `{}` (checkpoint tensor `{}`; QMoE quantizes both stacks of `{}` or neither)",
                x.pattern, x.name, c.node
            )),
            (None, None) => unfit(graph, &c, &settings),
        };
        if let Some(why) = why {
            outcome.kept_float.push((c.fc1.clone(), why.clone()));
            outcome.kept_float.push((c.fc2.clone(), why));
            if excluded.is_none() || step.no_qmoe.is_some() || step.hqq_experts().is_some() {
                outcome.float_experts += 2;
            }
            continue;
        }
        let fc1 = stack_group(graph, &c.fc1, settings, step)?;
        let fc2 = stack_group(graph, &c.fc2, settings, step)?;
        to_qmoe(graph, &c, fc1, fc2, step, outcome);
    }
    graph.toposort()?;
    Ok(())
}

/// The groups of a MoE node whose stacks read pre-quantized experts, with the checkpoint's
/// integers: both stacks as one [`PackedStack`] each (viewed `[E * N, K]`: a stack of
/// per-expert layers, fc1 the gate and up rows interleaved), written with one block size (the
/// smaller of the two; QMoE has one `block_size`). `Err(why)` when QMoE cannot hold them (they
/// are then written as their exact float dequantization): no QMoE kernel on the table, float
/// zero points (a GGUF type with a min; QMoE's zero points are packed integers), act-order
/// rows (QMoE has no `g_idx`), float rows among the packed ones, or two stacks of different
/// bits or symmetry (one `expert_weight_bits`).
type PackedGroups = std::result::Result<(Arc<QuantGroup>, Arc<QuantGroup>), String>;
fn packed_groups(graph: &Graph, c: &ExpertsCandidate, step: &QuantStep) -> Result<PackedGroups> {
    if let Some(why) = &step.no_qmoe {
        return Ok(Err(format!("pre-quantized experts: {why}")));
    }
    let mut stacks = Vec::new();
    for name in [&c.fc1, &c.fc2] {
        let w = graph.initializer(name).expect("candidates name initializers");
        let s = w.shape();
        let rows = w.clone().reshape(vec![s[0] * s[1], s[2]]);
        let stack = match PackedStack::from_recipe(name, &rows) {
            Some(Ok(stack)) => stack,
            Some(Err(e)) => return Ok(Err(format!("pre-quantized experts that QMoE cannot hold: {e}"))),
            None => return Ok(Err(format!("`{name}` reads no pre-quantized expert while the other stack of `{}` does: QMoE quantizes both stacks or neither", c.node))),
        };
        if stack.float_zeros() {
            let mut types: Vec<String> = stack.layers().filter(|l| l.float_zeros()).map(|l| l.source_type()).collect();
            types.dedup();
            return Ok(Err(format!(
                "pre-quantized experts of {} have float zero points (a minimum per block), and com.microsoft.QMoE takes packed integer zero points only (ONNX Runtime 1.32: QMoE T1 is uint8)",
                types.join(", ")
            )));
        }
        if stack.order().is_some() {
            return Ok(Err("pre-quantized experts with act-order rows (g_idx): com.microsoft.QMoE has no g_idx input".into()));
        }
        stacks.push((rows, stack));
    }
    let (s1, s2) = (stacks[0].1.settings(), stacks[1].1.settings());
    if s1.bits() != s2.bits() || s1.symmetric() != s2.symmetric() {
        return Ok(Err(format!(
            "the pre-quantized experts' two stacks differ ({}-bit {}, {}-bit {}), and com.microsoft.QMoE takes one expert_weight_bits and one zero-point form for both (ONNX Runtime 1.32's CPU kernel: \"Mixed-width QMoE execution is not yet implemented\")",
            s1.bits().count(),
            if s1.symmetric() { "symmetric" } else { "with zero points" },
            s2.bits().count(),
            if s2.symmetric() { "symmetric" } else { "with zero points" }
        )));
    }
    if !step.packed_bits.contains(&s1.bits().count()) {
        return Ok(Err(format!("the pre-quantized experts are {}-bit, and {} has no [quant.int{}] section", s1.bits().count(), step.table, s1.bits().count())));
    }
    let block = s1.block_size().min(s2.block_size());
    let mut groups = Vec::new();
    for ((rows, stack), name) in stacks.into_iter().zip([&c.fc1, &c.fc2]) {
        let stack = if stack.settings().block_size() == block { stack } else { stack.with_block(block)? };
        groups.push(QuantGroup::from_packed(name.clone(), rows, stack, step.scale_dtype, QuantForm::NBits)?);
    }
    let fc2 = groups.pop().expect("two groups");
    let fc1 = groups.pop().expect("two groups");
    Ok(Ok((fc1, fc2)))
}

/// With `--requantize-experts`, the groups of pre-quantized experts QMoE cannot hold as they
/// are (`why`): their dequantization quantized again, RTN asymmetric at `--block-size` (a
/// minimum per block, as Q4_K's, fits zero points better than a symmetric grid). `Err(why)`
/// (extended) when the flag is absent, the table has no QMoE, or the sizes do not fit the block.
fn requantized(graph: &Graph, c: &ExpertsCandidate, step: &QuantStep, why: &str) -> Result<PackedGroups> {
    if step.no_qmoe.is_some() {
        return Ok(Err(why.to_string()));
    }
    let Some(bits) = step.requantize_experts else {
        return Ok(Err(format!("{why}; --requantize-experts int4|int8 quantizes them again instead")));
    };
    let settings = QuantSettings::new(super::to_bits(bits), step.block_size, false).expect("checked by resolve").with_method(ir::quant::Method::Rtn);
    if let Some(unfit) = unfit(graph, c, &settings) {
        return Ok(Err(format!("{why}; --requantize-experts: {unfit}")));
    }
    Ok(Ok((stack_group(graph, &c.fc1, settings, step)?, stack_group(graph, &c.fc2, settings, step)?)))
}

/// The checkpoint types a stack reads (`gguf:Q4_K`, `gptq`, `+float` for float rows beside
/// them), each once, for the report.
fn source_types(graph: &Graph, name: &str) -> String {
    let (layers, other) = graph.initializer(name).map(|r| r.stored_parts()).unwrap_or_default();
    let mut names = super::source_names(layers.iter().map(|l| &**l));
    if other {
        names.push("float".into());
    }
    names.join("+")
}

/// Rewrites candidate `c`'s MoE node into QMoE reading the two groups' parts (their bits,
/// block and symmetry), with `router_weights` where the node does not renormalize.
fn to_qmoe(graph: &mut Graph, c: &ExpertsCandidate, fc1: Arc<QuantGroup>, fc2: Arc<QuantGroup>, step: &QuantStep, outcome: &mut QuantOutcome) {
    let settings = fc1.settings();
    let index = graph.nodes.iter().position(|n| n.name == c.node).expect("candidates come from this graph");
    let router_weights = (graph.nodes[index].attr_int("normalize_routing_weights").unwrap_or(0) == 0).then(|| {
        let probs = graph.nodes[index].inputs[1].clone();
        let out = format!("{}/router_weights", c.node);
        let mut softmax = Node::new(format!("{}/router_weights/Softmax", c.node), "Softmax", &[&probs], &[&out]);
        softmax.attrs.push(Attr::int("axis", -1));
        softmax.metadata.insert("rule".into(), "quantize".into());
        (softmax, out)
    });
    let parts1 = add_parts(graph, &fc1);
    let parts2 = add_parts(graph, &fc2);
    let node = &mut graph.nodes[index];
    let mut inputs = vec![String::new(); QMOE_SLOTS];
    inputs[0] = node.inputs[0].clone();
    inputs[1] = node.inputs[1].clone();
    (inputs[Q_FC1], inputs[Q_FC1_SCALES]) = (parts1[0].clone(), parts1[1].clone());
    (inputs[Q_FC2], inputs[Q_FC2_SCALES]) = (parts2[0].clone(), parts2[1].clone());
    inputs[Q_FC1_BIAS] = node.input(MOE_FC1_BIAS).unwrap_or_default().to_string();
    inputs[Q_FC2_BIAS] = node.input(MOE_FC2_BIAS).unwrap_or_default().to_string();
    if !settings.symmetric() {
        inputs[Q_FC1_ZERO_POINTS] = parts1[2].clone();
        inputs[Q_FC2_ZERO_POINTS] = parts2[2].clone();
    }
    if let Some((_, out)) = &router_weights {
        inputs[Q_ROUTER_WEIGHTS] = out.clone();
    }
    while inputs.last().is_some_and(String::is_empty) {
        inputs.pop();
    }
    node.op = "QMoE".into();
    node.domain = MS.into();
    node.opset = 1;
    node.inputs = inputs;
    node.attrs.retain(|a| !matches!(a.name.as_str(), "expert_weight_bits" | "block_size" | "weights_prepacked" | "accuracy_level"));
    node.attrs.push(Attr::int("expert_weight_bits", settings.bits().count() as i64));
    node.attrs.push(Attr::int("block_size", settings.block_size() as i64));
    // The raw per-expert layout MatMulNBits' quantizer writes; -1 (the default) and 1 mean
    // an EP-prepacked layout.
    node.attrs.push(Attr::int("weights_prepacked", 0));
    if step.accuracy_level != 0 {
        node.attrs.push(Attr::int("accuracy_level", step.accuracy_level));
    }
    node.metadata.insert("quantize".into(), "QMoE".into());
    if settings.bits() == ir::quant::Bits::Int8 && step.accuracy_level != 4 {
        outcome.int8_activation_experts.push(c.node.clone());
    }
    let op = format!("{} (QMoE)", c.node);
    if let Some((softmax, _)) = router_weights {
        graph.nodes.push(softmax);
    }
    for group in [fc1, fc2] {
        outcome.tensors.push(QuantizedTensor { weight: group.name.clone(), role: Role::Experts, ops: vec![op.clone()], group });
    }
}

/// One group over a `[E, N, K]` stack viewed `[E * N, K]`.
fn stack_group(graph: &Graph, name: &str, settings: QuantSettings, step: &QuantStep) -> Result<Arc<QuantGroup>> {
    let w = graph.initializer(name).expect("candidates name initializers").clone();
    let s = w.shape();
    let rows = w.reshape(vec![s[0] * s[1], s[2]]);
    Ok(QuantGroup::new(name, rows, settings, step.scale_dtype, QuantForm::NBits)?)
}

/// The group's parts as initializers viewed per expert; returns data, scales and (asymmetric)
/// zero points.
fn add_parts(graph: &mut Graph, group: &Arc<QuantGroup>) -> Vec<String> {
    let (experts, k) = (graph.initializer(&group.name).expect("a stack").shape()[0], group.k());
    let n = group.n() / experts;
    let layout = group.settings().layout(k).expect("K > 0");
    let mut names = Vec::new();
    for (part, last) in [(QuantPart::Data, layout.b_per_column()), (QuantPart::Scales, layout.scales_per_column()), (QuantPart::ZeroPoints, layout.zero_points_per_column())] {
        if group.has(part) {
            let name = format!("{}/quant/{}", group.name, part.name());
            graph.initializers.push((name.clone(), Recipe::quantized(group, part).reshape(vec![experts, n, last])));
            names.push(name);
        }
    }
    names
}

/// After the pipeline: a fused MoE node the step should have quantized is still float.
pub fn validate(graph: &Graph, outcome: &QuantOutcome) -> Vec<String> {
    let kept: std::collections::HashSet<&str> = outcome.kept_float.iter().map(|(w, _)| w.as_str()).collect();
    candidates(graph)
        .into_iter()
        .filter(|c| !kept.contains(c.fc1.as_str()))
        .map(|c| format!("experts `{}` and `{}` (node `{}`, com.microsoft.MoE) were selected for QMoE but are still float after the pipeline", c.fc1, c.fc2, c.node))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantize::{QuantRequest, QuantStep};
    use ep_sets::{QuantBits, QuantChoice, QuantFormat, QuantPlan};
    use ir::{DType, Dim, ValueInfo};

    const E: usize = 3;
    const I: usize = 32;

    fn values(n: usize, seed: usize) -> Vec<f32> {
        (0..n).map(|i| (((i * 37 + seed * 11) % 23) as f32 - 11.0) / 7.0).collect()
    }

    /// A MoE node over `[E, 2I, H]` and `[E, H, I]` stacks.
    fn graph(hidden: usize, normalize: i64) -> Graph {
        let mut g = Graph { name: "g".into(), ..Default::default() };
        g.inputs.push(ValueInfo::new("x", DType::F32, vec![Dim::sym("tokens"), Dim::Fixed(hidden as i64)]));
        g.inputs.push(ValueInfo::new("router", DType::F32, vec![Dim::sym("tokens"), Dim::Fixed(E as i64)]));
        g.outputs.push(ValueInfo::new("y", DType::F32, vec![Dim::sym("tokens"), Dim::Fixed(hidden as i64)]));
        g.initializers.push(("fc1".into(), Recipe::from_f32("fc1", vec![E, 2 * I, hidden], &values(E * 2 * I * hidden, 1))));
        g.initializers.push(("fc2".into(), Recipe::from_f32("fc2", vec![E, hidden, I], &values(E * hidden * I, 2))));
        let mut moe = Node::new("layer/moe", "MoE", &["x", "router", "fc1", "", "fc2"], &["y"]);
        moe.domain = MS.into();
        moe.attrs.extend([Attr::int("k", 2), Attr::int("normalize_routing_weights", normalize), Attr::string("activation_type", "swiglu"), Attr::int("swiglu_fusion", 1)]);
        g.nodes.push(moe);
        g
    }

    fn step(symmetric: bool, exclude: &[&str]) -> QuantStep {
        let plan = QuantPlan { bits: QuantBits::Int4, format: QuantFormat::MatmulNbits, dtype: DType::F32, accuracy_level: 0, lm_head: QuantChoice::None, embeddings: QuantChoice::None, embedding_int4_zero_points_odd_blocks: true, embedding_gather_dequantize_linear: false, why: "test".into(), span: None };
        let mut req = QuantRequest::new(QuantBits::Int4);
        req.symmetric = symmetric;
        req.exclude = exclude.iter().map(|s| s.to_string()).collect();
        QuantStep::resolve(&req, &plan, "test", DType::F32).unwrap()
    }

    fn init<'g>(g: &'g Graph, name: &str) -> &'g Recipe {
        g.initializer(name).unwrap_or_else(|| panic!("no initializer {name}"))
    }

    #[test]
    fn a_moe_node_becomes_qmoe_with_each_experts_matmul_nbits_bytes() {
        let hidden = 64;
        let mut g = graph(hidden, 1);
        let s = step(false, &[]);
        let mut outcome = QuantOutcome::default();
        apply(&mut g, &s, &mut outcome).unwrap();
        let node = &g.nodes[0];
        assert_eq!((node.op.as_str(), node.domain.as_str()), ("QMoE", MS));
        assert_eq!(node.inputs[Q_FC1], "fc1/quant/data");
        assert_eq!(node.inputs[Q_FC2_SCALES], "fc2/quant/scales");
        assert_eq!(node.inputs[Q_FC1_ZERO_POINTS], "fc1/quant/zero_points");
        assert_eq!(node.inputs.len(), Q_FC2_ZERO_POINTS + 1, "normalized routing needs no router_weights");
        for (attr, v) in [("expert_weight_bits", 4), ("block_size", 32), ("weights_prepacked", 0), ("k", 2)] {
            assert_eq!(node.attr_int(attr), Some(v), "{attr}");
        }
        assert_eq!(init(&g, "fc1/quant/data").shape(), vec![E, 2 * I, hidden / 2]);
        assert_eq!(init(&g, "fc1/quant/scales").shape(), vec![E, 2 * I, hidden / 32]);
        assert_eq!(init(&g, "fc2/quant/zero_points").shape(), vec![E, hidden, 1]);
        assert_eq!(outcome.tensors.len(), 2);
        // Each expert's slice of every part is that expert's own [N, K] quantization.
        let settings = s.settings(Role::Experts).unwrap();
        let fc1 = init(&g, "fc1").clone();
        for part in [QuantPart::Data, QuantPart::Scales, QuantPart::ZeroPoints] {
            let whole = init(&g, &format!("fc1/quant/{}", part.name())).materialize().unwrap();
            let per = whole.len() / E;
            for e in 0..E {
                let one = fc1.clone().slice(0, e, e + 1).reshape(vec![2 * I, hidden]);
                let group = QuantGroup::new("one", one, settings, DType::F32, QuantForm::NBits).unwrap();
                assert_eq!(Recipe::quantized(&group, part).materialize().unwrap(), whole[e * per..(e + 1) * per], "{part:?} of expert {e}");
            }
        }
        assert!(validate(&g, &outcome).is_empty());
    }

    #[test]
    fn unrenormalized_routing_passes_the_softmax_as_router_weights() {
        let mut g = graph(64, 0);
        apply(&mut g, &step(true, &[]), &mut QuantOutcome::default()).unwrap();
        let qmoe = g.nodes.iter().find(|n| n.op == "QMoE").unwrap();
        let softmax = g.nodes.iter().find(|n| n.op == "Softmax").expect("a Softmax for router_weights");
        assert_eq!(softmax.inputs, vec!["router".to_string()]);
        assert_eq!(qmoe.inputs.len(), QMOE_SLOTS);
        assert_eq!(qmoe.inputs[Q_ROUTER_WEIGHTS], softmax.outputs[0]);
        assert!(qmoe.input(Q_FC1_ZERO_POINTS).is_none(), "symmetric: no zero points");
        let order: Vec<&str> = g.nodes.iter().map(|n| n.op.as_str()).collect();
        assert_eq!(order, vec!["Softmax", "QMoE"], "sorted");
    }

    #[test]
    fn an_excluded_stack_or_an_indivisible_size_keeps_the_node_float_with_why() {
        let mut g = graph(64, 1);
        let mut outcome = QuantOutcome::default();
        apply(&mut g, &step(true, &["fc2"]), &mut outcome).unwrap();
        assert_eq!(g.nodes[0].op, "MoE");
        assert_eq!(outcome.kept_float.len(), 2);
        assert!(outcome.kept_float[0].1.contains("`fc2`") && outcome.kept_float[0].1.contains("neither"), "{:?}", outcome.kept_float);
        assert!(validate(&g, &outcome).is_empty(), "kept float is not a miss");

        assert_eq!(outcome.float_experts, 0, "an exclusion is the user's choice, not a warning");

        let mut g = graph(64, 1);
        let mut s = step(true, &[]);
        s.no_qmoe = Some("test.toml claims no com.microsoft.QMoE kernel for f32 activations".into());
        let mut outcome = QuantOutcome::default();
        apply(&mut g, &s, &mut outcome).unwrap();
        assert_eq!((g.nodes[0].op.as_str(), outcome.float_experts), ("MoE", 2));
        assert!(outcome.kept_float[0].1.contains("no com.microsoft.QMoE"), "{:?}", outcome.kept_float);
        assert!(validate(&g, &outcome).is_empty());

        let mut g = graph(48, 1);
        let mut outcome = QuantOutcome::default();
        apply(&mut g, &step(true, &[]), &mut outcome).unwrap();
        assert_eq!(g.nodes[0].op, "MoE");
        assert!(outcome.kept_float[0].1.contains("hidden size (48)"), "{:?}", outcome.kept_float);
        // A float MoE node the step did not account for is a validation problem.
        let problems = validate(&g, &QuantOutcome::default());
        assert!(problems.len() == 1 && problems[0].contains("layer/moe"), "{problems:?}");
    }
}
