//! The rules directory's layout (crate::layout): each rule in `<family base>.rule`, a family
//! file holding one family and nothing else's, shared fragments in `fragments/` without rules,
//! nothing in other subdirectories. Findings are `layout` errors at the rule or file.

use super::{rule_label, Finding, LoadedRules, Severity};
use crate::ast::Pos;
use crate::layout::{family, family_file, FRAGMENTS_DIR};
use crate::prelude::PRELUDE;
use std::collections::HashSet;

pub(crate) fn check(rules: &LoadedRules) -> Vec<Finding> {
    let ids: HashSet<&str> = rules.files.iter().flat_map(|f| f.rules.iter().map(|r| r.id.as_str())).collect();
    let mut out = Vec::new();
    let mut err = |file: &str, pos: Pos, message: String, help: String| {
        out.push(Finding { severity: Severity::Error, code: "layout", message, labels: vec![rule_label(file, pos, "")], help });
    };
    for (f, rel) in rules.files.iter().zip(&rules.in_dir) {
        let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel.as_str()));
        match dir {
            "" if name == PRELUDE => {}
            "" => {
                if f.rules.is_empty() {
                    err(&f.path, Pos::default(), format!("`{rel}` holds no rule"), format!("a file at the top of the rules directory holds one rule family; shared fragments go in `{FRAGMENTS_DIR}/`"));
                }
                for r in &f.rules {
                    let base = family(&r.id, |id| ids.contains(id));
                    let want = family_file(base);
                    if name != want {
                        err(&f.path, r.pos, format!("rule `{}` is in `{rel}`, but its family `{base}` lives in `{want}`", r.id), format!("one rule family per file, named after its base id: move it to `{want}`"));
                    }
                }
            }
            FRAGMENTS_DIR => {
                if let Some(r) = f.rules.first() {
                    err(&f.path, r.pos, format!("rule `{}` in the shared fragments file `{rel}`", r.id), "fragment files hold only fragments; the rule goes in the file named after its family's base id".into());
                }
            }
            _ => err(&f.path, Pos::default(), format!("`{rel}` is in a subdirectory other than `{FRAGMENTS_DIR}/`"), "family files sit at the top of the rules directory, shared fragments in `fragments/`".into()),
        }
    }
    out
}
