//! The one error type of this crate.
//!
//! Every problem names the table file it comes from and, where the TOML parser gave one, the
//! byte span and the 1-based line and column, so `ruleck` can point at the offending line.

use std::fmt;
use std::ops::Range;
use std::path::PathBuf;

/// Where in which table a problem was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The table's file name, e.g. `cuda.toml` (a path for tables read with `load_dir`).
    pub file: String,
    /// Byte range in the file, when known.
    pub span: Option<Range<usize>>,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub col: Option<usize>,
}

impl Location {
    /// A location for the whole file (no span known).
    pub fn file(file: impl Into<String>) -> Self {
        Location { file: file.into(), span: None, line: None, col: None }
    }

    /// A location at `span` inside `text`.
    pub fn at(file: impl Into<String>, text: &str, span: Option<Range<usize>>) -> Self {
        let (line, col) = match &span {
            Some(s) => {
                let (l, c) = line_col(text, s.start);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        Location { file: file.into(), span, line, col }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.col {
                write!(f, ":{c}")?;
            }
        }
        Ok(())
    }
}

/// 1-based (line, column) of byte `offset` in `text` (column counted in characters).
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..text.floor_char_boundary_compat(offset)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |s| s.chars().count()) + 1;
    (line, col)
}

trait FloorCharBoundary {
    fn floor_char_boundary_compat(&self, i: usize) -> usize;
}

impl FloorCharBoundary for str {
    fn floor_char_boundary_compat(&self, mut i: usize) -> usize {
        while i > 0 && !self.is_char_boundary(i) {
            i -= 1;
        }
        i
    }
}

/// One thing wrong with one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub location: Location,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

/// Everything that can go wrong reading or checking EP tables.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A table file or directory could not be read.
    #[error("{path}: cannot read: {source}")]
    Io { path: PathBuf, source: std::io::Error },

    /// The file is not valid TOML or does not fit the schema.
    #[error("{location}: {message}")]
    Parse { location: Location, message: String },

    /// The tables parsed but break one or more rules of the schema (see `validate`).
    #[error("{}", join(problems))]
    Invalid { problems: Vec<Problem> },

    /// Two tables declare the same EP name.
    #[error("{second}: EP `{name}` is already defined by {first}")]
    DuplicateEp { name: String, first: String, second: String },

    /// An (EP, dtype) pair that no table lists was asked for.
    #[error("no EP table for ({ep}, {dtype}); the pairs that exist are: {}", available.join(", "))]
    UnknownPair { ep: String, dtype: crate::DType, available: Vec<String> },

    /// An (EP, dtype) pair whose table has no plan for a sub-model role (an encoder built for
    /// an EP whose table has no `[role.encoder.<dtype>]` section).
    #[error("ep-sets/tables/{ep}.toml has no {} section: the {ep} table does not say how to build the {role} role in {dtype}; the (EP, dtype) pairs with {role} plans are: {}", role.section(*dtype), if available.is_empty() { "none".to_string() } else { available.join(", ") })]
    UnknownRolePair { ep: String, role: crate::Role, dtype: crate::DType, available: Vec<String> },
    /// The table refuses the role (`[[refuse]]`), with its why.
    #[error("the {ep} table does not build the {role} role in {dtype}: {why} (ep-sets/tables/{ep}.toml [[refuse]]); the (EP, dtype) pairs with {role} plans are: {}", if available.is_empty() { "none".to_string() } else { available.join(", ") })]
    RoleRefused { ep: String, role: crate::Role, dtype: crate::DType, why: String, available: Vec<String> },
}

fn join(problems: &[Problem]) -> String {
    problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n")
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
