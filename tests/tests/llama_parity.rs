//! The generic tiny-llama package computes what transformers computes, on ONNX Runtime's CPU EP.

use builder::{build, BuildRequest};
use tailor_tests::*;

#[test]
fn tiny_llama_default_f32_matches_transformers() {
    let out = tempfile::tempdir().unwrap();
    let pkg = out.path().join("pkg");
    let req = BuildRequest::new(fixture("tiny-llama"), pkg.clone());
    build(&req, &mut |_| {}).expect("build succeeds");
    let model = ir::load_model(&pkg.join("model.onnx")).unwrap();
    let shape = DecoderShape::of(&model);
    let mut s = session(&pkg.join("model.onnx"));
    let diffs = compare_decoder(&mut s, &shape, &Reference::load(&fixture("tiny-llama")), Cases::ALL);
    assert_eq!(diffs.len(), 1 + 2 * shape.layers + 4, "every reference case is compared");
    assert_within("tiny-llama default f32", &diffs, 1e-4);
}
