//! The one error type of this crate: each variant names the file or selector at fault, so a
//! test that cannot read the registry says what to fix.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: {source}", path.display())]
    Toml { path: PathBuf, source: toml::de::Error },
    #[error("{}:\n  {}", path.display(), problems.join("\n  "))]
    Invalid { path: PathBuf, problems: Vec<String> },
    #[error("fixture selector `{selector}`: {reason}")]
    Selector { selector: String, reason: String },
}

pub type Result<T> = std::result::Result<T, Error>;
