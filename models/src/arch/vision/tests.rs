//! Refusals by key, before anything is built, and the sizes read from `vision_config`.

use super::qwen2_5_vl::QwenVision;
use super::siglip::Gemma3Vision;
use super::supported;
use crate::DecoderConfig;
use serde_json::{json, Value};
use std::path::Path;

const TEXT: &str = r#"{"model_type":"qwen2_5_vl_text","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":512}"#;

fn qwen(vision: Value) -> Value {
    json!({"model_type": "qwen2_5_vl", "text_config": serde_json::from_str::<Value>(TEXT).unwrap(), "vision_config": vision})
}

fn qwen_vision() -> Value {
    json!({"depth": 2, "fullatt_block_indexes": [1], "hidden_act": "silu", "hidden_size": 32, "in_channels": 3,
           "intermediate_size": 64, "model_type": "qwen2_5_vl_vision", "num_heads": 2, "out_hidden_size": 64,
           "patch_size": 14, "rope_parameters": {"rope_theta": 10000.0, "rope_type": "axial"},
           "spatial_merge_size": 2, "temporal_patch_size": 2, "window_size": 56})
}

fn gemma(top: &[(&str, Value)], vision: &[(&str, Value)]) -> Value {
    let mut v = json!({"hidden_act": "gelu_pytorch_tanh", "hidden_size": 32, "image_size": 128, "intermediate_size": 64,
                       "layer_norm_eps": 1e-6, "model_type": "siglip_vision_model", "num_attention_heads": 2,
                       "num_channels": 3, "num_hidden_layers": 2, "patch_size": 4, "vision_use_head": false});
    for (k, x) in vision {
        v[*k] = x.clone();
    }
    let text = json!({"model_type": "gemma3_text", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                      "head_dim": 16, "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 512});
    let mut c = json!({"model_type": "gemma3", "mm_tokens_per_image": 256, "text_config": text, "vision_config": v});
    for (k, x) in top {
        c[*k] = x.clone();
    }
    c
}

fn parse(v: &Value) -> DecoderConfig {
    DecoderConfig::parse(Path::new("config.json"), &v.to_string()).unwrap()
}

fn refusal(v: &Value) -> String {
    supported(&parse(v)).expect_err("refused").to_string()
}

fn with(mut v: Value, key: &str, x: Value) -> Value {
    v[key] = x;
    v
}

#[test]
fn qwen_sizes_come_from_vision_config() {
    let c = parse(&qwen(qwen_vision()));
    supported(&c).unwrap();
    let v = QwenVision::read(&c.path, c.multimodal.as_ref().unwrap(), 64).unwrap();
    assert_eq!((v.depth, v.hidden, v.heads, v.head_dim, v.intermediate), (2, 32, 2, 16, 64));
    assert_eq!((v.patch, v.temporal_patch, v.merge, v.window_side, v.in_channels), (14, 2, 2, 2, 3));
    assert_eq!((v.full_attention.clone(), v.out_hidden, v.rope_theta), (vec![1], 64, 10000.0));
    // Published configs spell the channels `in_chans` and the theta as a legacy key.
    let mut legacy = qwen_vision();
    let o = legacy.as_object_mut().unwrap();
    o.remove("in_channels");
    o.remove("rope_parameters");
    o.insert("in_chans".into(), json!(1));
    o.insert("rope_theta".into(), json!(500.0));
    o.insert("window_size".into(), json!(112));
    let c = parse(&qwen(legacy));
    let v = QwenVision::read(&c.path, c.multimodal.as_ref().unwrap(), 64).unwrap();
    assert_eq!((v.in_channels, v.rope_theta, v.window_side), (1, 500.0, 4));
}

#[test]
fn qwen_options_not_built_are_refused_by_key() {
    let cases = [
        (with(qwen_vision(), "hidden_act", json!("quick_gelu")), "vision_config.hidden_act` is \"quick_gelu\""),
        (with(qwen_vision(), "model_type", json!("qwen2_vl")), "vision_config.model_type` is \"qwen2_vl\""),
        (with(qwen_vision(), "fullatt_block_indexes", json!([2])), "vision_config.fullatt_block_indexes` names block 2"),
        (with(qwen_vision(), "window_size", json!(20)), "vision_config.window_size` 20"),
        (with(qwen_vision(), "out_hidden_size", json!(48)), "vision_config.out_hidden_size` is 48"),
        (with(qwen_vision(), "num_heads", json!(16)), "vision_config.num_heads` 16"),
        (with(qwen_vision(), "rope_parameters", json!({"rope_type": "yarn", "rope_theta": 1.0})), "vision_config.rope_parameters.rope_type` is \"yarn\""),
    ];
    for (vision, expected) in cases {
        let e = supported(&parse(&qwen(vision))).expect_err(expected).to_string();
        assert!(e.contains(expected), "{e}");
    }
    let mut missing = qwen_vision();
    missing.as_object_mut().unwrap().remove("depth");
    assert!(refusal(&qwen(missing)).contains("required key `vision_config.depth` is missing"));
}

#[test]
fn gemma3_options_not_built_are_refused_by_key() {
    let c = parse(&gemma(&[], &[]));
    supported(&c).unwrap();
    let g = Gemma3Vision::read(&c.path, c.multimodal.as_ref().unwrap(), 64).unwrap();
    assert_eq!((g.patches_per_side(), g.pool_kernel(), g.eps, g.text_hidden), (32, 2, 1e-6, 64));
    let cases = [
        (gemma(&[("mm_tokens_per_image", json!(64))], &[]), "key `mm_tokens_per_image` is 64"),
        (gemma(&[], &[("vision_use_head", json!(true))]), "key `vision_config.vision_use_head` is true"),
        (gemma(&[], &[("hidden_act", json!("mish"))]), "key `vision_config.hidden_act` is \"mish\""),
        (gemma(&[], &[("model_type", json!("siglip2_vision_model"))]), "key `vision_config.model_type` is \"siglip2_vision_model\""),
        // 30x30 patches do not pool into 16x16 tokens.
        (gemma(&[], &[("image_size", json!(120))]), "does not tile the 30x30 patch grid"),
    ];
    for (config, expected) in cases {
        let e = refusal(&config);
        assert!(e.contains(expected), "{e}");
    }
}

#[test]
fn other_model_types_and_text_only_configs_are_refused() {
    let e = refusal(&with(qwen(qwen_vision()), "model_type", json!("qwen2_vl")));
    assert!(e.contains("unsupported model_type `qwen2_vl`") && e.contains("quick_gelu"), "{e}");
    // A Qwen3-VL checkpoint must carry a Qwen3-VL vision_config.
    let e = refusal(&with(qwen(qwen_vision()), "model_type", json!("qwen3_vl")));
    assert!(e.contains("key `vision_config.model_type` is \"qwen2_5_vl_vision\""), "{e}");
    let e = refusal(&with(qwen(qwen_vision()), "model_type", json!("llava")));
    assert!(e.contains("unsupported model_type `llava`") && e.contains("qwen2_5_vl, qwen3_vl, gemma3"), "{e}");
    let text_only = DecoderConfig::parse(Path::new("config.json"), TEXT).unwrap();
    let e = supported(&text_only).unwrap_err().to_string();
    assert!(e.contains("has no `vision_config`"), "{e}");
}

fn qwen3_vision() -> Value {
    json!({"model_type": "qwen3_vl", "depth": 3, "hidden_size": 32, "num_heads": 2, "intermediate_size": 48,
           "patch_size": 4, "temporal_patch_size": 2, "in_channels": 3, "spatial_merge_size": 2, "out_hidden_size": 64,
           "num_position_embeddings": 36, "deepstack_visual_indexes": [0, 2], "hidden_act": "gelu_pytorch_tanh"})
}

#[test]
fn qwen3_sizes_and_refusals() {
    let config = |vision: Value| with(qwen(vision), "model_type", json!("qwen3_vl"));
    let c = parse(&config(qwen3_vision()));
    supported(&c).unwrap();
    let v = super::qwen3_vl::Qwen3Vision::read(&c.path, c.multimodal.as_ref().unwrap(), 64).unwrap();
    assert_eq!((v.depth, v.head_dim, v.position_side, v.deepstack.clone(), v.patch_dim()), (3, 16, 6, vec![0, 2], 96));
    let cases = [
        (with(qwen3_vision(), "num_position_embeddings", json!(40)), "key `vision_config.num_position_embeddings` is 40"),
        (with(qwen3_vision(), "deepstack_visual_indexes", json!([1, 3])), "key `vision_config.deepstack_visual_indexes` names block 3"),
        (with(qwen3_vision(), "hidden_act", json!("mish")), "key `vision_config.hidden_act` is \"mish\""),
        (with(qwen3_vision(), "out_hidden_size", json!(32)), "key `vision_config.out_hidden_size` is 32"),
        // Three deepstack blocks but two text layers to add them after.
        (with(qwen3_vision(), "deepstack_visual_indexes", json!([0, 1, 2])), "lists 3 blocks, but the text model has only 2 layers"),
    ];
    for (vision, expected) in cases {
        let e = supported(&parse(&config(vision))).expect_err(expected).to_string();
        assert!(e.contains(expected), "{e}");
    }
}
