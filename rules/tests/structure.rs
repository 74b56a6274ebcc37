//! Structural guarantees: matching is compiled (no parser at run time), rules call only
//! allow-listed helpers, every rule names its file and line, the generated code is visible.

use std::collections::{HashMap, HashSet};

/// `rules` must not link `pest` or `rule-dsl`: those are compile-time only, reached through the
/// `rule-macros` proc-macro. Walks the normal dependency graph from `rules` without entering
/// proc-macro crates (which run in the compiler, not in the binary).
#[test]
fn rules_has_no_runtime_dependency_on_the_parser() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // Only the host's dependency graph: offline, cargo has not downloaded other platforms'
    // crates (wasm-only dependencies of indicatif, say), and they never link here anyway.
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = std::process::Command::new(rustc).arg("-vV").output().expect("rustc -vV runs");
    let version = String::from_utf8_lossy(&version.stdout);
    let host = version.lines().find_map(|l| l.strip_prefix("host: ")).expect("rustc -vV names the host").trim().to_string();
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline", "--filter-platform", &host])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let name_of: HashMap<&str, &str> = packages.iter().map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap())).collect();
    let is_proc_macro: HashSet<&str> = packages
        .iter()
        .filter(|p| p["targets"].as_array().unwrap().iter().any(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "proc-macro")))
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    let nodes = meta["resolve"]["nodes"].as_array().unwrap();
    let deps: HashMap<&str, Vec<&str>> = nodes
        .iter()
        .map(|n| {
            let normal: Vec<&str> = n["deps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null()))
                .map(|d| d["pkg"].as_str().unwrap())
                .collect();
            (n["id"].as_str().unwrap(), normal)
        })
        .collect();
    let root = name_of.iter().find(|(_, n)| **n == "rules").map(|(id, _)| *id).unwrap();
    let mut seen = HashSet::new();
    let mut stack = vec![root];
    let mut linked = Vec::new();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        linked.push(name_of[id]);
        if is_proc_macro.contains(id) {
            continue;
        }
        stack.extend(deps.get(id).into_iter().flatten());
    }
    for banned in ["pest", "pest_derive", "rule-dsl"] {
        assert!(!linked.contains(&banned), "`rules` links `{banned}` at run time: {linked:?}");
    }
    assert!(linked.contains(&"rule-macros"), "the walk saw the macro crate: {linked:?}");
}

#[test]
fn rules_call_only_allow_listed_helpers() {
    for r in rules::registry() {
        for h in r.info.helpers {
            assert!(rules::helpers::ALLOWED.contains(h), "rule {} calls helper `{h}`, which is not in helpers::ALLOWED", r.info.id);
        }
    }
    // The generated code calls helpers only through `helpers::allowed::`.
    let src = rules::generated_source();
    for (i, _) in src.match_indices("helpers ::") {
        assert!(src[i..].starts_with("helpers :: allowed ::"), "helper call outside the allow-list module: {}", &src[i..i + 60]);
    }
}

/// Every helper the one list (rule-dsl's, handed over by the macro) names is a function of
/// `helpers::allowed`: the generated calls would not compile otherwise, and this covers the
/// helpers no rule calls yet.
#[test]
fn the_helper_list_is_one_registry() {
    assert!(!rules::helpers::ALLOWED.is_empty());
    let src = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/helpers.rs")).unwrap();
    for h in rules::helpers::ALLOWED {
        assert!(src.contains(&format!("pub fn {h}(")), "helper `{h}` is listed but helpers::allowed has no `pub fn {h}`");
    }
}

#[test]
fn registry_lists_every_rule_file_with_ids_stages_and_lines() {
    let ids: Vec<&str> = rules::registry().iter().map(|r| r.info.id).collect();
    for want in ["fuse.gqa_rotary", "fuse.gqa", "fuse.skip_rms_norm"] {
        assert!(ids.contains(&want), "{ids:?}");
    }
    // The family files: every `.rule` file at the top of the directory but the prelude
    // (shared fragments live in `fragments/` and hold no rules).
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
    let families: HashSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "rule"))
        .map(|p| format!("rules/rules/{}", p.file_name().unwrap().to_string_lossy()))
        .filter(|f| f != "rules/rules/prelude.rule")
        .collect();
    let distinct: HashSet<String> = rules::registry().iter().map(|r| r.info.file.to_string()).collect();
    assert_eq!(distinct, families, "one registry file per family file");
    for r in rules::registry() {
        let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(r.info.file)).unwrap();
        let line = text.lines().nth(r.info.line as usize - 1).unwrap();
        assert!(line.contains(&format!("rule {}", r.info.id)), "{}:{} is `{line}`", r.info.file, r.info.line);
        // The id's prefix agrees with the stage a rule names: fuse.* fuse, lower.* lower or
        // prefuse, fold.* fold (a rule that names no stage may go in any list of its kind).
        use rules::Stage;
        let ok = match (r.info.id.split('.').next(), r.info.stage) {
            (_, None) => true,
            (Some("fuse"), Some(s)) => s == Stage::Fuse,
            (Some("lower"), Some(s)) => matches!(s, Stage::Lower | Stage::Prefuse),
            (Some("cleanup"), Some(s)) => matches!(s, Stage::Cleanup | Stage::Fold),
            (Some("fold"), Some(s)) => s == Stage::Fold,
            _ => false,
        };
        assert!(ok, "rule {} runs in stage {:?}", r.info.id, r.info.stage);
        // Every step names the file it is written in, and that line holds it.
        for s in r.info.steps {
            let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(s.file)).unwrap();
            let line = text.lines().nth(s.line as usize - 1).unwrap_or_default();
            let mark = match s.kind {
                rules::StepKind::Check => format!("check {}:", s.id),
                rules::StepKind::Let => format!("let ?{}", s.id.trim_start_matches("let.")),
                rules::StepKind::Pattern => s.text.rsplit('.').next().unwrap().to_string(),
            };
            assert!(line.contains(&mark), "{} step {}: {}:{} is `{line}`", r.info.id, s.id, s.file, s.line);
            assert!(s.file == r.info.file || s.fragment.is_some(), "{} step {}: a step from another file comes from a fragment", r.info.id, s.id);
        }
    }
}

/// One rule family per file: every rule sits in `<family base id>.rule`, the base being the
/// shortest id of which it is a variant (`fuse.rms_norm.div.mul` -> `fuse.rms_norm`).
#[test]
fn each_rule_is_in_the_file_of_its_family() {
    let ids: HashSet<&str> = rules::registry().iter().map(|r| r.info.id).collect();
    for r in rules::registry() {
        let base = rule_dsl::layout::family(r.info.id, |id| ids.contains(id));
        assert_eq!(r.info.file, format!("rules/rules/{}", rule_dsl::layout::family_file(base)), "rule {} belongs to family {base}", r.info.id);
    }
}

#[test]
fn gqa_rotary_is_ordered_before_gqa() {
    let picked = rules::select(&["fuse.gqa", "fuse.skip_rms_norm", "fuse.gqa_rotary"]).unwrap();
    let order: Vec<&str> = rules::order(&picked).iter().map(|r| r.info.id).collect();
    let pos = |id| order.iter().position(|x| *x == id).unwrap();
    assert!(pos("fuse.gqa_rotary") < pos("fuse.gqa"), "{order:?}");
}

#[test]
fn unknown_rule_ids_are_an_error() {
    let mut m = ir::Model::default();
    let err = rules::apply(&mut m, &["fuse.nope"], &rules::Options::default()).unwrap_err();
    assert!(err.to_string().contains("unknown rule `fuse.nope`"), "{err}");
}

#[test]
fn generated_code_is_visible_and_specialised() {
    let src = rules::generated_source();
    assert!(src.contains("\"GroupQueryAttention\"") && src.contains("\"SkipSimplifiedLayerNormalization\""));
    assert!(src.contains("fn matcher"));
}

/// A check written in a fragment keeps its own id and is located in the fragment's file, with
/// the fragment noted: `fuse.gqa_rotary` has `head_size_cpu` from `rotary_caches`, and
/// `match.q_rot` from `rotated_qk`; a rule's own line (fuse.skip_rms_norm's root) stays in
/// the rule's file.
#[test]
fn fragment_steps_keep_their_id_and_name_their_fragment() {
    let r = rules::rule("fuse.gqa_rotary").unwrap();
    let s = r.info.steps.iter().find(|s| s.id == "head_size_cpu").expect("the check keeps its id");
    assert_eq!((s.file, s.fragment), ("rules/rules/fragments/attention.rule", Some("rotary_caches")));
    let line = r.info.steps.iter().find(|s| s.id == "match.q_rot").unwrap();
    assert_eq!((line.file, line.fragment), ("rules/rules/fragments/attention.rule", Some("rotated_qk")));
    let r = rules::rule("fuse.skip_rms_norm").unwrap();
    let own = r.info.steps.iter().find(|s| s.id == "match.out").unwrap();
    assert_eq!((own.file, own.fragment), (r.info.file, None));
}
