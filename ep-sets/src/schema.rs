//! The on-disk form of a table, as serde reads it.
//!
//! These types mirror the TOML one to one and keep `toml::Spanned` wrappers on the values a
//! linter needs to point at (rule names, exclusions, kernels). `table.rs` turns them into the
//! public, span-carrying model.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTable {
    pub ep: RawEp,
    /// `[dtype.<dtype>]`: how tables spelt the decoder's plans before every role had a
    /// `[role.<role>.<dtype>]` section; read only to say what it is now called.
    #[serde(default)]
    pub dtype: BTreeMap<String, Spanned<toml::Value>>,
    /// `[role.<role>.<dtype>]`: the plans of every sub-model role, the decoder's included.
    #[serde(default)]
    pub role: BTreeMap<String, Spanned<BTreeMap<String, Spanned<RawPlan>>>>,
    #[serde(default)]
    pub quant: BTreeMap<String, Spanned<crate::quant::RawQuant>>,
    /// `[kv_cache.static]`: the dtypes that offer `--kv-cache static`, and why.
    #[serde(default)]
    pub kv_cache: Option<RawKvCaches>,
    /// `[lora]`: the dtypes whose decoder takes LoRA slots (`--lora`), and why.
    #[serde(default)]
    pub lora: Option<Spanned<RawStaticKvCache>>,
    #[serde(default)]
    pub exclude: Vec<Spanned<RawExclude>>,
    /// `[[refuse]]`: roles (per dtype or for all) the table does not build, each with why.
    #[serde(default)]
    pub refuse: Vec<Spanned<RawRefuse>>,
    #[serde(default)]
    pub ops: BTreeMap<String, BTreeMap<String, Vec<Spanned<RawKernel>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawKvCaches {
    #[serde(rename = "static")]
    pub static_cache: Option<Spanned<RawStaticKvCache>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStaticKvCache {
    pub dtypes: Vec<String>,
    pub why: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEp {
    pub name: Spanned<String>,
    pub provider: String,
    /// The `--dtype` of a float build that names none.
    #[serde(default)]
    pub default_dtype: Option<Spanned<String>>,
    #[serde(default)]
    pub notes: Option<String>,
    #[serde(default)]
    pub genai: Option<RawGenai>,
    /// The order the stages run in, every stage once: `["cleanup", "prefuse", "fuse", "lower",
    /// "quantize", "fold"]`.
    #[serde(default)]
    pub stages: Option<Spanned<Vec<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGenai {
    pub name: String,
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    #[serde(default)]
    pub source: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPlan {
    #[serde(default)]
    pub cleanup: Vec<Spanned<String>>,
    #[serde(default)]
    pub prefuse: Vec<Spanned<String>>,
    #[serde(default)]
    pub fuse: Vec<Spanned<String>>,
    #[serde(default)]
    pub lower: Vec<Spanned<String>>,
    #[serde(default)]
    pub fold: Vec<Spanned<String>>,
    #[serde(default)]
    pub required: Vec<Spanned<String>>,
    #[serde(default)]
    pub not_applicable: BTreeMap<String, Vec<Spanned<RawNotApplicable>>>,
    #[serde(default)]
    pub forbidden_ops: Vec<Spanned<RawForbidden>>,
    #[serde(default)]
    pub flags: Vec<Spanned<String>>,
    #[serde(default)]
    pub limits: BTreeMap<String, i64>,
    #[serde(default)]
    pub notes: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNotApplicable {
    pub check: String,
    #[serde(default)]
    pub why: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawForbidden {
    pub op: String,
    #[serde(default)]
    pub why: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawExclude {
    pub rule: Spanned<String>,
    #[serde(default)]
    pub why: Option<String>,
    #[serde(default)]
    pub dtype: Option<Spanned<String>>,
    /// Only for this role's plans (absent: every role).
    #[serde(default)]
    pub role: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRefuse {
    pub role: Spanned<String>,
    #[serde(default)]
    pub dtype: Option<Spanned<String>>,
    #[serde(default)]
    pub why: Option<String>,
}

/// One kernel registration. Type constraints are free keys (`T`, `M`, `T_CACHE`, ...), so
/// they are collected with `flatten`; a misspelt fixed key shows up as a constraint whose
/// value is not a list and fails to parse.
#[derive(Debug, Deserialize)]
pub(crate) struct RawKernel {
    pub since: i64,
    #[serde(default)]
    pub until: Option<i64>,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub note: Option<String>,
    #[serde(default)]
    pub host: bool,
    #[serde(flatten)]
    pub types: BTreeMap<String, Vec<String>>,
}
