//! Property tests of the sentence-transformers readers (`models::tasks::pooling`): the module
//! list (`parse_modules`, what `modules.json` holds), the Pooling config (`parse_pooling`,
//! `1_Pooling/config.json`) and both read from files (`SentencePooling::load`). Whatever the
//! bytes, they give a value or an error naming the file, never panic, and each case finishes
//! within `proptest_bounds::LIMIT`. A value they give is consistent: at least one mode, no mode
//! twice, in sentence-transformers' order, and a Pooling folder inside the checkpoint.
//!
//! Three generators, bounded in cases and size: arbitrary bytes and text (up to 4 KiB) for
//! each file; edits of a valid module list and pooling config on their JSON trees (a value
//! replaced by one of another type, a module added, removed or reordered, path-like folder
//! names, deep nesting); and arbitrary bytes written to the files `load` reads. The edits
//! count their outcomes: a generator that never yields a value, or never an error, tests
//! nothing.
//!
//! Cases come from a fixed seed, so a run is repeatable; `PROPTEST_RNG_SEED=<n>` and
//! `PROPTEST_CASES=<n>` explore further.

use models::tasks::pooling::{parse_modules, parse_pooling, PoolingMode, SentencePooling};
use models::Error;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::test_runner::TestRunner;
use serde_json::{json, Value};
use std::cell::Cell;
use std::path::Path;

#[path = "../../tests/support/proptest_bounds.rs"]
mod proptest_bounds;
use proptest_bounds::{bounded, config};

const MODULES: &str = "fuzz/modules.json";
const POOLING: &str = "fuzz/1_Pooling/config.json";
const HIDDEN: usize = 8;

/// An error must be a configuration (or file) error whose message starts with `path`.
fn named(e: &Error, path: &str) -> Result<(), TestCaseError> {
    prop_assert!(matches!(e, Error::Config { .. } | Error::Ir(_)), "unexpected error kind: {e}");
    prop_assert!(e.to_string().starts_with(path), "the error does not name {path}: {e}");
    Ok(())
}

/// Parses a module list on a bounded thread; `Ok(true)` when it gives one.
fn modules(text: String) -> Result<bool, TestCaseError> {
    match bounded(move || parse_modules(Path::new(MODULES), &text)) {
        Ok(m) => {
            prop_assert!(!m.pooling_dir.contains("..") && !m.pooling_dir.starts_with('/'), "folder `{}` leaves the checkpoint", m.pooling_dir);
            Ok(true)
        }
        Err(e) => named(&e, MODULES).map(|()| false),
    }
}

/// Parses a pooling config on a bounded thread; `Ok(true)` when it gives modes.
fn pooling(text: String) -> Result<bool, TestCaseError> {
    match bounded(move || parse_pooling(Path::new(POOLING), &text, HIDDEN)) {
        Ok(modes) => {
            let order = [PoolingMode::Cls, PoolingMode::Max, PoolingMode::Mean, PoolingMode::MeanSqrtLen];
            let ranks: Vec<usize> = modes.iter().map(|m| order.iter().position(|o| o == m).unwrap()).collect();
            prop_assert!(!modes.is_empty() && ranks.windows(2).all(|w| w[0] < w[1]), "modes {modes:?}");
            Ok(true)
        }
        Err(e) => named(&e, POOLING).map(|()| false),
    }
}

fn text() -> impl Strategy<Value = String> {
    let bytes = prop::collection::vec(any::<u8>(), 0..4096).prop_map(|b| String::from_utf8_lossy(&b).into_owned());
    let ascii = "[ -~\n]{0,4096}".prop_map(String::from);
    let list = "[ -~]{0,1024}".prop_map(|s| format!("[{s}]"));
    let object = "[ -~]{0,1024}".prop_map(|s| format!("{{{s}}}"));
    prop_oneof![bytes, ascii, list, object]
}

#[test]
fn arbitrary_module_lists_parse_or_fail() {
    TestRunner::new(config(256)).run(&text(), |t| modules(t).map(drop)).unwrap();
}

#[test]
fn arbitrary_pooling_configs_parse_or_fail() {
    TestRunner::new(config(256)).run(&text(), |t| pooling(t).map(drop)).unwrap();
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        select(vec![json!(null), json!(true), json!(false), json!(0), json!(-1), json!(8), json!(u64::MAX), json!(1e308), json!([]), json!({})]),
        select(vec!["", "..", "../x", "/etc", "1_Pooling", "a/../../b", "sentence_transformers.models.Pooling", "sentence_transformers.models.Dense", "\u{0}"])
            .prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec(("[a-z_]{0,8}", inner), 0..3).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

const MODULE_KEYS: &[&str] = &["idx", "name", "path", "type"];
const POOLING_KEYS: &[&str] = &[
    "word_embedding_dimension",
    "pooling_mode_cls_token",
    "pooling_mode_mean_tokens",
    "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
    "include_prompt",
    "unknown_key",
];

fn valid_modules() -> Value {
    json!([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ])
}

fn valid_pooling() -> Value {
    json!({"word_embedding_dimension": HIDDEN, "pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true,
           "pooling_mode_max_tokens": false, "pooling_mode_mean_sqrt_len_tokens": false, "include_prompt": true})
}

#[derive(Clone, Debug)]
enum Edit {
    /// A key of one module (or of the pooling object) gets this value.
    Set(Index, &'static str, Value),
    /// A module is removed, or two swap places.
    Remove(Index),
    Swap(Index, Index),
    /// The whole document becomes this value.
    Whole(Value),
    /// The document nested this deep in lists (the JSON reader stops at 128).
    Nest(usize),
}

fn edits(keys: &'static [&'static str]) -> impl Strategy<Value = Vec<Edit>> {
    let edit = prop_oneof![
        6 => (any::<Index>(), select(keys), value()).prop_map(|(i, k, v)| Edit::Set(i, k, v)),
        1 => any::<Index>().prop_map(Edit::Remove),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::Swap(a, b)),
        1 => value().prop_map(Edit::Whole),
        1 => select(vec![1usize, 127, 128, 400]).prop_map(Edit::Nest),
    ];
    prop::collection::vec(edit, 1..4)
}

/// Applies `edits` to `doc`.
fn apply(mut doc: Value, edits: &[Edit]) -> Value {
    for e in edits {
        match e {
            Edit::Set(i, key, v) => {
                let key = key.to_string();
                let target = match &mut doc {
                    Value::Array(list) if !list.is_empty() => {
                        let n = list.len();
                        &mut list[i.index(n)]
                    }
                    other => other,
                };
                if let Value::Object(map) = target {
                    map.insert(key, v.clone());
                }
            }
            Edit::Remove(i) => match &mut doc {
                Value::Array(list) if !list.is_empty() => {
                    let n = list.len();
                    list.remove(i.index(n));
                }
                Value::Object(map) if !map.is_empty() => {
                    let key = map.keys().nth(i.index(map.len())).cloned().unwrap();
                    map.remove(&key);
                }
                _ => {}
            },
            Edit::Swap(a, b) => {
                if let Value::Array(list) = &mut doc {
                    if !list.is_empty() {
                        let n = list.len();
                        list.swap(a.index(n), b.index(n));
                    }
                }
            }
            Edit::Whole(v) => doc = v.clone(),
            Edit::Nest(depth) => doc = (0..*depth).fold(doc, |v, _| Value::Array(vec![v])),
        }
    }
    doc
}

#[test]
fn edited_module_lists_parse_or_fail() {
    let (given, refused) = (Cell::new(0), Cell::new(0));
    TestRunner::new(config(256))
        .run(&edits(MODULE_KEYS), |e| {
            let counter = if modules(apply(valid_modules(), &e).to_string())? { &given } else { &refused };
            counter.set(counter.get() + 1);
            Ok(())
        })
        .unwrap();
    eprintln!("module lists: given {}, refused {}", given.get(), refused.get());
    assert!(given.get() > 0 && refused.get() > 0, "given {} refused {}: the edits are vacuous", given.get(), refused.get());
}

#[test]
fn edited_pooling_configs_parse_or_fail() {
    let (given, refused) = (Cell::new(0), Cell::new(0));
    TestRunner::new(config(256))
        .run(&edits(POOLING_KEYS), |e| {
            let counter = if pooling(apply(valid_pooling(), &e).to_string())? { &given } else { &refused };
            counter.set(counter.get() + 1);
            Ok(())
        })
        .unwrap();
    eprintln!("pooling configs: given {}, refused {}", given.get(), refused.get());
    assert!(given.get() > 0 && refused.get() > 0, "given {} refused {}: the edits are vacuous", given.get(), refused.get());
}

/// Arbitrary bytes (not UTF-8 too) in the files `load` reads, one of them valid: a value or
/// an error naming the file it read.
#[test]
fn arbitrary_files_load_or_fail() {
    let bytes = prop::collection::vec(any::<u8>(), 0..2048);
    let valid_modules = valid_modules().to_string().into_bytes();
    let valid_pooling = valid_pooling().to_string().into_bytes();
    let both = (valid_modules.clone(), valid_pooling.clone());
    let case = prop_oneof![
        4 => bytes.clone().prop_map(move |b| (b, valid_pooling.clone())),
        4 => bytes.prop_map(move |b| (valid_modules.clone(), b)),
        1 => Just(both),
    ];
    let (given, refused) = (Cell::new(0), Cell::new(0));
    TestRunner::new(config(64))
        .run(&case, |(modules, pooling)| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("modules.json"), &modules).unwrap();
            std::fs::create_dir(dir.path().join("1_Pooling")).unwrap();
            std::fs::write(dir.path().join("1_Pooling/config.json"), &pooling).unwrap();
            let d = dir.path().to_path_buf();
            match bounded(move || SentencePooling::load(&d, HIDDEN)) {
                Ok(p) => {
                    prop_assert!(!p.modes.is_empty());
                    given.set(given.get() + 1);
                }
                Err(e) => {
                    let text = e.to_string();
                    let root = dir.path().display().to_string();
                    prop_assert!(text.starts_with(&root) && (text.contains("modules.json") || text.contains("config.json")), "{text}");
                    refused.set(refused.get() + 1);
                }
            }
            Ok(())
        })
        .unwrap();
    eprintln!("files: given {}, refused {}", given.get(), refused.get());
    assert!(given.get() > 0 && refused.get() > 0, "given {} refused {}: the cases are vacuous", given.get(), refused.get());
}
