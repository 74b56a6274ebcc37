//! `genai_config.json`: what onnxruntime-genai needs to run a decoder package. Input and
//! output names are read from the built graph, not assumed.

use ir::Graph;
use models::DecoderConfig;
use serde_json::{json, Map, Value};

/// onnxruntime-genai's model type for a checkpoint `model_type`.
fn runtime_model_type(model_type: &str) -> &str {
    match model_type {
        "llama" | "mistral" | "qwen2" | "qwen3" | "phi3" | "gpt2" | "gemma" | "olmo" | "granite" => model_type,
        _ => "llama",
    }
}

/// Finds a per-layer name pattern (`past_key_values.%d.key`) among the graph's values.
fn layer_pattern(names: &[&str], prefix: &str, suffix: &str) -> Option<String> {
    names
        .iter()
        .any(|n| n.starts_with(prefix) && n.ends_with(suffix))
        .then(|| format!("{prefix}%d{suffix}"))
}

pub fn genai_config(c: &DecoderConfig, graph: &Graph, ep: &str) -> Value {
    let inputs: Vec<&str> = graph.inputs.iter().map(|v| v.name.as_str()).collect();
    let outputs: Vec<&str> = graph.outputs.iter().map(|v| v.name.as_str()).collect();
    let mut io_in = Map::new();
    for name in ["input_ids", "attention_mask", "position_ids"] {
        if inputs.contains(&name) {
            io_in.insert(name.into(), json!(name));
        }
    }
    if let Some(p) = layer_pattern(&inputs, "past_key_values.", ".key") {
        io_in.insert("past_key_names".into(), json!(p));
    }
    if let Some(p) = layer_pattern(&inputs, "past_key_values.", ".value") {
        io_in.insert("past_value_names".into(), json!(p));
    }
    let mut io_out = Map::new();
    if outputs.contains(&"logits") {
        io_out.insert("logits".into(), json!("logits"));
    }
    if let Some(p) = layer_pattern(&outputs, "present.", ".key") {
        io_out.insert("present_key_names".into(), json!(p));
    }
    if let Some(p) = layer_pattern(&outputs, "present.", ".value") {
        io_out.insert("present_value_names".into(), json!(p));
    }
    let provider_options: Vec<Value> = match ep {
        "default" | "cpu" => vec![],
        other => vec![json!({ other: {} })],
    };
    let eos = match c.eos_token_id.as_slice() {
        [one] => json!(one),
        many => json!(many),
    };
    json!({
        "model": {
            "bos_token_id": c.bos_token_id,
            "context_length": c.max_position_embeddings,
            "decoder": {
                "session_options": { "log_id": "onnxruntime-genai", "provider_options": provider_options },
                "filename": "model.onnx",
                "head_size": c.head_dim,
                "hidden_size": c.hidden_size,
                "inputs": io_in,
                "outputs": io_out,
                "num_attention_heads": c.num_attention_heads,
                "num_hidden_layers": c.num_hidden_layers,
                "num_key_value_heads": c.num_key_value_heads,
            },
            "eos_token_id": eos,
            "pad_token_id": c.pad_token_id.or(c.eos_token_id.first().copied()),
            "type": runtime_model_type(&c.model_type),
            "vocab_size": c.vocab_size,
        },
        "search": {
            "diversity_penalty": 0.0,
            "do_sample": false,
            "early_stopping": true,
            "length_penalty": 1.0,
            "max_length": c.max_position_embeddings,
            "min_length": 0,
            "no_repeat_ngram_size": 0,
            "num_beams": 1,
            "num_return_sequences": 1,
            "past_present_share_buffer": false,
            "repetition_penalty": 1.0,
            "temperature": 1.0,
            "top_k": 1,
            "top_p": 1.0,
        },
    })
}
