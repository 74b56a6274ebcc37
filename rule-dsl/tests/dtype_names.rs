//! Dtype names in rules are tokens of the one dtype vocabulary (`ep_sets::DType`): checked when
//! the rule is compiled, an unknown one is an error at its `file:line:col` that lists the names
//! that exist; a raw `Cast` code or a quoted dtype is an error that says how to write it.

use rule_dsl::ast::{BinOp, Expr, Literal};

const HEAD: &str = "use domain ai.onnx as onnx opset 24\nuse domain com.microsoft as ms opset 1\n";

/// A valid rule using a dtype set in a check and a dtype name as a Cast target.
const GOOD: &str = r#"
rule lower.widen {
  stage lower
  match {
    ?out = onnx.Gelu(?x)
    root ?out
  }
  check float_input: dtype(?x) in {f16, bf16}
    else "Gelu input is {dtype(?x)}"
  emit {
    ?x32 = onnx.Cast(?x) [to: f32]
    ?y32 = onnx.Gelu(?x32)
    replace ?out with onnx.Cast(?y32) [to: f16]
  }
}
"#;

const NAMES2: &str = "f32, f16, bf16, f64, i64, i32, i16, i8, u8, bool, i4, u4";
const NAMES: &str = "the dtypes are f32, f16, bf16, f64, i64, i32, i16, i8, u8, bool, i4, u4";

fn errors(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "`{from}` not in the good rule");
    let src = format!("{HEAD}{}", GOOD.replacen(from, to, 1));
    match rule_dsl::check_sources(&[("rules/lower.widen.rule", &src)]) {
        Ok(_) => panic!("should not pass:\n{src}"),
        Err(d) => rule_dsl::render(&d),
    }
}

#[test]
fn names_compile_to_codes_and_names() {
    let files = rule_dsl::check_sources(&[("rules/lower.widen.rule", &format!("{HEAD}{GOOD}"))]).unwrap();
    let rule = &files[0].rules[0];
    // `in {f16, bf16}` is the `||` of two comparisons, as if written out.
    let Expr::Bin { op: BinOp::Or, lhs, rhs, .. } = &rule.checks[0].expr else { panic!("{:?}", rule.checks[0].expr) };
    for (side, want) in [(lhs, rule_dsl::DType::F16), (rhs, rule_dsl::DType::BF16)] {
        let Expr::Bin { op: BinOp::Eq, rhs, .. } = side.as_ref() else { panic!("{side:?}") };
        assert!(matches!(rhs.as_ref(), Expr::Lit(Literal::DType(d), _) if *d == want), "{rhs:?}");
    }
    assert_eq!(rule.checks[0].expr_text, "dtype(?x) in {f16, bf16}");
    let rule_dsl::ast::EmitLine::Op { attrs, .. } = &rule.emits[0] else { panic!() };
    assert!(matches!(&attrs[0].1, rule_dsl::ast::AttrVal::Lit(Literal::DType(rule_dsl::DType::F32), _)));
}

#[test]
fn unknown_name_in_a_cast_target() {
    assert_eq!(
        errors("[to: f32]", "[to: f31]"),
        format!("rules/lower.widen.rule:13:31: error: unknown dtype `f31`\n  help: {NAMES}")
    );
}

#[test]
fn unknown_name_in_a_dtype_set() {
    assert_eq!(
        errors("in {f16, bf16}", "in {f16, bfloat16}"),
        format!("rules/lower.widen.rule:10:41: error: unknown dtype `bfloat16`\n  help: {NAMES}")
    );
}

#[test]
fn unknown_name_in_a_comparison() {
    assert_eq!(
        errors("dtype(?x) in {f16, bf16}", "dtype(?x) == float16"),
        format!("rules/lower.widen.rule:10:35: error: unknown dtype `float16`\n  help: {NAMES}")
    );
}

#[test]
fn cast_code_is_refused() {
    assert_eq!(
        errors("[to: f32]", "[to: 1]"),
        format!("rules/lower.widen.rule:13:31: error: `Cast` target written as the code `1`\n  help: write the dtype name, e.g. `[to: f32]` (`1` is `f32`); {NAMES}")
    );
}

#[test]
fn quoted_dtype_is_refused() {
    assert_eq!(
        errors("dtype(?x) in {f16, bf16}", "dtype(?x) == \"f61\""),
        format!("rules/lower.widen.rule:10:35: error: dtype compared with the string \"f61\"\n  help: write the dtype as a name, unquoted, so it is checked: `f61` ({NAMES2})")
    );
}

/// `stored_form(?w)` gives `float` or `ir::StoredForm`'s spelling: those compile; a literal it
/// never gives (a ggml type name, a loose spelling) is an error, not a check that never passes.
#[test]
fn stored_form_literals_are_checked() {
    for good in ["\"float\"", "\"4-bit, block 32, float zero points\"", "\"8-bit, block 16, mid zero point\"", "\"4-bit, block 128, integer zero points, act-order 0a1b2c3d\""] {
        let src = format!("{HEAD}{}", GOOD.replacen("dtype(?x) in {f16, bf16}", &format!("stored_form(?x) != {good}"), 1));
        rule_dsl::check_sources(&[("rules/lower.widen.rule", &src)]).unwrap_or_else(|d| panic!("{good}: {}", rule_dsl::render(&d)));
    }
    let help = "it gives \"float\" or \"<4|8>-bit, block <n>, <mid zero point|integer zero points|float zero points>\" (\", act-order <8 hex digits of the row order>\" after it for GPTQ act-order), e.g. \"4-bit, block 32, float zero points\"";
    for bad in ["\"Q4_K\"", "\"4 bit, block 32, float zero points\"", "\"4-bit, block 0, mid zero point\"", "\"2-bit, block 32, mid zero point\"", "\"4-bit, block 32, mid zero point, act-order\"", "4"] {
        let got = errors("dtype(?x) in {f16, bf16}", &format!("stored_form(?x) == {bad}"));
        assert_eq!(got, format!("rules/lower.widen.rule:10:41: error: `stored_form` compared with something it never gives\n  help: {help}"), "{bad}");
    }
}
