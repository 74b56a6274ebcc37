//! Vision-language checkpoints as their publishers wrote them, not as transformers 5 saves the
//! fixtures: Qwen2.5-VL's flat config.json (text keys at the top level, `"type": "mrope"`) and
//! its preprocessor_config.json (top-level `min_pixels` / `max_pixels`, no `rescale_factor`),
//! and Gemma 3's sparse `text_config` (only the sizes that differ from the config class's
//! defaults). Each spelling must give the very package its fixture gives: the same model files
//! byte for byte, the same genai_config.json and processor_config.json. A processor that
//! disagrees with the tower is refused, naming both keys.

mod common;

use common::*;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

fn read_json(path: &Path) -> Map<String, Value> {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn write_json(path: &Path, value: &Map<String, Value>) {
    std::fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
}

/// Builds `model` into `root/name` (portable ONNX, the default EP) and returns the package.
fn build(model: &Path, root: &Path, name: &str) -> PathBuf {
    let out = root.join(name);
    let r = tailor(model, &out, &[]);
    assert!(r.status.success(), "build of {} failed:\n{}", model.display(), r.stderr);
    out
}

/// Every file of the two packages but build_report.json (it names the checkpoint folder)
/// is byte-identical.
fn assert_same_package(a: &Path, b: &Path) {
    let files = |dir: &Path| listing(dir).into_iter().filter(|f| f != "build_report.json").collect::<Vec<_>>();
    assert_eq!(files(a), files(b), "the packages hold different files");
    for f in files(a) {
        if f.ends_with(".json") && f != "tokenizer.json" {
            assert_eq!(read_json(&a.join(&f)), read_json(&b.join(&f)), "{f} differs");
        } else {
            assert!(std::fs::read(a.join(&f)).unwrap() == std::fs::read(b.join(&f)).unwrap(), "{f} differs");
        }
    }
}

/// tiny-qwen2_5_vl's settings in the published files' layout.
fn qwen_published(dir: &Path) -> PathBuf {
    let model = dir.join("published");
    copy_fixture("tiny-qwen2_5_vl", &model);
    let mut config = read_json(&model.join("config.json"));
    let Some(Value::Object(text)) = config.remove("text_config") else { panic!("the fixture has a text_config") };
    for (k, v) in text {
        match k.as_str() {
            // Spelled as the published configs spell them.
            "rope_parameters" => {
                config.insert("rope_theta".into(), v["rope_theta"].clone());
                config.insert("rope_scaling".into(), json!({"type": "mrope", "mrope_section": v["mrope_section"]}));
            }
            "model_type" | "layer_types" => {}
            _ => {
                config.insert(k, v);
            }
        }
    }
    write_json(&model.join("config.json"), &config);
    let processor = read_json(&model.join("processor_config.json"));
    std::fs::remove_file(model.join("processor_config.json")).unwrap();
    let hf = processor["image_processor"].as_object().unwrap();
    let size = &hf["size"];
    let mut published = Map::new();
    published.insert("min_pixels".into(), size["shortest_edge"].clone());
    published.insert("max_pixels".into(), size["longest_edge"].clone());
    for key in ["patch_size", "temporal_patch_size", "merge_size", "image_mean", "image_std", "image_processor_type"] {
        published.insert(key.into(), hf[key].clone());
    }
    published.insert("processor_class".into(), json!("Qwen2_5_VLProcessor"));
    write_json(&model.join("preprocessor_config.json"), &published);
    model
}

#[test]
fn qwen2_5_vl_published_layout_builds_the_fixtures_package() {
    let dir = tempfile::tempdir().unwrap();
    let model = qwen_published(dir.path());
    let config = read_json(&model.join("config.json"));
    assert!(!config.contains_key("text_config") && config["rope_scaling"]["type"] == "mrope");
    assert!(read_json(&model.join("preprocessor_config.json")).get("rescale_factor").is_none());
    let published = build(&model, dir.path(), "published-pkg");
    let fixture = build(&fixture("tiny-qwen2_5_vl"), dir.path(), "fixture-pkg");
    assert_same_package(&published, &fixture);
}

#[test]
fn gemma3_vl_sparse_text_config_builds_the_fixtures_package() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("published");
    copy_fixture("tiny-gemma3-vl", &model);
    let mut config = read_json(&model.join("config.json"));
    let text = config["text_config"].as_object_mut().unwrap();
    // What Gemma3TextConfig gives by default (theta 1e6, local base 10000, eps 1e-6, no
    // softcaps, tied embeddings, token ids 2/1/0) is left out, as the published configs leave it; the two-layer
    // fixture's [sliding, full] is every second layer full.
    let window = text["sliding_window"].clone();
    for key in [
        "rope_parameters",
        "layer_types",
        "_sliding_window_pattern",
        "rms_norm_eps",
        "attn_logit_softcapping",
        "final_logit_softcapping",
        "tie_word_embeddings",
        "attention_bias",
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
    ] {
        assert!(text.remove(key).is_some(), "the fixture's text_config has `{key}`");
    }
    assert_eq!(window, json!(8));
    text.insert("sliding_window_pattern".into(), json!(2));
    write_json(&model.join("config.json"), &config);
    let published = build(&model, dir.path(), "published-pkg");
    let fixture = build(&fixture("tiny-gemma3-vl"), dir.path(), "fixture-pkg");
    assert_same_package(&published, &fixture);
}

/// Edits the published Qwen layout's preprocessor_config.json; the build must fail naming
/// every string of `expect`.
fn refused_processor(edit: impl FnOnce(&mut Map<String, Value>), expect: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let model = qwen_published(dir.path());
    let path = model.join("preprocessor_config.json");
    let mut p = read_json(&path);
    edit(&mut p);
    write_json(&path, &p);
    fails(&model, &[], expect);
}

#[test]
fn a_processor_that_disagrees_with_the_tower_is_refused_naming_both_keys() {
    refused_processor(|p| drop(p.insert("patch_size".into(), json!(16))), &["preprocessor_config.json", "`patch_size` is 16", "`vision_config.patch_size` is 14"]);
    refused_processor(|p| drop(p.insert("merge_size".into(), json!(4))), &["`merge_size` is 4", "`vision_config.spatial_merge_size` is 2"]);
    refused_processor(|p| drop(p.insert("do_normalize".into(), json!(false))), &["preprocessor_config.json", "`do_normalize` is false"]);
    refused_processor(|p| drop(p.insert("min_pixels".into(), json!(1_000_000_000))), &["minimum 1000000000 is above its maximum"]);
    refused_processor(|p| drop(p.insert("size".into(), json!({"height": 224}))), &["`size` must give `shortest_edge` and `longest_edge`"]);
}

#[test]
fn a_gemma3_processor_of_another_size_than_the_tower_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-gemma3-vl", &model);
    let path = model.join("processor_config.json");
    let mut p = read_json(&path);
    p["image_processor"]["size"] = json!({"height": 256, "width": 256});
    write_json(&path, &p);
    fails(&model, &[], &["processor_config.json", "`size` is 256x256", "`vision_config.image_size` is 128"]);
}
