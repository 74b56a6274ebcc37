//! `ruleck` on example trees (tests/ruleck/<case>/{rules,ep-sets}): each failing case gives
//! its findings at the right `.rule` / TOML spans (insta snapshots of the text output), the
//! passing case and the real tree give no error, and the binary's exit status and JSON follow.

use std::path::{Path, PathBuf};
use std::process::Command;

use rule_dsl::lint::{run, Inputs, Report, Severity};

fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ruleck").join(case)
}

fn lint(case: &str) -> Report {
    let dir = case_dir(case);
    run(&Inputs { rules: dir.join("rules"), ep_sets: dir.join("ep-sets"), base: dir }).expect("the case is readable")
}

fn codes(r: &Report) -> Vec<(&'static str, Severity)> {
    r.findings.iter().map(|f| (f.code, f.severity)).collect()
}

#[test]
fn pass_case_is_clean() {
    let r = lint("pass");
    assert!(r.findings.is_empty(), "{}", r.text());
    assert_eq!((r.rule_count, r.table_count), (1, 1));
}

#[test]
fn gqa_rotary_with_separate_rope_is_flagged_at_both_entries() {
    let r = lint("gqa_rotary_separate_rope");
    let f: Vec<_> = r.findings.iter().filter(|f| f.code == "fuse-then-decompose").collect();
    assert_eq!(f.len(), 1, "{}", r.text());
    let at: Vec<(&str, usize, usize)> = f[0].labels.iter().map(|l| (l.file.as_str(), l.line, l.col)).collect();
    // Both table entries (fuse list, lower list), then the emit line and the root line.
    assert_eq!(&at[..2], &[("ep-sets/gpu.toml", 6, 9), ("ep-sets/gpu.toml", 7, 10)]);
    assert_eq!(at[2].0, "rules/fuse.gqa_rotary.rule");
    assert_eq!(at[3].0, "rules/lower.separate_rope.rule");
    assert_eq!(r.errors(), 1, "only this finding (ep-sets' own UNDOES problem is folded into it):\n{}", r.text());
    insta::assert_snapshot!(r.text());
}

/// The table's lists are the schedule: a rule outside the list its `stage` line names, two
/// rules listed against a `before`/`after` line, and a not-applicable check the rule does not
/// have are errors at the table entries and the rule lines.
#[test]
fn schedule_mistakes() {
    let r = lint("schedule");
    let c = codes(&r);
    for code in ["schedule-stage", "schedule-order", "unknown-check"] {
        assert!(c.contains(&(code, Severity::Error)), "{code}:\n{}", r.text());
    }
    insta::assert_snapshot!(r.text());
}

#[test]
fn table_mistakes() {
    let r = lint("bad_table");
    let c = codes(&r);
    assert!(c.contains(&("unknown-rule", Severity::Error)), "{}", r.text());
    assert!(c.contains(&("missing-why", Severity::Error)), "{}", r.text());
    assert!(c.contains(&("unclaimed-emit", Severity::Error)), "{}", r.text());
    insta::assert_snapshot!(r.text());
}

/// A fusion whose output op the table claims only through a `host` entry is flagged: the EP
/// has no kernel for it, so fusing would move the work to the CPU EP.
#[test]
fn emitting_an_op_only_a_host_entry_claims_is_flagged() {
    let r = lint("host_only_emit");
    let text = r.text();
    assert!(codes(&r).contains(&("unclaimed-emit", Severity::Error)), "{text}");
    assert!(text.contains("only `host` entries"), "{text}");
}

/// An emitted node's type is the rule's own where its operands are the rule's Casts (through a
/// Squeeze or same-type arithmetic; a comparison's output is boolean): an int32 Range in an f16
/// plan is checked against the int32 claim, a Not of an Equal against the bool one; a Range
/// that reads a matched operand is checked at the plan's dtype and flagged.
#[test]
fn an_emit_over_the_rules_own_casts_is_checked_at_their_type() {
    let r = lint("int32_emit");
    let text = r.text();
    let flagged: Vec<&str> = text.lines().filter(|l| l.contains("unclaimed-emit")).collect();
    assert_eq!(flagged.len(), 1, "{text}");
    assert!(flagged[0].contains("`lower.narrow.uncast`") && flagged[0].contains("only for other types"), "{text}");
    assert!(!text.contains("lower.narrow.compare"), "{text}");
}

#[test]
fn rule_set_mistakes() {
    let r = lint("bad_rules");
    let c = codes(&r);
    for want in ["duplicate-rule", "cycle", "overlap"] {
        assert!(c.contains(&(want, Severity::Error)), "no {want}:\n{}", r.text());
    }
    insta::assert_snapshot!(r.text());
}

#[test]
fn lowering_after_the_fusion_that_consumes_its_output() {
    let r = lint("lowering_feeds_fusion");
    assert_eq!(codes(&r), vec![("lowering-feeds-fusion", Severity::Error)], "{}", r.text());
    insta::assert_snapshot!(r.text());
}

/// The same lowering, but its RMSNormalization reads an Identity the lowering emitted, where
/// the fusion's pattern wants an Add: the emitted node can never be fused, nothing to report.
#[test]
fn lowering_whose_operand_the_fusion_cannot_match() {
    let r = lint("lowering_feeds_fusion_other_producer");
    assert!(!codes(&r).iter().any(|(c, _)| *c == "lowering-feeds-fusion"), "{}", r.text());
    assert!(!r.findings.iter().any(|f| f.severity == Severity::Error), "{}", r.text());
}

/// Each rule's doc comment has the fixed sections, in order, once each, names every check, and
/// leaves `Tables:` to the generated page.
#[test]
fn doc_comment_sections() {
    let r = lint("doc_sections");
    assert!(codes(&r).iter().all(|c| *c == ("doc-sections", Severity::Error)), "{}", r.text());
    let messages: Vec<&str> = r.findings.iter().map(|f| f.message.as_str()).collect();
    for want in ["has no `Emits:` section", "has no `Does not cover:` section", "writes a `Tables:` section", "does not name `gamma_1d`", "is out of order", "two `Emits:` sections"] {
        assert!(messages.iter().any(|m| m.contains(want)), "no finding `{want}`:\n{}", r.text());
    }
    insta::assert_snapshot!(r.text());
}

/// One family per file, named after its base id; fragments only in `fragments/`.
#[test]
fn rules_directory_layout() {
    let r = lint("layout");
    assert_eq!(codes(&r), vec![("layout", Severity::Error); 2], "{}", r.text());
    insta::assert_snapshot!(r.text());
}

/// `--emit-docs` prints the page for a clean tree and refuses a tree with errors.
#[test]
fn emit_docs_needs_a_clean_tree() {
    let (code, page) = ruleck("pass", &["--emit-docs"]);
    assert_eq!(code, 0);
    assert!(page.contains("### fuse.skip_norm") && page.contains("**Tables** (the family's rules run together): `cpu` f32 (required)."), "{page}");
    let (code, page) = ruleck("doc_sections", &["--emit-docs"]);
    assert_eq!((code, page.as_str()), (1, ""));
}

/// docs/rules.md is generated from the `.rule` files and the tables; a stale page fails here.
#[test]
fn committed_rules_page_is_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let (report, page) = rule_dsl::lint::rules_page(&Inputs { rules: root.join("rules"), ep_sets: root.join("ep-sets"), base: root.clone() }).unwrap();
    let page = page.unwrap_or_else(|| panic!("no page: the rules have errors\n{}", report.text()));
    let committed = std::fs::read_to_string(root.join("docs/rules.md")).unwrap_or_default();
    assert!(committed == page, "docs/rules.md is stale: regenerate it with `{}` (from the workspace root)", rule_dsl::lint::REGENERATE);
}

/// The workspace's own rules and tables: CI also runs the binary on them (scripts/test.sh).
#[test]
fn real_tree_has_no_errors() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let r = run(&Inputs { rules: root.join("rules"), ep_sets: root.join("ep-sets"), base: root.clone() }).unwrap();
    assert_eq!(r.errors(), 0, "{}", r.text());
    assert!(r.rule_count > 0 && r.table_count > 0);
}

fn ruleck(case: &str, extra: &[&str]) -> (i32, String) {
    let dir = case_dir(case);
    let out = Command::new(env!("CARGO_BIN_EXE_ruleck"))
        .current_dir(&dir)
        .args(["--rules", "rules", "--ep-sets", "ep-sets"])
        .args(extra)
        .output()
        .expect("ruleck runs");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn exit_status_follows_errors() {
    assert_eq!(ruleck("pass", &[]).0, 0);
    let (code, text) = ruleck("bad_table", &[]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("ep-sets/cpu.toml:10:9"), "{text}");
    let bad = Command::new(env!("CARGO_BIN_EXE_ruleck")).arg("--nope").output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn json_format() {
    let (code, text) = ruleck("gqa_rotary_separate_rope", &["--format", "json"]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(v["errors"], 1);
    let f = &v["findings"][0];
    assert_eq!(f["code"], "fuse-then-decompose");
    assert_eq!(f["severity"], "error");
    assert_eq!(f["labels"][1]["file"], "ep-sets/gpu.toml");
    assert_eq!(f["labels"][1]["line"], 7);
}
