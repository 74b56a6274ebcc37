//! The `.rule` pattern language: grammar ([`parse_file`]), syntax tree ([`ast`]), semantic
//! checks ([`check_set`]) and the fixed vocabularies ([`vocab`]). The proc-macro in
//! `rule-macros` uses this crate at compile time; nothing here runs while a graph is rewritten.

pub mod ast;
mod check;
mod diag;
#[cfg(feature = "ruleck")]
pub mod lint;
mod parse;
pub mod vocab;

pub use check::{check_set, resolve};
pub use diag::{render, Diagnostic, Error};
pub use parse::{parse_file, MAX_EXPR_DEPTH, MAX_FILE_BYTES, MAX_NESTING};
/// The pipeline stages a `stage` line names (the workspace's one model of execution order).
pub use ep_sets::{Domain, Stage};

use std::path::Path;

/// Reads, parses and checks every `*.rule` file in `dir` (sorted by name). `shown_as` is the
/// directory's name in messages, e.g. `rules/rules`. Returns the files, each with its absolute
/// path, or every problem found.
pub fn load_dir(dir: &Path, shown_as: &str) -> Result<Vec<(std::path::PathBuf, ast::RuleFile)>, Error> {
    let entries = std::fs::read_dir(dir).map_err(|source| Error::Io { path: dir.display().to_string(), source })?;
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rule"))
        .collect();
    paths.sort();
    let mut files = Vec::new();
    let mut diags = Vec::new();
    for p in paths {
        let src = std::fs::read_to_string(&p).map_err(|source| Error::Io { path: p.display().to_string(), source })?;
        let name = format!("{shown_as}/{}", p.file_name().map(|n| n.to_string_lossy()).unwrap_or_default());
        match parse_file(&name, &src) {
            Ok(f) => files.push((p, f)),
            Err(d) => diags.push(d),
        }
    }
    let just_files: Vec<ast::RuleFile> = files.iter().map(|(_, f)| f.clone()).collect();
    diags.extend(check_set(&just_files));
    if diags.is_empty() {
        Ok(files)
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
    diags.extend(check_set(&files));
    if diags.is_empty() {
        Ok(files)
    } else {
        Err(diags)
    }
}
