//! Pins the generic graph of tiny-llama: the canonical attention, rotary and norm subgraphs the
//! rules are written against (see docs/generic-graph.md).

use models::{tasks::causal_lm, BuildOptions, Checkpoint};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(name)
}

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
