//! Fragments (docs/rule-language.md, "Fragments"): a good set inlines to the rule it stands
//! for, and each mistake in defining or using one is a semantic error with its message, its
//! fix and its `file:line:col` (insta snapshots of the rendered diagnostics). A fragment's own
//! mistakes point at the fragment's file; mistakes only its use shows point at the rule.

use rule_dsl::ast::{RuleFile, Slot};

const HEAD: &str = "use domain ai.onnx as onnx opset 24\nuse domain com.microsoft as ms opset 1\n";

/// Shared fragments, in their own file.
const SHARED: &str = r#"
/// `Add{x, skip}` whose operands agree in shape.
fragment residual(?x, ?skip) -> ?sum {
  ?sum = onnx.Add{?x, ?skip}
  check same_shape: shape(?x) == shape(?skip) else "shapes differ: {shape(?x)}"
}

/// A [hidden] scale.
fragment scale_1d(?gamma) {
  check gamma_1d: rank(?gamma) == 1 else "gamma is {shape(?gamma)}"
}
"#;

/// A rule that uses both, edited by each case.
const RULE: &str = r#"
rule fuse.ok {
  stage fuse
  match {
    ?sum = residual(?x, ?skip)
    ?out = onnx.RMSNormalization(?sum, ?gamma) [epsilon: ?eps default 1e-5]
    root ?out
  }
  check scale_1d(?gamma)
  check eps_small: ?eps < 1.0 else "epsilon {?eps}"
  emit {
    replace (?out, _, _, ?sum) with ms.SkipSimplifiedLayerNormalization(?x, ?skip, ?gamma) [epsilon: ?eps]
  }
}
"#;

fn check(shared: &str, rule: &str) -> Result<Vec<RuleFile>, String> {
    let shared = format!("{HEAD}{shared}");
    let rule = format!("{HEAD}{rule}");
    rule_dsl::check_sources(&[("rules/fragments/shared.rule", &shared), ("rules/fuse.ok.rule", &rule)]).map_err(|d| rule_dsl::render(&d))
}

fn errors(name: &str, shared: &str, rule: &str) -> String {
    match check(shared, rule) {
        Ok(_) => panic!("case {name} should not pass"),
        Err(e) => e,
    }
}

/// The good set with one edit in the shared file or in the rule.
fn shared_case(name: &str, from: &str, to: &str) -> String {
    assert!(SHARED.contains(from), "case {name}: `{from}` not in the fragments");
    errors(name, &SHARED.replacen(from, to, 1), RULE)
}

fn rule_case(name: &str, from: &str, to: &str) -> String {
    assert!(RULE.contains(from), "case {name}: `{from}` not in the rule");
    errors(name, SHARED, &RULE.replacen(from, to, 1))
}

#[test]
fn a_used_fragment_is_inlined_into_the_rule() {
    let files = check(SHARED, RULE).unwrap_or_else(|e| panic!("{e}"));
    let r = &files[1].rules[0];
    // The fragment's line joins the match, its check comes first, then the check use's, then
    // the rule's own.
    assert_eq!(r.matches.len(), 2);
    let add = r.matches.iter().find(|m| m.op.name == "Add").unwrap();
    let origin = add.origin.as_ref().expect("the Add line was inlined");
    assert_eq!((origin.fragment.as_str(), origin.file.as_str(), origin.pos.line), ("residual", "rules/fragments/shared.rule", 6));
    assert_eq!(add.pos.line, 7, "the inlined line stands at the use, in the rule's file");
    assert!(matches!(&add.args[..], [Slot::Capture(x, _), Slot::Capture(s, _)] if x == "x" && s == "skip"));
    let checks: Vec<(&str, Option<&str>)> = r.checks.iter().map(|c| (c.id.as_str(), c.origin.as_ref().map(|o| o.fragment.as_str()))).collect();
    assert_eq!(checks, [("same_shape", Some("residual")), ("gamma_1d", Some("scale_1d")), ("eps_small", None)]);
    // `replace (...) with op` emits the node where it stands and replaces in order.
    assert_eq!(r.emits.len(), 1);
    let olds: Vec<&str> = r.replaces.iter().map(|p| p.old.0.as_str()).collect();
    assert_eq!(olds, ["out", "sum"]);
}

/// A fragment's own captures are fresh at each use, so two rules (or two uses) never share one.
#[test]
fn own_captures_are_fresh_per_use() {
    let shared = "fragment doubled(?x) -> ?y {\n  ?y = onnx.Add(?x, ?t)\n  ?t = onnx.Mul(?x, ?two)\n  check two: const_float(?two) == 2.0 else \"not two\"\n}\n";
    let rule = RULE.replacen("?sum = residual(?x, ?skip)", "?sum = onnx.Add{?x, ?skip}\n    ?skip = doubled(?x)", 1).replacen("  check scale_1d(?gamma)\n", "", 1);
    let files = check(shared, &rule).unwrap_or_else(|e| panic!("{e}"));
    let caps: Vec<String> = files[1].rules[0].matches.iter().flat_map(|m| m.args.iter().filter_map(|s| s.capture().map(str::to_string))).collect();
    assert!(caps.iter().any(|c| c.starts_with("t#")) && caps.iter().any(|c| c.starts_with("two#")), "{caps:?}");
    assert_eq!(rule_dsl::ast::display("two#3"), "two");
}

#[test]
fn unknown_fragment() {
    insta::assert_snapshot!(rule_case("unknown.rule", "?sum = residual(?x, ?skip)", "?sum = resid(?x, ?skip)")
        + "\n---\n"
        + &rule_case("bare_op.rule", "?sum = residual(?x, ?skip)", "?sum = Add(?x, ?skip)"));
}

#[test]
fn wrong_arity() {
    insta::assert_snapshot!(rule_case("args.rule", "residual(?x, ?skip)", "residual(?x)")
        + "\n---\n"
        + &rule_case("results.rule", "?sum = residual(?x, ?skip)", "(?sum, ?other) = residual(?x, ?skip)")
        + "\n---\n"
        + &rule_case("check_use_of_pattern.rule", "check scale_1d(?gamma)", "check residual(?x, ?skip)")
        + "\n---\n"
        + &rule_case("match_use_of_checks.rule", "?sum = residual(?x, ?skip)", "?sum = residual(?x, ?skip)\n    ?g = scale_1d(?gamma)"));
}

/// A fragment's own capture named like one of the rule's: two values, one name in reports.
#[test]
fn capture_clash() {
    let shared = SHARED.replacen("?sum = onnx.Add{?x, ?skip}", "?sum = onnx.Add{?x, ?eps}\n  ?eps = onnx.Neg(?skip)", 1);
    insta::assert_snapshot!(errors("clash.rule", &shared, RULE));
}

/// Two uses of a fragment whose lines bind their own captures would give two steps one name.
#[test]
fn fragment_with_own_lines_used_twice() {
    let shared = "fragment negated(?x) -> ?y {\n  ?y = onnx.Neg(?n)\n  ?n = onnx.Neg(?x)\n}\n".to_string() + SHARED;
    let rule = RULE.replacen("?sum = residual(?x, ?skip)", "?sum = residual(?a, ?b)\n    ?a = negated(?x)\n    ?b = negated(?skip)", 1);
    insta::assert_snapshot!(errors("twice.rule", &shared, &rule));
}

#[test]
fn recursion() {
    let shared = SHARED.to_string() + "\nfragment loop_a(?x) -> ?y {\n  ?y = loop_b(?x)\n}\n\nfragment loop_b(?x) -> ?y {\n  ?y = loop_a(?x)\n}\n";
    let rule = RULE.replacen("?sum = residual(?x, ?skip)", "?sum = residual(?x, ?s)\n    ?s = loop_a(?skip)", 1);
    insta::assert_snapshot!(errors("loop.rule", &shared, &rule));
}

/// Mistakes in a definition are reported once, at the fragment, whoever uses it.
#[test]
fn mistakes_inside_a_fragment_point_at_it() {
    insta::assert_snapshot!(shared_case("unbound.rule", "shape(?x) == shape(?skip)", "shape(?x) == shape(?skp)")
        + "\n---\n"
        + &shared_case("unknown_op.rule", "onnx.Add{?x, ?skip}", "onnx.Addd{?x, ?skip}")
        + "\n---\n"
        + &shared_case("no_result.rule", "?sum = onnx.Add{?x, ?skip}", "?total = onnx.Add{?x, ?skip}")
        + "\n---\n"
        + &shared_case("disconnected.rule", "  check same_shape", "  ?other = onnx.Neg(?x)\n  check same_shape")
        + "\n---\n"
        + &shared_case("unused.rule", "?sum = onnx.Add{?x, ?skip}", "?sum = onnx.Add{?x, ?skip}\n  ?skip = onnx.Neg(?lone)")
        + "\n---\n"
        + &shared_case("unused_param.rule", "fragment scale_1d(?gamma)", "fragment scale_1d(?gamma, ?beta)"));
}

/// `_` and `-` stand only where they can mean what they say.
#[test]
fn wildcard_and_absent_arguments() {
    insta::assert_snapshot!(rule_case("wild_read_only.rule", "check scale_1d(?gamma)", "check scale_1d(_)")
        + "\n---\n"
        + &rule_case("absent_not_operand.rule", "residual(?x, ?skip)", "residual(?x, -)"));
}

#[test]
fn duplicate_fragment_name() {
    let shared = SHARED.to_string() + "\nfragment residual(?x, ?skip) -> ?sum {\n  ?sum = onnx.Add(?x, ?skip)\n}\n";
    insta::assert_snapshot!(errors("dup.rule", &shared, RULE));
}

/// The prelude's domains reach every file; a file may not declare one of its aliases again.
#[test]
fn prelude_domains() {
    let prelude = HEAD;
    let shared = SHARED;
    let good = rule_dsl::check_sources(&[("rules/prelude.rule", prelude), ("rules/fragments/shared.rule", shared), ("rules/fuse.ok.rule", RULE)]);
    assert!(good.is_ok(), "{}", good.err().map(|d| rule_dsl::render(&d)).unwrap_or_default());
    let twice = rule_dsl::check_sources(&[("rules/prelude.rule", prelude), ("rules/fragments/shared.rule", shared), ("rules/fuse.ok.rule", &format!("use domain ai.onnx as onnx opset 24\n{RULE}"))]);
    let in_prelude = rule_dsl::check_sources(&[("rules/prelude.rule", &format!("{HEAD}{SHARED}")), ("rules/fuse.ok.rule", RULE)]);
    insta::assert_snapshot!(rule_dsl::render(&twice.unwrap_err()) + "\n---\n" + &rule_dsl::render(&in_prelude.unwrap_err()));
}

/// `replace (..) with alias.Op(..)` names the values the outputs replace; `?new` is one value.
#[test]
fn replace_with_a_node() {
    insta::assert_snapshot!(rule_case("tuple_with_value.rule", "replace (?out, _, _, ?sum) with ms.SkipSimplifiedLayerNormalization(?x, ?skip, ?gamma) [epsilon: ?eps]", "(?y, _, _, ?s) = ms.SkipSimplifiedLayerNormalization(?x, ?skip, ?gamma) [epsilon: ?eps]\n    replace (?out, ?sum) with ?y")
        + "\n---\n"
        + &rule_case("nothing.rule", "replace (?out, _, _, ?sum) with", "replace (_, _) with"));
}
