//! Proves the `cpu` table's claims on ONNX Runtime's CPU EP instead of trusting them.
//!
//! For every shared decoder fixture the cpu f32 graph is optimized, run once whole (every
//! intermediate value made an output, so each node's real inputs are known), and then every
//! distinct node kind (domain, op, opset, type bindings, attributes, input shapes) is cut out
//! into a one-node model with its real shapes, attributes, constant inputs and input values,
//! and run alone on the CPU EP. Each must load, run, and reproduce the outputs it had inside
//! the whole graph; and each (op, type-constraint bindings) must be claimed by the table.
//! Claims no package exercises are proved by the examples in `ep-sets/examples/cpu.toml`.
//! A claim the runtime does not honour fails here, not in a user's session.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};

use ep_sets::{EpSets, OpSchemas};
use ir::{Dim, Graph, Model, Node, ValueInfo};
use ndarray::{ArrayD, Dimension, IxDyn};
use tailor_tests::*;

/// Builds that fail today, from tests/expectations/ops.toml [pending] (the ep_builds test keeps
/// that list honest); they have no package to extract nodes from.
fn pending_cpu() -> BTreeSet<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("expectations/ops.toml");
    let v: toml::Value = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["pending"]
        .as_table()
        .unwrap()
        .keys()
        .filter_map(|k| k.strip_prefix("cpu/f32 ").map(str::to_string))
        .collect()
}

fn optimized(fixture_name: &str) -> Result<Model, String> {
    builder::optimized_model(&fixture(fixture_name), "cpu", ir::DType::F32, false).map(|(m, _)| m).map_err(|e| e.to_string())
}

fn dtype_of(f: &Feed) -> ir::DType {
    match f {
        Feed::F32(_) => ir::DType::F32,
        Feed::I64(_) => ir::DType::I64,
        Feed::I32(_) => ir::DType::I32,
        Feed::Bool(_) => ir::DType::Bool,
    }
}

fn shape_of(f: &Feed) -> Vec<usize> {
    match f {
        Feed::F32(a) => a.shape().to_vec(),
        Feed::I64(a) => a.shape().to_vec(),
        Feed::I32(a) => a.shape().to_vec(),
        Feed::Bool(a) => a.shape().to_vec(),
    }
}

fn value_info(name: &str, f: &Feed) -> ValueInfo {
    ValueInfo::new(name, dtype_of(f), shape_of(f).iter().map(|&d| Dim::Fixed(d as i64)).collect())
}

/// Prefill of 3 tokens after a past of 2: every attention node sees a non-empty cache.
fn feeds(model: &Model) -> Vec<(String, Feed)> {
    let shape = DecoderShape::of(model);
    let (past, seq) = (2usize, 3usize);
    let ids = ArrayD::from_shape_vec(IxDyn(&[1, seq]), vec![1i64, 2, 3]).unwrap();
    let mask = ArrayD::from_elem(IxDyn(&[1, past + seq]), 1i64);
    let pos = ArrayD::from_shape_vec(IxDyn(&[1, seq]), (past as i64..(past + seq) as i64).collect()).unwrap();
    let mut cache = BTreeMap::new();
    for i in 0..shape.layers {
        for kv in ["key", "value"] {
            let a = ArrayD::from_shape_fn(IxDyn(&[1, shape.kv_heads, past, shape.head_dim]), |ix| {
                ((ix[1] + ix[2] * 3 + ix[3]) % 7) as f32 * 0.05 - 0.15
            });
            cache.insert(format!("present.{i}.{kv}"), Feed::F32(a));
        }
    }
    decoder_feeds(&shape, &ids, &mask, &pos, Some(&cache))
}

/// Runs the whole graph with every node output exposed; returns every value by name.
fn all_values(model: &Model, feeds: &[(String, Feed)]) -> BTreeMap<String, Feed> {
    let mut m = model.clone();
    let types = ir::infer_types(&m.graph, rules::op_types());
    let taken: BTreeSet<String> =
        m.graph.inputs.iter().chain(&m.graph.outputs).map(|v| v.name.clone()).collect();
    let extra: Vec<ValueInfo> = m
        .graph
        .nodes
        .iter()
        .flat_map(|n| n.outputs.iter())
        .filter(|o| !o.is_empty() && !taken.contains(*o))
        .filter_map(|o| types.get(o).map(|v| ValueInfo { name: o.clone(), dtype: v.dtype, shape: None }))
        .collect();
    m.graph.outputs.extend(extra);
    let (_dir, mut s) = session_for(&m);
    let mut values = run(&mut s, feeds);
    values.extend(feeds.iter().cloned());
    values
}

fn attrs_key(n: &Node) -> String {
    let m = Model { graph: Graph { nodes: vec![Node { name: String::new(), inputs: vec![], outputs: vec![], ..n.clone() }], ..Default::default() }, ..Default::default() };
    ir::canonical_text(&m, ir::TextOptions::default())
}

/// The node alone: constant inputs stay initializers, the others become graph inputs fed
/// with the values they had in the whole graph.
fn one_node(model: &Model, n: &Node, values: &BTreeMap<String, Feed>) -> Result<(Model, Vec<(String, Feed)>), String> {
    let mut g = Graph { name: format!("{}_alone", n.op), nodes: vec![n.clone()], ..Default::default() };
    let mut feeds = Vec::new();
    for i in n.inputs.iter().filter(|i| !i.is_empty()) {
        if g.inputs.iter().any(|v| &v.name == i) || g.initializers.iter().any(|(k, _)| k == i) {
            continue;
        }
        if let Some(r) = model.graph.initializer(i) {
            g.initializers.push((i.clone(), r.clone()));
        } else {
            let f = values.get(i).ok_or_else(|| format!("input `{i}` was not captured"))?;
            g.inputs.push(value_info(i, f));
            feeds.push((i.clone(), f.clone()));
        }
    }
    for o in n.outputs.iter().filter(|o| !o.is_empty()) {
        let f = values.get(o).ok_or_else(|| format!("output `{o}` was not captured"))?;
        g.outputs.push(value_info(o, f));
    }
    Ok((Model { graph: g, producer: "cpu_capability".into(), ..Default::default() }, feeds))
}

fn max_diff(a: &Feed, b: &Feed) -> Option<f32> {
    match (a, b) {
        (Feed::F32(x), Feed::F32(y)) if x.shape() == y.shape() => {
            Some(x.iter().zip(y).map(|(p, q)| (p - q).abs()).fold(0.0, f32::max))
        }
        (Feed::I64(x), Feed::I64(y)) if x == y => Some(0.0),
        (Feed::I32(x), Feed::I32(y)) if x == y => Some(0.0),
        (Feed::Bool(x), Feed::Bool(y)) if x == y => Some(0.0),
        _ => None,
    }
}

/// One node kind proved on ORT: what it is and what went wrong, if anything.
struct Outcome {
    what: String,
    problem: Option<String>,
}

fn prove(model: &Model, n: &Node, values: &BTreeMap<String, Feed>) -> Option<String> {
    let (m, feeds) = match one_node(model, n, values) {
        Ok(x) => x,
        Err(e) => return Some(e),
    };
    let got = catch_unwind(AssertUnwindSafe(|| {
        let (_dir, mut s) = session_for(&m);
        run(&mut s, &feeds)
    }));
    let got = match got {
        Ok(g) => g,
        Err(p) => {
            return Some(
                p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default(),
            )
        }
    };
    for o in n.outputs.iter().filter(|o| !o.is_empty()) {
        match (got.get(o), values.get(o)) {
            (Some(a), Some(b)) => match max_diff(a, b) {
                Some(d) if d <= 1e-4 => {}
                Some(d) => return Some(format!("output `{o}` differs from the whole graph's by {d}")),
                None => return Some(format!("output `{o}` has another type or shape alone: {:?} vs {:?}", shape_of(a), shape_of(b))),
            },
            _ => return Some(format!("output `{o}` missing")),
        }
    }
    None
}

#[test]
fn every_cpu_node_kind_runs_alone_on_ort_and_is_claimed() {
    let sets = EpSets::builtin().unwrap();
    let table = sets.get("cpu").unwrap();
    let schemas = OpSchemas::builtin().unwrap();
    let pending = pending_cpu();
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut built = 0;
    let decoders = decoder_fixtures();
    for f in &decoders {
        let model = match optimized(f) {
            Ok(m) => m,
            Err(e) => {
                assert!(pending.contains(*f), "cpu f32 build of {f} failed and is not pending: {e}");
                continue;
            }
        };
        assert!(!pending.contains(*f), "{f} builds for cpu f32 now: drop it from [pending] in tests/expectations/ops.toml");
        built += 1;
        let values = all_values(&model, &feeds(&model));
        for n in &model.graph.nodes {
            let dt = |name: &String| (!name.is_empty()).then(|| values.get(name).map(dtype_of)).flatten();
            let ins: Vec<Option<ir::DType>> = n.inputs.iter().map(|i| dt(i).or_else(|| model.graph.initializer(i).map(|r| r.dtype()))).collect();
            let outs: Vec<Option<ir::DType>> = n.outputs.iter().map(dt).collect();
            let bindings = schemas.bindings(&n.domain, &n.op, &ins, &outs).unwrap_or_default();
            let shapes: Vec<Vec<usize>> = n.inputs.iter().filter_map(|i| values.get(i).map(shape_of)).collect();
            let key = format!("{}|{}|{bindings:?}|{}|{shapes:?}", n.domain, n.op, attrs_key(n));
            if !seen.insert(key) {
                continue;
            }
            let bound: Vec<String> = bindings.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let what = format!("{f}: {}{}@{} [{}] (node `{}`)", if n.domain.is_empty() { "" } else { "com.microsoft." }, n.op, n.opset, bound.join(", "), n.name);
            let claim = table.claims(&n.domain, &n.op, n.opset, &bindings);
            let problem = if let ep_sets::Claim::No { reason } = claim {
                Some(format!("not claimed by cpu.toml: {reason}"))
            } else {
                prove(&model, n, &values)
            };
            outcomes.push(Outcome { what, problem });
        }
    }
    let failed: Vec<String> =
        outcomes.iter().filter_map(|o| o.problem.as_ref().map(|p| format!("{}\n    {p}", o.what))).collect();
    eprintln!("cpu capability: {} node kinds from {built} packages proved on ORT CPU, {} failed", outcomes.len(), failed.len());
    assert!(built >= decoders.len() - pending.len() && !outcomes.is_empty());
    assert!(failed.is_empty(), "{} node kind(s) of cpu packages fail:\n{}", failed.len(), failed.join("\n"));
}

/// A node ORT cannot run is reported, not passed: the harness can fail.
#[test]
fn an_unrunnable_node_is_reported() {
    let model = optimized("tiny-llama").unwrap();
    let values = all_values(&model, &feeds(&model));
    let mut n = model.graph.nodes.iter().find(|n| n.op == "MatMul").unwrap().clone();
    n.op = "NoSuchOp".into();
    assert!(prove(&model, &n, &values).is_some());
}

fn example_feed(dtype: &str, shape: &[usize], values: Option<&Vec<toml::Value>>) -> Feed {
    let n: usize = shape.iter().product();
    let ix = IxDyn(shape);
    let ints: Vec<i64> = match values {
        Some(v) => v.iter().map(|x| x.as_integer().unwrap_or(0)).collect(),
        None => (0..n as i64).map(|i| i % 3).collect(),
    };
    match dtype {
        "f32" => Feed::F32(match values {
            Some(v) => ArrayD::from_shape_vec(ix, v.iter().map(|x| x.as_float().unwrap_or(0.0) as f32).collect()).unwrap(),
            None => ArrayD::from_shape_fn(ix, |i| (i.as_array_view().iter().sum::<usize>() % 5) as f32 * 0.1 - 0.2),
        }),
        "i64" => Feed::I64(ArrayD::from_shape_vec(ix, ints).unwrap()),
        "i32" => Feed::I32(ArrayD::from_shape_vec(ix, ints.iter().map(|&x| x as i32).collect()).unwrap()),
        other => panic!("examples take f32, i64 and i32 inputs, not {other}"),
    }
}

/// The examples in ep-sets/examples/cpu.toml: each is claimed by the table and runs on ORT.
#[test]
fn cpu_examples_run_on_ort_and_are_claimed() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ep-sets/examples/cpu.toml");
    let v: toml::Value = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let sets = EpSets::builtin().unwrap();
    let table = sets.get("cpu").unwrap();
    let schemas = OpSchemas::builtin().unwrap();
    let mut failed = Vec::new();
    let examples = v["example"].as_array().unwrap();
    for ex in examples {
        let (domain, op) = ex["op"].as_str().unwrap().rsplit_once(':').unwrap();
        let opset = ex["opset"].as_integer().unwrap();
        let mut node = Node {
            name: format!("{op}_example"),
            op: op.into(),
            domain: domain.into(),
            opset,
            inputs: vec![],
            outputs: vec![],
            attrs: vec![],
            metadata: BTreeMap::new(),
        };
        for (k, a) in ex.get("attrs").and_then(|a| a.as_table()).into_iter().flatten() {
            node.attrs.push(match a {
                toml::Value::Integer(i) => ir::Attr::int(k, *i),
                toml::Value::Float(f) => ir::Attr::float(k, *f as f32),
                toml::Value::String(s) => ir::Attr::string(k, s),
                other => panic!("attribute {k}: unsupported {other}"),
            });
        }
        let mut g = Graph { name: format!("{op}_example"), ..Default::default() };
        let mut feeds = Vec::new();
        for (i, inp) in ex["inputs"].as_array().unwrap().iter().enumerate() {
            let shape: Vec<usize> = inp["shape"].as_array().unwrap().iter().map(|d| d.as_integer().unwrap() as usize).collect();
            let f = example_feed(inp["dtype"].as_str().unwrap(), &shape, inp.get("values").and_then(|x| x.as_array()));
            let name = format!("in{i}");
            g.inputs.push(value_info(&name, &f));
            node.inputs.push(name.clone());
            feeds.push((name, f));
        }
        let out_types: Vec<&str> = ex["outputs"].as_array().unwrap().iter().map(|o| o.as_str().unwrap()).collect();
        for (i, t) in out_types.iter().enumerate() {
            if t.is_empty() {
                node.outputs.push(String::new());
                continue;
            }
            let name = format!("out{i}");
            g.outputs.push(ValueInfo { name: name.clone(), dtype: ir::DType::parse(t).unwrap(), shape: None });
            node.outputs.push(name);
        }
        let ins: Vec<Option<ir::DType>> = feeds.iter().map(|(_, f)| Some(dtype_of(f))).collect();
        let outs: Vec<Option<ir::DType>> = out_types.iter().map(|t| (!t.is_empty()).then(|| ir::DType::parse(t).unwrap())).collect();
        let bindings = schemas.bindings(domain, op, &ins, &outs).unwrap_or_default();
        if let ep_sets::Claim::No { reason } = table.claims(domain, op, opset, &bindings) {
            failed.push(format!("{op}: not claimed: {reason}"));
            continue;
        }
        g.nodes.push(node);
        let m = Model { graph: g, producer: "cpu_capability".into(), ..Default::default() };
        let r = catch_unwind(AssertUnwindSafe(|| {
            let (_dir, mut s) = session_for(&m);
            run(&mut s, &feeds)
        }));
        match r {
            Ok(out) if out.len() == out_types.iter().filter(|t| !t.is_empty()).count() => {}
            Ok(out) => failed.push(format!("{op}: {} outputs", out.len())),
            Err(_) => failed.push(format!("{op}: ONNX Runtime cannot run it (see the panic above)")),
        }
    }
    assert!(!examples.is_empty());
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
