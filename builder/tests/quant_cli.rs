//! `--quant` through the real `tailor` binary: requests a table cannot take are refused before
//! any weight is read, with a message that says what to change; a weight that cannot be
//! quantized is named; exclusions and defaults reach the package.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;

fn report(model: &Path, extra: &[&str]) -> (tempfile::TempDir, Value, String) {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("pkg");
    let r = tailor(model, &out, extra);
    assert!(r.status.success(), "{extra:?}: {}", r.stderr);
    let v: Value = serde_json::from_slice(&std::fs::read(out.join("build_report.json")).unwrap()).unwrap();
    (root, v, r.stderr)
}

#[test]
fn requests_a_table_cannot_take_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-llama", &model);
    fails(&model, &["--ep", "trt-rtx", "--quant", "int8"], &["--quant int8", "trt-rtx", "no [quant.int8] section", "it offers int4"]);
    fails(&model, &["--ep", "cpu", "--quant", "int4", "--block-size", "48"], &["--block-size 48"]);
    fails(&model, &["--ep", "cpu", "--quant", "int4", "--block-size", "512"], &["--block-size 512"]);
    fails(&model, &["--ep", "cpu", "--quant", "int4", "--accuracy-level", "5"], &["--accuracy-level 5"]);
    fails(&model, &["--ep", "default", "--quant", "int4", "--accuracy-level", "4"], &["no accuracy level"]);
    fails(&model, &["--ep", "trt-rtx", "--quant", "int4", "--quant-embeddings", "int4"], &["embedding_gather_dequantize_linear", "--quant-embeddings none"]);
    fails(&model, &["--ep", "cpu", "--quant", "int4", "--quant-exclude", "[a"], &["--quant-exclude `[a`"]);
    fails(&model, &["--ep", "cpu", "--quant", "int3"], &["int3", "int4 or int8"]);
    // Quantization flags need --quant.
    fails(&model, &["--ep", "cpu", "--asymmetric"], &["--quant"]);
}

/// trt-rtx takes no uint4 or uint8 DequantizeLinear data (TensorRT takes only all-zero zero
/// points): `--asymmetric` writes its blocks in the offset form (signed codes against the mid
/// point, each block's offset added after the MatMul), an 8-bit head too, which the report
/// says per tensor; `default` keeps unsigned data with zero points.
#[test]
fn asymmetric_blocks_on_a_table_without_uint4_are_written_as_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-llama", &model);
    for (ep, zero_points) in [("trt-rtx", "offsets"), ("default", "integers")] {
        let (_d, v, _) = report(&model, &["--ep", ep, "--quant", "int4", "--asymmetric", "--quant-lm-head", "int8"]);
        let tensors = v["parts"][0]["quantization"]["tensors"].as_array().unwrap().clone();
        assert!(tensors.iter().any(|t| t["role"] == "lm_head" && t["bits"] == 8), "{ep}: an 8-bit head");
        for t in &tensors {
            assert_eq!((t["symmetric"].as_bool(), t["zero_points"].as_str()), (Some(false), Some(zero_points)), "{ep}: {t}");
        }
    }
}

#[test]
fn an_embedding_whose_rows_do_not_fill_blocks_is_gathered_with_standard_ops_or_named() {
    // tiny-llama's hidden size is 64: a row is part of one block of 128, which
    // GatherBlockQuantized cannot hold. cpu gathers the rows' bytes with standard ops
    // (test_quant.py checks the values); webgpu's Gather takes no uint8, so there the table
    // stays float (the table's default) or is refused (asked for), naming the sizes that fit.
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-llama", &model);
    let (_d, v, _) = report(&model, &["--ep", "cpu", "--quant", "int4", "--block-size", "128"]);
    let q = &v["parts"][0]["quantization"];
    assert_eq!(q["block_size"], 128);
    assert!(q["kept_float"].as_array().unwrap().is_empty(), "{q}");
    let table = q["tensors"].as_array().unwrap().iter().find(|t| t["weight"] == "model.embed_tokens.weight").expect("the table is quantized");
    assert!(table["ops"].to_string().contains("(Gather)"), "{table}");
    let asked = ["--ep", "webgpu", "--quant", "int4", "--block-size", "128", "--quant-embeddings", "int4"];
    fails(&model, &asked, &["model.embed_tokens.weight", "not whole blocks of 128", "--block-size 16, 32 or 64", "T=u8 is not registered", "--quant-embeddings none"]);
    let (_d, v, _) = report(&model, &["--ep", "webgpu", "--quant", "int4", "--block-size", "128"]);
    let kept = v["parts"][0]["quantization"]["kept_float"].as_array().unwrap().clone();
    assert!(kept.iter().any(|k| k["weight"] == "model.embed_tokens.weight" && k["why"].as_str().unwrap().contains("not whole blocks")), "{kept:?}");
}

#[test]
fn an_asymmetric_int4_embedding_of_odd_blocks_is_refused_where_the_table_says_so() {
    // tiny-llama's rows are 64 values: one block of 64 (odd), two of 32 (even).
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-llama", &model);
    let odd = ["--quant", "int4", "--asymmetric", "--block-size", "64"];
    // Asked for explicitly: refused with the ways out.
    fails(
        &model,
        &[&["--ep", "webgpu", "--quant-embeddings", "int4"][..], &odd].concat(),
        &["model.embed_tokens.weight", "1 blocks of 64", "embedding_int4_zero_points_odd_blocks = false", "drop --asymmetric", "T=u8 is not registered", "--quant-embeddings none"],
    );
    let quantized_table = |v: &Value| {
        let q = &v["parts"][0]["quantization"];
        q["embeddings"] == "int4" && !q["kept_float"].as_array().unwrap().iter().any(|k| k["weight"] == "model.embed_tokens.weight")
    };
    // From the table's default: the table stays float, with the reason.
    let (_d, v, _) = report(&model, &[&["--ep", "webgpu"][..], &odd].concat());
    let kept = v["parts"][0]["quantization"]["kept_float"].as_array().unwrap().clone();
    assert!(kept.iter().any(|k| k["weight"] == "model.embed_tokens.weight" && k["why"].as_str().unwrap().contains("odd number")), "{kept:?}");
    // The same request builds where the table does not say so, and on webgpu with even blocks
    // or without the embedding.
    let (_d, v, _) = report(&model, &[&["--ep", "cpu"][..], &odd].concat());
    assert!(quantized_table(&v), "{}", v["parts"][0]["quantization"]);
    let (_d, v, _) = report(&model, &["--ep", "webgpu", "--quant", "int4", "--asymmetric", "--block-size", "32"]);
    assert!(quantized_table(&v), "{}", v["parts"][0]["quantization"]);
    let (_d, v, _) = report(&model, &[&["--ep", "webgpu"][..], &odd, &["--quant-embeddings", "none"]].concat());
    assert!(!quantized_table(&v));
}

#[test]
fn defaults_come_from_the_table_and_flags_override_them() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-llama", &model);
    let (_d, v, stderr) = report(&model, &["--ep", "cpu", "--quant", "int4"]);
    let q = &v["parts"][0]["quantization"];
    assert_eq!((q["accuracy_level"].as_i64(), q["lm_head"].as_str(), q["embeddings"].as_str()), (Some(4), Some("int4"), Some("int4")));
    assert_eq!(v["dtype"], "f32");
    assert!(stderr.contains("largest weight error") && stderr.contains("package"), "{stderr}");
    let roles: Vec<&str> = q["tensors"].as_array().unwrap().iter().map(|t| t["role"].as_str().unwrap()).collect();
    assert!(roles.contains(&"lm_head") && roles.contains(&"embedding") && roles.contains(&"linear"), "{roles:?}");

    let (_d, v, _) = report(
        &model,
        &["--ep", "cpu", "--quant", "int8", "--quant-lm-head", "none", "--quant-embeddings", "none", "--quant-exclude", "*.down_proj.weight", "--accuracy-level", "0"],
    );
    let q = &v["parts"][0]["quantization"];
    assert_eq!(q["accuracy_level"], 0);
    let weights: Vec<&str> = q["tensors"].as_array().unwrap().iter().map(|t| t["weight"].as_str().unwrap()).collect();
    assert!(!weights.iter().any(|w| w.contains("down_proj") || w.contains("lm_head") || w.contains("embed")), "{weights:?}");
    let kept: Vec<&str> = q["kept_float"].as_array().unwrap().iter().map(|k| k["weight"].as_str().unwrap()).collect();
    assert!(kept.iter().filter(|w| w.contains("down_proj")).count() == 2 && kept.contains(&"lm_head.weight"), "{kept:?}");

    // cuda has no f32 section: its dtype default (f16) lets `--ep cuda` build alone.
    let (_d, v, _) = report(&model, &["--ep", "cuda"]);
    assert_eq!(v["dtype"], "f16");
    let (_d, v, _) = report(&model, &["--ep", "cuda", "--quant", "int4"]);
    assert_eq!((v["dtype"].as_str(), v["parts"][0]["quantization"]["accuracy_level"].as_i64()), (Some("f16"), Some(0)));
}

#[test]
fn help_lists_every_tables_quantization() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tailor")).args(["build", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in ["--quant <BITS>", "cpu int4: matmul_nbits", "default int4: dequantize_linear", "trt-rtx int4: dequantize_linear", "--quant-exclude", "--block-size"] {
        assert!(text.contains(needle), "--help lacks `{needle}`:\n{text}");
    }
}

/// `--model`'s help names every GGUF architecture the import maps (a hand-written list that
/// would drift from models' `GGUF_ARCHITECTURES`).
#[test]
fn help_names_every_gguf_architecture() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tailor")).args(["build", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
    let names: Vec<&str> = models::GGUF_ARCHITECTURES
        .split(", ")
        .flat_map(|s| s.split(" and "))
        .map(|s| s.split(" (").next().unwrap().trim())
        .collect();
    assert!(names.len() >= 14 && names.contains(&"llama") && names.contains(&"smollm3"), "{names:?}");
    for name in names {
        let word = |sep: char| text.contains(&format!(" {name}{sep}"));
        assert!(word(',') || word(' ') || word(':'), "--help does not name GGUF architecture `{name}`:\n{text}");
    }
}

/// A table that keeps the MoE block dense cannot quantize its expert stacks: the build says
/// how many stay float, and the report gives each one's reason.
#[test]
fn float_expert_stacks_of_an_unfused_moe_block_are_a_warning() {
    let (_dir, v, stderr) = report(&fixture("tiny-mixtral"), &["--ep", "default", "--quant", "int4"]);
    let config: Value = serde_json::from_slice(&std::fs::read(fixture("tiny-mixtral").join("config.json")).unwrap()).unwrap();
    let layers = config["num_hidden_layers"].as_u64().unwrap() as usize;
    let kept = v["parts"][0]["quantization"]["kept_float"].as_array().unwrap();
    let stacks: Vec<&Value> = kept.iter().filter(|k| k["why"].as_str().unwrap().starts_with("expert stack of an unfused MoE block")).collect();
    assert_eq!(stacks.len(), 3 * layers, "gate, up and down per layer: {kept:?}");
    assert!(stderr.contains(&format!("{} expert weight stack(s) stay float on default", 3 * layers)), "{stderr}");
}

/// `--quant-exclude` matches the checkpoint's tensor names, also after `fuse.pack_qkv` renamed
/// them: on cpu (which packs q/k/v), excluding q keeps each packed QKV weight float, whole, and
/// the report says why; the package reads them through a float MatMul.
#[test]
fn exclusions_match_checkpoint_names_after_packing() {
    let config: Value = serde_json::from_slice(&std::fs::read(fixture("tiny-llama").join("config.json")).unwrap()).unwrap();
    let layers = config["num_hidden_layers"].as_u64().unwrap() as usize;
    let (dir, v, _) = report(&fixture("tiny-llama"), &["--ep", "cpu", "--quant", "int4", "--quant-exclude", "*.q_proj.weight"]);
    let q = &v["parts"][0]["quantization"];
    let packed: Vec<&Value> = q["kept_float"].as_array().unwrap().iter().filter(|k| k["weight"].as_str().unwrap().ends_with("/packed_weight")).collect();
    assert_eq!(packed.len(), layers, "{}", q["kept_float"]);
    for (layer, k) in packed.iter().enumerate() {
        let why = k["why"].as_str().unwrap();
        let name = |p: &str| format!("model.layers.{layer}.self_attn.{p}_proj.weight");
        assert!(why.contains("`*.q_proj.weight`") && why.contains(&name("q")) && why.contains(&name("k")) && why.contains(&name("v")), "{why}");
        assert!(why.contains("fuse.pack_qkv") && why.contains("all of it stays float"), "{why}");
    }
    let quantized: Vec<&str> = q["tensors"].as_array().unwrap().iter().map(|t| t["weight"].as_str().unwrap()).collect();
    assert!(!quantized.iter().any(|w| w.contains("q_proj") || w.contains("packed")), "{quantized:?}");
    assert!(quantized.iter().any(|w| w.contains("o_proj")), "{quantized:?}");
    // The package: one float MatMul per layer reads each packed weight.
    let onnx = std::fs::read(dir.path().join("pkg/model.onnx")).unwrap();
    let text = String::from_utf8_lossy(&onnx);
    assert!(text.contains("q_proj.weight/packed_weight") && !text.contains("q_proj.weight/packed_weight/quant"), "the packed weight is stored float");
}

/// A pattern that matches no weight is an error that names it and lists the names there are.
#[test]
fn an_exclusion_that_matches_nothing_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-llama", &model);
    fails(
        &model,
        &["--ep", "cpu", "--quant", "int4", "--quant-exclude", "*.down_proj.weight", "--quant-exclude", "*.q_prj.weight"],
        &["--quant-exclude `*.q_prj.weight` matches no weight", "model.layers.*.self_attn.q_proj.weight", "lm_head.weight"],
    );
    // A weight that stays float anyway is still a match (a tied model's head is the embedding).
    let (_d, v, _) = report(&fixture("tiny-qwen2-tied-mqa"), &["--ep", "cpu", "--quant", "int4", "--quant-embeddings", "none", "--quant-exclude", "model.embed_tokens.weight"]);
    assert!(v["parts"][0]["quantization"]["tensors"].as_array().unwrap().iter().all(|t| t["weight"] != "model.embed_tokens.weight"));
    fails(&fixture("tiny-qwen2-tied-mqa"), &["--ep", "cpu", "--quant", "int4", "--quant-exclude", "lm_head.weight"], &["`lm_head.weight` matches no weight", "model.embed_tokens.weight", "--quant-lm-head"]);
}

/// `--quant-method hqq` has float zero points, which neither DequantizeLinear nor a fast
/// MatMulNBits takes: every table writes the codes against the mid point and adds the offsets
/// after the MatMul; on cpu the embedding table is quantized as the
/// table says (GatherBlockQuantized plus the rows' offsets, tests/python/test_hqq_embedding.py),
/// int8 builds too, QMoE stacks stay float with their reason, and the report records the method
/// and every tensor's error.
#[test]
fn hqq_is_written_on_every_table_and_kept_float_where_its_zero_points_have_no_form() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-llama", &model);
    // The DequantizeLinear tables: codes against the mid point, the offsets after the MatMul
    // (values: test_hqq.py).
    for ep in ["default", "trt-rtx"] {
        let (_d, v, _) = report(&model, &["--ep", ep, "--quant", "int4", "--quant-method", "hqq"]);
        let q = &v["parts"][0]["quantization"];
        assert_eq!((q["method"].as_str(), q["format"].as_str()), (Some("hqq"), Some("dequantize_linear")), "{ep}: {q}");
        assert!(q["tensors"].as_array().unwrap().iter().all(|t| t["method"] == "hqq"), "{ep}: {q}");
    }
    for bits in ["int4", "int8"] {
        let (_d, v, _) = report(&model, &["--ep", "cpu", "--quant", bits, "--quant-method", "hqq"]);
        let q = &v["parts"][0]["quantization"];
        assert_eq!((q["method"].as_str(), q["symmetric"].as_bool(), q["embeddings"].as_str()), (Some("hqq"), Some(false), Some(bits)), "{q}");
        let tensors = q["tensors"].as_array().unwrap();
        // The tied table: GatherBlockQuantized of the symmetric codes, the offsets added after.
        assert!(tensors.iter().any(|t| t["role"] == "embedding" && t["ops"].to_string().contains("(GatherBlockQuantized)")), "{q}");
        // Every tensor, also one small enough to be stored inline in model.onnx.
        assert!(tensors.iter().all(|t| t["rms_error"].as_f64().unwrap() > 0.0), "{q}");
    }
    // The GPU tables: GatherBlockQuantized reads the table's symmetric codes and the offsets
    // are added after it (webgpu, cuda; webgpu's build used to fail validation), or the rows'
    // bytes are decoded with standard ops (dml, no GatherBlockQuantized).
    for (ep, op) in [("webgpu", "(GatherBlockQuantized)"), ("cuda", "(GatherBlockQuantized)"), ("dml", "(Gather)")] {
        let (_d, v, _) = report(&model, &["--ep", ep, "--quant", "int4", "--quant-method", "hqq", "--quant-embeddings", "int4"]);
        let q = &v["parts"][0]["quantization"];
        assert!(q["kept_float"].as_array().unwrap().is_empty(), "{ep}: {q}");
        let table = q["tensors"].as_array().unwrap().iter().find(|t| t["role"] == "embedding").expect("the table is quantized");
        assert!(table["ops"].to_string().contains(op), "{ep}: {table}");
    }
    // Rows of 64 values in blocks of 128: not GatherBlockQuantized's, and webgpu's Gather takes
    // no uint8 bytes: the table stays float (the table's default chose it) or, asked for, the
    // build is refused with both reasons.
    let partial = ["--ep", "webgpu", "--quant", "int4", "--quant-method", "hqq", "--block-size", "128"];
    let (_d, v, _) = report(&model, &partial);
    let kept = v["parts"][0]["quantization"]["kept_float"].as_array().unwrap().clone();
    assert!(kept.iter().any(|k| k["weight"] == "model.embed_tokens.weight" && k["why"].as_str().unwrap().contains("not whole blocks of 128")), "{kept:?}");
    fails(&model, &[&partial[..], &["--quant-embeddings", "int4"]].concat(), &["model.embed_tokens.weight", "not whole blocks of 128", "T=u8 is not registered", "--quant-embeddings none"]);
    let (_d, v, _) = report(&fixture("tiny-mixtral"), &["--ep", "cpu", "--quant", "int4", "--quant-method", "hqq"]);
    let kept = v["parts"][0]["quantization"]["kept_float"].as_array().unwrap();
    assert!(kept.iter().any(|k| k["why"].as_str().unwrap().contains("QMoE takes packed integer zero points")), "{kept:?}");
}
