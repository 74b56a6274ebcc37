//! Diagnostics: per rule and graph, how many candidates, how many fired, and the failures
//! counted by check id with a message; on request one record per candidate; for a rule that
//! never fired, the attempt that got furthest. Text for people, JSON for tools.

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Fired,
    Failed,
}

/// What happened to one candidate node for one rule (its last attempt; firing is final).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Record {
    pub graph: String,
    pub node: String,
    pub rule: String,
    pub outcome: Outcome,
    /// The failed step: a check id, or `match.<capture>` for a pattern line.
    pub check: Option<String>,
    pub message: Option<String>,
    /// How many steps passed before the failure (pattern lines, then checks).
    pub depth: usize,
    /// `file:line` of the failed step, or of the rule when it fired.
    pub location: String,
    /// The fragment the failed step comes from, when the rule has it from one (its location
    /// is then in the fragment's file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fragment: Option<String>,
}

impl Record {
    /// Whether the candidate is an instance of the rule's pattern: it fired, or every pattern
    /// line matched and a let or a named check failed. A failed pattern line (`match.*`) means
    /// the node is not what the rule rewrites (fold.tied_head_gemm on an untied head's MatMul),
    /// the expected outcome on most of a rule's candidates.
    pub fn is_instance(&self) -> bool {
        self.outcome == Outcome::Fired || self.check.as_deref().is_some_and(|c| !is_pattern_step(c))
    }
}

/// Pattern lines are reported as `match.<capture>`.
fn is_pattern_step(step: &str) -> bool {
    step.starts_with("match.")
}

/// Failures of one check: how many, and the first message.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FailCount {
    pub count: usize,
    pub message: String,
    pub location: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fragment: Option<String>,
}

/// `file:line`, or `file:line, in fragment f` for a step inlined from a fragment.
fn place(location: &str, fragment: Option<&str>) -> String {
    match fragment {
        Some(f) => format!("{location}, in fragment {f}"),
        None => location.to_string(),
    }
}

/// One rule on one graph.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuleReport {
    pub rule: String,
    pub graph: String,
    pub location: String,
    pub candidates: usize,
    pub fired: usize,
    pub failed: BTreeMap<String, FailCount>,
    /// For a rule that fired zero times: the candidate that passed the most steps.
    pub furthest: Option<Record>,
    /// Cast nodes its firings created (retyping rules such as lower.int64_to_int32 report
    /// how many conversions they cost).
    #[serde(skip_serializing_if = "is_zero")]
    pub casts: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl RuleReport {
    /// Whether the rule could have fired on this graph: it did, or some candidate was an
    /// instance of its pattern and failed a let or a named check ([`Record::is_instance`]).
    /// A rule whose candidates all failed a pattern line had nothing to rewrite.
    pub fn could_fire(&self) -> bool {
        self.fired > 0 || self.failed.keys().any(|step| !is_pattern_step(step))
    }
}

/// Everything one `apply` did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    pub rules: Vec<RuleReport>,
    /// One record per candidate node; filled only when `Options::explain` is set.
    pub records: Vec<Record>,
    /// Passes over each stage until nothing fired, summed over stages and graphs.
    pub rounds: usize,
    /// A stage stopped at the iteration cap instead of reaching a fixed point.
    pub capped: Vec<String>,
    /// Nodes removed by the final dead-code pass (values no rule output reads any more).
    pub dead_removed: usize,
}

impl Report {
    /// The report of `rule` on `graph`.
    pub fn rule(&self, rule: &str) -> Option<&RuleReport> {
        self.rules.iter().find(|r| r.rule == rule)
    }

    /// Total firings of `rule` over all graphs.
    pub fn fired(&self, rule: &str) -> usize {
        self.rules.iter().filter(|r| r.rule == rule).map(|r| r.fired).sum()
    }

    /// One line per rule and graph, e.g.
    /// `fuse.gqa  main_graph  candidates=24 fired=0  failed head_size_cpu x24: "..." (file:line)`.
    /// One line per rule (and its furthest failure), then every per-candidate record.
    pub fn text(&self) -> String {
        let mut s = self.summary_text();
        for rec in &self.records {
            let _ = writeln!(
                s,
                "  {} {} {:?}{}",
                rec.rule,
                rec.node,
                rec.outcome,
                rec.check.as_ref().map(|c| format!(" {c}: {} ({})", rec.message.as_deref().unwrap_or(""), place(&rec.location, rec.fragment.as_deref()))).unwrap_or_default()
            );
        }
        s
    }

    /// One line per rule (and its furthest failure), without the per-candidate records.
    pub fn summary_text(&self) -> String {
        self.lines(false)
    }

    /// [`Report::summary_text`] for the rules that could have fired ([`RuleReport::could_fire`]),
    /// each with the failures of its pattern's instances only: what a plain build prints. A rule
    /// whose candidates were none of them instances (fold.tied_head_gemm on an untied model) is
    /// left out; `summary_text`, `text` and the JSON keep everything.
    pub fn brief_text(&self) -> String {
        self.lines(true)
    }

    fn lines(&self, brief: bool) -> String {
        let mut s = String::new();
        for r in self.rules.iter().filter(|r| !brief || r.could_fire()) {
            let _ = write!(s, "{}  {}  candidates={} fired={}", r.rule, r.graph, r.candidates, r.fired);
            if r.casts > 0 {
                let _ = write!(s, " casts={}", r.casts);
            }
            for (check, f) in r.failed.iter().filter(|(check, _)| !brief || !is_pattern_step(check)) {
                let _ = write!(s, "  failed {check} x{}: {:?} ({})", f.count, f.message, place(&f.location, f.fragment.as_deref()));
            }
            s.push('\n');
            if let Some(best) = &r.furthest {
                let _ = writeln!(
                    s,
                    "    furthest: node `{}` passed {} step(s), then {}: {:?} ({})",
                    best.node,
                    best.depth,
                    best.check.as_deref().unwrap_or("?"),
                    best.message.as_deref().unwrap_or(""),
                    place(&best.location, best.fragment.as_deref())
                );
            }
        }
        for c in &self.capped {
            let _ = writeln!(s, "warning: {c} reached the iteration cap before a fixed point");
        }
        s
    }

    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

/// Collects outcomes while the engine runs; `finish` turns them into a [`Report`].
#[derive(Default)]
pub(crate) struct Collector {
    /// (graph, rule) in first-seen order, then node -> record.
    order: Vec<(String, String, String)>,
    records: BTreeMap<(String, String), BTreeMap<String, Record>>,
    node_order: BTreeMap<(String, String), Vec<String>>,
    casts: BTreeMap<(String, String), usize>,
}

impl Collector {
    pub(crate) fn touch(&mut self, graph: &str, rule: &str, location: &str) {
        let key = (graph.to_string(), rule.to_string());
        if !self.records.contains_key(&key) {
            self.records.insert(key.clone(), BTreeMap::new());
            self.order.push((graph.to_string(), rule.to_string(), location.to_string()));
        }
    }

    pub(crate) fn note(&mut self, rec: Record) {
        let key = (rec.graph.clone(), rec.rule.clone());
        let nodes = self.records.entry(key.clone()).or_default();
        match nodes.get(&rec.node) {
            Some(old) if old.outcome == Outcome::Fired => {}
            Some(_) => {
                nodes.insert(rec.node.clone(), rec);
            }
            None => {
                self.node_order.entry(key).or_default().push(rec.node.clone());
                nodes.insert(rec.node.clone(), rec);
            }
        }
    }

    pub(crate) fn add_casts(&mut self, graph: &str, rule: &str, n: usize) {
        *self.casts.entry((graph.to_string(), rule.to_string())).or_default() += n;
    }

    pub(crate) fn finish(self, explain: bool, report: &mut Report) {
        for (graph, rule, location) in &self.order {
            let key = (graph.clone(), rule.clone());
            let nodes = &self.records[&key];
            let order = self.node_order.get(&key).cloned().unwrap_or_default();
            let mut rr = RuleReport {
                rule: rule.clone(),
                graph: graph.clone(),
                location: location.clone(),
                candidates: nodes.len(),
                fired: 0,
                failed: BTreeMap::new(),
                furthest: None,
                casts: self.casts.get(&key).copied().unwrap_or(0),
            };
            for name in &order {
                let rec = &nodes[name];
                match rec.outcome {
                    Outcome::Fired => rr.fired += 1,
                    Outcome::Failed => {
                        let check = rec.check.clone().unwrap_or_default();
                        let e = rr.failed.entry(check).or_insert_with(|| FailCount {
                            count: 0,
                            message: rec.message.clone().unwrap_or_default(),
                            location: rec.location.clone(),
                            fragment: rec.fragment.clone(),
                        });
                        e.count += 1;
                        if rr.furthest.as_ref().is_none_or(|b| rec.depth > b.depth) {
                            rr.furthest = Some(rec.clone());
                        }
                    }
                }
                if explain {
                    report.records.push(rec.clone());
                }
            }
            if rr.fired > 0 {
                rr.furthest = None;
            }
            report.rules.push(rr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(rule: &str, node: &str, check: Option<&str>, depth: usize) -> Record {
        Record {
            graph: "g".into(),
            node: node.into(),
            rule: rule.into(),
            outcome: if check.is_some() { Outcome::Failed } else { Outcome::Fired },
            check: check.map(str::to_string),
            message: check.map(|c| format!("{c} failed")),
            depth,
            location: "r.rule:1".into(),
            fragment: None,
        }
    }

    /// `brief_text` keeps the rules that fired or had an instance fail a let or a check, with
    /// those failures only; `summary_text` keeps every rule and failure.
    #[test]
    fn the_brief_text_reports_rules_that_could_have_fired() {
        let mut c = Collector::default();
        for (rule, node, check, depth) in [
            ("only_pattern", "a", Some("match.t"), 1),
            ("only_pattern", "b", Some("match.out"), 0),
            ("fired", "a", None, 3),
            ("fired", "b", Some("match.sum"), 0),
            ("missed", "a", Some("match.x"), 1),
            ("missed", "b", Some("head_size"), 4),
            ("let_failed", "a", Some("let.topk"), 2),
        ] {
            c.touch("g", rule, "r.rule:1");
            c.note(rec(rule, node, check, depth));
        }
        c.touch("g", "no_candidates", "r.rule:1");
        let mut report = Report::default();
        c.finish(false, &mut report);
        let could: Vec<(&str, bool)> = report.rules.iter().map(|r| (r.rule.as_str(), r.could_fire())).collect();
        assert_eq!(could, vec![("only_pattern", false), ("fired", true), ("missed", true), ("let_failed", true), ("no_candidates", false)]);
        assert!(rec("r", "n", None, 0).is_instance() && rec("r", "n", Some("check"), 2).is_instance() && !rec("r", "n", Some("match.q"), 1).is_instance());
        let brief = report.brief_text();
        let lines: Vec<&str> = brief.lines().collect();
        assert_eq!(lines.len(), 5, "three rules, two with their furthest failure: {brief}");
        assert_eq!(lines[0], "fired  g  candidates=2 fired=1");
        assert!(lines[1].starts_with("missed  g  candidates=2 fired=0  failed head_size x1") && !lines[1].contains("match.x"), "{brief}");
        assert!(lines[2].contains("then head_size"), "the furthest failure: {brief}");
        assert!(lines[3].starts_with("let_failed  g") && lines[3].contains("let.topk"), "{brief}");
        assert!(lines[4].contains("then let.topk"), "{brief}");
        let full = report.summary_text();
        for needle in ["only_pattern", "no_candidates", "failed match.sum", "failed match.x", "failed match.t"] {
            assert!(full.contains(needle), "summary_text lacks {needle}: {full}");
        }
    }
}
