//! Type and shape inference for the ONNX operators the generic graphs and the rewrite rules use.
//! Rules ask questions such as "do these two operands have the same shape?"; this answers them
//! from graph inputs, initializers and value_info, propagated through the nodes in order.
//! Anything it does not know stays unknown (`None` shape), never guessed.
//!
//! This crate knows the default ONNX domain only. Operators of other domains (ONNX Runtime's
//! contrib ops, and the ones it registers in the default domain) are inferred by the
//! [`OpInference`] the caller passes: their declarations live with the crate that emits them.

use crate::{DType, Dim, Graph, Node, ValueInfo};
use ep_sets::Domain;
use std::collections::HashMap;

/// What inference says of one output: its dtype and shape (`None` shape: rank unknown), or
/// `None` when it knows nothing.
pub type Inferred = Option<(DType, Option<Vec<Dim>>)>;

/// Output types of operators this crate does not define.
pub trait OpInference {
    /// The types of `node`'s outputs, in order, given the types of its inputs (`None` where an
    /// input is absent or unknown); empty when the operator is not declared.
    fn infer(&self, node: &Node, inputs: &[Option<&ValueInfo>]) -> Vec<Inferred>;
}

/// No operator beyond the default ONNX domain: every other node's outputs stay unknown.
pub struct OnnxOnly;

impl OpInference for OnnxOnly {
    fn infer(&self, _: &Node, _: &[Option<&ValueInfo>]) -> Vec<Inferred> {
        Vec::new()
    }
}

/// Every value's inferred type, by name. Subgraphs are not entered. Nodes this crate does not
/// know are asked of `ops`.
pub fn infer_types(graph: &Graph, ops: &dyn OpInference) -> HashMap<String, ValueInfo> {
    let mut known: HashMap<String, ValueInfo> = HashMap::new();
    for v in graph.inputs.iter().chain(&graph.value_info) {
        known.insert(v.name.clone(), v.clone());
    }
    for (name, r) in &graph.initializers {
        // An input's default: the input's declared type (a symbolic dim) is the value's.
        if graph.inputs.iter().any(|i| &i.name == name) {
            continue;
        }
        known.insert(name.clone(), ValueInfo::new(name, r.dtype(), r.shape().iter().map(|&d| Dim::Fixed(d as i64)).collect()));
    }
    for node in &graph.nodes {
        // The default domain's operators are matched by name alone (`onnx_node`, `structural`
        // never see a domain); every other node, and a default-domain op not listed there
        // (ONNX Runtime registers some), is the caller's.
        let mut outs = Vec::new();
        if Domain::is_onnx(&node.domain) {
            outs = onnx_node(node, &known);
            if outs.is_empty() {
                outs = structural(node, &known, graph);
            }
        }
        if outs.is_empty() {
            let inputs: Vec<Option<&ValueInfo>> =
                node.inputs.iter().map(|i| if i.is_empty() { None } else { known.get(i) }).collect();
            outs = ops.infer(node, &inputs);
        }
        for (name, vi) in node.outputs.iter().zip(outs) {
            if name.is_empty() || known.contains_key(name) {
                continue;
            }
            if let Some((dtype, shape)) = vi {
                known.insert(name.clone(), ValueInfo { name: name.clone(), dtype, shape });
            }
        }
    }
    for v in &graph.outputs {
        known.entry(v.name.clone()).or_insert_with(|| v.clone());
    }
    known
}

type Out = Inferred;

fn onnx_node(n: &Node, known: &HashMap<String, ValueInfo>) -> Vec<Out> {
    let get = |i: usize| n.input(i).and_then(|x| known.get(x));
    let same = |i: usize| get(i).map(|v| (v.dtype, v.shape.clone()));
    let dt = |i: usize| get(i).map(|v| v.dtype);
    match n.op.as_str() {
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Max" | "Min" => vec![broadcast(get(0), get(1), None)],
        "Equal" | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" | "And" | "Or" | "Xor" => {
            vec![broadcast(get(0), get(1), Some(DType::Bool))]
        }
        "Where" => vec![broadcast(get(1), get(2), None)],
        "Sigmoid" | "Tanh" | "Relu" | "Clip" | "Neg" | "Exp" | "Log" | "Sqrt" | "Erf" | "Gelu" | "Softmax" | "Identity" | "Not"
        | "RMSNormalization" | "LayerNormalization" | "RotaryEmbedding" | "Reciprocal" | "CumSum" => vec![same(0)],
        "Cast" => {
            let to = n.attr_int("to").and_then(|t| DType::from_onnx(t as i32));
            vec![to.map(|t| (t, get(0).and_then(|v| v.shape.clone())))]
        }
        "Shape" => {
            let rank = get(0).and_then(|v| v.shape.as_ref()).map(|s| s.len() as i64);
            let len = rank.map(|r| {
                let clamp = |x: i64| if x < 0 { (x + r).max(0) } else { x.min(r) };
                let start = clamp(n.attr_int("start").unwrap_or(0));
                let end = clamp(n.attr_int("end").unwrap_or(r));
                (end - start).max(0)
            });
            vec![Some((DType::I64, len.map(|l| vec![Dim::Fixed(l)])))]
        }
        "Gather" => {
            let axis = n.attr_int("axis").unwrap_or(0);
            let shape = match (get(0).and_then(|v| v.shape.clone()), get(1).and_then(|v| v.shape.clone())) {
                (Some(data), Some(idx)) => {
                    let a = if axis < 0 { axis + data.len() as i64 } else { axis } as usize;
                    (a < data.len()).then(|| [&data[..a], &idx[..], &data[a + 1..]].concat())
                }
                _ => None,
            };
            vec![dt(0).map(|d| (d, shape))]
        }
        "MatMul" => {
            let shape = match (get(0).and_then(|v| v.shape.clone()), get(1).and_then(|v| v.shape.clone())) {
                (Some(a), Some(b)) if a.len() >= 2 && b.len() == 2 => {
                    let mut s = a[..a.len() - 1].to_vec();
                    s.push(b[1].clone());
                    Some(s)
                }
                // Batched: the batch dims broadcast (the MoE experts' [batch, 1, seq, hidden]
                // x [experts, hidden, inter]).
                (Some(a), Some(b)) if a.len() >= 2 && b.len() > 2 => {
                    let batch = |s: &[Dim]| ValueInfo { name: String::new(), dtype: DType::F32, shape: Some(s[..s.len() - 2].to_vec()) };
                    broadcast(Some(&batch(&a)), Some(&batch(&b)), None).and_then(|(_, s)| s).map(|mut s| {
                        s.push(a[a.len() - 2].clone());
                        s.push(b[b.len() - 1].clone());
                        s
                    })
                }
                _ => None,
            };
            vec![dt(0).map(|d| (d, shape))]
        }
        "Flatten" => {
            // [prod(d[..axis]), prod(d[axis..])]; a product with a symbolic dim is unnamed.
            let out = get(0).and_then(|v| v.shape.clone()).map(|d| {
                let axis = n.attr_int("axis").unwrap_or(1);
                let a = if axis < 0 { axis + d.len() as i64 } else { axis }.clamp(0, d.len() as i64) as usize;
                let prod = |ds: &[Dim]| -> Dim {
                    ds.iter().try_fold(1i64, |p, x| if let Dim::Fixed(v) = x { Some(p * v) } else { None }).map_or(Dim::Sym(String::new()), Dim::Fixed)
                };
                vec![prod(&d[..a]), prod(&d[a..])]
            });
            vec![dt(0).map(|d| (d, out))]
        }
        "Gemm" => {
            let t = |name: &str| n.attr_int(name).unwrap_or(0) != 0;
            let shape = match (get(0).and_then(|v| v.shape.clone()), get(1).and_then(|v| v.shape.clone())) {
                (Some(a), Some(b)) if a.len() == 2 && b.len() == 2 => {
                    Some(vec![a[usize::from(t("transA"))].clone(), b[usize::from(!t("transB"))].clone()])
                }
                _ => None,
            };
            vec![dt(0).map(|d| (d, shape))]
        }
        // The updated cache: the past's type and shape.
        "TensorScatter" => vec![get(0).map(|v| (v.dtype, v.shape.clone()))],
        "Attention" => {
            // 3-D q [B, S, Nq*H] with 3-D v [B, S, Nkv*Hv]: output [B, S, Nq*Hv].
            let q = get(0).and_then(|v| v.shape.clone());
            let v = get(2).and_then(|v| v.shape.clone());
            let nq = n.attr_int("q_num_heads");
            let nkv = n.attr_int("kv_num_heads");
            let out = match (q, v, nq, nkv) {
                (Some(q), Some(v), Some(nq), Some(nkv)) if q.len() == 3 && v.len() == 3 => match &v[2] {
                    Dim::Fixed(hv) => Some(vec![q[0].clone(), q[1].clone(), Dim::Fixed(nq * (hv / nkv.max(1)))]),
                    _ => None,
                },
                // 4-D q [B, Nq, S, H] with 4-D v [B, Nkv, L, Hv]: output [B, Nq, S, Hv].
                (Some(q), Some(v), _, _) if q.len() == 4 && v.len() == 4 => Some(vec![q[0].clone(), q[1].clone(), q[2].clone(), v[3].clone()]),
                (Some(q), _, _, _) if q.len() == 4 => None,
                _ => None,
            };
            vec![dt(0).map(|d| (d, out)), None, None]
        }
        _ => Vec::new(),
    }
}

/// The values of a small constant i64 initializer (shapes, axes).
fn const_i64(graph: &Graph, name: Option<&str>) -> Option<Vec<i64>> {
    let r = graph.initializer(name?)?;
    if r.dtype() != DType::I64 || r.numel() > 64 {
        return None;
    }
    let bytes = r.materialize().ok()?;
    Some(bytes.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
}

/// Reshape's output dims: `0` copies the input dim, `-1` is solved when the input dims it must
/// absorb are all fixed. `None` when the input is needed and unknown.
fn reshape_dims(input: Option<Vec<Dim>>, target: &[i64]) -> Option<Vec<Dim>> {
    let mut out = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            0 => out.push(input.as_ref()?.get(i)?.clone()),
            -1 => {
                infer_at = Some(i);
                out.push(Dim::Fixed(-1));
            }
            d => out.push(Dim::Fixed(d)),
        }
    }
    if let Some(at) = infer_at {
        // Cancel input dims copied by a 0 at the same position; the rest must be fixed.
        let input = input?;
        let copied: Vec<usize> = target.iter().enumerate().filter(|(_, &d)| d == 0).map(|(i, _)| i).collect();
        let mut numel = 1i64;
        for (i, d) in input.iter().enumerate() {
            if copied.contains(&i) {
                continue;
            }
            match d {
                Dim::Fixed(v) => numel *= v,
                Dim::Sym(_) => return None,
            }
        }
        let known: i64 = target.iter().filter(|&&d| d > 0).product();
        if known == 0 || numel % known != 0 {
            return None;
        }
        out[at] = Dim::Fixed(numel / known);
    }
    Some(out)
}

/// Shape-manipulating and control-flow ops: dtypes always, shapes where constants make them
/// certain (Reshape with a constant shape, Split with constant sizes, Unsqueeze/Squeeze with
/// constant axes, Transpose).
fn structural(n: &Node, known: &HashMap<String, ValueInfo>, graph: &Graph) -> Vec<Out> {
    let get = |i: usize| n.input(i).and_then(|x| known.get(x));
    let dt = |i: usize| get(i).map(|v| v.dtype);
    let shape = |i: usize| get(i).and_then(|v| v.shape.clone());
    match n.op.as_str() {
        "Reshape" => {
            let out = const_i64(graph, n.input(1)).and_then(|target| reshape_dims(shape(0), &target));
            vec![dt(0).map(|d| (d, out))]
        }
        "Unsqueeze" => {
            let out = match (shape(0), const_i64(graph, n.input(1))) {
                (Some(mut s), Some(axes)) => {
                    let rank = (s.len() + axes.len()) as i64;
                    let mut axes: Vec<usize> = axes.iter().map(|&a| if a < 0 { a + rank } else { a } as usize).collect();
                    axes.sort_unstable();
                    for a in axes {
                        if a <= s.len() {
                            s.insert(a, Dim::Fixed(1));
                        }
                    }
                    Some(s)
                }
                _ => None,
            };
            vec![dt(0).map(|d| (d, out))]
        }
        "Squeeze" => {
            let out = match (shape(0), const_i64(graph, n.input(1))) {
                (Some(s), Some(axes)) => {
                    let rank = s.len() as i64;
                    let axes: Vec<usize> = axes.iter().map(|&a| if a < 0 { a + rank } else { a } as usize).collect();
                    Some(s.into_iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, d)| d).collect())
                }
                _ => None,
            };
            vec![dt(0).map(|d| (d, out))]
        }
        "Transpose" => {
            // A perm that does not fit the input's rank (a malformed or retyped graph) leaves
            // the shape unknown rather than indexing past it.
            let out = shape(0).and_then(|s| match n.attr("perm") {
                Some(crate::AttrValue::Ints(p)) => {
                    let fits = p.len() == s.len() && p.iter().all(|&i| i >= 0 && (i as usize) < s.len());
                    fits.then(|| p.iter().map(|&i| s[i as usize].clone()).collect())
                }
                _ => Some(s.into_iter().rev().collect()),
            });
            vec![dt(0).map(|d| (d, out))]
        }
        "Range" => vec![dt(0).map(|d| (d, Some(vec![Dim::Sym(String::new())])))],
        "Concat" => {
            // Tensors of one rank (2 or more) whose concat-axis dims are all fixed: their sum
            // there, the first input's dims elsewhere (the packed LoRA branches,
            // fuse.pack_qkv.lora). A 1-D Concat builds a shape, whose length stays unnamed as
            // before (the graph snapshots print it so).
            let shapes: Option<Vec<Vec<Dim>>> = (0..n.inputs.len()).map(shape).collect();
            let out = shapes.and_then(|shapes| {
                let first = shapes.first().filter(|s| s.len() >= 2)?.clone();
                let axis = n.attr_int("axis")?;
                let a = usize::try_from(if axis < 0 { axis + first.len() as i64 } else { axis }).ok().filter(|&a| a < first.len())?;
                let mut total = 0i64;
                for s in &shapes {
                    match (s.len() == first.len()).then(|| &s[a]) {
                        Some(Dim::Fixed(d)) => total += d,
                        _ => return None,
                    }
                }
                let mut o = first;
                o[a] = Dim::Fixed(total);
                Some(o)
            });
            vec![dt(0).map(|d| (d, out))]
        }
        // Reduced over constant axes: those dims dropped, or kept as 1 (`keepdims`, default 1).
        "ReduceMean" | "ReduceSum" | "ReduceMax" if n.input(1).is_some() => {
            let out = match (shape(0), const_i64(graph, n.input(1))) {
                (Some(s), Some(axes)) if !axes.is_empty() => {
                    let rank = s.len() as i64;
                    let axes: Option<Vec<usize>> = axes.iter().map(|&a| usize::try_from(if a < 0 { a + rank } else { a }).ok().filter(|&a| a < s.len())).collect();
                    let keep = n.attr_int("keepdims").unwrap_or(1) != 0;
                    axes.map(|axes| {
                        s.into_iter()
                            .enumerate()
                            .filter_map(|(i, d)| match axes.contains(&i) {
                                true => keep.then_some(Dim::Fixed(1)),
                                false => Some(d),
                            })
                            .collect()
                    })
                }
                _ => None,
            };
            vec![dt(0).map(|d| (d, out))]
        }
        "Slice" | "Expand" | "Tile" | "ReduceMean" | "ReduceSum" | "ReduceMax" | "Trilu" | "ScatterND" | "Pad" => {
            vec![dt(0).map(|d| (d, None))]
        }
        "Split" => {
            let sizes = const_i64(graph, n.input(1));
            let input = shape(0);
            n.outputs
                .iter()
                .enumerate()
                .map(|(i, _)| {
                    let out = match (&input, &sizes) {
                        (Some(s), Some(sizes)) if sizes.len() == n.outputs.len() => {
                            let axis = n.attr_int("axis").unwrap_or(0);
                            let a = if axis < 0 { axis + s.len() as i64 } else { axis } as usize;
                            (a < s.len()).then(|| {
                                let mut o = s.clone();
                                o[a] = Dim::Fixed(sizes[i]);
                                o
                            })
                        }
                        _ => None,
                    };
                    dt(0).map(|d| (d, out))
                })
                .collect()
        }
        "ConstantOfShape" => {
            let d = match n.attr("value") {
                Some(crate::AttrValue::Tensor(r)) => r.dtype(),
                _ => DType::F32,
            };
            vec![Some((d, None))]
        }
        "If" => {
            let then = n.subgraphs().next();
            n.outputs
                .iter()
                .enumerate()
                .map(|(i, _)| then.and_then(|g| g.outputs.get(i)).map(|v| (v.dtype, v.shape.clone())))
                .collect()
        }
        _ => Vec::new(),
    }
}

/// Numpy-style broadcast of two shapes; `None` when either is unknown or they clash.
fn broadcast(a: Option<&ValueInfo>, b: Option<&ValueInfo>, dtype: Option<DType>) -> Out {
    let (a, b) = (a?, b?);
    let d = dtype.unwrap_or(a.dtype);
    let shape = match (&a.shape, &b.shape) {
        (Some(x), Some(y)) => {
            let r = x.len().max(y.len());
            let mut out = Vec::with_capacity(r);
            let mut ok = true;
            for i in 0..r {
                let dx = (i + x.len()).checked_sub(r).map(|j| &x[j]);
                let dy = (i + y.len()).checked_sub(r).map(|j| &y[j]);
                out.push(match (dx, dy) {
                    (Some(p), None) | (None, Some(p)) => p.clone(),
                    (Some(p), Some(q)) if p == q => p.clone(),
                    (Some(Dim::Fixed(1)), Some(q)) => q.clone(),
                    (Some(p), Some(Dim::Fixed(1))) => p.clone(),
                    _ => {
                        ok = false;
                        Dim::Fixed(-1)
                    }
                });
            }
            ok.then_some(out)
        }
        _ => None,
    };
    Some((d, shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One input `x: f16[b, 8]` feeding one node `op` in `domain`, output `y`.
    fn one_node(domain: &str, op: &str) -> Graph {
        let mut node = Node::new("n", op, &["x"], &["y"]);
        node.domain = domain.into();
        Graph { inputs: vec![ValueInfo::new("x", DType::F16, vec![Dim::sym("b"), Dim::Fixed(8)])], nodes: vec![node], ..Graph::default() }
    }

    /// Answers every node it is asked about with `i8[input rank]`, and records the op names.
    struct Recorder(std::cell::RefCell<Vec<String>>);

    impl OpInference for Recorder {
        fn infer(&self, node: &Node, inputs: &[Option<&ValueInfo>]) -> Vec<Inferred> {
            self.0.borrow_mut().push(format!("{}:{}", node.domain, node.op));
            let rank = inputs[0].and_then(|v| v.shape.as_ref()).map_or(0, |s| s.len() as i64);
            vec![Some((DType::I8, Some(vec![Dim::Fixed(rank)])))]
        }
    }

    #[test]
    fn other_domains_are_the_callers() {
        // ir knows no contrib op: with no declarations, a com.microsoft node's output is unknown,
        // even one whose name is a default-domain op ir infers.
        for op in ["Gelu", "RotaryEmbedding", "GroupQueryAttention", "MatMulNBits"] {
            let g = one_node("com.microsoft", op);
            assert!(!infer_types(&g, &OnnxOnly).contains_key("y"), "{op}");
        }
        assert!(infer_types(&one_node("", "Gelu"), &OnnxOnly).contains_key("y"));
        // The declarations get the input types and decide the output; a default-domain op ir
        // does not list (ONNX Runtime's SimplifiedLayerNormalization) is asked of them too, a
        // listed one never is.
        let rec = Recorder(Default::default());
        for (domain, op) in [("com.microsoft", "Gelu"), ("", "SimplifiedLayerNormalization"), ("ai.onnx", "Gelu")] {
            let y = infer_types(&one_node(domain, op), &rec).remove("y");
            let expect = if op == "Gelu" && domain != "com.microsoft" { DType::F16 } else { DType::I8 };
            assert_eq!(y.map(|v| v.dtype), Some(expect), "{domain}:{op}");
        }
        assert_eq!(*rec.0.borrow(), ["com.microsoft:Gelu", ":SimplifiedLayerNormalization"]);
    }

    #[test]
    fn this_file_names_no_other_domain() {
        // The structural reason is above (the match arms see no domain); this keeps a
        // contrib-op arm from coming back through a domain string or a `Domain` variant.
        let src = include_str!("shape.rs");
        let code = &src[..src.find("#[cfg(test)]").expect("tests module")];
        for word in ["com.microsoft", "Microsoft", "normalize_domain", "Domain::Other"] {
            assert!(!code.contains(word), "ir/src/shape.rs mentions `{word}`");
        }
    }

    #[test]
    fn concat_sums_fixed_axis_dims_and_inputs_override_their_defaults() {
        let v = |n: &str, dims: Vec<Dim>| ValueInfo::new(n, DType::F32, dims);
        let bs = |last: Dim| vec![Dim::sym("b"), Dim::sym("s"), last];
        let mut cat = Node::new("c", "Concat", &["q", "k", "v"], &["y"]);
        cat.set_attr(crate::Attr::int("axis", -1));
        let mut g = Graph {
            inputs: vec![v("q", bs(Dim::Fixed(64))), v("k", bs(Dim::Fixed(32))), v("v", bs(Dim::Fixed(32))), v("a", vec![Dim::Fixed(4), Dim::sym("a.r")])],
            nodes: vec![cat],
            ..Graph::default()
        };
        // An initializer named as an input is that input's default: the input's type wins.
        g.initializers.push(("a".into(), crate::Recipe::data("a", DType::F32, vec![4, 0], Vec::new())));
        let t = infer_types(&g, &OnnxOnly);
        assert_eq!(t["y"].shape, Some(bs(Dim::Fixed(128))));
        assert_eq!(t["a"].shape, Some(vec![Dim::Fixed(4), Dim::sym("a.r")]));
        // A symbolic axis dim, or a 1-D (shape-building) Concat, stays unknown.
        g.inputs[1] = v("k", bs(Dim::sym("r")));
        assert_eq!(infer_types(&g, &OnnxOnly)["y"].shape, None);
        g.inputs = ["q", "k", "v"].iter().map(|n| v(n, vec![Dim::Fixed(1)])).collect();
        assert_eq!(infer_types(&g, &OnnxOnly)["y"].shape, None);
    }

    /// ReduceSum over constant axes drops them, or keeps them as 1 with `keepdims` (the
    /// default); axes out of range, or not a constant, leave the shape unknown.
    #[test]
    fn reductions_over_constant_axes() {
        let reduce = |axes: &[i64], keepdims: Option<i64>| {
            let mut g = one_node("", "ReduceSum");
            g.nodes[0].inputs.push("axes".into());
            if let Some(k) = keepdims {
                g.nodes[0].attrs.push(crate::Attr::int("keepdims", k));
            }
            g.initializers.push(("axes".into(), crate::Recipe::from_i64("axes", vec![axes.len()], axes)));
            infer_types(&g, &OnnxOnly).remove("y").expect("the dtype is known").shape
        };
        assert_eq!(reduce(&[-1], None), Some(vec![Dim::sym("b"), Dim::Fixed(1)]));
        assert_eq!(reduce(&[1], Some(0)), Some(vec![Dim::sym("b")]));
        assert_eq!(reduce(&[0, -1], Some(0)), Some(vec![]));
        assert_eq!(reduce(&[2], None), None, "axis 2 of a 2-D input");
        let mut g = one_node("", "ReduceSum");
        g.nodes[0].inputs.push("x".into());
        assert_eq!(infer_types(&g, &OnnxOnly)["y"].shape, None, "axes computed in the graph");
    }

    #[test]
    fn reshape_copies_and_solves_dims() {
        let bs = vec![Dim::sym("b"), Dim::sym("s"), Dim::Fixed(4), Dim::Fixed(16)];
        assert_eq!(reshape_dims(Some(bs.clone()), &[0, 0, 64]), Some(vec![Dim::sym("b"), Dim::sym("s"), Dim::Fixed(64)]));
        assert_eq!(reshape_dims(Some(bs.clone()), &[0, 0, -1]), Some(vec![Dim::sym("b"), Dim::sym("s"), Dim::Fixed(64)]));
        assert_eq!(reshape_dims(Some(bs), &[-1, 64]), None, "a symbolic dim cannot be absorbed");
        assert_eq!(reshape_dims(None, &[0, 64]), None);
        assert_eq!(reshape_dims(None, &[2, 32]), Some(vec![Dim::Fixed(2), Dim::Fixed(32)]));
    }

    /// A Transpose whose perm does not fit its input (a 3-D perm on a 2-D value) has an
    /// unknown shape, not a panic.
    #[test]
    fn a_perm_of_another_rank_leaves_the_shape_unknown() {
        let mut g = one_node("", "Transpose");
        g.nodes[0].attrs.push(crate::Attr::ints("perm", &[0, 2, 1]));
        let y = infer_types(&g, &OnnxOnly).remove("y").expect("the dtype is known");
        assert_eq!((y.dtype, y.shape), (DType::F16, None));
        g.nodes[0].attrs = vec![crate::Attr::ints("perm", &[1, 0])];
        assert_eq!(infer_types(&g, &OnnxOnly)["y"].shape, Some(vec![Dim::Fixed(8), Dim::sym("b")]));
    }
}
