//! The public model of one EP table.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::dtype::{DType, ElemType};
use crate::error::{Error, Location, Result};
use crate::quant::{QuantBits, QuantPlan};
use crate::role::Role;
use crate::schema::{RawKernel, RawPlan, RawTable};

pub use crate::stage::Stage;

/// A rule id as written in a table, with where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRef {
    pub id: String,
    pub span: Option<Range<usize>>,
}

/// A check of a required fusion whose failure is accepted, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotApplicable {
    pub check: String,
    pub why: String,
    pub span: Option<Range<usize>>,
}

/// An op that must not appear in the optimized graph, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forbidden {
    /// Domain, `""` for the default ONNX domain.
    pub domain: String,
    pub op: String,
    pub why: String,
    pub span: Option<Range<usize>>,
}

/// What the table says for one dtype: the ordered rule lists per stage and what to expect.
#[derive(Debug, Clone, PartialEq)]
pub struct DtypePlan {
    pub dtype: DType,
    /// The sub-model role this plan is for (the `R` of its `[role.R.D]` section).
    pub role: Role,
    pub stages: BTreeMap<Stage, Vec<RuleRef>>,
    /// The order the stages run in: the table's `[ep] stages` ([`Stage::ALL`] when it gives
    /// none), the quantize step's place included.
    pub order: Vec<Stage>,
    /// Fusions that must fire on every candidate root (a miss fails the build).
    pub required: Vec<RuleRef>,
    /// For required fusions: named checks whose failure on a candidate is not a miss, each
    /// with why (the EP's kernel cannot take that case, say). Check ids are validated against
    /// the rule by `ruleck` and the builder.
    pub not_applicable: BTreeMap<String, Vec<NotApplicable>>,
    pub forbidden: Vec<Forbidden>,
    /// Structural flags handed to the task by name (e.g. `concrete_dims`).
    pub flags: Vec<RuleRef>,
    /// Numeric limits some rules read (e.g. `max_context` for `lower.int64_to_int32`).
    pub limits: BTreeMap<String, i64>,
    pub notes: Option<String>,
    pub span: Option<Range<usize>>,
}

impl DtypePlan {
    /// The ordered rule list of one stage (empty when the table gives none).
    pub fn stage(&self, stage: Stage) -> &[RuleRef] {
        self.stages.get(&stage).map_or(&[], |v| v.as_slice())
    }

    /// Every rule of the plan in pipeline order (the table's stage order), with its stage.
    pub fn pipeline(&self) -> impl Iterator<Item = (Stage, &RuleRef)> {
        self.order.iter().flat_map(move |&s| self.stage(s).iter().map(move |r| (s, r)))
    }

    /// Is `rule` in any stage list?
    pub fn runs(&self, rule: &str) -> bool {
        self.pipeline().any(|(_, r)| r.id == rule)
    }

    /// The accepted failure of `check` in required fusion `rule`, if the table lists one.
    pub fn not_applicable(&self, rule: &str, check: &str) -> Option<&NotApplicable> {
        self.not_applicable.get(rule)?.iter().find(|n| n.check == check)
    }

    /// Is `rule` a required fusion?
    pub fn is_required(&self, rule: &str) -> bool {
        self.required.iter().any(|r| r.id == rule)
    }

    /// The forbidden entry for `domain`/`op`, if that op is forbidden.
    pub fn forbids(&self, domain: &str, op: &str) -> Option<&Forbidden> {
        let domain = normalize_domain(domain);
        self.forbidden.iter().find(|f| f.domain == domain && (f.op == op || f.op == "*"))
    }

    /// Does the plan carry structural flag `flag`?
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f.id == flag)
    }
}

/// A rule the EP leaves out, and why (every exclusion must say why).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exclusion {
    pub rule: String,
    pub why: String,
    /// `None`: excluded for every dtype.
    pub dtype: Option<DType>,
    /// `None`: excluded for every role; else only from that role's plans (a role name no
    /// [`Role`] has is kept as written and reported by `validate`).
    pub role: Option<String>,
    pub span: Option<Range<usize>>,
}

/// A role the table does not build (for one dtype, or for all), and why: a build that needs
/// that role is refused with this why, and `ruleck` checks that every refusal gives one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The role as written (a name no [`Role`] knows is reported by `validate`).
    pub role: String,
    /// `None`: refused for every dtype.
    pub dtype: Option<DType>,
    pub why: String,
    pub span: Option<Range<usize>>,
}

/// One kernel registration: opset range and the element types per type constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    pub since: i64,
    /// Inclusive; `None` means open-ended.
    pub until: Option<i64>,
    /// Type constraint name (`T`, `M`, ...) -> the element types registered for it. A
    /// constraint the kernel does not list is not checked, as in ONNX Runtime's own kernel
    /// matching.
    pub types: BTreeMap<String, Vec<ElemType>>,
    /// Where in ONNX Runtime the registration is (file and registration, version read).
    pub source: String,
    pub note: Option<String>,
    /// The EP has no kernel for this: ONNX Runtime places the node on the CPU EP (with copies
    /// across the boundary), and the table accepts that. For the few shape-sized integer
    /// nodes at a package's inputs that no lowering can remove; builds list every such node
    /// in their report (`host_nodes`), so a fallback is never silent.
    pub host: bool,
    pub span: Option<Range<usize>>,
}

impl Kernel {
    /// Does the kernel's opset range contain `opset`?
    pub fn covers(&self, opset: i64) -> bool {
        self.since <= opset && self.until.is_none_or(|u| opset <= u)
    }

    /// `opset 13+ T=[f32, f16]` — how messages describe a kernel.
    pub fn describe(&self) -> String {
        let range = match self.until {
            None => format!("{}+", self.since),
            Some(u) if u == self.since => format!("{u}"),
            Some(u) => format!("[{}, {}]", self.since, u),
        };
        let types: Vec<String> =
            self.types.iter().map(|(k, v)| format!("{k}=[{}]", v.iter().map(|t| t.name()).collect::<Vec<_>>().join(", "))).collect();
        let host = if self.host { " (host: runs on the CPU EP)" } else { "" };
        if types.is_empty() {
            format!("opset {range}{host}")
        } else {
            format!("opset {range} {}{host}", types.join(" "))
        }
    }
}

/// The provider entry for `genai_config.json` (`"provider_options": [{"cuda": {}}]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenaiProvider {
    pub name: String,
    pub options: BTreeMap<String, String>,
    pub source: Option<String>,
}

/// A dtype name a table wrote that means nothing there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnknownDtype {
    pub name: String,
    /// Where it was written, for the message (`[role.decoder.f8]`, `claim of Add: constraint T`).
    pub place: String,
    /// What it should have been (`f32, f16, bf16`).
    pub expected: String,
    pub span: Option<Range<usize>>,
}

/// `[kv_cache.static]`: which dtypes of the decoder offer the static KV cache
/// (`--kv-cache static`), and why these (the refusal names it for the others).
#[derive(Debug, Clone, PartialEq)]
pub struct StaticKvCache {
    pub dtypes: Vec<DType>,
    pub why: String,
    pub span: Option<Range<usize>>,
}

/// One EP's table.
#[derive(Debug, Clone, PartialEq)]
pub struct EpTable {
    pub name: String,
    /// ONNX Runtime's provider name, e.g. `CUDAExecutionProvider`.
    pub provider: String,
    pub notes: Option<String>,
    /// The file the table came from (file name for builtin tables).
    pub file: String,
    pub(crate) text: String,
    pub(crate) name_span: Option<Range<usize>>,
    pub(crate) genai: Option<GenaiProvider>,
    pub(crate) plans: BTreeMap<DType, DtypePlan>,
    /// `[role.<role>.<dtype>]` plans of the roles other than the decoder.
    pub(crate) role_plans: BTreeMap<Role, BTreeMap<DType, DtypePlan>>,
    /// `[role.<name>]` sections naming a role no [`Role`] knows, with where.
    pub(crate) unknown_roles: Vec<(String, Option<Range<usize>>)>,
    pub(crate) exclusions: Vec<Exclusion>,
    /// `[[refuse]]`: roles the table does not build, with why.
    pub(crate) refusals: Vec<Refusal>,
    /// `[quant.int4]` / `[quant.int8]`; a bit width absent here is refused by `--quant`.
    pub(crate) quant: BTreeMap<QuantBits, QuantPlan>,
    /// Names a bit width no [`QuantBits`] knows, with where: reported by `validate`.
    pub(crate) unknown_quant: Vec<(String, Option<Range<usize>>)>,
    /// Dtype names no [`DType::PLAN`] (or, in kernel claims, no [`ElemType`]) knows, with
    /// where they were written: reported by `validate`; the entry that named one is dropped.
    pub(crate) unknown_dtypes: Vec<UnknownDtype>,
    /// `[kv_cache.static]`, when the table has one (absent: no dtype offers it).
    pub(crate) static_kv_cache: Option<StaticKvCache>,
    /// `[lora]`, when the table has one (absent: no dtype offers LoRA slots). Same shape as
    /// `[kv_cache.static]`: dtypes and why.
    pub(crate) lora: Option<StaticKvCache>,
    /// `[ep] stages`: the order the stages run in; `None` when the table gives none.
    pub(crate) stages: Option<Vec<Stage>>,
    /// What is wrong with `[ep] stages` (unknown, repeated or missing stages), and where.
    pub(crate) stage_problems: Vec<String>,
    pub(crate) stages_span: Option<Range<usize>>,
    /// `[ep] default_dtype`, when the table gives one.
    pub(crate) default_dtype: Option<DType>,
    pub(crate) default_dtype_span: Option<Range<usize>>,
    /// (domain, op) -> kernels; domain `""` is the default ONNX domain.
    pub(crate) ops: BTreeMap<(String, String), Vec<Kernel>>,
}

impl EpTable {
    /// The order the stages run in: `[ep] stages`, or [`Stage::ALL`] when the table gives none.
    pub fn stage_order(&self) -> Vec<Stage> {
        self.stages.clone().unwrap_or_else(|| Stage::ALL.to_vec())
    }

    /// Does the table list its stage order (`[ep] stages`)? Every shipped table does.
    pub fn lists_stages(&self) -> bool {
        self.stages.is_some()
    }

    /// The decoder's plan for dtype `d` (`f32`, `f16`, `bf16`), if the EP supports it.
    pub fn dtype(&self, d: DType) -> Option<&DtypePlan> {
        self.plans.get(&d)
    }

    /// The plan of `role` for dtype `d`: its `[role.<role>.d]` section; `None` when the table
    /// has no such section. The decoder's plans also define the EP's dtypes.
    pub fn role_plan(&self, role: Role, d: DType) -> Option<&DtypePlan> {
        match role {
            Role::Decoder => self.plans.get(&d),
            other => self.role_plans.get(&other)?.get(&d),
        }
    }

    /// Whether the decoder in dtype `d` offers the static KV cache: `Err` holds why not (the
    /// table's `[kv_cache.static] why`, or that the table has no such section).
    pub fn static_kv_cache(&self, d: DType) -> std::result::Result<&StaticKvCache, String> {
        match &self.static_kv_cache {
            Some(s) if s.dtypes.contains(&d) => Ok(s),
            Some(s) => {
                let offered: Vec<String> = s.dtypes.iter().map(|d| d.to_string()).collect();
                let offered = if offered.is_empty() { "none".to_string() } else { offered.join(", ") };
                Err(format!("{} [kv_cache.static] offers it for dtypes: {offered}; {}", self.file, s.why.trim()))
            }
            None => Err(format!("{} has no [kv_cache.static] section: the {} table does not say the static form is supported", self.file, self.name)),
        }
    }

    /// Whether the decoder in dtype `d` takes LoRA slots (`--lora`, docs/adapters.md): `Err`
    /// holds why not (the table's `[lora] why`, or that it has no such section).
    pub fn lora(&self, d: DType) -> std::result::Result<&StaticKvCache, String> {
        match &self.lora {
            Some(s) if s.dtypes.contains(&d) => Ok(s),
            Some(s) => {
                let offered: Vec<String> = s.dtypes.iter().map(|d| d.to_string()).collect();
                let offered = if offered.is_empty() { "none".to_string() } else { offered.join(", ") };
                Err(format!("{} [lora] offers LoRA slots for dtypes: {offered}; {}", self.file, s.why.trim()))
            }
            None => Err(format!("{} has no [lora] section: the {} table does not say LoRA slots run on it", self.file, self.name)),
        }
    }

    /// The dtypes `role` has a plan for.
    pub fn role_dtypes(&self, role: Role) -> Vec<DType> {
        match role {
            Role::Decoder => self.plans.keys().copied().collect(),
            other => self.role_plans.get(&other).map_or_else(Vec::new, |m| m.keys().copied().collect()),
        }
    }

    /// Every plan of the table, decoder plans first.
    pub fn all_plans(&self) -> impl Iterator<Item = &DtypePlan> {
        self.plans.values().chain(self.role_plans.values().flat_map(|m| m.values()))
    }

    /// The `--dtype` of a build that names none: `[quant.*].dtype` when quantizing, else
    /// `[ep] default_dtype`, else f32 when the table has it, else its first dtype.
    pub fn default_dtype(&self, quant: Option<QuantBits>) -> DType {
        if let Some(q) = quant.and_then(|b| self.quant.get(&b)) {
            return q.dtype;
        }
        match self.default_dtype {
            Some(d) => d,
            None if self.plans.contains_key(&DType::F32) => DType::F32,
            None => self.plans.keys().next().copied().unwrap_or(DType::F32),
        }
    }

    /// The `[quant.<bits>]` section, if the EP runs that bit width.
    pub fn quant(&self, bits: QuantBits) -> Option<&QuantPlan> {
        self.quant.get(&bits)
    }

    /// Every `[quant.*]` section.
    pub fn quant_plans(&self) -> impl Iterator<Item = &QuantPlan> {
        self.quant.values()
    }

    /// The dtypes the table has a plan for.
    pub fn dtypes(&self) -> impl Iterator<Item = DType> + '_ {
        self.plans.keys().copied()
    }

    /// The structural flags of dtype `d` (empty when the dtype is not listed).
    pub fn flags(&self, d: DType) -> Vec<&str> {
        self.dtype(d).map_or_else(Vec::new, |p| p.flags.iter().map(|f| f.id.as_str()).collect())
    }

    /// What goes into `genai_config.json`'s `provider_options`; `None` for CPU, which
    /// onnxruntime-genai runs without a provider entry.
    pub fn genai_provider_options(&self) -> Option<&GenaiProvider> {
        self.genai.as_ref()
    }

    /// Every exclusion, for every dtype.
    pub fn exclusions(&self) -> &[Exclusion] {
        &self.exclusions
    }

    /// The exclusion of `rule` that applies to the decoder's dtype `d`, if any.
    pub fn excluded(&self, rule: &str, d: DType) -> Option<&Exclusion> {
        self.excluded_for(Role::Decoder, rule, d)
    }

    /// The exclusion of `rule` that applies to `role`'s dtype `d`, if any.
    pub fn excluded_for(&self, role: Role, rule: &str, d: DType) -> Option<&Exclusion> {
        self.exclusions
            .iter()
            .find(|e| e.rule == rule && e.dtype.is_none_or(|x| x == d) && e.role.as_deref().is_none_or(|r| r == role.name()))
    }

    /// Every refusal of the table.
    pub fn refusals(&self) -> &[Refusal] {
        &self.refusals
    }

    /// The refusal of `role` in dtype `d`, if the table has one.
    pub fn refused(&self, role: Role, d: DType) -> Option<&Refusal> {
        self.refusals.iter().find(|r| r.role == role.name() && r.dtype.is_none_or(|x| x == d))
    }

    /// Every (domain, op) the table claims.
    pub fn ops(&self) -> impl Iterator<Item = (&str, &str, &[Kernel])> {
        self.ops.iter().map(|((d, o), k)| (d.as_str(), o.as_str(), k.as_slice()))
    }

    /// The kernels claimed for `domain`/`op`.
    pub fn kernels(&self, domain: &str, op: &str) -> &[Kernel] {
        self.ops
            .get(&(normalize_domain(domain).to_string(), op.to_string()))
            .map_or(&[], |v| v.as_slice())
    }

    /// A location in this table for `span`.
    pub fn location(&self, span: Option<Range<usize>>) -> Location {
        Location::at(self.file.clone(), &self.text, span)
    }

    /// The source text the table was parsed from.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// `ai.onnx` and `""` are the same domain; tables and lookups use `""`.
pub fn normalize_domain(domain: &str) -> &str {
    crate::domain::normalize(domain)
}

/// Split `"com.microsoft:GroupQueryAttention"` into domain and op; a bare op is default domain.
pub(crate) fn split_op(qualified: &str) -> (String, String) {
    match qualified.rsplit_once(':') {
        Some((d, o)) => (normalize_domain(d).to_string(), o.to_string()),
        None => (String::new(), qualified.to_string()),
    }
}

/// A plan dtype by name, or `None` with the name recorded for `validate`.
fn plan_dtype(unknown: &mut Vec<UnknownDtype>, name: String, place: String, span: Option<Range<usize>>) -> Option<DType> {
    let d = DType::parse_plan(&name);
    if d.is_none() {
        unknown.push(UnknownDtype { name, place, expected: DType::plan_names(), span });
    }
    d
}

/// Parse one table. Only the shape of the TOML is checked here; `validate` checks the rest.
pub fn parse(file: &str, text: &str) -> Result<EpTable> {
    let mut raw: RawTable = toml::from_str(text).map_err(|e| Error::Parse {
        location: Location::at(file, text, e.span()),
        message: e.message().to_string(),
    })?;
    if let Some((name, old)) = raw.dtype.iter().next() {
        return Err(Error::Parse {
            location: Location::at(file, text, Some(old.span())),
            message: format!("`[dtype.{name}]` is the old spelling of the decoder's plan: rename the section to `[role.decoder.{name}]` (and `[dtype.{name}.not_applicable]` to `[role.decoder.{name}.not_applicable]`); every role has `[role.<role>.<dtype>]` sections (docs/ep-tables.md, \"Roles\")"),
        });
    }
    let stages_span = raw.ep.stages.as_ref().map(|s| s.span());
    let (stages, stage_problems) = match raw.ep.stages.take() {
        Some(list) => {
            let (order, problems) = stage_order(&list.into_inner());
            (Some(order), problems)
        }
        None => (None, vec![]),
    };
    let order = stages.clone().unwrap_or_else(|| Stage::ALL.to_vec());
    let mut unknown_dtypes = Vec::new();
    let mut role_plans: BTreeMap<Role, BTreeMap<DType, DtypePlan>> = BTreeMap::new();
    let mut unknown_roles = Vec::new();
    for (name, by_dtype) in raw.role {
        let span = by_dtype.span();
        match Role::parse(&name) {
            Some(role) => {
                let entry = role_plans.entry(role).or_default();
                for (d, plan) in by_dtype.into_inner() {
                    let place = format!("[role.{name}.{d}]");
                    let Some(dtype) = plan_dtype(&mut unknown_dtypes, d, place, Some(plan.span())) else { continue };
                    entry.insert(dtype, plan_of(role, dtype, plan, &order));
                }
            }
            None => unknown_roles.push((name, Some(span))),
        }
    }
    let plans = role_plans.remove(&Role::Decoder).unwrap_or_default();
    let mut exclusions = Vec::new();
    for e in raw.exclude {
        let span = e.span();
        let e = e.into_inner();
        let rule = e.rule.into_inner();
        let dtype = match e.dtype {
            None => None,
            Some(d) => {
                let at = d.span();
                match plan_dtype(&mut unknown_dtypes, d.into_inner(), format!("the exclusion of `{rule}`"), Some(at)) {
                    Some(d) => Some(d),
                    None => continue,
                }
            }
        };
        exclusions.push(Exclusion { rule, why: e.why.unwrap_or_default(), dtype, role: e.role.map(|r| r.into_inner()), span: Some(span) });
    }
    let mut refusals = Vec::new();
    for r in raw.refuse {
        let span = r.span();
        let r = r.into_inner();
        let role = r.role.into_inner();
        let dtype = match r.dtype {
            None => None,
            Some(d) => {
                let at = d.span();
                match plan_dtype(&mut unknown_dtypes, d.into_inner(), format!("the refusal of role `{role}`"), Some(at)) {
                    Some(d) => Some(d),
                    None => continue,
                }
            }
        };
        refusals.push(Refusal { role, dtype, why: r.why.unwrap_or_default(), span: Some(span) });
    }
    let mut ops: BTreeMap<(String, String), Vec<Kernel>> = BTreeMap::new();
    for (domain, by_op) in raw.ops {
        let domain = normalize_domain(&domain).to_string();
        for (op, kernels) in by_op {
            let what = crate::Domain::qualify(&domain, &op);
            let entry = ops.entry((domain.clone(), op)).or_default();
            entry.extend(kernels.into_iter().map(|k| {
                let span = k.span();
                let RawKernel { since, until, source, note, host, types } = k.into_inner();
                let types = types
                    .into_iter()
                    .map(|(constraint, names)| {
                        let elems = names
                            .into_iter()
                            .filter_map(|name| {
                                let t = ElemType::parse(&name);
                                if t.is_none() {
                                    let place = format!("the claim of {what}, constraint {constraint}");
                                    let expected = "an ONNX element type such as f32, i64, bool".to_string();
                                    unknown_dtypes.push(UnknownDtype { name, place, expected, span: Some(span.clone()) });
                                }
                                t
                            })
                            .collect();
                        (constraint, elems)
                    })
                    .collect();
                Kernel { since, until, types, source: source.unwrap_or_default(), note, host, span: Some(span) }
            }));
        }
    }
    let mut quant = BTreeMap::new();
    let mut unknown_quant = Vec::new();
    for (bits, q) in raw.quant {
        let span = q.span();
        let q = q.into_inner();
        match QuantBits::parse(&bits) {
            Some(b) => {
                let place = format!("[quant.{bits}] dtype");
                let Some(dtype) = plan_dtype(&mut unknown_dtypes, q.dtype, place, Some(span.clone())) else { continue };
                quant.insert(
                    b,
                    QuantPlan {
                        bits: b,
                        format: q.format,
                        dtype,
                        accuracy_level: q.accuracy_level,
                        lm_head: q.lm_head,
                        embeddings: q.embeddings,
                        embedding_int4_zero_points_odd_blocks: q.embedding_int4_zero_points_odd_blocks,
                        embedding_gather_dequantize_linear: q.embedding_gather_dequantize_linear,
                        why: q.why.unwrap_or_default(),
                        span: Some(span),
                    },
                );
            }
            None => unknown_quant.push((bits, Some(span))),
        }
    }
    let static_kv_cache = raw.kv_cache.and_then(|k| k.static_cache).map(|k| {
        let span = k.span();
        let k = k.into_inner();
        let dtypes = k
            .dtypes
            .into_iter()
            .filter_map(|d| plan_dtype(&mut unknown_dtypes, d, "[kv_cache.static] dtypes".into(), Some(span.clone())))
            .collect();
        StaticKvCache { dtypes, why: k.why, span: Some(span) }
    });
    let lora = raw.lora.map(|k| {
        let span = k.span();
        let k = k.into_inner();
        let dtypes = k.dtypes.into_iter().filter_map(|d| plan_dtype(&mut unknown_dtypes, d, "[lora] dtypes".into(), Some(span.clone()))).collect();
        StaticKvCache { dtypes, why: k.why, span: Some(span) }
    });
    let name_span = raw.ep.name.span();
    let default_dtype_span = raw.ep.default_dtype.as_ref().map(|d| d.span());
    let default_dtype = raw
        .ep
        .default_dtype
        .and_then(|d| plan_dtype(&mut unknown_dtypes, d.into_inner(), "ep.default_dtype".into(), default_dtype_span.clone()));
    Ok(EpTable {
        name: raw.ep.name.into_inner(),
        provider: raw.ep.provider,
        notes: raw.ep.notes,
        file: file.to_string(),
        text: text.to_string(),
        name_span: Some(name_span),
        genai: raw.ep.genai.map(|g| GenaiProvider { name: g.name, options: g.options, source: g.source }),
        plans,
        role_plans,
        unknown_roles,
        exclusions,
        refusals,
        quant,
        unknown_quant,
        unknown_dtypes,
        static_kv_cache,
        lora,
        stages,
        stage_problems,
        stages_span,
        default_dtype,
        default_dtype_span,
        ops,
    })
}

/// `[ep] stages` as stages in order, with what is wrong with it: an unknown name, a stage
/// listed twice, a stage missing (every stage runs once: the list is the whole schedule).
fn stage_order(names: &[String]) -> (Vec<Stage>, Vec<String>) {
    let mut order = Vec::new();
    let mut problems = Vec::new();
    for n in names {
        match Stage::parse(n) {
            None => problems.push(format!("[ep] stages names `{n}`, which is no stage (the stages are {})", Stage::names())),
            Some(s) if order.contains(&s) => problems.push(format!("[ep] stages lists `{s}` twice")),
            Some(s) => order.push(s),
        }
    }
    for s in Stage::ALL {
        if !order.contains(&s) {
            problems.push(format!("[ep] stages does not list `{s}`: the list is the whole schedule, every stage once"));
        }
    }
    // A broken list still gives every stage once, in the listed order then the default's.
    for s in Stage::ALL {
        if !order.contains(&s) {
            order.push(s);
        }
    }
    (order, problems)
}

/// One `[role.R.D]` section as a plan, its stages in `order`.
fn plan_of(role: Role, dtype: DType, plan: toml::Spanned<RawPlan>, order: &[Stage]) -> DtypePlan {
    let rules = |v: Vec<toml::Spanned<String>>| -> Vec<RuleRef> {
        v.into_iter()
            .map(|s| {
                let span = s.span();
                RuleRef { id: s.into_inner(), span: Some(span) }
            })
            .collect()
    };
    let span = plan.span();
    let p = plan.into_inner();
    let mut stages = BTreeMap::new();
    for (stage, list) in [
        (Stage::Cleanup, p.cleanup),
        (Stage::Prefuse, p.prefuse),
        (Stage::Fuse, p.fuse),
        (Stage::Lower, p.lower),
        (Stage::Fold, p.fold),
    ] {
        stages.insert(stage, rules(list));
    }
    let forbidden = p
        .forbidden_ops
        .into_iter()
        .map(|f| {
            let span = f.span();
            let f = f.into_inner();
            let (domain, op) = split_op(&f.op);
            Forbidden { domain, op, why: f.why.unwrap_or_default(), span: Some(span) }
        })
        .collect();
    DtypePlan {
        dtype,
        role,
        stages,
        order: order.to_vec(),
        required: rules(p.required),
        not_applicable: p
            .not_applicable
            .into_iter()
            .map(|(rule, list)| {
                let list = list
                    .into_iter()
                    .map(|n| {
                        let span = n.span();
                        let n = n.into_inner();
                        NotApplicable { check: n.check, why: n.why.unwrap_or_default(), span: Some(span) }
                    })
                    .collect();
                (rule, list)
            })
            .collect(),
        forbidden,
        flags: rules(p.flags),
        limits: p.limits,
        notes: p.notes,
        span: Some(span),
    }
}
