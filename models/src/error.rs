use std::path::PathBuf;

/// Why a checkpoint could not be turned into a graph. Every variant names the file, key or
/// tensor at fault and says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {reason}")]
    Config { path: PathBuf, reason: String },
    #[error("{path}: unsupported model_type `{model_type}`; supported: {supported}")]
    UnsupportedModel { path: PathBuf, model_type: String, supported: String },
    #[error("{path}: tensor `{name}` not found in the checkpoint ({hint})")]
    MissingTensor { path: PathBuf, name: String, hint: String },
    #[error("{path}: tensor `{name}` has shape {found:?}, expected {expected:?} from config.json")]
    TensorShape { path: PathBuf, name: String, found: Vec<usize>, expected: Vec<usize> },
    #[error("{path}: tensor `{name}` has dtype {found}; checkpoints must hold f32, f16 or bf16 weights")]
    TensorDtype { path: PathBuf, name: String, found: String },
    #[error("{path}: {count} tensor(s) would be ignored by the {model_type} graph: {names}; the checkpoint does not match config.json (check `attention_bias`, `mlp_bias`, `tie_word_embeddings` and `model_type`)")]
    UnusedTensors { path: PathBuf, model_type: String, count: usize, names: String },
    #[error("{path}: {reason}")]
    Checkpoint { path: PathBuf, reason: String },
    /// A quantized checkpoint the tool cannot import as it is (models/src/prequant.rs).
    #[error("{path}: {reason}")]
    Prequantized { path: PathBuf, reason: String },
    #[error("unsupported dtype {dtype}: choose one of {supported}")]
    Dtype { dtype: ir::DType, supported: String },
    #[error(transparent)]
    Ir(#[from] ir::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
