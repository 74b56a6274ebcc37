//! Pins the generic graph of tiny-llama: the canonical attention, rotary and norm subgraphs the
//! rules are written against (see docs/generic-graph.md).

use models::{tasks::causal_lm, BuildOptions, Checkpoint};
#[path = "../../tests/registry/mod.rs"]
mod fixture_registry;
use fixture_registry::fixture;


#[test]
fn tiny_llama_generic_graph() {
    let ckpt = Checkpoint::open(&fixture("tiny-llama")).unwrap();
    let model = causal_lm::build(&ckpt, &BuildOptions::default()).unwrap();
    assert!(model.graph.nodes.iter().all(|n| n.domain.is_empty() && n.opset == ir::OPSET), "standard ONNX only");
    insta::assert_snapshot!(ir::canonical_text(&model, ir::TextOptions { recipes: true }));
}

#[test]
fn every_checkpoint_tensor_is_consumed_once() {
    let ckpt = Checkpoint::open(&fixture("tiny-llama")).unwrap();
    causal_lm::build(&ckpt, &BuildOptions::default()).unwrap();
    let taken = ckpt.taken();
    for name in ckpt.tensor_names() {
        assert_eq!(taken.get(name), Some(&1), "tensor `{name}` consumed {:?} times", taken.get(name));
    }
}

/// The other structural variants rules are written against: fused Phi-3 weights split by
/// Slice recipes plus the LongRoPE `If`, Qwen3's per-head q/k norm, GPT-2's learned positions,
/// LayerNorm and Gelu, Mistral's sliding-window mask, and the families' variants: Gemma's
/// `offset[+1]` norm weights and embedding scale, Granite's multipliers, OLMo2's post-norms and
/// whole-projection q/k norms, StarCoder2's LayerNorm and biases, Gemma 2's sandwich norms and
/// softcaps, Gemma 3's local RoPE, and partial rotary.
#[test]
fn variant_generic_graphs() {
    for name in [
        "tiny-phi3-longrope",
        "tiny-qwen3",
        "tiny-gpt2",
        "tiny-mistral-sw",
        "tiny-gemma",
        "tiny-granite",
        "tiny-olmo2",
        "tiny-starcoder2",
        "tiny-gemma2",
        "tiny-gemma3",
        "tiny-phi3-partial",
        "tiny-smollm3",
        "tiny-olmo",
        "tiny-ernie4_5",
        "tiny-nemotron",
        "tiny-phi",
        "tiny-glm",
        "tiny-glm4",
        "tiny-phimoe",
        "tiny-gpt-oss",
    ] {
        let ckpt = Checkpoint::open(&fixture(name)).unwrap();
        let model = causal_lm::build(&ckpt, &BuildOptions::default()).unwrap();
        assert!(model.graph.nodes.iter().all(|n| n.domain.is_empty() && n.opset == ir::OPSET), "standard ONNX only");
        insta::assert_snapshot!(name, ir::canonical_text(&model, ir::TextOptions { recipes: true }));
    }
}
