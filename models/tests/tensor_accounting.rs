//! For every decoder fixture: each checkpoint tensor is taken exactly once (fused tensors are
//! taken once and split by Slice recipes; a tied embedding is taken once and read by both the
//! Gather and the lm_head recipes) or is listed as intentionally unused with a reason, and
//! every recipe in the graph names a tensor that exists in the checkpoint, in the file it
//! claims.

use models::{tasks::causal_lm, BuildOptions, Checkpoint};
use std::collections::BTreeMap;
#[path = "../../tests/registry/mod.rs"]
mod fixture_registry;
use fixture_registry::fixture;


fn check(name: &str) {
    let ckpt = Checkpoint::open(&fixture(name)).unwrap();
    let model = causal_lm::build(&ckpt, &BuildOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let taken = ckpt.taken();
    let unused = ckpt.unused();
    let read_at_build = ckpt.read_at_build();
    for tensor in ckpt.tensor_names() {
        match (taken.get(tensor), unused.get(tensor)) {
            (Some(1), None) => {}
            (None, Some(reason)) => assert!(!reason.trim().is_empty(), "{name}: `{tensor}` unused without a reason"),
            (t, u) => panic!("{name}: tensor `{tensor}` taken {t:?} times, unused reason {u:?}"),
        }
    }
    // Every source a recipe reads is a checkpoint tensor with that file, dtype and shape.
    let mut readers: BTreeMap<String, usize> = BTreeMap::new();
    for (init, recipe) in &model.graph.initializers {
        for src in recipe.sources() {
            assert!(ckpt.has(&src.name), "{name}: initializer `{init}` reads `{}`, not in the checkpoint", src.name);
            assert!(src.file.path.starts_with(fixture(name)), "{name}: `{}` read from {}", src.name, src.file.path.display());
            *readers.entry(src.name.clone()).or_default() += 1;
        }
    }
    for tensor in ckpt.tensor_names() {
        let n = readers.get(tensor).copied().unwrap_or(0);
        if unused.contains_key(tensor) {
            assert_eq!(n, 0, "{name}: `{tensor}` is listed unused but {n} recipes read it");
        } else if let Some(why) = read_at_build.get(tensor) {
            // A number read when the graph was built (xIELU's scalars): no recipe reads it.
            assert!(n == 0 && !why.trim().is_empty(), "{name}: `{tensor}` read at build time ({why}) and by {n} recipes");
        } else {
            assert!(n >= 1, "{name}: `{tensor}` was taken but no initializer recipe reads it");
        }
    }
}

/// Every decoder of the fixture registry; all are checked and every failure is listed.
#[test]
fn every_decoder_fixture_accounts_for_its_tensors() {
    let decoders = fixture_registry::decoders();
    let failed: Vec<String> = decoders
        .iter()
        .filter_map(|name| {
            std::panic::catch_unwind(|| check(name)).err().map(|p| {
                let why = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
                format!("{name}: {}", why.unwrap_or_default())
            })
        })
        .collect();
    assert!(failed.is_empty(), "{} of {} decoder fixtures fail:\n{}", failed.len(), decoders.len(), failed.join("\n"));
}

/// A tensor the table does not expect (here, a q_proj bias in a config without
/// `attention_bias`) fails the build and is named, instead of being silently dropped.
#[test]
fn an_unexpected_tensor_fails_the_build() {
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("tiny-qwen2");
    std::fs::copy(src.join("model.safetensors"), dir.path().join("model.safetensors")).unwrap();
    let config = std::fs::read_to_string(src.join("config.json")).unwrap().replace("\"qwen2\"", "\"llama\"");
    std::fs::write(dir.path().join("config.json"), config).unwrap();
    let ckpt = Checkpoint::open(dir.path()).unwrap();
    let e = causal_lm::build(&ckpt, &BuildOptions::default()).unwrap_err().to_string();
    assert!(e.contains("model.layers.0.self_attn.k_proj.bias") && e.contains("attention_bias"), "{e}");
}

/// The expert count comes from config.json: a config that counts fewer experts than the
/// checkpoint holds fails at the router (its `[experts, hidden]` shape), and one that counts
/// more fails naming the first missing expert tensor; every expert weight of a matching
/// config is read once (the fixture loop above).
#[test]
fn a_config_that_miscounts_the_experts_fails_naming_the_tensor() {
    let with_experts = |key: &str, from: &str, to: &str| {
        let dir = tempfile::tempdir().unwrap();
        let src = fixture(key);
        std::fs::copy(src.join("model.safetensors"), dir.path().join("model.safetensors")).unwrap();
        let config = std::fs::read_to_string(src.join("config.json")).unwrap().replace(from, to);
        assert_ne!(config, std::fs::read_to_string(src.join("config.json")).unwrap(), "{key}: `{from}` not in config.json");
        std::fs::write(dir.path().join("config.json"), config).unwrap();
        let ckpt = Checkpoint::open(dir.path()).unwrap();
        causal_lm::build(&ckpt, &BuildOptions::default()).map(|_| ()).unwrap_err().to_string()
    };
    let e = with_experts("tiny-mixtral", "\"num_local_experts\": 4", "\"num_local_experts\": 3");
    assert!(e.contains("model.layers.0.block_sparse_moe.gate.weight") && e.contains("[3, 64]"), "{e}");
    let e = with_experts("tiny-qwen3-moe", "\"num_local_experts\": 4", "\"num_local_experts\": 5");
    assert!(e.contains("model.layers.0.mlp.gate.weight") && e.contains("[5, 64]"), "{e}");
    let e = with_experts("tiny-qwen3-moe", "\"moe_intermediate_size\": 64", "\"moe_intermediate_size\": 32");
    assert!(e.contains("model.layers.0.mlp.experts.0.gate_proj.weight") && e.contains("[32, 64]"), "{e}");
}
