//! Reusable pieces of transformer graphs. Each takes the builder, the checkpoint (for weights)
//! and value names, and returns the names of the values it produced.

pub mod alibi;
pub mod attention;
pub mod kv_cache;
pub mod linear;
pub mod mask;
pub mod mlp;
pub mod moe;
pub mod norm;
pub mod rope;
