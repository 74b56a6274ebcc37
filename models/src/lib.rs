//! EP-agnostic model construction: reusable components (embedding, linear, norms, rotary
//! embedding, attention, MLP, decoder layer) composed into architectures, wrapped by tasks that
//! own the graph's I/O contract. The graphs are standard ONNX, default-domain opset 24, and
//! nothing here knows which execution provider a model is for.

mod builder;
mod checkpoint;
mod config;
mod error;

pub mod arch;
pub mod components;
pub mod tasks;

pub use builder::GraphBuilder;
pub use checkpoint::{index_shards, Checkpoint};
pub use config::{Activation, DecoderConfig, RopeConfig, RopeKind, SlidingWindowConfig, SUPPORTED_ROPE_TYPES};
pub use error::{Error, Result};

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
        BuildOptions { dtype: DType::F32, concrete_dims: Default::default(), tied_head: TiedHead::Shared }
    }
}

