//! Per-EP builds: the optimized graph of every decoder fixture for every (EP, dtype) the tables
//! list meets the hand-written op expectations in tests/expectations/ops.toml; a broken check
//! fails the build with that check's message; cpu f32 packages match transformers on ONNX
//! Runtime's CPU EP.

use builder::pipeline::optimize;
use ep_sets::EpSets;
use ir::Model;
use std::collections::BTreeMap;
use tailor_tests::*;

fn generic(fixture_name: &str, dtype: ir::DType) -> Model {
    let ckpt = models::Checkpoint::open(&fixture(fixture_name)).unwrap();
    models::tasks::causal_lm::build(&ckpt, &models::BuildOptions { dtype, ..Default::default() }).unwrap()
}

fn optimized(fixture_name: &str, ep: &str, dtype: &str) -> Result<Model, builder::Error> {
    optimized_q(fixture_name, ep, dtype, None)
}

/// `quant`: `Some("int4")` builds with `--quant int4` and the table's defaults.
fn optimized_q(fixture_name: &str, ep: &str, dtype: &str, quant: Option<&str>) -> Result<Model, builder::Error> {
    let req = quant.map(|q| builder::QuantRequest::new(ep_sets::QuantBits::parse(q).expect("int4 or int8")));
    builder::optimized_model_with(&fixture(fixture_name), ep, ir::DType::parse(dtype).unwrap(), false, req.as_ref()).map(|(m, _)| m)
}

/// Evaluates "N", "kL", "kL+N", "kL-N" for `layers`.
fn count(expr: &str, layers: i64) -> i64 {
    let e = expr.replace(' ', "");
    let (l_part, rest) = match e.find('L') {
        Some(i) => (Some(&e[..i]), &e[i + 1..]),
        None => (None, e.as_str()),
    };
    let k = l_part.map(|k| if k.is_empty() { 1 } else { k.parse::<i64>().expect("multiplier") }).unwrap_or(0);
    let n = if rest.is_empty() { 0 } else { rest.parse::<i64>().expect("constant") };
    k * layers + n
}

fn satisfied(expr: &str, found: i64, layers: i64) -> bool {
    if let Some(e) = expr.strip_prefix(">=") {
        found >= count(e, layers)
    } else if let Some(e) = expr.strip_prefix("<=") {
        found <= count(e, layers)
    } else {
        found == count(expr, layers)
    }
}

/// One `[[expect]]` entry: the fixtures its selector picks, its EPs, dtypes, op-count
/// expressions and the quantizations it is about (`quant = ["int4"]`; none: float builds).
type Expect = (Vec<String>, Vec<String>, Vec<String>, BTreeMap<String, String>, Vec<String>);

struct Expectations {
    expects: Vec<Expect>,
    pending: BTreeMap<String, String>,
}

fn expectations() -> Expectations {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("expectations/ops.toml");
    let v: toml::Value = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let strings = |v: &toml::Value| -> Vec<String> {
        v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
    };
    let expects = v["expect"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let ops = e["ops"].as_table().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())).collect();
            let selector = e["fixtures"].as_str().expect("each [[expect]] has a `fixtures` selector");
            let picked = fixtures().select(selector).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            let names = picked.into_iter().map(|f| f.name.clone()).collect();
            let quant = e.get("quant").map(strings).unwrap_or_default();
            (names, strings(&e["eps"]), strings(&e["dtypes"]), ops, quant)
        })
        .collect();
    let pending = v["pending"].as_table().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())).collect();
    Expectations { expects, pending }
}

fn op_counts(model: &Model) -> BTreeMap<String, i64> {
    let mut counts = BTreeMap::new();
    for n in &model.graph.nodes {
        *counts.entry(format!("{}:{}", n.domain, n.op)).or_default() += 1;
    }
    counts
}

fn is_pending(ex: &Expectations, ep: &str, dtype: &str, fixture_name: &str) -> bool {
    ex.pending.contains_key(&format!("{ep}/{dtype} {fixture_name}")) || ex.pending.contains_key(&format!("{ep}/{dtype} *"))
}

/// Problems of one build against every expectation that applies to it; `None` when no
/// expectation applies.
fn check_build(ex: &Expectations, ep: &str, dtype: &str, fx: &str, quant: Option<&str>) -> Option<Vec<String>> {
    let applicable: Vec<&BTreeMap<String, String>> = ex
        .expects
        .iter()
        .filter(|(fixtures, eps, dtypes, _, q)| {
            let quant_ok = match quant {
                None => q.is_empty(),
                Some(b) => q.iter().any(|x| x == b),
            };
            quant_ok && fixtures.iter().any(|f| f == fx) && eps.iter().any(|e| e == ep) && dtypes.iter().any(|d| d == dtype)
        })
        .map(|(_, _, _, ops, _)| ops)
        .collect();
    let cell = match quant {
        Some(q) => format!("{ep}/{dtype}/{q}"),
        None => format!("{ep}/{dtype}"),
    };
    let model = match optimized_q(fx, ep, dtype, quant) {
        Ok(m) => m,
        Err(e) => return Some(vec![format!("{cell} {fx}: build failed: {e}")]),
    };
    if applicable.is_empty() {
        return None;
    }
    // L from config.json: decoders and encoders alike (an encoder has no past inputs to count).
    let layers = models::Checkpoint::open(&fixture(fx)).expect("fixture opens").config.num_hidden_layers as i64;
    let counts = op_counts(&model);
    let mut problems = Vec::new();
    for ops in applicable {
        for (op, expr) in ops {
            let found = counts.get(op).copied().unwrap_or(0);
            if !satisfied(expr, found, layers) {
                problems.push(format!("{cell} {fx}: {op} expected {expr} (L={layers}), found {found}"));
            }
        }
    }
    Some(problems)
}

/// One float (EP, dtype, fixture) cell: it meets its expectation, or it is listed as pending and
/// still fails (a pending cell that works now, with or without an expectation, is a failure).
fn check_float_cell(ex: &Expectations, ep: &str, dtype: &str, fx: &str, failures: &mut Vec<String>, checked: &mut usize) {
    match (check_build(ex, ep, dtype, fx, None), is_pending(ex, ep, dtype, fx)) {
        (None, false) => failures.push(format!("{ep}/{dtype} {fx}: no expectation in tests/expectations/ops.toml")),
        (Some(problems), false) => {
            *checked += 1;
            failures.extend(problems);
        }
        (Some(problems), true) if problems.is_empty() => failures.push(format!(
            "{ep}/{dtype} {fx}: listed as pending but builds and meets its expectations now; remove it from [pending]"
        )),
        (None, true) => {
            // A pending build that builds but has no expectation: fine only while it fails.
            if optimized(fx, ep, dtype).is_ok() {
                failures.push(format!("{ep}/{dtype} {fx}: pending, builds now, and has no expectation; write one"));
            }
        }
        (Some(_), true) => {}
    }
}

#[test]
fn optimized_graphs_meet_the_op_expectations() {
    let ex = expectations();
    let sets = EpSets::builtin().unwrap();
    let mut failures = Vec::new();
    let mut checked = 0;
    for (ep, dtype) in sets.pairs() {
        for fx in decoder_fixtures() {
            check_float_cell(&ex, ep, dtype.name(), fx, &mut failures, &mut checked);
        }
    }
    // Quantized builds: every [quant.*] section of every table, in its activation dtype.
    for table in sets.names().filter_map(|n| sets.get(n)) {
        for q in table.quant_plans() {
            for fx in decoder_fixtures() {
                // A pending quantized cell is keyed `ep/dtype/quant fixture` and must still fail.
                let pending = ex.pending.contains_key(&format!("{}/{}/{} {fx}", table.name, q.dtype, q.bits));
                match (check_build(&ex, &table.name, q.dtype.name(), fx, Some(q.bits.name())), pending) {
                    (None, false) => failures.push(format!("{}/{}/{} {fx}: no expectation in tests/expectations/ops.toml", table.name, q.dtype, q.bits)),
                    (Some(problems), false) => {
                        checked += 1;
                        failures.extend(problems);
                    }
                    (Some(problems), true) if problems.is_empty() => failures.push(format!(
                        "{}/{}/{} {fx}: listed as pending but builds and meets its expectations now; remove it from [pending]",
                        table.name, q.dtype, q.bits
                    )),
                    (None, true) => failures.push(format!("{}/{}/{} {fx}: pending, and no expectation applies; write one", table.name, q.dtype, q.bits)),
                    (Some(_), true) => {}
                }
            }
        }
    }
    // Encoders: every (EP, dtype) with an encoder plan, built as feature-extraction (the
    // default task of a checkpoint without sentence-transformers files).
    for (ep, dtype) in sets.role_pairs(ep_sets::Role::Encoder) {
        for fx in encoder_fixtures() {
            check_float_cell(&ex, ep, dtype.name(), fx, &mut failures, &mut checked);
        }
    }
    assert!(checked >= 40, "only {checked} builds were checked against expectations");
    assert!(failures.is_empty(), "{} problems:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn a_failed_check_fails_the_cpu_build_with_its_message() {
    let sets = EpSets::builtin().unwrap();
    let (table, plan) = sets.plan("cpu", ir::DType::F32).unwrap();
    let mut model = generic("tiny-llama", ir::DType::F32);
    // Produce the cos cache with a Mul that makes it 3-D ([1, max_positions, half]), which
    // GroupQueryAttention cannot take as its cos_cache.
    let one = ("cos_scale".to_string(), ir::Recipe::from_f32("one", vec![1, 1, 1], &[1.0]));
    model.graph.initializers.push(one);
    let cos = "rotary_emb.cos_cache";
    let mul = ir::Node {
        name: "cos_from_mul".into(),
        op: "Mul".into(),
        domain: String::new(),
        opset: ir::OPSET,
        inputs: vec![cos.into(), "cos_scale".into()],
        outputs: vec!["cos_from_mul/out".into()],
        attrs: vec![],
        metadata: Default::default(),
    };
    for n in model.graph.nodes.iter_mut().filter(|n| n.op == "RotaryEmbedding") {
        n.inputs[1] = "cos_from_mul/out".into();
    }
    model.graph.nodes.insert(0, mul);
    let err = optimize(&mut model, table, plan, false, None).expect_err("the cpu build must fail");
    let text = err.to_string();
    assert!(text.contains("fuse.gqa_rotary"), "{text}");
    assert!(text.contains("caches_2d"), "{text}");
    assert!(text.contains("(from ai.onnx.Mul); GroupQueryAttention takes them as one [max_positions, rotary_dim/2] pair"), "{text}");
}

fn build_package(name: &str, ep: &str, dir: &std::path::Path) -> (DecoderShape, ort::session::Session) {
    let pkg = dir.join(ep);
    let req = builder::BuildRequest { ep: ep.into(), ..builder::BuildRequest::new(fixture(name), &pkg) };
    builder::build(&req, &mut |_| {}).unwrap_or_else(|e| panic!("{name}: {ep} build failed: {e}"));
    let model = ir::load_model(&pkg.join("model.onnx")).unwrap();
    if ep == "cpu" {
        assert!(model.graph.nodes.iter().any(|n| n.op == "GroupQueryAttention"), "{name}: no GQA in the cpu build");
    }
    (DecoderShape::of(&model), session(&pkg.join("model.onnx")))
}

/// The cpu f32 package (GroupQueryAttention) against transformers on every reference case,
/// the left-padded batch included; then three decode steps after two padded prefills against
/// the `default` package of the same checkpoint (which matches transformers there), on every
/// row: the reference's left-padded batch, and a short one (widths 4, then 5, 6, 7) that
/// crosses LongRoPE's `original_max_position_embeddings` of tiny-phi3-longrope (4) while
/// decoding, where keys cached with the short tables meet queries rotated with the long ones.
fn check_cpu_parity(name: &str) {
    let out = tempfile::tempdir().unwrap();
    let (shape, mut cpu) = build_package(name, "cpu", out.path());
    let reference = Reference::load(&fixture(name));
    let diffs = compare_decoder(&mut cpu, &shape, &reference, Cases::ALL);
    assert!(diffs.iter().any(|(case, _)| case == "batch_logits"), "the left-padded batch is compared");
    assert_within(&format!("{name} cpu f32"), &diffs, 1e-4);

    let (default_shape, mut portable) = build_package(name, "default", out.path());
    let next = vec![vec![7, 11], vec![8, 12], vec![9, 13]];
    let short_ids = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[2, 4]), vec![0, 0, 5, 9, 3, 4, 8, 2]).unwrap();
    let short_mask = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[2, 4]), vec![0, 0, 1, 1, 0, 1, 1, 1]).unwrap();
    for (case, ids, mask) in [
        ("left-padded batch", reference.get("batch_input_ids").i64(), reference.get("batch_attention_mask").i64()),
        ("short left-padded batch", &short_ids, &short_mask),
    ] {
        let got = decode_after_prefill(&mut cpu, &shape, ids, mask, &next);
        let want = decode_after_prefill(&mut portable, &default_shape, ids, mask, &next);
        // The prefill's last position is valid in every row (left padding).
        let diffs: Vec<(String, f32)> =
            got.iter().zip(&want).enumerate().map(|(t, (g, w))| (format!("{case} step {t}"), max_abs_diff(g, w, None))).collect();
        assert_eq!(diffs.len(), 4, "prefill and three decode steps");
        assert_within(&format!("{name} cpu f32 vs default, {case}"), &diffs, 1e-4);
    }
}

macro_rules! cpu_parity {
    ($($test:ident => $fixture:literal),* $(,)?) => {
        $(#[test] fn $test() { super::check_cpu_parity($fixture); })*
    };
}

/// One test per decoder of the fixture registry, named `cpu_parity::<fixture>`.
mod cpu_parity {
    tailor_tests::for_each_decoder!(cpu_parity);
}

#[test]
fn concrete_dims_reach_the_task_as_a_named_flag() {
    let sets = EpSets::builtin().unwrap();
    for (ep, fixed) in [("webgpu", true), ("cpu", false)] {
        let plan = sets.plan(ep, ir::DType::F32).unwrap().1;
        let options = builder::build_options(plan, ir::DType::F32);
        let ckpt = models::Checkpoint::open(&fixture("tiny-llama")).unwrap();
        let model = models::tasks::causal_lm::build(&ckpt, &options).unwrap();
        let batch = &model.graph.inputs[0].shape.as_ref().unwrap()[0];
        if fixed {
            assert_eq!(batch, &ir::Dim::Fixed(plan.limits["batch"]), "{ep}: batch fixed by the table's limits");
        } else {
            assert_eq!(batch, &ir::Dim::sym("batch_size"), "{ep}: batch stays symbolic");
        }
    }
}

/// Host-placed nodes are listed, never silent: a webgpu build reports its int64 boundary nodes
/// (the table's `host = true` entries) and nothing heavier; a cpu build reports none.
#[test]
fn host_placed_nodes_are_listed_in_the_report() {
    for fx in ["tiny-llama", "tiny-phi3-longrope", "tiny-gpt2"] {
        let (_, report) = builder::optimized_model(&fixture(fx), "webgpu", ir::DType::F32, false).unwrap();
        assert!(!report.host_nodes.is_empty(), "{fx}: webgpu packages have int64 boundary nodes");
        for entry in &report.host_nodes {
            let op = entry.split(" x").next().unwrap();
            assert!(["Cast", "Shape", "Squeeze"].contains(&op), "{fx}: unexpected host node {entry}");
        }
        let (_, report) = builder::optimized_model(&fixture(fx), "cpu", ir::DType::F32, false).unwrap();
        assert_eq!(report.host_nodes, Vec::<String>::new(), "{fx}: the cpu table has no host entries");
    }
}

/// The validation loophole: a required fusion's candidate that fails a pattern line (an
/// attribute restriction, an operator) used to count as "not an instance", so a cpu build of a
/// partial-rotary checkpoint kept its RotaryEmbedding nodes with no error. Now every node of the
/// rule's root op is a candidate: tiny-phi3-partial (head 16, rotary 8: caches of 4 columns,
/// which ORT's CPU kernel cannot rotate) fails the cpu build quoting `partial_rotary_cpu` when
/// the table does not list it, and builds unfused only because the table says why.
#[test]
fn a_required_fusion_cannot_miss_without_the_tables_why() {
    let sets = EpSets::builtin().unwrap();
    let (table, plan) = sets.plan("cpu", ir::DType::F32).unwrap();
    assert!(plan.not_applicable("fuse.gqa_rotary", "partial_rotary_cpu").is_some(), "the cpu table says why");
    let mut strict = plan.clone();
    for checks in strict.not_applicable.values_mut() {
        checks.retain(|n| n.check != "partial_rotary_cpu");
    }
    let mut model = generic("tiny-phi3-partial", ir::DType::F32);
    let err = optimize(&mut model, table, &strict, false, None).expect_err("the cpu build must fail");
    let text = err.to_string();
    assert!(text.contains("required fusion `fuse.gqa_rotary` missed node `model.layers.0.self_attn/Attention`"), "{text}");
    assert!(text.contains("check `partial_rotary_cpu` failed") && text.contains("multiple of 8 columns"), "{text}");
    // With the table's entry, RoPE stays a node and GroupQueryAttention takes the attention.
    let model = optimized("tiny-phi3-partial", "cpu", "f32").unwrap();
    let ops = op_counts(&model);
    assert_eq!((ops.get(":RotaryEmbedding"), ops.get("com.microsoft:GroupQueryAttention")), (Some(&4), Some(&2)), "{ops:?}");
    // A pattern line counts too: without the entry for GPT-2's missing RoPE, its build fails.
    let mut strict = plan.clone();
    for checks in strict.not_applicable.values_mut() {
        checks.retain(|n| n.check != "match.q_rot");
    }
    let mut model = generic("tiny-gpt2", ir::DType::F32);
    let text = optimize(&mut model, table, &strict, false, None).expect_err("gpt2 without the entry").to_string();
    assert!(text.contains("pattern line `match.q_rot` failed"), "{text}");
}

/// A partial rotary the CPU kernel takes (Phi-4-mini's shape: head 64, partial_rotary_factor
/// 0.75, so 48 rotated dimensions and caches of 24 columns) is fused: GroupQueryAttention
/// rotates the first 48 dimensions itself, no RotaryEmbedding node is left, and the cpu build
/// computes what the generic graph computes. The checkpoint is tiny-phi3-partial's config with
/// those two keys and new weights of the shapes they imply.
#[test]
fn a_partial_rotary_the_cpu_kernel_takes_is_fused() {
    let dir = tempfile::tempdir().unwrap();
    let mut seed = 0x2545f491u32;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        (seed as f32 / u32::MAX as f32 - 0.5) * 0.2
    };
    tailor_tests::checkpoints::rewrite_checkpoint(&fixture("tiny-phi3-partial"), dir.path(), |tensors| {
        tensors
            .into_iter()
            .map(|(n, d, shape, data)| {
                // 4 heads and 2 kv heads of 64: qkv [4*64 + 2*2*64, 64], o_proj [64, 4*64].
                let shape = if n.ends_with("qkv_proj.weight") {
                    vec![512, 64]
                } else if n.ends_with("o_proj.weight") {
                    vec![64, 256]
                } else {
                    shape
                };
                let count: usize = shape.iter().product();
                let values: Vec<u8> = if n.contains("norm") {
                    data
                } else {
                    (0..count).flat_map(|_| next().to_le_bytes()).collect()
                };
                (n, d, shape, values)
            })
            .collect()
    });
    let path = dir.path().join("config.json");
    let mut config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["head_dim"] = 64.into();
    config["partial_rotary_factor"] = 0.75.into();
    config["rope_parameters"]["partial_rotary_factor"] = 0.75.into();
    std::fs::write(&path, config.to_string()).unwrap();

    let ckpt = models::Checkpoint::open(dir.path()).unwrap();
    let generic = models::tasks::causal_lm::build(&ckpt, &models::BuildOptions::default()).unwrap();
    let (cpu, _) = builder::optimized_model(dir.path(), "cpu", ir::DType::F32, false).unwrap();
    let ops = op_counts(&cpu);
    assert_eq!(ops.get(":RotaryEmbedding"), None, "no standalone RotaryEmbedding: {ops:?}");
    assert_eq!(ops.get("com.microsoft:RotaryEmbedding"), None, "{ops:?}");
    let gqa: Vec<_> = cpu.graph.nodes.iter().filter(|n| n.op == "GroupQueryAttention").collect();
    assert_eq!(gqa.len(), 2);
    assert!(gqa.iter().all(|n| n.attrs.iter().any(|a| a.name == "do_rotary" && a.value == ir::AttrValue::Int(1))));

    let r = Reference::load(&fixture("tiny-phi3-partial"));
    let shape = DecoderShape::of(&generic);
    let feeds = decoder_feeds(&shape, r.get("input_ids").i64(), r.get("attention_mask").i64(), r.get("position_ids").i64(), None);
    let (_g, mut gs) = session_for(&generic);
    let (_c, mut cs) = session_for(&cpu);
    let (want, got) = (run(&mut gs, &feeds), run(&mut cs, &feeds));
    for name in ["logits", "present.0.key", "present.1.key"] {
        let diff = max_abs_diff(want[name].f32(), got[name].f32(), None);
        assert!(diff < 1e-4, "{name}: the fused partial rotary differs from the generic graph by {diff}");
    }
}

/// A table whose GroupQueryAttention cannot take the attention bias lists
/// `lower.gqa_right_padding`; its builds say that left padding is unsupported there, in the
/// build report's warnings and its JSON file. A cpu build (any padding) says nothing of it.
#[test]
fn builds_without_left_padding_warn() {
    let out = tempfile::tempdir().unwrap();
    for (ep, dtype, warned) in [("dml", ir::DType::F16, true), ("webgpu", ir::DType::F16, true), ("trt-rtx", ir::DType::F16, true), ("cpu", ir::DType::F32, false)] {
        let pkg = out.path().join(ep);
        let req = builder::BuildRequest { ep: ep.into(), dtype, ..builder::BuildRequest::new(fixture("tiny-llama"), &pkg) };
        let report = builder::build(&req, &mut |_| {}).unwrap_or_else(|e| panic!("{ep}: {e}"));
        let warning = report.warnings.iter().find(|w| w.starts_with("left padding is unsupported"));
        assert_eq!(warning.is_some(), warned, "{ep}: {:?}", report.warnings);
        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(pkg.join("build_report.json")).unwrap()).unwrap();
        let in_json = json["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().starts_with("left padding is unsupported"));
        assert_eq!(in_json, warned, "{ep}: build_report.json {:?}", json["warnings"]);
        if let Some(w) = warning {
            assert!(w.contains(&format!("{ep}.toml lists `lower.gqa_right_padding`")), "{w}");
        }
    }
}

/// cpu f32 replaces every sparse layer's expert block with one com.microsoft MoE (fuse.moe):
/// as many MoE nodes as the generic graph has routers (a Softmax per sparse layer, which the
/// config's sparse-layer keys decide), none of the dense block's routing left, `k` and the
/// renormalization as the config says, fc1 the interleaved gate/up stack `[E, 2 x inter,
/// hidden]` and fc2 the down stack, no fc3. The numbers: cpu_parity::<fixture> (transformers,
/// unpadded and both paddings) and tests/tests/rule_set_parity.rs.
#[test]
fn cpu_fuses_every_sparse_layer_into_one_moe_node() {
    every_sparse_layer_is_one_moe_node("cpu", "f32");
}

/// cuda f16 does the same through fuse.moe.f16 / fuse.moe.unnormalized.f16 (the f16 block
/// routes in f32): the f32 routing Casts go with the block and router_probs is the router
/// MatMul's f16 output, flattened. Structural only: ORT's CPU EP has no f16 MoE kernel and no
/// GPU is here, so no numbers back this package.
#[test]
fn cuda_f16_fuses_every_sparse_layer_into_one_moe_node() {
    every_sparse_layer_is_one_moe_node("cuda", "f16");
}

fn every_sparse_layer_is_one_moe_node(ep: &str, dtype: &str) {
    // The softmax top-k mixtures: `moe`, and OLMoE's (a trait of its own for its op counts).
    let picked: Vec<_> = fixtures().select("moe").unwrap().into_iter().chain(fixtures().select("olmoe").unwrap()).collect();
    assert!(picked.len() >= 4, "tiny-mixtral, tiny-qwen3-moe, tiny-qwen2-moe, tiny-olmoe");
    for fx in picked {
        let name = fx.name.as_str();
        let routers = generic(name, ir::DType::F32).graph.nodes.iter().filter(|n| n.op == "Softmax").count();
        assert!(routers > 0, "{name}: the generic graph has a router per sparse layer");
        let built = optimized(name, ep, dtype).unwrap_or_else(|e| panic!("{name} {ep} {dtype}: {e}"));
        let moe: Vec<&ir::Node> = built.graph.nodes.iter().filter(|n| n.op == "MoE" && n.domain == "com.microsoft").collect();
        assert_eq!(moe.len(), routers, "{name} {ep} {dtype}: one MoE per sparse layer");
        // (A sliding window's mask compares positions with a Greater of its own.)
        assert!(!built.graph.nodes.iter().any(|n| (n.op == "Softmax" || n.op == "Greater") && !n.name.starts_with("attn_mask")), "{name}: routing left in the graph");
        assert!(!built.graph.nodes.iter().any(|n| n.name.contains("/routing_f32/")), "{name}: a routing_f32 Cast is left");
        // The config as the build reads it: a family's nested keys (DBRX's `ffn_config`) already
        // read as the generic ones.
        let path = fixture(name).join("config.json");
        let config = serde_json::Value::Object(models::DecoderConfig::parse(&path, &std::fs::read_to_string(&path).unwrap()).unwrap().raw);
        // HunYuan MoE spells the top-k `moe_topk`, a list of one value per layer as published.
        let one = |v: &serde_json::Value| v.as_i64().or_else(|| v.as_array().and_then(|a| a.first()).and_then(|v| v.as_i64()));
        let top_k = config.get("num_experts_per_tok").or(config.get("moe_topk")).and_then(one).unwrap();
        // Mixtral and HunYuan MoE renormalize the top-k probabilities always; GraniteMoE's (and GraniteMoeShared's, GraniteMoeHybrid's)
        // softmax over the chosen logits is the same weights; Qwen as `norm_topk_prob` says.
        let normalize = ["mixtral", "granitemoe", "granitemoeshared", "granitemoehybrid", "hunyuan_v1_moe"].contains(&config["model_type"].as_str().unwrap_or("")) || config["norm_topk_prob"].as_bool().unwrap_or(false);
        let experts = config.get("num_local_experts").or(config.get("num_experts")).or(config.get("moe_num_experts")).and_then(|v| v.as_u64()).unwrap() as usize;
        // HunYuan MoE's experts are `intermediate_size` wide (its per-layer
        // `moe_intermediate_size` list is not read by transformers).
        let inter = config.get("moe_intermediate_size").and_then(|v| v.as_u64()).or(config.get("intermediate_size").and_then(|v| v.as_u64())).unwrap() as usize;
        let hidden = config["hidden_size"].as_u64().unwrap() as usize;
        let float = ir::DType::parse(dtype).unwrap();
        for node in moe {
            assert_eq!(node.attr_int("k"), Some(top_k), "{name}: {}", node.name);
            assert_eq!(node.attr_int("normalize_routing_weights"), Some(i64::from(normalize)), "{name}: {}", node.name);
            assert_eq!(node.attr_int("swiglu_fusion"), Some(1), "{name}: {}", node.name);
            assert!(matches!(node.attr("activation_type"), Some(ir::AttrValue::String(s)) if s == "swiglu"), "{name}: {}", node.name);
            assert_eq!(node.inputs.len(), 5, "{name}: input, router_probs, fc1, no fc1 bias, fc2; no fc3");
            // router_probs: Flatten of the router MatMul's output, in the build dtype.
            let flatten = built.graph.nodes.iter().find(|n| n.outputs.contains(&node.inputs[1])).expect("router_probs has a producer");
            assert_eq!(flatten.op, "Flatten", "{name}: router_probs is {}", flatten.name);
            let router = built.graph.nodes.iter().find(|n| n.outputs.contains(&flatten.inputs[0])).expect("the logits have a producer");
            assert_eq!(router.op, "MatMul", "{name}: the logits come from {}", router.name);
            let fc1 = built.graph.initializer(&node.inputs[2]).unwrap_or_else(|| panic!("{name}: fc1 is not an initializer"));
            assert_eq!(fc1.shape(), vec![experts, 2 * inter, hidden], "{name}: {}", node.inputs[2]);
            assert!(matches!(fc1, ir::Recipe::Interleave { axis: 1, .. }), "{name}: fc1 is {}", fc1.describe());
            assert_eq!(fc1.dtype(), float, "{name}: fc1 dtype");
            assert!(node.inputs[3].is_empty());
            let fc2 = built.graph.initializer(&node.inputs[4]).unwrap_or_else(|| panic!("{name}: fc2 is not an initializer"));
            assert_eq!(fc2.shape(), vec![experts, hidden, inter], "{name}: {}", node.inputs[4]);
            assert_eq!(fc2.dtype(), float, "{name}: fc2 dtype");
        }
    }
}

/// DeepSeek's grouped routing (`grouped_routing`: DeepSeek-V2/V3, GLM-4.5, GLM-4.7-Flash,
/// Mistral 4, ERNIE 4.5 MoE, MiniMax-M2's ungrouped sigmoid) fuses into one MoE per sparse layer on cpu f32 (fuse.moe.grouped)
/// and cuda f16 (its f16 variant): router_probs is the logarithm of the graph's top-k scores,
/// flattened, the node renormalizes them, the output is multiplied by their sum times the
/// family's factor, and the dense experts (the batched MatMuls over 3-D stacks) are gone; the
/// routing itself (scores, groups, rank counts) stays. cpu numbers: `cpu_parity::<fixture>`.
#[test]
fn grouped_routing_fuses_every_sparse_layer_into_one_moe_node() {
    let picked = fixtures().select("grouped_routing").unwrap();
    assert!(picked.len() >= 7, "DeepSeek-V2, V3, V3-lite, GLM-4.5, GLM-4.7-Flash, Mistral 4, ERNIE 4.5 MoE");
    for (ep, dtype) in [("cpu", "f32"), ("cuda", "f16")] {
        for fx in &picked {
            let name = fx.name.as_str();
            let generic = generic(name, ir::DType::F32);
            let sparse = generic.graph.nodes.iter().filter(|n| n.name.ends_with("/top_k_weights")).count();
            assert!(sparse > 0, "{name}: the generic graph has top-k scores per sparse layer");
            let built = optimized(name, ep, dtype).unwrap_or_else(|e| panic!("{name} {ep} {dtype}: {e}"));
            let g = &built.graph;
            let moe: Vec<&ir::Node> = g.nodes.iter().filter(|n| n.op == "MoE" && n.domain == "com.microsoft").collect();
            assert_eq!(moe.len(), sparse, "{name} {ep} {dtype}: one MoE per sparse layer");
            let producer = |v: &str| g.nodes.iter().find(|n| n.outputs.iter().any(|o| o == v));
            let dense = g.nodes.iter().filter(|n| n.op == "MatMul").filter_map(|n| n.input(1)).filter_map(producer).filter(|t| t.op == "Transpose" && t.input(0).is_some_and(|w| w.contains("experts") && g.initializer(w).is_some_and(|r| r.shape().len() == 3)));
            assert_eq!(dense.count(), 0, "{name} {ep} {dtype}: no dense expert MatMul is left");
            // The config as the build reads it: a family's nested keys (DBRX's `ffn_config`) already
        // read as the generic ones.
        let path = fixture(name).join("config.json");
        let config = serde_json::Value::Object(models::DecoderConfig::parse(&path, &std::fs::read_to_string(&path).unwrap()).unwrap().raw);
            let config = config.get("text_config").unwrap_or(&config);
            // ERNIE 4.5 spells it `moe_k`.
            let top_k = config.get("num_experts_per_tok").or(config.get("moe_k")).and_then(|v| v.as_i64()).unwrap();
            for node in moe {
                assert_eq!(node.attr_int("k"), Some(top_k), "{name}: {}", node.name);
                assert_eq!(node.attr_int("normalize_routing_weights"), Some(1), "{name}: {}", node.name);
                // router_probs: [Cast to f16 of] Flatten(Log(top-k scores)).
                let mut probs = producer(&node.inputs[1]).expect("router_probs has a producer");
                if dtype == "f16" {
                    assert_eq!((probs.op.as_str(), probs.attr_int("to")), ("Cast", Some(10)), "{name}: {}", probs.name);
                    probs = producer(&probs.inputs[0]).unwrap();
                }
                assert_eq!(probs.op, "Flatten", "{name}: router_probs is {}", probs.name);
                let log = producer(&probs.inputs[0]).unwrap();
                assert_eq!(log.op, "Log", "{name}: {}", log.name);
                let scores = producer(&log.inputs[0]).unwrap();
                assert!(scores.op == "Where" && scores.name.ends_with("/top_k_weights"), "{name}: Log reads {}", scores.name);
                // The output is scaled by the routed mass: one Mul reads the node.
                let readers: Vec<&ir::Node> = g.nodes.iter().filter(|n| n.inputs.contains(&node.outputs[0])).collect();
                assert_eq!(readers.len(), 1, "{name}: {}", node.name);
                assert_eq!(readers[0].op, "Mul", "{name}: {} reads the MoE output", readers[0].name);
            }
            if ep == "cpu" {
                // Quantized: each MoE becomes QMoE where its sizes divide the block (32), else
                // keeps float stacks (the build says why).
                let q = optimized_q(name, ep, dtype, Some("int4")).unwrap_or_else(|e| panic!("{name} int4: {e}"));
                let count = |op: &str| q.graph.nodes.iter().filter(|n| n.op == op && n.domain == "com.microsoft").count();
                // MiniMax-M2's experts are `intermediate_size` wide (it has no dense MLP).
                let inter = config.get("moe_intermediate_size").or(config.get("intermediate_size")).and_then(|v| v.as_u64()).unwrap();
                let hidden = config["hidden_size"].as_u64().unwrap();
                let fits = inter.is_multiple_of(32) && hidden.is_multiple_of(32);
                assert_eq!((count("QMoE"), count("MoE")), if fits { (sparse, 0) } else { (0, sparse) }, "{name} cpu int4 (hidden {hidden}, experts' inter {inter})");
            }
        }
    }
}

/// The table is the whole schedule: the build report lists the stages in the order the table's
/// `[ep] stages` gives, the quantize step's stage included, and moving `quantize` in a copy of
/// the cpu table moves it in the report (rules/tests/schedule.rs shows the step runs there).
#[test]
fn the_quantize_stage_runs_where_the_table_lists_it() {
    use ep_sets::Stage::*;
    let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ep-sets/tables/cpu.toml")).unwrap();
    let listed = r#"stages = ["cleanup", "prefuse", "fuse", "lower", "quantize", "fold"]"#;
    assert!(text.contains(listed), "cpu.toml lists its stages");
    let moved = text.replace(listed, r#"stages = ["cleanup", "prefuse", "quantize", "fuse", "lower", "fold"]"#);
    for (text, want) in [(&text, [Cleanup, Prefuse, Fuse, Lower, Quantize, Fold]), (&moved, [Cleanup, Prefuse, Quantize, Fuse, Lower, Fold])] {
        let table = ep_sets::parse("cpu.toml", text).unwrap();
        let plan = table.dtype(ir::DType::F32).unwrap();
        assert_eq!(plan.order, want);
        let mut model = generic("tiny-llama", ir::DType::F32);
        let report = optimize(&mut model, &table, plan, false, None).unwrap();
        assert_eq!(report.stages, want);
        let json = serde_json::to_value(&report).unwrap();
        let names: Vec<&str> = json["stages"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
        assert_eq!(names, want.map(|s| s.name()));
    }
    // Every stage once: a table that drops one is refused.
    let dropped = text.replace(listed, r#"stages = ["cleanup", "prefuse", "fuse", "lower", "fold"]"#);
    let problems = ep_sets::parse("cpu.toml", &dropped).unwrap().validate();
    assert!(problems.iter().any(|p| format!("{p:?}").contains("does not list `quantize`")), "{problems:?}");
}

/// A build that fails validation names the nodes a rule the table excludes would have taken,
/// with the table's why: an ALiBi model on dml (whose GroupQueryAttention never reads the
/// bias) and on webgpu (no kernels for the mask's int64 nodes) says why fuse.gqa_alibi is left
/// out, not only which fusion or kernel is missing.
#[test]
fn a_failed_build_names_the_exclusion_that_would_have_fused_it() {
    let e = optimized("tiny-bloom", "dml", "f16").unwrap_err().to_string();
    assert!(e.contains("`transformer.h.0.self_attention/Attention` is what `fuse.gqa_alibi` fuses, which dml.toml excludes") && e.contains("never reads"), "{e}");
    let e = optimized("tiny-mpt", "webgpu", "f32").unwrap_err().to_string();
    assert!(e.contains("is what `fuse.gqa_alibi` fuses, which webgpu.toml excludes"), "{e}");
    // A build that passes carries no such line (the exclusion is only an explanation).
    assert!(optimized("tiny-bloom", "cpu", "f32").is_ok());
}
