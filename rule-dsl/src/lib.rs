//! The `.rule` pattern language: grammar ([`parse_file`]), syntax tree ([`ast`]), semantic
//! checks ([`check_set`]) and the fixed vocabularies ([`vocab`]). The proc-macro in
//! `rule-macros` uses this crate at compile time; nothing here runs while a graph is rewritten.

pub mod ast;
mod check;
mod diag;
mod fragment;
pub mod layout;
#[cfg(feature = "ruleck")]
pub mod lint;
mod parse;
pub mod prelude;
pub mod vocab;

pub use check::{check_set, resolve};
pub use diag::{render, Diagnostic, Error};
pub use parse::{parse_file, MAX_EXPR_DEPTH, MAX_FILE_BYTES, MAX_NESTING};
/// The pipeline stages a `stage` line names (the workspace's one model of execution order).
pub use ep_sets::{DType, Domain, Stage};

use std::path::Path;

/// Every `*.rule` file under `dir`, subdirectories included (shared fragments live in
/// `fragments/`), sorted by path.
pub fn rule_paths(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    let at = |d: &Path, e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", d.display()));
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| at(&d, e))? {
            let p = e.map_err(|e| at(&d, e))?.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rule") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Makes a parsed set ready to compile: the prelude's domains reach every file, every fragment
/// use is inlined, and every rule is checked. Returns every problem found; the files are usable
/// only when there are none.
pub fn prepare(files: &mut [ast::RuleFile]) -> Vec<Diagnostic> {
    let mut diags = prelude::apply(files);
    let (fragment_diags, skip) = fragment::expand_set(files);
    diags.extend(fragment_diags);
    diags.extend(check::check_set_skipping(files, &skip));
    diags.sort();
    diags.dedup();
    diags
}

/// Reads, parses and checks every `*.rule` file under `dir` (sorted by path). `shown_as` is
/// the directory's name in messages, e.g. `rules/rules`. Returns the files, each with its
/// absolute path, fragments inlined, or every problem found.
pub fn load_dir(dir: &Path, shown_as: &str) -> Result<Vec<(std::path::PathBuf, ast::RuleFile)>, Error> {
    let mut paths = Vec::new();
    let mut files = Vec::new();
    let mut diags = Vec::new();
    for p in rule_paths(dir).map_err(|source| Error::Io { path: dir.display().to_string(), source })? {
        let src = std::fs::read_to_string(&p).map_err(|source| Error::Io { path: p.display().to_string(), source })?;
        let rel = p.strip_prefix(dir).unwrap_or(&p).to_string_lossy().replace('\\', "/");
        let name = format!("{shown_as}/{rel}");
        match parse_file(&name, &src) {
            Ok(f) => {
                paths.push(p);
                files.push(f);
            }
            Err(d) => diags.push(d),
        }
    }
    diags.extend(prepare(&mut files));
    if diags.is_empty() {
        Ok(paths.into_iter().zip(files).collect())
    } else {
        Err(Error::Rules(diags))
    }
}

/// Parses and checks rule sources given as `(name, text)` pairs; for tests and tools.
pub fn check_sources(sources: &[(&str, &str)]) -> Result<Vec<ast::RuleFile>, Vec<Diagnostic>> {
    let mut files = Vec::new();
    let mut diags = Vec::new();
    for (name, src) in sources {
        match parse_file(name, src) {
            Ok(f) => files.push(f),
            Err(d) => diags.push(d),
        }
    }
    diags.extend(prepare(&mut files));
    if diags.is_empty() {
        Ok(files)
    } else {
        Err(diags)
    }
}
