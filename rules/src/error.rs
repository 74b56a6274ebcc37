/// What can go wrong while applying rules. A rule that does not match is not an error: it is
/// a diagnostic (see [`crate::Report`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unknown rule `{0}`; known rules: {1}")]
    UnknownRule(String, String),
    /// A pipeline step that is not a rule failed (its own message, with context).
    #[error("{0}")]
    Step(String),
    #[error("schedule: {0}")]
    Schedule(String),
    #[error("rule `{rule}`: helper `{helper}` failed: {reason}")]
    Helper { rule: String, helper: &'static str, reason: String },
    #[error("rule `{rule}` on node `{node}`: {reason}")]
    Emit { rule: String, node: String, reason: String },
    #[error("graph `{graph}` is invalid after rule `{rule}` fired: {source}")]
    Commit { graph: String, rule: String, source: Box<ir::Error> },
    #[error("graph `{graph}` is invalid after stage {stage}: {source}")]
    Graph { graph: String, stage: String, source: Box<ir::Error> },
}
