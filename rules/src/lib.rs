//! The rewrite rules and the engine that applies them.
//!
//! Rules live in `rules/*.rule` and are compiled into Rust matchers by `rule_macros` at build
//! time (see docs/rule-language.md). The builder turns an EP table's lists into a
//! [`Schedule`] and calls [`apply_schedule`]; the [`Report`] says, per rule and graph, how many candidates there were, how
//! many fired, and which named check failed for the others (docs/diagnostics.md).
//!
//! * [`registry`]: every compiled rule with its id, stage, ordering, file and line, steps.
//! * [`Schedule`] / [`apply_schedule`] / [`apply`]: the order rules run in, and the engine.
//! * [`helpers::ALLOWED`]: the fixed list of native helpers rules may call.
//! * [`op_types`]: type inference for the contrib ops `ir` does not know (`ir::infer_types`).
//! * [`generated_source`]: the code the macro generated, for reading.

mod branch;
mod diag;
mod emit;
mod engine;
mod error;
pub mod helpers;
pub mod op_types;
pub mod rt;
mod schedule;

pub use diag::{FailCount, Outcome, Record, Report, RuleReport};
pub use emit::Emitter;
pub use engine::{apply, apply_schedule, apply_schedule_with, order, select, variants, Options, Step};
pub use schedule::Schedule;
pub use error::Error;
pub use op_types::op_types;

rule_macros::include_rules!("rules");

/// The pipeline stages (one type for the workspace: the EP tables' lists are the schedule).
pub use ep_sets::Stage;

/// Whether a step of a rule is a pattern line or a named check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum StepKind {
    Pattern,
    /// `let ?x = expr`: fails when the value cannot be computed.
    Let,
    Check,
}

/// One step of a rule, in the order the matcher tries them.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct StepInfo {
    /// The check id, `match.<capture>` for a pattern line, `let.<capture>` for a `let`.
    pub id: &'static str,
    pub kind: StepKind,
    /// The `.rule` file the step is written in: the rule's own, or that of the fragment it
    /// comes from.
    pub file: &'static str,
    pub line: u32,
    pub col: u32,
    /// The condition's source text, or the operator a pattern line matches.
    pub text: &'static str,
    /// The fragment the step was inlined from (`None`: written in the rule itself).
    pub fragment: Option<&'static str>,
}

impl StepInfo {
    /// `file:line`, as reports show where a step is written.
    pub fn location(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// Everything known about a rule without running it.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct RuleInfo {
    pub id: &'static str,
    pub doc: &'static str,
    /// The stage the `.rule` file names, if it names one: a table must list the rule there.
    pub stage: Option<Stage>,
    pub priority: i64,
    pub before: &'static [&'static str],
    pub after: &'static [&'static str],
    /// The `.rule` file, relative to the workspace.
    pub file: &'static str,
    pub line: u32,
    /// The root's domain (`""` for ai.onnx) and operator: candidates are nodes of this op.
    pub root_domain: &'static str,
    pub root_op: &'static str,
    pub steps: &'static [StepInfo],
    /// Native helpers the rule's emit block calls.
    pub helpers: &'static [&'static str],
    /// `(domain, op, opset)` of every node the rule creates (helpers' nodes not included).
    pub emits: &'static [(&'static str, &'static str, i64)],
}

impl RuleInfo {
    /// The named checks, in order.
    pub fn checks(&self) -> impl Iterator<Item = &StepInfo> {
        self.steps.iter().filter(|s| s.kind == StepKind::Check)
    }
}

/// A compiled rule: its facts, its matcher and its emitter.
pub struct RuleDef {
    pub info: RuleInfo,
    pub matcher: fn(&rt::Cx, usize) -> Result<rt::Binds, rt::Failure>,
    pub emitter: fn(&mut Emitter, &rt::Binds) -> Result<(), Error>,
}

/// Every compiled rule.
pub fn registry() -> &'static [RuleDef] {
    generated::RULES
}

/// The rule with this id.
pub fn rule(id: &str) -> Option<&'static RuleDef> {
    registry().iter().find(|r| r.info.id == id)
}

/// The Rust code `include_rules!` generated from the `.rule` files.
pub fn generated_source() -> &'static str {
    generated::SOURCE
}
