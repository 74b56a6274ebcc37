//! The parts of a package: each graph a task builds, the role the EP pipeline plans it under
//! and the file it is written to.
//!
//! A task lists its parts once ([`Task::parts`]); the builder resolves one plan per part and
//! loops over them, so nothing else names a graph's file or asks "is this an encoder". A
//! decoder checkpoint is one `decoder` part, an encoder one `encoder` part; a vision-language
//! checkpoint will list its `vision` and `embedding` parts beside the decoder.

use crate::tasks::causal_lm::TokenInput;
use crate::tasks::{causal_lm, embedding, encoder, pooling::SentencePooling, Task};
use crate::{BuildOptions, Checkpoint, Error, Result};
use ir::Role;

/// How a part's generic graph is built.
#[derive(Clone, Debug, PartialEq, Eq)]
enum PartGraph {
    /// The causal LM with its external KV cache (onnxruntime-genai's decoder contract), on
    /// `input_ids` or, in a vision-language package, on `inputs_embeds`.
    CausalLm(TokenInput),
    /// A vision-language package's embedding: `input_ids` + `image_features` -> `inputs_embeds`.
    Embedding,
    /// A vision-language package's vision tower: pixels -> `image_features`.
    Vision,
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
        matches!(self.graph, PartGraph::CausalLm(_))
    }

    /// Builds the part's generic graph.
    pub fn build(&self, ckpt: &Checkpoint, opts: &BuildOptions) -> Result<ir::Model> {
        match &self.graph {
            PartGraph::CausalLm(input) => causal_lm::build_with(ckpt, opts, *input),
            PartGraph::Embedding => embedding::build(ckpt, opts),
            PartGraph::Vision => crate::arch::vision::build_vision(ckpt, opts),
            PartGraph::Encoder { pooling } => encoder::build(ckpt, opts, pooling.as_ref()),
        }
    }
}

/// The file a package's decoder (or an encoder package's encoder) is written to.
const MODEL_FILE: &str = "model.onnx";
/// A vision-language package's vision tower and embedding files (the names genai_config.json
/// gives them).
const VISION_FILE: &str = "vision.onnx";
const EMBEDDING_FILE: &str = "embedding.onnx";

impl Task {
    /// The parts `ckpt` builds for this task, in the order they are written (after
    /// [`Task::check`]).
    pub fn parts(self, ckpt: &Checkpoint) -> Result<Vec<Part>> {
        self.check(ckpt)?;
        let part = match self {
            Task::CausalLm if ckpt.config.multimodal.is_some() => {
                check_vision_language(ckpt)?;
                // Every vision option is checked before any part is built.
                crate::arch::vision::supported(&ckpt.config)?;
                return Ok(vec![
                    Part { role: Role::Vision, file: VISION_FILE, graph: PartGraph::Vision },
                    Part { role: Role::Embedding, file: EMBEDDING_FILE, graph: PartGraph::Embedding },
                    Part { role: Role::Decoder, file: MODEL_FILE, graph: PartGraph::CausalLm(TokenInput::Embeds) },
                ])
            }
            Task::CausalLm => Part { role: Role::Decoder, file: MODEL_FILE, graph: PartGraph::CausalLm(TokenInput::Ids) },
            Task::FeatureExtraction => Part { role: Role::Encoder, file: MODEL_FILE, graph: PartGraph::Encoder { pooling: None } },
            Task::SentenceEmbedding => {
                let pooling = ckpt.sentence_pooling()?;
                Part { role: Role::Encoder, file: MODEL_FILE, graph: PartGraph::Encoder { pooling: Some(pooling) } }
            }
        };
        Ok(vec![part])
    }
}

/// The vision-language checkpoints whose packages this build makes: Qwen2.5-VL, Qwen3-VL and
/// Gemma 3 (the onnxruntime-genai 0.18 VLM types whose every part is built here).
const VISION_LANGUAGE_TYPES: &[&str] = &["qwen2_5_vl", "qwen3_vl", "gemma3"];

/// Refuses, by key and before anything is built, a vision-language checkpoint whose package
/// this build cannot make.
fn check_vision_language(ckpt: &Checkpoint) -> Result<()> {
    let c = &ckpt.config;
    let Some(m) = &c.multimodal else { return Ok(()) };
    if !VISION_LANGUAGE_TYPES.contains(&m.model_type.as_str()) {
        let why = "no vision tower and embedding for it";
        return Err(Error::Config {
            path: c.path.clone(),
            reason: format!(
                "vision-language `model_type` `{}` is not supported ({why}); supported: {}; `--text-only` builds its language model (`{}`) alone",
                m.model_type,
                VISION_LANGUAGE_TYPES.join(", "),
                c.model_type
            ),
        });
    }
    Ok(())
}
