//! Which nodes read a weight the quantize step can take, and in which role.
//!
//! * a `MatMul` whose `B` is a 2-D float initializer (`[K, N]`), or the output of a 2-D
//!   `Transpose` of one (a tied head reading the embedding `[N, K]` through a Transpose node);
//! * a `Gather` on axis 0 whose data is a 2-D float initializer read from the checkpoint (an
//!   embedding table; computed constants such as rotary caches are not weights).
//!
//! The head is the MatMul the generic graph names `lm_head/...` (models name every node after
//! the module it comes from); every other MatMul is a linear layer.

use ir::{Graph, Recipe};

/// What a weight is for: each role has its own `--quant-*` setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Linear,
    LmHead,
    Embedding,
    /// The expert stacks of a fused MoE node (QMoE), quantized with the linear setting.
    Experts,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Linear => "linear",
            Role::LmHead => "lm_head",
            Role::Embedding => "embedding",
            Role::Experts => "experts",
        }
    }

    /// The `--quant-<flag>` that decides it.
    pub fn flag(self) -> &'static str {
        match self {
            Role::Linear | Role::Experts => "exclude",
            Role::LmHead => "lm-head",
            Role::Embedding => "embeddings",
        }
    }
}

/// How the weight reaches the node.
#[derive(Clone, Debug, PartialEq)]
pub enum Reach {
    /// `MatMul(A, W)` with `W: [K, N]` an initializer.
    Direct,
    /// `MatMul(A, Transpose(W))` with `W: [N, K]` an initializer.
    Transposed,
    /// `Gather(W, indices)`, `W: [N, K]`.
    Table,
}

#[derive(Clone, Debug)]
pub struct Candidate {
    pub node: String,
    pub role: Role,
    /// The initializer holding the float weight.
    pub weight: String,
    pub reach: Reach,
}

fn float_2d<'g>(graph: &'g Graph, name: &str) -> Option<&'g Recipe> {
    // `constant`: a LoRA slot's A/B are inputs with empty defaults, never weights to quantize.
    graph.constant(name).filter(|r| r.dtype().is_float() && r.shape().len() == 2)
}

/// Every node reading a weight the step can quantize, in graph order.
pub fn candidates(graph: &Graph) -> Vec<Candidate> {
    let mut out = Vec::new();
    // Nodes the quantize step added (the block offsets of float zero points) are its own
    // output, never candidates.
    for node in graph.nodes.iter().filter(|n| ep_sets::Domain::is_onnx(&n.domain) && n.metadata.get("rule").map(String::as_str) != Some("quantize")) {
        match node.op.as_str() {
            "MatMul" => {
                let Some(b) = node.input(1) else { continue };
                let role = if node.name.starts_with("lm_head/") { Role::LmHead } else { Role::Linear };
                let reach = if float_2d(graph, b).is_some() {
                    Some((b.to_string(), Reach::Direct))
                } else {
                    transposed_weight(graph, b).map(|w| (w, Reach::Transposed))
                };
                if let Some((weight, reach)) = reach {
                    out.push(Candidate { node: node.name.clone(), role, weight, reach });
                }
            }
            "Gather" if node.attr_int("axis").unwrap_or(0) == 0 => {
                // A table read from the checkpoint: computed constants (the cos/sin caches
                // multimodal RoPE gathers per token) are not weights.
                let weight = |w: &&str| float_2d(graph, w).is_some_and(|r| !r.sources().is_empty());
                if let Some(w) = node.input(0).filter(weight) {
                    out.push(Candidate { node: node.name.clone(), role: Role::Embedding, weight: w.to_string(), reach: Reach::Table });
                }
            }
            _ => {}
        }
    }
    out
}

/// The initializer `W` when `value` is the output of `Transpose(W)` (2-D, perm [1, 0] or none).
fn transposed_weight(graph: &Graph, value: &str) -> Option<String> {
    let node = &graph.nodes[graph.producer(value)?];
    let plain_perm = match node.attr("perm") {
        None => true,
        Some(ir::AttrValue::Ints(p)) => p == &[1, 0],
        Some(_) => false,
    };
    let w = node.input(0)?;
    (node.op == "Transpose" && ep_sets::Domain::is_onnx(&node.domain) && plain_perm && float_2d(graph, w).is_some()).then(|| w.to_string())
}
