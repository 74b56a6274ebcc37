//! The order rules run in. An EP table is the schedule: its stages in the table's order (`[ep]
//! stages`, which also places the quantize step), and within a stage the rules of its
//! `[role.<role>.<dtype>]` list in list order, each named rule followed
//! by its variants (`id.<name>`, ordered among themselves by their `before`/`after` lines).
//! A rule's `stage` line and its `before`/`after` lines are not a second source of order:
//! they are constraints the schedule is checked against when it is built, so a table that
//! lists a rule in the wrong stage, or two rules against their stated order, is an error that
//! names both, and never a silent reordering.

use crate::engine::{order, select};
use crate::{Error, RuleDef, Stage};

/// Rules to run, stage by stage, in order.
#[derive(Clone, Debug, Default)]
pub struct Schedule {
    pub(crate) stages: Vec<(Stage, Vec<&'static RuleDef>)>,
}

impl std::fmt::Debug for RuleDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.info.id)
    }
}

impl Schedule {
    /// The schedule of an EP table's lists: `lists` gives the stages in the order they run (the
    /// table's), each with its rule ids in table order; a stage may have none (the quantize
    /// step's, [`Stage::Quantize`], always has none). Fails on an unknown id, on a rule listed
    /// outside the stage its `.rule` file names or in the quantize stage, and on two rules
    /// listed against their `before`/`after` lines.
    pub fn from_lists<'a>(lists: impl IntoIterator<Item = (Stage, Vec<&'a str>)>) -> Result<Schedule, Error> {
        let mut stages: Vec<(Stage, Vec<&'static RuleDef>)> = Vec::new();
        for (stage, ids) in lists {
            if !stage.runs_rules() && !ids.is_empty() {
                return Err(Error::Schedule(format!("rules are listed under `{stage}`, the quantize step's stage: {}", ids.join(", "))));
            }
            let mut rules: Vec<&'static RuleDef> = Vec::new();
            for id in ids {
                let family = order(&select(&[id])?);
                for r in family {
                    if let Some(declared) = r.info.stage {
                        if declared != stage {
                            return Err(Error::Schedule(format!(
                                "`{id}` is listed under `{stage}`, but `{}` ({}:{}) says `stage {declared}`; move it to the `{declared}` list",
                                r.info.id, r.info.file, r.info.line
                            )));
                        }
                    }
                    if !rules.iter().any(|x| x.info.id == r.info.id) {
                        rules.push(r);
                    }
                }
            }
            match stages.iter_mut().find(|(s, _)| *s == stage) {
                Some((_, listed)) => {
                    for r in rules {
                        if !listed.iter().any(|x| x.info.id == r.info.id) {
                            listed.push(r);
                        }
                    }
                }
                None => stages.push((stage, rules)),
            }
        }
        let schedule = Schedule { stages };
        schedule.check_constraints()?;
        Ok(schedule)
    }

    /// Each of `ids` (with its variants) in the stage its `.rule` file names (`fuse` when it
    /// names none), ordered within a stage by the rules' `before`/`after` lines, then by
    /// priority and id: for tests and the rule harness, which run rules without a table.
    pub fn for_ids(ids: &[&str], variants: bool) -> Result<Schedule, Error> {
        let mut rules = select(ids)?;
        if !variants {
            rules.retain(|r| ids.contains(&r.info.id));
        }
        let stages = Stage::ALL
            .into_iter()
            .map(|s| (s, order(&rules.iter().copied().filter(|r| r.info.stage.unwrap_or(Stage::Fuse) == s).collect::<Vec<_>>())))
            .filter(|(_, rules)| !rules.is_empty())
            .collect();
        Ok(Schedule { stages })
    }

    /// The stages in run order, those without rules (the quantize step's) included.
    pub fn stages(&self) -> impl Iterator<Item = Stage> + '_ {
        self.stages.iter().map(|(s, _)| *s)
    }

    /// Every scheduled rule id with its stage, in run order.
    pub fn order(&self) -> impl Iterator<Item = (Stage, &'static str)> + '_ {
        self.stages.iter().flat_map(|(s, rules)| rules.iter().map(move |r| (*s, r.info.id)))
    }

    /// `before`/`after` lines between scheduled rules hold in run order.
    fn check_constraints(&self) -> Result<(), Error> {
        let run: Vec<&'static RuleDef> = self.stages.iter().flat_map(|(_, r)| r.iter().copied()).collect();
        let at = |id: &str| run.iter().position(|r| r.info.id == id);
        for (i, r) in run.iter().enumerate() {
            let later = r.info.before.iter().map(|b| (*b, "before"));
            let earlier = r.info.after.iter().map(|a| (*a, "after"));
            for (other, how) in later.chain(earlier) {
                let Some(j) = at(other) else { continue };
                let wrong = if how == "before" { j < i } else { j > i };
                if wrong {
                    return Err(Error::Schedule(format!(
                        "`{}` ({}:{}) must run {how} `{other}`, but the table lists them the other way round; swap them in the list",
                        r.info.id, r.info.file, r.info.line
                    )));
                }
            }
        }
        Ok(())
    }
}
