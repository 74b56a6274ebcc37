//! Shared by the rules tests: the foundation's tiny-llama generic graph.

#![allow(dead_code)]

#[path = "../../../tests/registry/mod.rs"]
mod fixture_registry;
pub use fixture_registry::fixture;

pub fn tiny_llama() -> ir::Model {
    let ckpt = models::Checkpoint::open(&fixture("tiny-llama")).expect("tiny-llama fixture");
    models::tasks::causal_lm::build(&ckpt, &models::BuildOptions::default()).expect("generic graph builds")
}

pub fn count(model: &ir::Model, op: &str) -> usize {
    model.graph.nodes.iter().filter(|n| n.op == op).count()
}
