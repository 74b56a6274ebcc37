use crate::{Checkpoint, GraphBuilder, Result};
use ir::Attr;

/// `RMSNormalization(x, weight)` over the last axis (opset 23+, computed in f32 internally:
/// `stash_type` keeps its default of 1).
pub fn rms_norm(b: &mut GraphBuilder, ckpt: &Checkpoint, scope: &str, x: &str, dim: usize, eps: f64) -> Result<String> {
    let recipe = ckpt.tensor(&format!("{scope}.weight"), &[dim])?.cast(b.float);
    let w = b.initializer(&format!("{scope}.weight"), recipe);
    Ok(b.op(
        &format!("{scope}/RMSNormalization"),
        "RMSNormalization",
        &[x, &w],
        vec![Attr::int("axis", -1), Attr::float("epsilon", eps as f32)],
    ))
}
