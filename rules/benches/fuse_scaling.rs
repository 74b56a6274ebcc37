//! How the fuse stage scales with graph size: tiny-llama's generic graph at 8 and 64 layers
//! (weights copied from layer 0 of the fixture into a temporary checkpoint), the three fusion
//! rules applied, best-of-N wall time per size, and the ratio. Linear growth gives about 8.
//!
//! Run: `cargo bench -p rules --bench fuse_scaling` (optionally `-- <repeats>`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const RULES: &[&str] = &["fuse.gqa_rotary", "fuse.gqa", "fuse.skip_rms_norm"];

#[path = "../../tests/registry/mod.rs"]
mod fixture_registry;

fn fixture() -> PathBuf {
    fixture_registry::fixture("tiny-llama")
}

/// A copy of tiny-llama with `layers` layers, every layer holding layer 0's weights.
fn checkpoint(layers: usize, dir: &Path) {
    let src = fixture();
    let mut config: serde_json::Value = serde_json::from_slice(&std::fs::read(src.join("config.json")).unwrap()).unwrap();
    config["num_hidden_layers"] = layers.into();
    std::fs::write(dir.join("config.json"), serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    let bytes = std::fs::read(src.join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut out: Vec<(String, safetensors::tensor::TensorView)> = Vec::new();
    for (name, view) in st.tensors() {
        if let Some(rest) = name.strip_prefix("model.layers.0.") {
            for l in 0..layers {
                out.push((format!("model.layers.{l}.{rest}"), view.clone()));
            }
        } else if !name.starts_with("model.layers.") {
            out.push((name, view));
        }
    }
    safetensors::serialize_to_file(out, None, &dir.join("model.safetensors")).unwrap();
}

fn generic(layers: usize) -> (tempfile::TempDir, ir::Model) {
    let dir = tempfile::tempdir().unwrap();
    checkpoint(layers, dir.path());
    let ckpt = models::Checkpoint::open(dir.path()).unwrap();
    let model = models::tasks::causal_lm::build(&ckpt, &models::BuildOptions::default()).unwrap();
    (dir, model)
}

fn best_time(model: &ir::Model, repeats: usize) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut fired = 0;
    for _ in 0..repeats {
        let mut m = model.clone();
        let t = Instant::now();
        let report = rules::apply(&mut m, RULES, &rules::Options::default()).unwrap();
        best = best.min(t.elapsed());
        fired = RULES.iter().map(|r| report.fired(r)).sum();
    }
    (best, fired)
}

fn main() {
    let repeats: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(7);
    let (_d8, m8) = generic(8);
    let (_d64, m64) = generic(64);
    let (t8, f8) = best_time(&m8, repeats);
    let (t64, f64_) = best_time(&m64, repeats);
    println!("fuse stage, best of {repeats}:");
    println!("   8 layers: {:>6} nodes  {:>9.3} ms  fired {f8}", m8.graph.nodes.len(), t8.as_secs_f64() * 1e3);
    println!("  64 layers: {:>6} nodes  {:>9.3} ms  fired {f64_}", m64.graph.nodes.len(), t64.as_secs_f64() * 1e3);
    println!("  ratio 64/8: {:.2} (linear = 8.0)", t64.as_secs_f64() / t8.as_secs_f64());
}
