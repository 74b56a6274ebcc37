//! The rewrite engine. It runs a [`Schedule`]: stage by stage, and within a stage the rules in
//! the schedule's order, round after round, until a round fires nothing or the iteration cap
//! is reached; then the same for every subgraph.
//!
//! One pass of one rule builds the graph's indexes once, matches every candidate against
//! them, and commits all firings whose consumed nodes do not overlap, so a pass is linear in
//! the graph's size (plus one topological sort).

use crate::diag::{Collector, Outcome, Record};
use crate::emit::{Emitter, GraphState, Names};
use crate::rt::Cx;
use crate::{Error, Report, RuleDef, Schedule, Stage};
use ir::{AttrValue, Graph};
use std::collections::{HashMap, HashSet};

/// How `apply` runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Keep one record per candidate node in the report.
    pub explain: bool,
    /// Rounds per stage and graph before giving up on a fixed point.
    pub max_rounds: usize,
    /// Remove nodes nothing reads any more after the last stage.
    pub remove_dead: bool,
    /// Also run each named rule's variants (`id.<name>`, see [`select`]). Off only where one
    /// exact rule must run alone (the check harness).
    pub variants: bool,
    /// Named bounds from the EP table's `limits` (`batch`, `max_context`, ...), which checks
    /// read with `limit("name")`: a retyping rule fires only where a bound proves it exact.
    pub limits: std::collections::BTreeMap<String, i64>,
}

impl Default for Options {
    fn default() -> Self {
        Options { explain: false, max_rounds: 16, remove_dead: true, variants: true, limits: Default::default() }
    }
}

/// The registered rules named by `ids`, each followed by its variants, or an error naming the
/// first unknown id.
///
/// A variant of rule `a.b` is a rule with id `a.b.<name>`: the same rewrite for a second
/// shape of the pattern (with a bias Add, with a per-head norm in between, ...), which the
/// language writes as a separate rule because a pattern has no alternatives. EP tables name
/// the base id only; selecting it selects the variants.
pub fn select(ids: &[&str]) -> Result<Vec<&'static RuleDef>, Error> {
    let mut out = Vec::new();
    for id in ids {
        let base = crate::rule(id).ok_or_else(|| {
            Error::UnknownRule(id.to_string(), crate::registry().iter().map(|r| r.info.id).collect::<Vec<_>>().join(", "))
        })?;
        out.push(base);
        out.extend(variants(id));
    }
    Ok(out)
}

/// The variants of rule `id` (rules whose id is `id.<name>`), in registry order.
pub fn variants(id: &str) -> impl Iterator<Item = &'static RuleDef> + '_ {
    crate::registry().iter().filter(move |r| r.info.id.len() > id.len() + 1 && r.info.id.starts_with(id) && r.info.id.as_bytes()[id.len()] == b'.')
}

/// Orders rules (a family of variants, or the rules a test names): `before`/`after` first,
/// then higher priority, then id.
pub fn order(rules: &[&'static RuleDef]) -> Vec<&'static RuleDef> {
    let mut left: Vec<&'static RuleDef> = rules.to_vec();
    left.sort_by(|a, b| b.info.priority.cmp(&a.info.priority).then(a.info.id.cmp(b.info.id)));
    left.dedup_by(|a, b| a.info.id == b.info.id);
    let must_precede = |a: &RuleDef, b: &RuleDef| a.info.before.contains(&b.info.id) || b.info.after.contains(&a.info.id);
    let mut out = Vec::new();
    while !left.is_empty() {
        let pick = left
            .iter()
            .position(|r| !left.iter().any(|o| o.info.id != r.info.id && must_precede(o, r)))
            .unwrap_or(0); // a cycle is rejected by rule-dsl at compile time
        out.push(left.remove(pick));
    }
    out
}

/// Runs the named rules without a table (tests, the rule harness, benches): each in the stage
/// its `.rule` file names, in the order of [`Schedule::for_ids`].
pub fn apply(model: &mut ir::Model, ids: &[&str], opts: &Options) -> Result<Report, Error> {
    apply_schedule(model, &Schedule::for_ids(ids, opts.variants)?, opts)
}

/// Runs `schedule` on the model's main graph (and its subgraphs), stage by stage.
pub fn apply_schedule(model: &mut ir::Model, schedule: &Schedule, opts: &Options) -> Result<Report, Error> {
    apply_schedule_with(model, schedule, opts, None)
}

/// A step of the pipeline that is not a rule (weight quantization), run once where the
/// schedule lists its stage ([`Stage::Quantize`]), or at the end when the schedule does not
/// list that stage (a test's schedule without a table).
pub type Step<'a> = (Stage, &'a mut dyn FnMut(&mut ir::Model) -> Result<(), String>);

/// [`apply_schedule`] with a [`Step`] between stages; its error becomes [`Error::Step`].
pub fn apply_schedule_with(model: &mut ir::Model, schedule: &Schedule, opts: &Options, mut step: Option<Step<'_>>) -> Result<Report, Error> {
    let mut report = Report::default();
    let mut col = Collector::default();
    for (stage, rules) in &schedule.stages {
        if step.as_ref().is_some_and(|(at, _)| stage == at) {
            let (_, f) = step.take().expect("checked");
            f(model).map_err(Error::Step)?;
        }
        if rules.is_empty() {
            continue;
        }
        run_stage_in(&mut model.graph, *stage, rules, opts, &mut col, &mut report, &HashMap::new())?;
    }
    if let Some((_, f)) = step.take() {
        f(model).map_err(Error::Step)?;
    }
    if opts.remove_dead {
        report.dead_removed = remove_dead_everywhere(&mut model.graph);
    }
    col.finish(opts.explain, &mut report);
    Ok(report)
}

fn remove_dead_everywhere(g: &mut Graph) -> usize {
    let mut n = g.remove_dead_nodes();
    for node in &mut g.nodes {
        for a in &mut node.attrs {
            if let AttrValue::Graph(sub) = &mut a.value {
                n += remove_dead_everywhere(sub);
            }
        }
    }
    n
}

#[allow(clippy::too_many_arguments)]
fn run_stage_in(
    graph: &mut Graph,
    stage: Stage,
    rules: &[&'static RuleDef],
    opts: &Options,
    col: &mut Collector,
    report: &mut Report,
    outer: &HashMap<String, ir::ValueInfo>,
) -> Result<(), Error> {
    let mut state = GraphState { names: Names::of(graph), memo: HashMap::new() };
    let gname = if graph.name.is_empty() { "main_graph".to_string() } else { graph.name.clone() };
    for r in rules {
        col.touch(&gname, r.info.id, &format!("{}:{}", r.info.file, r.info.line));
    }
    let mut rounds = 0;
    loop {
        if rounds == opts.max_rounds {
            report.capped.push(format!("stage {} on graph `{gname}`", stage.name()));
            break;
        }
        rounds += 1;
        let mut fired = 0;
        for r in rules {
            fired += pass(graph, &gname, r, &mut state, col, outer, &opts.limits)?;
        }
        if fired == 0 {
            break;
        }
    }
    report.rounds += rounds;
    graph.toposort().map_err(|source| Error::Graph { graph: gname.clone(), stage: stage.name().into(), source: Box::new(source) })?;
    let mut scope = outer.clone();
    if graph.nodes.iter().any(|n| n.subgraphs().next().is_some()) {
        scope.extend(ir::infer_types(graph, crate::op_types()));
    }
    for node in &mut graph.nodes {
        for a in &mut node.attrs {
            if let AttrValue::Graph(sub) = &mut a.value {
                run_stage_in(sub, stage, rules, opts, col, report, &scope)?;
            }
        }
    }
    Ok(())
}

/// One pass of one rule over one graph; returns how many times it fired.
fn pass(
    graph: &mut Graph,
    gname: &str,
    rule: &'static RuleDef,
    state: &mut GraphState,
    col: &mut Collector,
    outer: &HashMap<String, ir::ValueInfo>,
    limits: &std::collections::BTreeMap<String, i64>,
) -> Result<usize, Error> {
    let info = &rule.info;
    let mut new_nodes = Vec::new();
    let mut new_inits = Vec::new();
    let mut replaces: Vec<(String, String)> = Vec::new();
    let mut matched: HashSet<usize> = HashSet::new();
    let mut fired = 0;
    {
        let cx = Cx::with_outer(graph, outer).with_limits(limits);
        let mut consumed: HashSet<usize> = HashSet::new();
        for (i, node) in graph.nodes.iter().enumerate() {
            if node.op != info.root_op || !ep_sets::Domain::same(&node.domain, info.root_domain) {
                continue;
            }
            let binds = match (rule.matcher)(&cx, i) {
                Ok(b) => b,
                Err(f) => {
                    let step = &info.steps[f.step.min(info.steps.len().saturating_sub(1))];
                    col.note(Record {
                        graph: gname.to_string(),
                        node: node.name.clone(),
                        rule: info.id.to_string(),
                        outcome: Outcome::Failed,
                        check: Some(step.id.to_string()),
                        message: Some(f.message),
                        depth: f.step,
                        location: step.location(),
                        fragment: step.fragment.map(str::to_string),
                    });
                    continue;
                }
            };
            let mut em = Emitter::new(graph, info.id, node.name.clone(), state).with_types(cx.types());
            (rule.emitter)(&mut em, &binds)?;
            // Nodes this firing consumes: the root and the producers of replaced values.
            let mut takes: Vec<usize> = vec![i];
            takes.extend(em.replaces.iter().filter_map(|(old, _)| cx.producer_of(old).map(|p| p.0)));
            if takes.iter().any(|t| consumed.contains(t)) {
                continue; // overlaps an earlier firing of this pass; the next round retries it
            }
            consumed.extend(takes);
            let casts = em.nodes.iter().filter(|n| n.op == "Cast" && ep_sets::Domain::is_onnx(&n.domain)).count();
            if casts > 0 {
                col.add_casts(gname, info.id, casts);
            }
            matched.extend(binds.nodes.iter().copied());
            new_nodes.append(&mut em.nodes);
            new_inits.append(&mut em.initializers);
            replaces.append(&mut em.replaces);
            let memo = std::mem::take(&mut em.memo_new);
            drop(em);
            state.memo.extend(memo);
            fired += 1;
            col.note(Record {
                graph: gname.to_string(),
                node: node.name.clone(),
                rule: info.id.to_string(),
                outcome: Outcome::Fired,
                check: None,
                message: None,
                depth: info.steps.len(),
                location: format!("{}:{}", info.file, info.line),
                fragment: None,
            });
        }
    }
    if fired == 0 {
        return Ok(0);
    }
    commit(graph, new_nodes, new_inits, replaces, matched)
        .map_err(|source| Error::Commit { graph: gname.to_string(), rule: info.id.to_string(), source: Box::new(source) })?;
    Ok(fired)
}


/// Applies a pass's firings: rewires readers, keeps graph output names, adds the new nodes and
/// removes the matched nodes nothing reads any more, then sorts the graph again: the next
/// pass infers types in node order, so new nodes must stand before their readers.
fn commit(
    graph: &mut Graph,
    new_nodes: Vec<ir::Node>,
    new_inits: Vec<(String, ir::Recipe)>,
    replaces: Vec<(String, String)>,
    matched: HashSet<usize>,
) -> Result<(), ir::Error> {
    let outputs: HashSet<String> = graph.outputs.iter().map(|o| o.name.clone()).collect();
    let mut forward: HashMap<String, String> = HashMap::new(); // readers of old read new
    let mut back: HashMap<String, String> = HashMap::new(); // new value takes the old (output) name
    for (old, new) in replaces {
        if outputs.contains(&old) {
            back.insert(new, old);
        } else {
            forward.insert(old, new);
        }
    }
    let resolve = |mut v: String| {
        let mut hops = 0;
        while let Some(n) = forward.get(&v) {
            v = n.clone();
            hops += 1;
            if hops > 64 {
                break;
            }
        }
        back.get(&v).cloned().unwrap_or(v)
    };
    let kept_names: HashSet<&String> = back.values().collect();
    // The old producers of graph outputs that are taken over give up the name.
    for &i in &matched {
        for o in &mut graph.nodes[i].outputs {
            if kept_names.contains(o) {
                o.clear();
            }
        }
    }
    let first_new = graph.nodes.len();
    graph.nodes.extend(new_nodes);
    for (k, node) in graph.nodes.iter_mut().enumerate() {
        for inp in &mut node.inputs {
            if !inp.is_empty() {
                *inp = resolve(std::mem::take(inp));
            }
        }
        if k >= first_new {
            for o in &mut node.outputs {
                if let Some(old) = back.get(o) {
                    *o = old.clone();
                }
            }
        }
    }
    graph.initializers.extend(new_inits);
    // Remove matched nodes whose outputs nobody reads, repeatedly (a chain can free up).
    let mut removed = vec![false; graph.nodes.len()];
    loop {
        let used: HashSet<String> = {
            let mut u: HashSet<String> = outputs.clone();
            for (k, n) in graph.nodes.iter().enumerate() {
                if removed[k] {
                    continue;
                }
                u.extend(n.inputs.iter().filter(|s| !s.is_empty()).cloned());
                for g in n.subgraphs() {
                    u.extend(g.captured_names());
                }
            }
            u
        };
        let mut changed = false;
        for &i in &matched {
            if !removed[i] && graph.nodes[i].outputs.iter().all(|o| o.is_empty() || !used.contains(o)) {
                removed[i] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut k = 0;
    graph.nodes.retain(|_| {
        let keep = !removed[k];
        k += 1;
        keep
    });
    graph.toposort()
}
