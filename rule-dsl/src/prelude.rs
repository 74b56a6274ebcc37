//! The set's prelude: `prelude.rule` declares the domains (`use domain ... as alias opset N`)
//! every file of the set sees, so the aliases and opsets the rules emit with are written once.
//! A file may declare further aliases of its own, but not one the prelude declares (one alias
//! means one domain and opset across the set).

use crate::ast::RuleFile;
use crate::diag::Diagnostic;

/// The file name of the prelude, wherever it sits in the rules directory.
pub const PRELUDE: &str = "prelude.rule";

/// Is `path` (as shown in messages) the prelude?
pub fn is_prelude(path: &str) -> bool {
    path.rsplit('/').next() == Some(PRELUDE)
}

/// Appends the prelude's `use` lines to every other file (marked `from_prelude`), and reports
/// a prelude that holds anything else, a second prelude, and files that redeclare its aliases.
pub(crate) fn apply(files: &mut [RuleFile]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let preludes: Vec<usize> = (0..files.len()).filter(|&i| is_prelude(&files[i].path)).collect();
    let Some(&first) = preludes.first() else { return out };
    for &extra in &preludes[1..] {
        out.push(Diagnostic::new(
            &files[extra].path,
            Default::default(),
            format!("a second prelude; the set's prelude is {}", files[first].path),
            "keep one `prelude.rule` and move these `use` lines there",
        ));
    }
    let prelude = files[first].clone();
    if let Some(r) = prelude.rules.first() {
        out.push(Diagnostic::new(&prelude.path, r.pos, format!("rule `{}` in the prelude", r.id), "the prelude holds only `use domain` lines; a rule goes in the file named after its base id"));
    }
    if let Some(f) = prelude.fragments.first() {
        out.push(Diagnostic::new(&prelude.path, f.pos, format!("fragment `{}` in the prelude", f.name), "the prelude holds only `use domain` lines; shared fragments go in `fragments/<topic>.rule`"));
    }
    for (i, file) in files.iter_mut().enumerate() {
        if i == first {
            continue;
        }
        for u in &prelude.uses {
            if let Some(own) = file.uses.iter().find(|o| o.alias == u.alias && !o.from_prelude) {
                out.push(Diagnostic::new(
                    &file.path,
                    own.pos,
                    format!("alias `{}` is already declared by the prelude ({}:{})", u.alias, prelude.path, u.pos.line),
                    "drop this line: every file sees the prelude's domains",
                ));
                continue;
            }
            let mut inherited = u.clone();
            inherited.from_prelude = true;
            file.uses.push(inherited);
        }
    }
    out
}
