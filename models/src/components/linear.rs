use crate::{Checkpoint, GraphBuilder, Result};
use ir::Recipe;

/// Where a linear layer's weight comes from. Checkpoints store `[out, in]` (torch Linear);
/// the graph uses `MatMul(x, W)` with `W: [in, out]`, so the recipe transposes.
pub struct LinearWeights {
    /// `[in, out]` weight recipe, already in the graph's dtype.
    pub weight: Recipe,
    /// Optional `[out]` bias recipe.
    pub bias: Option<Recipe>,
}

impl LinearWeights {
    /// Reads `{scope}.weight` (`[out, in]`) and, when `bias`, `{scope}.bias`.
    pub fn torch(ckpt: &Checkpoint, b: &GraphBuilder, scope: &str, inp: usize, out: usize, bias: bool) -> Result<Self> {
        let weight = ckpt.tensor(&format!("{scope}.weight"), &[out, inp])?.transpose(vec![1, 0]).cast(b.float);
        let bias = if bias { Some(ckpt.tensor(&format!("{scope}.bias"), &[out])?.cast(b.float)) } else { None };
        Ok(LinearWeights { weight, bias })
    }
}

/// `x @ W (+ bias)`; initializers are named after the checkpoint scope.
pub fn linear(b: &mut GraphBuilder, scope: &str, x: &str, w: LinearWeights) -> String {
    let weight = b.initializer(&format!("{scope}.weight"), w.weight);
    let y = b.op(&format!("{scope}/MatMul"), "MatMul", &[x, &weight], vec![]);
    match w.bias {
        None => y,
        Some(bias) => {
            let bias = b.initializer(&format!("{scope}.bias"), bias);
            b.op(&format!("{scope}/Add"), "Add", &[&y, &bias], vec![])
        }
    }
}
