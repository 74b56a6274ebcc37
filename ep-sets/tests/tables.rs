//! The builtin tables parse, validate, and encode the decisions of issue 7.

use std::collections::BTreeMap;

use ep_sets::{Claim, DType, EpSets, Error, Stage};

fn sets() -> EpSets {
    EpSets::builtin().unwrap_or_else(|e| panic!("builtin tables are invalid:\n{e}"))
}

fn types(pairs: &[(&str, &str)]) -> BTreeMap<String, DType> {
    pairs.iter().map(|(k, v)| (k.to_string(), DType::parse(v).unwrap())).collect()
}

fn ids(list: &[ep_sets::RuleRef]) -> Vec<&str> {
    list.iter().map(|r| r.id.as_str()).collect()
}

#[test]
fn builtin_tables_parse_and_validate() {
    let s = sets();
    for name in s.names() {
        assert!(s.get(name).unwrap().validate().is_empty());
    }
}

/// The builtin set is exactly the tables folder: a table added to `tables/` is compiled in
/// without a list to edit (build.rs), and nothing is compiled in that the folder lacks.
#[test]
fn builtin_tables_are_exactly_the_tables_folder() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tables");
    let mut in_folder: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|f| f.ends_with(".toml"))
        .collect();
    in_folder.sort();
    let s = sets();
    let mut builtin: Vec<String> = s.names().map(|n| s.get(n).unwrap().file.clone()).collect();
    builtin.sort();
    assert_eq!(builtin, in_folder, "EpSets::builtin() must hold one table per file in {dir}");
    let mut stems: Vec<&str> = in_folder.iter().map(|f| f.trim_end_matches(".toml")).collect();
    stems.sort();
    assert_eq!(s.names().collect::<Vec<_>>(), stems, "each builtin EP is named after its file");
    assert!(s.get("default").is_some(), "the CLI's default EP is a builtin table");
}

#[test]
fn load_dir_reads_the_same_tables() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tables");
    let s = EpSets::load_dir(dir).unwrap();
    assert_eq!(s.pairs().len(), sets().pairs().len());
}

#[test]
fn unknown_pair_is_refused_naming_the_pairs_that_exist() {
    let s = sets();
    let err = s.plan("cuda", DType::F32).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::UnknownPair { .. }));
    assert!(msg.contains("cuda/f16") && msg.contains("cpu/f32") && msg.contains("webgpu/f32"), "{msg}");
    assert!(s.plan("cuda", DType::BF16).is_ok());
    assert!(s.plan("nope", DType::F16).is_err());
}

#[test]
fn default_is_standard_onnx_only() {
    let s = sets();
    let t = s.get("default").unwrap();
    for (domain, op, _) in t.ops() {
        assert_eq!(domain, "", "default claims {domain}.{op}");
        assert_ne!(op, "SimplifiedLayerNormalization");
    }
    let p = t.dtype(DType::F32).unwrap();
    assert!(p.stage(Stage::Fuse).is_empty());
    assert!(p.forbids("com.microsoft", "GroupQueryAttention").is_some());
    assert!(t.claims("", "Attention", 24, &types(&[("T1", "f32"), ("T2", "f32"), ("U", "bool")])).is_yes());
    assert!(t.genai_provider_options().is_none());
}

#[test]
fn cpu_f32_requires_gqa_rotary_and_skip_rms_norm() {
    let s = sets();
    let t = s.get("cpu").unwrap();
    let p = t.dtype(DType::F32).unwrap();
    assert!(p.is_required("fuse.gqa_rotary") && p.is_required("fuse.skip_rms_norm"));
    assert!(p.runs("fuse.pack_qkv") && !p.is_required("fuse.pack_qkv"));
    assert_eq!(ids(p.stage(Stage::Prefuse)), ["lower.if_to_where"]);
    assert!(t.dtype(DType::F16).is_none());
    assert!(t.genai_provider_options().is_none());
    // Facts read from the ORT 1.32.0 CPU registry.
    let gqa = types(&[("T", "f32"), ("M", "i32")]);
    assert!(t.claims("com.microsoft", "GroupQueryAttention", 1, &gqa).is_yes());
    assert!(t.claims("com.microsoft", "GroupQueryAttention", 1, &types(&[("T", "f16"), ("M", "i32")])).is_yes());
    assert!(!t.claims("com.microsoft", "GroupQueryAttention", 1, &types(&[("T", "bf16")])).is_yes());
    assert!(t.claims("com.microsoft", "SkipSimplifiedLayerNormalization", 1, &types(&[("T", "f32")])).is_yes());
    assert!(t.claims("ai.onnx", "RotaryEmbedding", 24, &types(&[("T", "f16"), ("M", "i64")])).is_yes());
    assert!(!t.claims("", "RotaryEmbedding", 22, &types(&[("T", "f32")])).is_yes());
    assert!(!t.claims("", "MatMul", 24, &types(&[("T", "f16")])).is_yes());
}

#[test]
fn claim_no_names_what_is_claimed() {
    let s = sets();
    let t = s.get("cuda").unwrap();
    match t.claims("com.microsoft", "GroupQueryAttention", 1, &types(&[("T", "f32")])) {
        Claim::No { reason } => {
            assert!(reason.contains("T=[bf16, f16]") && reason.contains("T=f32"), "{reason}");
        }
        Claim::Yes { .. } => panic!("CUDA GQA has no float kernel"),
    }
    match t.claims("", "NoSuchOp", 24, &BTreeMap::new()) {
        Claim::No { reason } => assert!(reason.contains("no kernel for NoSuchOp"), "{reason}"),
        Claim::Yes { .. } => panic!(),
    }
}

/// cuda runs the cpu fusions but the ones it excludes with a why (fuse.moe in bf16: the kernel
/// source read routes bf16 logits through its float path).
#[test]
fn cuda_f16_and_bf16_use_the_cpu_fusions() {
    let s = sets();
    let t = s.get("cuda").unwrap();
    let cpu = s.get("cpu").unwrap().dtype(DType::F32).unwrap();
    for d in [DType::F16, DType::BF16] {
        let p = t.dtype(d).unwrap();
        let shared: Vec<&str> = ids(cpu.stage(Stage::Fuse)).into_iter().filter(|r| t.excluded(r, d).is_none()).collect();
        assert_eq!(ids(p.stage(Stage::Fuse)), shared, "{d}");
        // fuse.moe runs on f16 (its variant fuse.moe.f16 takes the f32-routed f16 block); bf16
        // keeps the dense block, excluded with the kernel source that says why.
        if d == DType::BF16 {
            assert!(t.excluded("fuse.moe", d).is_some_and(|e| e.why.contains("moe.cc")), "{d}: the exclusion names its source");
        } else {
            assert!(t.excluded("fuse.moe", d).is_none() && p.runs("fuse.moe"), "{d}: fuse.moe listed");
        }
        assert_eq!(ids(&p.required), ids(&cpu.required));
    }
    assert_eq!(t.genai_provider_options().unwrap().name, "cuda");
    // The MoE claim fuse.moe.f16 relies on: f16 registered, its source named and marked unrun.
    match t.claims("com.microsoft", "MoE", 1, &types(&[("T", "f16")])) {
        Claim::Yes { kernel } => assert!(kernel.source.contains("moe.cc") && kernel.source.contains("unverified on a GPU"), "{}", kernel.source),
        Claim::No { reason } => panic!("cuda claims no f16 MoE: {reason}"),
    }
    assert!(t.claims("", "Flatten", 24, &types(&[("T", "f16")])).is_yes(), "fuse.moe's router_probs Flatten");
}

#[test]
fn dml_keeps_rope_separate_and_qkv_unpacked() {
    let s = sets();
    let t = s.get("dml").unwrap();
    let p = t.dtype(DType::F16).unwrap();
    assert!(p.runs("fuse.gqa") && !p.runs("fuse.gqa_rotary"));
    assert!(p.stage(Stage::Lower).iter().any(|r| r.id == "lower.separate_rope"));
    assert!(!p.runs("fuse.pack_qkv") && t.excluded("fuse.pack_qkv", DType::F16).is_some());
    assert!(p.forbids("", "If").is_some());
    assert!(t.claims("com.microsoft", "RotaryEmbedding", 1, &types(&[("T", "f16"), ("M", "i64")])).is_yes());
    assert!(!t.claims("", "RotaryEmbedding", 24, &types(&[("T", "f16")])).is_yes());
}

#[test]
fn webgpu_lowers_int64_and_fixes_dims() {
    let s = sets();
    let t = s.get("webgpu").unwrap();
    for d in [DType::F16, DType::F32] {
        let p = t.dtype(d).unwrap();
        assert!(p.is_required("fuse.gqa_rotary"));
        assert!(p.stage(Stage::Lower).iter().any(|r| r.id == "lower.int64_to_int32"));
        assert!(p.has_flag("concrete_dims"));
        assert!(p.forbids("ai.onnx", "If").is_some());
        assert!(p.limits.contains_key("max_context"));
    }
    assert_eq!(t.flags(DType::F16), ["concrete_dims"]);
}

#[test]
fn trt_rtx_has_no_skip_norms() {
    let s = sets();
    let t = s.get("trt-rtx").unwrap();
    for d in [DType::F16, DType::BF16] {
        let p = t.dtype(d).unwrap();
        assert!(p.forbids("com.microsoft", "SkipSimplifiedLayerNormalization").is_some());
        assert!(p.forbids("com.microsoft", "SkipLayerNormalization").is_some());
        assert!(!p.runs("fuse.skip_rms_norm") && !p.runs("fuse.skip_layer_norm"));
        assert!(p.forbids("", "If").is_some());
        assert!(p.runs("fuse.gqa_rotary") || p.runs("fuse.gqa"));
    }
    assert_eq!(t.genai_provider_options().unwrap().name, "NvTensorRtRtx");
}

#[test]
fn if_to_where_precedes_every_gqa_fusion() {
    let s = sets();
    for (ep, d) in s.pairs() {
        let p = s.get(ep).unwrap().dtype(d).unwrap();
        if p.runs("fuse.gqa_rotary") || p.runs("fuse.gqa") {
            assert!(p.stage(Stage::Prefuse).iter().any(|r| r.id == "lower.if_to_where"), "{ep}/{d}");
        }
    }
}

#[test]
fn no_table_fuses_what_it_later_decomposes() {
    let s = sets();
    for (ep, d) in s.pairs() {
        let p = s.get(ep).unwrap().dtype(d).unwrap();
        for (fusion, lowering) in ep_sets::UNDOES {
            assert!(!(p.runs(fusion) && p.runs(lowering)), "{ep}/{d}: {fusion} then {lowering}");
        }
    }
}

#[test]
fn every_claim_has_a_source() {
    let s = sets();
    for ep in s.names() {
        for (_, _, kernels) in s.get(ep).unwrap().ops() {
            assert!(kernels.iter().all(|k| !k.source.trim().is_empty()));
        }
    }
}
