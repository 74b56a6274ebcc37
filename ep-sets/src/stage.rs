//! The pipeline stages: the one model of execution order in the workspace. An EP table's
//! `[role.<role>.<dtype>]` lists are the schedule: stages run in [`Stage::ALL`] order, and within a stage
//! the rules run in the order the list gives (docs/ep-tables.md). A `.rule` file's `stage`
//! line, when present, says which list the rule belongs in, and is checked against the table.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// EP-agnostic tidying of the generic graph.
    Cleanup,
    /// Lowerings that a fusion depends on (e.g. `lower.if_to_where` before the GQA fusions).
    Prefuse,
    /// Fusions into the EP's contrib ops.
    Fuse,
    /// Lowerings the EP needs after fusion (e.g. `lower.int64_to_int32`).
    Lower,
    /// Constant folding and dead-node removal.
    Fold,
}

impl Stage {
    /// All stages in pipeline order.
    pub const ALL: [Stage; 5] = [Stage::Cleanup, Stage::Prefuse, Stage::Fuse, Stage::Lower, Stage::Fold];

    /// The stage's name: its list's key in a `[role.<role>.<dtype>]` section and its `stage` line in a
    /// `.rule` file.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Cleanup => "cleanup",
            Stage::Prefuse => "prefuse",
            Stage::Fuse => "fuse",
            Stage::Lower => "lower",
            Stage::Fold => "fold",
        }
    }

    /// The stage called `name`.
    pub fn parse(name: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Every stage name, for messages.
    pub fn names() -> String {
        Stage::ALL.map(Stage::name).join(", ")
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
