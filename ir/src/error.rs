use std::path::PathBuf;

/// Everything that can go wrong while reading, transforming or writing a model.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a valid safetensors file ({reason}); the file may be truncated or corrupt, re-download it")]
    Safetensors { path: PathBuf, reason: String },
    #[error("{path}: tensor `{name}` has dtype {dtype}, which onnx-tailor cannot read")]
    UnsupportedSourceDtype { path: PathBuf, name: String, dtype: String },
    #[error("{path}: not a valid GGUF file: {reason}")]
    Gguf { path: PathBuf, reason: String },
    #[error("{path}: {reason}")]
    GgufSplit { path: PathBuf, reason: String },
    #[error("recipe for `{tensor}`: {reason}")]
    Recipe { tensor: String, reason: String },
    #[error("cannot cast {from} to {to}: only float <-> float casts are supported for weights")]
    Cast { from: String, to: String },
    #[error("{path}: not a valid ONNX model ({reason})")]
    Decode { path: PathBuf, reason: String },
    #[error("{model}: tensor `{tensor}`'s external data {reason}")]
    ExternalData { model: PathBuf, tensor: String, reason: String },
    #[error("{path} {what}")]
    NotAFile { path: PathBuf, what: &'static str },
    #[error("{path} is {size} bytes, more than the {limit} bytes this tool reads of such a file; it is not the file it should be (check where it links to)")]
    TooLarge { path: PathBuf, size: u64, limit: u64 },
    #[error("graph is not valid: {0}")]
    Graph(String),
    #[error("quantization block size {0} is not supported: it must be a power of two from 16 to 256")]
    QuantBlockSize(usize),
    #[error("quantization: {what} has {got} elements, expected {expected}")]
    QuantBuffer { what: &'static str, expected: usize, got: usize },
    #[error("quantization: {0}")]
    QuantShape(String),
    #[error("quantization: weight element [{row}, {col}] is {value}; only finite weights can be quantized")]
    QuantNonFinite { row: usize, col: usize, value: f32 },
    /// `tensor` is filled in where the name is known ([`Error::in_tensor`]).
    #[error("tensor `{tensor}` holds {value}, beyond f16's range (largest finite value 65504): written as f16 it would be an infinity")]
    F16Overflow { tensor: String, value: f32 },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Names the tensor an [`Error::F16Overflow`] came from, unless a closer name (the
    /// checkpoint's own) was given first; other errors pass unchanged.
    pub(crate) fn in_tensor(self, name: &str) -> Error {
        match self {
            Error::F16Overflow { tensor, value } if tensor.is_empty() => Error::F16Overflow { tensor: name.to_string(), value },
            other => other,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}
