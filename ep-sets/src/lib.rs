//! One TOML table per ONNX Runtime execution provider (EP).
//!
//! A table says, for its EP: which dtypes it builds (`[role.decoder.f16]` ...), the ordered rule
//! lists per pipeline stage, which fusions are required, which ops must be absent, the
//! structural flags a task gets, the ops (with opset range and per-constraint dtypes) the EP's
//! kernels claim, each with the ONNX Runtime source it comes from, and the provider entry for
//! `genai_config.json`. Adding an EP is adding a table, not code. The schema is described in
//! `docs/ep-tables.md`.
//!
//! This crate depends on nothing else in the workspace so that `builder`, `rules` and `ruleck` can
//! all read it; [`Stage`] is the workspace's one model of execution order.

#[cfg(feature = "builtin")]
mod builtin;
mod claim;
pub mod dtype;
mod error;
mod opschema;
mod quant;
mod domain;
mod schema;
mod stage;
mod role;
mod table;
mod validate;

use std::collections::BTreeMap;
use std::path::Path;

pub use claim::Claim;
pub use dtype::{DType, ElemType};
pub use role::Role;
pub use quant::{QuantBits, QuantChoice, QuantFormat, QuantPlan};
pub use domain::Domain;
pub use opschema::{OpSchema, OpSchemas};
pub use error::{Error, Location, Problem, Result};
pub use table::{
    normalize_domain, parse, DtypePlan, EpTable, Exclusion, Forbidden, GenaiProvider, Kernel, NotApplicable, Refusal, RuleRef,
    Stage, StaticKvCache,
};
pub use validate::{KNOWN_FLAGS, UNDOES};

/// All EP tables, by EP name.
#[derive(Debug, Clone)]
pub struct EpSets {
    tables: BTreeMap<String, EpTable>,
}

impl EpSets {
    /// The tables compiled into the binary (`ep-sets/tables/*.toml`), parsed and validated.
    #[cfg(feature = "builtin")]
    pub fn builtin() -> Result<EpSets> {
        Self::from_sources(builtin::TABLES.iter().map(|(f, t)| (f.to_string(), t.to_string())))
    }

    /// Every `*.toml` in `dir`, parsed and validated (for `ruleck` and tests).
    pub fn load_dir(dir: impl AsRef<Path>) -> Result<EpSets> {
        let dir = dir.as_ref();
        let entries = std::fs::read_dir(dir).map_err(|source| Error::Io { path: dir.to_path_buf(), source })?;
        let mut files = Vec::new();
        for entry in entries {
            let path = entry.map_err(|source| Error::Io { path: dir.to_path_buf(), source })?.path();
            if path.extension().is_some_and(|e| e == "toml") {
                files.push(path);
            }
        }
        files.sort();
        let mut sources = Vec::new();
        for path in files {
            let text = std::fs::read_to_string(&path).map_err(|source| Error::Io { path: path.clone(), source })?;
            sources.push((path.display().to_string(), text));
        }
        Self::from_sources(sources)
    }

    /// Parse and validate `(file name, text)` pairs. All validation problems of all tables are
    /// reported together, so one run shows everything to fix.
    pub fn from_sources(sources: impl IntoIterator<Item = (String, String)>) -> Result<EpSets> {
        let mut tables: BTreeMap<String, EpTable> = BTreeMap::new();
        let mut problems = Vec::new();
        for (file, text) in sources {
            let table = parse(&file, &text)?;
            problems.extend(table.validate());
            if let Some(first) = tables.get(&table.name) {
                return Err(Error::DuplicateEp { name: table.name.clone(), first: first.file.clone(), second: file });
            }
            tables.insert(table.name.clone(), table);
        }
        if problems.is_empty() { Ok(EpSets { tables }) } else { Err(Error::Invalid { problems }) }
    }

    /// The table of EP `ep` (`cpu`, `cuda`, ...).
    pub fn get(&self, ep: &str) -> Option<&EpTable> {
        self.tables.get(ep)
    }

    /// EP names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tables.keys().map(|s| s.as_str())
    }

    /// Every (EP, dtype) pair some table lists, sorted.
    pub fn pairs(&self) -> Vec<(&str, DType)> {
        self.tables.values().flat_map(|t| t.dtypes().map(move |d| (t.name.as_str(), d))).collect()
    }

    /// Every (EP, dtype) pair with a plan for `role`, sorted.
    pub fn role_pairs(&self, role: Role) -> Vec<(&str, DType)> {
        self.tables.values().flat_map(|t| t.role_dtypes(role).into_iter().map(move |d| (t.name.as_str(), d))).collect()
    }

    /// The table and `role`'s plan for (`ep`, `dtype`), or an error naming the pairs that
    /// have a plan for that role. The builder calls this before reading any weight.
    pub fn role_plan(&self, ep: &str, role: Role, dtype: DType) -> Result<(&EpTable, &DtypePlan)> {
        if role == Role::Decoder {
            return self.plan(ep, dtype);
        }
        if let Some(r) = self.get(ep).and_then(|t| t.refused(role, dtype)) {
            return Err(Error::RoleRefused {
                ep: ep.to_string(),
                role,
                dtype,
                why: r.why.trim().to_string(),
                available: self.role_pairs(role).into_iter().map(|(e, d)| format!("{e}/{d}")).collect(),
            });
        }
        self.get(ep).and_then(|t| t.role_plan(role, dtype).map(|p| (t, p))).ok_or_else(|| Error::UnknownRolePair {
            ep: ep.to_string(),
            role,
            dtype,
            available: self.role_pairs(role).into_iter().map(|(e, d)| format!("{e}/{d}")).collect(),
        })
    }

    /// The table and plan for (`ep`, `dtype`), or an error naming the pairs that exist. The
    /// builder calls this before reading any weight.
    pub fn plan(&self, ep: &str, dtype: DType) -> Result<(&EpTable, &DtypePlan)> {
        self.get(ep).and_then(|t| t.dtype(dtype).map(|p| (t, p))).ok_or_else(|| Error::UnknownPair {
            ep: ep.to_string(),
            dtype,
            available: self.pairs().into_iter().map(|(e, d)| format!("{e}/{d}")).collect(),
        })
    }
}
