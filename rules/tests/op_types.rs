//! Type inference for the contrib ops (`rules::op_types`): the declarations give the shapes,
//! the ONNX Runtime schemas the dtypes, and `ir` alone knows none of them.

use ir::{Attr, DType, Dim, Graph, Node, OnnxOnly, ValueInfo};

fn b() -> Dim {
    Dim::sym("batch")
}
fn s() -> Dim {
    Dim::sym("seq")
}

/// A graph whose inputs are `inputs` (an empty dtype list entry is an absent operand) and
/// whose one node is `domain.op(inputs) -> outputs`.
fn graph(domain: &str, op: &str, inputs: &[(&str, DType, Vec<Dim>)], outputs: &[&str], attrs: Vec<Attr>) -> Graph {
    let names: Vec<&str> = inputs.iter().map(|i| i.0).collect();
    let mut node = Node::new("n", op, &names, outputs);
    node.domain = domain.into();
    node.attrs = attrs;
    Graph {
        inputs: inputs.iter().filter(|i| !i.0.is_empty()).map(|(n, d, s)| ValueInfo::new(*n, *d, s.clone())).collect(),
        nodes: vec![node],
        ..Graph::default()
    }
}

fn inferred(g: &Graph, name: &str) -> Option<(DType, Option<Vec<Dim>>)> {
    ir::infer_types(g, rules::op_types()).remove(name).map(|v| (v.dtype, v.shape))
}

fn gqa(query_width: i64, key: bool) -> Graph {
    let mut inputs = vec![("q", DType::F16, vec![b(), s(), Dim::Fixed(query_width)])];
    if key {
        inputs.push(("k", DType::F16, vec![b(), s(), Dim::Fixed(32)]));
        inputs.push(("v", DType::F16, vec![b(), s(), Dim::Fixed(32)]));
    } else {
        inputs.push(("", DType::F16, vec![]));
        inputs.push(("", DType::F16, vec![]));
    }
    inputs.push(("past_k", DType::F16, vec![b(), Dim::Fixed(2), Dim::sym("past"), Dim::Fixed(16)]));
    inputs.push(("past_v", DType::F16, vec![b(), Dim::Fixed(2), Dim::sym("past"), Dim::Fixed(16)]));
    inputs.push(("seqlens_k", DType::I32, vec![b()]));
    inputs.push(("total", DType::I32, vec![]));
    graph("com.microsoft", "GroupQueryAttention", &inputs, &["y", "present_k", "present_v"], vec![Attr::int("num_heads", 4), Attr::int("kv_num_heads", 2)])
}

#[test]
fn packed_gqa_output_is_num_heads_times_head_size() {
    // Packed QKV: query [B, S, (4 + 2 * 2) * 16]; output [B, S, 4 * 16], not the query's shape.
    assert_eq!(inferred(&gqa(128, false), "y"), Some((DType::F16, Some(vec![b(), s(), Dim::Fixed(64)]))));
    // Separate Q, K, V: the query's shape.
    assert_eq!(inferred(&gqa(64, true), "y"), Some((DType::F16, Some(vec![b(), s(), Dim::Fixed(64)]))));
    // A packed width the heads do not divide is not guessed.
    assert_eq!(inferred(&gqa(100, false), "y"), Some((DType::F16, None)));
    // The present cache depends on the runtime total length: the graph declares it.
    assert_eq!(inferred(&gqa(128, false), "present_k"), None);
}

#[test]
fn matmul_nbits_output_is_a_with_n_columns() {
    let g = graph(
        "com.microsoft",
        "MatMulNBits",
        &[
            ("a", DType::F16, vec![b(), s(), Dim::Fixed(64)]),
            ("w", DType::U8, vec![Dim::Fixed(96), Dim::Fixed(2), Dim::Fixed(16)]),
            ("scales", DType::F16, vec![Dim::Fixed(96), Dim::Fixed(2)]),
        ],
        &["y"],
        vec![Attr::int("K", 64), Attr::int("N", 96), Attr::int("bits", 4), Attr::int("block_size", 32)],
    );
    assert_eq!(inferred(&g, "y"), Some((DType::F16, Some(vec![b(), s(), Dim::Fixed(96)]))));
}

#[test]
fn gather_block_quantized_unpacks_the_last_dim_and_takes_the_scales_dtype() {
    let g = |bits: i64| {
        graph(
            "com.microsoft",
            "GatherBlockQuantized",
            &[
                ("data", DType::U8, vec![Dim::Fixed(1000), Dim::Fixed(32)]),
                ("ids", DType::I64, vec![b(), s()]),
                ("scales", DType::BF16, vec![Dim::Fixed(1000), Dim::Fixed(2)]),
            ],
            &["y"],
            vec![Attr::int("bits", bits), Attr::int("block_size", 32), Attr::int("gather_axis", 0), Attr::int("quantize_axis", 1)],
        )
    };
    // uint8 data holds 8 / bits values per byte along its last dim.
    assert_eq!(inferred(&g(4), "y"), Some((DType::BF16, Some(vec![b(), s(), Dim::Fixed(64)]))));
    assert_eq!(inferred(&g(8), "y"), Some((DType::BF16, Some(vec![b(), s(), Dim::Fixed(32)]))));
}

#[test]
fn skip_norms_give_the_output_and_the_sum_the_input_type() {
    let x = vec![b(), s(), Dim::Fixed(64)];
    let g = graph(
        "com.microsoft",
        "SkipSimplifiedLayerNormalization",
        &[("x", DType::BF16, x.clone()), ("skip", DType::BF16, x.clone()), ("gamma", DType::BF16, vec![Dim::Fixed(64)])],
        &["y", "mean", "inv", "sum"],
        vec![Attr::float("epsilon", 1e-6)],
    );
    let types = ir::infer_types(&g, rules::op_types());
    assert_eq!(types.get("y").map(|v| (v.dtype, v.shape.clone())), Some((DType::BF16, Some(x.clone()))));
    assert_eq!(types.get("sum").map(|v| (v.dtype, v.shape.clone())), Some((DType::BF16, Some(x))));
    assert!(!types.contains_key("mean") && !types.contains_key("inv"), "mean and inv_std_var are not inferred");
}

/// Every declared op: `ir` alone infers nothing for it, the declarations do, and its dtypes
/// have a schema to come from.
#[test]
fn every_declared_op_is_inferred_by_its_declaration_not_by_ir() {
    let schemas = ep_sets::OpSchemas::builtin().unwrap();
    for d in rules::op_types::DECLARATIONS {
        assert!(schemas.get(d.domain, d.op).is_some(), "{}.{} has no schema in ep-sets/schemas.toml (run ep-sets/tools/gen_schemas.py)", d.domain, d.op);
        let x = ("x", DType::F32, vec![b(), s(), Dim::Fixed(64)]);
        let g = graph(d.domain, d.op, &[x.clone(), x.clone(), x], &["y"], vec![Attr::int("N", 8), Attr::int("num_heads", 4), Attr::int("kv_num_heads", 2)]);
        assert!(!ir::infer_types(&g, &OnnxOnly).contains_key("y"), "ir infers {}.{} on its own", d.domain, d.op);
        assert!(inferred(&g, "y").is_some(), "{}.{} is declared but not inferred", d.domain, d.op);
    }
}

/// Every operator a rule emits outside the default domain is declared, so the graphs the rules
/// write stay typed for the rules and the validation after them.
#[test]
fn every_contrib_op_a_rule_emits_is_declared() {
    let mut emitted = 0;
    for r in rules::registry() {
        for &(domain, op, _) in r.info.emits {
            if !ep_sets::Domain::is_onnx(domain) {
                emitted += 1;
                assert!(rules::op_types().declaration(domain, op).is_some(), "rule `{}` emits {domain}.{op}, which rules::op_types does not declare", r.info.id);
            }
        }
    }
    assert!(emitted > 10, "the rules emit contrib ops");
}
