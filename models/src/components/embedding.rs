use crate::{Checkpoint, GraphBuilder, Result};

/// Token embedding: `Gather(weight, input_ids)` -> [batch, seq, hidden].
pub fn token_embedding(
    b: &mut GraphBuilder,
    ckpt: &Checkpoint,
    weight: &str,
    input_ids: &str,
    vocab: usize,
    hidden: usize,
) -> Result<String> {
    let recipe = ckpt.tensor(weight, &[vocab, hidden])?.cast(b.float);
    let w = b.initializer(weight, recipe);
    let scope = weight.trim_end_matches(".weight");
    Ok(b.op(&format!("{scope}/Gather"), "Gather", &[&w, input_ids], vec![ir::Attr::int("axis", 0)]))
}
