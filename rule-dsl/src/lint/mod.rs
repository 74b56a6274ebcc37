//! `ruleck`: lints `.rule` files and EP tables together, without building anything.
//!
//! The rule files are parsed and checked with this crate ([`crate::parse_file`],
//! [`crate::check_set`]); the tables are parsed and validated by `ep-sets`. What neither can
//! see alone is checked here: table entries that name no rule, rules that emit ops their
//! table does not claim, an (EP, dtype) that fuses an op and later decomposes it, a lowering
//! that reintroduces an op an earlier fusion consumed, and rules of one stage whose patterns
//! overlap with nothing to order them. Every finding points at the `.rule` or TOML lines it is
//! about (see docs/ruleck.md).

mod checks;
mod layout;
mod page;
mod render;
pub(crate) mod sections;

pub use page::REGENERATE;
mod unify;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::ast::{Pos, RuleFile};

/// How bad a finding is: errors fail the run, warnings are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// A place in a source file a finding points at.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Label {
    /// The file as shown (relative to the base directory).
    pub file: String,
    /// 1-based; 0 when only the file is known.
    pub line: usize,
    pub col: usize,
    /// Characters to underline (at least 1 when a line is known).
    pub len: usize,
    /// What this place is, e.g. "fuses here".
    pub text: String,
}

/// One thing wrong with the rules or the tables.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// A stable kebab-case name for the kind of finding (`unknown-rule`, `cycle`, ...).
    pub code: &'static str,
    pub message: String,
    /// The first label is the primary place; the rest are related places.
    pub labels: Vec<Label>,
    /// How to fix it.
    pub help: String,
}

/// Everything `ruleck` found, with the sources to quote from.
#[derive(Debug, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
    /// Shown file name -> text.
    sources: BTreeMap<String, String>,
    pub rule_count: usize,
    pub table_count: usize,
}

impl Report {
    pub fn errors(&self) -> usize {
        self.findings.iter().filter(|f| f.severity == Severity::Error).count()
    }
    pub fn warnings(&self) -> usize {
        self.findings.iter().filter(|f| f.severity == Severity::Warning).count()
    }
    /// Codespan-style text: each finding with its source lines underlined.
    pub fn text(&self) -> String {
        render::text(self)
    }
    /// The findings as pretty JSON.
    pub fn json(&self) -> String {
        render::json(self)
    }
}

/// The crate-level errors of a lint run: only unreadable inputs. Problems *in* the inputs are
/// findings.
#[derive(Debug, thiserror::Error)]
pub enum LintError {
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: std::io::Error },
}

/// Where to read from. File names in findings are shown relative to `base`.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// A directory of `*.rule` files, or one with a `rules/` subdirectory holding them.
    pub rules: PathBuf,
    /// A directory of EP tables (`*.toml`), or one with a `tables/` subdirectory holding them.
    pub ep_sets: PathBuf,
    pub base: PathBuf,
}

/// The parsed `.rule` files (shown names in `path`) and, for each, its path inside the rules
/// directory (`fuse.gqa.rule`, `fragments/attention.rule`), which the layout check reads.
pub(crate) struct LoadedRules {
    pub files: Vec<RuleFile>,
    pub in_dir: Vec<String>,
}

/// A parsed table with its shown name.
pub(crate) struct LoadedTable {
    pub table: ep_sets::EpTable,
}

fn shown(base: &Path, p: &Path) -> String {
    p.strip_prefix(base).unwrap_or(p).to_string_lossy().replace('\\', "/")
}

/// `dir/<sub>` when it exists, else `dir`: `--rules rules` and `--rules rules/rules` both work.
fn resolve_dir(dir: &Path, sub: &str) -> PathBuf {
    let nested = dir.join(sub);
    if nested.is_dir() { nested } else { dir.to_path_buf() }
}

fn list(dir: &Path, ext: &str) -> Result<Vec<PathBuf>, LintError> {
    let io = |source| LintError::Io { path: dir.display().to_string(), source };
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io)? {
        let p = e.map_err(io)?.path();
        if p.extension().is_some_and(|x| x == ext) {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

fn read(p: &Path) -> Result<String, LintError> {
    std::fs::read_to_string(p).map_err(|source| LintError::Io { path: p.display().to_string(), source })
}

/// Everything read: the rules (fragments inlined), the tables, and what reading them found.
struct Loaded {
    report: Report,
    findings: Vec<Finding>,
    rules: LoadedRules,
    tables: Vec<LoadedTable>,
    problems: Vec<ep_sets::Problem>,
}

fn load(inputs: &Inputs) -> Result<Loaded, LintError> {
    let mut report = Report::default();
    let mut findings = Vec::new();

    let mut rule_files = Vec::new();
    let mut in_dir = Vec::new();
    let rules_dir = resolve_dir(&inputs.rules, "rules");
    let paths = crate::rule_paths(&rules_dir).map_err(|source| LintError::Io { path: rules_dir.display().to_string(), source })?;
    for p in paths {
        let name = shown(&inputs.base, &p);
        let src = read(&p)?;
        match crate::parse_file(&name, &src) {
            Ok(f) => {
                rule_files.push(f);
                in_dir.push(shown(&rules_dir, &p));
            }
            Err(d) => findings.push(checks::from_diagnostic(&d)),
        }
        report.sources.insert(name, src);
    }
    findings.extend(crate::prepare(&mut rule_files).iter().map(checks::from_diagnostic));
    report.rule_count = rule_files.iter().map(|f| f.rules.len()).sum();

    let mut tables = Vec::new();
    let mut problems = Vec::new();
    for p in list(&resolve_dir(&inputs.ep_sets, "tables"), "toml")? {
        let name = shown(&inputs.base, &p);
        let text = read(&p)?;
        match ep_sets::parse(&name, &text) {
            Ok(table) => {
                problems.extend(table.validate());
                if let Some(first) = tables.iter().find(|t: &&LoadedTable| t.table.name == table.name) {
                    findings.push(checks::duplicate_ep(&first.table, &table));
                }
                tables.push(LoadedTable { table });
            }
            Err(e) => findings.push(checks::from_table_error(&name, &text, &e)),
        }
        report.sources.insert(name, text);
    }
    report.table_count = tables.len();
    Ok(Loaded { report, findings, rules: LoadedRules { files: rule_files, in_dir }, tables, problems })
}

/// Reads the rules and tables and runs every check.
pub fn run(inputs: &Inputs) -> Result<Report, LintError> {
    Ok(check(load(inputs)?).0)
}

/// The rule-set page (docs/rules.md) generated from the `.rule` files' doc comments and the
/// tables, with the lint report; no page when the report has errors (a page from rules that do
/// not check, or whose doc comments lack sections, would say wrong things).
pub fn rules_page(inputs: &Inputs) -> Result<(Report, Option<String>), LintError> {
    let (report, rules, tables) = check(load(inputs)?);
    let page = (report.errors() == 0).then(|| page::render(&rules, &tables));
    Ok((report, page))
}

fn check(loaded: Loaded) -> (Report, LoadedRules, Vec<LoadedTable>) {
    let Loaded { mut report, mut findings, rules, tables, problems } = loaded;
    let own = checks::cross(&rules, &tables);
    findings.extend(checks::from_problems(problems, &own, &report.sources));
    findings.extend(own);
    findings.extend(sections::check(&rules));
    findings.extend(layout::check(&rules));

    findings.sort_by(|a, b| (a.severity, &a.labels, &a.message).cmp(&(b.severity, &b.labels, &b.message)));
    findings.dedup();
    report.findings = findings;
    (report, rules, tables)
}

/// A label at a `.rule` position; the underline covers the token there.
pub(crate) fn rule_label(file: &str, pos: Pos, text: impl Into<String>) -> Label {
    Label { file: file.to_string(), line: pos.line, col: pos.col, len: 0, text: text.into() }
}

/// A label at a byte span of a TOML table.
pub(crate) fn toml_label(table: &ep_sets::EpTable, span: Option<std::ops::Range<usize>>, text: impl Into<String>) -> Label {
    let loc = table.location(span.clone());
    let len = span.map_or(0, |s| {
        let t = table.text();
        let s = s.start.min(t.len())..s.end.min(t.len());
        t.get(s).map_or(0, |x| x.split('\n').next().unwrap_or("").chars().count())
    });
    Label { file: loc.file, line: loc.line.unwrap_or(0), col: loc.col.unwrap_or(0), len, text: text.into() }
}
