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
    /// A file of the package could not be written: named by its place in the package (not
    /// the hidden staging folder, nor the checkpoint file it was copied from).
    #[error("cannot write {file} in the package {output} (nothing was left there): {}", write_failure(.source))]
    WriteFile { output: PathBuf, file: String, source: std::io::Error },
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

    /// Writing `file` of the package at `output` failed.
    pub(crate) fn write_file(output: &std::path::Path, file: &str, source: std::io::Error) -> Self {
        Error::WriteFile { output: output.to_path_buf(), file: file.to_string(), source }
    }
}

/// A write error in words: a full disk, a quota or a file-size limit says so and what to do;
/// anything else is the system's message and where to look.
fn write_failure(e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::StorageFull => format!("the disk is full ({e}); free space where the package is written, or write it to another disk"),
        ErrorKind::QuotaExceeded => format!("the disk quota is used up ({e}); free space within the quota, or write the package elsewhere"),
        ErrorKind::FileTooLarge => format!("the file would pass the process's file-size limit ({e}); raise it (`ulimit -f`)"),
        _ => format!("{e}; check free space, quotas and file-size limits where it is written"),
    }
}
