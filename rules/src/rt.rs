//! The run-time support that generated matchers call. Each function does one structural test
//! (is this node that op, bind that operand, compare that attribute) and reports a failure as
//! the step it belongs to plus a message; which tests run, in what order, on which slots, is
//! decided by the generated code, not here.

use ep_sets::Domain;
use ir::{AttrValue, DType, Dim, Graph, Node, ValueInfo};
use std::collections::{HashMap, HashSet};

pub use crate::branch::{fn_branch_dtype, fn_branch_dtypes, fn_branch_outputs, fn_branch_shape, fn_branch_shapes, fn_fallible_nodes, fn_nested_graphs, fn_numel};

/// Read-only indexes over one graph, built once per pass of a rule.
pub struct Cx<'g> {
    pub graph: &'g Graph,
    producer: HashMap<&'g str, (usize, usize)>,
    uses: HashMap<&'g str, usize>,
    types: HashMap<String, ValueInfo>,
    inputs: HashSet<&'g str>,
    outputs: HashSet<&'g str>,
    limits: std::collections::BTreeMap<String, i64>,
}

impl<'g> Cx<'g> {
    pub fn new(graph: &'g Graph) -> Cx<'g> {
        Self::with_outer(graph, &HashMap::new())
    }

    /// Indexes for a subgraph: `outer` holds the types of the enclosing scopes' values, which
    /// the subgraph may read.
    pub fn with_outer(graph: &'g Graph, outer: &HashMap<String, ValueInfo>) -> Cx<'g> {
        let mut producer = HashMap::new();
        let mut uses: HashMap<&str, usize> = HashMap::new();
        for (i, n) in graph.nodes.iter().enumerate() {
            for (k, o) in n.outputs.iter().enumerate() {
                if !o.is_empty() {
                    producer.insert(o.as_str(), (i, k));
                }
            }
            for inp in n.inputs.iter().filter(|s| !s.is_empty()) {
                *uses.entry(inp.as_str()).or_default() += 1;
            }
        }
        // Values captured by subgraphs count as used by the node that owns the subgraph.
        let mut captured: Vec<String> = Vec::new();
        for n in &graph.nodes {
            for g in n.subgraphs() {
                captured.extend(g.captured_names());
            }
        }
        let mut uses_owned: HashMap<&str, usize> = uses;
        for c in &captured {
            if let Some((k, _)) = producer.get_key_value(c.as_str()) {
                *uses_owned.entry(*k).or_default() += 1;
            } else if let Some(v) = graph.inputs.iter().find(|v| &v.name == c) {
                *uses_owned.entry(v.name.as_str()).or_default() += 1;
            }
        }
        Cx {
            graph,
            producer,
            uses: uses_owned,
            types: {
                let mut t = outer.clone();
                t.extend(ir::infer_types(graph, crate::op_types()));
                t
            },
            inputs: graph.inputs.iter().map(|v| v.name.as_str()).collect(),
            outputs: graph.outputs.iter().map(|v| v.name.as_str()).collect(),
            limits: Default::default(),
        }
    }

    /// The EP table's named bounds, for `limit("name")`.
    pub fn with_limits(mut self, limits: &std::collections::BTreeMap<String, i64>) -> Self {
        self.limits = limits.clone();
        self
    }
    pub fn node(&self, i: usize) -> &'g Node {
        &self.graph.nodes[i]
    }
    /// Node index and output slot producing `value`.
    pub fn producer_of(&self, value: &str) -> Option<(usize, usize)> {
        self.producer.get(value).copied()
    }
    /// How many node inputs (and graph outputs) read `value`.
    pub fn uses(&self, value: &str) -> usize {
        self.uses.get(value).copied().unwrap_or(0) + usize::from(self.outputs.contains(value))
    }
    pub fn is_graph_output(&self, value: &str) -> bool {
        self.outputs.contains(value)
    }
    pub(crate) fn type_of(&self, value: &str) -> Option<&ValueInfo> {
        self.types.get(value)
    }
    pub(crate) fn types(&self) -> &HashMap<String, ValueInfo> {
        &self.types
    }
}

/// A matcher's failure: the step (index into the rule's steps) and the rendered reason.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    pub step: usize,
    pub message: String,
}

fn fail<T>(step: usize, message: String) -> Result<T, Failure> {
    Err(Failure { step, message })
}

/// What a capture holds: a tensor value (by name) or an attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum Bound {
    Value(String),
    Attr(AttrValue),
    /// A list capture (`..?ys`): tensor values, in output order.
    Values(Vec<String>),
}

/// The captures of one successful (or partial) match, plus the matched nodes in match order.
#[derive(Clone, Debug, Default)]
pub struct Binds {
    pub caps: Vec<Option<Bound>>,
    pub nodes: Vec<usize>,
}

impl Binds {
    pub fn new(n: usize) -> Binds {
        Binds { caps: vec![None; n], nodes: Vec::new() }
    }
}

/// A literal from a `.rule` file.
#[derive(Clone, Copy, Debug)]
pub enum Lit {
    Int(i64),
    Float(f64),
    Str(&'static str),
    Bool(bool),
    List(&'static [Lit]),
}

/// `ai.onnx.MatMul`, `com.microsoft.GroupQueryAttention`: how a failure names an op.
fn shown_op(domain: &str, op: &str) -> String {
    format!("{}.{op}", Domain::parse(domain).shown())
}

pub fn expect_op(cx: &Cx, node: usize, domain: &str, op: &str, step: usize) -> Result<(), Failure> {
    let n = cx.node(node);
    if n.op == op && Domain::same(&n.domain, domain) {
        return Ok(());
    }
    fail(step, format!("`{}` is {}, expected {}", n.name, shown_op(&n.domain, &n.op), shown_op(domain, op)))
}

/// The node producing the value bound to `cap`, which must be its output `slot`.
pub fn producer(cx: &Cx, b: &Binds, cap: usize, slot: usize, step: usize) -> Result<usize, Failure> {
    let Some(Bound::Value(v)) = &b.caps[cap] else {
        return fail(step, "internal: operand not bound before its producer is matched".into());
    };
    match cx.producer_of(v) {
        Some((i, k)) if k == slot => Ok(i),
        Some((i, k)) => fail(step, format!("`{v}` is output {k} of `{}`, expected output {slot}", cx.node(i).name)),
        None if cx.inputs.contains(v.as_str()) => fail(step, format!("`{v}` is a graph input, not produced by a node")),
        None if cx.graph.initializer(v).is_some() => fail(step, format!("`{v}` is an initializer, not produced by a node")),
        None => fail(step, format!("`{v}` comes from an outer scope, not from a node of this graph")),
    }
}

/// Outputs past the pattern's `n` must be absent or unread: the rule cannot replace them.
pub fn expect_outputs(cx: &Cx, node: usize, n: usize, step: usize) -> Result<(), Failure> {
    let nd = cx.node(node);
    for (k, o) in nd.outputs.iter().enumerate().skip(n) {
        if !o.is_empty() && cx.uses(o) > 0 {
            return fail(step, format!("`{}` has output {k} `{o}` in use; the pattern names {n} output(s)", nd.name));
        }
    }
    Ok(())
}

pub fn bind_output(cx: &Cx, b: &mut Binds, node: usize, slot: usize, cap: usize, step: usize) -> Result<(), Failure> {
    let nd = cx.node(node);
    match nd.outputs.get(slot).filter(|o| !o.is_empty()) {
        Some(o) => bind(b, cap, Bound::Value(o.clone()), step, || format!("output {slot} of `{}`", nd.name)),
        None => fail(step, format!("`{}` has no output {slot}", nd.name)),
    }
}

/// `..?ys` at output position `from`: every output from there on, as one list. An omitted
/// (empty) output among them fails the line: there would be nothing to replace.
pub fn bind_outputs_from(cx: &Cx, b: &mut Binds, node: usize, from: usize, cap: usize, step: usize) -> Result<(), Failure> {
    let nd = cx.node(node);
    let rest = nd.outputs.get(from..).unwrap_or_default();
    if let Some(k) = rest.iter().position(|o| o.is_empty()) {
        return fail(step, format!("`{}` has no output {}", nd.name, from + k));
    }
    bind(b, cap, Bound::Values(rest.to_vec()), step, || format!("outputs {from}.. of `{}`", nd.name))
}

pub fn expect_inputs(cx: &Cx, node: usize, n: usize, rest: bool, step: usize) -> Result<(), Failure> {
    let nd = cx.node(node);
    let present = nd.inputs.iter().rposition(|i| !i.is_empty()).map_or(0, |p| p + 1);
    if present > n && !rest {
        return fail(step, format!("`{}` has {present} inputs, the pattern expects {n}", nd.name));
    }
    Ok(())
}

pub fn input_present(cx: &Cx, node: usize, slot: usize, step: usize) -> Result<(), Failure> {
    let nd = cx.node(node);
    match nd.input(slot) {
        Some(_) => Ok(()),
        None => fail(step, format!("`{}` has no input {slot}", nd.name)),
    }
}

/// `-` in a pattern: the optional input `slot` must be absent (empty, or past the end).
pub fn input_absent(cx: &Cx, node: usize, slot: usize, step: usize) -> Result<(), Failure> {
    let nd = cx.node(node);
    match nd.input(slot) {
        None => Ok(()),
        Some(v) => fail(step, format!("`{}` has input {slot} (`{v}`), the pattern expects it absent", nd.name)),
    }
}

pub fn bind_input(cx: &Cx, b: &mut Binds, node: usize, slot: usize, cap: usize, step: usize) -> Result<(), Failure> {
    let nd = cx.node(node);
    match nd.input(slot) {
        Some(v) => bind(b, cap, Bound::Value(v.to_string()), step, || format!("input {slot} of `{}`", nd.name)),
        None => fail(step, format!("`{}` has no input {slot}", nd.name)),
    }
}

fn bind(b: &mut Binds, cap: usize, v: Bound, step: usize, what: impl Fn() -> String) -> Result<(), Failure> {
    match &b.caps[cap] {
        None => {
            b.caps[cap] = Some(v);
            Ok(())
        }
        Some(old) if *old == v => Ok(()),
        Some(old) => fail(step, format!("{} is {}, but the same capture already holds {}", what(), show_bound(&v), show_bound(old))),
    }
}

fn show_bound(b: &Bound) -> String {
    match b {
        Bound::Value(v) => format!("`{v}`"),
        Bound::Attr(a) => show_attr(a),
        Bound::Values(v) => format!("[{}]", v.iter().map(|x| format!("`{x}`")).collect::<Vec<_>>().join(", ")),
    }
}

fn show_attr(a: &AttrValue) -> String {
    match a {
        AttrValue::Int(v) => v.to_string(),
        AttrValue::Float(v) => format!("{v}"),
        AttrValue::String(s) => format!("{s:?}"),
        AttrValue::Ints(v) => format!("{v:?}"),
        AttrValue::Floats(v) => format!("{v:?}"),
        AttrValue::Strings(v) => format!("{v:?}"),
        AttrValue::Tensor(_) => "<tensor>".into(),
        AttrValue::Graph(_) => "<graph>".into(),
    }
}

/// The attribute value a literal stands for.
pub fn lit_value(l: &Lit) -> AttrValue {
    match l {
        Lit::Int(v) => AttrValue::Int(*v),
        Lit::Float(v) => AttrValue::Float(*v as f32),
        Lit::Str(s) => AttrValue::String(s.to_string()),
        Lit::Bool(b) => AttrValue::Int(i64::from(*b)),
        Lit::List(items) => {
            if items.iter().all(|i| matches!(i, Lit::Int(_))) {
                AttrValue::Ints(items.iter().map(|i| if let Lit::Int(v) = i { *v } else { 0 }).collect())
            } else if items.iter().all(|i| matches!(i, Lit::Float(_) | Lit::Int(_))) {
                AttrValue::Floats(items.iter().map(|i| match i { Lit::Float(v) => *v as f32, Lit::Int(v) => *v as f32, _ => 0.0 }).collect())
            } else {
                AttrValue::Strings(items.iter().map(|i| if let Lit::Str(s) = i { s.to_string() } else { String::new() }).collect())
            }
        }
    }
}

pub fn lit_attr(name: &str, l: &Lit) -> ir::Attr {
    ir::Attr { name: name.to_string(), value: lit_value(l) }
}

fn attr_or_default(nd: &Node, name: &str, default: Option<&Lit>) -> Option<AttrValue> {
    nd.attr(name).cloned().or_else(|| default.map(lit_value))
}

fn attr_eq(a: &AttrValue, b: &AttrValue) -> bool {
    match (a, b) {
        (AttrValue::Float(x), AttrValue::Float(y)) => (x - y).abs() <= 1e-6 * x.abs().max(y.abs()).max(1.0),
        (AttrValue::Float(x), AttrValue::Int(y)) | (AttrValue::Int(y), AttrValue::Float(x)) => *x == *y as f32,
        _ => a == b,
    }
}

pub fn attr_is(cx: &Cx, node: usize, name: &str, want: &Lit, default: Option<&Lit>, step: usize) -> Result<(), Failure> {
    let nd = cx.node(node);
    let want = lit_value(want);
    match attr_or_default(nd, name, default) {
        Some(v) if attr_eq(&v, &want) => Ok(()),
        Some(v) => fail(step, format!("`{}` has {name}={}, the pattern needs {}", nd.name, show_attr(&v), show_attr(&want))),
        None => fail(step, format!("`{}` has no attribute {name}; the pattern needs {}", nd.name, show_attr(&want))),
    }
}

pub fn bind_attr(cx: &Cx, b: &mut Binds, node: usize, name: &str, cap: usize, default: Option<&Lit>, step: usize) -> Result<(), Failure> {
    let nd = cx.node(node);
    match attr_or_default(nd, name, default) {
        Some(v) => {
            if let Some(Bound::Attr(old)) = &b.caps[cap] {
                if !attr_eq(old, &v) {
                    return fail(step, format!("`{}` has {name}={}, but the same capture already holds {}", nd.name, show_attr(&v), show_attr(old)));
                }
                return Ok(());
            }
            bind(b, cap, Bound::Attr(v), step, || format!("attribute {name} of `{}`", nd.name))
        }
        None => fail(step, format!("`{}` has no attribute {name}", nd.name)),
    }
}

/// A value inside a check expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    List(Vec<Val>),
    Shape(Vec<Dim>),
    /// A tensor value of the graph, by name.
    Value(String),
    /// A subgraph attribute (an If branch), for the `branch_*` functions.
    Graph(Box<ir::Graph>),
}

impl Val {
    pub fn from_lit(l: &Lit) -> Val {
        match l {
            Lit::Int(v) => Val::Int(*v),
            Lit::Float(v) => Val::Float(*v),
            Lit::Str(s) => Val::Str(s.to_string()),
            Lit::Bool(b) => Val::Bool(*b),
            Lit::List(items) => Val::List(items.iter().map(Val::from_lit).collect()),
        }
    }
}

impl std::fmt::Display for Val {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Val::Int(v) => write!(f, "{v}"),
            Val::Float(v) => write!(f, "{v}"),
            Val::Bool(v) => write!(f, "{v}"),
            Val::Str(s) => f.write_str(s),
            Val::List(v) => write!(f, "[{}]", v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")),
            Val::Shape(d) => write!(f, "[{}]", d.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")),
            Val::Value(v) => f.write_str(v),
            Val::Graph(g) => write!(f, "<graph {}>", g.name),
        }
    }
}

/// A capture as an expression value.
pub fn cap_val(_cx: &Cx, b: &Binds, cap: usize, shown: &str) -> Result<Val, String> {
    match &b.caps[cap] {
        Some(Bound::Value(v)) => Ok(Val::Value(v.clone())),
        Some(Bound::Values(vs)) => Ok(Val::List(vs.iter().map(|v| Val::Value(v.clone())).collect())),
        Some(Bound::Attr(a)) => Ok(match a {
            AttrValue::Int(v) => Val::Int(*v),
            AttrValue::Float(v) => Val::Float(*v as f64),
            AttrValue::String(s) => Val::Str(s.clone()),
            AttrValue::Ints(v) => Val::List(v.iter().map(|x| Val::Int(*x)).collect()),
            AttrValue::Floats(v) => Val::List(v.iter().map(|x| Val::Float(*x as f64)).collect()),
            AttrValue::Graph(g) => Val::Graph(g.clone()),
            other => return Err(format!("{shown} holds {}, which checks cannot read", show_attr(other))),
        }),
        None => Err(format!("{shown} is not bound")),
    }
}

/// Renders an expression result inside a message; an error renders as `<why>`.
pub fn show(v: Result<Val, String>) -> String {
    match v {
        Ok(v) => v.to_string(),
        Err(e) => format!("<{e}>"),
    }
}

/// A function of a value applied to `v`; to each value when `v` is a list of graph values (a
/// list capture), giving the list of results.
pub fn each(v: Val, f: impl Fn(Val) -> Result<Val, String>) -> Result<Val, String> {
    match v {
        Val::List(items) if items.iter().all(|i| matches!(i, Val::Value(_))) => items.into_iter().map(f).collect::<Result<Vec<_>, _>>().map(Val::List),
        other => f(other),
    }
}

/// `len(list)`: how many items a list (or dimensions a shape) has.
pub fn fn_len(_cx: &Cx, v: Val) -> Result<Val, String> {
    match v {
        Val::List(items) => Ok(Val::Int(items.len() as i64)),
        Val::Shape(dims) => Ok(Val::Int(dims.len() as i64)),
        other => Err(format!("{other} is not a list")),
    }
}

/// `min(list)`: the smallest number of a non-empty list of numbers.
pub fn fn_min(_cx: &Cx, v: Val) -> Result<Val, String> {
    let Val::List(items) = v else { return Err(format!("{v} is not a list")) };
    let mut best: Option<Val> = None;
    for i in items {
        num(&i)?;
        if best.as_ref().is_none_or(|b| num(&i).ok() < num(b).ok()) {
            best = Some(i);
        }
    }
    best.ok_or_else(|| "min of an empty list".to_string())
}

/// `int(x)`: a whole number as an integer, so a count stored as a float constant (MoE's
/// top-k in the routing arithmetic) can become an int attribute; a fraction is an error.
pub fn fn_int(_cx: &Cx, v: Val) -> Result<Val, String> {
    match v {
        Val::Int(i) => Ok(Val::Int(i)),
        Val::Float(f) if f.fract() == 0.0 && f.abs() < (1u64 << 53) as f64 => Ok(Val::Int(f as i64)),
        Val::Float(f) => Err(format!("{f} is not a whole number")),
        other => Err(format!("{other} is not a number")),
    }
}

pub fn truthy(v: &Val) -> Result<bool, String> {
    match v {
        Val::Bool(b) => Ok(*b),
        other => Err(format!("expected true/false, got {other}")),
    }
}

/// Turns a condition's result into a step result; an error while evaluating fails the check.
pub fn check(v: Result<Val, String>, step: usize, message: impl FnOnce() -> String) -> Result<(), Failure> {
    match v {
        Ok(Val::Bool(true)) => Ok(()),
        Ok(Val::Bool(false)) => fail(step, message()),
        Ok(other) => fail(step, format!("{} (the condition gave {other}, not true/false)", message())),
        Err(e) => fail(step, format!("{} (could not evaluate: {e})", message())),
    }
}

pub(crate) fn value_name(v: &Val) -> Result<&str, String> {
    match v {
        Val::Value(n) => Ok(n),
        other => Err(format!("{other} is not a graph value")),
    }
}

pub(crate) fn shape_of(cx: &Cx, v: &Val) -> Result<Vec<Dim>, String> {
    let n = value_name(v)?;
    cx.type_of(n).and_then(|t| t.shape.clone()).ok_or_else(|| format!("shape of `{n}` unknown"))
}

pub fn fn_shape(cx: &Cx, v: Val) -> Result<Val, String> {
    shape_of(cx, &v).map(Val::Shape)
}
pub fn fn_rank(cx: &Cx, v: Val) -> Result<Val, String> {
    shape_of(cx, &v).map(|s| Val::Int(s.len() as i64))
}
pub fn fn_dim(cx: &Cx, v: Val, i: Val) -> Result<Val, String> {
    let s = shape_of(cx, &v)?;
    let Val::Int(i) = i else { return Err(format!("dim index {i} is not an integer")) };
    let idx = if i < 0 { i + s.len() as i64 } else { i };
    match s.get(usize::try_from(idx).map_err(|_| format!("dim {i} out of range"))?) {
        Some(Dim::Fixed(d)) => Ok(Val::Int(*d)),
        Some(Dim::Sym(d)) => Err(format!("dim {i} of `{}` is symbolic ({d})", value_name(&v)?)),
        None => Err(format!("`{}` has rank {}, no dim {i}", value_name(&v)?, s.len())),
    }
}
pub fn fn_dtype(cx: &Cx, v: Val) -> Result<Val, String> {
    let n = value_name(&v)?;
    cx.type_of(n).map(|t| Val::Str(t.dtype.name().to_string())).ok_or_else(|| format!("type of `{n}` unknown"))
}
/// `stored_form(?w)`: how an initializer's weight is stored ([`ir::Recipe::stored_form`]):
/// `float`, or the bits, block and zero points of the pre-quantized layers it reads. The
/// packing rules compare it: weights of different forms cannot share one MatMulNBits as
/// they are stored.
pub fn fn_stored_form(cx: &Cx, v: Val) -> Result<Val, String> {
    let n = value_name(&v)?;
    cx.graph.initializer(n).map(|r| Val::Str(r.stored_form())).ok_or_else(|| format!("`{n}` is not an initializer"))
}
/// `stored_as(?w)`: what an initializer's weight is stored as, for messages
/// ([`ir::Recipe::stored_as`]): `float`, or `Q4_K (4-bit, block 32, float zero points)`.
pub fn fn_stored_as(cx: &Cx, v: Val) -> Result<Val, String> {
    let n = value_name(&v)?;
    cx.graph.initializer(n).map(|r| Val::Str(r.stored_as())).ok_or_else(|| format!("`{n}` is not an initializer"))
}
pub fn fn_is_graph_input(cx: &Cx, v: Val) -> Result<Val, String> {
    Ok(Val::Bool(cx.inputs.contains(value_name(&v)?)))
}
pub fn fn_is_graph_output(cx: &Cx, v: Val) -> Result<Val, String> {
    Ok(Val::Bool(cx.outputs.contains(value_name(&v)?)))
}
pub fn fn_is_initializer(cx: &Cx, v: Val) -> Result<Val, String> {
    Ok(Val::Bool(cx.graph.constant(value_name(&v)?).is_some()))
}
pub fn fn_producer(cx: &Cx, v: Val) -> Result<Val, String> {
    let n = value_name(&v)?;
    Ok(Val::Str(match cx.producer_of(n) {
        Some((i, _)) => shown_op(&cx.node(i).domain, &cx.node(i).op),
        None if cx.inputs.contains(n) => "graph input".into(),
        None if cx.graph.initializer(n).is_some() => "initializer".into(),
        None => "outer scope".into(),
    }))
}
pub fn fn_uses(cx: &Cx, v: Val) -> Result<Val, String> {
    Ok(Val::Int(cx.uses(value_name(&v)?) as i64))
}
pub fn fn_name(_cx: &Cx, v: Val) -> Result<Val, String> {
    Ok(Val::Str(value_name(&v)?.to_string()))
}

fn num(v: &Val) -> Result<f64, String> {
    match v {
        Val::Int(i) => Ok(*i as f64),
        Val::Float(f) => Ok(*f),
        other => Err(format!("{other} is not a number")),
    }
}

fn eq(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Int(_) | Val::Float(_), Val::Int(_) | Val::Float(_)) => num(a).ok() == num(b).ok(),
        (Val::Shape(x), Val::List(y)) | (Val::List(y), Val::Shape(x)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(d, v)| matches!((d, v), (Dim::Fixed(p), Val::Int(q)) if p == q))
        }
        _ => a == b,
    }
}

pub fn op_eq(a: Val, b: Val) -> Result<Val, String> {
    Ok(Val::Bool(eq(&a, &b)))
}
pub fn op_ne(a: Val, b: Val) -> Result<Val, String> {
    Ok(Val::Bool(!eq(&a, &b)))
}
pub fn op_lt(a: Val, b: Val) -> Result<Val, String> {
    Ok(Val::Bool(num(&a)? < num(&b)?))
}
pub fn op_le(a: Val, b: Val) -> Result<Val, String> {
    Ok(Val::Bool(num(&a)? <= num(&b)?))
}
pub fn op_gt(a: Val, b: Val) -> Result<Val, String> {
    Ok(Val::Bool(num(&a)? > num(&b)?))
}
pub fn op_ge(a: Val, b: Val) -> Result<Val, String> {
    Ok(Val::Bool(num(&a)? >= num(&b)?))
}

fn arith(a: Val, b: Val, what: &str, i: fn(i64, i64) -> Option<i64>, f: fn(f64, f64) -> f64) -> Result<Val, String> {
    match (&a, &b) {
        (Val::Int(x), Val::Int(y)) => i(*x, *y).map(Val::Int).ok_or_else(|| format!("{x} {what} {y} is undefined")),
        _ => Ok(Val::Float(f(num(&a)?, num(&b)?))),
    }
}
pub fn op_add(a: Val, b: Val) -> Result<Val, String> {
    arith(a, b, "+", i64::checked_add, |x, y| x + y)
}
pub fn op_sub(a: Val, b: Val) -> Result<Val, String> {
    arith(a, b, "-", i64::checked_sub, |x, y| x - y)
}
pub fn op_mul(a: Val, b: Val) -> Result<Val, String> {
    arith(a, b, "*", i64::checked_mul, |x, y| x * y)
}
pub fn op_div(a: Val, b: Val) -> Result<Val, String> {
    arith(a, b, "/", i64::checked_div, |x, y| x / y)
}
pub fn op_rem(a: Val, b: Val) -> Result<Val, String> {
    arith(a, b, "%", i64::checked_rem, |x, y| x % y)
}

/// Binds a `let` capture to the attribute value its expression computed.
pub fn bind_let(b: &mut Binds, cap: usize, shown: &str, v: Result<Val, String>, step: usize) -> Result<(), Failure> {
    let attr = match v {
        Ok(Val::Int(i)) => AttrValue::Int(i),
        Ok(Val::Float(f)) => AttrValue::Float(f as f32),
        Ok(Val::Bool(x)) => AttrValue::Int(i64::from(x)),
        Ok(Val::Str(s)) => AttrValue::String(s),
        // A list of integers (`[0, 0, ?nh, -1]`) becomes an ints attribute, e.g. a Constant's
        // `value_ints` (a Reshape shape that depends on the match).
        Ok(Val::List(items)) if items.iter().all(|v| matches!(v, Val::Int(_))) => {
            AttrValue::Ints(items.iter().map(|v| if let Val::Int(i) = v { *i } else { 0 }).collect())
        }
        Ok(Val::List(items)) => {
            let kinds: Vec<&str> = items.iter().map(|v| if matches!(v, Val::Int(_)) { "int" } else if matches!(v, Val::Float(_)) { "float" } else { "other" }).collect();
            return fail(step, format!("{shown} is a list of [{}], not of integers only, so it cannot be an ints attribute", kinds.join(", ")));
        }
        Ok(other) => return fail(step, format!("{shown} = {other}, which is not an attribute value")),
        Err(e) => return fail(step, format!("cannot compute {shown}: {e}")),
    };
    b.caps[cap] = Some(Bound::Attr(attr));
    Ok(())
}

/// The integer in a one-element computed constant (an initializer the builder made, such as
/// a sliding window's width).
pub fn fn_const_int(cx: &Cx, v: Val) -> Result<Val, String> {
    let n = value_name(&v)?;
    match cx.graph.constant(n) {
        Some(ir::Recipe::Data(d)) if d.shape.iter().product::<usize>() == 1 => match d.dtype {
            DType::I64 => Ok(Val::Int(i64::from_le_bytes(d.bytes()[..8].try_into().map_err(|_| "short data".to_string())?))),
            DType::I32 => Ok(Val::Int(i32::from_le_bytes(d.bytes()[..4].try_into().map_err(|_| "short data".to_string())?) as i64)),
            other => Err(format!("`{n}` holds {other}, not an integer")),
        },
        Some(_) => Err(format!("`{n}` is not a one-element computed constant")),
        None => Err(format!("`{n}` is not an initializer")),
    }
}

/// The number held by a one-element float constant initializer (f32, f64, f16 or bf16), for
/// checks on the literals of a decomposed formula (GELU's 0.5, sqrt(2), 0.044715). A computed
/// constant counts too: an f16 build stores its literals as an f32 value cast to the build
/// dtype (the MoE block's top-k and zero), read here as the cast value.
pub fn fn_const_float(cx: &Cx, v: Val) -> Result<Val, String> {
    let n = value_name(&v)?;
    let Some(r) = cx.graph.constant(n) else { return Err(format!("`{n}` is not a constant initializer")) };
    if r.numel() != 1 || !r.sources().is_empty() {
        return Err(format!("`{n}` is not a one-element constant"));
    }
    let b = r.materialize().map_err(|e| format!("`{n}`: {e}"))?;
    let short = || "short data".to_string();
    Ok(Val::Float(match r.dtype() {
        DType::F32 => f32::from_le_bytes(b[..4].try_into().map_err(|_| short())?) as f64,
        DType::F64 => f64::from_le_bytes(b[..8].try_into().map_err(|_| short())?),
        DType::F16 => half::f16::from_le_bytes(b[..2].try_into().map_err(|_| short())?).to_f64(),
        DType::BF16 => half::bf16::from_le_bytes(b[..2].try_into().map_err(|_| short())?).to_f64(),
        other => return Err(format!("`{n}` holds {other}, not a float")),
    }))
}

/// `limit("name")`: a named bound from the EP table's `limits` (`batch`, `max_context`); an
/// error (so the check fails) when the table gives none.
pub fn fn_limit(cx: &Cx, name: Val) -> Result<Val, String> {
    let Val::Str(n) = &name else { return Err(format!("limit name {name} is not a string")) };
    cx.limits.get(n).map(|v| Val::Int(*v)).ok_or_else(|| format!("the EP table gives no limit `{n}`"))
}

/// `limit_or("name", default)`: [`fn_limit`], or `default` when the table gives none (a kernel
/// limit most EPs do not have, declared only by the tables whose kernel has it).
pub fn fn_limit_or(cx: &Cx, name: Val, default: Val) -> Result<Val, String> {
    let Val::Str(n) = &name else { return Err(format!("limit name {name} is not a string")) };
    let Val::Int(_) = default else { return Err(format!("limit default {default} is not an integer")) };
    Ok(cx.limits.get(n).map_or(default, |v| Val::Int(*v)))
}
