//! `genai_config.json`: what onnxruntime-genai needs to run a decoder package. Input and
//! output names are read from the built graph, not assumed; search defaults come from the
//! checkpoint's `generation_config.json`; provider options come from the EP table.

use ir::Graph;
use models::DecoderConfig;
use serde_json::{json, Map, Value};

/// Checkpoint `model_type` -> onnxruntime-genai model type (from onnxruntime-genai 0.18's
/// list of decoder types), with the reason when the type differs from the checkpoint's.
const RUNTIME_TYPES: &[(&str, &str, Option<&str>)] = &[
    ("llama", "llama", None),
    ("mistral", "mistral", None),
    ("qwen2", "qwen2", None),
    ("qwen3", "qwen3", None),
    ("phi3", "phi3", None),
    // onnxruntime-genai's `gpt2` type expects the legacy combined `past_%d` cache; our graphs
    // have separate key/value caches like every other decoder.
    ("gpt2", "llama", Some("onnxruntime-genai's `gpt2` type expects a combined past_%d KV cache; this package has separate key/value caches, which its `llama` handling runs")),
    ("gemma", "gemma", None),
    ("gemma2", "gemma2", None),
    // `gemma3` is onnxruntime-genai's vision-language type (it expects a vision sub-model);
    // the text-only checkpoint is its `gemma3_text`.
    ("gemma3_text", "gemma3_text", None),
    // The text models of Qwen2.5-VL and Qwen3-VL built `--text-only`: their sections of
    // multimodal RoPE reduce to plain RoPE for text, which is what the runtime's text types feed.
    ("qwen2_5_vl_text", "qwen2", Some("a `--text-only` build of Qwen2.5-VL's language model: plain RoPE on 2-D position_ids, which onnxruntime-genai's `qwen2` type feeds")),
    ("qwen3_vl_text", "qwen3", Some("a `--text-only` build of Qwen3-VL's language model: plain RoPE on 2-D position_ids, which onnxruntime-genai's `qwen3` type feeds")),
    ("granite", "granite", None),
    ("olmo", "olmo", None),
    // 0.18 lists neither olmo2 nor starcoder2. Both are plain decoders whose differences
    // (norm placement, q/k norms, LayerNorm, biases) live inside the graph; the runtime only
    // sees the I/O names given here, so the nearest listed type runs them.
    ("olmo2", "olmo", Some("onnxruntime-genai 0.18 does not list olmo2; its `olmo` type (the same family, plain decoder handling) runs this package, whose norm placement and q/k norms are inside the graph")),
    ("starcoder2", "llama", Some("onnxruntime-genai 0.18 does not list starcoder2; its `llama` handling (causal decoder, external KV cache, position ids) runs this package, whose LayerNorm, biases and GELU MLP are inside the graph")),
    ("nemotron", "nemotron", None),
    ("smollm3", "smollm3", None),
    ("ernie4_5", "ernie4_5", None),
    ("phi", "phi", None),
    // 0.18 lists `chatglm` (the older ChatGLM checkpoints' own code and cache layout), not the
    // transformers `glm`/`glm4` types; interleaved rotary, post-norms and the fused MLP are
    // inside the graph, so its `llama` handling runs them.
    ("glm", "llama", Some("onnxruntime-genai 0.18 does not list glm (its `chatglm` is the older ChatGLM layout); its `llama` handling runs this package, whose interleaved partial rotary and fused MLP are inside the graph")),
    // 0.18 lists `gptoss` (the spelling the genai builder writes for its own gpt-oss layout);
    // these packages' sinks, windows and experts are inside the graph and their cache is the
    // plain growing one, which its `llama` handling runs (tests/python/test_genai.py).
    ("gpt_oss", "llama", Some("onnxruntime-genai 0.18 lists `gptoss`, the layout its own builder writes; this package's attention sinks, sliding windows and experts are inside the graph with a plain growing KV cache, which its `llama` handling runs (generation checked against transformers' greedy tokens)")),
    ("glm4", "llama", Some("onnxruntime-genai 0.18 does not list glm4 (its `chatglm` is the older ChatGLM layout); its `llama` handling runs this package, whose post-norms, interleaved partial rotary and fused MLP are inside the graph")),
];

/// The runtime treats every plain decoder the same way once the I/O names are given; for a
/// checkpoint type it does not list, `llama` is the type whose handling fits (causal LM,
/// external KV cache, position ids).
const FALLBACK_TYPE: &str = "llama";


/// The runtime model type and, when it is a fallback, a note for the build report.
pub fn runtime_model_type(model_type: &str) -> (&'static str, Option<String>) {
    match RUNTIME_TYPES.iter().find(|(m, _, _)| *m == model_type) {
        Some((_, t, why)) => (t, why.map(|w| format!("genai_config.json type `{t}` for model_type `{model_type}`: {w}"))),
        None => (
            FALLBACK_TYPE,
            Some(format!(
                "onnxruntime-genai does not list model_type `{model_type}`; genai_config.json uses `{FALLBACK_TYPE}`, whose handling fits a causal decoder with an external KV cache"
            )),
        ),
    }
}

/// Finds a per-layer name pattern (`past_key_values.%d.key`) among the graph's values.
fn layer_pattern(names: &[&str], prefix: &str, suffix: &str) -> Option<String> {
    names
        .iter()
        .any(|n| n.starts_with(prefix) && n.ends_with(suffix))
        .then(|| format!("{prefix}%d{suffix}"))
}

/// The `search` section: runtime defaults, overridden by the checkpoint's generation config.
/// `static_len`: a static cache's fixed length, which is then `max_length` (genai allocates the
/// shared buffers of that length; a longer sequence would write past them).
fn search_section(c: &DecoderConfig, generation: Option<&Value>, share_buffer: bool, static_len: Option<i64>) -> Value {
    let mut s = Map::new();
    let get = |k: &str| generation.and_then(|g| g.get(k)).filter(|v| !v.is_null()).cloned();
    let do_sample = get("do_sample").and_then(|v| v.as_bool()).unwrap_or(false);
    s.insert("diversity_penalty".into(), get("diversity_penalty").unwrap_or(json!(0.0)));
    s.insert("do_sample".into(), json!(do_sample));
    s.insert("early_stopping".into(), get("early_stopping").filter(Value::is_boolean).unwrap_or(json!(true)));
    s.insert("length_penalty".into(), get("length_penalty").unwrap_or(json!(1.0)));
    let max_length = match static_len {
        Some(n) => json!(n),
        None => get("max_length").unwrap_or(json!(c.max_position_embeddings)),
    };
    s.insert("max_length".into(), max_length);
    s.insert("min_length".into(), get("min_length").unwrap_or(json!(0)));
    s.insert("no_repeat_ngram_size".into(), get("no_repeat_ngram_size").unwrap_or(json!(0)));
    s.insert("num_beams".into(), get("num_beams").unwrap_or(json!(1)));
    s.insert("num_return_sequences".into(), get("num_return_sequences").unwrap_or(json!(1)));
    s.insert("past_present_share_buffer".into(), json!(share_buffer));
    s.insert("repetition_penalty".into(), get("repetition_penalty").unwrap_or(json!(1.0)));
    s.insert("temperature".into(), get("temperature").unwrap_or(json!(1.0)));
    s.insert("top_k".into(), get("top_k").unwrap_or(json!(if do_sample { 50 } else { 1 })));
    s.insert("top_p".into(), get("top_p").unwrap_or(json!(1.0)));
    Value::Object(s)
}

/// A static cache's length: the fixed third dim of the first past key input when the present
/// key output has the same fixed length (the cache is one buffer of N slots, written with
/// TensorScatter in the standard form or by GroupQueryAttention in place in its static form); a
/// dynamic cache's past length is symbolic and its present grows.
fn static_cache_len(graph: &Graph) -> Option<i64> {
    let past = graph.inputs.iter().find(|v| v.name.starts_with("past_key_values.") && v.name.ends_with(".key"))?;
    let n = match past.shape.as_ref()?.get(2)? {
        ir::Dim::Fixed(n) => *n,
        _ => return None,
    };
    let present = graph.outputs.iter().find(|v| v.name.starts_with("present.") && v.name.ends_with(".key"))?;
    matches!(present.shape.as_ref()?.get(2)?, ir::Dim::Fixed(m) if *m == n).then_some(n)
}

/// Builds `genai_config.json` for a decoder graph. `provider_options` is the EP table's list
/// (empty for the CPU provider). Returns the config and notes for the build report.
pub fn genai_config(
    c: &DecoderConfig,
    graph: &Graph,
    file: &str,
    provider_options: Vec<Value>,
    generation: Option<&Value>,
) -> (Value, Vec<String>) {
    let mut notes = Vec::new();
    let inputs: Vec<&str> = graph.inputs.iter().map(|v| v.name.as_str()).collect();
    let outputs: Vec<&str> = graph.outputs.iter().map(|v| v.name.as_str()).collect();
    let mut io_in = Map::new();
    for name in ["input_ids", "inputs_embeds", "attention_mask", "position_ids"] {
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
    // GroupQueryAttention reads and writes one shared KV buffer in place; so does a static
    // cache (fixed-length past inputs written with TensorScatter).
    let static_len = static_cache_len(graph);
    let share_buffer = static_len.is_some() || graph.nodes.iter().any(|n| n.op == "GroupQueryAttention");
    let ids = TokenIds::of(c, generation);
    if ids.eos.is_empty() {
        notes.push(format!(
            "no end-of-stream id in config.json or generation_config.json: onnxruntime-genai stops at the pad id {} instead (its default), where transformers generates to max_length; set `eos_token_id` in generation_config.json to choose one",
            ids.pad.unwrap_or(0)
        ));
    }
    let (model_type, note) = runtime_model_type(&c.model_type);
    notes.extend(note);
    let mut config = json!({
        "model": {
            "context_length": c.max_position_embeddings,
            "decoder": {
                "session_options": { "log_id": "onnxruntime-genai", "provider_options": provider_options },
                "filename": file,
                "head_size": c.head_dim,
                "hidden_size": c.hidden_size,
                "inputs": io_in,
                "outputs": io_out,
                "num_attention_heads": c.num_attention_heads,
                "num_hidden_layers": c.num_hidden_layers,
                "num_key_value_heads": c.num_key_value_heads,
            },
            "type": model_type,
            "vocab_size": c.vocab_size,
        },
        "search": search_section(c, generation, share_buffer, static_len),
    });
    let model = config["model"].as_object_mut().expect("an object above");
    if let Some(bos) = ids.bos {
        model.insert("bos_token_id".into(), json!(bos));
    }
    match ids.eos.as_slice() {
        [] => {}
        [one] => {
            model.insert("eos_token_id".into(), json!(one));
        }
        many => {
            model.insert("eos_token_id".into(), json!(many));
        }
    }
    if let Some(pad) = ids.pad.or(ids.eos.first().copied()) {
        model.insert("pad_token_id".into(), json!(pad));
    }
    (config, notes)
}

/// The special token ids genai_config.json states: generation_config.json's, else config.json's,
/// id by id (transformers' `generate` reads the generation config, which `from_pretrained` loads
/// from generation_config.json when the checkpoint has one and derives from config.json
/// otherwise: Gemma 2's and Qwen2.5's instruct models list more end ids there). An id stated
/// nowhere is left out (onnxruntime-genai's JSON reader refuses `null`; OpenAI GPT states none)
/// and its defaults apply: 0, and the pad id as end of stream, which [`genai_config`] notes.
struct TokenIds {
    bos: Option<i64>,
    eos: Vec<i64>,
    pad: Option<i64>,
}

impl TokenIds {
    fn of(c: &DecoderConfig, generation: Option<&Value>) -> TokenIds {
        let given = |k: &str| generation.and_then(|g| g.get(k)).filter(|v| !v.is_null());
        let one = |k: &str| given(k).and_then(Value::as_i64);
        let eos = match given("eos_token_id") {
            Some(Value::Array(a)) if !a.is_empty() => a.iter().filter_map(Value::as_i64).collect(),
            Some(v) if v.as_i64().is_some() => v.as_i64().into_iter().collect(),
            _ => c.eos_token_id.clone(),
        };
        TokenIds { bos: one("bos_token_id").or(c.bos_token_id), eos, pad: one("pad_token_id").or(c.pad_token_id) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Special ids: generation_config.json's, else config.json's; an id stated nowhere is left
    /// out (genai's reader refuses `null`; a note says where it then stops), the pad id falling
    /// back to the first end id.
    #[test]
    fn token_ids_come_from_the_generation_config_then_the_config() {
        let config = |ids: &str| models::DecoderConfig::parse(std::path::Path::new("config.json"), &format!(r#"{{"model_type":"openai-gpt","n_embd":64,"n_head":4,"n_layer":2,"vocab_size":512{ids}}}"#)).unwrap();
        let graph = Graph::default();
        let model = |c: &models::DecoderConfig, g: Option<&Value>| genai_config(c, &graph, "model.onnx", vec![], g).0["model"].clone();
        let nulls = config(r#","bos_token_id":null,"eos_token_id":null,"pad_token_id":null"#);
        let m = model(&nulls, Some(&json!({"bos_token_id": 1, "eos_token_id": [2, 5]})));
        assert_eq!((m["bos_token_id"].clone(), m["eos_token_id"].clone(), m["pad_token_id"].clone()), (json!(1), json!([2, 5]), json!(2)));
        let (config_of_nulls, notes) = genai_config(&nulls, &graph, "model.onnx", vec![], None);
        for k in ["bos_token_id", "eos_token_id", "pad_token_id"] {
            assert!(config_of_nulls["model"].get(k).is_none(), "{k}: {config_of_nulls}");
        }
        assert!(notes.iter().any(|n| n.contains("no end-of-stream id") && n.contains("pad id 0")), "{notes:?}");
        // The generation config wins, id by id (an instruct model's extra end ids).
        let own = config(r#","bos_token_id":7,"eos_token_id":8,"pad_token_id":9"#);
        let m = model(&own, Some(&json!({"eos_token_id": [8, 107], "bos_token_id": null})));
        assert_eq!((m["bos_token_id"].clone(), m["eos_token_id"].clone(), m["pad_token_id"].clone()), (json!(7), json!([8, 107]), json!(9)));
    }

    #[test]
    fn runtime_types_record_why_they_differ() {
        assert_eq!(runtime_model_type("qwen2"), ("qwen2", None));
        let (t, note) = runtime_model_type("gpt2");
        assert_eq!(t, "llama");
        assert!(note.unwrap().contains("past_%d"));
        let (t, note) = runtime_model_type("brand_new_arch");
        assert_eq!(t, FALLBACK_TYPE);
        assert!(note.unwrap().contains("brand_new_arch"));
    }
}
