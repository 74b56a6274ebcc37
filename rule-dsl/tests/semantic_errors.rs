//! Each semantic error of the language, on a small bad `.rule` file, gives its message, its
//! fix and its `file:line:col` (insta snapshots of the rendered diagnostics).

const HEAD: &str = "use domain ai.onnx as onnx opset 24\nuse domain com.microsoft as ms opset 1\n";

fn errors(name: &str, body: &str) -> String {
    let src = format!("{HEAD}{body}");
    match rule_dsl::check_sources(&[(name, &src)]) {
        Ok(_) => panic!("{name} should not pass:\n{src}"),
        Err(d) => rule_dsl::render(&d),
    }
}

/// A valid rule, edited by each case.
const GOOD: &str = r#"
rule fuse.ok {
  stage fuse
  match {
    ?sum = onnx.Add{?x, ?skip}
    ?out = onnx.RMSNormalization(?sum, ?gamma) [epsilon: ?eps default 1e-5]
    root ?out
  }
  check same_shape: shape(?x) == shape(?skip) else "shapes differ: {shape(?x)}"
  emit {
    (?y, _, _, ?s) = ms.SkipSimplifiedLayerNormalization(?x, ?skip, ?gamma) [epsilon: ?eps]
    replace ?out with ?y
    replace ?sum with ?s
  }
}
"#;

fn case(name: &str, from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "case {name}: `{from}` not in the good rule");
    errors(name, &GOOD.replacen(from, to, 1))
}

#[test]
fn the_good_rule_is_good() {
    rule_dsl::check_sources(&[("good.rule", &format!("{HEAD}{GOOD}"))]).unwrap();
}

#[test]
fn unbound_capture() {
    insta::assert_snapshot!(case("unbound.rule", "shape(?x) == shape(?skip)", "shape(?x) == shape(?skp)"));
}

#[test]
fn unused_capture() {
    insta::assert_snapshot!(case("unused.rule", "?out = onnx.RMSNormalization(?sum, ?gamma) [epsilon: ?eps default 1e-5]", "?out = onnx.RMSNormalization(?sum, ?gamma) [epsilon: ?eps default 1e-5, axis: ?axis]"));
}

#[test]
fn unknown_domain_alias() {
    insta::assert_snapshot!(case("alias.rule", "?sum = onnx.Add", "?sum = ox.Add"));
}

#[test]
fn unknown_domain() {
    insta::assert_snapshot!(errors("domain.rule", "use domain com.example as ex opset 1\n"));
}

#[test]
fn unknown_op() {
    insta::assert_snapshot!(case("op.rule", "onnx.RMSNormalization", "onnx.RmsNormalization"));
}

#[test]
fn emitted_op_without_domain() {
    insta::assert_snapshot!(case("nodomain.rule", "= ms.SkipSimplifiedLayerNormalization", "= SkipSimplifiedLayerNormalization"));
}

#[test]
fn emitted_op_without_opset() {
    let src = format!("use domain ai.onnx as onnx opset 24\nuse domain com.microsoft as ms\n{GOOD}");
    insta::assert_snapshot!(rule_dsl::render(&rule_dsl::check_sources(&[("noopset.rule", &src)]).unwrap_err()));
}

#[test]
fn duplicate_check_id() {
    insta::assert_snapshot!(case(
        "dupcheck.rule",
        "  emit {",
        "  check same_shape: rank(?gamma) == 1 else \"gamma is not 1-D\"\n  emit {"
    ));
}

#[test]
fn unknown_rule_id_in_ordering() {
    insta::assert_snapshot!(case("order.rule", "  stage fuse\n", "  stage fuse\n  after fuse.gqa_rotory\n  before fuse.ok2\n"));
}

#[test]
fn duplicate_rule_id() {
    let src = format!("{HEAD}{GOOD}{GOOD}");
    insta::assert_snapshot!(rule_dsl::render(&rule_dsl::check_sources(&[("duprule.rule", &src)]).unwrap_err()));
}

#[test]
fn unknown_stage_and_priority_ordering_cycle() {
    let two = format!("{}{}", GOOD.replacen("stage fuse", "stage fusion\n  before fuse.two", 1), GOOD.replacen("fuse.ok", "fuse.two", 1).replacen("stage fuse", "stage fuse\n  before fuse.ok", 1));
    insta::assert_snapshot!(errors("cycle.rule", &two));
}

#[test]
fn unknown_function_and_helper() {
    insta::assert_snapshot!(case(
        "calls.rule",
        "shape(?x) == shape(?skip)",
        "shape(?x) == shapes(?skip)"
    ) + "\n---\n" + &case("helper.rule", "replace ?out with ?y", "(?z) = helper magic(?x)\n    replace ?out with ?y"));
}

/// slice_weight's last input is a `let` integer list; a value there is an error.
#[test]
fn list_helper_given_a_value() {
    insta::assert_snapshot!(case("list.rule", "replace ?out with ?y", "(_, _) = helper slice_weight(?gamma, ?x)\n    replace ?out with ?y"));
}

#[test]
fn nothing_replaced_and_disconnected_line() {
    insta::assert_snapshot!(case("root.rule", "    replace ?out with ?y\n    replace ?sum with ?s\n", "") + "\n---\n" + &case(
        "island.rule",
        "    root ?out",
        "    ?other = onnx.Mul(?gamma, ?x)\n    root ?out"
    ));
}

#[test]
fn syntax_error_has_a_position() {
    insta::assert_snapshot!(case("syntax.rule", "root ?out", "root out"));
}

/// `-` (absent input) where it cannot stand: in `{a, b}`, as the last operand, in an emit line.
#[test]
fn misplaced_absent_input() {
    insta::assert_snapshot!(case("absent_commutative.rule", "onnx.Add{?x, ?skip}", "onnx.Add{?x, -}")
        + "\n---\n"
        + &case("absent_trailing.rule", "onnx.RMSNormalization(?sum, ?gamma)", "onnx.RMSNormalization(?sum, ?gamma, -)")
        + "\n---\n"
        + &case("absent_emit.rule", "SkipSimplifiedLayerNormalization(?x, ?skip, ?gamma)", "SkipSimplifiedLayerNormalization(?x, ?skip, ?gamma, -)"));
}

/// A `-` before a present operand is fine, and a computed list in a `let` is accepted.
#[test]
fn absent_input_and_let_list_are_accepted() {
    let src = GOOD.replacen("onnx.RMSNormalization(?sum, ?gamma)", "onnx.RMSNormalization(?sum, -, ?gamma)", 1).replacen(
        "  check same_shape",
        "  let ?shape = [0, ?eps, -1]\n  check same_shape",
        1,
    );
    let src = src.replacen("replace ?sum with ?s", "replace ?sum with ?s\n    _ = onnx.Constant() [value_ints: ?shape]", 1);
    let out = rule_dsl::check_sources(&[("ok.rule", &format!("{HEAD}{src}"))]);
    assert!(out.is_ok(), "{}", out.err().map(|d| rule_dsl::render(&d)).unwrap_or_default());
}

/// A rule with a list capture (`..?ys`) and a `for` block, edited by the list cases.
const LIST: &str = r#"
rule lower.each {
  stage prefuse
  match {
    (..?ys) = onnx.If(?cond) [then_branch: ?then, else_branch: ?else]
    root ?ys
  }
  check same_outputs: branch_outputs(?then) == len(?ys) && rank(?cond) <= min(rank(?ys))
    else "{len(?ys)} outputs of ranks {rank(?ys)}"
  emit {
    (..?ts) = helper inline_branch(?then)
    (..?es) = helper inline_branch(?else)
    for (?y, ?t, ?e) in (?ys, ?ts, ?es) {
      ?w = onnx.Where(?cond, ?t, ?e)
      replace ?y with ?w
    }
  }
}
"#;

fn list_case(name: &str, from: &str, to: &str) -> String {
    assert!(LIST.contains(from), "case {name}: `{from}` not in the list rule");
    errors(name, &LIST.replacen(from, to, 1))
}

#[test]
fn list_capture_and_for_are_accepted() {
    let out = rule_dsl::check_sources(&[("each.rule", &format!("{HEAD}{LIST}"))]);
    assert!(out.is_ok(), "{}", out.err().map(|d| rule_dsl::render(&d)).unwrap_or_default());
}

/// `..?xs` only last in an outputs tuple, of a match line or of a helper returning any count.
#[test]
fn misplaced_list_capture() {
    insta::assert_snapshot!(list_case("list_first.rule", "(..?ys) = onnx.If", "(..?ys, ?last) = onnx.If")
        + "\n---\n"
        + &list_case("list_operand.rule", "onnx.If(?cond)", "onnx.If(?cond, ..?rest)")
        + "\n---\n"
        + &list_case("list_op_output.rule", "?w = onnx.Where", "..?w = onnx.Where")
        + "\n---\n"
        + &list_case("list_emit_operand.rule", "onnx.Where(?cond, ?t, ?e)", "onnx.Where(?cond, ?ts, ?e)"));
}

/// A `for` iterates list captures, one variable per list; what it binds stays inside it, and
/// only a variable over a list the match bound can be replaced.
#[test]
fn for_block_mistakes() {
    insta::assert_snapshot!(list_case("for_not_list.rule", "in (?ys, ?ts, ?es)", "in (?ys, ?ts, ?cond)")
        + "\n---\n"
        + &list_case("for_counts.rule", "for (?y, ?t, ?e) in", "for (?y, ?t) in")
        + "\n---\n"
        + &list_case("for_local.rule", "      replace ?y with ?w\n    }", "    }\n    replace ?y with ?w")
        + "\n---\n"
        + &list_case("for_replace_emitted.rule", "replace ?y with ?w", "replace ?t with ?w"));
}
