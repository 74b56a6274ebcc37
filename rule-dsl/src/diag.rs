//! Errors in `.rule` files: where (`file:line:col`), what, and how to fix it.

use crate::ast::Pos;
use std::fmt;

/// One problem in a `.rule` file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Diagnostic {
    pub file: String,
    pub pos: Pos,
    pub message: String,
    /// How to fix it.
    pub help: String,
}

impl Diagnostic {
    pub fn new(file: &str, pos: Pos, message: impl Into<String>, help: impl Into<String>) -> Self {
        Diagnostic { file: file.to_string(), pos, message: message.into(), help: help.into() }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: error: {}", self.file, self.pos.line, self.pos.col, self.message)?;
        if !self.help.is_empty() {
            write!(f, "\n  help: {}", self.help)?;
        }
        Ok(())
    }
}

/// Every diagnostic of a rule set, one per paragraph.
pub fn render(diags: &[Diagnostic]) -> String {
    diags.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n")
}

/// The crate's error type: reading or checking rule files failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{}", render(.0))]
    Rules(Vec<Diagnostic>),
}
