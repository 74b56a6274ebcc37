//! Property tests of the `.rule` parser and its semantic checks: whatever the text,
//! `check_sources` returns the files or diagnostics, never panics, and each case finishes
//! within `proptest_bounds::LIMIT`; every diagnostic names the file it is about and a line inside it.
//!
//! Three generators, each bounded in cases and size so that the file runs in a few seconds:
//! arbitrary text (up to 4 KiB), token edits of the shipped rules in `rules/rules` checked
//! as the whole set (so cross-file checks run), and rule files assembled from the grammar's
//! constructs, valid or nearly so, which reach the semantic checks. The last two count their
//! outcomes: a generator that never yields a clean set, or never a diagnostic, tests nothing.
//!
//! Cases come from a fixed seed, so a run is repeatable; `PROPTEST_RNG_SEED=<n>` and
//! `PROPTEST_CASES=<n>` explore further. A failure prints the smallest input found: add it
//! to `hostile_sources.rs` as a plain test when fixing it.

use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::test_runner::TestRunner;
use rule_dsl::{check_sources, Diagnostic};
use std::cell::Cell;

#[path = "../../tests/support/proptest_bounds.rs"]
mod proptest_bounds;
use proptest_bounds::{bounded, config};

/// Checks `sources` on a bounded thread; `Ok(true)` when clean.
fn check(sources: Vec<(String, String)>) -> Result<bool, TestCaseError> {
    let (clean, diags, sources) = bounded(move || {
        let borrowed: Vec<(&str, &str)> = sources.iter().map(|(n, s)| (n.as_str(), s.as_str())).collect();
        let (clean, diags) = match check_sources(&borrowed) {
            Ok(_) => (true, vec![]),
            Err(d) => (false, d),
        };
        (clean, diags, sources)
    });
    prop_assert!(clean || !diags.is_empty(), "an error without a diagnostic");
    for d in &diags {
        located(d, &sources)?;
    }
    Ok(clean)
}

/// The diagnostic names one of the files, and a line and column inside it.
fn located(d: &Diagnostic, sources: &[(String, String)]) -> Result<(), TestCaseError> {
    let (_, text) = sources.iter().find(|(n, _)| *n == d.file).ok_or_else(|| TestCaseError::fail(format!("{d}: names no input file")))?;
    let lines = text.split('\n').count();
    prop_assert!(d.pos.line >= 1 && d.pos.line <= lines && d.pos.col >= 1, "{d}: no such line:col in a {lines}-line file");
    Ok(())
}

/// The shipped rule set as the macro reads it (fragments and the prelude included).
fn shipped() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules/rules");
    let files = rule_dsl::rule_paths(&dir).unwrap();
    files
        .iter()
        .map(|p| (format!("rules/{}", p.strip_prefix(&dir).unwrap().display()), std::fs::read_to_string(p).unwrap()))
        .collect()
}

#[test]
fn arbitrary_text_parses_or_fails() {
    let bytes = prop::collection::vec(any::<u8>(), 0..4096).prop_map(|b| String::from_utf8_lossy(&b).into_owned());
    let ascii = "[ -~\n\t]{0,4096}";
    let text = prop_oneof![bytes, ascii.prop_map(String::from)];
    TestRunner::new(config(256)).run(&text, |text| check(vec![("fuzz.rule".into(), text)]).map(drop)).unwrap();
}

/// Tokens of the grammar, and values at its edges, to insert into real rules.
const VOCAB: &[&str] = &[
    "rule", "use", "domain", "as", "opset", "stage", "fuse", "prefuse", "priority", "before", "after", "match", "root",
    "check", "else", "let", "emit", "replace", "with", "for", "in", "helper", "default", "{", "}", "(", ")", "[", "]",
    ",", ":", "=", "==", "<", "+", "-", "*", "/", "%", "&&", "||", "!", "..", "_", "?x", "?out", "..?xs", "onnx.Add",
    "ms.GroupQueryAttention", "Add", "x.y.z", "fuse.gqa", "lower.if_to_where", "0", "-1", "99999999999999999999999",
    "1e999", "-0.0", "true", "\"s\"", "\"{?x}\"", "\"{\"", "\"}}{{\"", "\"{shape(\"", "\"\\\"", "\"", "// c\n", "///", "\n",
    "é", "\u{0}", "shape(?x)", "dim(?x, -1)", "limit(\"max_context\")", "[1, [2, []]]",
];

/// A rule file cut into tokens, each with the whitespace after it, so that joining them
/// gives the file back.
fn tokens(src: &str) -> Vec<String> {
    let chars: Vec<char> = src.chars().collect();
    let word = |c: char| c.is_alphanumeric() || "_.?".contains(c);
    let (mut out, mut i) = (Vec::new(), 0);
    while i < chars.len() {
        let start = i;
        if chars[i] == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i = (i + 1).min(chars.len());
        } else if chars[i] == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if word(chars[i]) {
            while i < chars.len() && word(chars[i]) {
                i += 1;
            }
        } else {
            i += 1;
        }
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        out.push(chars[start..i].iter().collect());
    }
    out
}

#[derive(Clone, Debug)]
enum Edit {
    Delete(Index),
    Duplicate(Index),
    Swap(Index, Index),
    /// Puts a copy of another token of the file in place of one (a capture, an op, a rule id).
    CopyOver(Index, Index),
    Insert(Index, &'static str),
    Truncate(Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        1 => any::<Index>().prop_map(Edit::Delete),
        1 => any::<Index>().prop_map(Edit::Duplicate),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::Swap(a, b)),
        3 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::CopyOver(a, b)),
        3 => (any::<Index>(), select(VOCAB)).prop_map(|(a, t)| Edit::Insert(a, t)),
        1 => any::<Index>().prop_map(Edit::Truncate),
    ]
}

fn apply(tokens: &mut Vec<String>, e: &Edit) {
    if tokens.is_empty() {
        return;
    }
    let n = tokens.len();
    match e {
        Edit::Delete(i) => {
            tokens.remove(i.index(n));
        }
        Edit::Duplicate(i) => {
            let i = i.index(n);
            tokens.insert(i, tokens[i].clone());
        }
        Edit::Swap(a, b) => tokens.swap(a.index(n), b.index(n)),
        Edit::CopyOver(a, b) => {
            let (to, from) = (a.index(n), b.index(n));
            // Keep the whitespace after the token replaced, so lines stay lines.
            let ws = tokens[to].len() - tokens[to].trim_end().len();
            let tail = tokens[to][tokens[to].len() - ws..].to_string();
            tokens[to] = format!("{}{tail}", tokens[from].trim_end());
        }
        Edit::Insert(i, t) => tokens.insert(i.index(n), format!("{t} ")),
        Edit::Truncate(i) => tokens.truncate(i.index(n)),
    }
}

#[test]
fn edited_shipped_rules_check_or_fail() {
    let files = shipped();
    let tokenized: Vec<Vec<String>> = files.iter().map(|(_, s)| tokens(s)).collect();
    assert_eq!(tokenized[0].concat(), files[0].1, "tokens() must give the file back");
    let (clean, flagged) = (Cell::new(0), Cell::new(0));
    let case = (any::<Index>(), prop::collection::vec(edit(), 1..4));
    TestRunner::new(config(256))
        .run(&case, |(which, edits)| {
            let which = which.index(files.len());
            let mut t = tokenized[which].clone();
            for e in &edits {
                apply(&mut t, e);
            }
            let mut set = files.clone();
            set[which].1 = t.concat();
            let ok = check(set)?;
            let counter = if ok { &clean } else { &flagged };
            counter.set(counter.get() + 1);
            Ok(())
        })
        .unwrap();
    eprintln!("clean {}, flagged {}", clean.get(), flagged.get());
    assert!(clean.get() > 0 && flagged.get() > 0, "clean {} flagged {}: the edits are vacuous", clean.get(), flagged.get());
}

/// Rule ids, few so that duplicates and `before`/`after` cycles come up; `ORDER_IDS` adds
/// one that no rule defines, for cycles through it.
const IDS: &[&str] = &["fuse.a", "fuse.b", "lower.c"];
const ORDER_IDS: &[&str] = &["fuse.a", "fuse.b", "fuse.x"];

fn expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        select(vec!["?x", "?w", "?eps", "?nope", "1", "-7", "2.5", "true", "\"f32\"", "[1, 2]", "[]", "99999999999999999999"]).prop_map(String::from),
    ];
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (inner.clone(), select(vec!["==", "!=", "<", ">=", "+", "-", "*", "/", "%", "&&", "||"]), inner.clone()).prop_map(|(a, op, b)| format!("{a} {op} {b}")),
            inner.clone().prop_map(|a| format!("!({a})")),
            (select(vec!["shape", "rank", "dim", "len", "min", "limit", "nosuch"]), prop::collection::vec(inner.clone(), 0..3)).prop_map(|(f, args)| format!("{f}({})", args.join(", "))),
            prop::collection::vec(inner, 0..3).prop_map(|items| format!("[{}]", items.join(", "))),
        ]
    })
}

/// `valid` nine times in ten, else one of `others`.
fn mostly(valid: &'static str, others: &[&'static str]) -> impl Strategy<Value = &'static str> + Clone {
    prop_oneof![9 => Just(valid), 1 => select(others.to_vec())]
}

/// Usually none, sometimes up to two of `item`, concatenated.
fn few(item: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    prop_oneof![3 => Just(String::new()), 1 => prop::collection::vec(item, 1..3).prop_map(|v| v.concat())]
}

/// One rule: a valid template (Add of `?x` and `?w` replaced by Mul) whose every part is
/// usually the valid one and otherwise a plausible mistake.
fn rule() -> impl Strategy<Value = String> {
    let id = select(IDS);
    let stage = mostly("stage fuse\n", &["stage lower\n", "stage nowhere\n", ""]);
    let order = prop_oneof![
        Just(String::new()),
        prop::collection::vec((select(vec!["before", "after"]), select(ORDER_IDS)).prop_map(|(k, id)| format!("{k} {id}\n")), 1..4).prop_map(|v| v.concat())
    ];
    let op = || mostly("onnx.Add", &["onnx.Mul", "ms.SkipLayerNormalization", "onnx.NoSuchOp", "Add", "zz.Add"]);
    let cap = |valid| mostly(valid, &["?x", "?w", "?y", "?fresh", "_", "-", "..?xs"]);
    let matches = (op(), cap("?x"), cap("?w"), mostly("", &[" [epsilon: ?eps default 1e-5]", " [axis: 1]"]), mostly("root ?y", &["root ?x", ""]), prop::bool::weighted(0.1))
        .prop_map(|(op, a, b, attrs, root, extra)| {
            let extra = if extra { "    ?x = onnx.Neg(?v)\n" } else { "" };
            format!("  match {{\n    ?y = {op}({a}, {b}){attrs}\n{extra}    {root}\n  }}\n")
        });
    let lets = few(expr().prop_map(|e| format!("  let ?k = {e}\n")));
    let checks = few((select(vec!["c1", "c2"]), expr(), select(vec!["plain", "{shape(?x)}", "{?x", "{{}}", "{1 +}"])).prop_map(|(id, e, m)| format!("  check {id}: {e} else \"{m}\"\n")));
    let emits = (op(), cap("?x"), mostly("replace ?y with ?z", &["replace ?x with ?z", "replace ?y with ?w", ""]), prop::bool::weighted(0.1))
        .prop_map(|(op, a, replace, for_block)| {
            let for_block = if for_block { "    for (?t) in (?xs) {\n      ?u = onnx.Neg(?t)\n    }\n" } else { "" };
            format!("  emit {{\n    ?z = {op}({a}, ?w)\n{for_block}    {replace}\n  }}\n")
        });
    (id, stage, order, matches, lets, checks, emits).prop_map(|(id, stage, order, m, l, c, e)| format!("rule {id} {{\n  {stage}{order}{m}{l}{c}{e}}}\n"))
}

#[test]
fn assembled_rules_check_or_fail() {
    let head = "use domain ai.onnx as onnx opset 24\nuse domain com.microsoft as ms opset 1\n";
    let files = prop::collection::vec(prop::collection::vec(rule(), 1..4).prop_map(move |rules| format!("{head}{}", rules.concat())), 1..3);
    let (clean, flagged) = (Cell::new(0), Cell::new(0));
    TestRunner::new(config(384))
        .run(&files, |files| {
            let set = files.into_iter().enumerate().map(|(i, text)| (format!("gen{i}.rule"), text)).collect();
            let counter = if check(set)? { &clean } else { &flagged };
            counter.set(counter.get() + 1);
            Ok(())
        })
        .unwrap();
    eprintln!("clean {}, flagged {}", clean.get(), flagged.get());
    assert!(clean.get() > 0 && flagged.get() > 0, "clean {} flagged {}: the generator is vacuous", clean.get(), flagged.get());
}
