//! Property tests of the `config.json` reader (`DecoderConfig::parse`): whatever the text,
//! it returns a configuration or an error naming the file, never panics, and each case
//! finishes within `proptest_bounds::LIMIT`. A configuration it returns answers `rotary_dim` and
//! `layer_windows` (its family's windows) without a panic.
//!
//! Two generators, bounded in cases and size: arbitrary text and JSON (up to 4 KiB), and
//! edits of the fixture configs (`tests/fixtures/*/config.json`) on their JSON tree: a value
//! replaced by one of another type, an extreme number (written as raw JSON text too, such as
//! `1e400` or twenty digits), a NaN-like string, or nesting deeper than the JSON reader's
//! limit; a key removed, or a known key added. The edits count their outcomes: a generator
//! that never yields a configuration, or never an error, tests nothing.
//!
//! Cases come from a fixed seed, so a run is repeatable; `PROPTEST_RNG_SEED=<n>` and
//! `PROPTEST_CASES=<n>` explore further. A failure prints the smallest input found: add it
//! to `robustness.rs` as a plain test when fixing it.

use models::{DecoderConfig, Error};
use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::test_runner::TestRunner;
use serde_json::{json, Value};
use std::cell::Cell;
use std::path::{Path, PathBuf};

#[path = "../../tests/support/proptest_bounds.rs"]
mod proptest_bounds;
use proptest_bounds::{bounded, config};

const PATH: &str = "fuzz/config.json";

/// Parses `text` on a bounded thread; `Ok(true)` when it gives a configuration.
fn parse(text: String) -> Result<bool, TestCaseError> {
    let result = bounded(move || {
        DecoderConfig::parse(Path::new(PATH), &text).map(|c| {
            let _ = c.rotary_dim();
            // The family's windows are one value per layer: asked for configs of at most 4096
            // layers (a fuzzed count may be billions, a memory bound, not a reader bug).
            if c.num_hidden_layers <= 4096 {
                let _ = c.layer_windows();
            }
            let _ = c.flag("attention_bias", false);
        })
    });
    match result {
        Ok(()) => Ok(true),
        Err(e @ Error::Config { .. }) => {
            prop_assert!(e.to_string().starts_with(PATH), "the error does not name the file: {e}");
            Ok(false)
        }
        Err(other) => Err(TestCaseError::fail(format!("unexpected error kind: {other}"))),
    }
}

#[test]
fn arbitrary_text_parses_or_fails() {
    let bytes = prop::collection::vec(any::<u8>(), 0..4096).prop_map(|b| String::from_utf8_lossy(&b).into_owned());
    let json_text = "[ -~\n]{0,4096}".prop_map(String::from);
    let object = prop::collection::vec((select(KEYS), value()), 0..24).prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()).to_string());
    TestRunner::new(config(256)).run(&prop_oneof![bytes, json_text, object], |t| parse(t).map(drop)).unwrap();
}

/// Keys the reader knows (the GPT-2 spellings and the rope object's too), and one it does not.
const KEYS: &[&str] = &[
    "model_type", "hidden_size", "n_embd", "intermediate_size", "n_inner", "num_hidden_layers", "n_layer",
    "num_attention_heads", "n_head", "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings",
    "n_positions", "rms_norm_eps", "layer_norm_epsilon", "layer_norm_eps", "tie_word_embeddings", "attention_bias",
    "mlp_bias", "hidden_act", "activation_function", "rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor",
    "sliding_window", "use_sliding_window", "max_window_layers", "layer_types", "original_max_position_embeddings",
    "bos_token_id", "eos_token_id", "pad_token_id", "rope_type", "type", "factor", "low_freq_factor", "high_freq_factor",
    "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate", "short_factor", "long_factor",
    "unknown_future_key",
];

/// Numbers JSON can carry but `Value` cannot, put in as text: out of `f64` range, past `u64`.
const RAW_NUMBERS: &[&str] = &["1e400", "-1e400", "123456789012345678901234567890", "-0", "4294967296", "2147483648", "1e-400"];

/// Marks a place in the tree where a [`RAW_NUMBERS`] entry goes once it is text.
fn raw(i: usize) -> Value {
    Value::String(format!("\u{1}raw{i}"))
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        select(vec![json!(null), json!(true), json!(false), json!(0), json!(1), json!(-1), json!(2), json!(3), json!(16), json!(0.5), json!(1.5)]),
        select(vec![json!(u64::MAX), json!(i64::MIN), json!(u32::MAX), json!(1u64 << 32), json!(1u64 << 53), json!(1e308), json!(-1e308), json!(5e-324), json!(-0.0)]),
        select(vec!["", "NaN", "Infinity", "-inf", "1e999", "64", "silu", "gelu", "relu", "mish", "llama", "gpt2", "yarn", "longrope", "llama3", "linear", "dynamic", "default", "full_attention", "sliding_attention"]).prop_map(|s| json!(s)),
        (0..RAW_NUMBERS.len()).prop_map(raw),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|x| json!(x)),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((select(KEYS), inner), 0..4).prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

/// `v` inside `depth` arrays.
fn nested(v: Value, depth: usize) -> Value {
    (0..depth).fold(v, |v, _| Value::Array(vec![v]))
}

#[derive(Clone, Debug)]
enum Edit {
    Replace(Index, Value),
    /// The value under a key, nested this deep in arrays (the JSON reader stops at 128).
    Nest(Index, usize),
    Remove(Index),
    Add(&'static str, Value),
    /// The same edit inside the rope object (`rope_scaling` or `rope_parameters`), if any.
    InRope(Box<Edit>),
}

fn edit() -> impl Strategy<Value = Edit> {
    let flat = prop_oneof![
        4 => (any::<Index>(), value()).prop_map(|(i, v)| Edit::Replace(i, v)),
        1 => (any::<Index>(), select(vec![1usize, 64, 127, 128, 129, 400])).prop_map(|(i, d)| Edit::Nest(i, d)),
        2 => any::<Index>().prop_map(Edit::Remove),
        2 => (select(KEYS), value()).prop_map(|(k, v)| Edit::Add(k, v)),
    ];
    prop_oneof![3 => flat.clone(), 1 => flat.prop_map(|e| Edit::InRope(Box::new(e)))]
}

fn apply(map: &mut serde_json::Map<String, Value>, e: &Edit) {
    let key_at = |map: &serde_json::Map<String, Value>, i: &Index| (!map.is_empty()).then(|| map.keys().nth(i.index(map.len())).cloned().unwrap());
    match e {
        Edit::Replace(i, v) => {
            if let Some(k) = key_at(map, i) {
                map.insert(k, v.clone());
            }
        }
        Edit::Nest(i, depth) => {
            if let Some(k) = key_at(map, i) {
                let v = map.remove(&k).unwrap();
                map.insert(k, nested(v, *depth));
            }
        }
        Edit::Remove(i) => {
            if let Some(k) = key_at(map, i) {
                map.remove(&k);
            }
        }
        Edit::Add(k, v) => {
            map.insert(k.to_string(), v.clone());
        }
        Edit::InRope(inner) => {
            for key in ["rope_scaling", "rope_parameters"] {
                if let Some(Value::Object(rope)) = map.get_mut(key) {
                    apply(rope, inner);
                    return;
                }
            }
        }
    }
}

fn fixtures() -> Vec<serde_json::Map<String, Value>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut dirs: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.join("config.json").is_file()).collect();
    dirs.sort();
    dirs.iter()
        .map(|d| match serde_json::from_str(&std::fs::read_to_string(d.join("config.json")).unwrap()).unwrap() {
            Value::Object(m) => m,
            _ => panic!("{}: not an object", d.display()),
        })
        .collect()
}

#[test]
fn edited_fixture_configs_parse_or_fail() {
    let configs = fixtures();
    assert!(configs.len() >= 10, "expected the fixture configs, found {}", configs.len());
    let (parsed, refused) = (Cell::new(0), Cell::new(0));
    TestRunner::new(config(512))
        .run(&(any::<Index>(), prop::collection::vec(edit(), 1..4)), |(which, edits)| {
            let mut map = configs[which.index(configs.len())].clone();
            for e in &edits {
                apply(&mut map, e);
            }
            let mut text = Value::Object(map).to_string();
            for (i, number) in RAW_NUMBERS.iter().enumerate() {
                text = text.replace(&format!("\"\\u0001raw{i}\""), number);
            }
            let counter = if parse(text)? { &parsed } else { &refused };
            counter.set(counter.get() + 1);
            Ok(())
        })
        .unwrap();
    eprintln!("parsed {}, refused {}", parsed.get(), refused.get());
    assert!(parsed.get() > 0 && refused.get() > 0, "parsed {} refused {}: the edits are vacuous", parsed.get(), refused.get());
}

/// JSON nested far past the reader's limit is an error, not a stack overflow.
#[test]
fn deeply_nested_json_is_an_error() {
    for text in [format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)), format!("{{\"model_type\":{}", "{\"a\":".repeat(100_000))] {
        let e = DecoderConfig::parse(Path::new(PATH), &text).unwrap_err().to_string();
        assert!(e.starts_with("fuzz/config.json: not valid JSON: recursion limit exceeded"), "{e}");
    }
}
