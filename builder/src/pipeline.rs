//! The EP pipeline: the rule lists an EP table gives for a dtype, applied to the generic
//! graph, then validation of the result against the same table. A miss is a build error that
//! quotes the failing rule's check messages, never a silently slower model.

use crate::quantize::{self, QuantOutcome, QuantStep};
use crate::{Error, Result};
use ep_sets::{Claim, DtypePlan, EpTable, OpSchemas};
use ir::{Graph, Model};
use rules::{Outcome, Report};
use serde::Serialize;
use std::collections::BTreeMap;


/// What the pipeline did to one sub-model, and what validation found.
#[derive(Clone, Debug, Serialize)]
pub struct PipelineReport {
    pub role: String,
    /// The stages in the order they ran: the table's `[ep] stages`, the `quantize` stage (the
    /// quantize step, which does nothing in a float build) included.
    pub stages: Vec<ep_sets::Stage>,
    /// Rule ids run, in the table's order (stage by stage, in list order); each ran with its
    /// variants.
    pub rules_run: Vec<String>,
    /// Rules the table lists that this build does not implement yet (optional ones only;
    /// a required one is an error).
    pub not_implemented: Vec<String>,
    /// Per-rule diagnostics from the engine.
    pub diagnostics: Report,
    /// For each required rule: candidates in the generic graph (nodes of its root op) and
    /// firings.
    pub required: Vec<RequiredFusion>,
    pub validation: Vec<String>,
    /// Nodes the table places on the CPU EP (`host = true` kernels), as `op x count`: the
    /// EP has no kernel for them and ONNX Runtime runs them on the host.
    pub host_nodes: Vec<String>,
    /// What the quantize step did (`--quant`); its per-tensor errors are known once the
    /// package is written, so build_report.json records them from here after the write.
    #[serde(skip)]
    pub quant: Option<QuantOutcome>,
}

#[derive(Clone, Debug, Serialize)]
pub struct RequiredFusion {
    pub rule: String,
    pub root: String,
    pub generic_candidates: usize,
    pub fired: usize,
}

fn root_count(graph: &Graph, domain: &str, op: &str) -> usize {
    graph.nodes.iter().filter(|n| n.op == op && n.domain == domain).count()
}

/// Runs the table's stages on `model`, in the table's order, and validates the result. With
/// `quant`, the quantize step runs where the table's `[ep] stages` lists `quantize`
/// (docs/pipeline.md).
pub fn optimize(model: &mut Model, table: &EpTable, plan: &DtypePlan, explain: bool, quant: Option<&QuantStep>) -> Result<PipelineReport> {
    let dtype = plan.dtype;
    // Every stage in the table's order, the quantize step's (no rules) included.
    let mut lists: Vec<(ep_sets::Stage, Vec<&str>)> = plan.order.iter().map(|&s| (s, Vec::new())).collect();
    let mut not_implemented = Vec::new();
    for (stage, rule) in plan.pipeline() {
        if rules::rule(&rule.id).is_some() {
            if let Some((_, ids)) = lists.iter_mut().find(|(s, _)| *s == stage) {
                ids.push(rule.id.as_str());
            }
        } else if plan.is_required(&rule.id) {
            return Err(Error::Pipeline(format!(
                "{}.toml {} requires rule `{}`, which this build does not implement",
                table.name, plan.role.section(dtype), rule.id
            )));
        } else {
            not_implemented.push(rule.id.clone());
        }
    }
    // A not-applicable check must be one the required rule (or a variant) has.
    for (id, accepted) in &plan.not_applicable {
        let family: Vec<&rules::RuleDef> = rules::select(&[id.as_str()]).map_err(|e| Error::Pipeline(e.to_string()))?;
        for n in accepted {
            if !family.iter().any(|r| r.info.steps.iter().any(|s| s.id == n.check)) {
                return Err(Error::Pipeline(format!(
                    "{}.toml [role.{}.{dtype}.not_applicable] names check `{}` of `{id}`, which the rule does not have",
                    table.name, plan.role, n.check
                )));
            }
        }
    }
    let required: Vec<(&rules::RuleDef, usize)> = plan
        .required
        .iter()
        .filter_map(|r| rules::rule(&r.id))
        .map(|def| (def, root_count(&model.graph, def.info.root_domain, def.info.root_op)))
        .collect();

    let ids: Vec<String> = lists.iter().flat_map(|(_, ids)| ids.iter().map(|i| i.to_string())).collect();
    // The table's lists are the schedule: stage by stage, in list order.
    let schedule = rules::Schedule::from_lists(lists)
        .map_err(|e| Error::Pipeline(format!("{}.toml {}: {e}", table.name, plan.role.section(dtype))))?;
    // Per-candidate records are always kept: validation needs each candidate's outcome.
    let opts = rules::Options { explain: true, limits: plan.limits.clone(), ..Default::default() };
    // The quantize step runs as the `quantize` stage, where the table lists it: every shipped
    // table lists it after fusion and lowering, before folding, since the fusions and lowerings
    // match float MatMuls (a packed QKV weight is quantized as one; `lower.separate_rope` and
    // `lower.unpack_qkv` read q/k/v projections) and folding should see the quantized graph.
    let mut quant_outcome: Option<Result<QuantOutcome>> = None;
    let mut quantize_step = |m: &mut Model| -> std::result::Result<(), String> {
        if let Some(step) = quant {
            let r = quantize::run(&mut m.graph, step);
            let failed = r.as_ref().err().map(|e| e.to_string());
            quant_outcome = Some(r);
            if let Some(e) = failed {
                return Err(e);
            }
        }
        Ok(())
    };
    let stages: Vec<ep_sets::Stage> = schedule.stages().collect();
    let step: rules::Step<'_> = (ep_sets::Stage::Quantize, &mut quantize_step);
    let diagnostics = rules::apply_schedule_with(model, &schedule, &opts, Some(step));
    let mut quant_outcome = match quant_outcome {
        Some(Err(e)) => return Err(e),
        Some(Ok(o)) => Some(o),
        None => None,
    };
    // On the final graph: a node the quantize step left reading a pre-quantized weight as
    // float may be one a later stage removed (the Transpose of a tied head, say).
    if let Some(outcome) = quant_outcome.as_mut() {
        quantize::import::note_dequantized(&model.graph, outcome);
    }
    let mut diagnostics = diagnostics.map_err(|e| Error::Pipeline(e.to_string()))?;

    let mut problems = Vec::new();
    let mut required_report = Vec::new();
    for (def, generic) in &required {
        let id = def.info.id;
        required_report.push(RequiredFusion {
            rule: id.into(),
            root: ep_sets::Domain::qualify(def.info.root_domain, def.info.root_op),
            generic_candidates: *generic,
            fired: diagnostics.fired(id),
        });
        problems.extend(misses(&diagnostics, id, |check| plan.not_applicable(id, check).is_some()));
    }
    let validation = validate_graph(&model.graph, table, plan);
    problems.extend(validation.problems);
    if let (Some(step), Some(outcome)) = (quant, &quant_outcome) {
        problems.extend(quantize::validate(&model.graph, step, outcome));
    }
    if !explain {
        diagnostics.records.clear();
    }
    let report = PipelineReport {
        role: plan.role.name().into(),
        stages,
        rules_run: ids,
        not_implemented,
        diagnostics,
        required: required_report,
        validation: problems.clone(),
        host_nodes: validation.host_nodes,
        quant: quant_outcome,
    };
    if !problems.is_empty() {
        let mut problems = problems;
        let hints = exclusion_hints(&model.graph, table, plan, &problems);
        problems.extend(hints);
        return Err(Error::Validation { ep: table.name.clone(), dtype, problems, report: Box::new(report) });
    }
    Ok(report)
}

/// For a build that failed validation: the failing nodes (named in `problems`) that a rule the
/// table excludes for this role and dtype would have taken (its pattern and checks match
/// them), each with the table's why, so the failure names what was left out on purpose
/// (ALiBi's attention on dml: fuse.gqa_alibi, which DirectML's GroupQueryAttention could not
/// run as the model needs).
fn exclusion_hints(graph: &Graph, table: &EpTable, plan: &DtypePlan, problems: &[String]) -> Vec<String> {
    let failing = |name: &str| problems.iter().any(|p| p.contains(&format!("`{name}`")));
    let cx = rules::rt::Cx::new(graph).with_limits(&plan.limits);
    let applies = |e: &&ep_sets::Exclusion| e.dtype.is_none_or(|d| d == plan.dtype) && e.role.as_deref().is_none_or(|r| r == plan.role.name());
    let mut out = Vec::new();
    for ex in table.exclusions().iter().filter(applies) {
        let Ok(family) = rules::select(&[ex.rule.as_str()]) else { continue };
        for def in family {
            for (i, n) in graph.nodes.iter().enumerate().filter(|(_, n)| n.op == def.info.root_op && n.domain == def.info.root_domain && failing(&n.name)) {
                if (def.matcher)(&cx, i).is_ok() {
                    out.push(format!("node `{}` is what `{}` fuses, which {}.toml excludes: {}", n.name, def.info.id, table.name, ex.why));
                }
            }
        }
    }
    out
}

/// The misses of required fusion `id`: every node of its root op is a candidate, and a
/// candidate on which no rule of the family (`id` and its variants `id.*`) fired is a miss
/// unless the step its furthest failure stopped at is listed as not applicable. A pattern
/// line counts like a named check: an attribute restriction (`rotary_embedding_dim: 0`) or an
/// operator the pattern expects is a failure after the anchor, not "not an instance", so a
/// graph the fusion cannot take fails the build unless the table says why it may.
/// "Furthest" is over the family: a windowed layer fails the base rule's mask line and
/// fires the `.window` variant; an unwindowed one fails the variant's mask line and the base
/// rule's checks, and those checks are what decide.
fn misses(diagnostics: &Report, id: &str, not_applicable: impl Fn(&str) -> bool) -> Vec<String> {
    let in_family = |rule: &str| rule == id || rule.strip_prefix(id).is_some_and(|rest| rest.starts_with('.'));
    let mut by_node: BTreeMap<(&str, &str), Vec<&rules::Record>> = BTreeMap::new();
    for r in diagnostics.records.iter().filter(|r| in_family(&r.rule)) {
        by_node.entry((r.graph.as_str(), r.node.as_str())).or_default().push(r);
    }
    let mut out = Vec::new();
    for records in by_node.values() {
        if records.iter().any(|r| r.outcome == Outcome::Fired) {
            continue;
        }
        let furthest = records.iter().map(|r| r.depth).max().unwrap_or(0);
        let missed = records
            .iter()
            .filter(|r| r.depth == furthest)
            .find(|r| !not_applicable(r.check.as_deref().unwrap_or("")));
        if let Some(r) = missed {
            out.push(format!(
                "required fusion `{id}` missed node `{}` in {}: {} `{}` failed: {} ({})",
                r.node,
                r.graph,
                if r.check.as_deref().is_some_and(|c| c.starts_with("match.")) { "pattern line" } else { "check" },
                r.check.as_deref().unwrap_or(""),
                r.message.as_deref().unwrap_or("no message"),
                r.location
            ));
        }
    }
    out
}

/// What [`validate_graph`] found.
pub struct Validation {
    /// Unclaimed or forbidden nodes; empty when the graph is valid for the table.
    pub problems: Vec<String>,
    /// Nodes claimed by `host` kernels, as `op x count`.
    pub host_nodes: Vec<String>,
}

/// Every node claimed by the table at its dtypes and opset; no forbidden op present.
pub fn validate_graph(graph: &Graph, table: &EpTable, plan: &DtypePlan) -> Validation {
    let schemas = match OpSchemas::builtin() {
        Ok(s) => s,
        Err(e) => return Validation { problems: vec![format!("operator schemas unreadable: {e}")], host_nodes: vec![] },
    };
    let types = ir::infer_types(graph, rules::op_types());
    let dtype_of = |name: &str| -> Option<ir::DType> {
        if name.is_empty() {
            return None;
        }
        types.get(name).map(|v| v.dtype)
    };
    let mut problems = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut host: BTreeMap<String, usize> = BTreeMap::new();
    for node in &graph.nodes {
        if let Some(f) = plan.forbids(&node.domain, &node.op) {
            problems.push(format!("node `{}` ({}) is forbidden for {}: {}", node.name, node.op, table.name, f.why));
            continue;
        }
        let inputs: Vec<Option<ir::DType>> = node.inputs.iter().map(|i| dtype_of(i)).collect();
        let outputs: Vec<Option<ir::DType>> = node.outputs.iter().map(|o| dtype_of(o)).collect();
        let bindings = schemas.bindings(&node.domain, &node.op, &inputs, &outputs).unwrap_or_default();
        match table.claims(&node.domain, &node.op, node.opset, &bindings) {
            Claim::No { reason } => {
                // One line per distinct reason, with a count, keeps the error readable.
                *seen.entry(format!("node `{}`: {reason}", node.name)).or_default() += 1;
            }
            Claim::Yes { kernel } if kernel.host => *host.entry(node.op.clone()).or_default() += 1,
            Claim::Yes { .. } => {}
        }
    }
    problems.extend(seen.into_keys().take(20));
    Validation { problems, host_nodes: host.into_iter().map(|(op, n)| format!("{op} x{n}")).collect() }
}
