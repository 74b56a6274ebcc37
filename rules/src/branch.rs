//! Check functions over subgraph attributes (an `If`'s branches), for rules that inline
//! control flow (`lower.if_to_where`). They answer the questions that decide whether running
//! both branches unconditionally is safe; the rule's named checks ask them, so a decline is
//! reported like any other failed check.

use crate::rt::{shape_of, Cx, Val};
use ir::{Dim, Graph, Node};
use std::collections::HashSet;

fn graph_of(v: &Val) -> Result<&Graph, String> {
    match v {
        Val::Graph(g) => Ok(g),
        other => Err(format!("{other} is not a subgraph attribute")),
    }
}

fn output_index(g: &Graph, i: &Val) -> Result<usize, String> {
    let Val::Int(i) = i else { return Err(format!("output index {i} is not an integer")) };
    usize::try_from(*i).ok().filter(|&k| k < g.outputs.len()).ok_or_else(|| format!("graph `{}` has {} output(s), no output {i}", g.name, g.outputs.len()))
}

/// `numel(?v)`: the element count of a value whose shape is fully fixed.
pub fn fn_numel(cx: &Cx, v: Val) -> Result<Val, String> {
    let shape = shape_of(cx, &v)?;
    let mut n: i64 = 1;
    for d in &shape {
        match d {
            Dim::Fixed(k) => n = n.checked_mul(*k).ok_or("element count overflows")?,
            Dim::Sym(s) => return Err(format!("dim {s} is symbolic")),
        }
    }
    Ok(Val::Int(n))
}

/// `branch_outputs(?g)`: how many outputs the subgraph has.
pub fn fn_branch_outputs(_cx: &Cx, g: Val) -> Result<Val, String> {
    Ok(Val::Int(graph_of(&g)?.outputs.len() as i64))
}

/// `branch_dtype(?g, i)`: the declared element type of the subgraph's output `i`.
pub fn fn_branch_dtype(_cx: &Cx, g: Val, i: Val) -> Result<Val, String> {
    let g = graph_of(&g)?;
    let k = output_index(g, &i)?;
    Ok(Val::Str(g.outputs[k].dtype.name().to_string()))
}

/// `branch_shape(?g, i)`: the declared shape of the subgraph's output `i`.
pub fn fn_branch_shape(_cx: &Cx, g: Val, i: Val) -> Result<Val, String> {
    let g = graph_of(&g)?;
    let k = output_index(g, &i)?;
    g.outputs[k].shape.clone().map(Val::Shape).ok_or_else(|| format!("output `{}` of `{}` has no declared shape", g.outputs[k].name, g.name))
}

/// `branch_dtypes(?g)`: the declared element types of every output of the subgraph.
pub fn fn_branch_dtypes(_cx: &Cx, g: Val) -> Result<Val, String> {
    Ok(Val::List(graph_of(&g)?.outputs.iter().map(|o| Val::Str(o.dtype.name().to_string())).collect()))
}

/// `branch_shapes(?g)`: the declared shapes of every output of the subgraph; an error when
/// one has none.
pub fn fn_branch_shapes(_cx: &Cx, g: Val) -> Result<Val, String> {
    let g = graph_of(&g)?;
    g.outputs
        .iter()
        .map(|o| o.shape.clone().map(Val::Shape).ok_or_else(|| format!("output `{}` of `{}` has no declared shape", o.name, g.name)))
        .collect::<Result<Vec<_>, _>>()
        .map(Val::List)
}

/// `nested_graphs(?g)`: how many nodes of the subgraph carry subgraphs themselves (nested
/// control flow, which inlining one level would not make unconditional).
pub fn fn_nested_graphs(_cx: &Cx, g: Val) -> Result<Val, String> {
    Ok(Val::Int(graph_of(&g)?.nodes.iter().filter(|n| n.subgraphs().next().is_some()).count() as i64))
}

/// Operators that can fail at run time depending on the values they read: out-of-range
/// indices (Gather*, Scatter*), sizes that do not fit (Reshape, Expand, Split, Slice with
/// computed starts/ends/axes/steps), division by zero on integers (Div, Mod). Inside an `If`
/// they run only on the taken path; after inlining they run always.
const FALLIBLE: &[&str] = &["Gather", "GatherElements", "GatherND", "ScatterElements", "ScatterND", "Slice", "Reshape", "Expand", "Split", "Div", "Mod"];

/// `fallible_nodes(?g)`: the names of the subgraph's nodes that could fail on the path the
/// `If` would not take: a FALLIBLE op that reads anything but constants (the subgraph's or the
/// enclosing graph's initializers, or `Constant` nodes of the subgraph). A floating-point
/// `Div`/`Mod` never fails (it gives inf/NaN), so it counts only when its type is integer or
/// unknown. Conservative: a value it cannot prove constant counts as data.
pub fn fn_fallible_nodes(cx: &Cx, g: Val) -> Result<Val, String> {
    let g = graph_of(&g)?;
    let mut constant: HashSet<&str> = g.initializers.iter().map(|(n, _)| n.as_str()).collect();
    constant.extend(g.nodes.iter().filter(|n| n.op == "Constant" && is_default(n)).flat_map(|n| n.outputs.iter().map(String::as_str)));
    let is_const = |v: &str| constant.contains(v) || cx.graph.initializer(v).is_some();
    let inner = ir::infer_types(g, crate::op_types());
    let float = |v: &str| {
        let t = inner.get(v).or_else(|| cx.type_of(v));
        t.is_some_and(|t| t.dtype.is_float())
    };
    let mut out = Vec::new();
    for n in &g.nodes {
        if !is_default(n) || !FALLIBLE.contains(&n.op.as_str()) {
            continue;
        }
        let reads: Vec<&str> = n.inputs.iter().filter(|i| !i.is_empty()).map(String::as_str).collect();
        if reads.iter().all(|v| is_const(v)) {
            continue;
        }
        if matches!(n.op.as_str(), "Div" | "Mod") && reads.first().is_some_and(|v| float(v)) {
            continue;
        }
        out.push(Val::Str(n.name.clone()));
    }
    Ok(Val::List(out))
}

fn is_default(n: &Node) -> bool {
    ep_sets::Domain::is_onnx(&n.domain)
}
