//! The stable text form of an optimized graph that the snapshots in `snapshots/snapshots/`
//! hold (docs/snapshots.md). Unlike `ir::canonical_text` it prints every value a node reads
//! and writes with its inferred dtype and shape, so a review shows how a rewrite changed the
//! types flowing through the graph, not only the op names. No tensor bytes: initializers
//! print their dtype, shape and recipe chain (where the bytes come from).

use std::collections::HashMap;
use std::fmt::Write;

use ir::{AttrValue, Graph, Model, ValueInfo};

fn shape_text(shape: &Option<Vec<ir::Dim>>) -> String {
    match shape {
        Some(dims) => format!("[{}]", dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
        None => "[?]".into(),
    }
}

/// `name: dtype[dims]`, or `name: ?` when inference does not know it, `<none>` for an omitted
/// optional operand.
fn value(name: &str, types: &HashMap<String, ValueInfo>) -> String {
    if name.is_empty() {
        return "<none>".into();
    }
    match types.get(name) {
        Some(v) => format!("{name}: {}{}", v.dtype, shape_text(&v.shape)),
        None => format!("{name}: ?"),
    }
}

fn attr_text(v: &AttrValue) -> String {
    match v {
        AttrValue::Tensor(r) => format!("tensor {}{:?} = {}", r.dtype(), r.shape(), r.describe()),
        AttrValue::Graph(g) => format!("<graph {}>", g.name),
        plain => plain.plain_text().expect("scalar or list attribute"),
    }
}

fn graph_text(g: &Graph, outer: &HashMap<String, ValueInfo>, indent: &str, out: &mut String) {
    // A subgraph reads values of the enclosing graph by name; inference does not enter
    // subgraphs, so its own map is layered over the outer one.
    let mut types = outer.clone();
    types.extend(ir::infer_types(g, rules::op_types()));
    let _ = writeln!(out, "{indent}graph {}", g.name);
    for v in &g.inputs {
        let _ = writeln!(out, "{indent}  input {}: {}{}", v.name, v.dtype, shape_text(&v.shape));
    }
    for v in &g.outputs {
        let _ = writeln!(out, "{indent}  output {}: {}{}", v.name, v.dtype, shape_text(&v.shape));
    }
    for (name, r) in &g.initializers {
        let shape: Vec<String> = r.shape().iter().map(|d| d.to_string()).collect();
        let _ = writeln!(out, "{indent}  init {name}: {}[{}] = {}", r.dtype(), shape.join(", "), r.describe());
    }
    for n in &g.nodes {
        let domain = if n.domain.is_empty() { "ai.onnx" } else { n.domain.as_str() };
        let rule = n.metadata.get("rule").map_or(String::new(), |r| format!("  rule={r}"));
        let _ = writeln!(out, "{indent}  node {}: {domain}.{}@{}{rule}", n.name, n.op, n.opset);
        let other: Vec<String> = n.metadata.iter().filter(|(k, _)| *k != "rule").map(|(k, v)| format!("{k}={v}")).collect();
        if !other.is_empty() {
            let _ = writeln!(out, "{indent}    meta {}", other.join(", "));
        }
        for a in &n.attrs {
            let _ = writeln!(out, "{indent}    attr {} = {}", a.name, attr_text(&a.value));
        }
        for i in &n.inputs {
            let _ = writeln!(out, "{indent}    in  {}", value(i, &types));
        }
        for o in &n.outputs {
            let _ = writeln!(out, "{indent}    out {}", value(o, &types));
        }
        for sub in n.subgraphs() {
            graph_text(sub, &types, &format!("{indent}    "), out);
        }
    }
}

/// The snapshot text of a model: model metadata, then the main graph (inputs, outputs,
/// initializers, nodes with attributes and typed operands, subgraphs nested under their node).
pub fn graph_snapshot(model: &Model) -> String {
    let mut out = String::new();
    for (k, v) in &model.metadata {
        let _ = writeln!(out, "meta {k} = {v}");
    }
    graph_text(&model.graph, &HashMap::new(), "", &mut out);
    out
}
