//! The EP table's lists are the schedule (docs/ep-tables.md, "The schedule"): rules run in list
//! order, stage by stage, each with its variants; a rule listed outside its declared stage, or
//! against a `before`/`after` line, is refused with both names.

mod common;

use rules::{Schedule, Stage};

/// The order rules run in, from a report: the first rule seen first.
fn run_order(lists: Vec<(Stage, Vec<&str>)>) -> Vec<String> {
    let schedule = Schedule::from_lists(lists).expect("a valid schedule");
    let mut m = ir::Model::default();
    let report = rules::apply_schedule(&mut m, &schedule, &rules::Options::default()).unwrap();
    report.rules.iter().map(|r| r.rule.clone()).collect()
}

#[test]
fn list_order_is_run_order() {
    let a = run_order(vec![(Stage::Fuse, vec!["fuse.skip_rms_norm", "fuse.bias_gelu"])]);
    let b = run_order(vec![(Stage::Fuse, vec!["fuse.bias_gelu", "fuse.skip_rms_norm"])]);
    let pos = |o: &[String], id: &str| o.iter().position(|x| x == id).unwrap();
    assert!(pos(&a, "fuse.skip_rms_norm") < pos(&a, "fuse.bias_gelu"), "{a:?}");
    assert!(pos(&b, "fuse.bias_gelu") < pos(&b, "fuse.skip_rms_norm"), "{b:?}");
    // Variants run right after their base rule.
    assert_eq!(pos(&b, "fuse.bias_gelu.erf"), pos(&b, "fuse.bias_gelu") + 1, "{b:?}");
    // Stages run in the order the lists are given in: the table's `[ep] stages`.
    let s = Schedule::from_lists(vec![(Stage::Prefuse, vec!["lower.if_to_where"]), (Stage::Fuse, vec!["fuse.gqa_rotary"])]).unwrap();
    let stages: Vec<Stage> = s.order().map(|(st, _)| st).collect();
    assert_eq!(stages.first(), Some(&Stage::Prefuse), "{stages:?}");
}

/// The quantize step runs as the `quantize` stage, where the schedule lists it: after the fuse
/// stage it sees the fused graph, before it the generic one. (The builder passes the table's
/// `[ep] stages` order; builder/tests/stage_order.rs moves it in a copied table.)
#[test]
fn the_quantize_step_runs_where_the_schedule_lists_it() {
    let seen_by_step = |lists: Vec<(Stage, Vec<&str>)>| -> (usize, Vec<Stage>) {
        let schedule = Schedule::from_lists(lists).unwrap();
        let mut m = common::tiny_llama();
        let mut seen = None;
        let mut f = |m: &mut ir::Model| -> Result<(), String> {
            seen = Some(common::count(m, "SkipSimplifiedLayerNormalization"));
            Ok(())
        };
        let step: rules::Step<'_> = (Stage::Quantize, &mut f);
        rules::apply_schedule_with(&mut m, &schedule, &rules::Options::default(), Some(step)).unwrap();
        assert!(common::count(&m, "SkipSimplifiedLayerNormalization") > 0, "the fusion ran");
        (seen.expect("the step ran"), schedule.stages().collect())
    };
    let (after, order) = seen_by_step(vec![(Stage::Fuse, vec!["fuse.skip_rms_norm"]), (Stage::Quantize, vec![]), (Stage::Fold, vec![])]);
    assert!(after > 0, "quantize after fuse sees the fused graph");
    assert_eq!(order, [Stage::Fuse, Stage::Quantize, Stage::Fold]);
    let (before, order) = seen_by_step(vec![(Stage::Quantize, vec![]), (Stage::Fuse, vec!["fuse.skip_rms_norm"]), (Stage::Fold, vec![])]);
    assert_eq!(before, 0, "quantize before fuse sees the generic graph");
    assert_eq!(order, [Stage::Quantize, Stage::Fuse, Stage::Fold]);
    // No rule is listed in the quantize stage.
    let e = Schedule::from_lists(vec![(Stage::Quantize, vec!["fuse.skip_rms_norm"])]).unwrap_err().to_string();
    assert!(e.contains("quantize"), "{e}");
}

#[test]
fn a_rule_listed_outside_its_stage_is_refused() {
    let e = Schedule::from_lists(vec![(Stage::Lower, vec!["lower.if_to_where"])]).unwrap_err().to_string();
    assert!(e.contains("lower.if_to_where") && e.contains("stage prefuse") && e.contains("under `lower`"), "{e}");
}

#[test]
fn lists_against_before_and_after_are_refused() {
    // fuse.gqa_rotary says `before fuse.gqa`.
    let e = Schedule::from_lists(vec![(Stage::Fuse, vec!["fuse.gqa", "fuse.gqa_rotary"])]).unwrap_err().to_string();
    assert!(e.contains("gqa_rotary") && e.contains("fuse.gqa") && e.contains("swap"), "{e}");
    assert!(Schedule::from_lists(vec![(Stage::Fuse, vec!["fuse.gqa_rotary", "fuse.gqa"])]).is_ok());
    let e = Schedule::from_lists(vec![(Stage::Fuse, vec!["fuse.nope"])]).unwrap_err().to_string();
    assert!(e.contains("unknown rule `fuse.nope`"), "{e}");
}

/// Every builtin table's lists make a valid schedule.
#[test]
fn every_builtin_table_is_a_valid_schedule() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ep-sets/tables");
    let sets = ep_sets::EpSets::load_dir(&dir).unwrap();
    for name in sets.names() {
        let t = sets.get(name).unwrap();
        for d in t.dtypes() {
            let plan = t.dtype(d).unwrap();
            assert!(t.lists_stages(), "{name} lists no [ep] stages");
            assert_eq!(plan.order, t.stage_order());
            let lists: Vec<(Stage, Vec<&str>)> = plan
                .order
                .iter()
                .copied()
                .map(|s| (s, plan.stage(s).iter().map(|r| r.id.as_str()).filter(|id| rules::rule(id).is_some()).collect()))
                .collect();
            Schedule::from_lists(lists).unwrap_or_else(|e| panic!("{name} {d}: {e}"));
        }
    }
}
