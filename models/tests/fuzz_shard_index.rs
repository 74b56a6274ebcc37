//! Property tests of the shard index reader (`models::index_shards`, the JSON part of
//! reading `model.safetensors.index.json`): whatever the text, it returns shard names or an
//! error naming the index, never panics, and each case finishes within `proptest_bounds::LIMIT`. The names
//! it returns are exactly the values of `weight_map`, which must all be strings.
//!
//! Two generators, bounded in cases and size: arbitrary text (up to 4 KiB), and edits of the
//! fixture index (`tests/fixtures/tiny-llama-sharded`): `weight_map` or one of its values
//! replaced by a value of another type, path-like shard names, deep nesting, keys removed.
//! The edits count their outcomes: a generator that never yields names, or never an error,
//! tests nothing.
//!
//! Cases come from a fixed seed, so a run is repeatable; `PROPTEST_RNG_SEED=<n>` and
//! `PROPTEST_CASES=<n>` explore further.

use models::{index_shards, Error};
use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::test_runner::TestRunner;
use serde_json::{json, Value};
use std::cell::Cell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[path = "../../tests/support/proptest_bounds.rs"]
mod proptest_bounds;
use proptest_bounds::{bounded, config};

const INDEX: &str = "fuzz/model.safetensors.index.json";

/// Reads `text` on a bounded thread; `Ok(true)` when it gives names. `expected`, when known,
/// is what the names must be.
fn read(text: String, expected: Option<BTreeSet<String>>) -> Result<bool, TestCaseError> {
    match bounded(move || index_shards(Path::new(INDEX), &text)) {
        Ok(names) => {
            if let Some(expected) = expected {
                prop_assert_eq!(names, expected);
            }
            Ok(true)
        }
        Err(e @ Error::Checkpoint { .. }) => {
            prop_assert!(e.to_string().starts_with(INDEX), "the error does not name the index: {e}");
            Ok(false)
        }
        Err(other) => Err(TestCaseError::fail(format!("unexpected error kind: {other}"))),
    }
}

#[test]
fn arbitrary_text_reads_or_fails() {
    let bytes = prop::collection::vec(any::<u8>(), 0..4096).prop_map(|b| String::from_utf8_lossy(&b).into_owned());
    let text = "[ -~\n]{0,4096}".prop_map(String::from);
    let wrapped = "[ -~]{0,2048}".prop_map(|s| format!("{{\"weight_map\":{s}}}"));
    TestRunner::new(config(256)).run(&prop_oneof![bytes, text, wrapped], |t| read(t, None).map(drop)).unwrap();
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        select(vec![json!(null), json!(true), json!(0), json!(-1), json!(u64::MAX), json!(1e308), json!([]), json!({})]),
        select(vec!["", "..", "../x.safetensors", "/etc/passwd", "a/b.safetensors", "model-00001-of-00003.safetensors", "é", "\u{0}"]).prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec(("[a-z_]{0,8}", inner), 0..3).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

#[derive(Clone, Debug)]
enum Edit {
    /// One `weight_map` entry gets this value.
    Entry(Index, Value),
    /// A tensor is added to `weight_map`.
    AddEntry(String, Value),
    /// `weight_map` itself becomes this value.
    Map(Value),
    /// `weight_map` nested this deep in arrays (the JSON reader stops at 128).
    Nest(usize),
    RemoveTop(Index),
}

#[test]
fn edited_fixture_index_reads_or_fails() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny-llama-sharded/model.safetensors.index.json");
    let Value::Object(fixture) = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap() else { panic!("not an object") };
    let edit = prop_oneof![
        4 => (any::<Index>(), value()).prop_map(|(i, v)| Edit::Entry(i, v)),
        2 => ("[a-z.]{1,12}", value()).prop_map(|(k, v)| Edit::AddEntry(k, v)),
        1 => value().prop_map(Edit::Map),
        1 => select(vec![1usize, 127, 128, 400]).prop_map(Edit::Nest),
        1 => any::<Index>().prop_map(Edit::RemoveTop),
    ];
    let (named, refused) = (Cell::new(0), Cell::new(0));
    TestRunner::new(config(256))
        .run(&prop::collection::vec(edit, 1..4), |edits| {
            let mut top = fixture.clone();
            for e in &edits {
                match e {
                    Edit::Entry(i, v) => {
                        if let Some(Value::Object(map)) = top.get_mut("weight_map").filter(|m| m.as_object().is_some_and(|m| !m.is_empty())) {
                            let key = map.keys().nth(i.index(map.len())).cloned().unwrap();
                            map.insert(key, v.clone());
                        }
                    }
                    Edit::AddEntry(k, v) => {
                        if let Some(Value::Object(map)) = top.get_mut("weight_map") {
                            map.insert(k.clone(), v.clone());
                        }
                    }
                    Edit::Map(v) => {
                        top.insert("weight_map".into(), v.clone());
                    }
                    Edit::Nest(depth) => {
                        let v = top.remove("weight_map").unwrap_or(Value::Null);
                        top.insert("weight_map".into(), (0..*depth).fold(v, |v, _| Value::Array(vec![v])));
                    }
                    Edit::RemoveTop(i) => {
                        if !top.is_empty() {
                            let key = top.keys().nth(i.index(top.len())).cloned().unwrap();
                            top.remove(&key);
                        }
                    }
                }
            }
            // What the names must be, from the tree itself: every value a string, or refused
            // (a value that is not a file name would lose its tensor's shard).
            let (expected, must_refuse) = match top.get("weight_map") {
                Some(Value::Object(map)) if map.values().all(Value::is_string) => (Some(map.values().filter_map(Value::as_str).map(String::from).collect()), false),
                Some(Value::Object(_)) => (None, true),
                _ => (None, false),
            };
            let read_names = read(Value::Object(top).to_string(), expected)?;
            prop_assert!(!(must_refuse && read_names), "a weight_map value that is not a string was accepted");
            let counter = if read_names { &named } else { &refused };
            counter.set(counter.get() + 1);
            Ok(())
        })
        .unwrap();
    eprintln!("named {}, refused {}", named.get(), refused.get());
    assert!(named.get() > 0 && refused.get() > 0, "named {} refused {}: the edits are vacuous", named.get(), refused.get());
}
