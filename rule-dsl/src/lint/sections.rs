//! A rule's doc comment in fixed sections, so that every rule says the same things in the same
//! place and docs/rules.md can be generated from them:
//!
//! ```text
//! /// Why the rule exists (free text, optional).
//! ///
//! /// Matches: the pattern, in words.
//! /// Checks: every named check, each as `id`, and what it guards.
//! /// Emits: what replaces the match.
//! /// Does not cover: the nearby shapes it leaves alone, and why.
//! /// Tested: where it is tested (optional).
//! ```
//!
//! `Tables:` (which EP tables run the rule) is derived from the tables when the page is
//! generated, so it is never written by hand. A missing, repeated, empty or misplaced section,
//! a hand-written `Tables:`, or a check the `Checks:` section does not name is a `doc-sections`
//! error.

use super::{rule_label, Finding, LoadedRules, Severity};
use crate::ast::Rule;

/// The sections every rule's doc comment has, in this order.
pub(crate) const REQUIRED: [&str; 4] = ["Matches", "Checks", "Emits", "Does not cover"];
/// Sections a doc comment may add after the required ones.
pub(crate) const OPTIONAL: [&str; 1] = ["Tested"];
/// The section the generated page adds from the EP tables.
pub(crate) const DERIVED: &str = "Tables";

/// A doc comment split into its summary and its sections (name, text), in written order.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Sections {
    pub summary: String,
    pub sections: Vec<(String, String)>,
}

impl Sections {
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.sections.iter().find(|(n, _)| n == name).map(|(_, t)| t.as_str())
    }
}

/// Splits a doc comment (lines joined with `\n`) at the lines that start a section: one that
/// begins with a section name and a colon. Texts keep their lines.
pub(crate) fn parse(doc: &str) -> Sections {
    let names = REQUIRED.iter().chain(&OPTIONAL).chain(std::iter::once(&DERIVED));
    let names: Vec<&str> = names.copied().collect();
    let mut out = Sections::default();
    for line in doc.lines() {
        let header = names.iter().find_map(|n| line.strip_prefix(n).and_then(|rest| rest.strip_prefix(':')).map(|rest| (n, rest)));
        match (header, out.sections.last_mut()) {
            (Some((name, rest)), _) => out.sections.push((name.to_string(), rest.trim().to_string())),
            (None, Some((_, text))) => push_line(text, line),
            (None, None) => push_line(&mut out.summary, line),
        }
    }
    out.summary = out.summary.trim().to_string();
    for (_, text) in &mut out.sections {
        *text = text.trim().to_string();
    }
    out
}

/// Appends a doc line, keeping the line structure (the page renders it as Markdown).
fn push_line(text: &mut String, line: &str) {
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(line);
}

/// Every rule's doc comment, against the fixed sections.
pub(crate) fn check(rules: &LoadedRules) -> Vec<Finding> {
    let mut out = Vec::new();
    for f in &rules.files {
        for r in &f.rules {
            for (message, help) in problems(r) {
                out.push(Finding { severity: Severity::Error, code: "doc-sections", message, labels: vec![rule_label(&f.path, r.pos, "this rule's doc comment")], help });
            }
        }
    }
    out
}

/// What is wrong with `r`'s doc comment: (message, help) pairs.
fn problems(r: &Rule) -> Vec<(String, String)> {
    let s = parse(&r.doc);
    let mut out = Vec::new();
    let order: Vec<&str> = REQUIRED.iter().chain(&OPTIONAL).copied().collect();
    for name in REQUIRED {
        if s.get(name).is_none() {
            out.push((format!("the doc comment of rule `{}` has no `{name}:` section", r.id), "every rule's doc comment has the sections `Matches:`, `Checks:`, `Emits:`, `Does not cover:` in that order (`Tested:` may follow); see docs/ruleck.md".to_string()));
        }
    }
    let mut last = 0;
    for (k, (name, text)) in s.sections.iter().enumerate() {
        if name == DERIVED {
            out.push((format!("rule `{}` writes a `Tables:` section", r.id), "which tables run a rule is derived from ep-sets/tables when docs/rules.md is generated; drop the section".into()));
            continue;
        }
        if s.sections[..k].iter().any(|(n, _)| n == name) {
            out.push((format!("the doc comment of rule `{}` has two `{name}:` sections", r.id), "write each section once".into()));
        }
        let at = order.iter().position(|n| n == name).unwrap_or(0);
        if at < last {
            out.push((format!("the `{name}:` section of rule `{}` is out of order", r.id), format!("the sections come in the order {}", order.join(", "))));
        }
        last = last.max(at);
        if text.trim().is_empty() {
            out.push((format!("the `{name}:` section of rule `{}` is empty", r.id), "say what it is, or `none` and why".into()));
        }
    }
    if let Some(text) = s.get("Checks") {
        let missing: Vec<&str> = r.checks.iter().map(|c| c.id.as_str()).filter(|id| !text.contains(&format!("`{id}`"))).collect();
        if !missing.is_empty() {
            out.push((
                format!("the `Checks:` section of rule `{}` does not name `{}`", r.id, missing.join("`, `")),
                "name every check of the rule (its fragments' included) as `id`, with what it guards: reports and EP tables use the ids".into(),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_doc_comment_splits_into_summary_and_sections() {
        let s = parse("Why.\n\nMatches: `Add(x, y)`\nwith two lines.\nChecks: `same_shape`.\nEmits: one node.\nDoes not cover: broadcasting.");
        assert_eq!(s.summary, "Why.");
        assert_eq!(s.get("Matches"), Some("`Add(x, y)`\nwith two lines."));
        assert_eq!(s.sections.len(), 4);
        assert_eq!(s.get("Tables"), None);
    }
}
