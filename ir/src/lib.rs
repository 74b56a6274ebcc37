//! The in-memory ONNX model that every other crate works on.
//!
//! * [`proto`]: the ONNX protobuf types, generated from the vendored `onnx.proto`.
//! * [`Graph`], [`Node`], [`Attr`]: a graph of named values, easy to rewrite, with
//!   topological ordering and dead-node removal.
//! * [`infer_types`]: dtypes and shapes of the default ONNX domain's operators; other
//!   operators come from the caller's [`OpInference`] (`rules::op_types`).
//! * [`Recipe`]: initializers are lazy recipes over memory-mapped source tensors (plus
//!   transforms); nothing is read or converted until the model is written.
//! * [`save_model`] / [`load_model`]: `model.onnx` plus one external `model.onnx.data`.
//! * [`quant`]: INT4/INT8 block quantization of MatMul weights, byte-identical to ONNX
//!   Runtime's own quantizer, for MatMulNBits, GatherBlockQuantized and blocked DequantizeLinear.
//! * [`QuantGroup`]: a quantized weight as lazy recipes ([`Recipe::Quantized`] parts), computed
//!   while streaming.
//! * [`PackedWeight`]: a Linear weight the checkpoint stores pre-quantized (GPTQ, AWQ, GGUF
//!   blocks, MXFP4), whose integers a [`QuantGroup`] writes unchanged ([`PackedStack`]).
//! * [`canonical_text`]: a stable text form for snapshots and round-trip comparisons.

pub mod proto {
    //! ONNX protobuf messages (prost), generated at build time from `proto/onnx.proto`.
    #![allow(clippy::all, missing_docs)]
    include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
}

mod dtype;
mod error;
mod files;
mod graph;
pub mod ggml;
pub mod gguf;
mod convert;
mod direct;
mod layout;
mod load;
pub mod packed;
pub mod quant;
mod qweight;
mod recipe;
mod save;
mod shape;
mod source;
mod stream;
mod transpose;
mod writeq;
mod text;

pub use dtype::{dtype_from_safetensors, DType};
pub use ep_sets::{ElemType, Role};
pub use error::{Error, Result};
pub use files::{entry_kind, read_regular, regular_file, EntryKind, DATA_FILE_LIMIT, MODEL_PROTO_LIMIT, SETTINGS_LIMIT};
pub use graph::{Attr, AttrValue, Dim, Graph, Model, Node, ValueInfo};
pub use layout::{layout_external_data, DataSlot, DATA_ALIGNMENT, INLINE_LIMIT};
pub use load::load_model;
pub use packed::{PackedFormat, PackedSettings, PackedStack, PackedTensors, PackedWeight, StoredForm, ZeroForm};
pub use qweight::{QuantForm, QuantGroup, QuantPart};
pub use recipe::{DataValues, Recipe, TensorData, TrigFn, TrigTable};
pub use shape::{infer_types, Inferred, OnnxOnly, OpInference};
pub use save::{save_model, save_model_with, SaveReport, DATA_FILE_SUFFIX};
pub use stream::{Progress, WriteOptions};
pub use source::{safetensors_header, HeaderEntry, MappedFile, SourceTensor};
pub use text::{canonical_text, initializer_digests, TextOptions};

/// The default-domain opset every generic graph targets.
pub const OPSET: i64 = 24;
/// The ONNX IR version that goes with opset 24 (ONNX 1.19).
pub const IR_VERSION: i64 = 12;
