//! Emit fragments: shared emit lines, inlined where an emit block uses them (the rule compiles
//! to the lines written out), checked on their own at their `file:line`, and a use of one that
//! does not exist is an error naming the ones that do.

use rule_dsl::ast::{AttrVal, EmitLine, Literal, RuleFile, Slot};

const HEAD: &str = "use domain ai.onnx as onnx opset 24\nuse domain com.microsoft as ms opset 1\n";

/// In `shared.rule`: a fragment that uses another, with a literal argument for an attribute.
const SHARED: &str = r#"
emit fragment skip_norm(?out, ?sum, ?x, ?skip, ?gamma, ?eps) {
  replace (?out, _, _, ?sum) with ms.SkipSimplifiedLayerNormalization(?x, ?skip, ?gamma) [epsilon: ?eps]
}

emit fragment gelu_then_norm(?out, ?sum, ?x, ?skip, ?gamma, ?approx) -> ?g {
  ?g = onnx.Gelu(?x) [approximate: ?approx]
  skip_norm(?out, ?sum, ?g, ?skip, ?gamma, 1e-5)
}
"#;

const RULE: &str = r#"
rule fuse.ok {
  stage fuse
  match {
    ?sum = onnx.Add{?x, ?skip}
    ?out = onnx.RMSNormalization(?sum, ?gamma)
    root ?out
  }
  emit {
    ?g = gelu_then_norm(?out, ?sum, ?x, ?skip, ?gamma, "tanh")
  }
}
"#;

fn check(shared: &str, rule: &str) -> Result<Vec<RuleFile>, String> {
    rule_dsl::check_sources(&[("rules/fragments/shared.rule", &format!("{HEAD}{shared}")), ("rules/fuse.ok.rule", &format!("{HEAD}{rule}"))])
        .map_err(|d| rule_dsl::render(&d))
}

#[test]
fn a_use_is_inlined_where_it_stands() {
    let files = check(SHARED, RULE).unwrap();
    let rule = &files.iter().find(|f| f.path.ends_with("fuse.ok.rule")).unwrap().rules[0];
    // The Gelu, then the nested fragment's node, in the order written.
    let ops: Vec<&str> = rule.emits.iter().map(|e| match e {
        EmitLine::Op { op, .. } => op.name.as_str(),
        EmitLine::Helper { name, .. } => name.as_str(),
    }).collect();
    assert_eq!(ops, ["Gelu", "SkipSimplifiedLayerNormalization"]);
    let EmitLine::Op { outputs, args, attrs, .. } = &rule.emits[1] else { panic!() };
    // Parameters became the rule's captures, the result the use's output, literals attributes.
    assert_eq!(args.iter().map(|a| a.capture().unwrap_or("_")).collect::<Vec<_>>(), ["g", "skip", "gamma"]);
    assert!(matches!(&attrs[0].1, AttrVal::Lit(Literal::Float(f), _) if *f == 1e-5));
    assert!(matches!(&outputs[..], [Slot::Capture(o, _), Slot::Wild(_), Slot::Wild(_), Slot::Capture(s, _)] if o == "out#with" && s == "sum#with"));
    let EmitLine::Op { attrs, .. } = &rule.emits[0] else { panic!() };
    assert!(matches!(&attrs[0].1, AttrVal::Lit(Literal::Str(s), _) if s == "tanh"));
    let replaced: Vec<&str> = rule.replaces.iter().map(|r| r.old.0.as_str()).collect();
    assert_eq!(replaced, ["out", "sum"]);
}

#[test]
fn unknown_emit_fragment() {
    let e = check(SHARED, &RULE.replace("gelu_then_norm(", "gelu_norm(")).unwrap_err();
    assert_eq!(
        e,
        "rules/fuse.ok.rule:12:5: error: unknown emit fragment `gelu_norm`\n  help: the emit fragments are gelu_then_norm, skip_norm"
    );
}

#[test]
fn a_bare_operator_is_not_a_fragment() {
    let e = check(SHARED, &RULE.replace("?g = gelu_then_norm(?out, ?sum, ?x, ?skip, ?gamma, \"tanh\")", "?g = Gelu(?x)\n    replace ?out with ?g")).unwrap_err();
    assert!(e.starts_with("rules/fuse.ok.rule:12:5: error: unknown emit fragment `Gelu`\n  help: an operator is written with its domain alias: `onnx.Gelu`"), "{e}");
}

#[test]
fn wrong_arity_points_at_the_use_and_the_definition() {
    let e = check(SHARED, &RULE.replace(", \"tanh\")", ")")).unwrap_err();
    assert_eq!(
        e,
        "rules/fuse.ok.rule:12:5: error: emit fragment `gelu_then_norm` takes 6 argument(s) (?out, ?sum, ?x, ?skip, ?gamma, ?approx), not 5\n  help: see its definition at rules/fragments/shared.rule:8"
    );
}

#[test]
fn a_literal_only_stands_for_an_attribute() {
    let e = check(SHARED, &RULE.replace("?gamma, \"tanh\")", "1.0, \"tanh\")")).unwrap_err();
    assert!(e.starts_with("rules/fuse.ok.rule:12:48: error: a literal for `?gamma`, which emit fragment `gelu_then_norm` uses as a value"), "{e}");
}

#[test]
fn mistakes_inside_a_definition_point_at_it() {
    // An unknown op and an unknown dtype, each at the fragment's own file:line.
    let e = check(&SHARED.replace("onnx.Gelu(?x)", "onnx.Gelo(?x)"), RULE).unwrap_err();
    assert!(e.starts_with("rules/fragments/shared.rule:9:8: error: unknown op `Gelo` in domain `ai.onnx`"), "{e}");
    let e = check(&SHARED.replace("[approximate: ?approx]", "[approximate: ?approx]\n  ?c = onnx.Cast(?x) [to: f31]"), RULE).unwrap_err();
    assert!(e.starts_with("rules/fragments/shared.rule:10:27: error: unknown dtype `f31`"), "{e}");
    let e = check(&SHARED.replace("skip_norm(?out, ?sum, ?g,", "skip_norm(?out, ?sum, ?h,"), RULE).unwrap_err();
    assert!(e.contains("rules/fragments/shared.rule:10:3: error: capture `?h` is used before it is bound"), "{e}");
}

#[test]
fn a_fragment_cannot_use_itself() {
    let shared = SHARED.replace("  replace (?out, _, _, ?sum) with", "  skip_norm(?out, ?sum, ?x, ?skip, ?gamma, ?eps)\n  replace (?out, _, _, ?sum) with");
    let e = check(&shared, RULE).unwrap_err();
    assert!(e.contains("rules/fragments/shared.rule:5:3: error: emit fragment `skip_norm` uses itself (through skip_norm)"), "{e}");
}
