//! No panic on any config.json value: every key the reader knows, set to each kind of wrong
//! value, either builds or fails with an error that names the key (or the tensor whose shape
//! the value contradicts).

use models::{tasks::causal_lm, BuildOptions, Checkpoint};
use serde_json::{json, Map, Value};
#[path = "../../tests/registry/mod.rs"]
mod fixture_registry;
use fixture_registry::fixture;


const KEYS: &[&str] = &[
    "model_type",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "max_position_embeddings",
    "rms_norm_eps",
    "tie_word_embeddings",
    "attention_bias",
    "mlp_bias",
    "hidden_act",
    "rope_theta",
    "rope_scaling",
    "rope_parameters",
    "partial_rotary_factor",
    "sliding_window",
    "use_sliding_window",
    "max_window_layers",
    "layer_types",
    "original_max_position_embeddings",
    "bos_token_id",
    "eos_token_id",
];

fn bad_values() -> Vec<Value> {
    vec![
        json!(null),
        json!(-1),
        json!(0),
        json!(1),
        json!(3),
        json!(1.5),
        json!(1e30),
        json!("x"),
        json!([]),
        json!(["sliding_attention", "x"]),
        json!({}),
        json!({"rope_type": "yarn"}),
        json!({"rope_type": "longrope", "short_factor": [1.0], "long_factor": "x"}),
        json!({"type": "llama3", "factor": -2.0, "low_freq_factor": 0, "high_freq_factor": 0}),
        json!(true),
    ]
}

#[test]
fn no_config_value_panics() {
    let src = fixture("tiny-llama");
    let base: Map<String, Value> = serde_json::from_slice(&std::fs::read(src.join("config.json")).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(src.join("model.safetensors"), dir.path().join("model.safetensors")).unwrap();
    let mut cases = 0;
    for key in KEYS {
        for value in bad_values() {
            let mut config = base.clone();
            config.insert(key.to_string(), value.clone());
            std::fs::write(dir.path().join("config.json"), serde_json::to_vec(&config).unwrap()).unwrap();
            let result = std::panic::catch_unwind(|| {
                let ckpt = Checkpoint::open(dir.path())?;
                causal_lm::build(&ckpt, &BuildOptions::default()).map(|_| ())
            });
            let outcome = result.unwrap_or_else(|_| panic!("panicked on {key} = {value}"));
            if let Err(e) = outcome {
                let msg = e.to_string();
                let names_something = msg.contains(key)
                    || msg.contains("tensor `")
                    || msg.contains("rotary dimension")
                    || msg.contains("rope type")
                    || msg.contains("model_type");
                assert!(names_something, "{key} = {value}: message names neither key nor tensor: {msg}");
            }
            cases += 1;
        }
    }
    assert_eq!(cases, KEYS.len() * bad_values().len());
}
