//! The pipeline stages: the one model of execution order in the workspace. An EP table is the
//! whole schedule: its `[ep] stages` list gives the order of the stages (the quantize step's
//! place included), its `[role.<role>.<dtype>]` lists the rules of each rule stage, run in the
//! order the list gives (docs/ep-tables.md). A `.rule` file's `stage` line, when present, says
//! which list the rule belongs in, and is checked against the table.

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
    /// The quantize step (`--quant`, builder/src/quantize): weights to MatMulNBits and
    /// friends. Not a rule stage: no rule is listed in it; a float build runs nothing here.
    Quantize,
    /// Constant folding and dead-node removal.
    Fold,
}

impl Stage {
    /// All stages, in the order a table that lists no `[ep] stages` runs them.
    pub const ALL: [Stage; 6] = [Stage::Cleanup, Stage::Prefuse, Stage::Fuse, Stage::Lower, Stage::Quantize, Stage::Fold];

    /// The stage's name: its list's key in a `[role.<role>.<dtype>]` section and its `stage` line in a
    /// `.rule` file.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Cleanup => "cleanup",
            Stage::Prefuse => "prefuse",
            Stage::Fuse => "fuse",
            Stage::Lower => "lower",
            Stage::Quantize => "quantize",
            Stage::Fold => "fold",
        }
    }

    /// Does this stage run rules (a table's list, a `.rule` file's `stage` line)? Only
    /// [`Stage::Quantize`] does not: it is the quantize step's place in the schedule.
    pub fn runs_rules(self) -> bool {
        self != Stage::Quantize
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
