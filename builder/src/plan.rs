//! One build's plan, resolved once before anything is written: the EP table and dtype, the
//! task, and per part its role, file, the table's plan for that role, the graph options and
//! the quantize step. [`crate::build`] writes the parts of a plan into a package;
//! [`crate::optimized_model_for`] runs the same plan in memory. Nothing else decides which
//! graphs a package has or which rule lists each one runs.

use crate::pipeline::{optimize, PipelineReport};
use crate::quantize::{QuantRequest, QuantStep};
use crate::{Error, Result};
use ep_sets::{DtypePlan, EpSets, EpTable};
use ir::{DType, Role};
use models::tasks::Task;
use models::{BuildOptions, Checkpoint, KvCache, Part, TiedHead};
use std::path::Path;

/// What a plan is resolved from: the parts of a [`crate::BuildRequest`] that choose graphs
/// and rule lists (not where or how the package is written).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlanRequest<'r> {
    pub model_dir: &'r Path,
    pub ep: &'r str,
    pub dtype: DType,
    pub task: Option<Task>,
    pub tied_head: TiedHead,
    pub kv_cache: KvCache,
    pub quant: Option<&'r QuantRequest>,
    /// `--lora NAME=DIR`: adapters whose targets get slots in the decoder.
    pub lora: &'r [crate::lora::LoraRequest],
    /// `--text-only`: a vision-language checkpoint's language model alone.
    pub text_only: bool,
}

/// A package's plan.
pub(crate) struct PackagePlan<'t> {
    pub table: &'t EpTable,
    pub task: Task,
    pub ckpt: Checkpoint,
    pub parts: Vec<PartPlan<'t>>,
    /// The adapters to convert, read and checked, by name (in `--lora` order).
    pub adapters: Vec<(String, crate::lora::peft::PeftAdapter)>,
    /// What the build report should say about the plan itself (`--text-only`).
    pub notes: Vec<String>,
}

/// One part's plan.
pub(crate) struct PartPlan<'t> {
    pub part: Part,
    /// The table's plan for the part's role and the build's dtype.
    pub plan: &'t DtypePlan,
    pub options: BuildOptions,
    /// The quantize step for this part (`--quant` quantizes the decoder; an encoder's weights
    /// only where the checkpoint is pre-quantized; other roles stay float).
    pub quant: Option<QuantStep>,
}

impl PackagePlan<'_> {
    /// Does the package run on onnxruntime-genai (it has a decoder part, so it gets a
    /// genai_config.json)?
    pub fn genai(&self) -> bool {
        self.parts.iter().any(|p| p.part.role == Role::Decoder)
    }
}

impl PartPlan<'_> {
    /// Builds the part's generic graph and runs its EP pipeline.
    pub fn optimized(&self, ckpt: &Checkpoint, table: &EpTable, explain: bool) -> Result<(ir::Model, PipelineReport)> {
        let mut model = self.part.build(ckpt, &self.options)?;
        let report = optimize(&mut model, table, self.plan, explain, self.quant.as_ref())?;
        Ok((model, report))
    }
}

/// Resolves the plan of `req` against `sets`: every (EP, role, dtype) plan, the quantize step
/// and the KV cache form are checked here, before any weight is read.
pub(crate) fn resolve<'t>(sets: &'t EpSets, req: &PlanRequest) -> Result<PackagePlan<'t>> {
    if !req.dtype.is_plan() {
        return Err(models::Error::Dtype { dtype: req.dtype, supported: DType::plan_names() }.into());
    }
    if sets.get(req.ep).is_none() {
        return Err(Error::UnknownEp { ep: req.ep.to_string(), available: sets.names().collect::<Vec<_>>().join(", ") });
    }
    let table = sets.plan(req.ep, req.dtype)?.0;
    let quant = resolve_quant(req.quant, req.model_dir, table, req.dtype)?;
    if let KvCache::Static { max_length } = req.kv_cache {
        table.static_kv_cache(req.dtype).map_err(|why| {
            Error::Request(format!("--kv-cache static (max length {max_length}) is not offered for ({}, {}): {why}", table.name, req.dtype))
        })?;
    }
    if !req.lora.is_empty() {
        table.lora(req.dtype).map_err(|why| Error::Request(format!("--lora is not offered for ({}, {}): {why}", table.name, req.dtype)))?;
    }
    let adapters = read_adapters(req.lora)?;
    let mut ckpt = Checkpoint::open(req.model_dir)?;
    let mut notes = Vec::new();
    if req.text_only {
        let source = ckpt.config.multimodal.as_ref().map(|m| m.model_type.clone());
        ckpt = ckpt.into_text_only()?;
        notes.push(format!(
            "--text-only: the package is the `{}` language model of the `{}` vision-language checkpoint; its vision tower and projector ({} tensors) are not read",
            ckpt.config.model_type,
            source.unwrap_or_default(),
            ckpt.unused().len()
        ));
    }
    let task = match req.task {
        Some(t) => t,
        None => Task::default_for(&ckpt)?,
    };
    let mut parts = Vec::new();
    for part in task.parts(&ckpt)? {
        let (_, plan) = sets.role_plan(req.ep, part.role, req.dtype)?;
        let mut options = BuildOptions { tied_head: req.tied_head, ..build_options(plan, req.dtype) };
        if part.has_kv_cache() {
            options.kv_cache = req.kv_cache;
        }
        // An encoder's own weights are quantized only where the checkpoint already is (an
        // import keeps the file's integers; `--quant` on an encoder is not offered yet).
        let imports = quant.as_ref().is_some_and(|q| q.source.is_some());
        let quant = if part.role == Role::Decoder || (part.role == Role::Encoder && imports) { quant.clone() } else { None };
        if part.role == Role::Encoder && quant.as_ref().is_some_and(|q| q.lm_head.is_some()) {
            return Err(Error::Request(format!("--quant-lm-head: task {task} builds an encoder, which has no head; drop the flag")));
        }
        if part.role == Role::Decoder {
            options.lora = crate::lora::targets(adapters.iter().map(|(_, a)| a));
        }
        parts.push(PartPlan { part, plan, options, quant });
    }
    if req.kv_cache != KvCache::Dynamic && !parts.iter().any(|p| p.part.has_kv_cache()) {
        return Err(Error::Request(format!(
            "--kv-cache static: task {task} has no KV cache (an encoder attends over its input only); drop --kv-cache and --max-length"
        )));
    }
    if quant.is_some() && !parts.iter().any(|p| p.quant.is_some()) {
        return Err(Error::Request(format!(
            "--quant: task {task} is not quantized yet (the quantize step knows a decoder's lm_head and embedding roles only); build the float package"
        )));
    }
    if !adapters.is_empty() && !parts.iter().any(|p| p.part.role == Role::Decoder) {
        return Err(Error::Request(format!("--lora: task {task} has no decoder; LoRA slots are built on a causal LM's projections only")));
    }
    Ok(PackagePlan { table, task, ckpt, parts, adapters, notes })
}

/// Reads every `--lora` folder (config keys and tensors checked) before any weight of the base
/// is read; a name given twice is refused.
fn read_adapters(reqs: &[crate::lora::LoraRequest]) -> Result<Vec<(String, crate::lora::peft::PeftAdapter)>> {
    let mut out: Vec<(String, crate::lora::peft::PeftAdapter)> = Vec::new();
    for r in reqs {
        if out.iter().any(|(n, _)| *n == r.name) {
            return Err(Error::Request(format!("--lora: the adapter name `{}` is given twice", r.name)));
        }
        out.push((r.name.clone(), crate::lora::peft::PeftAdapter::read(&r.dir)?));
    }
    Ok(out)
}

/// The `--quant` request checked against the table's `[quant.<bits>]` section, or the import
/// of a pre-quantized checkpoint (its config's keys, refused when it is a format the tool
/// cannot keep), before any weight is read (quantize/import.rs).
fn resolve_quant(req: Option<&QuantRequest>, model_dir: &Path, table: &EpTable, dtype: DType) -> Result<Option<QuantStep>> {
    let source = models::QuantSource::detect(model_dir)?;
    crate::quantize::import::resolve(req, source.as_ref(), table, dtype)
}

/// The task options an EP table's structural flags ask for. Flags reach `models` by name,
/// never as an EP: `concrete_dims` fixes the dims the table's `limits` give (`batch`).
pub fn build_options(plan: &DtypePlan, dtype: DType) -> BuildOptions {
    let mut options = BuildOptions { dtype, ..Default::default() };
    if plan.has_flag("concrete_dims") {
        if let Some(&batch) = plan.limits.get("batch") {
            options.concrete_dims.insert("batch_size".into(), batch);
        }
    }
    options
}
