//! Package-level properties: a saved model reloads to the same graph and bytes, builds are
//! deterministic, the layout of model.onnx.data is aligned, and unused recipes are not written.

use builder::{build, BuildRequest};
use ir::TextOptions;
use std::path::Path;
use tailor_tests::fixture;

fn build_into(out: &Path) {
    let req = BuildRequest::new(fixture("tiny-llama"), out.to_path_buf());
    build(&req, &mut |_| {}).expect("build succeeds");
}

#[test]
fn saved_model_reloads_to_the_same_graph_and_bytes() {
    let ckpt = models::Checkpoint::open(&fixture("tiny-llama")).unwrap();
    let built = models::tasks::causal_lm::build(&ckpt, &models::BuildOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    ir::save_model(&built, dir.path(), "model.onnx").unwrap();
    let loaded = ir::load_model(&dir.path().join("model.onnx")).unwrap();
    let opts = TextOptions { recipes: false };
    assert_eq!(ir::canonical_text(&built, opts), ir::canonical_text(&loaded, opts));
    assert_eq!(ir::initializer_digests(&built).unwrap(), ir::initializer_digests(&loaded).unwrap());
}

/// Saving a loaded model over the files it reads its weights from is refused (its data file
/// is mapped while the new one is written), and the files stay as they were.
#[test]
fn saving_a_model_over_its_own_data_file_is_refused() {
    let ckpt = models::Checkpoint::open(&fixture("tiny-llama")).unwrap();
    let built = models::tasks::causal_lm::build(&ckpt, &models::BuildOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    ir::save_model(&built, dir.path(), "model.onnx").unwrap();
    let before = std::fs::read(dir.path().join("model.onnx.data")).unwrap();
    let loaded = ir::load_model(&dir.path().join("model.onnx")).unwrap();
    let err = ir::save_model(&loaded, dir.path(), "model.onnx").unwrap_err().to_string();
    assert!(err.contains("model.onnx.data") && err.contains("another folder"), "{err}");
    assert!(std::fs::read(dir.path().join("model.onnx.data")).unwrap() == before, "the data file is untouched");
    // Into another folder it works, and reads back the same bytes.
    let other = tempfile::tempdir().unwrap();
    ir::save_model(&loaded, other.path(), "model.onnx").unwrap();
    assert!(std::fs::read(other.path().join("model.onnx.data")).unwrap() == before);
}

#[test]
fn two_builds_are_byte_identical() {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    build_into(&a);
    build_into(&b);
    for file in ["model.onnx", "model.onnx.data", "genai_config.json", "tokenizer.json"] {
        let (x, y) = (std::fs::read(a.join(file)).unwrap(), std::fs::read(b.join(file)).unwrap());
        assert!(x == y, "{file} differs between two builds of the same input");
    }
}

#[test]
fn external_data_is_aligned_and_unused_recipes_are_not_written() {
    let ckpt = models::Checkpoint::open(&fixture("tiny-llama")).unwrap();
    let mut model = models::tasks::causal_lm::build(&ckpt, &models::BuildOptions::default()).unwrap();
    // A recipe no node reads: it must be reported and never materialized (its source is bogus).
    model.graph.initializers.push((
        "unused".into(),
        ir::Recipe::from_f32("unused", vec![4096], &vec![1.0; 4096]).reshape(vec![3]),
    ));
    let dir = tempfile::tempdir().unwrap();
    let report = ir::save_model(&model, dir.path(), "model.onnx").unwrap();
    assert_eq!(report.unused_initializers, vec!["unused".to_string()]);
    let loaded = ir::load_model(&dir.path().join("model.onnx")).unwrap();
    assert!(loaded.graph.initializer("unused").is_none());
    let mut external = 0;
    for (name, r) in &loaded.graph.initializers {
        if let ir::Recipe::Source(t) = r {
            external += 1;
            assert_eq!(t.offset % ir::DATA_ALIGNMENT as usize, 0, "{name} at offset {}", t.offset);
        }
    }
    assert_eq!(external, report.external_tensors);
    assert!(external >= 17, "every weight matrix goes to model.onnx.data, found {external}");
}

#[test]
fn output_is_byte_identical_with_one_and_two_writer_threads() {
    let ckpt = models::Checkpoint::open(&fixture("tiny-llama")).unwrap();
    let model = models::tasks::causal_lm::build(&ckpt, &models::BuildOptions::default()).unwrap();
    let root = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for threads in [1, 2] {
        let dir = root.path().join(format!("t{threads}"));
        std::fs::create_dir(&dir).unwrap();
        // A small block size splits every weight into many blocks and transposes into bands.
        let opts = ir::WriteOptions { threads, block_bytes: 4096, direct: true, flush_every: 8192, progress: None };
        ir::save_model_with(&model, &dir, "model.onnx", opts).unwrap();
        files.push((std::fs::read(dir.join("model.onnx")).unwrap(), std::fs::read(dir.join("model.onnx.data")).unwrap()));
    }
    assert!(files[0] == files[1], "model.onnx / model.onnx.data differ between 1 and 2 writer threads");
    let whole = tempfile::tempdir().unwrap();
    ir::save_model_with(&model, whole.path(), "model.onnx", ir::WriteOptions { threads: 1, block_bytes: 1 << 30, direct: false, flush_every: 0, progress: None }).unwrap();
    assert!(std::fs::read(whole.path().join("model.onnx.data")).unwrap() == files[0].1, "block size changes the bytes");
}
