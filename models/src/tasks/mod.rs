//! Tasks own a graph's I/O contract: input and output names, dtypes and shapes.

pub mod causal_lm;
pub mod embedding;
pub mod encoder;
pub mod pooling;

use crate::{arch, Checkpoint, Error, Result};
use std::fmt;

/// What a package computes. A decoder checkpoint builds `causal-lm`; an encoder one
/// `feature-extraction` or `sentence-embedding` (docs/generic-graph.md has each I/O).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Task {
    /// Next-token logits with an external KV cache (onnxruntime-genai's contract).
    CausalLm,
    /// The encoder's `last_hidden_state`.
    FeatureExtraction,
    /// `last_hidden_state` and the pooled (and, when listed, normalized) `sentence_embedding`,
    /// as the checkpoint's sentence-transformers files say.
    SentenceEmbedding,
}

impl Task {
    pub const ALL: [Task; 3] = [Task::CausalLm, Task::FeatureExtraction, Task::SentenceEmbedding];

    /// The name `--task` takes and reports print.
    pub fn name(self) -> &'static str {
        match self {
            Task::CausalLm => "causal-lm",
            Task::FeatureExtraction => "feature-extraction",
            Task::SentenceEmbedding => "sentence-embedding",
        }
    }

    pub fn parse(name: &str) -> Option<Task> {
        Task::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The task a checkpoint builds when `--task` is not given: a sentence-transformers folder
    /// (`modules.json` beside config.json) or a GGUF encoder stating its pooling gives
    /// `sentence-embedding`, another encoder
    /// `model_type` `feature-extraction`, a decoder `causal-lm`. An unsupported `model_type`
    /// is an error listing the supported ones.
    pub fn default_for(ckpt: &Checkpoint) -> Result<Task> {
        let c = &ckpt.config;
        if arch::encoder_for(&c.model_type).is_some() {
            return Ok(if ckpt.has_sentence_pooling()? { Task::SentenceEmbedding } else { Task::FeatureExtraction });
        }
        causal_lm::family(c).map(|_| Task::CausalLm)
    }

    /// Checks that `ckpt` can be built as this task (before the build announces a graph it
    /// cannot make): a decoder task needs a decoder family, an encoder task an encoder family,
    /// `sentence-embedding` readable sentence-transformers files.
    pub fn check(self, ckpt: &Checkpoint) -> Result<()> {
        let c = &ckpt.config;
        let wrong = |kind: &str, types: Vec<&str>| Error::UnsupportedModel {
            path: c.path.clone(),
            model_type: c.model_type.clone(),
            supported: format!("{} (task {} builds {kind} models: {})", types.join(", "), self.name(), kind),
        };
        match self {
            Task::CausalLm if arch::decoder_for(&c.model_type).is_none() => {
                if arch::encoder_for(&c.model_type).is_some() {
                    return Err(Error::Config {
                        path: c.path.clone(),
                        reason: format!("`{}` is an encoder: task causal-lm needs a decoder; use --task feature-extraction or sentence-embedding", c.model_type),
                    });
                }
                Err(wrong("decoder", arch::decoder_model_types()))
            }
            Task::FeatureExtraction | Task::SentenceEmbedding if arch::encoder_for(&c.model_type).is_none() => {
                if arch::decoder_for(&c.model_type).is_some() {
                    return Err(Error::Config {
                        path: c.path.clone(),
                        reason: format!("`{}` is a decoder: task {} needs an encoder (bert, roberta, xlm-roberta); use --task causal-lm", c.model_type, self.name()),
                    });
                }
                Err(wrong("encoder", arch::encoder_model_types()))
            }
            Task::SentenceEmbedding => ckpt.sentence_pooling().map(|_| ()),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
