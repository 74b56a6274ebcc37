//! The build pipeline behind `tailor build`: checkpoint -> generic graph -> package folder.
//!
//! A package is written into a temporary folder next to the output and renamed into place, so
//! a failed build never leaves a half-written package and never touches an existing one.

mod companions;
mod demo;
mod error;
mod genai;
mod genai_vl;
pub mod lora;
mod gguf_spm;
mod gguf_wpm;
pub mod gguf_tokenizer;
pub mod diff;
pub mod hub;
pub mod inspect;
mod output;
mod package;
mod plan;
pub mod pipeline;
pub mod quantize;

pub use companions::check_tokenizer_file;
pub use demo::materialize_demo_checkpoint;
pub use error::{Error, Result};
pub use output::{install_signal_handlers, remove_on_interrupt, RemoveOnInterrupt};
pub use genai::{genai_config, runtime_model_type};
pub use package::{build, optimized_model, optimized_model_for, optimized_model_with, optimized_parts, BuildReport, BuildRequest, PartReport, MAX_THREADS};
pub use plan::build_options;
pub use quantize::{QuantRequest, TensorReport};
