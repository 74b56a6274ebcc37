//! Bad input through the real `tailor` binary: every case exits non-zero with a message that
//! names the file, key or tensor at fault (and both shapes where relevant), never panics,
//! leaves no output folder (nor staging folder) behind, and leaves an existing output folder
//! given with `--force` untouched.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Runs a failing build twice: into a fresh path (nothing may exist afterwards) and with
/// `--force` over an existing package-like folder (it must be untouched). Both messages must
/// contain every string of `expect`.
fn assert_fails(model: &Path, extra: &[&str], expect: &[&str]) {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("pkg");
    let r = tailor(model, &out, extra);
    let ctx = format!("tailor build --model {} {extra:?}\nstderr:\n{}", model.display(), r.stderr);
    assert!(!r.status.success(), "expected failure: {ctx}");
    assert!(!r.stderr.contains("panicked"), "panicked: {ctx}");
    for e in expect {
        assert!(r.stderr.contains(e), "message lacks `{e}`: {ctx}");
    }
    assert!(!out.exists(), "output folder exists after a failed build: {ctx}");
    let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "left behind {left:?}: {ctx}");

    let existing = root.path().join("existing");
    std::fs::create_dir(&existing).unwrap();
    std::fs::write(existing.join("model.onnx"), b"previous package").unwrap();
    std::fs::write(existing.join("genai_config.json"), b"{}").unwrap();
    // Recognisably an earlier package, so --force would replace it: the build must fail for
    // the input's reason and leave it as it was.
    std::fs::write(
        existing.join("build_report.json"),
        br#"{"tool": "onnx-tailor", "files": ["model.onnx", "genai_config.json", "build_report.json"]}"#,
    )
    .unwrap();
    let before = snapshot(&existing);
    let mut forced = extra.to_vec();
    forced.push("--force");
    let r = tailor(model, &existing, &forced);
    assert!(!r.status.success(), "expected failure with --force: {}", r.stderr);
    assert!(!r.stderr.contains("panicked"), "panicked with --force: {}", r.stderr);
    for e in expect {
        assert!(r.stderr.contains(e), "message with --force lacks `{e}`: {}", r.stderr);
    }
    assert_eq!(snapshot(&existing), before, "--force folder changed by a failed build: {}", r.stderr);
    let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("existing")], "left behind {left:?}");
}

#[test]
fn missing_config_json() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-llama", &model);
    std::fs::remove_file(model.join("config.json")).unwrap();
    assert_fails(&model, &[], &["config.json", "cannot read"]);
}

#[test]
fn malformed_config_json() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-llama", &model);
    std::fs::write(model.join("config.json"), b"{\"model_type\": \"llama\", \"hidden_size\": 64,").unwrap();
    assert_fails(&model, &[], &["config.json", "not valid JSON"]);
}

#[test]
fn config_key_of_the_wrong_type_or_missing() {
    let dir = tempfile::tempdir().unwrap();
    let model = with_config(dir.path(), |c| {
        c.insert("num_attention_heads".into(), Value::String("four".into()));
    });
    assert_fails(&model, &[], &["config.json", "`num_attention_heads`", "positive integer"]);
    let dir = tempfile::tempdir().unwrap();
    let model = with_config(dir.path(), |c| {
        c.remove("vocab_size");
    });
    assert_fails(&model, &[], &["config.json", "`vocab_size`", "missing"]);
    let dir = tempfile::tempdir().unwrap();
    let model = with_config(dir.path(), |c| {
        c.insert("rope_scaling".into(), serde_json::json!({"rope_type": "ntk-by-parts", "factor": 2.0}));
    });
    assert_fails(&model, &[], &["config.json", "ntk-by-parts", "default, linear, dynamic, llama3, yarn, longrope"]);
}

#[test]
fn unknown_model_type_lists_the_supported_ones() {
    let dir = tempfile::tempdir().unwrap();
    let model = with_config(dir.path(), |c| {
        c.insert("model_type".into(), Value::String("rwkv".into()));
    });
    assert_fails(&model, &[], &["config.json", "`rwkv`", "llama", "mistral", "qwen2", "qwen3", "phi3", "gpt2", "falcon"]);
}

#[test]
fn missing_tensor_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-llama", &model);
    let file = model.join("model.safetensors");
    let tensors: Vec<_> =
        read_safetensors(&file).into_iter().filter(|(n, _)| n != "model.layers.1.mlp.up_proj.weight").collect();
    write_safetensors(&file, &tensors);
    assert_fails(&model, &[], &["model.layers.1.mlp.up_proj.weight", "not found"]);
}

/// EXAONE MoE's multi-token prediction module (`mtp.*`, which transformers skips on load) is
/// left unread; any other tensor nobody reads still fails the build, naming it.
#[test]
fn exaone_moe_prediction_module_is_unread_other_extras_fail() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-exaone_moe", &model);
    let file = model.join("model.safetensors");
    let mut tensors = read_safetensors(&file);
    tensors.push(("mtp.layers.0.eh_proj.weight".into(), ("F32".into(), vec![2, 2], vec![0; 16])));
    write_safetensors(&file, &tensors);
    let ok = tailor(&model, &dir.path().join("pkg"), &[]);
    assert!(ok.status.success(), "{}", ok.stderr);
    tensors.push(("model.layers.0.mlp.extra.weight".into(), ("F32".into(), vec![2], vec![0; 8])));
    write_safetensors(&file, &tensors);
    assert_fails(&model, &[], &["model.layers.0.mlp.extra.weight"]);
}

/// A weight beyond f16's range in an f16 build is refused, naming the checkpoint's tensor and
/// the dtypes that hold it, and nothing is left (the f32 build of the same checkpoint works,
/// and so does an f16 build of a weight just inside the range).
#[test]
fn a_weight_beyond_f16s_range_is_refused_in_an_f16_build() {
    let with_value = |dir: &Path, value: f32| {
        let model = dir.join(format!("model-{value}"));
        copy_fixture("tiny-llama", &model);
        let file = model.join("model.safetensors");
        let mut tensors = read_safetensors(&file);
        let (_, (dtype, _, bytes)) = tensors.iter_mut().find(|(n, _)| n == "model.layers.1.mlp.down_proj.weight").unwrap();
        assert_eq!(dtype, "F32");
        bytes[40..44].copy_from_slice(&value.to_le_bytes());
        write_safetensors(&file, &tensors);
        model
    };
    let dir = tempfile::tempdir().unwrap();
    let model = with_value(dir.path(), -70000.0);
    assert_fails(&model, &["--dtype", "f16"], &["model.layers.1.mlp.down_proj.weight", "-70000", "65504", "--dtype f32"]);
    let ok = tailor(&model, &dir.path().join("f32"), &["--dtype", "f32"]);
    assert!(ok.status.success(), "{}", ok.stderr);
    let inside = with_value(dir.path(), 65504.0);
    let ok = tailor(&inside, &dir.path().join("f16"), &["--dtype", "f16"]);
    assert!(ok.status.success(), "{}", ok.stderr);
}

#[test]
fn mis_shaped_tensor_names_both_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-llama", &model);
    let file = model.join("model.safetensors");
    let mut tensors = read_safetensors(&file);
    for (name, (_, shape, bytes)) in &mut tensors {
        if name == "model.layers.0.self_attn.k_proj.weight" {
            // [32, 64] -> [16, 64]: half the rows.
            *shape = vec![16, 64];
            bytes.truncate(16 * 64 * 4);
        }
    }
    write_safetensors(&file, &tensors);
    assert_fails(&model, &[], &["model.safetensors", "model.layers.0.self_attn.k_proj.weight", "[16, 64]", "[32, 64]"]);
}

#[test]
fn truncated_safetensors_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-llama", &model);
    let file = model.join("model.safetensors");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    assert_fails(&model, &[], &["model.safetensors", "truncated or corrupt"]);
    // Cut inside the 8-byte length prefix, and an empty file.
    std::fs::write(&file, &bytes[..5]).unwrap();
    assert_fails(&model, &[], &["model.safetensors"]);
    std::fs::write(&file, b"").unwrap();
    assert_fails(&model, &[], &["model.safetensors"]);
}

#[test]
fn corrupt_safetensors_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-llama", &model);
    let file = model.join("model.safetensors");
    let mut bytes = std::fs::read(&file).unwrap();
    for b in &mut bytes[8..40] {
        *b = 0xff;
    }
    std::fs::write(&file, &bytes).unwrap();
    assert_fails(&model, &[], &["model.safetensors", "not a valid safetensors file"]);
    // A header length far beyond the file.
    bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(&file, &bytes).unwrap();
    assert_fails(&model, &[], &["model.safetensors"]);
}

#[test]
fn shard_index_naming_a_missing_shard() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-llama-sharded", &model);
    std::fs::remove_file(model.join("model-00002-of-00003.safetensors")).unwrap();
    assert_fails(&model, &[], &["model.safetensors.index.json", "model-00002-of-00003.safetensors"]);
}

/// A bad `weight_map` entry is reported as what the index says and what is wrong with it,
/// not as a missing tensor.
#[test]
fn bad_weight_map_entries_say_what_the_index_says() {
    let shard = |i: usize| format!("model-0000{i}-of-00003.safetensors");
    let edits: Vec<(Value, Vec<String>)> = vec![
        // A tensor mapped to a shard that lacks it (its own shard is then named by no entry).
        (
            serde_json::json!({"lm_head.weight": shard(1)}),
            vec![format!("maps tensor `lm_head.weight` to shard `{}`, which does not hold it", shard(1)), format!("it is in `{}`, which the index names for no tensor", shard(3))],
        ),
        // A tensor no shard holds.
        (serde_json::json!({"model.bogus": shard(1)}), vec![format!("maps tensor `model.bogus` to shard `{}`, which does not hold it (no shard the index names holds it)", shard(1))]),
        // A shard that does not exist, one outside the folder, and a value that is no file name.
        (serde_json::json!({"lm_head.weight": "model-00004-of-00003.safetensors"}), vec!["maps `lm_head.weight` to shard `model-00004-of-00003.safetensors`, which does not exist".into()]),
        (serde_json::json!({"lm_head.weight": "../model.safetensors"}), vec!["maps `lm_head.weight` to shard `../model.safetensors`, which is not a file name".into()]),
        (serde_json::json!({"lm_head.weight": 5}), vec!["maps tensor `lm_head.weight` to 5, which is not a shard file name".into()]),
    ];
    for (edit, expect) in edits {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("model");
        copy_fixture("tiny-llama-sharded", &model);
        let path = model.join("model.safetensors.index.json");
        let mut index: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        for (k, v) in edit.as_object().unwrap() {
            index["weight_map"][k] = v.clone();
        }
        std::fs::write(&path, serde_json::to_vec(&index).unwrap()).unwrap();
        let mut expect: Vec<&str> = expect.iter().map(String::as_str).collect();
        expect.push("model.safetensors.index.json");
        assert_fails(&model, &[], &expect);
        let r = tailor(&model, &dir.path().join("pkg"), &[]);
        assert!(!r.stderr.contains("not found in the checkpoint"), "{edit}: {}", r.stderr);
    }
    // A tensor the index lists no shard for: missing, and the message says where it is.
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-llama-sharded", &model);
    let path = model.join("model.safetensors.index.json");
    let mut index: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    index["weight_map"].as_object_mut().unwrap().remove("lm_head.weight");
    std::fs::write(&path, serde_json::to_vec(&index).unwrap()).unwrap();
    assert_fails(&model, &[], &["`lm_head.weight` not found", "model.safetensors.index.json maps no shard to it", &format!("it is in `{}`", shard(3))]);
}

#[test]
fn unsupported_dtype_lists_the_supported_ones() {
    assert_fails(&fixture("tiny-llama"), &["--dtype", "f64"], &["f64", "f32", "f16", "bf16"]);
    assert_fails(&fixture("tiny-llama"), &["--dtype", "int4"], &["int4", "f32, f16, bf16"]);
}

#[test]
fn non_empty_output_without_force_is_refused_and_untouched() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("pkg");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep.txt"), b"mine").unwrap();
    let before = snapshot(&out);
    let r = tailor(&fixture("tiny-llama"), &out, &[]);
    assert!(!r.status.success(), "{}", r.stderr);
    assert!(r.stderr.contains("not a tailor package") && r.stderr.contains("--force"), "{}", r.stderr);
    assert!(r.stderr.contains(&out.display().to_string()), "message names the folder: {}", r.stderr);
    assert_eq!(snapshot(&out), before);
    let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("pkg")]);
}

/// The same checkpoint builds once the input is fixed: the cases above fail for their stated
/// reason, not because the harness cannot build at all.
#[test]
fn a_good_checkpoint_builds() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("pkg");
    let r = tailor(&fixture("tiny-llama"), &out, &[]);
    assert!(r.status.success(), "{}", r.stderr);
    assert!(out.join("model.onnx").is_file());
}

/// An (EP, dtype) pair no table lists is refused before any weight is read: the checkpoint
/// here has a corrupt weights file, and the message is about the pair, naming those that exist.
#[test]
fn unknown_ep_dtype_pair_is_refused_before_reading_weights() {
    let root = tempfile::tempdir().unwrap();
    let model = root.path().join("model");
    copy_fixture("tiny-llama", &model);
    std::fs::write(model.join("model.safetensors"), b"not a safetensors file").unwrap();
    assert_fails(&model, &["--ep", "cuda", "--dtype", "f32"], &["(cuda, f32)", "cpu/f32", "cuda/f16", "default/f32"]);
}

/// A cpu build reports what its rules did: one line per rule on stderr, per-node records with
/// `--explain`, JSON on stdout with `--diag-format json`, and build_report.json in the package.
#[test]
fn cpu_build_reports_its_rules() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("pkg");
    let r = tailor(&fixture("tiny-llama"), &out, &["--ep", "cpu", "--explain", "--diag-format", "json"]);
    assert!(r.status.success(), "{}", r.stderr);
    let output = Command::new(env!("CARGO_BIN_EXE_tailor"))
        .args(["build", "--ep", "cpu", "--force", "--diag-format", "json", "--model"])
        .arg(fixture("tiny-llama"))
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success());
    let json: Value = serde_json::from_slice(&output.stdout).expect("--diag-format json prints JSON on stdout");
    let rules = json["parts"][0]["diagnostics"]["rules"].as_array().unwrap();
    let gqa = rules.iter().find(|r| r["rule"] == "fuse.gqa_rotary").expect("fuse.gqa_rotary reported");
    assert_eq!(gqa["fired"], 2);
    assert_eq!(gqa["candidates"], 2);

    let text = tailor(&fixture("tiny-llama"), &out, &["--ep", "cpu", "--force", "--explain"]);
    assert!(text.status.success(), "{}", text.stderr);
    assert!(text.stderr.contains("fuse.skip_rms_norm") && text.stderr.contains("candidates=5 fired=4"), "{}", text.stderr);
    assert!(text.stderr.contains("failed match.sum"), "explain shows the failed step: {}", text.stderr);

    let report: Value = serde_json::from_str(&std::fs::read_to_string(out.join("build_report.json")).unwrap()).unwrap();
    assert_eq!(report["ep"], "cpu");
    assert_eq!(report["dtype"], "f32");
    assert_eq!(report["parts"][0]["validation"]["ok"], true);
    let config: Value = serde_json::from_str(&std::fs::read_to_string(out.join("genai_config.json")).unwrap()).unwrap();
    assert_eq!(config["search"]["past_present_share_buffer"], true, "GQA shares the KV buffer");
}

/// A write that fails midway (here a file-size limit, `ulimit -f`) is a clear error naming the
/// file, with a non-zero exit and nothing left behind, not a crash by signal.
#[test]
fn a_failing_write_is_reported_and_leaves_nothing() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("pkg");
    let script = "ulimit -f 64 && exec \"$0\" build --model \"$1\" --output \"$2\"";
    let r = Command::new("sh")
        .args(["-c", script, env!("CARGO_BIN_EXE_tailor")])
        .arg(fixture("tiny-llama"))
        .arg(&out)
        .output()
        .expect("run sh");
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "exits with an error, not a signal: {stderr}");
    assert!(stderr.contains("model.onnx.data") && stderr.contains("too large"), "names the file and the cause: {stderr}");
    let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "nothing left behind: {left:?}");
}

/// An activation no EP table runs is refused by the config reader, naming the key and the
/// supported values, before the build announces a graph.
#[test]
fn unsupported_activation_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let model = with_config(dir.path(), |c| {
        c.insert("hidden_act".into(), Value::String("mish".into()));
    });
    assert_fails(&model, &[], &["config.json", "`hidden_act`", "mish", "silu", "gelu_pytorch_tanh"]);
    let r = tailor(&model, &dir.path().join("pkg"), &[]);
    assert!(!r.stderr.contains("building"), "no graph is announced: {}", r.stderr);
}

/// A family this tool does not build is refused before "building X graph" is printed.
#[test]
fn unsupported_family_is_refused_before_progress_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let model = with_config(dir.path(), |c| {
        c.insert("model_type".into(), Value::String("mamba".into()));
    });
    let r = tailor(&model, &dir.path().join("pkg"), &[]);
    assert_eq!(r.status.code(), Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("`mamba`") && !r.stderr.contains("building mamba"), "{}", r.stderr);
}

/// `rope_scaling` without a type would drop its factor in silence; transformers refuses it.
#[test]
fn rope_scaling_without_a_type_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = with_config(dir.path(), |c| {
        c.insert("rope_scaling".into(), serde_json::json!({"factor": 4.0}));
    });
    assert_fails(&model, &[], &["config.json", "`rope_scaling`", "rope_type", "factor"]);
}

/// A position count too large to build is an error naming the key, exit status 1, never an
/// aborted allocation.
#[test]
fn huge_position_count_is_refused_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let model = with_config(dir.path(), |c| {
        c.insert("max_position_embeddings".into(), serde_json::json!(2147483648u64));
    });
    let r = tailor(&model, &dir.path().join("pkg"), &[]);
    assert_eq!(r.status.code(), Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("`max_position_embeddings` (2147483648)"), "{}", r.stderr);
    assert_fails(&model, &[], &["max_position_embeddings"]);
}

/// GPT-2's values are named by GPT-2's keys.
#[test]
fn gpt2_values_are_named_by_gpt2_keys() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-gpt2", &model);
    let path = model.join("config.json");
    let mut config: serde_json::Map<String, Value> = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let heads = config["n_head"].as_u64().unwrap();
    config.insert("n_embd".into(), serde_json::json!(heads * 16 + 1));
    std::fs::write(&path, serde_json::to_vec(&config).unwrap()).unwrap();
    assert_fails(&model, &[], &["`n_embd`", "`n_head`"]);
}

/// `--threads` beyond the limit is refused by the argument parser, naming the limit.
#[test]
fn thread_count_is_bounded() {
    let root = tempfile::tempdir().unwrap();
    let r = tailor(&fixture("tiny-llama"), &root.path().join("pkg"), &["--threads", "100000"]);
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("limit is 64"), "{}", r.stderr);
    assert!(listing(root.path()).is_empty());
}

/// A number too large for its flag, or for any integer type, is called too large and the
/// message gives the limit; one that is no number at all is called that.
#[test]
fn too_large_numbers_are_called_too_large_with_the_limit() {
    let huge = "99999999999999999999";
    let cases: [(&[&str], &[&str]); 5] = [
        (&["--threads", huge], &["too large", "the limit is 64 threads"]),
        (&["--quant", "int4", "--block-size", huge], &["too large", "a power of two from 16 to 256"]),
        (&["--kv-cache", "static", "--max-length", huge], &["too large", "at most the checkpoint's max_position_embeddings"]),
        (&["--quant", "int4", "--accuracy-level", huge], &["too large", "4 (int8)"]),
        (&["--threads", "x"], &["`x` is not a thread count", "from 0 to 64"]),
    ];
    for (args, expect) in cases {
        let root = tempfile::tempdir().unwrap();
        let r = tailor(&fixture("tiny-llama"), &root.path().join("pkg"), args);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", r.stderr);
        for e in expect {
            assert!(r.stderr.contains(e), "{args:?}: message lacks `{e}`: {}", r.stderr);
        }
        assert!(!r.stderr.contains("positive integer"), "{args:?}: {}", r.stderr);
    }
    // In config.json: past u32 and past u64 (which JSON parsers read as a float).
    for (value, shown) in [("5000000000", "5000000000"), (huge, "1e+20")] {
        let dir = tempfile::tempdir().unwrap();
        let model = with_config(dir.path(), |c| {
            c.insert("intermediate_size".into(), Value::String("HUGE".into()));
        });
        let path = model.join("config.json");
        let text = std::fs::read_to_string(&path).unwrap().replace("\"HUGE\"", value);
        std::fs::write(&path, text).unwrap();
        assert_fails(&model, &[], &["config.json", "`intermediate_size`", &format!("is too large: at most 4294967295, found {shown}")]);
    }
    let dir = tempfile::tempdir().unwrap();
    let model = with_config(dir.path(), |c| {
        c.insert("intermediate_size".into(), serde_json::json!(0));
    });
    assert_fails(&model, &[], &["`intermediate_size` must be a positive integer, found 0"]);
}

/// `--ep` accepts exactly the builtin EP tables: `--help` lists each one with its ONNX Runtime
/// provider, and an unknown EP is refused by the argument parser naming them all.
#[test]
fn ep_values_are_the_builtin_tables() {
    let sets = ep_sets::EpSets::builtin().unwrap();
    let help = Command::new(env!("CARGO_BIN_EXE_tailor")).args(["build", "--help"]).output().unwrap();
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    for name in sets.names() {
        let provider = &sets.get(name).unwrap().provider;
        let listed = help.lines().any(|l| l.trim_start().starts_with(&format!("- {name}:")) && l.trim_end().ends_with(provider.as_str()));
        assert!(listed, "--help lacks `- {name}: {provider}`:\n{help}");
    }
    let root = tempfile::tempdir().unwrap();
    let r = tailor(&fixture("tiny-llama"), &root.path().join("pkg"), &["--ep", "no-such-ep"]);
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
    for name in sets.names() {
        assert!(r.stderr.contains(name), "the refusal lacks `{name}`: {}", r.stderr);
    }
    assert!(listing(root.path()).is_empty());
}

/// A weights file that is not a regular file is an error saying what it is, naming it, never
/// skipped in favour of another file.
#[test]
fn weights_that_are_not_regular_files_are_named() {
    type Make<'a> = &'a dyn Fn(&Path);
    let cases: [(&str, Make, &str); 3] = [
        ("dangling link", &|p| std::os::unix::fs::symlink(p.with_file_name("gone.blob"), p).unwrap(), "symbolic link"),
        ("folder", &|p| std::fs::create_dir(p).unwrap(), "is a folder"),
        ("fifo", &|p| make_fifo(p), "FIFO"),
    ];
    for (what, make, expect) in cases {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("model");
        copy_fixture("tiny-llama", &model);
        let weights = model.join("model.safetensors");
        // Keep a valid copy under another name: the old fallback would have read it.
        std::fs::rename(&weights, model.join("other.safetensors")).unwrap();
        make(&weights);
        let r = tailor(&model, &dir.path().join("pkg"), &[]);
        assert_eq!(r.status.code(), Some(1), "{what}: {}", r.stderr);
        assert!(r.stderr.contains("model.safetensors") && r.stderr.contains(expect), "{what}: {}", r.stderr);
    }
}

fn make_fifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success());
}

/// A FIFO config.json would block a read forever: it is refused at once.
#[test]
fn fifo_config_does_not_hang() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-llama", &model);
    std::fs::remove_file(model.join("config.json")).unwrap();
    make_fifo(&model.join("config.json"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailor"))
        .args(["build", "--model"])
        .arg(&model)
        .arg("--output")
        .arg(dir.path().join("pkg"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("tailor hangs on a FIFO config.json");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("config.json") && stderr.contains("FIFO"), "{stderr}");
}

/// Missing tokenizer files: a warning naming them and saying genai will not load the
/// package, recorded in the report; an error under --strict.
#[test]
fn missing_tokenizer_files_warn_or_fail_under_strict() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-llama", &model);
    std::fs::remove_file(model.join("tokenizer_config.json")).unwrap();
    std::fs::remove_file(model.join("tokenizer.json")).unwrap();
    std::os::unix::fs::symlink(model.join("nowhere.json"), model.join("tokenizer.json")).unwrap();
    let out = dir.path().join("pkg");
    let r = tailor(&model, &out, &[]);
    assert!(r.status.success(), "{}", r.stderr);
    assert!(r.stderr.contains("warning:") && r.stderr.contains("tokenizer_config.json"), "{}", r.stderr);
    assert!(r.stderr.contains("onnxruntime-genai will not load"), "{}", r.stderr);
    assert!(r.stderr.contains("tokenizer.json is a symbolic link"), "the dangling link is named: {}", r.stderr);
    let report: Value = serde_json::from_slice(&std::fs::read(out.join("build_report.json")).unwrap()).unwrap();
    assert_eq!(report["tokenizer"]["genai_loadable"], false);
    assert!(report["warnings"].as_array().unwrap().len() >= 2, "{report}");

    let strict = dir.path().join("strict");
    let r = tailor(&model, &strict, &["--strict"]);
    assert_eq!(r.status.code(), Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("--strict") && r.stderr.contains("tokenizer_config.json"), "{}", r.stderr);
    assert!(!strict.exists());

    let full = tailor(&fixture("tiny-llama"), &dir.path().join("full"), &["--strict"]);
    assert!(full.status.success() && !full.stderr.contains("warning"), "{}", full.stderr);
}

/// A warning the pipeline raises (the webgpu table's GroupQueryAttention supports right
/// padding only) fails a --strict build too, before anything is written.
#[test]
fn pipeline_warnings_fail_under_strict() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pkg");
    let r = tailor(&fixture("tiny-llama"), &out, &["--ep", "webgpu"]);
    assert!(r.status.success() && r.stderr.contains("left padding is unsupported"), "{}", r.stderr);
    let strict = dir.path().join("strict");
    let r = tailor(&fixture("tiny-llama"), &strict, &["--ep", "webgpu", "--strict"]);
    assert_eq!(r.status.code(), Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("--strict") && r.stderr.contains("left padding is unsupported"), "{}", r.stderr);
    assert!(!strict.exists(), "nothing is written");
}

/// A closed stdout and stderr (`tailor ... 2>&1 | head -c 10`) is never a panic, and the
/// package is still written: here both are pipes whose reading end is closed before the build
/// starts, so every write fails (EPIPE), whatever the timing.
#[test]
fn closed_pipes_do_not_stop_a_build() {
    let dir = tempfile::tempdir().unwrap();
    for (i, args) in [&["--explain", "--ep", "cpu"][..], &["--diag-format", "json"][..]].into_iter().enumerate() {
        let out = dir.path().join(format!("pkg{i}"));
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let status = Command::new(env!("CARGO_BIN_EXE_tailor"))
            .args(["build", "--model"])
            .arg(fixture("tiny-llama"))
            .arg("--output")
            .arg(&out)
            .args(args)
            .stdout(writer.try_clone().unwrap())
            .stderr(writer)
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(0), "tailor {args:?} exits 0 with its pipes closed");
        assert!(out.join("model.onnx").is_file() && out.join("build_report.json").is_file());
    }
}

/// A plain build reports the rules that could have fired: those that fired, and those with a
/// candidate that matched the pattern and failed a named check. A rule whose candidates all
/// failed a pattern line (fold.tied_head_gemm on an untied model, MoE stacks included) is left
/// out, and so are pattern-line failures of the rules shown; `--explain` reports everything.
#[test]
fn a_plain_build_reports_only_rules_that_could_have_fired() {
    for (model, ep) in [("tiny-llama", "default"), ("tiny-llama", "cpu"), ("tiny-mixtral", "default")] {
        let dir = tempfile::tempdir().unwrap();
        let r = tailor(&fixture(model), &dir.path().join("pkg"), &["--ep", ep]);
        assert!(r.status.success(), "{}", r.stderr);
        assert!(!r.stderr.contains("fold.tied_head_gemm"), "{model} {ep}: {}", r.stderr);
        assert!(!r.stderr.contains("failed match."), "{model} {ep}: pattern-line failures are not shown: {}", r.stderr);
        assert!(!r.stderr.contains("candidates=0"), "{model} {ep}: {}", r.stderr);
        let r = tailor(&fixture(model), &dir.path().join("pkg"), &["--ep", ep, "--force", "--explain"]);
        assert!(r.stderr.contains("fold.tied_head_gemm  main_graph  candidates="), "{model} {ep}: --explain reports every rule: {}", r.stderr);
        assert!(r.stderr.contains("failed match.t"), "{model} {ep}: {}", r.stderr);
    }
    let dir = tempfile::tempdir().unwrap();
    let r = tailor(&fixture("tiny-llama"), &dir.path().join("pkg"), &["--ep", "cpu"]);
    assert!(r.stderr.contains("fuse.skip_rms_norm  main_graph  candidates=5 fired=4  [decoder]"), "fired rules stay: {}", r.stderr);
    // A named check that failed on an instance is what a plain build is for.
    let r = tailor(&fixture("tiny-phi3-partial"), &dir.path().join("pkg2"), &["--ep", "cpu"]);
    assert!(r.status.success(), "{}", r.stderr);
    assert!(r.stderr.contains("fuse.gqa_rotary") && r.stderr.contains("failed partial_rotary_cpu"), "{}", r.stderr);
}

/// `--explain` prints each candidate's record once.
#[test]
fn explain_prints_each_record_once() {
    let dir = tempfile::tempdir().unwrap();
    let r = tailor(&fixture("tiny-llama"), &dir.path().join("pkg"), &["--ep", "cpu", "--explain"]);
    assert!(r.status.success(), "{}", r.stderr);
    let fired: Vec<&str> = r.stderr.lines().filter(|l| l.contains("fuse.gqa_rotary") && l.contains("fired")).collect();
    assert_eq!(fired.iter().filter(|l| !l.contains("candidates=")).count(), 2, "one record per layer: {}", r.stderr);
}

/// `--diag-format json` names the EP and dtype, and prints a document on failure too.
#[test]
fn json_diagnostics_on_success_and_failure() {
    let dir = tempfile::tempdir().unwrap();
    let run = |model: &Path, out: &Path| {
        let o = Command::new(env!("CARGO_BIN_EXE_tailor"))
            .args(["build", "--ep", "cpu", "--diag-format", "json", "--model"])
            .arg(model)
            .arg("--output")
            .arg(out)
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)));
        (o.status.code(), doc)
    };
    let (code, doc) = run(&fixture("tiny-llama"), &dir.path().join("ok"));
    assert_eq!(code, Some(0));
    assert_eq!((doc["ep"].as_str(), doc["dtype"].as_str(), doc["ok"].as_bool()), (Some("cpu"), Some("f32"), Some(true)));
    assert!(doc["parts"][0]["diagnostics"]["rules"].is_array() && doc["error"].is_null());
    let bad = with_config(dir.path(), |c| {
        c.insert("hidden_act".into(), Value::String("mish".into()));
    });
    let (code, doc) = run(&bad, &dir.path().join("bad"));
    assert_eq!(code, Some(1));
    assert_eq!((doc["ok"].as_bool(), doc["ep"].as_str()), (Some(false), Some("cpu")));
    assert!(doc["error"].as_str().unwrap().contains("hidden_act"), "{doc}");
}

/// A task the checkpoint cannot be built as, an unknown task, and `--quant` on an encoder are
/// refused with what to do instead, before any weight is read, and leave nothing behind.
#[test]
fn encoder_task_mistakes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bert = dir.path().join("bert");
    copy_fixture("tiny-bert", &bert);
    assert_fails(&bert, &["--task", "causal-lm"], &["is an encoder", "--task feature-extraction"]);
    assert_fails(&bert, &["--task", "sentence-embedding"], &["modules.json", "--task feature-extraction"]);
    assert_fails(&bert, &["--quant", "int4", "--ep", "cpu"], &["--quant", "feature-extraction", "not quantized"]);
    assert_fails(&bert, &["--task", "translation"], &["unknown task `translation`", "causal-lm, feature-extraction, sentence-embedding"]);
    let llama = with_config(dir.path(), |_| {});
    assert_fails(&llama, &["--task", "feature-extraction"], &["is a decoder", "--task causal-lm"]);
}

/// An encoder package: built with the default task, no genai_config.json, a note saying why,
/// and the report's task and role.
#[test]
fn an_encoder_package_has_no_genai_config() {
    let dir = tempfile::tempdir().unwrap();
    let bert = dir.path().join("bert");
    copy_fixture("tiny-bert", &bert);
    let out = dir.path().join("pkg");
    let r = tailor(&bert, &out, &["--ep", "cpu"]);
    assert!(r.status.success(), "{}", r.stderr);
    assert!(r.stderr.contains("genai_config.json is not written") && r.stderr.contains("[encoder]"), "{}", r.stderr);
    assert!(!out.join("genai_config.json").exists());
    let report: Value = serde_json::from_slice(&std::fs::read(out.join("build_report.json")).unwrap()).unwrap();
    assert_eq!((report["task"].as_str(), report["parts"][0]["role"].as_str(), report["genai_config"].as_bool()), (Some("feature-extraction"), Some("encoder"), Some(false)));
    // --force replaces it: its report lists exactly the files it holds.
    let r = tailor(&bert, &out, &["--ep", "default", "--force"]);
    assert!(r.status.success(), "{}", r.stderr);
}

/// genai_config.json's provider entry is the EP table's `[ep.genai]` (name and options), and the
/// build report says where the options come from; cpu and default write none.
#[test]
fn provider_options_come_from_the_tables() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-llama", &model);
    let sets = ep_sets::EpSets::builtin().unwrap();
    for ep in sets.names() {
        let table = sets.get(ep).unwrap();
        let out = dir.path().join(format!("pkg-{ep}"));
        let r = tailor(&model, &out, &["--ep", ep]);
        assert!(r.status.success(), "{ep}: {}", r.stderr);
        let config: Value = serde_json::from_slice(&std::fs::read(out.join("genai_config.json")).unwrap()).unwrap();
        let given = &config["model"]["decoder"]["session_options"]["provider_options"];
        let report = std::fs::read_to_string(out.join("build_report.json")).unwrap();
        match table.genai_provider_options() {
            None => assert_eq!(given, &serde_json::json!([]), "{ep}"),
            Some(p) => {
                let options: serde_json::Map<String, Value> = p.options.iter().map(|(k, v)| (k.clone(), Value::from(v.as_str()))).collect();
                assert_eq!(given, &serde_json::json!([{ p.name.clone(): options }]), "{ep}");
                assert!(report.contains(&format!("provider_options `{}` come from {ep}.toml", p.name)), "{ep}: {report}");
            }
        }
    }
    // The values the genai builder writes by default, with their sources in the tables.
    let cuda = sets.get("cuda").unwrap().genai_provider_options().unwrap();
    assert_eq!(cuda.options.get("enable_cuda_graph").map(String::as_str), Some("0"));
    let trt = sets.get("trt-rtx").unwrap().genai_provider_options().unwrap();
    assert_eq!(trt.options.get("enable_cuda_graph").map(String::as_str), Some("1"));
    assert!(trt.source.as_deref().is_some_and(|s| s.contains("base.py")));
}
