//! Property tests of the tokenizer-file check (`builder::check_tokenizer_file`, which decides
//! the build's warnings about tokenizer.json, tokenizer_config.json, tokenizer.model and the
//! other tokenizer files): whatever the bytes, it accepts the file or gives an error naming
//! it, never panics, and each case finishes within `proptest_bounds::LIMIT`.
//!
//! Three generators, bounded in cases and size: arbitrary bytes (up to 4 KiB) under every
//! file name it checks; edits of the fixture tokenizer.json on its JSON tree (`model`,
//! `model.vocab`, `model.merges`, `added_tokens` replaced by a value of another type or
//! removed, deep nesting); and a small SentencePiece model truncated, bit-flipped or extended.
//! The edits count their outcomes: a generator that never yields an accepted file, or never
//! an error, tests nothing.
//!
//! Cases come from a fixed seed, so a run is repeatable; `PROPTEST_RNG_SEED=<n>` and
//! `PROPTEST_CASES=<n>` explore further.

use builder::{check_tokenizer_file, Error};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestRunner;
use serde_json::{json, Value};
use std::cell::Cell;
use std::path::PathBuf;

#[path = "../../tests/support/proptest_bounds.rs"]
mod proptest_bounds;
use proptest_bounds::{bounded, config};

const NAMES: &[&str] = &[
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "tokenizer.model",
    "vocab.txt",
    "merges.txt",
    "chat_template.jinja",
];

/// Checks `bytes` as the file `name` on a bounded thread; `Ok(true)` when accepted.
fn check(name: &'static str, bytes: Vec<u8>) -> Result<bool, TestCaseError> {
    let path = PathBuf::from("fuzz").join(name);
    let p = path.clone();
    match bounded(move || check_tokenizer_file(&p, &bytes)) {
        Ok(()) => Ok(true),
        Err(e @ Error::Config { .. }) => {
            prop_assert!(e.to_string().starts_with(&path.display().to_string()), "the error does not name the file: {e}");
            Ok(false)
        }
        Err(other) => Err(TestCaseError::fail(format!("unexpected error kind: {other}"))),
    }
}

#[test]
fn arbitrary_bytes_are_accepted_or_named() {
    let bytes = prop::collection::vec(any::<u8>(), 0..4096);
    let json_like = "[ -~\n]{0,2048}".prop_map(|s| format!("{{\"model\":{s}}}").into_bytes());
    TestRunner::new(config(512)).run(&(select(NAMES), prop_oneof![bytes, json_like]), |(name, b)| check(name, b).map(drop)).unwrap();
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = select(vec![json!(null), json!(true), json!(0), json!(-1), json!(1e308), json!(""), json!("BPE"), json!("Unigram"), json!([]), json!({}), json!([["a", 0.0]]), json!({"a": 0})]);
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec(("[a-z_]{0,8}", inner), 0..3).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// JSON pointers of the parts of tokenizer.json the check reads, and their parents.
const POINTERS: &[&str] = &["", "/model", "/model/type", "/model/vocab", "/model/merges", "/added_tokens", "/version", "/normalizer"];

#[derive(Clone, Debug)]
enum Edit {
    Set(&'static str, Value),
    Remove(&'static str),
    Nest(usize),
}

fn set(doc: &mut Value, pointer: &str, v: Option<Value>) {
    if pointer.is_empty() {
        *doc = v.unwrap_or(Value::Null);
        return;
    }
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    if let Some(Value::Object(map)) = doc.pointer_mut(parent) {
        match v {
            Some(v) => {
                map.insert(key.to_string(), v);
            }
            None => {
                map.remove(key);
            }
        }
    }
}

#[test]
fn edited_tokenizer_json_is_accepted_or_named() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny-llama/tokenizer.json");
    let fixture: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let edit = prop_oneof![
        6 => (select(POINTERS), value()).prop_map(|(p, v)| Edit::Set(p, v)),
        3 => select(POINTERS).prop_map(Edit::Remove),
        1 => select(vec![1usize, 127, 128, 400]).prop_map(Edit::Nest),
    ];
    let (accepted, refused) = (Cell::new(0), Cell::new(0));
    TestRunner::new(config(256))
        .run(&prop::collection::vec(edit, 1..4), |edits| {
            let mut doc = fixture.clone();
            for e in &edits {
                match e {
                    Edit::Set(p, v) => set(&mut doc, p, Some(v.clone())),
                    Edit::Remove(p) => set(&mut doc, p, None),
                    Edit::Nest(depth) => doc = (0..*depth).fold(doc, |v, _| Value::Array(vec![v])),
                }
            }
            let counter = if check("tokenizer.json", doc.to_string().into_bytes())? { &accepted } else { &refused };
            counter.set(counter.get() + 1);
            Ok(())
        })
        .unwrap();
    eprintln!("tokenizer.json: accepted {}, refused {}", accepted.get(), refused.get());
    assert!(accepted.get() > 0 && refused.get() > 0, "accepted {} refused {}: the edits are vacuous", accepted.get(), refused.get());
}

/// A SentencePiece model of a few pieces and a trainer spec.
fn sentencepiece() -> Vec<u8> {
    let mut out = Vec::new();
    for piece in ["<unk>", "a", "b", "ab"] {
        let mut p = vec![0x0a, piece.len() as u8];
        p.extend(piece.as_bytes());
        p.extend([0x15, 0, 0, 0x80, 0xbf, 0x18, 0x01]);
        out.extend([0x0a, p.len() as u8]);
        out.extend(p);
    }
    out.extend([0x12, 0x04, 0x18, 0x01, 0x20, 0x04]);
    out
}

#[test]
fn edited_sentencepiece_models_are_accepted_or_named() {
    let model = sentencepiece();
    let n = model.len();
    let edit = prop_oneof![
        (0..n).prop_map(|at| (Some(at), None, None)),
        (0..n, any::<u8>()).prop_map(|(at, bit)| (None, Some((at, bit)), None)),
        prop::collection::vec(any::<u8>(), 1..64).prop_map(|tail| (None, None, Some(tail))),
        Just((None, None, None)),
    ];
    let (accepted, refused) = (Cell::new(0), Cell::new(0));
    TestRunner::new(config(256))
        .run(&edit, |(truncate, flip, extend)| {
            let mut bytes = model.clone();
            if let Some(at) = truncate {
                bytes.truncate(at);
            }
            if let Some((at, mask)) = flip {
                bytes[at] ^= mask;
            }
            if let Some(tail) = extend {
                bytes.extend(tail);
            }
            let counter = if check("tokenizer.model", bytes)? { &accepted } else { &refused };
            counter.set(counter.get() + 1);
            Ok(())
        })
        .unwrap();
    eprintln!("tokenizer.model: accepted {}, refused {}", accepted.get(), refused.get());
    assert!(accepted.get() > 0 && refused.get() > 0, "accepted {} refused {}: the edits are vacuous", accepted.get(), refused.get());
}
