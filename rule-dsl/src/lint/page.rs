//! docs/rules.md, generated: one section per rule family, one entry per rule from its doc
//! comment's sections (lint::sections), the `Tables` line derived from the EP tables (which
//! tables and dtypes run the rule, which exclude it and why), then the fragments and who uses
//! them. The page is a function of the `.rule` files and the tables only, so a test can tell
//! when the committed page is stale.

use super::sections::{self, Sections};
use super::{LoadedRules, LoadedTable};
use crate::ast::{FragmentItem, Rule, RuleFile};
use crate::layout::family;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write;

/// The command that writes the page, quoted by the page and by the staleness test.
pub const REGENERATE: &str = "cargo run -q -p rule-dsl --bin ruleck -- --emit-docs > docs/rules.md";

const PREAMBLE: &str = "\
# The rule set

One section per rule family: what each rule matches, its named checks (the ids reports and EP
tables use), what it emits, which EP tables run it, and what it does not cover. The language
itself is in [rule-language.md](rule-language.md).

## Variants

A pattern has no alternatives, so a second shape of the same rewrite is a second rule whose id
extends the first: `fuse.pack_qkv.bias` is a variant of `fuse.pack_qkv`. Selecting a rule
(`rules::apply`, an EP table's lists) selects its variants too (`rules::select`,
`rules::variants`); EP tables name base ids only. A family (a base and its variants) lives in
one file, `rules/rules/<base id>.rule`. Reports list each variant on its own line.
`Options { variants: false }` runs exactly the named rules (the check harness does). What
variants share is written once, as fragments (the last section).

## Tests

- `rules/tests/check_harness.rs` + `rules/tests/cases/mod.rs`: every (rule, step) has a graph on
  which exactly that step fails; its message is an insta snapshot
  (`rules/tests/snapshots/check_harness__<rule>__<step>.snap`). Cases start from real built
  graphs (tiny-llama, tiny-qwen2, tiny-qwen3, tiny-gpt2, after `fuse.gqa_rotary` where needed)
  or from the synthetic graphs of `rules/tests/cases/synth.rs`.
- `tests/tests/rule_set_parity.rs`: every rule on ONNX Runtime 1.32's CPU EP, f32, rewritten vs
  original, prefill + one decode step, every output within 1e-5; round trips for the lowerings
  whose fusion exists.
- `snapshots/`: the optimized graph of every decoder fixture for every (EP, dtype) a table lists.
";

/// The whole page.
pub(crate) fn render(rules: &LoadedRules, tables: &[LoadedTable]) -> String {
    let mut out = format!("<!-- Generated from rules/rules/**/*.rule and ep-sets/tables/*.toml; do not edit. Edit the doc comments, then run `{REGENERATE}`. -->\n\n{PREAMBLE}");
    let ids: HashSet<&str> = rules.files.iter().flat_map(|f| f.rules.iter().map(|r| r.id.as_str())).collect();
    let mut tables: Vec<&LoadedTable> = tables.iter().collect();
    tables.sort_by(|a, b| a.table.name.cmp(&b.table.name));
    for f in rules.files.iter().filter(|f| !f.rules.is_empty()) {
        let bases: BTreeSet<&str> = f.rules.iter().map(|r| family(&r.id, |id| ids.contains(id))).collect();
        for base in bases {
            let members: Vec<&Rule> = f.rules.iter().filter(|r| family(&r.id, |id| ids.contains(id)) == base).collect();
            family_section(&mut out, f, base, &members, &tables);
        }
    }
    fragments_section(&mut out, rules);
    out
}

fn family_section(out: &mut String, f: &RuleFile, base: &str, members: &[&Rule], tables: &[&LoadedTable]) {
    let variants: Vec<String> = members.iter().filter(|r| r.id != base).map(|r| format!("`{}`", &r.id[base.len()..])).collect();
    let title = if variants.is_empty() { base.to_string() } else { format!("{base} (+ {})", variants.join(", ")) };
    let _ = writeln!(out, "\n## {title}\n\n`{}`", f.path);
    let derived: Vec<String> = members.iter().map(|r| tables_line(&r.id, tables)).collect();
    let shared = derived.windows(2).all(|w| w[0] == w[1]);
    if shared {
        let _ = writeln!(out, "\n{}", wrap(&format!("**Tables** (the family's rules run together): {}", derived.first().map(String::as_str).unwrap_or("none"))));
    }
    for (r, tables_text) in members.iter().zip(&derived) {
        let s = sections::parse(&r.doc);
        let stage = r.stage.as_ref().map(|s| format!(", stage `{}`", s.0)).unwrap_or_default();
        let _ = writeln!(out, "\n### {}\n\n`{}:{}`{stage}", r.id, f.path, r.pos.line);
        if !s.summary.is_empty() {
            let _ = writeln!(out, "\n{}", wrap(&prose(&s.summary)));
        }
        entry(out, &s, "Matches");
        entry(out, &s, "Checks");
        entry(out, &s, "Emits");
        if !shared {
            let _ = writeln!(out, "\n{}", wrap(&format!("**Tables**: {tables_text}")));
        }
        entry(out, &s, "Does not cover");
        entry(out, &s, "Tested");
    }
}

fn entry(out: &mut String, s: &Sections, name: &str) {
    if let Some(text) = s.get(name) {
        let _ = writeln!(out, "\n{}", wrap(&format!("**{name}**: {}", prose(text))));
    }
}

/// Doc text as Markdown: wrapped lines join with a space; a blank line, a bullet (`* `, `- `)
/// and the lines of a fenced block (```) keep their line breaks.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        let fence = line.starts_with("```");
        if fenced || fence {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(line);
            out.push('\n');
            fenced ^= fence;
        } else if line.is_empty() {
            if !out.ends_with("\n\n") {
                out.push_str(if out.ends_with('\n') { "\n" } else { "\n\n" });
            }
        } else {
            let bullet = line.starts_with("* ") || line.starts_with("- ");
            if !out.is_empty() && !out.ends_with('\n') {
                out.push(if bullet { '\n' } else { ' ' });
            }
            out.push_str(line);
        }
    }
    out.trim_end().to_string()
}

/// Wraps Markdown text at 96 columns: paragraph and bullet lines (a bullet's continuation
/// indented two spaces), fenced blocks as they are.
fn wrap(text: &str) -> String {
    const WIDTH: usize = 96;
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if fenced || line.starts_with("```") || line.chars().count() <= WIDTH {
            out.push(line.to_string());
            continue;
        }
        let indent = if line.starts_with("* ") || line.starts_with("- ") { "  " } else { "" };
        let mut cur = String::new();
        for word in line.split(' ') {
            if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > WIDTH {
                out.push(std::mem::take(&mut cur));
                cur.push_str(indent);
            } else if !cur.is_empty() && cur != indent {
                cur.push(' ');
            }
            cur.push_str(word);
        }
        out.push(cur);
    }
    out.join("\n")
}

/// Which tables run rule `id` (through its own entry or an ancestor's: variants run with their
/// base), for which dtypes, which are required, and which tables exclude it and why.
fn tables_line(id: &str, tables: &[&LoadedTable]) -> String {
    let named: Vec<&str> = std::iter::once(id).chain(id.match_indices('.').map(|(i, _)| &id[..i])).collect();
    let mut runs: Vec<String> = Vec::new();
    let mut excluded: Vec<String> = Vec::new();
    for t in tables.iter().map(|t| &t.table) {
        let mut dtypes: BTreeMap<String, bool> = BTreeMap::new();
        for plan in t.all_plans() {
            if named.iter().any(|n| plan.runs(n)) {
                // A role's plan is named with its role (`encoder f32`), the decoder's by dtype.
                let label = match plan.role {
                    ep_sets::Role::Decoder => plan.dtype.to_string(),
                    role => format!("{role} {}", plan.dtype),
                };
                dtypes.insert(label, named.iter().any(|n| plan.is_required(n)));
            }
        }
        if !dtypes.is_empty() {
            let list: Vec<String> = dtypes.iter().map(|(d, req)| if *req { format!("{d} (required)") } else { d.to_string() }).collect();
            runs.push(format!("`{}` {}", t.name, list.join(", ")));
        }
        for e in t.exclusions().iter().filter(|e| named.contains(&e.rule.as_str())) {
            let role = e.role.as_deref().map(|r| format!(" {r}")).unwrap_or_default();
            let which = format!("{role}{}", e.dtype.map(|d| format!(" {d}")).unwrap_or_default());
            excluded.push(format!("`{}`{which} ({})", t.name, e.why.trim_end_matches('.')));
        }
    }
    let mut line = if runs.is_empty() { "no table runs it".to_string() } else { runs.join("; ") };
    if !excluded.is_empty() {
        let _ = write!(line, ". Excluded by {}", excluded.join("; "));
    }
    line.push('.');
    line
}

fn fragments_section(out: &mut String, rules: &LoadedRules) {
    let mut users: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for f in &rules.files {
        for r in &f.rules {
            for u in &r.uses {
                users.entry(&u.name).or_default().insert(&r.id);
            }
        }
        for g in &f.fragments {
            for item in &g.body {
                if let FragmentItem::Use(u) = item {
                    users.entry(&u.name).or_default().insert(&g.name);
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "\n## Fragments\n\nNamed sub-patterns the rules above are written with (rule-language.md, \"Fragments\"). A rule\nreports a fragment's check by the check's own id, at the fragment's `file:line`.\n"
    );
    let _ = writeln!(out, "| fragment | defined at | used by | what it matches |\n| --- | --- | --- | --- |");
    for f in &rules.files {
        for g in &f.fragments {
            let params: Vec<String> = g.params.iter().map(|(c, _)| format!("?{c}")).collect();
            let results: Vec<String> = g.results.iter().map(|(c, _)| format!("?{c}")).collect();
            let sig = match results.as_slice() {
                [] => format!("`{}({})`", g.name, params.join(", ")),
                [one] => format!("`{}({}) -> {one}`", g.name, params.join(", ")),
                many => format!("`{}({}) -> ({})`", g.name, params.join(", "), many.join(", ")),
            };
            let used: Vec<String> = users.get(g.name.as_str()).into_iter().flatten().map(|u| format!("`{u}`")).collect();
            let doc = g.doc.split('\n').collect::<Vec<_>>().join(" ").replace('|', "\\|");
            let _ = writeln!(out, "| {sig} | `{}:{}` | {} | {doc} |", f.path, g.pos.line, used.join(", "));
        }
    }
}
