//! Running half-precision models from tests. The `ort` crate here is built without its `half`
//! feature, so tests cannot feed or read f16 tensors directly; [`f32_interface`] wraps a model
//! so its float inputs and outputs are f32 while everything inside stays in the model's dtype.

use ir::{Attr, DType, Graph, Model, Node};
use std::collections::BTreeMap;

fn cast(name: String, input: &str, output: &str, to: DType) -> Node {
    Node {
        name,
        op: "Cast".into(),
        domain: String::new(),
        opset: ir::OPSET,
        inputs: vec![input.into()],
        outputs: vec![output.into()],
        attrs: vec![Attr::int("to", to.to_onnx() as i64)],
        metadata: BTreeMap::new(),
    }
}

/// Renames every use of `from` (node inputs and outputs, value_info) in `g` to `to`.
fn rename(g: &mut Graph, from: &str, to: &str) {
    for n in &mut g.nodes {
        for v in n.inputs.iter_mut().chain(n.outputs.iter_mut()) {
            if v == from {
                *v = to.to_string();
            }
        }
    }
    g.value_info.retain(|v| v.name != from);
}

/// A copy of `model` whose f16/bf16 graph inputs and outputs are f32, with a Cast at each
/// boundary: `input (f32) -> Cast -> the model's f16 value`, `f16 output -> Cast -> output
/// (f32)`. The model's own nodes and initializers are unchanged.
pub fn f32_interface(model: &Model) -> Model {
    let mut m = model.clone();
    let g = &mut m.graph;
    let mut casts = Vec::new();
    for i in 0..g.inputs.len() {
        let dtype = g.inputs[i].dtype;
        if dtype != DType::F16 && dtype != DType::BF16 {
            continue;
        }
        let name = g.inputs[i].name.clone();
        let inside = format!("{name}/as_{dtype}");
        rename(g, &name, &inside);
        casts.push(cast(format!("{name}/Cast_to_{dtype}"), &name, &inside, dtype));
        g.inputs[i].dtype = DType::F32;
    }
    for i in 0..g.outputs.len() {
        let dtype = g.outputs[i].dtype;
        if dtype != DType::F16 && dtype != DType::BF16 {
            continue;
        }
        let name = g.outputs[i].name.clone();
        let inside = format!("{name}/{dtype}");
        rename(g, &name, &inside);
        casts.push(cast(format!("{name}/Cast_to_f32"), &inside, &name, DType::F32));
        g.outputs[i].dtype = DType::F32;
    }
    g.nodes.extend(casts);
    g.toposort().expect("wrapped graph sorts");
    m
}
