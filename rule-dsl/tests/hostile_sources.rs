//! Sources that once crashed or stalled the parser or the checks (each found by
//! `fuzz_rules.rs` or while writing it) now give an error at their file:line:col, quickly.
//! Before the fixes: a stack overflow (an abort, not a panic) for deep brackets, long operator
//! chains and long `before` chains; a panic for a cycle through an undefined rule id; about a
//! minute for a 690 KB file.

use rule_dsl::{check_sources, parse_file, render};
use std::time::{Duration, Instant};

const HEAD: &str = "use domain ai.onnx as onnx opset 24\n";

/// A rule whose one check is `expr`.
fn with_check(expr: &str) -> String {
    format!("{HEAD}rule fuse.x {{\n  stage fuse\n  check c: {expr} else \"m\"\n}}\n")
}

fn error(src: &str) -> String {
    match check_sources(&[("h.rule", src)]) {
        Ok(_) => panic!("expected an error"),
        Err(d) => render(&d),
    }
}

#[test]
fn deep_parentheses_are_an_error_at_the_first_bracket_too_deep() {
    let e = error(&with_check(&format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000))));
    // The rule's `{` is level 1 and `check c: ` puts the first `(` at column 12, so the
    // 32nd `(` (column 43) opens level 33.
    assert!(e.starts_with("h.rule:4:43: error: brackets nest more than 32 levels deep"), "{e}");
    let e = error(&with_check(&format!("{}{}", "[".repeat(10_000), "]".repeat(10_000))));
    assert!(e.contains("nest more than 32"), "{e}");
    let e = error(&format!("rule fuse.x {{ check c: f({}) else \"m\" }}", "g(".repeat(5_000)));
    assert!(e.contains("nest more than 32"), "{e}");
}

#[test]
fn nesting_at_the_limit_parses() {
    // 32 levels in all: the `{` of the rule and 31 parentheses.
    let src = with_check(&format!("{}1{} == 1", "(".repeat(31), ")".repeat(31)));
    let f = parse_file("h.rule", &src).unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(f.rules[0].checks.len(), 1);
}

#[test]
fn brackets_in_strings_and_comments_do_not_count() {
    let deep = "(".repeat(100);
    let src = format!("{HEAD}// {deep}\n/// {deep}\nrule fuse.x {{\n  check c: 1 == 1 else \"{deep}\"\n}}\n");
    parse_file("h.rule", &src).unwrap_or_else(|d| panic!("{d}"));
}

#[test]
fn deep_nesting_in_a_message_expression_is_an_error_at_the_message() {
    let src = format!("{HEAD}rule fuse.x {{\n  check c: 1 == 1 else \"x {{{}1{}}}\"\n}}\n", "(".repeat(1_000), ")".repeat(1_000));
    let e = error(&src);
    assert!(e.starts_with("h.rule:3:") && e.contains("nest more than 32"), "{e}");
}

#[test]
fn long_operator_chains_and_runs_of_not_are_an_error() {
    let e = error(&with_check(&format!("1{}", " + 1".repeat(100_000))));
    assert!(e.starts_with("h.rule:4:12: error: expression nests more than 128 operators deep"), "{e}");
    let e = error(&with_check(&format!("{}true", "!".repeat(100_000))));
    assert!(e.contains("more than 128 operators"), "{e}");
    let e = error(&with_check(&format!("{}1{}", "f(".repeat(31), ")".repeat(31)).replace("1)", &format!("1{})", " * 1".repeat(120)))));
    assert!(e.contains("more than 128 operators"), "{e}");
    // At the limit the tree is kept.
    let src = with_check(&format!("1{}", " + 1".repeat(127)));
    parse_file("h.rule", &src).unwrap_or_else(|d| panic!("{d}"));
}

#[test]
fn a_long_chain_of_before_is_checked_without_recursion() {
    let src: String = (0..20_000).map(|i| format!("rule fuse.r{i} {{ before fuse.r{} }}\n", i + 1)).collect();
    let e = error(&src);
    assert!(e.contains("unknown rule id `fuse.r20000`"), "{}", &e[..e.len().min(400)]);
}

#[test]
fn a_cycle_through_an_undefined_id_is_reported_at_a_defined_rule() {
    let src = "rule fuse.a {\n  before fuse.x\n}\nrule fuse.b {\n  after fuse.x\n  before fuse.x\n}\n";
    let e = error(src);
    assert!(e.contains("h.rule:4:6: error: `before`/`after` form a cycle: fuse.x -> fuse.b -> fuse.x"), "{e}");
    assert!(e.contains("unknown rule id `fuse.x`"), "{e}");
}

#[test]
fn a_large_file_parses_in_linear_time() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules/rules");
    let mut one = String::new();
    for name in ["fuse.gqa.rule", "fuse.pack_qkv.rule", "lower.int64_to_int32.rule"] {
        one.push_str(&std::fs::read_to_string(dir.join(name)).unwrap());
    }
    let src = one.repeat(700_000 / one.len());
    let start = Instant::now();
    let f = parse_file("h.rule", &src).unwrap_or_else(|d| panic!("{d}"));
    assert!(f.rules.len() > 100);
    // Quadratic before: 65 s for 690 KB in a debug build; now about 0.1 s.
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
}

#[test]
fn a_file_over_one_mebibyte_is_refused() {
    let src = format!("{HEAD}{}", " ".repeat(rule_dsl::MAX_FILE_BYTES));
    let e = parse_file("h.rule", &src).unwrap_err().to_string();
    assert!(e.starts_with("h.rule:1:1: error: the file holds 1048612 bytes; a rule file may hold at most 1048576"), "{e}");
}

#[test]
fn thousands_of_unknown_ids_are_reported_quickly() {
    let src: String = (0..10_000).map(|i| format!("rule fuse.r{i} {{ before fuse.q{i} }}\n")).collect();
    let start = Instant::now();
    let e = error(&src);
    assert!(e.contains("unknown rule id `fuse.q9999`"));
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
}
