//! The repository's registry is complete and true, and each of its checks can fail.

use tailor_tests::fixture_registry::{self, repo, Error, Kind, Registry};
use std::path::Path;

/// Every folder in tests/fixtures has an entry and every entry a folder, with the model_type
/// its config.json says.
#[test]
fn the_registry_lists_exactly_the_fixture_folders() {
    let problems = repo().folder_problems();
    assert!(problems.is_empty(), "tests/fixtures/fixtures.toml disagrees with the folders:\n{}", problems.join("\n"));
    assert!(repo().of_kind(Kind::Decoder).count() >= 12);
}

fn entry(name: &str, model_type: &str, traits: &str) -> String {
    format!("[[fixture]]\nname = \"{name}\"\nkind = \"decoder\"\nmodel_type = \"{model_type}\"\ntraits = [{traits}]\nexercises = \"x\"\n")
}

fn folder(dir: &Path, name: &str, model_type: &str) {
    std::fs::create_dir(dir.join(name)).unwrap();
    std::fs::write(dir.join(name).join("config.json"), format!("{{\"model_type\": \"{model_type}\"}}")).unwrap();
}

#[test]
fn a_folder_without_entry_an_entry_without_folder_and_a_wrong_model_type_are_named() {
    let dir = tempfile::tempdir().unwrap();
    folder(dir.path(), "tiny-a", "llama");
    folder(dir.path(), "tiny-unlisted", "llama");
    let text = format!("[traits]\nrope = \"r\"\n{}{}", entry("tiny-a", "qwen2", "\"rope\""), entry("tiny-gone", "llama", ""));
    std::fs::write(dir.path().join("fixtures.toml"), text).unwrap();
    let problems = Registry::load(dir.path()).unwrap().folder_problems().join("\n");
    assert!(problems.contains("folder `tiny-unlisted` has no entry"), "{problems}");
    assert!(problems.contains("fixture `tiny-gone` has no folder"), "{problems}");
    assert!(problems.contains("model_type `qwen2`, config.json says `llama`"), "{problems}");
}

#[test]
fn undeclared_unused_and_repeated_names_are_refused() {
    let text = format!(
        "[traits]\nrope = \"r\"\nstale = \"s\"\n{}{}{}",
        entry("tiny-a", "llama", "\"rope\""),
        entry("tiny-a", "llama", "\"rope\""),
        entry("Tiny_B", "llama", "\"ropes\""),
    ) + &entry("tiny-c_d", "llama", "") + &entry("tiny_c-d", "llama", "");
    let err = Registry::parse("/nowhere".into(), &text).unwrap_err();
    let Error::Invalid { problems, .. } = &err else { panic!("{err}") };
    let all = problems.join("\n");
    for expected in ["`tiny-a` is listed twice", "trait `ropes` is not declared", "`stale` is declared but no fixture has it", "`Tiny_B`: a name is", "`tiny_c-d` has the test name of another fixture"] {
        assert!(all.contains(expected), "lacks `{expected}`:\n{all}");
    }
}

#[test]
fn selectors_pick_by_kind_and_trait() {
    let r = repo();
    let names = |s: &str| r.select(s).unwrap().into_iter().map(|f| f.name.as_str()).collect::<Vec<_>>();
    assert_eq!(names("decoder").len(), r.of_kind(Kind::Decoder).count());
    assert_eq!(names("rope qk_norm"), ["tiny-qwen3", "tiny-gemma3", "tiny-qwen3-moe", "tiny-apertus"]);
    assert_eq!(names("qk_norm !sandwich_norm"), ["tiny-qwen3", "tiny-qwen3-moe", "tiny-mellum", "tiny-apertus"]);
    let plain = names("rope !qk_norm");
    assert!(plain.contains(&"tiny-llama") && !plain.contains(&"tiny-qwen3") && !plain.contains(&"tiny-gpt2"), "{plain:?}");
    assert_eq!(names("rope").len(), plain.len() + 4);
    assert_eq!(names("vlm"), ["tiny-qwen2_5_vl", "tiny-qwen3_vl", "tiny-gemma3-vl", "tiny-mistral3"]);
    assert_eq!(names("vlm !text_only"), ["tiny-qwen2_5_vl", "tiny-qwen3_vl", "tiny-gemma3-vl"]);
    assert_eq!(names("prequant"), ["tiny-llama-gptq", "tiny-llama-gptq-asym", "tiny-qwen2-awq"]);
    // A LoRA fixture (adapters for a base fixture) is in no decoder matrix: its own kind.
    assert_eq!(names("lora"), ["tiny-llama-lora"]);
    assert!(!names("decoder").contains(&"tiny-llama-lora"));
    for bad in ["rop", "", "gpt2 rope", "!decoder !encoder !vlm !prequant !lora"] {
        assert!(matches!(r.select(bad), Err(Error::Selector { .. })), "`{bad}` must be refused");
    }
}

#[test]
fn an_unlisted_fixture_cannot_be_used() {
    assert!(fixture_registry::fixture("tiny-llama").join("config.json").is_file());
    assert!(std::panic::catch_unwind(|| fixture_registry::fixture("tiny-nonexistent")).is_err());
}
