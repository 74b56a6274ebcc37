use std::path::PathBuf;

/// Why a build failed; every message says what to change.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Model(#[from] models::Error),
    #[error(transparent)]
    Ir(#[from] ir::Error),
    #[error("output {output} {reason}")]
    Output { output: PathBuf, reason: String },
    #[error("cannot write the package {output} (nothing was left there): {source}; check free space, quotas and file-size limits where it is written")]
    Write { output: PathBuf, source: ir::Error },
    #[error("{path}: {reason}")]
    Config { path: PathBuf, reason: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    EpSets(#[from] ep_sets::Error),
    #[error("pipeline: {0}")]
    Pipeline(String),
    #[error("the {ep} {dtype} build failed validation against ep-sets/tables/{ep}.toml:\n  - {}", problems.join("\n  - "))]
    Validation { ep: String, dtype: ir::DType, problems: Vec<String>, report: Box<crate::pipeline::PipelineReport> },
    #[error("{0}")]
    Request(String),
    #[error("--strict: {}", warnings.join("; "))]
    Strict { warnings: Vec<String> },
    #[error("unknown execution provider `{ep}`; available: {available}")]
    UnknownEp { ep: String, available: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}
