//! The parts of a package: each graph a task builds, the role the EP pipeline plans it under
//! and the file it is written to.
//!
//! A task lists its parts once ([`Task::parts`]); the builder resolves one plan per part and
//! loops over them, so nothing else names a graph's file or asks "is this an encoder". A
//! decoder checkpoint is one `decoder` part, an encoder one `encoder` part; a vision-language
//! checkpoint will list its `vision` and `embedding` parts beside the decoder.

use crate::tasks::{causal_lm, encoder, pooling::SentencePooling, Task};
use crate::{BuildOptions, Checkpoint, Result};
use ir::Role;

/// How a part's generic graph is built.
#[derive(Clone, Debug, PartialEq, Eq)]
enum PartGraph {
    /// The causal LM with its external KV cache (onnxruntime-genai's decoder contract).
    CausalLm,
    /// The bidirectional encoder; with pooling, the `sentence_embedding` output too.
    Encoder { pooling: Option<SentencePooling> },
}

/// One graph of a package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// The role whose plan the EP table gives this part (`[role.<role>.<dtype>]`).
    pub role: Role,
    /// The model file, relative to the package folder; its external data is
    /// [`Part::data_file`].
    pub file: &'static str,
    graph: PartGraph,
}

impl Part {
    /// The part's external-data file (`model.onnx.data` for `model.onnx`).
    pub fn data_file(&self) -> String {
        format!("{}{}", self.file, ir::DATA_FILE_SUFFIX)
    }

    /// Does this part hold a KV cache (`--kv-cache` applies to it)?
    pub fn has_kv_cache(&self) -> bool {
        self.graph == PartGraph::CausalLm
    }

    /// Builds the part's generic graph.
    pub fn build(&self, ckpt: &Checkpoint, opts: &BuildOptions) -> Result<ir::Model> {
        match &self.graph {
            PartGraph::CausalLm => causal_lm::build(ckpt, opts),
            PartGraph::Encoder { pooling } => encoder::build(ckpt, opts, pooling.as_ref()),
        }
    }
}

/// The file a one-graph package's model is written to.
const MODEL_FILE: &str = "model.onnx";

impl Task {
    /// The parts `ckpt` builds for this task, in the order they are written (after
    /// [`Task::check`]).
    pub fn parts(self, ckpt: &Checkpoint) -> Result<Vec<Part>> {
        self.check(ckpt)?;
        let part = match self {
            Task::CausalLm => Part { role: Role::Decoder, file: MODEL_FILE, graph: PartGraph::CausalLm },
            Task::FeatureExtraction => Part { role: Role::Encoder, file: MODEL_FILE, graph: PartGraph::Encoder { pooling: None } },
            Task::SentenceEmbedding => {
                let pooling = SentencePooling::load(&ckpt.dir, ckpt.config.hidden_size)?;
                Part { role: Role::Encoder, file: MODEL_FILE, graph: PartGraph::Encoder { pooling: Some(pooling) } }
            }
        };
        Ok(vec![part])
    }
}
