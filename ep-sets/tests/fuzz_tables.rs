//! Property tests of the EP table reader: whatever the text, `parse` and `validate` (through
//! `EpSets::from_sources`) return tables or an error, never panic, and each case finishes
//! within `proptest_bounds::LIMIT`; every error that points into the file gives a line inside it.
//!
//! Three generators, bounded in cases and size: arbitrary text (up to 4 KiB), edits of the
//! shipped tables (`ep-sets/tables/*.toml`) on their TOML tree (a value replaced by one of
//! another type or an extreme one, a key removed or added), and edits of their lines (so
//! spans land on odd text). The two edit generators count their outcomes: one that never
//! yields a valid table, or never an error, tests nothing.
//!
//! Cases come from a fixed seed, so a run is repeatable; `PROPTEST_RNG_SEED=<n>` and
//! `PROPTEST_CASES=<n>` explore further. A failure prints the smallest input found: add it
//! to `bad_tables.rs` as a plain test when fixing it.

use ep_sets::{EpSets, Error, Location};
use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::test_runner::TestRunner;
use std::cell::Cell;
use toml::Value;

#[path = "../../tests/support/proptest_bounds.rs"]
mod proptest_bounds;
use proptest_bounds::{bounded, config};

/// Reads `text` as table `file` on a bounded thread; `Ok(true)` when it parses and validates.
/// A valid table is also asked for each of its plans.
fn load(file: &str, text: String) -> Result<bool, TestCaseError> {
    let file = file.to_string();
    let lines = text.split('\n').count();
    let name = file.clone();
    let error = bounded(move || match EpSets::from_sources([(name, text)]) {
        Ok(sets) => {
            for (ep, dtype) in sets.pairs() {
                sets.plan(ep, dtype).expect("a listed pair has a plan");
            }
            None
        }
        Err(e) => Some(e),
    });
    let Some(e) = error else { return Ok(true) };
    let inside = |l: &Location| l.file == file && l.line.is_none_or(|n| n >= 1 && n <= lines) && l.col.is_none_or(|c| c >= 1);
    match &e {
        Error::Parse { location, .. } => prop_assert!(inside(location), "{e}: not a place in the {lines}-line file"),
        Error::Invalid { problems } => {
            prop_assert!(!problems.is_empty());
            for p in problems {
                prop_assert!(inside(&p.location), "{p}: not a place in the {lines}-line file");
            }
        }
        other => prop_assert!(false, "unexpected error for one table: {other}"),
    }
    Ok(false)
}

fn shipped() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tables");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files.iter().map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(p).unwrap())).collect()
}

#[test]
fn arbitrary_text_parses_or_fails() {
    let bytes = prop::collection::vec(any::<u8>(), 0..4096).prop_map(|b| String::from_utf8_lossy(&b).into_owned());
    let ascii = "[ -~\n\t]{0,4096}".prop_map(String::from);
    // Text that starts as a table, so that the reader gets past the first key.
    let headed = "[ -~\n]{0,2048}".prop_map(|s| format!("[ep]\nname = \"toy\"\nprovider = \"P\"\n{s}"));
    TestRunner::new(config(256)).run(&prop_oneof![bytes, ascii, headed], |text| load("toy.toml", text).map(drop)).unwrap();
}

/// Strings at the edges of what the schema reads: rule ids, `domain:op`, dtypes, empties.
const STRINGS: &[&str] = &[
    "", " ", "fuse.", "fuse.gqa", "lower.if_to_where", "cleanup.x", "fold.y", "x", "com.microsoft:", ":", "ai.onnx:Add", "*",
    "f16", "f8", "concrete_dims", "T", "é", "\u{0}", "a\nb", "cuda",
];

/// Keys the schema knows, and one it does not.
const KEYS: &[&str] = &[
    "ep", "name", "provider", "notes", "genai", "options", "source", "dtype", "f16", "f32", "bf16", "cleanup", "prefuse",
    "fuse", "lower", "fold", "required", "optional", "forbidden_ops", "op", "why", "flags", "limits", "exclude", "rule",
    "ops", "", "Add", "since", "until", "note", "host", "T", "zz_unknown",
];

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(Value::Integer),
        select(vec![i64::MIN, -1, 0, 1, 24, i64::MAX]).prop_map(Value::Integer),
        select(vec![f64::NAN, f64::INFINITY, -0.0, 1e308]).prop_map(Value::Float),
        any::<bool>().prop_map(Value::Boolean),
        select(STRINGS).prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec((select(KEYS), inner), 0..3).prop_map(|kv| Value::Table(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

#[derive(Clone, Debug)]
enum Op {
    /// The chosen child becomes this value (usually of another type).
    Replace(Value),
    /// A string child becomes another string (the edit most likely to keep the table valid).
    Restring(&'static str),
    Remove,
    /// A key is added to a table (`KEYS` has unknown ones), or an item to an array.
    Add(&'static str, Value),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => value().prop_map(Op::Replace),
        2 => select(STRINGS).prop_map(Op::Restring),
        2 => Just(Op::Remove),
        2 => (select(KEYS), value()).prop_map(|(k, v)| Op::Add(k, v)),
    ]
}

/// The node reached from `node` by `walk`, each index picking a child table or array; the
/// walk stops early at a leaf.
fn descend<'a>(node: &'a mut Value, walk: &[Index]) -> &'a mut Value {
    let Some((i, rest)) = walk.split_first() else { return node };
    let container = |v: &Value| matches!(v, Value::Table(_) | Value::Array(_));
    let pick = match &*node {
        Value::Table(t) if !t.is_empty() => t.iter().nth(i.index(t.len())).filter(|(_, v)| container(v)).map(|(k, _)| Err(k.clone())),
        Value::Array(a) if !a.is_empty() => Some(i.index(a.len())).filter(|&j| container(&a[j])).map(Ok),
        _ => None,
    };
    match (pick, node) {
        (Some(Err(key)), Value::Table(t)) => descend(t.get_mut(&key).expect("the key was just read"), rest),
        (Some(Ok(j)), Value::Array(a)) => descend(&mut a[j], rest),
        (_, node) => node,
    }
}

/// Walks `path` down from `root` (each index picks a child of a table or an array), then
/// applies `op` to a child of the node reached.
fn apply(root: &mut Value, path: &[Index], op: &Op) {
    let Some((last, walk)) = path.split_last() else { return };
    let node = descend(root, walk);
    match (node, op) {
        (Value::Table(t), Op::Add(k, v)) => {
            t.insert(k.to_string(), v.clone());
        }
        (Value::Array(a), Op::Add(_, v)) => a.push(v.clone()),
        (Value::Table(t), _) if !t.is_empty() => {
            let key = t.keys().nth(last.index(t.len())).cloned().unwrap();
            match op {
                Op::Remove => {
                    t.remove(&key);
                }
                Op::Replace(v) => {
                    t.insert(key, v.clone());
                }
                Op::Restring(s) => {
                    if let Some(Value::String(old)) = t.get_mut(&key) {
                        *old = s.to_string();
                    }
                }
                Op::Add(..) => unreachable!(),
            }
        }
        (Value::Array(a), _) if !a.is_empty() => {
            let i = last.index(a.len());
            match op {
                Op::Remove => {
                    a.remove(i);
                }
                Op::Replace(v) => a[i] = v.clone(),
                Op::Restring(s) => {
                    if let Value::String(old) = &mut a[i] {
                        *old = s.to_string();
                    }
                }
                Op::Add(..) => unreachable!(),
            }
        }
        _ => {}
    }
}

#[test]
fn edited_table_trees_load_or_fail() {
    let files = shipped();
    let trees: Vec<Value> = files.iter().map(|(_, t)| Value::Table(toml::from_str(t).unwrap())).collect();
    let (valid, refused) = (Cell::new(0), Cell::new(0));
    let edits = prop::collection::vec((prop::collection::vec(any::<Index>(), 1..6), op()), 1..4);
    TestRunner::new(config(256))
        .run(&(any::<Index>(), edits), |(which, edits)| {
            let which = which.index(files.len());
            let mut tree = trees[which].clone();
            for (path, op) in &edits {
                apply(&mut tree, path, op);
            }
            // Some edits (a NaN key, an array of tables in an odd place) cannot be written as
            // TOML; those cases test nothing.
            let Ok(text) = toml::to_string(&tree) else { return Ok(()) };
            let counter = if load(&files[which].0, text)? { &valid } else { &refused };
            counter.set(counter.get() + 1);
            Ok(())
        })
        .unwrap();
    eprintln!("valid {}, refused {}", valid.get(), refused.get());
    assert!(valid.get() > 0 && refused.get() > 0, "valid {} refused {}: the edits are vacuous", valid.get(), refused.get());
}

#[derive(Clone, Debug)]
enum LineEdit {
    Delete(Index),
    Duplicate(Index),
    Swap(Index, Index),
    /// Cuts a line at a character, dropping the rest of it.
    Cut(Index, Index),
    Insert(Index, &'static str),
}

#[test]
fn edited_table_lines_load_or_fail() {
    let files = shipped();
    let inserts = select(vec!["[ep]", "[[exclude]]", "[role.decoder.f16]", "fuse = [\"fuse.x\"]", "since = -9223372036854775808", "until = 0", "T = []", "\"", "[", "é = 1", "# c", "", "\t"]);
    let edit = prop_oneof![
        any::<Index>().prop_map(LineEdit::Delete),
        any::<Index>().prop_map(LineEdit::Duplicate),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| LineEdit::Swap(a, b)),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| LineEdit::Cut(a, b)),
        (any::<Index>(), inserts).prop_map(|(a, s)| LineEdit::Insert(a, s)),
    ];
    let (valid, refused) = (Cell::new(0), Cell::new(0));
    TestRunner::new(config(256))
        .run(&(any::<Index>(), prop::collection::vec(edit, 1..4)), |(which, edits)| {
            let which = which.index(files.len());
            let mut lines: Vec<String> = files[which].1.split('\n').map(String::from).collect();
            for e in &edits {
                let n = lines.len();
                match e {
                    LineEdit::Delete(i) => {
                        lines.remove(i.index(n));
                    }
                    LineEdit::Duplicate(i) => {
                        let i = i.index(n);
                        lines.insert(i, lines[i].clone());
                    }
                    LineEdit::Swap(a, b) => lines.swap(a.index(n), b.index(n)),
                    LineEdit::Cut(i, at) => {
                        let line = &mut lines[i.index(n)];
                        let chars = line.chars().count();
                        *line = line.chars().take(at.index(chars + 1)).collect();
                    }
                    LineEdit::Insert(i, s) => lines.insert(i.index(n + 1), s.to_string()),
                }
                if lines.is_empty() {
                    lines.push(String::new());
                }
            }
            let counter = if load(&files[which].0, lines.join("\n"))? { &valid } else { &refused };
            counter.set(counter.get() + 1);
            Ok(())
        })
        .unwrap();
    eprintln!("valid {}, refused {}", valid.get(), refused.get());
    assert!(valid.get() > 0 && refused.get() > 0, "valid {} refused {}: the edits are vacuous", valid.get(), refused.get());
}
