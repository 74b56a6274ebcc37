//! EP-agnostic model construction: reusable components (embedding, linear, norms, rotary
//! embedding, attention, MLP, decoder layer) composed into architectures, wrapped by tasks that
//! own the graph's I/O contract. The graphs are standard ONNX, default-domain opset 24, and
//! nothing here knows which execution provider a model is for.

mod builder;
mod checkpoint;
mod config;
mod error;
mod gguf;
mod prequant;

pub mod arch;
pub mod components;
pub mod lora;
pub mod parts;
pub mod tasks;

pub use builder::GraphBuilder;
pub use checkpoint::{index_shards, index_weight_map, Checkpoint};
pub use config::{read_settings, Activation, DecoderConfig, MropeConfig, Multimodal, RopeConfig, RopeKind, SlidingWindowConfig, SUPPORTED_ROPE_TYPES};
pub use error::{Error, Result};
pub use parts::Part;
pub use gguf::{gguf_file, ARCHITECTURES as GGUF_ARCHITECTURES};
pub use prequant::QuantSource;

use ir::DType;

/// What the caller chooses about the generic graph. Structural variants decided at build time
/// arrive here as named flags, never as an execution provider's name.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// Element type of weights, activations and float inputs/outputs.
    pub dtype: DType,
    /// `concrete_dims`: symbolic dims fixed to these sizes (by dim name, e.g. `batch_size`),
    /// for runtimes that compile shapes ahead of time. Empty: every dim stays symbolic.
    pub concrete_dims: std::collections::BTreeMap<String, i64>,
    /// How a tied output projection reads the embedding (docs/generic-graph.md).
    pub tied_head: TiedHead,
    /// The KV cache form of a decoder (docs/generic-graph.md, "Static KV cache").
    pub kv_cache: KvCache,
    /// The projections (checkpoint scopes, `model.layers.0.self_attn.q_proj`) that get a LoRA
    /// slot (docs/adapters.md); empty: a plain package.
    pub lora: std::collections::BTreeSet<String>,
}

/// The KV cache form of a decoder graph.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KvCache {
    /// `past` grows by `seq` rows a step: Attention concatenates and returns the longer cache.
    #[default]
    Dynamic,
    /// A preallocated `[batch, kv_heads, max_length, head_dim]` buffer: each step writes its rows
    /// in place with TensorScatter and attends over the whole buffer under a mask padded to
    /// `max_length`, so the shapes never change and a runtime can share past and present.
    Static { max_length: usize },
}

impl KvCache {
    /// The cache length every step sees, when it is fixed.
    pub fn max_length(self) -> Option<usize> {
        match self {
            KvCache::Dynamic => None,
            KvCache::Static { max_length } => Some(max_length),
        }
    }
}

/// How a tied `lm_head` reads the token embedding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TiedHead {
    /// Through a `Transpose` node on the embedding initializer: the table is stored once
    /// (smaller package, faster build); ONNX Runtime folds the transpose when a session is
    /// created, which makes creating it slower.
    #[default]
    Shared,
    /// A transposed copy stored as `lm_head.weight`: a larger package and a slower build, the
    /// fastest session creation.
    Copy,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions { dtype: DType::F32, concrete_dims: Default::default(), tied_head: TiedHead::Shared, kv_cache: KvCache::Dynamic, lora: Default::default() }
    }
}

