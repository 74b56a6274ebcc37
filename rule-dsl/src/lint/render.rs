//! Codespan-style text and JSON for a [`Report`].

use std::fmt::Write;

use super::{Finding, Label, Report, Severity};

/// The length of the token starting at `col` (1-based) of `line`: an identifier, dotted name,
/// `?capture` or quoted string; at least 1.
fn token_len(line: &str, col: usize) -> usize {
    let rest: Vec<char> = line.chars().skip(col.saturating_sub(1)).collect();
    let n = match rest.first() {
        Some('"') => rest.iter().skip(1).position(|c| *c == '"').map_or(rest.len(), |i| i + 2),
        _ => rest.iter().take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '?' | '-')).count(),
    };
    n.max(1)
}

/// One label: `--> file:line:col`, the source line, and a `^^^` (primary) or `---` underline.
/// `w` is the gutter width, the same for every label of a finding.
fn label(out: &mut String, report: &Report, l: &Label, primary: bool, w: usize) {
    let pad = " ".repeat(w);
    let at = if l.line > 0 { format!(":{}:{}", l.line, l.col) } else { String::new() };
    let _ = writeln!(out, "{pad}--> {}{at}", l.file);
    let Some(src) = report.sources.get(&l.file) else { return };
    let Some(line) = (l.line > 0).then(|| src.lines().nth(l.line - 1)).flatten() else { return };
    let len = if l.len > 0 { l.len } else { token_len(line, l.col) };
    let mark = if primary { "^" } else { "-" };
    let _ = writeln!(out, "{pad} |");
    let _ = writeln!(out, "{:>w$} | {}", l.line, line.trim_end());
    let under = format!("{}{}", " ".repeat(l.col.saturating_sub(1)), mark.repeat(len));
    let text = if l.text.is_empty() { String::new() } else { format!(" {}", l.text) };
    let _ = writeln!(out, "{pad} | {under}{text}");
}

fn finding(out: &mut String, report: &Report, f: &Finding) {
    let sev = match f.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let _ = writeln!(out, "{sev}[{}]: {}", f.code, f.message);
    let w = f.labels.iter().map(|l| l.line.to_string().len()).max().unwrap_or(1);
    for (i, l) in f.labels.iter().enumerate() {
        label(out, report, l, i == 0, w);
    }
    if !f.help.is_empty() {
        let _ = writeln!(out, "{} = help: {}", " ".repeat(w), f.help);
    }
}

pub(super) fn text(report: &Report) -> String {
    let mut out = String::new();
    for f in &report.findings {
        finding(&mut out, report, f);
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "ruleck: {} error(s), {} warning(s) in {} rule(s) and {} table(s)",
        report.errors(),
        report.warnings(),
        report.rule_count,
        report.table_count
    );
    out
}

#[derive(serde::Serialize)]
struct Json<'a> {
    errors: usize,
    warnings: usize,
    rules: usize,
    tables: usize,
    findings: &'a [Finding],
}

pub(super) fn json(report: &Report) -> String {
    let j = Json {
        errors: report.errors(),
        warnings: report.warnings(),
        rules: report.rule_count,
        tables: report.table_count,
        findings: &report.findings,
    };
    serde_json::to_string_pretty(&j).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
