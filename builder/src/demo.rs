//! The demo checkpoint (tiny-llama: 2 layers, random weights) compiled into the binary, so
//! `tailor build` with no `--model` works from any install.

use crate::{Error, Result};
use std::path::Path;

const FILES: &[(&str, &[u8])] = &[
    ("config.json", include_bytes!("../../tests/fixtures/tiny-llama/config.json")),
    ("generation_config.json", include_bytes!("../../tests/fixtures/tiny-llama/generation_config.json")),
    ("model.safetensors", include_bytes!("../../tests/fixtures/tiny-llama/model.safetensors")),
    ("tokenizer.json", include_bytes!("../../tests/fixtures/tiny-llama/tokenizer.json")),
    ("tokenizer_config.json", include_bytes!("../../tests/fixtures/tiny-llama/tokenizer_config.json")),
];

/// Writes the demo checkpoint's files into `dir`.
pub fn materialize_demo_checkpoint(dir: &Path) -> Result<()> {
    for (name, bytes) in FILES {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|e| Error::io(&path, e))?;
    }
    Ok(())
}
