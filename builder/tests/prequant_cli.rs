//! Pre-quantized checkpoints through the real `tailor` binary: formats the tool cannot keep
//! exact are refused by their config key before anything is written; `--quant` is refused
//! with the checkpoint's settings; the float layers take --quant-lm-head; the report,
//! `inspect` and `diff` say what the package was imported from.

mod common;

use common::*;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A copy of pre-quantized fixture `name` in `dir/model`, its `quantization_config` edited.
fn with_quant_config(dir: &Path, name: &str, edit: impl FnOnce(&mut Map<String, Value>)) -> PathBuf {
    let model = dir.join("model");
    copy_fixture(name, &model);
    let mut config: Map<String, Value> = serde_json::from_slice(&std::fs::read(model.join("config.json")).unwrap()).unwrap();
    edit(config.get_mut("quantization_config").and_then(Value::as_object_mut).expect("a pre-quantized fixture"));
    std::fs::write(model.join("config.json"), serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    model
}

fn set(key: &'static str, value: Value) -> impl FnOnce(&mut Map<String, Value>) {
    move |q| {
        q.insert(key.into(), value);
    }
}

/// A config edit.
type Edit = Box<dyn FnOnce(&mut Map<String, Value>)>;

#[test]
fn formats_that_cannot_stay_exact_are_refused_by_key() {
    let cases: Vec<(&str, Edit, Vec<&str>)> = vec![
        ("tiny-llama-gptq", Box::new(set("quant_method", "compressed-tensors".into())), vec!["quant_method` is `compressed-tensors`", "only gptq, awq (GEMM) and mxfp4"]),
        ("tiny-llama-gptq", Box::new(set("quant_method", "fp8".into())), vec!["`fp8`", "FP8"]),
        ("tiny-llama-gptq", Box::new(set("quant_method", "mxfp4".into())), vec!["a GPTQ/AWQ tensor", "says mxfp4"]),
        ("tiny-llama-gptq", Box::new(set("quant_method", "bitsandbytes".into())), vec!["`bitsandbytes`"]),
        ("tiny-llama-gptq", Box::new(set("quant_method", "made-up".into())), vec!["`made-up`", "only gptq, awq (GEMM) and mxfp4"]),
        (
            "tiny-llama-gptq",
            Box::new(|q: &mut Map<String, Value>| {
                q.clear();
                q.insert("load_in_4bit".into(), true.into());
            }),
            vec!["`bitsandbytes`"],
        ),
        ("tiny-llama-gptq", Box::new(|q: &mut Map<String, Value>| drop(q.remove("quant_method"))), vec!["quant_method` is missing"]),
        ("tiny-llama-gptq", Box::new(set("bits", 3.into())), vec!["bits` is 3", "4- and 8-bit"]),
        ("tiny-llama-gptq", Box::new(set("bits", 2.into())), vec!["bits` is 2"]),
        ("tiny-llama-gptq", Box::new(set("checkpoint_format", "marlin".into())), vec!["checkpoint_format` is `marlin`", "gptq_v2"]),
        ("tiny-llama-gptq", Box::new(set("is_marlin_format", true.into())), vec!["is_marlin_format` is true"]),
        ("tiny-llama-gptq", Box::new(set("pack_dtype", "int16".into())), vec!["pack_dtype` is `int16`"]),
        ("tiny-llama-gptq", Box::new(set("dynamic", serde_json::json!({"-:.*down_proj.*": {}}))), vec!["dynamic`", "per-module overrides"]),
        ("tiny-llama-gptq", Box::new(set("group_size", 0.into())), vec!["group_size` is 0"]),
        ("tiny-qwen2-awq", Box::new(set("version", "gemv".into())), vec!["version` is `gemv`", "GEMM"]),
        ("tiny-qwen2-awq", Box::new(set("version", "exllama".into())), vec!["version` is `exllama`"]),
        ("tiny-qwen2-awq", Box::new(set("backend", "llm-awq".into())), vec!["backend` is `llm-awq`"]),
        ("tiny-qwen2-awq", Box::new(set("zero_point", false.into())), vec!["zero_point` is false"]),
        ("tiny-qwen2-awq", Box::new(set("bits", 8.into())), vec!["bits` is 8", "4-bit"]),
    ];
    for (name, edit, expect) in cases {
        let dir = tempfile::tempdir().unwrap();
        let model = with_quant_config(dir.path(), name, edit);
        let mut expect = expect;
        expect.push("config.json");
        fails(&model, &["--ep", "cpu"], &expect);
    }
}

#[test]
fn packed_tensors_without_a_config_and_a_config_that_lies_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = with_quant_config(dir.path(), "tiny-llama-gptq", |_| {});
    let mut config: Map<String, Value> = serde_json::from_slice(&std::fs::read(model.join("config.json")).unwrap()).unwrap();
    config.remove("quantization_config");
    std::fs::write(model.join("config.json"), serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    fails(&model, &["--ep", "cpu"], &["no quantization_config", ".qweight"]);
    // sym: true over asymmetric zero points: the tensor is named.
    let dir = tempfile::tempdir().unwrap();
    let model = with_quant_config(dir.path(), "tiny-llama-gptq-asym", set("sym", true.into()));
    fails(&model, &["--ep", "cpu"], &["qzeros", "sym: true"]);
    // A group size the scales do not have.
    let dir = tempfile::tempdir().unwrap();
    let model = with_quant_config(dir.path(), "tiny-llama-gptq", set("group_size", 16.into()));
    fails(&model, &["--ep", "cpu"], &["group size 16", "qzeros"]);
}

#[test]
fn quant_is_refused_and_float_layers_take_the_role_flags() {
    let model = fixture("tiny-llama-gptq");
    fails(&model, &["--ep", "cpu", "--quant", "int4"], &["--quant int4", "already quantized", "GPTQ v1, 4 bits, group 32, symmetric", "--quant-lm-head"]);
    fails(&model, &["--ep", "cuda", "--quant", "int8", "--quant-lm-head", "int8"], &["already quantized"]);
    // The role flags on a float checkpoint need --quant.
    fails(&fixture("tiny-llama"), &["--ep", "cpu", "--quant-lm-head", "int8"], &["this checkpoint is float", "--quant int4"]);
    fails(&fixture("tiny-llama"), &["--ep", "cpu", "--accuracy-level", "0"], &["this checkpoint is float"]);
    // The import keeps the table's accuracy-level rules.
    fails(&model, &["--ep", "default", "--accuracy-level", "4"], &["no accuracy level"]);
    fails(&model, &["--ep", "trt-rtx", "--quant-embeddings", "int4"], &["embedding_gather_dequantize_linear", "--quant-embeddings none"]);
    // trt-rtx does not gather DequantizeLinear rows (embedding_gather_dequantize_linear unset).
    fails(&fixture("tiny-llama"), &["--ep", "trt-rtx", "--quant", "int4", "--quant-embeddings", "int8"], &["embedding_gather_dequantize_linear", "--quant-embeddings none"]);

    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("pkg");
    let r = tailor(&model, &out, &["--ep", "cpu", "--quant-lm-head", "int8", "--block-size", "64"]);
    assert!(r.status.success(), "{}", r.stderr);
    let report: Value = serde_json::from_slice(&std::fs::read(out.join("build_report.json")).unwrap()).unwrap();
    let q = &report["parts"][0]["quantization"];
    assert_eq!((q["accuracy_level"].as_i64(), q["lm_head"].as_str(), q["embeddings"].as_str()), (Some(4), Some("int8"), Some("none")), "{q}");
    assert_eq!(q["float_roles"]["block_size"], 64);
    assert_eq!(q["source"]["format"], "gptq");
    let tensors = q["tensors"].as_array().unwrap();
    let head: Vec<&Value> = tensors.iter().filter(|t| t["weight"] == "lm_head.weight").collect();
    assert_eq!(head.len(), 1, "{q}");
    assert_eq!((head[0]["source"].as_str(), head[0]["bits"].as_u64(), head[0]["block_size"].as_u64()), (Some("float"), Some(8), Some(64)));
    assert!(tensors.iter().filter(|t| t["weight"] != "lm_head.weight").all(|t| t["source"] == "gptq" && t["block_size"] == 32 && t["method"] == "imported"), "{q}");
}

fn tailor_cmd(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tailor")).args(args).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Two imports of one checkpoint file, from two folders: the same model for `diff`; `inspect`
/// names the source format and counts the tensors by source.
#[test]
fn inspect_names_the_source_and_diff_sees_one_model() {
    let dir = tempfile::tempdir().unwrap();
    let (m1, m2) = (dir.path().join("one"), dir.path().join("two"));
    copy_fixture("tiny-qwen2-awq", &m1);
    copy_fixture("tiny-qwen2-awq", &m2);
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for (m, out) in [(&m1, &a), (&m2, &b)] {
        let r = tailor(m, out, &["--ep", "cpu"]);
        assert!(r.status.success(), "{}", r.stderr);
    }
    let (code, text, err) = tailor_cmd(&["diff".as_ref(), a.as_os_str(), b.as_os_str()]);
    assert_eq!(code, Some(0), "{text}{err}");
    assert!(text.starts_with("same model"), "{text}");
    let (code, text, err) = tailor_cmd(&["inspect".as_ref(), a.as_os_str()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(text.contains("source: pre-quantized AWQ GEMM, 4 bits, group 32, asymmetric") && text.contains("10 from awq_gemm"), "{text}");
    let (_, json, _) = tailor_cmd(&["inspect".as_ref(), a.as_os_str(), "--json".as_ref()]);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["parts"][0]["quantization"]["source"]["format"], "awq_gemm");
    assert_eq!(v["parts"][0]["quantization"]["tensor_sources"]["awq_gemm"], 10, "{}", v["parts"][0]["quantization"]);
}

/// A config that says MXFP4 over float experts (gpt-oss's float fixture) is refused on every
/// table, before anything is written: the weights do not match the config.
#[test]
fn an_mxfp4_config_over_float_experts_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_fixture("tiny-gpt-oss", &model);
    let mut config: Map<String, Value> = serde_json::from_slice(&std::fs::read(model.join("config.json")).unwrap()).unwrap();
    config.insert(
        "quantization_config".into(),
        serde_json::json!({"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}),
    );
    std::fs::write(model.join("config.json"), serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    for ep in ["cpu", "default", "cuda"] {
        fails(&model, &["--ep", ep], &["quant_method: mxfp4", "no MXFP4 tensors", "config.json"]);
    }
}

/// A GGUF file's quantized (symmetric Q8_0) table keeps its integers where the EP has no
/// GatherBlockQuantized too: on dml its rows are read from the head's MatMulNBits bytes with
/// standard ops; on `default` they are gathered from the head's DequantizeLinear data. No
/// float copy either way.
#[test]
fn a_gguf_table_follows_what_the_ep_can_gather() {
    let gguf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/data/gguf-gemma/tiny-gemma.Q.gguf");
    let root = tempfile::tempdir().unwrap();
    let report = |ep: &str| -> Value {
        let out = root.path().join(ep);
        let r = tailor(&gguf, &out, &["--ep", ep]);
        assert!(r.status.success(), "{ep}: {}", r.stderr);
        serde_json::from_slice(&std::fs::read(out.join("build_report.json")).unwrap()).unwrap()
    };
    for ep in ["dml", "default"] {
        let report = report(ep);
        let q = &report["parts"][0]["quantization"];
        assert!(q["kept_float"].as_array().unwrap().is_empty(), "{ep}: {q}");
        let table = q["tensors"].as_array().unwrap().iter().find(|t| t["weight"] == "model.embed_tokens.weight").expect("the table is quantized");
        assert!(table["ops"].as_array().unwrap().iter().any(|o| o.as_str().unwrap().contains("(Gather)")), "{ep}: {table}");
    }
    // A Q4_K table (with a min) on webgpu, whose Gather takes no uint8 bytes: its symmetric
    // codes through GatherBlockQuantized and the rows' offsets added after it (the build used
    // to fail validation on the bytes' Gather). The values: test_gguf_kquants.py (cpu).
    let kquants = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/data/gguf_kquants.gguf");
    let out = root.path().join("webgpu-kquants");
    let r = tailor(&kquants, &out, &["--ep", "webgpu"]);
    assert!(r.status.success(), "{}", r.stderr);
    let report: Value = serde_json::from_slice(&std::fs::read(out.join("build_report.json")).unwrap()).unwrap();
    let q = &report["parts"][0]["quantization"];
    assert!(q["kept_float"].as_array().unwrap().is_empty(), "{q}");
    let table = q["tensors"].as_array().unwrap().iter().find(|t| t["weight"] == "model.embed_tokens.weight").expect("the table is quantized");
    assert!(table["ops"].to_string().contains("(GatherBlockQuantized)"), "{table}");
}
