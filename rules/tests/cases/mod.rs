//! Check-harness cases for the rules that do not run on the plain tiny-llama generic graph
//! (or that need other rules applied first): per rule, the graph a breaker starts from, the
//! candidate node, and one breaker per step that needs a hand-made one. `check_harness.rs`
//! consults [`case`] before its own tiny-llama table.

#![allow(dead_code)]

pub mod synth;

use crate::common::*;
use ir::{Attr, Dim, Model, Node, Recipe, ValueInfo};

pub type Breaker = fn(&mut Model);

/// Where a rule's harness starts and how each of its steps is broken.
pub struct Case {
    pub graph: fn() -> Model,
    /// The candidate node every breaker targets.
    pub target: &'static str,
    pub breaker: fn(&str) -> Option<Breaker>,
}

pub const GQA0: &str = "model.layers.0.self_attn/Attention/GroupQueryAttention";
const X0: &str = "model.layers.0.input_layernorm/RMSNormalization/out";
const WK0: &str = "model.layers.0.self_attn.k_proj.weight";
const WV0: &str = "model.layers.0.self_attn.v_proj.weight";
const BK0: &str = "model.layers.0.self_attn.k_proj.bias";
const KPROJ0: &str = "model.layers.0.self_attn.k_proj/MatMul";

pub fn generic(fixture_name: &str) -> Model {
    let ckpt = models::Checkpoint::open(&fixture(fixture_name)).expect("fixture");
    models::tasks::causal_lm::build(&ckpt, &models::BuildOptions::default()).expect("generic graph builds")
}

/// The fixture's generic graph after the named rules.
pub fn after(fixture_name: &str, ids: &[&str]) -> Model {
    let mut m = generic(fixture_name);
    rules::apply(&mut m, ids, &rules::Options { remove_dead: true, ..Default::default() }).expect("rules apply");
    m
}

pub fn node_mut<'a>(m: &'a mut Model, name: &str) -> &'a mut Node {
    m.graph.nodes.iter_mut().find(|n| n.name == name).unwrap_or_else(|| panic!("no node {name}"))
}

pub fn set_type(m: &mut Model, value: &str, dtype: ir::DType, shape: &[Dim]) {
    m.graph.value_info.retain(|v| v.name != value);
    m.graph.value_info.push(ValueInfo::new(value, dtype, shape.to_vec()));
}

pub fn set_init(m: &mut Model, name: &str, recipe: Recipe) {
    let slot = m.graph.initializers.iter_mut().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no initializer {name}"));
    slot.1 = recipe;
}

/// A new node `op(inputs) -> output` placed first (toposort happens in the engine).
pub fn add_node(m: &mut Model, name: &str, op: &str, inputs: &[&str], output: &str) {
    m.graph.nodes.insert(
        0,
        Node {
            name: name.into(),
            op: op.into(),
            domain: String::new(),
            opset: ir::OPSET,
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: vec![output.into()],
            attrs: vec![],
            metadata: Default::default(),
        },
    );
}

/// Puts `Identity` between `value` and the node `reader`.
pub fn identity_before(m: &mut Model, value: &str, reader: &str) {
    let copy = format!("{value}/copy");
    for i in node_mut(m, reader).inputs.iter_mut().filter(|i| *i == value) {
        *i = copy.clone();
    }
    add_node(m, &format!("{value}/Identity"), "Identity", &[value], &copy);
}

/// Replaces initializer `name` (a `[K, N]` MatMul weight, K a multiple of 32) by a
/// pre-quantized one of its shape: a Q8_0 GGUF tensor (8-bit, block 32, zeros) read as
/// `[K, N]`, so its stored form differs from its float neighbours'.
pub fn set_packed(m: &mut Model, name: &str) {
    let shape = m.graph.initializer(name).unwrap_or_else(|| panic!("no initializer {name}")).shape();
    let (k, n) = (shape[0], shape[1]);
    let len = n * k / 32 * 34;
    // The mapping outlives the file, which is removed when `dir` drops.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q8_0.gguf");
    std::fs::write(&path, vec![0u8; len]).unwrap();
    let file = ir::MappedFile::open(&path).unwrap();
    let st = ir::SourceTensor { name: "blk.0.attn_v.weight".into(), file, dtype: ir::DType::U8, shape: vec![len], offset: 0, len };
    let w = ir::PackedWeight::ggml(name, st, ir::gguf::GgmlType::Q8_0, n, k, None).unwrap();
    set_init(m, name, Recipe::Packed(w).transpose(vec![1, 0]));
}

/// Breakers shared by the fuse.pack_qkv family (llama, qwen2 and qwen3 name their weights
/// alike).
fn pack_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, GQA0).inputs.truncate(7),
        "shared_input" => |m| identity_before(m, X0, KPROJ0),
        "weights_constant" => |m| identity_before(m, WK0, KPROJ0),
        "distinct_weights" => |m| node_mut(m, KPROJ0).inputs[1] = WV0.into(),
        "weight_single_use" => |m| add_node(m, "extra_reader", "Identity", &[WK0], "extra_reader/out"),
        "weights_stack" => |m| set_init(m, WV0, Recipe::from_f32("narrow v", vec![32, 32], &[0.0; 1024])),
        "same_stored_form" => |m| set_packed(m, WV0),
        _ => return None,
    };
    Some(b)
}

fn pack_bias_step(step: &str) -> Option<Breaker> {
    match step {
        "weight_single_use" => Some(|m| add_node(m, "extra_reader", "Identity", &[BK0], "extra_reader/out")),
        _ => pack_step(step),
    }
}

fn llama_gqa() -> Model {
    after("tiny-llama", &["fuse.gqa_rotary"])
}
/// tiny-llama's GroupQueryAttention in the right-padded form (webgpu's plan: seqlens_k the
/// row sum of attention_mask, which lower.int64_to_int32 narrows).
fn llama_right_padded() -> Model {
    after("tiny-llama", &["fuse.gqa_rotary", "lower.gqa_right_padding"])
}
fn qwen2_gqa() -> Model {
    after("tiny-qwen2", &["fuse.gqa_rotary"])
}
fn qwen3_gqa() -> Model {
    after("tiny-qwen3", &["fuse.gqa_rotary"])
}
fn llama() -> Model {
    generic("tiny-llama")
}
/// tiny-llama with LoRA slots on layer 0's q, k, v (docs/adapters.md), after fuse.gqa_rotary.
fn llama_lora_gqa() -> Model {
    let ckpt = models::Checkpoint::open(&fixture("tiny-llama")).expect("fixture");
    let lora = ["q_proj", "k_proj", "v_proj"].iter().map(|p| format!("model.layers.0.self_attn.{p}")).collect();
    let mut m = models::tasks::causal_lm::build(&ckpt, &models::BuildOptions { lora, ..Default::default() }).expect("generic graph builds");
    rules::apply(&mut m, &["fuse.gqa_rotary"], &rules::Options { remove_dead: true, ..Default::default() }).expect("rules apply");
    m
}

/// tiny-qwen2 (biased q/k/v) with LoRA slots on layer 0's q, k, v, after fuse.gqa_rotary.
fn qwen2_lora_gqa() -> Model {
    let ckpt = models::Checkpoint::open(&fixture("tiny-qwen2")).expect("fixture");
    let lora = ["q_proj", "k_proj", "v_proj"].iter().map(|p| format!("model.layers.0.self_attn.{p}")).collect();
    let mut m = models::tasks::causal_lm::build(&ckpt, &models::BuildOptions { lora, ..Default::default() }).expect("generic graph builds");
    rules::apply(&mut m, &["fuse.gqa_rotary"], &rules::Options { remove_dead: true, ..Default::default() }).expect("rules apply");
    m
}

/// fuse.pack_qkv.bias.lora on layer 0 of tiny-qwen2 with slots.
fn pack_bias_lora_step(step: &str) -> Option<Breaker> {
    match step {
        "slots_are_inputs" | "lora_reads_x" => pack_lora_step(step),
        _ => pack_bias_step(step),
    }
}

/// fuse.pack_qkv.lora on layer 0 of tiny-llama with slots.
fn pack_lora_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        // The base projections' checks: an Identity in front of the weight or the input, as for
        // fuse.pack_qkv (the base MatMuls keep their names).
        "slots_are_inputs" => |m| {
            let v = "model.layers.0.self_attn.v_proj.lora_B.weight";
            identity_before(m, v, "model.layers.0.self_attn.v_proj/lora/MatMul_B")
        },
        "lora_reads_x" => |m| identity_before(m, X0, "model.layers.0.self_attn.k_proj/lora/MatMul_A"),
        _ => return pack_step(step),
    };
    Some(b)
}

/// The attention_mask read through an Identity by the generic mask's Cast: the bias's mask no
/// longer comes from the graph input seqlens_k is recomputed from.
fn mask_through_identity(m: &mut Model) {
    let copy = "attention_mask/copy";
    for n in m.graph.nodes.iter_mut().filter(|n| n.op == "Cast" && n.name.starts_with("attn_mask")) {
        for i in n.inputs.iter_mut().filter(|i| *i == "attention_mask") {
            *i = copy.into();
        }
    }
    add_node(m, "attention_mask/Identity", "Identity", &["attention_mask"], copy);
}

/// The padding bias's kept value through an Identity: a computed value, as ALiBi's bias is.
fn keep_through_identity(m: &mut Model) {
    let (value, reader) = m
        .graph
        .nodes
        .iter()
        .find(|n| n.op == "Where" && n.inputs.get(1).is_some_and(|i| i.ends_with("/keep")))
        .map(|n| (n.inputs[1].clone(), n.name.clone()))
        .expect("the padding bias's Where");
    identity_before(m, &value, &reader);
}

fn right_padding_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "padding_only" => keep_through_identity,
        // position_ids given: not the any-padding form fuse.gqa_rotary emits.
        "match.out" => |m| node_mut(m, GQA0).inputs[9] = "position_ids".into(),
        "mask_from_input" => mask_through_identity,
        _ => return None,
    };
    Some(b)
}

/// tiny-gpt-oss after fuse.gqa_sink: GroupQueryAttention with the padding bias and head_sink.
fn gpt_oss_gqa() -> Model {
    after("tiny-gpt-oss", &["fuse.gqa_sink"])
}

const SINK_GQA1: &str = "model.layers.1.self_attn/sink_attention/GroupQueryAttention";

fn right_padding_sink_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "padding_only" => keep_through_identity,
        // position_ids given: not the any-padding form fuse.gqa_sink emits.
        "match.out" => |m| node_mut(m, SINK_GQA1).inputs[9] = "position_ids".into(),
        "mask_from_input" => mask_through_identity,
        _ => return None,
    };
    Some(b)
}

/// tiny-flint after fuse.gqa_sink: layer 0 (full, no RoPE) as GroupQueryAttention without
/// rotary, with the padding bias and head_sink.
fn flint_gqa() -> Model {
    after("tiny-flint", &["fuse.gqa_sink"])
}

const FLINT_SINK_GQA0: &str = "model.layers.0.self_attn/sink_attention/GroupQueryAttention";

fn right_padding_sink_no_rotary_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "padding_only" => keep_through_identity,
        // Rotating in the kernel: lower.gqa_right_padding.sink's form, not this one's.
        "match.out" => |m| node_mut(m, FLINT_SINK_GQA0).set_attr(Attr::int("do_rotary", 1)),
        "mask_from_input" => mask_through_identity,
        _ => return None,
    };
    Some(b)
}

fn right_padding_no_rotary_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "padding_only" => keep_through_identity,
        "match.out" => |m| node_mut(m, GPT2_GQA0).set_attr(Attr::int("do_rotary", 1)),
        "mask_from_input" => mask_through_identity,
        _ => return None,
    };
    Some(b)
}

fn separate_rope_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, GQA0).set_attr(Attr::int("do_rotary", 0)),
        "caches_2d" => |m| set_init(m, "rotary_emb.cos_cache", Recipe::from_f32("3-D cache", vec![1, 256, 8], &[0.0; 2048])),
        _ => return None,
    };
    Some(b)
}

const QROT0: &str = "model.layers.0.self_attn.q_rotary/RotaryEmbedding";

fn rotary_to_contrib_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, QROT0).attrs.retain(|a| a.name != "num_heads"),
        "input_3d" => |m| set_type(m, "model.layers.0.self_attn.q_proj/MatMul/out", ir::DType::F32, &[Dim::sym("b"), Dim::Fixed(4), Dim::sym("s"), Dim::Fixed(16)]),
        "caches_2d" => |m| set_init(m, "rotary_emb.cos_cache", Recipe::from_f32("3-D cache", vec![1, 256, 8], &[0.0; 2048])),
        "positions_int64" => |m| set_type(m, "position_ids", ir::DType::I32, &[Dim::sym("batch_size"), Dim::sym("sequence_length")]),
        _ => return None,
    };
    Some(b)
}

fn llama_f16() -> Model {
    let ckpt = models::Checkpoint::open(&fixture("tiny-llama")).expect("fixture");
    let options = models::BuildOptions { dtype: ir::DType::F16, ..Default::default() };
    models::tasks::causal_lm::build(&ckpt, &options).expect("generic f16 graph builds")
}

/// lower.rotary_f32 on tiny-llama's f16 q rotation.
fn rotary_f32_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, QROT0).attrs.retain(|a| a.name != "num_heads"),
        "half_input" => |m| set_init(m, "rotary_emb.cos_cache", Recipe::from_f32("f32 cache", vec![256, 8], &[0.0; 2048])),
        _ => return None,
    };
    Some(b)
}

/// lower.decompose_rotary_embedding on tiny-llama's q rotation (4 heads of 16, caches [256, 8]).
fn decompose_rotary_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, QROT0).attrs.retain(|a| a.name != "num_heads"),
        // A float num_heads: the Reshape shape would not be a list of integers.
        "let.heads" => |m| node_mut(m, QROT0).set_attr(Attr::float("num_heads", 4.0)),
        "not_interleaved" => |m| node_mut(m, QROT0).set_attr(Attr::int("interleaved", 1)),
        "input_3d" => |m| set_type(m, "model.layers.0.self_attn.q_proj/MatMul/out", ir::DType::F32, &[Dim::sym("b"), Dim::Fixed(4), Dim::sym("s"), Dim::Fixed(16)]),
        "heads_divide" => |m| node_mut(m, QROT0).set_attr(Attr::int("num_heads", 3)),
        "caches_2d" => |m| set_init(m, "rotary_emb.cos_cache", Recipe::from_f32("3-D cache", vec![1, 256, 8], &[0.0; 2048])),
        // Half the head rotated (rotary_embedding_dim 8 of 16).
        "full_rotary" => |m| node_mut(m, QROT0).set_attr(Attr::int("rotary_embedding_dim", 8)),
        _ => return None,
    };
    Some(b)
}

const NORM0: &str = "model.layers.0.input_layernorm/RMSNormalization";

fn rms_to_simplified_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, NORM0).set_attr(Attr::int("stash_type", 0)),
        "last_axis" => |m| node_mut(m, NORM0).set_attr(Attr::int("axis", 1)),
        "scale_1d" => |m| set_init(m, "model.layers.0.input_layernorm.weight", Recipe::from_f32("2-D gamma", vec![1, 64], &[1.0; 64])),
        _ => return None,
    };
    Some(b)
}

const HEAD: &str = "lm_head/MatMul";
const GPT2_WTE: &str = "transformer.wte.weight";

/// fold.tied_head_gemm on tiny-gpt2 (a tied head: `MatMul(x, Transpose(wte))`).
fn tied_head_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, HEAD).inputs.push("x2".into()),
        "table_constant" => |m| identity_before(m, GPT2_WTE, "lm_head/Transpose"),
        "transposed_2d" => |m| set_init(m, GPT2_WTE, Recipe::from_f32("square table", vec![64, 64], &[0.0; 64 * 64])),
        "rows_3d" => |m| {
            let x = node_mut(m, HEAD).inputs[0].clone();
            set_type(m, &x, ir::DType::F32, &[Dim::sym("rows"), Dim::Fixed(64)]);
        },
        _ => return None,
    };
    Some(b)
}

const GPT2_LN2: &str = "transformer.h.0.ln_2/LayerNormalization";
const GPT2_GELU: &str = "transformer.h.0.mlp.act/Gelu";
const GPT2_PROJ_BIAS: &str = "transformer.h.0.attn.c_proj.bias";

fn gpt2() -> Model {
    generic("tiny-gpt2")
}

const GPT2_GQA0: &str = "transformer.h.0.attn/Attention/GroupQueryAttention";
const GPT2_X0: &str = "transformer.h.0.ln_1/LayerNormalization/out";
const GPT2_KPROJ0: &str = "transformer.h.0.attn.c_attn.k/MatMul";
const GPT2_WK0: &str = "transformer.h.0.attn.c_attn.k.weight";
const GPT2_WV0: &str = "transformer.h.0.attn.c_attn.v.weight";
const GPT2_BK0: &str = "transformer.h.0.attn.c_attn.k.bias";

/// tiny-gpt2 after fuse.gqa: the 7-input GroupQueryAttention (no rotary slots).
fn gpt2_gqa() -> Model {
    after("tiny-gpt2", &["fuse.gqa"])
}

/// `fuse.pack_qkv.bias.no_rotary` on GPT-2's first layer.
fn pack_gpt2_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        // A rotating GroupQueryAttention without caches is not this form.
        "match.out" => |m| node_mut(m, GPT2_GQA0).set_attr(Attr::int("do_rotary", 1)),
        "shared_input" => |m| identity_before(m, GPT2_X0, GPT2_KPROJ0),
        "weights_constant" => |m| identity_before(m, GPT2_WK0, GPT2_KPROJ0),
        "distinct_weights" => |m| node_mut(m, GPT2_KPROJ0).inputs[1] = GPT2_WV0.into(),
        "weight_single_use" => |m| add_node(m, "extra_reader", "Identity", &[GPT2_BK0], "extra_reader/out"),
        // v's weight takes a 32-wide input: the three cannot stack on the output axis.
        "weights_stack" => |m| set_init(m, GPT2_WV0, Recipe::from_f32("narrow-input v", vec![32, 64], &[0.0; 32 * 64])),
        "same_stored_form" => |m| set_packed(m, GPT2_WV0),
        _ => return None,
    };
    Some(b)
}

fn skip_layer_norm_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, GPT2_LN2).set_attr(Attr::int("stash_type", 0)),
        "same_shape" => |m| set_type(m, "transformer.wpe/Add/out", ir::DType::F32, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(1)]),
        "gamma_beta_1d" => |m| set_init(m, "transformer.h.0.ln_2.bias", Recipe::from_f32("2-D beta", vec![1, 64], &[0.0; 64])),
        "bias_1d" => |m| set_init(m, GPT2_PROJ_BIAS, Recipe::from_f32("2-D bias", vec![1, 64], &[0.0; 64])),
        // Both residual operands are Adds on GPT-2; neither may be a biased projection.
        "match.biased" => |m| {
            node_mut(m, "transformer.h.0.attn.c_proj/Add").op = "Identity".into();
            node_mut(m, "transformer.wpe/Add").op = "Sum".into();
        },
        _ => return None,
    };
    Some(b)
}

/// For the bias-less rule on GPT-2, the skip operand is the biased projection itself.
fn skip_layer_norm_plain_step(step: &str) -> Option<Breaker> {
    match step {
        "same_shape" => Some(|m| set_type(m, "transformer.h.0.attn.c_proj/Add/out", ir::DType::F32, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(1)])),
        _ => skip_layer_norm_step(step),
    }
}

fn bias_gelu_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, GPT2_GELU).set_attr(Attr::string("approximate", "none")),
        "bias_add_feeds_gelu" => |m| set_init(m, "transformer.h.0.mlp.c_fc.bias", Recipe::from_f32("2-D bias", vec![1, 256], &[0.0; 256])),
        _ => return None,
    };
    Some(b)
}

fn bias_gelu_erf_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, "gelu").set_attr(Attr::string("approximate", "tanh")),
        "bias_add_feeds_gelu" => |m| set_init(m, "b", Recipe::from_f32("2-D bias", vec![1, 8], &[0.0; 8])),
        _ => return None,
    };
    Some(b)
}

fn gelu_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, "gelu/out").inputs.push("x".into()),
        "gelu_pattern" => |m| set_init(m, "c/half", Recipe::from_f32("c/half", vec![], &[0.25])),
        _ => return None,
    };
    Some(b)
}

fn gelu_to_contrib_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, "gelu").set_attr(Attr::string("approximate", "tanh")),
        "float_input" => |m| set_type(m, "x", ir::DType::F64, &[Dim::sym("batch"), Dim::sym("seq"), Dim::Fixed(8)]),
        _ => return None,
    };
    Some(b)
}

fn gelu_to_contrib_tanh_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, GPT2_GELU).set_attr(Attr::string("approximate", "none")),
        "float_input" => |m| set_type(m, "transformer.h.0.mlp.c_fc/Add/out", ir::DType::F64, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(256)]),
        _ => return None,
    };
    Some(b)
}

fn gpt2_fused() -> Model {
    after("tiny-gpt2", &["fuse.skip_layer_norm"])
}
fn llama_skip_rms() -> Model {
    after("tiny-llama", &["fuse.skip_rms_norm"])
}
const GPT2_SLN_PLAIN: &str = "transformer.h.0.ln_1/LayerNormalization/SkipLayerNormalization";
const GPT2_SLN_BIAS: &str = "transformer.h.0.ln_2/LayerNormalization/SkipLayerNormalization";
const LLAMA_SSLN: &str = "model.layers.0.post_attention_layernorm/RMSNormalization/SkipSimplifiedLayerNormalization";

fn no_epsilon(m: &mut Model, node: &str) {
    node_mut(m, node).attrs.retain(|a| a.name != "epsilon");
}

fn decompose_plain_step(step: &str) -> Option<Breaker> {
    match step {
        "match.out" => Some(|m| no_epsilon(m, GPT2_SLN_PLAIN)),
        _ => None,
    }
}
fn decompose_bias_step(step: &str) -> Option<Breaker> {
    match step {
        "match.out" => Some(|m| no_epsilon(m, GPT2_SLN_BIAS)),
        _ => None,
    }
}
fn decompose_simplified_step(step: &str) -> Option<Breaker> {
    match step {
        "match.out" => Some(|m| no_epsilon(m, LLAMA_SSLN)),
        _ => None,
    }
}

/// The branch `attr` (`then_branch` / `else_branch`) of the node `node`.
pub fn branch_mut<'a>(m: &'a mut Model, node: &str, attr: &str) -> &'a mut ir::Graph {
    let n = node_mut(m, node);
    match n.attrs.iter_mut().find(|a| a.name == attr).map(|a| &mut a.value) {
        Some(ir::AttrValue::Graph(g)) => g,
        _ => panic!("{node} has no graph attribute {attr}"),
    }
}

/// A node `op(inputs)` appended to a branch (its output is `<name>/out`, read by nobody).
fn push_branch_node(m: &mut Model, node: &str, attr: &str, name: &str, op: &str, inputs: &[&str], attrs: Vec<Attr>) {
    branch_mut(m, node, attr).nodes.push(Node { attrs, ..Node::new(name, op, inputs, &[&format!("{name}/out")]) });
}

/// A nested If (one Identity per branch) inside `attr` of `node`.
fn push_nested_if(m: &mut Model, node: &str, attr: &str, cond: &str, value: &str) {
    let inner = |name: &str| ir::Graph {
        name: name.into(),
        outputs: vec![ValueInfo::new(format!("{name}/out"), ir::DType::F32, vec![])],
        nodes: vec![Node {
            name: name.into(),
            op: "Identity".into(),
            domain: String::new(),
            opset: ir::OPSET,
            inputs: vec![value.into()],
            outputs: vec![format!("{name}/out")],
            attrs: vec![],
            metadata: Default::default(),
        }],
        ..Default::default()
    };
    push_branch_node(m, node, attr, "nested_if", "If", &[cond], vec![Attr::graph("then_branch", inner("nested_then")), Attr::graph("else_branch", inner("nested_else"))]);
}

/// lower.if_to_where on the synthetic five-output If (synth::if_select_n); each breaker
/// changes the last output (or its branch), so the others still agree.
fn if_to_where_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.ys" => |m| node_mut(m, "if").attrs.retain(|a| a.name != "else_branch"),
        "cond_one_element" => |m| set_type(m, "cond/out", ir::DType::Bool, &[Dim::Fixed(2)]),
        "same_outputs" => |m| {
            branch_mut(m, "if", "then_branch").outputs.pop();
        },
        "same_dtype" => |m| branch_mut(m, "if", "else_branch").outputs.last_mut().unwrap().dtype = ir::DType::F64,
        "same_shape" => |m| branch_mut(m, "if", "else_branch").outputs.last_mut().unwrap().shape = Some(vec![Dim::sym("batch"), Dim::sym("seq"), Dim::Fixed(4)]),
        "no_nested_control_flow" => |m| push_nested_if(m, "if", "else_branch", "cond/out", "x"),
        // A Gather whose indices are computed from the data.
        "total_branches" => |m| {
            push_branch_node(m, "if", "then_branch", "idx", "Shape", &["x"], vec![]);
            push_branch_node(m, "if", "then_branch", "pick", "Gather", &["x", "idx/out"], vec![]);
        },
        _ => return None,
    };
    Some(b)
}


fn phi3_longrope() -> Model {
    generic("tiny-phi3-longrope")
}

const SEQLENS_CAST: &str = "gqa_seqlens/Cast";

/// The harness applies rules without EP limits, so `limit(..)` fails on its own: the breaker
/// of the bound checks changes nothing (the last check of each rule, so every other step is
/// reached with the graph intact).
fn int64_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, SEQLENS_CAST).set_attr(Attr::int("to", 7)),
        "int64_input" => |m| set_type(m, "attention_mask", ir::DType::I32, &[Dim::sym("batch_size"), Dim::sym("total_sequence_length")]),
        "mask_from_input" => |m| identity_before(m, "attention_mask", "gqa_seqlens/ReduceSum"),
        "context_fits" => |_| {},
        _ => return None,
    };
    Some(b)
}

const LONGROPE_THRESHOLD: &str = "rotary_emb/longrope/original_max_position_embeddings";

fn int64_compare_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, "rotary_emb/longrope/is_long").inputs.push(LONGROPE_THRESHOLD.into()),
        "int64_input" => |m| set_init(m, LONGROPE_THRESHOLD, Recipe::from_i64("i32 threshold", vec![1], &[4]).cast(ir::DType::I32)),
        "dims_of_input" => |m| identity_before(m, "attention_mask", "rotary_emb/longrope/total_len"),
        "threshold_fits" => |m| set_init(m, LONGROPE_THRESHOLD, Recipe::from_i64("huge threshold", vec![1], &[1 << 40])),
        "dims_fit" => |_| {},
        _ => return None,
    };
    Some(b)
}

const EMBED_GATHER: &str = "model.embed_tokens/Gather";

/// `.gather` on tiny-llama's embedding lookup (`Gather(embed_tokens, input_ids)`).
fn int64_gather_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        // A Gather on another axis is not an embedding lookup.
        "match.out" => |m| node_mut(m, EMBED_GATHER).set_attr(Attr::int("axis", 1)),
        "int64_indices" => |m| set_type(m, "input_ids", ir::DType::I32, &[Dim::sym("batch_size"), Dim::sym("sequence_length")]),
        "indices_from_input" => |m| identity_before(m, "input_ids", EMBED_GATHER),
        // 2^31 rows (a lazy reshape, never materialized): the check wants fewer than 2^31.
        "rows_fit" => |m| set_init(m, "model.embed_tokens.weight", Recipe::from_f32("one", vec![1], &[0.0]).reshape(vec![1 << 31, 64])),
        _ => return None,
    };
    Some(b)
}

/// `.shape` on the synthetic scaled Reshape (synth::scaled_reshape), rooted at its Mul
/// `shape/scaled`.
fn int64_shape_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        // A third operand: the root line is a two-operand Mul.
        "match.prod" => |m| node_mut(m, "shape/scaled").inputs.push("c/factor".into()),
        "int64_input" => |m| set_init(m, "c/factor", Recipe::from_i64("i32 factor", vec![1], &[2]).cast(ir::DType::I32)),
        "dims_of_input" => |m| identity_before(m, "x", "shape/seq"),
        "factor_fits" => |m| set_init(m, "c/factor", Recipe::from_i64("negative factor", vec![1], &[-2])),
        // 2^20 fits in int32, max_context (4096) times it does not.
        "product_fits" => |m| set_init(m, "c/factor", Recipe::from_i64("large factor", vec![1], &[1 << 20])),
        _ => return None,
    };
    Some(b)
}

/// `.rank` on the synthetic last-axis sum (synth::rank_axes), rooted at its Sub `axes/last`.
fn int64_rank_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.axes" => |m| node_mut(m, "axes/last").inputs.push("c/one".into()),
        "int64_input" => |m| set_init(m, "c/one", Recipe::from_i64("i32 one", vec![1], &[1]).cast(ir::DType::I32)),
        // x declared without a shape: its rank is unknown.
        "rank_known" => |m| m.graph.inputs[0].shape = None,
        "offset_fits" => |m| set_init(m, "c/one", Recipe::from_i64("huge offset", vec![1], &[1 << 40])),
        _ => return None,
    };
    Some(b)
}

/// The synthetic RMS chains (synth::rms_norm); `square` only exists with `Pow`.
fn rms_norm_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, "rms/out").inputs.push("x".into()),
        "let.epsilon" => |m| set_init(m, "c/eps", Recipe::from_f32("two epsilons", vec![2], &[1e-5, 1e-6])),
        "square" => |m| set_init(m, "c/two", Recipe::from_f32("c/two", vec![], &[3.0])),
        "last_axis" => |m| set_init(m, "c/axes", Recipe::from_i64("first axis", vec![1], &[0])),
        "scale_1d" => |m| set_init(m, "gamma", Recipe::from_f32("2-D gamma", vec![1, 8], &[1.0; 8])),
        _ => return None,
    };
    Some(b)
}

/// The synthetic layer-norm chains (synth::layer_norm).
fn layer_norm_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, "ln/out").inputs.push("x".into()),
        "let.epsilon" => |m| set_init(m, "c/eps", Recipe::from_f32("two epsilons", vec![2], &[1e-5, 1e-6])),
        "square" => |m| set_init(m, "c/two", Recipe::from_f32("c/two", vec![], &[3.0])),
        "last_axis" => |m| set_init(m, "c/var_axes", Recipe::from_i64("first axis", vec![1], &[0])),
        "gamma_beta_1d" => |m| set_init(m, "beta", Recipe::from_f32("2-D beta", vec![1, 8], &[0.0; 8])),
        _ => return None,
    };
    Some(b)
}

fn llama_packed() -> Model {
    after("tiny-llama", &["fuse.gqa_rotary", "fuse.pack_qkv"])
}
const PACKED_W0: &str = "model.layers.0.self_attn.q_proj.weight/packed_weight";
const PACKED_MM0: &str = "model.layers.0.self_attn/Attention/GroupQueryAttention/MatMul";
const PACKED_GQA0: &str = "model.layers.0.self_attn/Attention/GroupQueryAttention/GroupQueryAttention";

/// lower.unpack_qkv on tiny-llama after fuse.pack_qkv.
fn unpack_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        // A key in slot 1: the `-` operand fails (the node is not packed).
        "match.out" => |m| {
            let q = node_mut(m, PACKED_GQA0).inputs[0].clone();
            node_mut(m, PACKED_GQA0).inputs[1] = q;
        },
        "let.sizes" => |m| {
            let v = m.graph.inputs.iter_mut().find(|v| v.name == "past_key_values.0.key").unwrap();
            v.shape.as_mut().unwrap()[3] = Dim::sym("head_size");
        },
        "weights_constant" => |m| identity_before(m, PACKED_W0, PACKED_MM0),
        "packed_width" => |m| set_init(m, PACKED_W0, Recipe::from_f32("narrow packed", vec![64, 96], &[0.0; 64 * 96])),
        _ => return None,
    };
    Some(b)
}

fn qwen2_packed() -> Model {
    after("tiny-qwen2", &["fuse.gqa_rotary", "fuse.pack_qkv"])
}
fn qwen3_packed() -> Model {
    after("tiny-qwen3", &["fuse.gqa_rotary", "fuse.pack_qkv"])
}
const PACKED_B0: &str = "model.layers.0.self_attn.q_proj.bias/packed_weight";
const PACKED_ADD0: &str = "model.layers.0.self_attn/Attention/GroupQueryAttention/Add";
const PACKED_SPLIT0: &str = "model.layers.0.self_attn/Attention/GroupQueryAttention/Split";

/// lower.unpack_qkv.bias on tiny-qwen2 after fuse.pack_qkv (`.bias`).
fn unpack_bias_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        // The bias is not a constant: an Identity between it and the Add.
        "weights_constant" => |m| identity_before(m, PACKED_B0, PACKED_ADD0),
        // One bias element short of the packed width.
        "packed_width" => |m| {
            let n = m.graph.initializer(PACKED_B0).expect("packed bias").shape()[0] - 1;
            set_init(m, PACKED_B0, Recipe::from_f32("short bias", vec![n], &vec![0.0; n]));
        },
        _ => return unpack_step(step),
    };
    Some(b)
}

/// lower.unpack_qkv.split on tiny-qwen3 after fuse.pack_qkv (`.split`).
fn unpack_split_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        // An empty key slot: the pattern wants q and k present (the packed-query form is the
        // base rule's).
        "match.out" => |m| node_mut(m, PACKED_GQA0).inputs[1] = String::new(),
        // The Split's q output of unknown width.
        "let.sizes" => |m| set_type(m, &format!("{PACKED_SPLIT0}/out"), ir::DType::F32, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::sym("q_width")]),
        "weights_constant" => |m| identity_before(m, PACKED_W0, PACKED_MM0),
        "packed_width" => |m| {
            let w = m.graph.initializer(PACKED_W0).expect("packed weight").shape();
            set_init(m, PACKED_W0, Recipe::from_f32("wide packed", vec![w[0], w[1] + 8], &vec![0.0; w[0] * (w[1] + 8)]));
        },
        _ => return None,
    };
    Some(b)
}

/// tiny-gpt2 after fuse.gqa and fuse.pack_qkv (`.bias.no_rotary`): the 7-input
/// GroupQueryAttention reading `Add(MatMul(x, Wqkv), bqkv)` in its query slot.
fn gpt2_packed() -> Model {
    after("tiny-gpt2", &["fuse.gqa", "fuse.pack_qkv"])
}
const GPT2_PACKED_W0: &str = "transformer.h.0.attn.c_attn.q.weight/packed_weight";
const GPT2_PACKED_B0: &str = "transformer.h.0.attn.c_attn.q.bias/packed_weight";
const GPT2_PACKED_MM0: &str = "transformer.h.0.attn/Attention/GroupQueryAttention/MatMul";
const GPT2_PACKED_GQA0: &str = "transformer.h.0.attn/Attention/GroupQueryAttention/GroupQueryAttention";

/// lower.unpack_qkv.bias.no_rotary on tiny-gpt2 after fuse.pack_qkv (`.bias.no_rotary`).
fn unpack_gpt2_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        // A key in slot 1: the `-` operand fails (the node is not packed).
        "match.out" => |m| {
            let q = node_mut(m, GPT2_PACKED_GQA0).inputs[0].clone();
            node_mut(m, GPT2_PACKED_GQA0).inputs[1] = q;
        },
        "let.sizes" => |m| {
            let v = m.graph.inputs.iter_mut().find(|v| v.name == "past_key_values.0.key").unwrap();
            v.shape.as_mut().unwrap()[3] = Dim::sym("head_size");
        },
        // The weight is not a constant: an Identity between it and the MatMul (the `.bias`
        // case breaks the bias instead; the check covers both).
        "weights_constant" => |m| identity_before(m, GPT2_PACKED_W0, GPT2_PACKED_MM0),
        // One bias element short of the packed width.
        "packed_width" => |m| {
            let n = m.graph.initializer(GPT2_PACKED_B0).expect("packed bias").shape()[0] - 1;
            set_init(m, GPT2_PACKED_B0, Recipe::from_f32("short bias", vec![n], &vec![0.0; n]));
        },
        _ => return None,
    };
    Some(b)
}

/// tiny-bert's generic encoder graph (task feature-extraction).
fn bert() -> Model {
    let ckpt = models::Checkpoint::open(&fixture("tiny-bert")).expect("fixture");
    models::tasks::encoder::build(&ckpt, &models::BuildOptions::default(), None).expect("encoder graph builds")
}

const BERT_ATTN0: &str = "encoder.layer.0.attention.self/Attention";

/// tiny-bert's generic graph with mean pooling (task sentence-embedding).
fn bert_pooled() -> Model {
    let ckpt = models::Checkpoint::open(&fixture("tiny-bert")).expect("fixture");
    let pooling = models::tasks::pooling::SentencePooling { modes: vec![models::tasks::pooling::PoolingMode::Mean], normalize: false, config: fixture("tiny-bert") };
    models::tasks::encoder::build(&ckpt, &models::BuildOptions::default(), Some(&pooling)).expect("encoder graph builds")
}

const BERT_POSITIONS: &str = "embeddings.position_embeddings/Gather";

/// `.positions` on tiny-bert's position lookup (`Gather(position_embeddings, Range(0, seq, 1))`).
fn int64_positions_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        // A Gather on another axis is not a lookup of the positions' rows.
        "match.out" => |m| node_mut(m, BERT_POSITIONS).set_attr(Attr::int("axis", 1)),
        // Positions declared int32: the Range computes in int32 already.
        "int64_range" => |m| set_type(m, "embeddings/position_ids/Range/out", ir::DType::I32, &[Dim::sym("sequence_length")]),
        "length_of_input" => |m| identity_before(m, "input_ids", "embeddings/position_ids/seq_len"),
        // A step of 0 is not a positive int32 constant.
        "bounds_fit" => |m| set_init(m, "embeddings/position_ids/one", Recipe::from_i64("zero step", vec![], &[0])),
        _ => return None,
    };
    Some(b)
}

fn olmo() -> Model {
    generic("tiny-olmo")
}

const OLMO_CLIP_MIN: &str = "model.layers.0.self_attn.clip_qkv.q/Min";
const OLMO_CLIP_MAX: &str = "model.layers.0.self_attn.clip_qkv.q/Max";

/// The clamp's bound (input 1 of `node`) as a [1] vector: not the scalar Clip takes.
fn vector_bound(m: &mut Model, node: &str) {
    let bound = node_mut(m, node).inputs[1].clone();
    set_init(m, &bound, Recipe::from_f32("[1] bound", vec![1], &[1.0]));
}

/// The clamped value declared int32.
fn int_clamped(m: &mut Model, node: &str) {
    let x = node_mut(m, node).inputs[0].clone();
    set_type(m, &x, ir::DType::I32, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(64)]);
}

/// lower.minmax_to_clip (`MAX` false: the Min) and `.max` (the Max) on tiny-olmo's clip_qkv
/// (`Min(Max(q, -c), c)`).
fn clip_step<const MAX: bool>(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        // A third operand: the pattern is a two-input Min/Max.
        "match.out" => |m| {
            let node = if MAX { OLMO_CLIP_MAX } else { OLMO_CLIP_MIN };
            let extra = node_mut(m, node).inputs[1].clone();
            node_mut(m, node).inputs.push(extra);
        },
        "scalar_bound" => |m| vector_bound(m, if MAX { OLMO_CLIP_MAX } else { OLMO_CLIP_MIN }),
        "float_input" => |m| int_clamped(m, if MAX { OLMO_CLIP_MAX } else { OLMO_CLIP_MIN }),
        _ => return None,
    };
    Some(b)
}

/// tiny-roberta's generic encoder graph: positions counted over the non-pad ids.
fn roberta() -> Model {
    let ckpt = models::Checkpoint::open(&fixture("tiny-roberta")).expect("fixture");
    models::tasks::encoder::build(&ckpt, &models::BuildOptions::default(), None).expect("encoder graph builds")
}

/// `.padding_positions` on tiny-roberta's position lookup (`Gather(position_embeddings,
/// Mul(CumSum(t), t) + pad)`).
fn padding_positions_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, BERT_POSITIONS).set_attr(Attr::int("axis", 1)),
        // Ids declared int32: nothing to narrow.
        "int64_positions" => |m| set_type(m, "input_ids", ir::DType::I32, &[Dim::sym("batch_size"), Dim::sym("sequence_length")]),
        "ids_from_input" => |m| identity_before(m, "input_ids", "embeddings/position_ids/is_pad"),
        // Read without limits (BOUND_CHECKS in check_harness.rs): no bound on the count.
        "count_exact_in_f32" => |_| {},
        "pad_fits" => |m| set_init(m, "embeddings/position_ids/padding_idx", Recipe::from_i64("huge pad", vec![1], &[1 << 40])),
        _ => return None,
    };
    Some(b)
}

const POOLING_MASK: &str = "pooling/mask_float";

/// `.mask` on tiny-bert's mean pooling weights (`Cast<float>(Unsqueeze(attention_mask))`).
fn int64_mask_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        // A second operand: the root line is a one-operand Cast.
        "match.out" => |m| node_mut(m, POOLING_MASK).inputs.push("pooling/axis2".into()),
        "int64_mask" => |m| set_type(m, "attention_mask", ir::DType::I32, &[Dim::sym("batch_size"), Dim::sym("sequence_length")]),
        "mask_from_input" => |m| identity_before(m, "attention_mask", "pooling/mask_3d"),
        // A Cast to int32 is not on its way to a float.
        "to_float" => |m| node_mut(m, POOLING_MASK).set_attr(Attr::int("to", 6)),
        _ => return None,
    };
    Some(b)
}

/// fuse.mha and fuse.mha.bias on tiny-bert's layer-0 attention.
fn mha_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, BERT_ATTN0).set_attr(Attr::int("is_causal", 1)),
        // The padding is read through an Identity: not the attention_mask graph input.
        "mask_from_input" => |m| {
            add_node(m, "attention_mask/Identity", "Identity", &["attention_mask"], "attention_mask/copy");
            let cast = m.graph.nodes.iter_mut().find(|n| n.op == "Cast" && n.inputs == ["attention_mask"]).expect("the mask's Cast");
            cast.inputs[0] = "attention_mask/copy".into();
        },
        "same_heads" => |m| node_mut(m, BERT_ATTN0).set_attr(Attr::int("kv_num_heads", 2)),
        // q (the base rule reads the biased projection, `.bias` the MatMul) 4-D, its last axis
        // still the bias width.
        "qkv_3d" => |m| {
            let heads = [Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(1), Dim::Fixed(64)];
            set_type(m, "encoder.layer.0.attention.self.query/MatMul/out", ir::DType::F32, &heads);
            set_type(m, "encoder.layer.0.attention.self.query/Add/out", ir::DType::F32, &heads);
        },
        "biases_1d" => |m| set_init(m, "encoder.layer.0.attention.self.query.bias", Recipe::from_f32("2-D bias", vec![1, 64], &[0.0; 64])),
        _ => return None,
    };
    Some(b)
}

/// A vision-language fixture's generic vision tower.
fn tower(name: &str) -> Model {
    let ckpt = models::Checkpoint::open(&fixture(name)).expect("fixture");
    models::arch::vision::build_vision(&ckpt, &models::BuildOptions::default()).expect("vision tower builds")
}

fn siglip_tower() -> Model {
    tower("tiny-gemma3-vl")
}

fn qwen_tower() -> Model {
    tower("tiny-qwen2_5_vl")
}

const SIGLIP_ATTN0: &str = "vision_tower.encoder.layers.0.self_attn/Attention";
const QWEN_VIS_ATTN0: &str = "visual.blocks.0.attn/Attention";
const QWEN_VIS_ATTN1: &str = "visual.blocks.1.attn/Attention";

/// fuse.mha_tower and its `.bias` variant on tiny-gemma3-vl's first SigLIP block.
fn mha_tower_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, SIGLIP_ATTN0).set_attr(Attr::int("is_causal", 1)),
        "same_heads" => |m| node_mut(m, SIGLIP_ATTN0).set_attr(Attr::int("kv_num_heads", 1)),
        // q (the base rule reads the biased projection, `.bias` the MatMul) 4-D, its last axis
        // still the bias width.
        "qkv_3d" => |m| {
            let heads = [Dim::sym("num_images"), Dim::Fixed(1024), Dim::Fixed(1), Dim::Fixed(32)];
            set_type(m, "vision_tower.encoder.layers.0.self_attn.q_proj/MatMul/out", ir::DType::F32, &heads);
            set_type(m, "vision_tower.encoder.layers.0.self_attn.q_proj/Add/out", ir::DType::F32, &heads);
        },
        "biases_1d" => |m| set_init(m, "vision_tower.encoder.layers.0.self_attn.q_proj.bias", Recipe::from_f32("2-D bias", vec![1, 32], &[0.0; 32])),
        _ => return None,
    };
    Some(b)
}

/// fuse.mha_tower.block_mask on tiny-qwen2_5_vl's second (full-attention) block.
fn mha_tower_mask_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, QWEN_VIS_ATTN1).set_attr(Attr::int("is_causal", 1)),
        // The frame mask's rows typed int64, not boolean.
        "row_mask" => |m| set_type(m, "vision/frame_mask/rows/out", ir::DType::I64, &[Dim::Fixed(1), Dim::sym("num_patches"), Dim::sym("num_patches")]),
        "one_image_row" => |m| set_type(m, "visual.blocks.1.attn/q/RotaryEmbedding/out", ir::DType::F32, &[Dim::Fixed(2), Dim::sym("num_patches"), Dim::Fixed(32)]),
        "same_heads" => |m| node_mut(m, QWEN_VIS_ATTN1).set_attr(Attr::int("kv_num_heads", 1)),
        "qkv_3d" => |m| set_type(m, "visual.blocks.1.attn/q/RotaryEmbedding/out", ir::DType::F32, &[Dim::Fixed(1), Dim::sym("num_patches"), Dim::Fixed(2), Dim::Fixed(16)]),
        _ => return None,
    };
    Some(b)
}

/// fuse.mha_tower.window_mask on tiny-qwen2_5_vl's first (windowed) block.
fn mha_tower_window_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, QWEN_VIS_ATTN0).set_attr(Attr::int("is_causal", 1)),
        // The slot mask typed int64, not boolean.
        "key_rows" => |m| set_type(m, "vision/layout/padded/keys/out", ir::DType::I64, &[Dim::sym("num_windows"), Dim::Fixed(16)]),
        "same_heads" => |m| node_mut(m, QWEN_VIS_ATTN0).set_attr(Attr::int("kv_num_heads", 1)),
        "qkv_3d" => |m| set_type(m, "visual.blocks.0.attn/q/windows/out", ir::DType::F32, &[Dim::sym("num_windows"), Dim::Fixed(16), Dim::Fixed(2), Dim::Fixed(16)]),
        _ => return None,
    };
    Some(b)
}

/// The first sparse layer's MoE block of a generic graph: `fuse.moe` on tiny-mixtral (scope
/// `model.layers.0.block_sparse_moe`, renormalized), `fuse.moe.unnormalized` on tiny-qwen2-moe
/// (scope `model.layers.0.mlp`, its shared expert beside the block). One breaker table for
/// both, written once per scope by the macro (breakers are plain `fn`s).
macro_rules! moe_steps {
    ($name:ident, $scope:literal) => {
        fn $name(step: &str) -> Option<Breaker> {
            const OUT: &str = concat!($scope, "/ReduceSum");
            const EXPERTS: &str = concat!($scope, ".experts");
            const ROUTER: &str = concat!($scope, ".gate/MatMul");
            let b: Breaker = match step {
                "match.out" => |m| node_mut(m, OUT).set_attr(Attr::int("keepdims", 1)),
                "gate_up_input" => |m| identity_before(m, concat!($scope, "/by_expert/out"), concat!($scope, ".experts.up/MatMul")),
                // The routing weights' column on axis 2 instead of the last.
                "expert_axes" => |m| set_init(m, concat!($scope, "/last_axis"), Recipe::from_i64("axis 2", vec![1], &[2])),
                "weights_constant" => |m| identity_before(m, concat!($scope, ".experts.gate.weight"), concat!($scope, ".experts.gate/Transpose")),
                // A down stack of one expert fewer than gate and up.
                "expert_stacks" => |m| {
                    let down = format!("{EXPERTS}.down.weight");
                    let mut shape = m.graph.initializer(&down).unwrap().shape();
                    shape[0] -= 1;
                    let n = shape.iter().product();
                    set_init(m, &down, Recipe::from_f32("fewer experts", shape, &vec![0.0; n]));
                },
                "gate_up_single_use" => |m| add_node(m, "extra_reader", "Identity", &[concat!($scope, ".experts.up.weight")], "extra_reader/out"),
                // Each expert compared with the others on the last axis twice: not the rank count.
                "rank_count" => |m| set_init(m, concat!($scope, "/rank/other_axis"), Recipe::from_i64("axis -1", vec![1], &[-1])),
                // The experts summed over a new axes constant [2] (the sequence), not axis 1.
                "sum_axes" => |m| {
                    let axes = concat!($scope, "/sequence_axis");
                    m.graph.initializers.push((axes.to_string(), Recipe::from_i64("axis 2", vec![1], &[2])));
                    node_mut(m, OUT).inputs[1] = axes.into();
                },
                // Renormalized over the sequence axis instead of the experts.
                "norm_axis" => |m| set_init(m, concat!($scope, "/normalize/axes"), Recipe::from_i64("axis -2", vec![1], &[-2])),
                "router" => |m| identity_before(m, concat!($scope, ".gate.weight"), ROUTER),
                // The block's input 2-D, in the build's float type (the router weight's).
                "tokens_3d" => |m| {
                    let x = node_mut(m, ROUTER).inputs[0].clone();
                    let float = m.graph.initializer(concat!($scope, ".gate.weight")).map_or(ir::DType::F32, |r| r.dtype());
                    set_type(m, &x, float, &[Dim::sym("tokens"), Dim::Fixed(64)]);
                },
                // k = 7 of 4 experts.
                "top_k" => |m| set_init(m, concat!($scope, "/top_k"), Recipe::from_f32("top_k = 7", vec![], &[7.0])),
                "let.topk" => |m| set_init(m, concat!($scope, "/top_k"), Recipe::from_f32("top_k = 2.5", vec![], &[2.5])),
                "zero_unrouted" => |m| set_init(m, concat!($scope, "/zero"), Recipe::from_f32("zero = 1", vec![], &[1.0])),
                "float_type" => |m| {
                    let x = node_mut(m, ROUTER).inputs[0].clone();
                    set_type(m, &x, ir::DType::BF16, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(64)]);
                },
                _ => return None,
            };
            let _ = EXPERTS;
            Some(b)
        }
    };
}
moe_steps!(moe_mixtral_step, "model.layers.0.block_sparse_moe");
moe_steps!(moe_qwen2_step, "model.layers.0.mlp");

moe_steps!(moe_deepseek_step, "model.layers.1.mlp");
/// The scope of that block (the macro takes a literal).
const GROUPED: &str = "model.layers.1.mlp";
const GROUPED_OUT: &str = "model.layers.1.mlp/ReduceSum";

/// DeepSeek-V3's first sparse layer (tiny-deepseek_v3: 8 experts, top 2 of 2 open groups of 4,
/// sigmoid scores, renormalized): fuse.moe.grouped and, on the f16 graph, its f16 variant. The
/// expert, rank-count and constant steps break as for the softmax mixtures (`moe_steps!`); the
/// routing's own steps here.
fn moe_grouped_step(step: &str) -> Option<Breaker> {
    // The block's input: the tokens the experts read.
    fn tokens(m: &Model) -> (String, ir::DType) {
        let x = m.graph.nodes.iter().find(|n| n.name == format!("{GROUPED}/by_expert")).expect("the experts' Unsqueeze").inputs[0].clone();
        let float = m.graph.initializer(&format!("{GROUPED}.experts.gate.weight")).map_or(ir::DType::F32, |r| r.dtype());
        (x, float)
    }
    let b: Breaker = match step {
        // A Tanh's scores can be negative: no logarithm.
        "positive_scores" => |m| node_mut(m, &format!("{GROUPED}/Sigmoid")).op = "Tanh".into(),
        "float_type" => |m| {
            let (x, _) = tokens(m);
            set_type(m, &x, ir::DType::BF16, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(64)]);
        },
        "tokens_3d" => |m| {
            let (x, float) = tokens(m);
            set_type(m, &x, float, &[Dim::sym("tokens"), Dim::Fixed(64)]);
        },
        // Top-k scores over 9 experts, beside stacks of 8.
        "experts" => |m| set_type(m, &format!("{GROUPED}/routing_f32/top_k_weights/out"), ir::DType::F32, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(9)]),
        // k = 9 of 8 experts.
        "top_k" => |m| set_init(m, &format!("{GROUPED}/routing_f32/top_k"), Recipe::from_f32("top_k = 9", vec![], &[9.0])),
        "let.topk" => |m| set_init(m, &format!("{GROUPED}/routing_f32/top_k"), Recipe::from_f32("top_k = 2.5", vec![], &[2.5])),
        "zero_unrouted" => |m| set_init(m, &format!("{GROUPED}/routing_f32/zero"), Recipe::from_f32("zero = 1", vec![], &[1.0])),
        // A factor per expert.
        "per_token_factor" => |m| set_type(m, &format!("{GROUPED}/routing_f32/normalize/factor/out"), ir::DType::F32, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(8)]),
        _ => return moe_deepseek_step(step),
    };
    Some(b)
}

fn deepseek_v3() -> Model {
    generic("tiny-deepseek_v3")
}

fn deepseek_v3_f16() -> Model {
    generic_f16("tiny-deepseek_v3")
}

fn mixtral() -> Model {
    generic("tiny-mixtral")
}

fn qwen2_moe() -> Model {
    generic("tiny-qwen2-moe")
}

/// The f16 generic graph of a MoE fixture: its routing is Cast to f32 (`<scope>/routing_f32/..`),
/// the form fuse.moe.f16 and fuse.moe.unnormalized.f16 match. The same breakers serve: they
/// break the same steps (a replaced f32 constant still reads as a number, a BF16 input is no f16).
fn generic_f16(name: &str) -> Model {
    let ckpt = models::Checkpoint::open(&fixture(name)).expect("fixture");
    let options = models::BuildOptions { dtype: ir::DType::F16, ..Default::default() };
    models::tasks::causal_lm::build(&ckpt, &options).expect("generic f16 graph builds")
}

fn mixtral_f16() -> Model {
    generic_f16("tiny-mixtral")
}

fn qwen2_moe_f16() -> Model {
    generic_f16("tiny-qwen2-moe")
}

/// The case for `rule`, if this module owns it.
pub fn case(rule: &str) -> Option<Case> {
    Some(match rule {
        "fuse.pack_qkv" => Case { graph: llama_gqa, target: GQA0, breaker: pack_step },
        "fuse.pack_qkv.lora" => Case { graph: llama_lora_gqa, target: GQA0, breaker: pack_lora_step },
        "fuse.pack_qkv.bias.lora" => Case { graph: qwen2_lora_gqa, target: GQA0, breaker: pack_bias_lora_step },
        "fuse.pack_qkv.bias" => Case { graph: qwen2_gqa, target: GQA0, breaker: pack_bias_step },
        "fuse.pack_qkv.split" => Case { graph: qwen3_gqa, target: GQA0, breaker: pack_step },
        "fuse.pack_qkv.bias.no_rotary" => Case { graph: gpt2_gqa, target: GPT2_GQA0, breaker: pack_gpt2_step },
        "lower.unpack_qkv" => Case { graph: llama_packed, target: PACKED_GQA0, breaker: unpack_step },
        "lower.unpack_qkv.bias" => Case { graph: qwen2_packed, target: PACKED_GQA0, breaker: unpack_bias_step },
        "lower.unpack_qkv.split" => Case { graph: qwen3_packed, target: PACKED_GQA0, breaker: unpack_split_step },
        "lower.unpack_qkv.bias.no_rotary" => Case { graph: gpt2_packed, target: GPT2_PACKED_GQA0, breaker: unpack_gpt2_step },
        "lower.separate_rope" => Case { graph: llama_gqa, target: GQA0, breaker: separate_rope_step },
        "lower.gqa_right_padding" => Case { graph: llama_gqa, target: GQA0, breaker: right_padding_step },
        "lower.gqa_right_padding.no_rotary" => Case { graph: gpt2_gqa, target: GPT2_GQA0, breaker: right_padding_no_rotary_step },
        "lower.gqa_right_padding.sink" => Case { graph: gpt_oss_gqa, target: SINK_GQA1, breaker: right_padding_sink_step },
        "lower.rotary_to_contrib" => Case { graph: llama, target: QROT0, breaker: rotary_to_contrib_step },
        "lower.rotary_f32" => Case { graph: llama_f16, target: QROT0, breaker: rotary_f32_step },
        "lower.decompose_rotary_embedding" => Case { graph: llama, target: QROT0, breaker: decompose_rotary_step },
        "lower.rms_norm_to_simplified" => Case { graph: llama, target: NORM0, breaker: rms_to_simplified_step },
        "fuse.moe" => Case { graph: mixtral, target: "model.layers.0.block_sparse_moe/ReduceSum", breaker: moe_mixtral_step },
        "fuse.moe.unnormalized" => Case { graph: qwen2_moe, target: "model.layers.0.mlp/ReduceSum", breaker: moe_qwen2_step },
        "fuse.moe.f16" => Case { graph: mixtral_f16, target: "model.layers.0.block_sparse_moe/ReduceSum", breaker: moe_mixtral_step },
        "fuse.moe.swiglu_limit" => Case { graph: gpt_oss, target: "model.layers.0.mlp/ReduceSum", breaker: moe_gpt_oss_step },
        "fuse.gqa_sink" => Case { graph: gpt_oss, target: "model.layers.1.self_attn/sink_attention", breaker: sink_full_step },
        "fuse.gqa_sink.window" => Case { graph: gpt_oss, target: "model.layers.0.self_attn/sink_attention", breaker: sink_window_step },
        "fuse.gqa_sink.unrotated" => Case { graph: flint, target: "model.layers.0.self_attn/sink_attention", breaker: sink_unrotated_full_step },
        "lower.gqa_right_padding.sink_no_rotary" => Case { graph: flint_gqa, target: FLINT_SINK_GQA0, breaker: right_padding_sink_no_rotary_step },
        "fuse.moe.grouped" => Case { graph: deepseek_v3, target: GROUPED_OUT, breaker: moe_grouped_step },
        "fuse.moe.grouped.f16" => Case { graph: deepseek_v3_f16, target: GROUPED_OUT, breaker: moe_grouped_step },
        "fuse.moe.unnormalized.f16" => Case { graph: qwen2_moe_f16, target: "model.layers.0.mlp/ReduceSum", breaker: moe_qwen2_step },
        "fold.tied_head_gemm" => Case { graph: gpt2, target: HEAD, breaker: tied_head_step },
        "fuse.skip_layer_norm" => Case { graph: gpt2, target: GPT2_LN2, breaker: skip_layer_norm_plain_step },
        "fuse.skip_layer_norm.bias" => Case { graph: gpt2, target: GPT2_LN2, breaker: skip_layer_norm_step },
        "fuse.bias_gelu" => Case { graph: gpt2, target: GPT2_GELU, breaker: bias_gelu_step },
        "fuse.mha" | "fuse.mha.bias" | "fuse.mha_additive_mask" | "fuse.mha_additive_mask.bias" => Case { graph: bert, target: BERT_ATTN0, breaker: mha_step },
        "fuse.mha_tower" | "fuse.mha_tower.bias" => Case { graph: siglip_tower, target: SIGLIP_ATTN0, breaker: mha_tower_step },
        "fuse.mha_tower.block_mask" => Case { graph: qwen_tower, target: QWEN_VIS_ATTN1, breaker: mha_tower_mask_step },
        "fuse.mha_tower.window_mask" => Case { graph: qwen_tower, target: QWEN_VIS_ATTN0, breaker: mha_tower_window_step },
        "fuse.bias_gelu.erf" => Case { graph: synth::erf_gelu_with_bias, target: "gelu", breaker: bias_gelu_erf_step },
        "fuse.gelu" => Case { graph: synth::gelu_erf, target: "gelu/out", breaker: gelu_step },
        "fuse.gelu.tanh" => Case { graph: synth::gelu_tanh, target: "gelu/out", breaker: gelu_step },
        "lower.gelu_to_contrib" => Case { graph: synth::erf_gelu, target: "gelu", breaker: gelu_to_contrib_step },
        "lower.gelu_to_contrib.tanh" => Case { graph: gpt2, target: GPT2_GELU, breaker: gelu_to_contrib_tanh_step },
        "lower.decompose_skip_layer_norm" => Case { graph: gpt2_fused, target: GPT2_SLN_PLAIN, breaker: decompose_plain_step },
        "lower.decompose_skip_layer_norm.bias" => Case { graph: gpt2_fused, target: GPT2_SLN_BIAS, breaker: decompose_bias_step },
        "lower.decompose_skip_layer_norm.simplified" => Case { graph: llama_skip_rms, target: LLAMA_SSLN, breaker: decompose_simplified_step },
        "fuse.rms_norm" => Case { graph: synth::rms_norm_pow, target: "rms/out", breaker: rms_norm_step },
        "fuse.rms_norm.mul" => Case { graph: synth::rms_norm_mul, target: "rms/out", breaker: rms_norm_step },
        "fuse.rms_norm.div" => Case { graph: synth::rms_norm_div, target: "rms/out", breaker: rms_norm_step },
        "fuse.rms_norm.div.mul" => Case { graph: synth::rms_norm_div_mul, target: "rms/out", breaker: rms_norm_step },
        "fuse.layer_norm" => Case { graph: synth::layer_norm_mul, target: "ln/out", breaker: layer_norm_step },
        "fuse.layer_norm.pow" => Case { graph: synth::layer_norm_pow, target: "ln/out", breaker: layer_norm_step },
        "lower.if_to_where" => Case { graph: synth::if_select_five, target: "if", breaker: if_to_where_step },
        "lower.int64_to_int32" => Case { graph: llama_right_padded, target: SEQLENS_CAST, breaker: int64_step },
        "lower.int64_to_int32.compare" => Case { graph: phi3_longrope, target: "rotary_emb/longrope/is_long", breaker: int64_compare_step },
        "lower.int64_to_int32.gather" => Case { graph: llama, target: EMBED_GATHER, breaker: int64_gather_step },
        "lower.int64_to_int32.shape" => Case { graph: synth::scaled_reshape, target: "shape/scaled", breaker: int64_shape_step },
        "lower.int64_to_int32.rank" => Case { graph: synth::rank_axes, target: "axes/last", breaker: int64_rank_step },
        "lower.int64_to_int32.positions" => Case { graph: bert, target: BERT_POSITIONS, breaker: int64_positions_step },
        "lower.int64_to_int32.mask" => Case { graph: bert_pooled, target: POOLING_MASK, breaker: int64_mask_step },
        "lower.int64_to_int32.padding_positions" => Case { graph: roberta, target: BERT_POSITIONS, breaker: padding_positions_step },
        "lower.minmax_to_clip" => Case { graph: olmo, target: OLMO_CLIP_MIN, breaker: clip_step::<false> },
        "lower.minmax_to_clip.max" => Case { graph: olmo, target: OLMO_CLIP_MAX, breaker: clip_step::<true> },
        "fuse.gqa_static" | "fuse.gqa_static.unrotated" => Case { graph: llama_static, target: MERGE0, breaker: static_step },
        "fuse.gqa_static.window" | "fuse.gqa_static.unrotated_window" => Case { graph: mistral_sw_static, target: MERGE0, breaker: static_step },
        "fuse.gqa_alibi" => Case { graph: bloom, target: BLOOM_ATTN0, breaker: alibi_step },
        "fuse.gqa_alibi.static" => Case { graph: bloom_static, target: BLOOM_MERGE0, breaker: alibi_static_step },
        _ => return None,
    })
}

/// The static KV cache's generic graph (64 slots): TensorScatter + a 4-input Attention per layer.
fn static_generic(fixture_name: &str) -> Model {
    let ckpt = models::Checkpoint::open(&fixture(fixture_name)).expect("fixture");
    let options = models::BuildOptions { kv_cache: models::KvCache::Static { max_length: 64 }, ..Default::default() };
    models::tasks::causal_lm::build(&ckpt, &options).expect("static generic graph builds")
}

fn llama_static() -> Model {
    static_generic("tiny-llama")
}

fn mistral_sw_static() -> Model {
    static_generic("tiny-mistral-sw")
}

/// Layer 0's head merge in the static graph: the fuse.gqa_static family's root.
const MERGE0: &str = "model.layers.0.self_attn/merge_heads/Reshape";
const STATIC_Q0: &str = "model.layers.0.self_attn.q_rotary/RotaryEmbedding";
const STATIC_K0: &str = "model.layers.0.self_attn.k_rotary/RotaryEmbedding";

/// Sets the head-split outputs of layer 0 (q, k, v after Transpose) to [b, heads, s, head].
fn static_heads(m: &mut Model, q: (i64, i64), kv: (i64, i64)) {
    let bnsh = |h: i64, d: i64| [Dim::sym("batch_size"), Dim::Fixed(h), Dim::sym("sequence_length"), Dim::Fixed(d)];
    set_type(m, "model.layers.0.self_attn/q_heads/Transpose/out", ir::DType::F32, &bnsh(q.0, q.1));
    for side in ["k", "v"] {
        set_type(m, &format!("model.layers.0.self_attn/{side}_heads/Transpose/out"), ir::DType::F32, &bnsh(kv.0, kv.1));
    }
}

/// Sets the 3-D q, k, v that the static graph splits into heads (after RoPE for q and k).
fn static_widths(m: &mut Model, q: i64, kv: i64) {
    let bs = |w: i64| [Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(w)];
    set_type(m, "model.layers.0.self_attn.q_rotary/RotaryEmbedding/out", ir::DType::F32, &bs(q));
    set_type(m, "model.layers.0.self_attn.k_rotary/RotaryEmbedding/out", ir::DType::F32, &bs(kv));
    set_type(m, "model.layers.0.self_attn.v_proj/MatMul/out", ir::DType::F32, &bs(kv));
}

fn static_past(m: &mut Model, dims: Vec<Dim>) {
    let v = m.graph.inputs.iter_mut().find(|v| v.name == "past_key_values.0.key").unwrap();
    v.shape = Some(dims);
}

fn narrow_caches(m: &mut Model) {
    for name in ["rotary_emb.cos_cache", "rotary_emb.sin_cache"] {
        set_init(m, name, Recipe::from_f32("narrow cache", vec![256, 4], &[0.0; 1024]));
    }
}

/// Breakers of the fuse.gqa_static family, on tiny-llama's (or tiny-mistral-sw's) static graph.
/// A breaker keeps every earlier step passing: the head splits stay consistent with the head
/// counts and head size a later check is broken through.
fn static_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, MERGE0).set_attr(Attr::int("allowzero", 1)),
        // attention_mask through an Identity for both of its readers the rule ties together
        // (the key padding's Concat and the write index's Shape).
        "mask_from_input" => |m| {
            let concat = m.graph.nodes.iter().find(|n| n.op == "Concat" && n.inputs.first().is_some_and(|i| i == "attention_mask")).unwrap().name.clone();
            identity_before(m, "attention_mask", &concat);
            for i in node_mut(m, "kv_cache/write_indices/total_len").inputs.iter_mut() {
                *i = "attention_mask/copy".into();
            }
        },
        "past_from_inputs" => |m| identity_before(m, "past_key_values.0.key", "model.layers.0.self_attn/key_cache/TensorScatter"),
        // q as 4-D [b, s, 1, 64] before the split (its last dim still gives 4 heads of 16).
        "q_3d" => |m| {
            for q in ["model.layers.0.self_attn.q_proj/MatMul/out", "model.layers.0.self_attn.q_rotary/RotaryEmbedding/out"] {
                set_type(m, q, ir::DType::F32, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(1), Dim::Fixed(64)]);
            }
        },
        // Three query heads over two key/value heads (q 48 wide).
        "heads_divide" => |m| {
            node_mut(m, STATIC_Q0).set_attr(Attr::int("num_heads", 3));
            static_widths(m, 48, 32);
            static_heads(m, (3, 16), (2, 16));
        },
        // A 5-D cache (heads and head size where they were).
        "cache_bnsh" => |m| {
            static_past(m, vec![Dim::sym("batch_size"), Dim::Fixed(2), Dim::Fixed(64), Dim::Fixed(16), Dim::Fixed(1)]);
        },
        "split_heads" => |m| static_heads(m, (4, 8), (2, 16)),
        // Gemma 2's score cap on layer 0's attention; the harness's (webgpu) limits say its
        // GroupQueryAttention ignores it.
        "softcap_in_kernel" => |m| {
            let attn = m.graph.nodes.iter_mut().find(|n| n.op == "Attention" && n.name.starts_with("model.layers.0.")).expect("layer 0's Attention");
            attn.set_attr(Attr::float("softcap", 50.0));
        },
        // Head size 12 throughout (q 48, k/v 24 wide): a multiple of neither 8 nor 16.
        "head_size_cpu" => |m| {
            static_widths(m, 48, 24);
            static_heads(m, (4, 12), (2, 12));
            static_past(m, vec![Dim::sym("batch_size"), Dim::Fixed(2), Dim::Fixed(64), Dim::Fixed(12)]);
        },
        "caches_2d" => |m| set_init(m, "rotary_emb.cos_cache", Recipe::from_f32("3-D cache", vec![1, 256, 8], &[0.0; 2048])),
        "full_rotary" => narrow_caches,
        "partial_rotary_cache" => |m| {
            for node in [STATIC_Q0, STATIC_K0] {
                node_mut(m, node).set_attr(Attr::int("rotary_embedding_dim", 8));
            }
        },
        "partial_rotary_cpu" => |m| {
            for node in [STATIC_Q0, STATIC_K0] {
                node_mut(m, node).set_attr(Attr::int("rotary_embedding_dim", 8));
            }
            narrow_caches(m);
        },
        "length_free_caches" => |m| {
            for node in [STATIC_Q0, STATIC_K0] {
                for i in node_mut(m, node).inputs.iter_mut().filter(|i| *i == "rotary_emb.cos_cache") {
                    *i = "rotary_emb.cos_cache/copy".into();
                }
            }
            add_node(m, "rotary_emb.cos_cache/Identity", "Identity", &["rotary_emb.cos_cache"], "rotary_emb.cos_cache/copy");
        },
        "let.window" => |m| set_init(m, "attn_mask_window3/window", Recipe::from_i64("two widths", vec![2], &[3, 3])),
        "window_positive" => |m| set_init(m, "attn_mask_window3/window", Recipe::from_i64("zero width", vec![], &[0])),
        // The graph as it is: the harness declares limits.gqa_window = 0 for this step.
        "window_in_kernel" => |_| {},
        // q's width unknown: no head count to read from it.
        "let.nh" => |m| set_type(m, "model.layers.0.self_attn.q_rotary/RotaryEmbedding/out", ir::DType::F32, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::sym("width")]),
        "let.nkv" => |m| static_past(m, vec![Dim::sym("batch_size"), Dim::sym("kv_heads"), Dim::Fixed(64), Dim::Fixed(16)]),
        _ => return None,
    };
    Some(b)
}

fn gpt_oss() -> Model {
    generic("tiny-gpt-oss")
}

/// fuse.moe.swiglu_limit on tiny-gpt-oss's first MoE block (scope `model.layers.0.mlp`).
fn moe_gpt_oss_step(step: &str) -> Option<Breaker> {
    const S: &str = "model.layers.0.mlp";
    const E: &str = "model.layers.0.mlp.experts";
    const ROUTER: &str = "model.layers.0.mlp.router/MatMul";
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, "model.layers.0.mlp/ReduceSum").set_attr(Attr::int("keepdims", 1)),
        "let.limit" => |m| set_init(m, &format!("{E}.act/limit"), Recipe::from_f32("two limits", vec![2], &[2.0, 2.0])),
        "let.alpha" => |m| set_init(m, &format!("{E}.act/alpha"), Recipe::from_f32("two alphas", vec![2], &[1.702, 1.702])),
        // Gate and up both read from the even columns.
        "one_pair_split" => |m| set_init(m, &format!("{E}.gate_up/odd"), Recipe::from_i64("even", vec![], &[0])),
        // up + 2 instead of up + 1 (MoE's activation_beta is the 1).
        "clamp_bounds" => |m| set_init(m, &format!("{E}.act/one"), Recipe::from_f32("two", vec![], &[2.0])),
        "expert_axes" => |m| set_init(m, &format!("{S}/last_axis"), Recipe::from_i64("axis 2", vec![1], &[2])),
        "weights_constant" => |m| identity_before(m, &format!("{E}.down.bias"), &format!("{E}.down/bias_by_expert")),
        // A down bias narrower than the hidden size.
        "expert_stacks" => |m| set_init(m, &format!("{E}.down.bias"), Recipe::from_f32("narrow bias", vec![4, 32], &[0.0; 128])),
        "float_type" => |m| {
            let x = node_mut(m, ROUTER).inputs[0].clone();
            set_type(m, &x, ir::DType::BF16, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(64)]);
        },
        // A router bias of 3 experts for 4.
        "router_bias" => |m| set_init(m, "model.layers.0.mlp.router.bias", Recipe::from_f32("3 experts", vec![3], &[0.0; 3])),
        "rank_count" => |m| set_init(m, &format!("{S}/rank/other_axis"), Recipe::from_i64("axis -1", vec![1], &[-1])),
        "sum_axes" => |m| {
            let axes = format!("{S}/sequence_axis");
            m.graph.initializers.push((axes.clone(), Recipe::from_i64("axis 2", vec![1], &[2])));
            node_mut(m, "model.layers.0.mlp/ReduceSum").inputs[1] = axes;
        },
        "norm_axis" => |m| set_init(m, &format!("{S}/normalize/axes"), Recipe::from_i64("axis -2", vec![1], &[-2])),
        "router" => |m| identity_before(m, "model.layers.0.mlp.router.weight", ROUTER),
        "tokens_3d" => |m| {
            let x = node_mut(m, ROUTER).inputs[0].clone();
            set_type(m, &x, ir::DType::F32, &[Dim::sym("tokens"), Dim::Fixed(64)]);
        },
        "top_k" => |m| set_init(m, &format!("{S}/top_k"), Recipe::from_f32("top_k = 7", vec![], &[7.0])),
        "let.topk" => |m| set_init(m, &format!("{S}/top_k"), Recipe::from_f32("top_k = 2.5", vec![], &[2.5])),
        "zero_unrouted" => |m| set_init(m, &format!("{S}/zero"), Recipe::from_f32("zero = 1", vec![], &[1.0])),
        _ => return None,
    };
    Some(b)
}

/// fuse.gqa_sink (layer 1, full attention) and fuse.gqa_sink.window (layer 0, window 3) on
/// tiny-gpt-oss, one breaker table per layer, written once by the macro.
macro_rules! sink_steps {
    ($name:ident, $layer:literal, $mask:literal) => {
        fn $name(step: &str) -> Option<Breaker> {
            const A: &str = concat!("model.layers.", $layer, ".self_attn/sink_attention");
            const L: &str = concat!("model.layers.", $layer, ".self_attn");
            const ROOT: &str = concat!("model.layers.", $layer, ".self_attn/sink_attention");
            const QROT: &str = concat!("model.layers.", $layer, ".self_attn.q_rotary/RotaryEmbedding");
            const KROT: &str = concat!("model.layers.", $layer, ".self_attn.k_rotary/RotaryEmbedding");
            const PAST: &str = concat!("past_key_values.", $layer, ".key");
            fn caches(m: &mut Model, cols: usize) {
                for name in ["rotary_emb.cos_cache", "rotary_emb.sin_cache"] {
                    set_init(m, name, Recipe::from_f32("narrow cache", vec![8192, cols], &vec![0.0; 8192 * cols]));
                }
            }
            fn rotary_dim(m: &mut Model, dim: i64) {
                for n in [QROT, KROT] {
                    node_mut(m, n).set_attr(Attr::int("rotary_embedding_dim", dim));
                }
            }
            let b: Breaker = match step {
                "match.out" => |m| node_mut(m, ROOT).set_attr(Attr::int("allowzero", 1)),
                "let.scale" => |m| set_init(m, &format!("{A}/scale"), Recipe::from_f32("two scales", vec![2], &[0.25, 0.25])),
                // The mask unsqueezed on axis 2 instead of 1.
                "group_axes" => |m| set_init(m, &format!("{A}/mask_axis"), Recipe::from_i64("axis 2", vec![1], &[2])),
                // Two columns sliced off instead of the sink's one.
                "sink_column_dropped" => |m| set_init(m, &format!("{A}/drop/end"), Recipe::from_i64("end -2", vec![1], &[-2])),
                "masked_out" => |m| set_init(m, &format!("{A}/neg_inf"), Recipe::from_f32("-1e4", vec![], &[-1e4])),
                "sinks_per_head" => |m| set_init(m, &format!("{L}.sinks"), Recipe::from_f32("3 sinks", vec![3], &[0.0; 3])),
                "sinks_dtype" => |m| set_init(m, &format!("{L}.sinks"), Recipe::from_f32("f16 sinks", vec![4], &[0.0; 4]).cast(ir::DType::F16)),
                "mask_from_input" => |m| identity_before(m, "attention_mask", concat!($mask, "/padding")),
                "past_from_inputs" => |m| identity_before(m, PAST, &format!("{A}/key_cache/Concat")),
                "q_3d" => |m| {
                    let heads = [Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(4), Dim::Fixed(16)];
                    set_type(m, &format!("{L}.q_proj/Add/out"), ir::DType::F32, &heads);
                },
                "heads_divide" => |m| node_mut(m, KROT).set_attr(Attr::int("num_heads", 3)),
                "cache_bnsh" => |m| node_mut(m, KROT).set_attr(Attr::int("num_heads", 1)),
                "head_size_cpu" => |m| {
                    let v = m.graph.inputs.iter_mut().find(|v| v.name == PAST).unwrap();
                    v.shape.as_mut().unwrap()[3] = Dim::Fixed(8);
                },
                "caches_2d" => |m| set_init(m, "rotary_emb.cos_cache", Recipe::from_f32("3-D cache", vec![1, 8192, 8], &vec![0.0; 8192 * 8])),
                "full_rotary" => |m| caches(m, 4),
                "partial_rotary_cache" => |m| rotary_dim(m, 8),
                "partial_rotary_cpu" => |m| {
                    rotary_dim(m, 8);
                    caches(m, 4);
                },
                // The caches computed by a node (as LongRoPE's selection), for both rotations.
                "length_free_caches" => |m| {
                    add_node(m, "cos/Identity", "Identity", &["rotary_emb.cos_cache"], "cos/copy");
                    for n in [QROT, KROT] {
                        node_mut(m, n).inputs[1] = "cos/copy".into();
                    }
                },
                "let.window" => |m| set_init(m, concat!($mask, "/window"), Recipe::from_i64("two widths", vec![2], &[3, 3])),
                "window_positive" => |m| set_init(m, concat!($mask, "/window"), Recipe::from_i64("zero width", vec![], &[0])),
                "window_in_kernel" => |_| {},
                _ => return None,
            };
            Some(b)
        }
    };
}
sink_steps!(sink_full_step, "1", "attn_mask");
sink_steps!(sink_window_step, "0", "attn_mask_window3");

fn flint() -> Model {
    generic("tiny-flint")
}

/// fuse.gqa_sink.unrotated on tiny-flint's layer 0 (full attention, no RoPE: q and k come from
/// the q/k norms). The head counts are read from q's width and the cache (`let.nh`,
/// `let.nkv`), so a head check is broken by changing widths, the cache and the sinks together,
/// every earlier step still passing.
macro_rules! sink_unrotated_steps {
    ($name:ident, $layer:literal, $mask:literal, $sinks:literal, $q:literal) => {
        fn $name(step: &str) -> Option<Breaker> {
            const A: &str = concat!("model.layers.", $layer, ".self_attn/sink_attention");
            const SINKS: &str = concat!("model.layers.", $layer, ".self_attn.", $sinks);
            const PAST: &str = concat!("past_key_values.", $layer, ".key");
            fn width(m: &mut Model, q: i64) {
                set_type(m, $q, ir::DType::F32, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(q)]);
            }
            fn past(m: &mut Model, dims: Vec<Dim>) {
                m.graph.inputs.iter_mut().find(|v| v.name == PAST).unwrap().shape = Some(dims);
            }
            let b: Breaker = match step {
                "match.out" => |m| node_mut(m, A).set_attr(Attr::int("allowzero", 1)),
                "let.scale" => |m| set_init(m, &format!("{A}/scale"), Recipe::from_f32("two scales", vec![2], &[0.25, 0.25])),
                "group_axes" => |m| set_init(m, &format!("{A}/mask_axis"), Recipe::from_i64("axis 2", vec![1], &[2])),
                "sink_column_dropped" => |m| set_init(m, &format!("{A}/drop/end"), Recipe::from_i64("end -2", vec![1], &[-2])),
                "masked_out" => |m| set_init(m, &format!("{A}/neg_inf"), Recipe::from_f32("-1e4", vec![], &[-1e4])),
                "sinks_per_head" => |m| set_init(m, SINKS, Recipe::from_f32("3 sinks", vec![3], &[0.0; 3])),
                "sinks_dtype" => |m| set_init(m, SINKS, Recipe::from_f32("f16 sinks", vec![4], &[0.0; 4]).cast(ir::DType::F16)),
                "mask_from_input" => |m| identity_before(m, "attention_mask", concat!($mask, "/padding")),
                "past_from_inputs" => |m| identity_before(m, PAST, &format!("{A}/key_cache/Concat")),
                // A q width the graph does not know: no head count to read.
                "let.nh" => |m| set_type(m, $q, ir::DType::F32, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::sym("q_width")]),
                // A cache whose head count the graph does not know.
                "let.nkv" => |m| past(m, vec![Dim::sym("batch_size"), Dim::sym("kv_heads"), Dim::sym("past_sequence_length"), Dim::Fixed(16)]),
                // q as [b, s, 1, 64]: still 4 heads of 16 by its last axis, but not 3-D.
                "q_3d" => |m| set_type(m, $q, ir::DType::F32, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(1), Dim::Fixed(64)]),
                // Three query heads (q 48 wide, three sinks) over two key/value heads.
                "heads_divide" => |m| {
                    width(m, 48);
                    set_init(m, SINKS, Recipe::from_f32("3 sinks", vec![3], &[0.0; 3]));
                },
                // A 5-D cache, heads and head size where they were.
                "cache_bnsh" => |m| past(m, vec![Dim::sym("batch_size"), Dim::Fixed(2), Dim::sym("past_sequence_length"), Dim::Fixed(16), Dim::Fixed(1)]),
                // Head size 12: q 48 wide is still 4 heads, the cache [b, 2, past, 12].
                "head_size_cpu" => |m| {
                    width(m, 48);
                    past(m, vec![Dim::sym("batch_size"), Dim::Fixed(2), Dim::sym("past_sequence_length"), Dim::Fixed(12)]);
                },
                _ => return None,
            };
            Some(b)
        }
    };
}
sink_unrotated_steps!(sink_unrotated_full_step, "0", "attn_mask", "softmax_offset", "model.layers.0.self_attn.q_norm/Reshape_merge/out");

/// tiny-bloom's generic graph: ALiBi's float mask `attn_mask/alibi` on every Attention.
fn bloom() -> Model {
    generic("tiny-bloom")
}

fn bloom_static() -> Model {
    static_generic("tiny-bloom")
}

const BLOOM_ATTN0: &str = "transformer.h.0.self_attention/Attention";
const BLOOM_MERGE0: &str = "transformer.h.0.self_attention/merge_heads/Reshape";
const BLOOM_ATTN0_STATIC: &str = "transformer.h.0.self_attention/Attention";
const ALIBI: &str = "attn_mask/alibi/out";

/// The ALiBi mask recorded as one row for every head ([batch, 1, seq, keys]).
fn alibi_one_row(m: &mut Model) {
    let keys = m.graph.value_info.iter().find(|v| v.name == ALIBI).and_then(|v| v.shape.as_ref()?.get(3).cloned()).expect("the mask's recorded shape");
    set_type(m, ALIBI, ir::DType::F32, &[Dim::sym("batch_size"), Dim::Fixed(1), Dim::sym("sequence_length"), keys]);
}

/// Sets layer 0's past key head size (dim 3) to `head`.
fn bloom_past_head(m: &mut Model, head: i64) {
    let v = m.graph.inputs.iter_mut().find(|v| v.name == "past_key_values.0.key").unwrap();
    v.shape.as_mut().unwrap()[3] = Dim::Fixed(head);
}

/// Breakers of fuse.gqa_alibi on tiny-bloom's layer 0 (6 heads of 16, no grouping).
fn alibi_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, BLOOM_ATTN0).set_attr(Attr::int("is_causal", 1)),
        "softcap_in_kernel" => |m| node_mut(m, BLOOM_ATTN0).set_attr(Attr::float("softcap", 50.0)),
        "mask_from_input" => mask_through_identity,
        "past_from_inputs" => |m| identity_before(m, "past_key_values.0.key", BLOOM_ATTN0),
        // q as 4-D [b, s, 1, 96] (its last dim still one row of the mask per head).
        "q_3d" => |m| {
            let q = node_mut(m, BLOOM_ATTN0).inputs[0].clone();
            set_type(m, &q, ir::DType::F32, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(1), Dim::Fixed(96)]);
        },
        // Four query heads over six key/value heads.
        "heads_divide" => |m| node_mut(m, BLOOM_ATTN0).set_attr(Attr::int("q_num_heads", 4)),
        // One key/value head where the cache holds six.
        "cache_bnsh" => |m| node_mut(m, BLOOM_ATTN0).set_attr(Attr::int("kv_num_heads", 1)),
        // Head size 12 in the cache and in q (6 x 12 wide): a multiple of neither 8 nor 16.
        "head_size_cpu" => |m| {
            bloom_past_head(m, 12);
            let q = node_mut(m, BLOOM_ATTN0).inputs[0].clone();
            set_type(m, &q, ir::DType::F32, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(72)]);
        },
        "bias_per_head" => alibi_one_row,
        _ => return None,
    };
    Some(b)
}

/// tiny-bloom's static layer 0 with `q` = (heads, head size) and `kv` likewise: the projections'
/// widths, the head splits, both caches and the mask's rows kept consistent, so that only the
/// check a breaker aims at fails.
fn bloom_static_heads(m: &mut Model, q: (i64, i64), kv: (i64, i64)) {
    let l0 = "transformer.h.0.self_attention";
    let bs = |w: i64| [Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(w)];
    let bnsh = |h: i64, d: i64| [Dim::sym("batch_size"), Dim::Fixed(h), Dim::sym("sequence_length"), Dim::Fixed(d)];
    set_type(m, &format!("{l0}.query_key_value.q/Add/out"), ir::DType::F32, &bs(q.0 * q.1));
    set_type(m, &format!("{l0}/q_heads/Transpose/out"), ir::DType::F32, &bnsh(q.0, q.1));
    for side in ["k", "v"] {
        set_type(m, &format!("{l0}.query_key_value.{side}/Add/out"), ir::DType::F32, &bs(kv.0 * kv.1));
        set_type(m, &format!("{l0}/{side}_heads/Transpose/out"), ir::DType::F32, &bnsh(kv.0, kv.1));
    }
    for cache in ["past_key_values.0.key", "past_key_values.0.value"] {
        let v = m.graph.inputs.iter_mut().find(|v| v.name == cache).unwrap();
        v.shape = Some(vec![Dim::sym("batch_size"), Dim::Fixed(kv.0), Dim::Fixed(64), Dim::Fixed(kv.1)]);
    }
    set_type(m, ALIBI, ir::DType::F32, &[Dim::sym("batch_size"), Dim::Fixed(q.0), Dim::sym("sequence_length"), Dim::Fixed(64)]);
}

/// Breakers of fuse.gqa_alibi.static on tiny-bloom's 64-slot static graph.
fn alibi_static_step(step: &str) -> Option<Breaker> {
    let b: Breaker = match step {
        "match.out" => |m| node_mut(m, BLOOM_MERGE0).set_attr(Attr::int("allowzero", 1)),
        "mask_from_input" => |m| {
            let concat = m.graph.nodes.iter().find(|n| n.op == "Concat" && n.inputs.first().is_some_and(|i| i == "attention_mask")).unwrap().name.clone();
            identity_before(m, "attention_mask", &concat);
            for i in node_mut(m, "kv_cache/write_indices/total_len").inputs.iter_mut() {
                *i = "attention_mask/copy".into();
            }
        },
        "softcap_in_kernel" => |m| node_mut(m, BLOOM_ATTN0_STATIC).set_attr(Attr::float("softcap", 50.0)),
        "past_from_inputs" => |m| identity_before(m, "past_key_values.0.key", "transformer.h.0.self_attention/key_cache/TensorScatter"),
        "split_heads" => |m| set_type(m, "transformer.h.0.self_attention/q_heads/Transpose/out", ir::DType::F32, &[Dim::sym("batch_size"), Dim::Fixed(12), Dim::sym("sequence_length"), Dim::Fixed(8)]),
        "q_3d" => |m| set_type(m, "transformer.h.0.self_attention.query_key_value.q/Add/out", ir::DType::F32, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::Fixed(1), Dim::Fixed(96)]),
        "bias_per_head" => alibi_one_row,
        // Four query heads over six key/value heads.
        "heads_divide" => |m| bloom_static_heads(m, (4, 16), (6, 16)),
        // A 5-D key cache (heads and head size where they were).
        "cache_bnsh" => |m| {
            let v = m.graph.inputs.iter_mut().find(|v| v.name == "past_key_values.0.key").unwrap();
            v.shape = Some(vec![Dim::sym("batch_size"), Dim::Fixed(6), Dim::Fixed(64), Dim::Fixed(16), Dim::Fixed(1)]);
        },
        // Head size 12 throughout: a multiple of neither 8 nor 16.
        "head_size_cpu" => |m| bloom_static_heads(m, (6, 12), (6, 12)),
        // q's width unknown: no head count to read from it.
        "let.nh" => |m| set_type(m, "transformer.h.0.self_attention.query_key_value.q/Add/out", ir::DType::F32, &[Dim::sym("batch_size"), Dim::sym("sequence_length"), Dim::sym("width")]),
        "let.nkv" => |m| {
            let v = m.graph.inputs.iter_mut().find(|v| v.name == "past_key_values.0.value").unwrap();
            v.shape = Some(vec![Dim::sym("batch_size"), Dim::sym("kv_heads"), Dim::Fixed(64), Dim::Fixed(16)]);
        },
        _ => return None,
    };
    Some(b)
}
