//! Small synthetic graphs for rules whose pattern no built model contains (the GELU
//! decompositions, erf Gelu with a bias). Shared by the check harness and, through `#[path]`,
//! by the ORT parity tests in `tests/tests/rule_set_parity.rs`.

#![allow(dead_code)]

use ir::{Attr, DType, Dim, Graph, Model, Node, Recipe, ValueInfo};

pub const HIDDEN: usize = 8;

fn node(name: &str, op: &str, inputs: &[&str], attrs: Vec<Attr>) -> Node {
    Node { attrs, ..Node::new(name, op, inputs, &[&format!("{name}/out")]) }
}

fn scalar(name: &str, v: f32) -> (String, Recipe) {
    (name.into(), Recipe::from_f32(name, vec![], &[v]))
}

/// x: f32 [batch, seq, 8] -> y, with the given nodes (the last one's output is y).
fn model(mut nodes: Vec<Node>, initializers: Vec<(String, Recipe)>) -> Model {
    let shape = vec![Dim::sym("batch"), Dim::sym("seq"), Dim::Fixed(HIDDEN as i64)];
    let last = nodes.last_mut().expect("nodes");
    last.outputs = vec!["y".into()];
    Model {
        graph: Graph {
            name: "synthetic".into(),
            inputs: vec![ValueInfo::new("x", DType::F32, shape.clone())],
            outputs: vec![ValueInfo::new("y", DType::F32, shape)],
            nodes,
            initializers,
            value_info: vec![],
        },
        ..Default::default()
    }
}

/// `(x * 0.5) * (1 + erf(x / sqrt(2)))`; the last node is `gelu/out`.
pub fn gelu_erf() -> Model {
    model(
        vec![
            node("gelu/div", "Div", &["x", "c/sqrt2"], vec![]),
            node("gelu/erf", "Erf", &["gelu/div/out"], vec![]),
            node("gelu/add", "Add", &["gelu/erf/out", "c/one"], vec![]),
            node("gelu/half_x", "Mul", &["x", "c/half"], vec![]),
            node("gelu/out", "Mul", &["gelu/half_x/out", "gelu/add/out"], vec![]),
        ],
        vec![scalar("c/sqrt2", std::f32::consts::SQRT_2), scalar("c/one", 1.0), scalar("c/half", 0.5)],
    )
}

/// `(x * 0.5) * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`; the last node is `gelu/out`.
pub fn gelu_tanh() -> Model {
    model(
        vec![
            node("gelu/pow", "Pow", &["x", "c/three"], vec![]),
            node("gelu/cubic", "Mul", &["c/k3", "gelu/pow/out"], vec![]),
            node("gelu/poly", "Add", &["x", "gelu/cubic/out"], vec![]),
            node("gelu/inner", "Mul", &["gelu/poly/out", "c/k1"], vec![]),
            node("gelu/tanh", "Tanh", &["gelu/inner/out"], vec![]),
            node("gelu/add", "Add", &["c/one", "gelu/tanh/out"], vec![]),
            node("gelu/half_x", "Mul", &["c/half", "x"], vec![]),
            node("gelu/out", "Mul", &["gelu/half_x/out", "gelu/add/out"], vec![]),
        ],
        vec![
            scalar("c/three", 3.0),
            scalar("c/k3", 0.044715),
            scalar("c/k1", (2.0f64 / std::f64::consts::PI).sqrt() as f32),
            scalar("c/one", 1.0),
            scalar("c/half", 0.5),
        ],
    )
}

/// `Gelu(x + b)` (exact erf Gelu) with a [8] bias; the Gelu node is `gelu`.
pub fn erf_gelu_with_bias() -> Model {
    let bias: Vec<f32> = (0..HIDDEN).map(|i| i as f32 * 0.1 - 0.3).collect();
    model(
        vec![node("bias", "Add", &["x", "b"], vec![]), node("gelu", "Gelu", &["bias/out"], vec![])],
        vec![("b".into(), Recipe::from_f32("b", vec![HIDDEN], &bias))],
    )
}

/// `Gelu(x)` (exact); the node is `gelu`.
pub fn erf_gelu() -> Model {
    model(vec![node("gelu", "Gelu", &["x"], vec![])], vec![])
}

/// `y = If(seq > threshold, x * t, x + e)` on x [batch, seq, 8], the If node `if` with a
/// one-element condition `cond/out` ([1]). The then branch captures `x` and the outer
/// initializer `t`; the else branch has its own initializer `e`. With the parity input
/// (seq 5), threshold 3 takes the then branch and 9 the else branch.
pub fn if_select(threshold: i64) -> Model {
    let shape = vec![Dim::sym("batch"), Dim::sym("seq"), Dim::Fixed(HIDDEN as i64)];
    let branch = |name: &str, op: &str, operand: &str, inits: Vec<(String, Recipe)>| Graph {
        name: name.into(),
        inputs: vec![],
        outputs: vec![ValueInfo::new(format!("{name}/out"), DType::F32, shape.clone())],
        nodes: vec![node(name, op, &["x", operand], vec![])],
        initializers: inits,
        value_info: vec![],
    };
    let e: Vec<f32> = (0..HIDDEN).map(|i| 0.5 - i as f32 * 0.25).collect();
    let t: Vec<f32> = (0..HIDDEN).map(|i| 1.0 + i as f32 * 0.1).collect();
    let then_branch = branch("then", "Mul", "t", vec![]);
    let else_branch = branch("else", "Add", "e", vec![("e".into(), Recipe::from_f32("e", vec![HIDDEN], &e))]);
    let seq = node("seq", "Shape", &["x"], vec![Attr::int("start", 1), Attr::int("end", 2)]);
    let cond = node("cond", "Greater", &["seq/out", "threshold"], vec![]);
    let iff = node("if", "If", &["cond/out"], vec![Attr::graph("then_branch", then_branch), Attr::graph("else_branch", else_branch)]);
    let mut m = model(
        vec![seq, cond, iff],
        vec![("t".into(), Recipe::from_f32("t", vec![HIDDEN], &t)), ("threshold".into(), Recipe::from_i64("threshold", vec![1], &[threshold]))],
    );
    m.graph.value_info.push(ValueInfo::new("cond/out", DType::Bool, vec![Dim::Fixed(1)]));
    m
}

fn node_with(name: &str, op: &str, inputs: &[&str], attrs: Vec<Attr>) -> Node {
    node(name, op, inputs, attrs)
}

fn vector(name: &str, f: impl Fn(usize) -> f32) -> (String, Recipe) {
    let v: Vec<f32> = (0..HIDDEN).map(f).collect();
    (name.into(), Recipe::from_f32(name, vec![HIDDEN], &v))
}

fn last_axis(name: &str) -> (String, Recipe) {
    (name.into(), Recipe::from_i64(name, vec![1], &[-1]))
}

/// The decomposed RMS norm on x [batch, seq, 8]: `x * Reciprocal(Sqrt(ReduceMean(x^2, [-1]) +
/// eps)) * gamma` (`div`: `x / Sqrt(..)`; `pow`: the square as `Pow(x, 2)`, else `x * x`).
/// Nodes `rms/sq`, `rms/mean`, `rms/add`, `rms/sqrt`, [`rms/recip`], `rms/norm`, `rms/out`;
/// initializers `c/two`, `c/axes`, `c/eps`, `gamma`. gamma is the Mul's first operand.
pub fn rms_norm(pow: bool, div: bool) -> Model {
    let keep = || vec![Attr::int("keepdims", 1)];
    let mut nodes = vec![
        if pow { node_with("rms/sq", "Pow", &["x", "c/two"], vec![]) } else { node_with("rms/sq", "Mul", &["x", "x"], vec![]) },
        node_with("rms/mean", "ReduceMean", &["rms/sq/out", "c/axes"], keep()),
        node_with("rms/add", "Add", &["rms/mean/out", "c/eps"], vec![]),
        node_with("rms/sqrt", "Sqrt", &["rms/add/out"], vec![]),
    ];
    if div {
        nodes.push(node_with("rms/norm", "Div", &["x", "rms/sqrt/out"], vec![]));
    } else {
        nodes.push(node_with("rms/recip", "Reciprocal", &["rms/sqrt/out"], vec![]));
        nodes.push(node_with("rms/norm", "Mul", &["rms/recip/out", "x"], vec![]));
    }
    nodes.push(node_with("rms/out", "Mul", &["gamma", "rms/norm/out"], vec![]));
    model(nodes, vec![scalar("c/two", 2.0), last_axis("c/axes"), scalar("c/eps", 1e-5), vector("gamma", |i| 0.5 + i as f32 * 0.125)])
}

pub fn rms_norm_pow() -> Model {
    rms_norm(true, false)
}
pub fn rms_norm_mul() -> Model {
    rms_norm(false, false)
}
pub fn rms_norm_div() -> Model {
    rms_norm(true, true)
}
pub fn rms_norm_div_mul() -> Model {
    rms_norm(false, true)
}

/// The decomposed layer norm on x [batch, seq, 8]: `d = x - ReduceMean(x, [-1]); d /
/// Sqrt(ReduceMean(d*d) + eps) * gamma + beta` (`pow`: `Pow(d, 2)`). Nodes `ln/mean`, `ln/d`,
/// `ln/sq`, `ln/var`, `ln/add`, `ln/sqrt`, `ln/norm`, `ln/scaled`, `ln/out`; initializers
/// `c/mean_axes`, `c/var_axes`, `c/two`, `c/eps`, `gamma`, `beta`. beta is the last Add's
/// first operand.
pub fn layer_norm(pow: bool) -> Model {
    let keep = || vec![Attr::int("keepdims", 1)];
    let nodes = vec![
        node_with("ln/mean", "ReduceMean", &["x", "c/mean_axes"], keep()),
        node_with("ln/d", "Sub", &["x", "ln/mean/out"], vec![]),
        if pow { node_with("ln/sq", "Pow", &["ln/d/out", "c/two"], vec![]) } else { node_with("ln/sq", "Mul", &["ln/d/out", "ln/d/out"], vec![]) },
        node_with("ln/var", "ReduceMean", &["ln/sq/out", "c/var_axes"], keep()),
        node_with("ln/add", "Add", &["c/eps", "ln/var/out"], vec![]),
        node_with("ln/sqrt", "Sqrt", &["ln/add/out"], vec![]),
        node_with("ln/norm", "Div", &["ln/d/out", "ln/sqrt/out"], vec![]),
        node_with("ln/scaled", "Mul", &["ln/norm/out", "gamma"], vec![]),
        node_with("ln/out", "Add", &["beta", "ln/scaled/out"], vec![]),
    ];
    model(
        nodes,
        vec![
            last_axis("c/mean_axes"),
            last_axis("c/var_axes"),
            scalar("c/two", 2.0),
            scalar("c/eps", 1e-5),
            vector("gamma", |i| 1.5 - i as f32 * 0.125),
            vector("beta", |i| i as f32 * 0.25 - 1.0),
        ],
    )
}

pub fn layer_norm_mul() -> Model {
    layer_norm(false)
}
pub fn layer_norm_pow() -> Model {
    layer_norm(true)
}

/// `y = Reshape(x, Concat(Shape(x)[0:1], Shape(x)[1:2] * 2, [4]))`: x [batch, seq, 8] ->
/// [batch, 2 seq, 4], int64 shape arithmetic (the Mul `shape/scaled`) feeding a Reshape's
/// shape through a Concat; the Reshape is `reshape`.
pub fn scaled_reshape() -> Model {
    let mut m = model(
        vec![
            node("shape/batch", "Shape", &["x"], vec![Attr::int("start", 0), Attr::int("end", 1)]),
            node("shape/seq", "Shape", &["x"], vec![Attr::int("start", 1), Attr::int("end", 2)]),
            node("shape/scaled", "Mul", &["shape/seq/out", "c/factor"], vec![]),
            node("shape/cat", "Concat", &["shape/batch/out", "shape/scaled/out", "c/tail"], vec![Attr::int("axis", 0)]),
            node("reshape", "Reshape", &["x", "shape/cat/out"], vec![]),
        ],
        vec![
            ("c/factor".into(), Recipe::from_i64("c/factor", vec![1], &[2])),
            ("c/tail".into(), Recipe::from_i64("c/tail", vec![1], &[(HIDDEN / 2) as i64])),
        ],
    );
    m.graph.outputs[0].shape = Some(vec![Dim::sym("batch"), Dim::sym("seq2"), Dim::Fixed(HIDDEN as i64 / 2)]);
    m
}

/// `(y0, .., y{n-1}) = If(seq > threshold, ..)` on x [batch, seq, 8], an If `if` with `n`
/// outputs, each a graph output: the then branch gives `x * t^(k+1)` (a Mul chain on the outer
/// initializer `t`), the else branch `x + (k+1) e` (an Add chain on its own initializer `e`), so
/// every output differs from the others. Threshold 3 takes the then branch on the parity input
/// (seq 5), 9 the else branch.
pub fn if_select_n(threshold: i64, n: usize) -> Model {
    let shape = vec![Dim::sym("batch"), Dim::sym("seq"), Dim::Fixed(HIDDEN as i64)];
    let branch = |name: &str, op: &str, operand: &str, inits: Vec<(String, Recipe)>| {
        let nodes: Vec<Node> = (0..n)
            .map(|k| {
                let prev = if k == 0 { "x".to_string() } else { format!("{name}/{}/out", k - 1) };
                node(&format!("{name}/{k}"), op, &[prev.as_str(), operand], vec![])
            })
            .collect();
        Graph {
            name: name.into(),
            inputs: vec![],
            outputs: (0..n).map(|k| ValueInfo::new(format!("{name}/{k}/out"), DType::F32, shape.clone())).collect(),
            nodes,
            initializers: inits,
            value_info: vec![],
        }
    };
    let e: Vec<f32> = (0..HIDDEN).map(|i| 0.5 - i as f32 * 0.25).collect();
    let t: Vec<f32> = (0..HIDDEN).map(|i| 1.0 + i as f32 * 0.1).collect();
    let then_branch = branch("then", "Mul", "t", vec![]);
    let else_branch = branch("else", "Add", "e", vec![("e".into(), Recipe::from_f32("e", vec![HIDDEN], &e))]);
    let seq = node("seq", "Shape", &["x"], vec![Attr::int("start", 1), Attr::int("end", 2)]);
    let cond = node("cond", "Greater", &["seq/out", "threshold"], vec![]);
    let mut iff = node("if", "If", &["cond/out"], vec![Attr::graph("then_branch", then_branch), Attr::graph("else_branch", else_branch)]);
    iff.outputs = (0..n).map(|k| format!("y{k}")).collect();
    Model {
        graph: Graph {
            name: "synthetic".into(),
            inputs: vec![ValueInfo::new("x", DType::F32, shape.clone())],
            outputs: (0..n).map(|k| ValueInfo::new(format!("y{k}"), DType::F32, shape.clone())).collect(),
            nodes: vec![seq, cond, iff],
            initializers: vec![("t".into(), Recipe::from_f32("t", vec![HIDDEN], &t)), ("threshold".into(), Recipe::from_i64("threshold", vec![1], &[threshold]))],
            value_info: vec![ValueInfo::new("cond/out", DType::Bool, vec![Dim::Fixed(1)])],
        },
        ..Default::default()
    }
}

/// Five outputs, the then branch taken.
pub fn if_select_five() -> Model {
    if_select_n(3, 5)
}

fn i64s(name: &str, v: &[i64]) -> (String, Recipe) {
    (name.into(), Recipe::from_i64(name, vec![v.len()], v))
}

/// `rows = Shape(x)[0:1] * 2` (the batch times a beam count, `shape/scaled`), then
/// `y = Expand(x[0:1], Concat(rows, Shape(x)[1:3]))`: the first sequence broadcast to
/// [2 batch, seq, 8]; the Expand is `expand`.
pub fn scaled_expand() -> Model {
    let mut m = model(
        vec![
            node("first", "Slice", &["x", "c/zero", "c/one", "c/zero"], vec![]),
            node("shape/batch", "Shape", &["x"], vec![Attr::int("start", 0), Attr::int("end", 1)]),
            node("shape/scaled", "Mul", &["shape/batch/out", "c/factor"], vec![]),
            node("shape/rest", "Shape", &["x"], vec![Attr::int("start", 1), Attr::int("end", 3)]),
            node("shape/cat", "Concat", &["shape/scaled/out", "shape/rest/out"], vec![Attr::int("axis", 0)]),
            node("expand", "Expand", &["first/out", "shape/cat/out"], vec![]),
        ],
        vec![i64s("c/zero", &[0]), i64s("c/one", &[1]), i64s("c/factor", &[2])],
    );
    m.graph.outputs[0].shape = Some(vec![Dim::sym("rows"), Dim::sym("seq"), Dim::Fixed(HIDDEN as i64)]);
    m
}

/// `zeros = ConstantOfShape(Concat(Shape(x)[0:1], Shape(x)[1:2] * 2, [8]))` (f32 zeros, a buffer
/// twice the prompt's length; the Mul is `shape/scaled`), `y = Concat(x, zeros)` on the
/// sequence axis: [batch, 3 seq, 8]. The ConstantOfShape is `zeros`.
pub fn scaled_constant_of_shape() -> Model {
    let mut m = model(
        vec![
            node("shape/batch", "Shape", &["x"], vec![Attr::int("start", 0), Attr::int("end", 1)]),
            node("shape/seq", "Shape", &["x"], vec![Attr::int("start", 1), Attr::int("end", 2)]),
            node("shape/scaled", "Mul", &["c/factor", "shape/seq/out"], vec![]),
            node("shape/cat", "Concat", &["shape/batch/out", "shape/scaled/out", "c/hidden"], vec![Attr::int("axis", 0)]),
            node("zeros", "ConstantOfShape", &["shape/cat/out"], vec![Attr::tensor("value", Recipe::from_f32("zero", vec![1], &[0.0]))]),
            node("padded", "Concat", &["x", "zeros/out"], vec![Attr::int("axis", 1)]),
        ],
        vec![i64s("c/factor", &[2]), i64s("c/hidden", &[HIDDEN as i64])],
    );
    m.graph.outputs[0].shape = Some(vec![Dim::sym("batch"), Dim::sym("seq3"), Dim::Fixed(HIDDEN as i64)]);
    m
}

/// `y = TopK(Reshape(x, [0, -1]), Shape(x)[1:2] * 2)` on the last axis: the 2 seq largest of
/// each row's seq * 8 values (a budget per token; the Mul is `shape/scaled`), [batch, 2 seq].
/// The TopK is `topk`.
pub fn scaled_topk() -> Model {
    let topk = node("topk", "TopK", &["flat/out", "shape/scaled/out"], vec![Attr::int("axis", -1)]);
    let mut m = model(
        vec![
            node("flat", "Reshape", &["x", "c/flat"], vec![]),
            node("shape/seq", "Shape", &["x"], vec![Attr::int("start", 1), Attr::int("end", 2)]),
            node("shape/scaled", "Mul", &["shape/seq/out", "c/factor"], vec![]),
            topk,
        ],
        vec![i64s("c/flat", &[0, -1]), i64s("c/factor", &[2])],
    );
    // TopK's indices are a required output; nobody reads them.
    m.graph.nodes.last_mut().expect("topk").outputs.push("topk/indices".into());
    m.graph.outputs[0].shape = Some(vec![Dim::sym("batch"), Dim::sym("k")]);
    m
}

/// `y = ReduceSum(x, Shape(Shape(x)) - 1)` with keepdims: the sum over the last axis, the axis
/// computed from the rank (`axes/last`, int64 arithmetic feeding an `axes` input), [batch, seq,
/// 1]. The ReduceSum is `sum`.
pub fn rank_axes() -> Model {
    let mut m = model(
        vec![
            node("axes/shape", "Shape", &["x"], vec![]),
            node("axes/rank", "Shape", &["axes/shape/out"], vec![]),
            node("axes/last", "Sub", &["axes/rank/out", "c/one"], vec![]),
            node("sum", "ReduceSum", &["x", "axes/last/out"], vec![Attr::int("keepdims", 1)]),
        ],
        vec![i64s("c/one", &[1])],
    );
    m.graph.outputs[0].shape = Some(vec![Dim::sym("batch"), Dim::sym("seq"), Dim::Fixed(1)]);
    m
}
