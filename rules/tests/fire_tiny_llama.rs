//! Each rule fires on the foundation's real tiny-llama generic graph, creates what it should
//! (tagged with `rule=<id>`), and the diagnostics count candidates and failures.

mod common;
use common::*;

fn apply(model: &mut ir::Model, ids: &[&str]) -> rules::Report {
    rules::apply(model, ids, &rules::Options { explain: true, ..Default::default() }).expect("rules apply")
}

fn tagged(model: &ir::Model, op: &str, rule: &str) -> usize {
    model.graph.nodes.iter().filter(|n| n.op == op && n.metadata.get("rule").map(String::as_str) == Some(rule)).count()
}

#[test]
fn skip_rms_norm_fires_on_every_residual_norm() {
    let mut m = tiny_llama();
    let report = apply(&mut m, &["fuse.skip_rms_norm"]);
    let r = report.rule("fuse.skip_rms_norm").unwrap();
    // 5 RMSNormalization nodes: 2 layers x 2 + the final norm; the first reads the embedding.
    assert_eq!((r.candidates, r.fired), (5, 4), "{}", report.text());
    assert_eq!(r.failed["match.sum"].count, 1, "{}", report.text());
    assert_eq!(tagged(&m, "SkipSimplifiedLayerNormalization", "fuse.skip_rms_norm"), 4);
    assert_eq!(count(&m, "RMSNormalization"), 1);
    assert_eq!(count(&m, "Add"), 0, "every residual Add is absorbed, its sum read from output 3");
    m.graph.clone().toposort().unwrap();
}

#[test]
fn gqa_rotary_fires_on_every_attention() {
    let mut m = tiny_llama();
    let report = apply(&mut m, &["fuse.gqa_rotary", "fuse.gqa"]);
    assert_eq!(report.fired("fuse.gqa_rotary"), 2, "{}", report.text());
    assert_eq!(report.rule("fuse.gqa").map(|r| r.candidates), Some(0), "{}", report.text());
    assert_eq!(tagged(&m, "GroupQueryAttention", "fuse.gqa_rotary"), 2);
    assert_eq!(count(&m, "RotaryEmbedding"), 0);
    assert_eq!(count(&m, "Attention"), 0);
    let gqa = m.graph.nodes.iter().find(|n| n.op == "GroupQueryAttention").unwrap();
    assert_eq!(gqa.domain, "com.microsoft");
    assert_eq!(gqa.attr_int("do_rotary"), Some(1));
    assert_eq!(gqa.inputs[7], "rotary_emb.cos_cache");
    // No position_ids: the kernel rotates at the slot of the padded row (seqlens_k is every
    // row's width), the attention bias in slot 10 masks the pad keys.
    assert_eq!(gqa.inputs.len(), 11);
    assert_eq!(gqa.inputs[9], "");
    let bias = m.graph.nodes.iter().find(|n| n.outputs.contains(&gqa.inputs[10])).expect("the bias has a producer");
    assert_eq!((bias.op.as_str(), bias.inputs[0].as_str()), ("Where", "attn_mask/out"), "the bias is the generic mask's");
    // seqlens_k / total_sequence_length and the bias are built once for both layers; no row sum
    // (every row is the padded width).
    assert_eq!(count(&m, "ReduceSum"), 0);
    assert_eq!(count(&m, "Where"), 1);
    let seqlens: Vec<&str> = m.graph.nodes.iter().filter(|n| n.op == "GroupQueryAttention").map(|n| n.inputs[5].as_str()).collect();
    assert!(seqlens.windows(2).all(|w| w[0] == w[1]), "{seqlens:?}");
    assert!(m.graph.nodes.iter().any(|n| n.outputs.iter().any(|o| o == "present.1.value")));
}

#[test]
fn gqa_fires_with_rope_left_in_place() {
    let mut m = tiny_llama();
    let report = apply(&mut m, &["fuse.gqa"]);
    assert_eq!(report.fired("fuse.gqa"), 2, "{}", report.text());
    assert_eq!(count(&m, "RotaryEmbedding"), 4);
    let gqa = m.graph.nodes.iter().find(|n| n.op == "GroupQueryAttention").unwrap();
    assert_eq!(gqa.attr_int("do_rotary"), None);
    // Slots 7-9 (cos, sin, position_ids) empty, the attention bias in slot 10.
    assert_eq!(gqa.inputs.len(), 11);
    assert!(gqa.inputs[7..10].iter().all(|i| i.is_empty()), "{:?}", gqa.inputs);
}

#[test]
fn report_text_and_json() {
    let mut m = tiny_llama();
    let report = apply(&mut m, &["fuse.skip_rms_norm", "fuse.gqa_rotary"]);
    let text = report.text();
    assert!(text.contains("fuse.skip_rms_norm  main_graph  candidates=5 fired=4  failed match.sum x1"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&report.json()).unwrap();
    assert_eq!(json["records"].as_array().unwrap().len(), 7);
}

/// Rules run inside subgraphs too: the residual norm of layer 0, moved into both branches of
/// an `If`, is fused there, reading the outer scope's values and types.
#[test]
fn rules_fire_inside_subgraphs() {
    let mut m = tiny_llama();
    let g = &mut m.graph;
    let take = |g: &mut ir::Graph, name: &str| {
        let i = g.nodes.iter().position(|n| n.name == name).unwrap();
        g.nodes.remove(i)
    };
    let add = take(g, "model.layers.0.attn_residual/Add");
    let norm = take(g, "model.layers.0.post_attention_layernorm/RMSNormalization");
    let sum = add.outputs[0].clone();
    let normed = norm.outputs[0].clone();
    let branch = |name: &str| ir::Graph {
        name: name.into(),
        nodes: vec![add.clone(), norm.clone()],
        outputs: vec![
            ir::ValueInfo { name: sum.clone(), dtype: ir::DType::F32, shape: None },
            ir::ValueInfo { name: normed.clone(), dtype: ir::DType::F32, shape: None },
        ],
        ..Default::default()
    };
    g.initializers.push(("cond".into(), ir::Recipe::data("cond", ir::DType::Bool, vec![], vec![1])));
    let at = g.nodes.iter().position(|n| n.name == "model.layers.0.mlp.gate_proj/MatMul").unwrap();
    g.nodes.insert(
        at,
        ir::Node {
            name: "branch".into(),
            op: "If".into(),
            domain: String::new(),
            opset: ir::OPSET,
            inputs: vec!["cond".into()],
            outputs: vec![sum.clone(), normed.clone()],
            attrs: vec![ir::Attr::graph("then_branch", branch("then")), ir::Attr::graph("else_branch", branch("else"))],
            metadata: Default::default(),
        },
    );
    g.toposort().unwrap();
    let report = apply(&mut m, &["fuse.skip_rms_norm"]);
    for branch in ["then", "else"] {
        let r = report.rules.iter().find(|r| r.graph == branch).unwrap_or_else(|| panic!("{}", report.text()));
        assert_eq!((r.candidates, r.fired), (1, 1), "{}", report.text());
    }
    let if_node = m.graph.nodes.iter().find(|n| n.op == "If").unwrap();
    for sub in if_node.subgraphs() {
        assert_eq!(sub.nodes.len(), 1, "{:?}", sub.nodes);
        assert_eq!(sub.nodes[0].op, "SkipSimplifiedLayerNormalization");
        assert_eq!(sub.nodes[0].outputs[0], normed, "branch outputs keep their names");
        assert_eq!(sub.nodes[0].outputs[3], sum);
    }
}
