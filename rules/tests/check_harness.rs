//! The check harness: every (rule, step) pair in the compiled registry has a graph on which
//! every earlier step passes and exactly that step fails, and the rendered message is
//! snapshotted. Named checks get a hand-made breaker each; pattern lines other than the root
//! are broken by changing the operator of the node they matched. A pair without a breaker
//! fails the harness, so a new check cannot ship untested.

mod cases;
mod common;
use common::*;
use ir::{Dim, Recipe, ValueInfo};

type Breaker = fn(&mut ir::Model);

const ATTN0: &str = "model.layers.0.self_attn/Attention";

fn node_mut<'a>(m: &'a mut ir::Model, name: &str) -> &'a mut ir::Node {
    m.graph.nodes.iter_mut().find(|n| n.name == name).unwrap_or_else(|| panic!("no node {name}"))
}

fn set_type(m: &mut ir::Model, value: &str, dtype: ir::DType, shape: &[Dim]) {
    m.graph.value_info.retain(|v| v.name != value);
    m.graph.value_info.push(ValueInfo::new(value, dtype, shape.to_vec()));
}

fn bs(last: &[i64]) -> Vec<Dim> {
    let mut v = vec![Dim::sym("batch_size"), Dim::sym("sequence_length")];
    v.extend(last.iter().map(|&d| Dim::Fixed(d)));
    v
}

/// Puts `Identity` between `value` and the readers `readers` (by node name prefix match).
fn insert_identity(m: &mut ir::Model, value: &str, readers: &dyn Fn(&ir::Node) -> bool) {
    let copy = format!("{value}/copy");
    for n in m.graph.nodes.iter_mut().filter(|n| readers(n)) {
        for i in n.inputs.iter_mut().filter(|i| *i == value) {
            *i = copy.clone();
        }
    }
    m.graph.nodes.insert(
        0,
        ir::Node {
            name: format!("{value}/Identity"),
            op: "Identity".into(),
            domain: String::new(),
            opset: ir::OPSET,
            inputs: vec![value.into()],
            outputs: vec![copy],
            attrs: vec![],
            metadata: Default::default(),
        },
    );
}

/// Sets `rotary_embedding_dim` on layer 0's q and k rotations.
fn set_rotary_dim(m: &mut ir::Model, dim: i64) {
    for side in ["q", "k"] {
        node_mut(m, &format!("model.layers.0.self_attn.{side}_rotary/RotaryEmbedding")).set_attr(ir::Attr::int("rotary_embedding_dim", dim));
    }
}

/// The sliding window's width constant in tiny-mistral-sw's generic graph.
const WIDTH: &str = "attn_mask_window3/window";

fn set_init(m: &mut ir::Model, name: &str, r: Recipe) {
    let slot = m.graph.initializers.iter_mut().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no initializer {name}"));
    slot.1 = r;
}

/// The generic graph each rule is written for.
fn base(rule: &rules::RuleDef) -> ir::Model {
    if rule.info.id.ends_with(".window") {
        let ckpt = models::Checkpoint::open(&fixture("tiny-mistral-sw")).unwrap();
        models::tasks::causal_lm::build(&ckpt, &models::BuildOptions::default()).unwrap()
    } else {
        tiny_llama()
    }
}

fn set_past_head(m: &mut ir::Model, head: i64) {
    let v = m.graph.inputs.iter_mut().find(|v| v.name == "past_key_values.0.key").unwrap();
    v.shape.as_mut().unwrap()[3] = Dim::Fixed(head);
}

fn breaker(rule: &str, step: &str) -> Option<Breaker> {
    let b: Breaker = match (rule, step) {
        ("fuse.skip_rms_norm", "match.out") => |m| node_mut(m, "model.layers.0.post_attention_layernorm/RMSNormalization").set_attr(ir::Attr::int("axis", 0)),
        ("fuse.skip_rms_norm", "same_shape") => |m| set_type(m, "model.layers.0.self_attn.o_proj/MatMul/out", ir::DType::F32, &bs(&[1])),
        ("fuse.skip_rms_norm", "gamma_1d") => |m| {
            let g = m.graph.initializers.iter_mut().find(|(n, _)| n == "model.layers.0.post_attention_layernorm.weight").unwrap();
            g.1 = Recipe::from_f32("2-D gamma", vec![1, 64], &[1.0; 64]);
        },
        ("fuse.skip_rms_norm", "float_type") => |m| {
            set_type(m, "model.embed_tokens/Gather/out", ir::DType::F64, &bs(&[64]));
            set_type(m, "model.layers.0.self_attn.o_proj/MatMul/out", ir::DType::F64, &bs(&[64]));
        },
        ("fuse.gqa_rotary.window" | "fuse.gqa.window", "let.window") => |m| set_init(m, WIDTH, Recipe::from_i64("two widths", vec![2], &[3, 3])),
        ("fuse.gqa_rotary.window" | "fuse.gqa.window", "window_positive") => |m| set_init(m, WIDTH, Recipe::from_i64("zero width", vec![], &[0])),
        // The graph as it is: the harness declares limits.gqa_window = 0 for this step.
        ("fuse.gqa_rotary.window" | "fuse.gqa.window", "window_in_kernel") => |_| {},
        ("fuse.gqa_rotary" | "fuse.gqa" | "fuse.gqa_rotary.window" | "fuse.gqa.window", "match.out") => |m| node_mut(m, ATTN0).set_attr(ir::Attr::int("is_causal", 1)),
        // Gemma 2's score cap, which webgpu's table (the harness's limits) says its kernel ignores.
        ("fuse.gqa_rotary" | "fuse.gqa" | "fuse.gqa_rotary.window" | "fuse.gqa.window", "softcap_in_kernel") => |m| node_mut(m, ATTN0).set_attr(ir::Attr::float("softcap", 50.0)),
        ("fuse.gqa_rotary" | "fuse.gqa" | "fuse.gqa_rotary.window" | "fuse.gqa.window", "mask_from_input") => |m| insert_identity(m, "attention_mask", &|n| n.op == "Cast"),
        ("fuse.gqa_rotary" | "fuse.gqa" | "fuse.gqa_rotary.window" | "fuse.gqa.window", "past_from_inputs") => |m| insert_identity(m, "past_key_values.0.key", &|n| n.op == "Attention"),
        ("fuse.gqa_rotary" | "fuse.gqa" | "fuse.gqa_rotary.window" | "fuse.gqa.window", "q_3d") => |m| {
            set_type(m, "model.layers.0.self_attn.q_proj/MatMul/out", ir::DType::F32, &bs(&[4, 16]));
            set_type(m, "model.layers.0.self_attn.q_rotary/RotaryEmbedding/out", ir::DType::F32, &bs(&[4, 16]));
        },
        ("fuse.gqa_rotary" | "fuse.gqa" | "fuse.gqa_rotary.window" | "fuse.gqa.window", "heads_divide") => |m| {
            node_mut(m, ATTN0).set_attr(ir::Attr::int("q_num_heads", 3));
            node_mut(m, "model.layers.0.self_attn.q_rotary/RotaryEmbedding").set_attr(ir::Attr::int("num_heads", 3));
        },
        ("fuse.gqa_rotary" | "fuse.gqa" | "fuse.gqa_rotary.window" | "fuse.gqa.window", "cache_bnsh") => |m| {
            node_mut(m, ATTN0).set_attr(ir::Attr::int("kv_num_heads", 1));
            node_mut(m, "model.layers.0.self_attn.k_rotary/RotaryEmbedding").set_attr(ir::Attr::int("num_heads", 1));
        },
        ("fuse.gqa_rotary" | "fuse.gqa_rotary.window", "head_size_cpu") => |m| set_past_head(m, 8),
        // The caches computed by a node (LongRoPE's Where), not initializers.
        ("fuse.gqa_rotary" | "fuse.gqa_rotary.window", "length_free_caches") => |m| {
            insert_identity(m, "rotary_emb.cos_cache", &|n| n.op == "RotaryEmbedding")
        },
        ("fuse.gqa" | "fuse.gqa.window", "head_size_cpu") => |m| set_past_head(m, 12),
        // A 3-D cos cache (ONNX RotaryEmbedding's per-batch [batch, seq, rotary_dim/2] form).
        ("fuse.gqa_rotary" | "fuse.gqa_rotary.window", "caches_2d") => |m| set_init(m, "rotary_emb.cos_cache", Recipe::from_f32("3-D cache", vec![1, 256, 8], &[0.0; 2048])),
        ("fuse.gqa_rotary" | "fuse.gqa_rotary.window", "full_rotary") => |m| {
            for (name, init) in m.graph.initializers.iter_mut() {
                if name == "rotary_emb.cos_cache" || name == "rotary_emb.sin_cache" {
                    *init = Recipe::from_f32("narrow cache", vec![256, 4], &[0.0; 1024]);
                }
            }
        },
        // Half of each head rotated (rotary_embedding_dim 8 of 16) with the full-width caches.
        ("fuse.gqa_rotary" | "fuse.gqa_rotary.window", "partial_rotary_cache") => |m| set_rotary_dim(m, 8),
        // Half of each head rotated from 4-column caches: CPU GroupQueryAttention needs 8.
        ("fuse.gqa_rotary" | "fuse.gqa_rotary.window", "partial_rotary_cpu") => |m| {
            set_rotary_dim(m, 8);
            for (name, init) in m.graph.initializers.iter_mut() {
                if name == "rotary_emb.cos_cache" || name == "rotary_emb.sin_cache" {
                    *init = Recipe::from_f32("narrow cache", vec![256, 4], &[0.0; 1024]);
                }
            }
        },
        _ => return None,
    };
    Some(b)
}

/// The candidate a breaker targets: layer 0's node of the rule's root op.
fn target(rule: &rules::RuleDef) -> &'static str {
    match rule.info.root_op {
        "RMSNormalization" => "model.layers.0.post_attention_layernorm/RMSNormalization",
        _ => ATTN0,
    }
}

/// The EP limits the harness applies rules with (webgpu's decoder limits), except when it breaks a check
/// that reads them: those checks (`BOUND_CHECKS`) are broken by running without limits.
const BOUND_CHECKS: &[&str] = &["context_fits", "dims_fit", "count_exact_in_f32"];

fn limits(step: &str) -> std::collections::BTreeMap<String, i64> {
    if BOUND_CHECKS.contains(&step) {
        return Default::default();
    }
    let mut limits: std::collections::BTreeMap<String, i64> = [("batch".to_string(), 1), ("max_context".to_string(), 4096), ("gqa_softcap".to_string(), 0)].into_iter().collect();
    // A kernel limit webgpu does not have (dml's): broken by declaring it.
    if step == "window_in_kernel" {
        limits.insert("gqa_window".to_string(), 0);
    }
    limits
}

fn failing_record(m: &mut ir::Model, rule: &rules::RuleDef, node: &str, step: &str) -> rules::Record {
    let opts = rules::Options { explain: true, variants: false, limits: limits(step), ..Default::default() };
    let report = rules::apply(m, &[rule.info.id], &opts).unwrap();
    report
        .records
        .iter()
        .find(|r| r.node == node && r.rule == rule.info.id)
        .cloned()
        .unwrap_or_else(|| panic!("{}: no record for {node}\n{}", rule.info.id, report.text()))
}

#[test]
fn every_rule_step_fails_alone_with_its_message() {
    let mut missing = Vec::new();
    let mut covered = 0;
    // `HARNESS_RULES=fuse.pack_qkv,lower.` restricts a local run to rules with those id
    // prefixes (unset: every rule, as CI runs it).
    let only: Option<Vec<String>> = std::env::var("HARNESS_RULES").ok().map(|v| v.split(',').map(str::to_string).collect());
    for rule in rules::registry().iter().filter(|r| only.as_ref().is_none_or(|o| o.iter().any(|p| r.info.id.starts_with(p.as_str())))) {
        // Rules with their own starting graph (cases/mod.rs), else tiny-llama.
        let case = cases::case(rule.info.id);
        let node = case.as_ref().map_or_else(|| target(rule), |c| c.target);
        for (depth, step) in rule.info.steps.iter().enumerate() {
            let mut m = case.as_ref().map_or_else(|| base(rule), |c| (c.graph)());
            let is_root_line = depth == 0;
            let b = match &case {
                Some(c) => (c.breaker)(step.id),
                None => breaker(rule.info.id, step.id),
            };
            match b {
                Some(b) => b(&mut m),
                None if step.kind == rules::StepKind::Pattern && !is_root_line => {
                    // Change the operator of the node this line matched on the unbroken graph.
                    let cx = rules::rt::Cx::new(&m.graph).with_limits(&limits(step.id));
                    let root = m.graph.nodes.iter().position(|n| n.name == node).unwrap();
                    let binds = (rule.matcher)(&cx, root).unwrap_or_else(|f| panic!("{} does not match {node}: {f:?}", rule.info.id));
                    let victim = binds.nodes[depth];
                    drop(cx);
                    m.graph.nodes[victim].op = "Identity".into();
                }
                None => {
                    missing.push(format!("{} / {}", rule.info.id, step.id));
                    continue;
                }
            }
            let rec = failing_record(&mut m, rule, node, step.id);
            assert_eq!(rec.outcome, rules::Outcome::Failed, "{} / {}: {rec:?}", rule.info.id, step.id);
            assert_eq!(rec.check.as_deref(), Some(step.id), "{} / {}: wrong step failed: {rec:?}", rule.info.id, step.id);
            assert_eq!(rec.depth, depth, "{} / {}: every earlier step must pass", rule.info.id, step.id);
            assert_eq!(rec.location, step.location());
            assert_eq!(rec.fragment.as_deref(), step.fragment);
            insta::assert_snapshot!(format!("{}__{}", rule.info.id, step.id), rec.message.clone().unwrap());
            covered += 1;
        }
    }
    assert!(missing.is_empty(), "(rule, step) pairs without a breaking graph: {missing:#?}");
    assert!(covered >= 20 || only.is_some(), "only {covered} pairs checked");
}

/// For a rule that fires nowhere, the report names the candidate that got furthest.
#[test]
fn furthest_attempt_is_reported() {
    let mut m = tiny_llama();
    // Layer 0 fails late (head_size_cpu), layer 1 early (its q is not rotated).
    set_past_head(&mut m, 8);
    node_mut(&mut m, "model.layers.1.self_attn.q_rotary/RotaryEmbedding").op = "Identity".into();
    let report = rules::apply(&mut m, &["fuse.gqa_rotary"], &rules::Options::default()).unwrap();
    let r = report.rule("fuse.gqa_rotary").unwrap();
    assert_eq!((r.candidates, r.fired), (2, 0), "{}", report.text());
    let best = r.furthest.as_ref().expect("furthest attempt");
    assert_eq!(best.node, ATTN0);
    assert_eq!(best.check.as_deref(), Some("head_size_cpu"));
    assert_eq!(r.failed["match.q_rot"].count, 1);
    insta::assert_snapshot!("furthest_text", report.text());
}
