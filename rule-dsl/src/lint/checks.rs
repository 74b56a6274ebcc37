//! The checks that need rules and tables together, and the conversion of the findings of
//! `rule-dsl`'s own checks and of `ep-sets`' validation into [`Finding`]s.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ep_sets::{DtypePlan, EpTable, Problem, RuleRef};

use super::unify::{emit_feeds, emit_matches, op_key, roots_overlap, root_line, Overlap};
use super::{rule_label, toml_label, Finding, Label, LoadedRules, LoadedTable, Severity};
use crate::ast::{AttrVal, EmitLine, Literal, Rule, RuleFile, Slot};
use crate::check::resolve;
use crate::diag::Diagnostic;

pub(crate) fn from_diagnostic(d: &Diagnostic) -> Finding {
    let code = if d.message.starts_with("duplicate rule id") {
        "duplicate-rule"
    } else if d.message.starts_with("unknown rule id") {
        "unknown-rule"
    } else if d.message.starts_with("`before`/`after` form a cycle") {
        "cycle"
    } else {
        "rule"
    };
    Finding {
        severity: Severity::Error,
        code,
        message: d.message.clone(),
        labels: vec![rule_label(&d.file, d.pos, "")],
        help: d.help.clone(),
    }
}

fn label_at(file: &str, text: &str, span: Option<std::ops::Range<usize>>, what: &str) -> Label {
    let loc = ep_sets::Location::at(file, text, span.clone());
    let len = span.and_then(|s| text.get(s)).map_or(0, |x| x.split('\n').next().unwrap_or("").chars().count());
    Label { file: file.to_string(), line: loc.line.unwrap_or(0), col: loc.col.unwrap_or(0), len, text: what.to_string() }
}

pub(crate) fn from_table_error(file: &str, text: &str, e: &ep_sets::Error) -> Finding {
    let (labels, message) = match e {
        ep_sets::Error::Parse { location, message } => {
            (vec![label_at(file, text, location.span.clone(), "")], message.clone())
        }
        other => (vec![label_at(file, text, None, "")], other.to_string()),
    };
    Finding { severity: Severity::Error, code: "table", message, labels, help: "see docs/ep-tables.md for the schema".into() }
}

pub(crate) fn duplicate_ep(first: &EpTable, second: &EpTable) -> Finding {
    Finding {
        severity: Severity::Error,
        code: "duplicate-ep",
        message: format!("EP `{}` is defined by two tables", second.name),
        labels: vec![toml_label(second, None, "defined again here"), toml_label(first, None, "first defined here")],
        help: "give each table its own `ep.name` (the file name)".into(),
    }
}

const UNDOES_MARK: &str = "and then undoes it with";

/// `ep-sets` validation problems as findings. A "fuses then undoes" problem is dropped when
/// the cross checks already reported the same lowering entry, with both spans.
pub(crate) fn from_problems(problems: Vec<Problem>, own: &[Finding], sources: &BTreeMap<String, String>) -> Vec<Finding> {
    let undone: BTreeSet<(String, usize, usize)> = own
        .iter()
        .filter(|f| f.code == "fuse-then-decompose")
        .flat_map(|f| f.labels.iter().map(|l| (l.file.clone(), l.line, l.col)))
        .collect();
    problems
        .into_iter()
        .filter(|p| {
            !(p.message.contains(UNDOES_MARK)
                && undone.contains(&(p.location.file.clone(), p.location.line.unwrap_or(0), p.location.col.unwrap_or(0))))
        })
        .map(|p| {
            let text = sources.get(&p.location.file).map_or("", |s| s.as_str());
            let code = if p.message.contains("has no `why`") {
                "missing-why"
            } else if p.message.contains(UNDOES_MARK) {
                "fuse-then-decompose"
            } else {
                "table"
            };
            Finding {
                severity: Severity::Error,
                code,
                labels: vec![label_at(&p.location.file, text, p.location.span.clone(), "")],
                message: p.message,
                help: match code {
                    "missing-why" => "add `why = \"...\"` saying why the EP leaves it out".into(),
                    _ => "see docs/ep-tables.md".into(),
                },
            }
        })
        .collect()
}

/// Rules by id, with their file.
struct Index<'a> {
    by_id: HashMap<&'a str, (&'a RuleFile, &'a Rule)>,
    all: Vec<(&'a RuleFile, &'a Rule)>,
}

impl<'a> Index<'a> {
    fn new(rules: &'a LoadedRules) -> Self {
        let all: Vec<_> = rules.files.iter().flat_map(|f| f.rules.iter().map(move |r| (f, r))).collect();
        let mut by_id = HashMap::new();
        for (f, r) in &all {
            by_id.entry(r.id.as_str()).or_insert((*f, *r));
        }
        Index { by_id, all }
    }

    /// The rule `id` and its variants (`id.<name>`), which the engine runs with it.
    fn with_variants(&self, id: &str) -> Vec<(&'a RuleFile, &'a Rule)> {
        let prefix = format!("{id}.");
        let mut out: Vec<_> = self.by_id.get(id).copied().into_iter().collect();
        out.extend(self.all.iter().copied().filter(|(_, r)| r.id.starts_with(&prefix)));
        out
    }
}

/// Edit distance, for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push((prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// One rule list entry of a plan, resolved: its position in pipeline order and the rules it
/// runs (the named rule and its variants).
struct Entry<'a> {
    at: usize,
    rref: &'a RuleRef,
    rules: Vec<(&'a RuleFile, &'a Rule)>,
}

fn qualified(domain: &str, op: &str) -> String {
    ep_sets::Domain::qualify(domain, op)
}

/// Everything that needs rules and tables together.
pub(crate) fn cross(rules: &LoadedRules, tables: &[LoadedTable]) -> Vec<Finding> {
    let idx = Index::new(rules);
    let mut out = Vec::new();
    for t in tables.iter().map(|t| &t.table) {
        unknown_ids(&idx, t, &mut out);
        // Every plan: each role's [role.<role>.*].
        for plan in t.all_plans() {
            let entries: Vec<Entry> = plan
                .pipeline()
                .enumerate()
                .filter_map(|(at, (_, rref))| {
                    let rules = idx.with_variants(&rref.id);
                    (!rules.is_empty()).then_some(Entry { at, rref, rules })
                })
                .collect();
            schedule(t, plan, &entries, &mut out);
            not_applicable_checks(&idx, t, plan, &mut out);
            unclaimed_emits(t, plan, &entries, &mut out);
            fuse_then_decompose(t, plan, &entries, &mut out);
            lowering_feeds_fusion(t, plan, &entries, &mut out);
        }
    }
    overlaps(&idx, &mut out);
    out
}

/// Table entries and exclusions that name no rule. A required rule, or a name one or two
/// edits away from a rule that exists (a typo), is an error; any other missing rule is a
/// warning, because the builder skips unimplemented optional rules.
fn unknown_ids(idx: &Index, t: &EpTable, out: &mut Vec<Finding>) {
    let mut refs: Vec<(&RuleRef, bool, String)> = Vec::new();
    for plan in t.all_plans() {
        let section = plan.role.section(plan.dtype);
        for (stage, r) in plan.pipeline() {
            refs.push((r, plan.is_required(&r.id), format!("the `{}` list of {section}", stage.name())));
        }
    }
    let mut excluded = Vec::new();
    for ex in t.exclusions() {
        if !idx.by_id.contains_key(ex.rule.as_str()) {
            excluded.push((ex.rule.clone(), ex.span.clone()));
        }
    }
    let near = |id: &str| -> Option<&str> {
        let mut known: Vec<&str> = idx.by_id.keys().copied().filter(|k| distance(k, id) <= 2).collect();
        known.sort();
        known.first().copied()
    };
    for (r, required, place) in refs {
        if idx.by_id.contains_key(r.id.as_str()) {
            continue;
        }
        let typo = near(&r.id);
        let (severity, help) = match (required, typo) {
            (_, Some(k)) => (Severity::Error, format!("did you mean `{k}`?")),
            (true, None) => (Severity::Error, "a required fusion must be a rule in the rules directory".into()),
            (false, None) => (
                Severity::Warning,
                "the builder skips it until a .rule file defines it; add the rule or drop the entry".into(),
            ),
        };
        out.push(Finding {
            severity,
            code: "unknown-rule",
            message: format!("{} ({}) names rule `{}` in {place}, which no .rule file defines", t.name, t.file, r.id),
            labels: vec![toml_label(t, r.span.clone(), "named here")],
            help,
        });
    }
    for (rule, span) in excluded {
        let help = near(&rule).map_or_else(|| "exclusions name rules that exist".to_string(), |k| format!("did you mean `{k}`?"));
        let severity = if near(&rule).is_some() { Severity::Error } else { Severity::Warning };
        out.push(Finding {
            severity,
            code: "unknown-rule",
            message: format!("{} excludes rule `{rule}`, which no .rule file defines", t.name),
            labels: vec![toml_label(t, span, "excluded here")],
            help,
        });
    }
}

/// An emitted node: its domain, op, opset and the emit line.
#[derive(Clone)]
struct Emitted<'a> {
    domain: String,
    op: &'a str,
    opset: Option<i64>,
    line: &'a EmitLine,
}

fn emitted<'a>(f: &'a RuleFile, r: &'a Rule) -> Vec<Emitted<'a>> {
    r.emits
        .iter()
        .filter_map(|e| match e {
            EmitLine::Op { op, .. } => resolve(f, op).map(|u| Emitted {
                domain: ep_sets::normalize_domain(&u.domain).to_string(),
                op: &op.name,
                opset: u.opset,
                line: e,
            }),
            EmitLine::Helper { .. } => None,
        })
        .collect()
}

/// Where an emit line names its op (or helper).
fn emit_pos(e: &EmitLine) -> crate::ast::Pos {
    match e {
        EmitLine::Op { op, .. } => op.pos,
        EmitLine::Helper { pos, .. } => *pos,
    }
}

/// Does a lowering decompose what it matches? One emitted node is a translation (the same
/// operation spelled the way the EP registers it, e.g. ai.onnx Gelu -> com.microsoft Gelu);
/// more nodes, or a helper's nodes, are a decomposition.
fn decomposes(r: &Rule) -> bool {
    r.emits.iter().filter(|e| matches!(e, EmitLine::Op { .. })).count() > 1
        || r.emits.iter().any(|e| matches!(e, EmitLine::Helper { name, .. } if !INPUT_HELPERS.contains(&name.as_str())))
}

/// Helpers that only compute inputs of the one node a lowering emits (GroupQueryAttention's
/// sequence lengths): a lowering calling them still translates one node into one node
/// (lower.gqa_right_padding: GroupQueryAttention for any padding -> the right-padded form).
const INPUT_HELPERS: &[&str] = &["gqa_seqlens"];

/// Does a later entry of the plan rewrite the node `em` creates (so the op never reaches the
/// EP and need not be claimed)?
fn rewritten_later(f: &RuleFile, em: &EmitLine, at: usize, entries: &[Entry]) -> bool {
    entries.iter().filter(|e| e.at > at).any(|e| {
        e.rules.iter().any(|(lf, lr)| root_line(lr).is_some_and(|m| emit_matches(f, em, lf, m)))
    })
}

/// The element type an emitted node computes in when the rule says so: every value operand is
/// made by the rule itself, by a Cast with a literal `to` or by an op that keeps its input's
/// type (Squeeze, Unsqueeze, Reshape, Identity) over such a value, all of one type (an int64
/// lowering's int32 Range reads only its own Casts). `None`: the plan's dtype is assumed.
fn emitted_elem(r: &Rule, line: &EmitLine) -> Option<ep_sets::DType> {
    let EmitLine::Op { args, .. } = line else { return None };
    let mut to = None;
    for a in args {
        let Slot::Capture(name, _) = a else { continue };
        let d = value_elem(r, name, 0)?;
        if to.is_some_and(|t| t != d) {
            return None;
        }
        to = Some(d);
    }
    to
}

/// The element type of value `name` when the rule's emit block fixes it ([`emitted_elem`]).
fn value_elem(r: &Rule, name: &str, depth: usize) -> Option<ep_sets::DType> {
    if depth > 8 {
        return None;
    }
    let producer = r.emits.iter().find(|e| e.outputs().iter().any(|o| matches!(o, Slot::Capture(n, _) if n == name)))?;
    let EmitLine::Op { op, attrs, args, .. } = producer else { return None };
    match op.name.as_str() {
        "Cast" => attrs.iter().find_map(|(k, v, _)| match (k.as_str(), v) {
            ("to", AttrVal::Lit(Literal::DType(d), _)) => Some(*d),
            _ => None,
        }),
        // Shape moves and same-type arithmetic keep their first operand's type.
        "Squeeze" | "Unsqueeze" | "Reshape" | "Identity" | "Add" | "Sub" | "Mul" | "Div" | "Neg" | "CumSum" => match args.first() {
            Some(Slot::Capture(input, _)) => value_elem(r, input, depth + 1),
            _ => None,
        },
        // Comparisons and logic make booleans.
        "Equal" | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" | "Not" | "And" | "Or" | "Xor" => Some(ep_sets::DType::Bool),
        _ => None,
    }
}

/// A rule of an (EP, dtype) that emits an op the table does not claim at the rule's opset for
/// the plan's dtype (or the type the rule's own Casts give its operands, [`emitted_elem`]).
fn unclaimed_emits(t: &EpTable, plan: &DtypePlan, entries: &[Entry], out: &mut Vec<Finding>) {
    for e in entries {
        for (f, r) in &e.rules {
            for em in emitted(f, r) {
                let dtype = emitted_elem(r, em.line).unwrap_or(plan.dtype);
                if rewritten_later(f, em.line, e.at, entries) {
                    continue;
                }
                let name = qualified(&em.domain, em.op);
                // `host` entries are not kernels of the EP: a rule that emits an op only they
                // claim would move work to the CPU EP.
                let all = t.kernels(&em.domain, em.op);
                let kernels: Vec<_> = all.iter().filter(|k| !k.host).collect();
                let problem = if kernels.is_empty() && !all.is_empty() {
                    Some(format!("{} has only `host` entries for {name}: the EP has no kernel, the node would run on the CPU EP", t.name))
                } else if kernels.is_empty() {
                    Some(format!("{} claims no kernel for {name}", t.name))
                } else if let Some(opset) = em.opset {
                    let covering: Vec<_> = kernels.iter().filter(|k| k.covers(opset)).collect();
                    let typed = covering
                        .iter()
                        .any(|k| k.types.is_empty() || k.types.values().any(|v| v.contains(&dtype.elem())));
                    if covering.is_empty() {
                        let have: Vec<String> = kernels.iter().map(|k| k.describe()).collect();
                        Some(format!("{} claims {name} only as: {}", t.name, have.join("; ")))
                    } else if !typed {
                        let have: Vec<String> = covering.iter().map(|k| k.describe()).collect();
                        Some(format!("{} claims {name} opset {opset} only for other types: {}", t.name, have.join("; ")))
                    } else {
                        None
                    }
                } else {
                    None
                };
                if let Some(p) = problem {
                    out.push(Finding {
                        severity: Severity::Error,
                        code: "unclaimed-emit",
                        message: format!(
                            "`{}` (listed for {} {}) emits {name} opset {}, but {p}",
                            r.id,
                            t.name,
                            plan.dtype,
                            em.opset.map_or("?".into(), |o| o.to_string())
                        ),
                        labels: vec![
                            toml_label(t, e.rref.span.clone(), "listed here"),
                            rule_label(&f.path, emit_pos(em.line), "emitted here"),
                        ],
                        help: format!("claim the kernel in {} (with its ONNX Runtime source) or drop the rule from [role.{}.{}]", t.file, plan.role, plan.dtype),
                    });
                }
            }
        }
    }
}

fn is_fusion(id: &str) -> bool {
    id.starts_with("fuse.")
}
fn is_lowering(id: &str) -> bool {
    id.starts_with("lower.")
}

/// A fusion followed, in the same (EP, dtype), by a lowering whose root matches a node the
/// fusion emits: the fused op is decomposed again.
fn fuse_then_decompose(t: &EpTable, plan: &DtypePlan, entries: &[Entry], out: &mut Vec<Finding>) {
    for fe in entries.iter().filter(|e| is_fusion(&e.rref.id)) {
        for le in entries.iter().filter(|e| e.at > fe.at && is_lowering(&e.rref.id)) {
            let hit = fe.rules.iter().find_map(|(ff, fr)| {
                emitted(ff, fr).into_iter().find_map(|em| {
                    le.rules.iter().filter(|(_, lr)| decomposes(lr)).find_map(|(lf, lr)| {
                        root_line(lr).filter(|m| emit_matches(ff, em.line, lf, m)).map(|m| (ff, fr, em.clone(), lf, lr, m))
                    })
                })
            });
            if let Some((ff, fr, em, lf, lr, m)) = hit {
                out.push(Finding {
                    severity: Severity::Error,
                    code: "fuse-then-decompose",
                    message: format!(
                        "{} {} fuses into {} with `{}` and later decomposes it with `{}`",
                        t.name,
                        plan.role.section(plan.dtype),
                        qualified(&em.domain, em.op),
                        fe.rref.id,
                        le.rref.id
                    ),
                    labels: vec![
                        toml_label(t, fe.rref.span.clone(), "fuses here"),
                        toml_label(t, le.rref.span.clone(), "decomposes it here"),
                        rule_label(&ff.path, emit_pos(em.line), format!("`{}` emits it", fr.id)),
                        rule_label(&lf.path, m.op.pos, format!("`{}` matches it", lr.id)),
                    ],
                    help: format!(
                        "never fuse what the same (EP, dtype) later decomposes: drop one of them from {}, and exclude it with [[exclude]] and a why",
                        plan.role.section(plan.dtype)
                    ),
                });
            }
        }
    }
}

/// A lowering that emits the root op of some earlier fusion of the same (EP, dtype): the fusion
/// has already run, so the lowering's output is never fused. Only the root counts: an op the
/// fusion matches further up its pattern (say a `Sub` in the mask chain) can only be fused if
/// the lowering rebuilt the whole chain below a root, which it would have to emit too.
fn lowering_feeds_fusion(t: &EpTable, plan: &DtypePlan, entries: &[Entry], out: &mut Vec<Finding>) {
    for le in entries.iter().filter(|e| is_lowering(&e.rref.id)) {
        for fe in entries.iter().filter(|e| e.at < le.at && is_fusion(&e.rref.id)) {
            let hit = le.rules.iter().find_map(|(lf, lr)| {
                emitted(lf, lr).into_iter().find_map(|em| {
                    fe.rules.iter().find_map(|(ff, fr)| {
                        root_line(fr).filter(|m| emit_feeds(lf, lr, em.line, ff, fr, m)).map(|m| (lf, lr, em.clone(), ff, fr, m))
                    })
                })
            });
            if let Some((lf, lr, em, ff, fr, m)) = hit {
                out.push(Finding {
                    severity: Severity::Error,
                    code: "lowering-feeds-fusion",
                    message: format!(
                        "{} {}: `{}` produces {} after `{}`, which consumes it, has run",
                        t.name,
                        plan.role.section(plan.dtype),
                        le.rref.id,
                        qualified(&em.domain, em.op),
                        fe.rref.id
                    ),
                    labels: vec![
                        toml_label(t, le.rref.span.clone(), "lowers here"),
                        toml_label(t, fe.rref.span.clone(), "the fusion ran earlier, here"),
                        rule_label(&lf.path, emit_pos(em.line), format!("`{}` emits it", lr.id)),
                        rule_label(&ff.path, m.op.pos, format!("`{}` consumes it", fr.id)),
                    ],
                    help: "run the lowering in `prefuse`, or drop it from this dtype".into(),
                });
            }
        }
    }
}

/// The table's lists are the schedule (docs/ep-tables.md): a rule sits in the list its `stage`
/// line names, and the lists' order agrees with every `before`/`after` line between listed
/// rules. The builder refuses the same at build time (`rules::Schedule::from_lists`).
fn schedule(t: &EpTable, plan: &DtypePlan, entries: &[Entry], out: &mut Vec<Finding>) {
    let stages: Vec<ep_sets::Stage> = plan.pipeline().map(|(s, _)| s).collect();
    for e in entries {
        let listed = stages[e.at];
        for (f, r) in &e.rules {
            let Some((declared, pos)) = &r.stage else { continue };
            if declared != listed.name() {
                out.push(Finding {
                    severity: Severity::Error,
                    code: "schedule-stage",
                    message: format!("{} {} lists `{}` under `{listed}`, but `{}` says `stage {declared}`", t.name, plan.role.section(plan.dtype), e.rref.id, r.id),
                    labels: vec![toml_label(t, e.rref.span.clone(), "listed here"), rule_label(&f.path, *pos, "the rule's stage")],
                    help: format!("move `{}` to the `{declared}` list", e.rref.id),
                });
            }
        }
    }
    let position = |id: &str| entries.iter().find(|e| e.rules.iter().any(|(_, r)| r.id == id)).map(|e| (e.at, e.rref));
    for e in entries {
        for (f, r) in &e.rules {
            let constraints = r.before.iter().map(|c| (c, true)).chain(r.after.iter().map(|c| (c, false)));
            for ((other, pos), before) in constraints {
                let Some((at, oref)) = position(other) else { continue };
                if at == e.at {
                    continue; // variants of one family: ordered among themselves
                }
                if (before && at < e.at) || (!before && at > e.at) {
                    out.push(Finding {
                        severity: Severity::Error,
                        code: "schedule-order",
                        message: format!(
                            "{} {} runs `{}` {} `{other}`, against `{}`'s `{} {other}`",
                            t.name,
                            plan.role.section(plan.dtype),
                            e.rref.id,
                            if before { "after" } else { "before" },
                            r.id,
                            if before { "before" } else { "after" }
                        ),
                        labels: vec![
                            toml_label(t, e.rref.span.clone(), "listed here"),
                            toml_label(t, oref.span.clone(), "and this one"),
                            rule_label(&f.path, *pos, "the constraint"),
                        ],
                        help: "swap them in the list: the table's order is the order rules run in".into(),
                    });
                }
            }
        }
    }
}

/// Every `not_applicable` entry names a check the required rule (or a variant) has.
fn not_applicable_checks(idx: &Index, t: &EpTable, plan: &DtypePlan, out: &mut Vec<Finding>) {
    for (rule, accepted) in &plan.not_applicable {
        let family = idx.with_variants(rule);
        for n in accepted {
            let known = family.iter().any(|(_, r)| r.checks.iter().any(|c| c.id == n.check) || n.check.starts_with("match."));
            if !family.is_empty() && !known {
                let checks: Vec<&str> = family.iter().flat_map(|(_, r)| r.checks.iter().map(|c| c.id.as_str())).collect();
                out.push(Finding {
                    severity: Severity::Error,
                    code: "unknown-check",
                    message: format!("{} {} accepts failures of check `{}`, which `{rule}` does not have", t.name, plan.role.section(plan.dtype), n.check),
                    labels: vec![toml_label(t, n.span.clone(), "named here")],
                    help: format!("its checks: {}", checks.join(", ")),
                });
            }
        }
    }
}

/// Every rule that must run before `id` (transitively, through `before`/`after`).
fn ordered_pairs(idx: &Index) -> BTreeSet<(String, String)> {
    let mut edges: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (_, r) in &idx.all {
        for (b, _) in &r.before {
            edges.entry(r.id.as_str()).or_default().push(b);
        }
        for (a, _) in &r.after {
            edges.entry(a.as_str()).or_default().push(&r.id);
        }
    }
    let mut pairs = BTreeSet::new();
    for (_, r) in &idx.all {
        let mut stack = vec![r.id.as_str()];
        let mut seen = BTreeSet::new();
        while let Some(n) = stack.pop() {
            for m in edges.get(n).into_iter().flatten() {
                if seen.insert(*m) {
                    pairs.insert((r.id.clone(), m.to_string()));
                    stack.push(m);
                }
            }
        }
    }
    pairs
}

/// Two rules of one stage, same priority, same root op, nothing ordering them, whose patterns
/// can match the same node: which one fires depends on the id order, not on intent.
fn overlaps(idx: &Index, out: &mut Vec<Finding>) {
    let ordered = ordered_pairs(idx);
    // A duplicate id is reported on its own; only the first definition is compared here.
    let all: Vec<_> =
        idx.all.iter().filter(|(_, r)| idx.by_id.get(r.id.as_str()).is_some_and(|(_, first)| std::ptr::eq(*first, *r))).collect();
    for (i, (fa, a)) in all.iter().copied().enumerate() {
        for (fb, b) in all[i + 1..].iter().copied() {
            let stage = |r: &Rule| r.stage.as_ref().map(|(s, _)| s.clone());
            if stage(a) != stage(b) || a.priority != b.priority || a.id == b.id {
                continue;
            }
            if ordered.contains(&(a.id.clone(), b.id.clone())) || ordered.contains(&(b.id.clone(), a.id.clone())) {
                continue;
            }
            let (Some(ra), Some(rb)) = (root_line(a), root_line(b)) else { continue };
            if op_key(fa, &ra.op).is_none() || op_key(fa, &ra.op) != op_key(fb, &rb.op) {
                continue;
            }
            let (severity, how) = match roots_overlap(fa, a, fb, b) {
                Overlap::Disjoint => continue,
                Overlap::Swapped => (Severity::Warning, " if a commutative op's operands are paired the other way round"),
                Overlap::Unread => (Severity::Warning, " where the outputs past the shorter pattern's tuple are unread"),
                Overlap::Overlaps => (Severity::Error, ""),
            };
            out.push(Finding {
                severity,
                code: "overlap",
                message: format!(
                    "`{}` and `{}` (stage {}, priority {}) both match {} from the same root{how}, and nothing orders them",
                    a.id,
                    b.id,
                    stage(a).unwrap_or_default(),
                    a.priority,
                    ra.op.name
                ),
                labels: vec![rule_label(&fa.path, ra.op.pos, "this pattern"), rule_label(&fb.path, rb.op.pos, "overlaps this one")],
                help: format!("add `before {}` to `{}` (or the reverse), or give them different priorities", b.id, a.id),
            });
        }
    }
}
