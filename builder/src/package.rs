//! One build: resolve the plan (crate::plan), build and optimize each part's graph, write the
//! package of parts.

use crate::companions::{Companions, CHECKPOINT_FILES};
use crate::output::Claim;
use crate::pipeline::PipelineReport;
use crate::plan::{self, PartPlan, PlanRequest};
use crate::quantize::{QuantRequest, QuantStep, TensorReport};
use crate::{genai_config, Error, Result};
use ep_sets::EpSets;
use ir::{DType, Role};
use models::tasks::Task;
use models::Part;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

/// The `tool` field of build_report.json: how `--force` recognises a package it may replace.
pub(crate) const TOOL_NAME: &str = "onnx-tailor";
/// The build report's file name.
pub(crate) const BUILD_REPORT: &str = "build_report.json";
/// Files a one-part package written before build_report.json listed its files held.
const LEGACY_PACKAGE_FILES: &[&str] = &["model.onnx", "model.onnx.data", "genai_config.json", BUILD_REPORT];
/// genai_config.json: only decoder packages hold one (onnxruntime-genai runs decoders).
const GENAI_CONFIG: &str = "genai_config.json";
/// Files a package written before the report listed them may hold.
pub(crate) fn legacy_package_files() -> Vec<&'static str> {
    LEGACY_PACKAGE_FILES.iter().chain(CHECKPOINT_FILES).copied().collect()
}

/// The most producer threads a build starts: past a few per core they only cost memory (each
/// holds a block buffer), and a typo such as `--threads 100000` must not start thousands.
pub const MAX_THREADS: usize = 64;

#[derive(Clone, Debug)]
pub struct BuildRequest {
    pub model_dir: PathBuf,
    pub output: PathBuf,
    pub ep: String,
    pub dtype: DType,
    pub force: bool,
    /// How a tied lm_head reads the embedding.
    pub tied_head: models::TiedHead,
    /// The decoder's KV cache form (`--kv-cache`, `--max-length`).
    pub kv_cache: models::KvCache,
    /// Threads producing model.onnx.data's blocks (0 = one per core; two more write them).
    /// Output is identical either way.
    pub threads: usize,
    /// Keep one diagnostic record per candidate node in the report.
    pub explain: bool,
    /// Make warnings (missing tokenizer files) errors.
    pub strict: bool,
    /// Weight-only quantization (`--quant`); `None` keeps float weights.
    pub quant: Option<QuantRequest>,
    /// What the package computes (`--task`); `None`: the checkpoint's default
    /// ([`Task::default_for`]).
    pub task: Option<Task>,
    /// LoRA adapters (`--lora NAME=DIR`): their targets get slots, each its file
    /// (docs/adapters.md).
    pub lora: Vec<crate::lora::LoraRequest>,
    /// `--text-only`: build a vision-language checkpoint's language model alone, a decoder
    /// package on `input_ids`.
    pub text_only: bool,
}

impl BuildRequest {
    /// A request with the defaults of the command line (`default` EP, f32, no force).
    pub fn new(model_dir: impl Into<PathBuf>, output: impl Into<PathBuf>) -> Self {
        BuildRequest {
            model_dir: model_dir.into(),
            output: output.into(),
            ep: "default".into(),
            dtype: DType::F32,
            force: false,
            tied_head: models::TiedHead::Shared,
            kv_cache: models::KvCache::Dynamic,
            threads: 0,
            explain: false,
            strict: false,
            quant: None,
            task: None,
            lora: Vec::new(),
            text_only: false,
        }
    }
}

/// What a build wrote.
#[derive(Clone, Debug)]
pub struct BuildReport {
    pub output: PathBuf,
    /// Every part written, in the plan's order.
    pub parts: Vec<PartReport>,
    pub copied_files: Vec<String>,
    /// Things a user should know about the package (e.g. a runtime model-type fallback).
    pub notes: Vec<String>,
    /// Problems that make the package less useful, such as missing tokenizer files (errors
    /// under `strict`).
    pub warnings: Vec<String>,
    /// The task the package was built for.
    pub task: Task,
    pub seconds: f64,
}

/// What a build wrote for one part.
#[derive(Clone, Debug)]
pub struct PartReport {
    pub role: Role,
    /// The model file in the package (its external data is `<file>.data`).
    pub file: String,
    pub nodes: usize,
    pub initializers: usize,
    pub model_bytes: u64,
    pub data_bytes: u64,
    /// What the EP pipeline did and what validation found (also in build_report.json).
    pub pipeline: PipelineReport,
    /// Every quantized weight with its error (empty when the part is float).
    pub quantized: Vec<TensorReport>,
}

impl BuildReport {
    /// Bytes of every part's model and data files.
    pub fn bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.model_bytes + p.data_bytes).sum()
    }
}

impl BuildRequest {
    /// What of the request chooses the graphs and rule lists.
    fn plan_request(&self) -> PlanRequest<'_> {
        PlanRequest {
            model_dir: &self.model_dir,
            ep: &self.ep,
            dtype: self.dtype,
            task: self.task,
            tied_head: self.tied_head,
            kv_cache: self.kv_cache,
            quant: self.quant.as_ref(),
            lora: &self.lora,
            text_only: self.text_only,
        }
    }
}

/// Builds the package described by `req`. On error nothing is left at `req.output` (an
/// existing folder given with `force` is untouched).
pub fn build(req: &BuildRequest, progress: &mut dyn FnMut(&str)) -> Result<BuildReport> {
    let start = Instant::now();
    let started = SystemTime::now();
    if req.threads > MAX_THREADS {
        return Err(Error::Request(format!(
            "--threads {} is more than the limit of {MAX_THREADS}; use 0 for one per core",
            req.threads
        )));
    }
    // The plan (EP, dtype, every part's role plan, quantization, cache form) is resolved
    // before any weight is read.
    let sets = EpSets::builtin()?;
    progress(&format!("reading checkpoint {}", req.model_dir.display()));
    let mut plan = plan::resolve(&sets, &req.plan_request())?;
    let claim = Claim::new(&req.output, &req.model_dir, req.force, started)?;
    let mut notes = claim.notes.clone();
    notes.extend(plan.notes.iter().cloned());

    // A GGUF file carries its tokenizer as metadata: converted first (a tokenizer model that is
    // not converted is refused), then `tokenizer.json` streamed into the staging folder (which
    // is made this early for a GGUF build only; a failed build removes it) and the metadata
    // forgotten, so that neither is held while the weights are written.
    let mut staged = None;
    let mut tokenizer_warnings = Vec::new();
    let tokenizer_converted = match &plan.ckpt.gguf {
        Some(file) => {
            let converted = crate::gguf_tokenizer::convert(file, &req.model_dir)?;
            let staging = claim.stage()?;
            let name = "tokenizer.json";
            std::fs::File::create(staging.path().join(name))
                .and_then(|f| converted.write_tokenizer_json(f))
                .map_err(|e| Error::write_file(&req.output, name, e))?;
            write_json(staging.path(), &req.output, "tokenizer_config.json", &converted.config)?;
            tokenizer_warnings = converted.warnings;
            staged = Some(staging);
            true
        }
        None => false,
    };
    plan.ckpt.forget_gguf_tokenizer();
    let (table, ckpt, task) = (plan.table, &plan.ckpt, plan.task);
    let companions = if tokenizer_converted { Companions::none() } else { Companions::of(&req.model_dir, plan.genai()) };
    let mut warnings = companions.warnings.clone();
    warnings.extend(tokenizer_warnings);
    if req.strict && !warnings.is_empty() {
        return Err(Error::Strict { warnings });
    }
    let mut built = Vec::with_capacity(plan.parts.len());
    for part in &plan.parts {
        progress(&format!(
            "building {} {} graph ({task}): {} layers, hidden {}, dtype {}",
            ckpt.config.model_type,
            part.part.role,
            ckpt.config.num_hidden_layers,
            ckpt.config.hidden_size,
            req.dtype
        ));
        progress(&format!("applying the {} {} pipeline ({})", table.name, req.dtype, part.plan.role.section(req.dtype)));
        let (model, pipeline) = part.optimized(ckpt, table, req.explain)?;
        warnings.extend(left_padding_warning(table, req.dtype, &pipeline));
        warnings.extend(float_experts_warning(table, &pipeline));
        warnings.extend(crate::quantize::import::dequantized_warning(&pipeline));
        notes.extend(crate::quantize::import::int8_experts_note(&pipeline));
        notes.extend(crate::quantize::import::requantized_note(&pipeline));
        notes.extend(pipeline.not_implemented.iter().map(|r| {
            format!("{}.toml lists `{r}` for {} {}, which this build does not implement yet; it was skipped", table.name, part.part.role, req.dtype)
        }));
        built.push((part, model, pipeline));
    }
    let (lora_report, converted) = convert_adapters(&plan, &built)?;
    // Warnings the pipeline raised fail a strict build too, before the weights are written (a
    // GGUF build's staged tokenizer is removed with its staging folder).
    if req.strict && !warnings.is_empty() {
        return Err(Error::Strict { warnings });
    }

    let genai = genai_files(req, &plan, &built, &mut notes)?;
    let staging = match staged {
        Some(staging) => staging,
        None => claim.stage()?,
    };
    let mut parts = Vec::with_capacity(built.len());
    let mut files: Vec<String> = Vec::new();
    let mut part_inputs = Vec::new();
    for (part, model, pipeline) in built {
        let inputs: Vec<&str> = model.graph.inputs.iter().map(|i| i.name.as_str()).collect();
        part_inputs.push(format!("{}: {}", part.part.file, inputs.join(", ")));
        let saved = write_part(req, &part.part, &model, staging.path(), progress)?;
        files.extend([part.part.file.to_string(), part.part.data_file()]);
        parts.push(PartReport {
            role: part.part.role,
            file: part.part.file.to_string(),
            nodes: model.graph.nodes.len(),
            initializers: saved.external_tensors + saved.inline_tensors,
            model_bytes: saved.model_bytes,
            data_bytes: saved.data_bytes,
            quantized: pipeline.quant.as_ref().map(|q| q.report()).unwrap_or_default(),
            pipeline,
        });
    }
    for (name, value) in &genai {
        write_json(staging.path(), &req.output, name, value)?;
        files.push(name.to_string());
    }
    if !plan.genai() {
        notes.push(format!(
            "genai_config.json is not written: onnxruntime-genai runs decoders only; this {task} package runs on ONNX Runtime directly (inputs {})",
            part_inputs.join("; ")
        ));
    }
    if !converted.is_empty() {
        let dir = staging.path().join(crate::lora::ADAPTERS_DIR);
        std::fs::create_dir(&dir).map_err(|e| Error::write_file(&req.output, crate::lora::ADAPTERS_DIR, e))?;
        for c in &converted {
            let file = crate::lora::file_of(&c.name);
            progress(&format!("writing {file}"));
            std::fs::write(staging.path().join(&file), &c.bytes).map_err(|e| Error::write_file(&req.output, &file, e))?;
            files.push(file);
        }
    }
    if tokenizer_converted {
        files.extend(["tokenizer.json".to_string(), "tokenizer_config.json".to_string()]);
        notes.push("tokenizer.json and tokenizer_config.json are converted from the GGUF file's tokenizer.ggml.* metadata".into());
    }
    let copied_files = copy_checkpoint_files(&req.model_dir, staging.path(), &req.output, &companions.copyable)?;
    files.push(BUILD_REPORT.to_string());
    files.extend(copied_files.iter().cloned());
    let part_json: Vec<serde_json::Value> = plan
        .parts
        .iter()
        .zip(&parts)
        .map(|(plan_part, written)| part_json(plan_part, written))
        .collect();
    let report = serde_json::json!({
        "tool": TOOL_NAME,
        "tool_version": env!("CARGO_PKG_VERSION"),
        "ep": table.name,
        "provider": table.provider,
        "dtype": req.dtype.name(),
        // A vision-language checkpoint's own type (`qwen2_5_vl`), not its text model's.
        "model_type": ckpt.config.multimodal.as_ref().map_or(&ckpt.config.model_type, |m| &m.model_type),
        "task": task.name(),
        "genai_config": plan.genai(),
        "files": files,
        "tokenizer": { "genai_loadable": companions.genai_loadable() || tokenizer_converted },
        "notes": notes,
        "warnings": warnings,
        "parts": part_json,
    });
    let mut report = report;
    if let Some(lora) = lora_report {
        report["lora"] = lora;
    }
    write_json(staging.path(), &req.output, BUILD_REPORT, &report)?;
    warnings.extend(claim.commit(staging)?);

    Ok(BuildReport { output: req.output.clone(), parts, copied_files, notes, warnings, task, seconds: start.elapsed().as_secs_f64() })
}

/// The onnxruntime-genai files of a package with a decoder part: genai_config.json (with the
/// vision and embedding sections and processor_config.json for a vision-language package),
/// as (file name, content); none for an encoder package.
fn genai_files(
    req: &BuildRequest,
    plan: &plan::PackagePlan,
    built: &[(&PartPlan, ir::Model, PipelineReport)],
    notes: &mut Vec<String>,
) -> Result<Vec<(&'static str, serde_json::Value)>> {
    let (table, ckpt) = (plan.table, &plan.ckpt);
    let graph_of = |role: Role| built.iter().find(|(p, _, _)| p.part.role == role).map(|(p, m, _)| (p.part.file, &m.graph));
    let Some((decoder_file, decoder)) = graph_of(Role::Decoder) else { return Ok(Vec::new()) };
    let generation = if ckpt.gguf.is_some() { None } else { read_generation_config(&req.model_dir)? };
    let provider_options: Vec<serde_json::Value> =
        table.genai_provider_options().map(|p| vec![serde_json::json!({ p.name.clone(): p.options })]).unwrap_or_default();
    let (mut config, genai_notes) = genai_config(&ckpt.config, decoder, decoder_file, provider_options, generation.as_ref());
    // A vision-language package's type is the checkpoint's own, not its text model's.
    if ckpt.config.multimodal.is_none() {
        notes.extend(genai_notes);
    }
    if let Some(p) = table.genai_provider_options() {
        let source = p.source.as_deref().unwrap_or("no source given");
        notes.push(format!("genai_config.json provider_options `{}` come from {}.toml [ep.genai]: {source}", p.name, table.name));
    }
    let mut files = Vec::new();
    if let (Some(m), Some((vision_file, vision)), Some((embedding_file, _))) = (&ckpt.config.multimodal, graph_of(Role::Vision), graph_of(Role::Embedding)) {
        crate::genai_vl::extend_config(&mut config, m, vision_file, vision, embedding_file)?;
        files.push((crate::genai_vl::PROCESSOR_CONFIG, crate::genai_vl::processor_config(&req.model_dir, m, models::arch::vision::pixel_geometry(&ckpt.config)?)?));
    }
    files.insert(0, (GENAI_CONFIG, config));
    Ok(files)
}

/// The decoder's LoRA slots (read from its optimized graph) and every `--lora` adapter
/// converted for them, checked before anything is written: build_report.json's `lora` entry
/// (`None` for a plain package) and the files' bytes.
fn convert_adapters(
    plan: &plan::PackagePlan,
    built: &[(&PartPlan, ir::Model, PipelineReport)],
) -> Result<(Option<serde_json::Value>, Vec<crate::lora::Converted>)> {
    let Some((_, decoder, _)) = built.iter().find(|(p, _, _)| p.part.role == Role::Decoder) else { return Ok((None, Vec::new())) };
    let slots = crate::lora::Slots::of(&decoder.graph);
    // No slots: a plain package, or adapters whose targets the graph has none of (refused
    // below, naming the tensor).
    if slots.0.is_empty() && plan.adapters.is_empty() {
        return Ok((None, Vec::new()));
    }
    let converted = plan.adapters.iter().map(|(name, a)| crate::lora::convert(name, a, &slots)).collect::<Result<Vec<_>>>()?;
    let reports: Vec<serde_json::Value> = converted.iter().map(|c| c.report.clone()).collect();
    Ok((Some(crate::lora::report_json(&slots, &reports)), converted))
}

/// Writes one part's model file and external data into the staging folder, with a byte
/// progress bar.
fn write_part(req: &BuildRequest, part: &Part, model: &ir::Model, staging: &Path, progress: &mut dyn FnMut(&str)) -> Result<ir::SaveReport> {
    progress(&format!("writing {} and {}", part.file, part.data_file()));
    let bar = write_progress_bar();
    let on_bytes: ir::Progress = {
        let bar = bar.clone();
        std::sync::Arc::new(move |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        })
    };
    let write = ir::WriteOptions { threads: req.threads, progress: Some(on_bytes), ..Default::default() };
    let saved = ir::save_model_with(model, staging, part.file, write);
    bar.finish_and_clear();
    // The error names the staging folder's file; say which package it was for.
    saved.map_err(|source| match source {
        ir::Error::Io { .. } => Error::Write { output: req.output.clone(), source },
        ir::Error::F16Overflow { .. } => Error::Request(format!(
            "{source}; build with a dtype that holds it: `--dtype f32`, or `--dtype bf16` where the {} table lists it (`tailor build --help`); nothing was written",
            req.ep
        )),
        other => Error::Ir(other),
    })
}

/// One part's entry in build_report.json: its role, files and plan, what the pipeline did,
/// what validation found and how it was quantized.
fn part_json(plan: &PartPlan, written: &PartReport) -> serde_json::Value {
    serde_json::json!({
        "role": written.role.name(),
        "file": written.file,
        "data_file": plan.part.data_file(),
        "plan": plan.plan.role.section(plan.plan.dtype),
        "nodes": written.nodes,
        "initializers": written.initializers,
        "model_bytes": written.model_bytes,
        "data_bytes": written.data_bytes,
        "pipeline": written.pipeline,
        "quantization": plan.quant.as_ref().map(|q| quantization_json(q, &written.pipeline, &written.quantized)),
        "validation": { "ok": true, "problems": [] },
    })
}

/// The rule that turns GroupQueryAttention back into its right-padded form, listed by the
/// tables whose kernel cannot take the attention bias a left-padded batch needs.
/// A quantized build whose expert stacks stay float (an unfused MoE block, a table without
/// QMoE, sizes the block does not divide) is far larger than `--quant` suggests, so it says so.
fn float_experts_warning(table: &ep_sets::EpTable, pipeline: &PipelineReport) -> Option<String> {
    let q = pipeline.quant.as_ref()?;
    (q.float_experts > 0).then(|| {
        format!(
            "{} expert weight stack(s) stay float on {}: only QMoE quantizes experts, where the table fuses com.microsoft.MoE and claims QMoE (cpu); build_report.json gives each one's reason",
            q.float_experts, table.name
        )
    })
}

const RIGHT_PADDING_RULE: &str = "lower.gqa_right_padding";

/// A warning when this build's GroupQueryAttention is exact for unpadded and right-padded
/// batches only (the table lists `lower.gqa_right_padding`, and it fired): onnxruntime-genai pads
/// batched prompts on the left, so the user must know before running a batch.
fn left_padding_warning(table: &ep_sets::EpTable, dtype: DType, pipeline: &PipelineReport) -> Option<String> {
    let fired: usize = pipeline
        .diagnostics
        .rules
        .iter()
        .filter(|r| r.rule == RIGHT_PADDING_RULE || r.rule.starts_with(&format!("{RIGHT_PADDING_RULE}.")))
        .map(|r| r.fired)
        .sum();
    (fired > 0).then(|| {
        format!(
            "left padding is unsupported on {} ({dtype}): {}.toml lists `{RIGHT_PADDING_RULE}` ({fired} GroupQueryAttention node(s) rewritten), \
             so rows of a left-padded batch (onnxruntime-genai's batched prompts) get wrong logits; unpadded and right-padded batches are exact. \
             The table says why",
            table.name, table.name
        )
    })
}

/// build_report.json's `quantization` entry: the settings, what stayed float and why, and
/// every quantized tensor with its weight error.
fn quantization_json(step: &QuantStep, pipeline: &PipelineReport, tensors: &[TensorReport]) -> serde_json::Value {
    let kept: Vec<serde_json::Value> = pipeline
        .quant
        .iter()
        .flat_map(|q| q.kept_float.iter().map(|(w, why)| serde_json::json!({ "weight": w, "why": why })))
        .collect();
    if let Some(source) = &step.source {
        return crate::quantize::import::quantization_json(source, step, kept, tensors);
    }
    serde_json::json!({
        "bits": step.linear.map(|b| b.count()),
        "format": step.format.name(),
        "block_size": step.block_size,
        "symmetric": step.symmetric,
        "method": format!("{:?}", step.method).to_lowercase(),
        "accuracy_level": step.accuracy_level,
        "lm_head": step.lm_head.map_or("none", |b| b.name()),
        "embeddings": step.embeddings.map_or("none", |b| b.name()),
        "kept_float": kept,
        "tensors": tensors,
    })
}

/// The optimized, validated model of a checkpoint for an (EP, dtype), in memory: what `build`
/// writes, for tests and tools that do not need a package.
pub fn optimized_model(model_dir: &Path, ep: &str, dtype: DType, explain: bool) -> Result<(ir::Model, PipelineReport)> {
    optimized_model_with(model_dir, ep, dtype, explain, None)
}

/// [`optimized_model`] with weight quantization. The task is the checkpoint's default.
pub fn optimized_model_with(model_dir: &Path, ep: &str, dtype: DType, explain: bool, quant: Option<&QuantRequest>) -> Result<(ir::Model, PipelineReport)> {
    optimized_model_for(model_dir, None, ep, dtype, explain, quant)
}

/// [`optimized_model_with`] for a chosen task (`None`: the checkpoint's default): the package's
/// main part (its decoder, or its encoder), from the same plan `build` resolves.
pub fn optimized_model_for(
    model_dir: &Path,
    task: Option<Task>,
    ep: &str,
    dtype: DType,
    explain: bool,
    quant: Option<&QuantRequest>,
) -> Result<(ir::Model, PipelineReport)> {
    let mut parts = optimized_parts(model_dir, task, ep, dtype, explain, quant)?;
    let main = parts.iter().position(|(p, _, _)| matches!(p.role, Role::Decoder | Role::Encoder)).unwrap_or(0);
    let (_, model, report) = parts.swap_remove(main);
    Ok((model, report))
}

/// Every part of the package `build` would write, optimized and validated, in memory.
pub fn optimized_parts(
    model_dir: &Path,
    task: Option<Task>,
    ep: &str,
    dtype: DType,
    explain: bool,
    quant: Option<&QuantRequest>,
) -> Result<Vec<(Part, ir::Model, PipelineReport)>> {
    let sets = EpSets::builtin()?;
    let request = PlanRequest { model_dir, ep, dtype, task, tied_head: models::TiedHead::Shared, kv_cache: models::KvCache::Dynamic, quant, lora: &[], text_only: false };
    let plan = plan::resolve(&sets, &request)?;
    plan.parts
        .iter()
        .map(|p| p.optimized(&plan.ckpt, plan.table, explain).map(|(m, r)| (p.part.clone(), m, r)))
        .collect()
}

/// The checkpoint's `generation_config.json`, when present (read as config.json is: a
/// regular file of bounded size, else an error naming it).
fn read_generation_config(dir: &Path) -> Result<Option<serde_json::Value>> {
    let path = dir.join("generation_config.json");
    let Some(bytes) = ir::read_regular(&path, ir::SETTINGS_LIMIT)? else { return Ok(None) };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| Error::Config { path, reason: format!("not valid JSON: {e}") })
}

/// Writes `name` into the staging folder; an error names the file in the package at `output`.
fn write_json(staging: &Path, output: &Path, name: &str, value: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value).expect("JSON values serialize");
    std::fs::write(staging.join(name), text + "\n").map_err(|e| Error::write_file(output, name, e))
}

/// Copies the checkpoint's `names` (regular files, checked by [`Companions::of`]) into the
/// staging folder `to` of the package at `output`; returns those copied.
fn copy_checkpoint_files(from: &Path, to: &Path, output: &Path, names: &[&'static str]) -> Result<Vec<String>> {
    let mut copied = Vec::new();
    for name in names {
        copy_into_package(&from.join(name), &to.join(name), output, name)?;
        copied.push(name.to_string());
    }
    Ok(copied)
}

/// Copies `src` to `dst`, telling a failed read (the checkpoint's file) from a failed write
/// (`name` in the package at `output`: a full disk is said so), which `std::fs::copy` does not.
fn copy_into_package(src: &Path, dst: &Path, output: &Path, name: &str) -> Result<()> {
    use std::io::{ErrorKind, Read, Write};
    let mut from = std::fs::File::open(src).map_err(|e| Error::io(src, e))?;
    let mut to = std::fs::File::create(dst).map_err(|e| Error::write_file(output, name, e))?;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io(src, e)),
        };
        to.write_all(&buf[..n]).map_err(|e| Error::write_file(output, name, e))?;
    }
}

/// A byte-progress bar for the data file on stderr; indicatif draws nothing when stderr is not
/// a terminal (pipes, CI logs, tests), so only people watching a long write see it.
fn write_progress_bar() -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template("  {bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} {eta}") {
        bar.set_style(style);
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full disk while a tokenizer file is copied or a JSON file written names the file in
    /// the package and says the disk is full, not the checkpoint's file: /dev/full fails every
    /// write with ENOSPC. A failed read still names the checkpoint's file.
    #[test]
    fn a_full_disk_names_the_package_file_and_says_so() {
        let full = Path::new("/dev/full");
        assert!(full.exists(), "this test writes to /dev/full (a Linux device every write to fails with ENOSPC)");
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("tokenizer.json");
        std::fs::write(&src, b"{\"model\": {}}").unwrap();
        let output = Path::new("/somewhere/pkg");
        let e = copy_into_package(&src, full, output, "tokenizer.json").unwrap_err().to_string();
        assert!(e.contains("cannot write tokenizer.json in the package /somewhere/pkg") && e.contains("the disk is full"), "{e}");
        assert!(!e.contains(&dir.path().display().to_string()), "the checkpoint's file is not blamed: {e}");
        let e = write_json(Path::new("/dev"), output, "full", &serde_json::json!({"a": 1})).unwrap_err().to_string();
        assert!(e.contains("cannot write full in the package /somewhere/pkg") && e.contains("the disk is full"), "{e}");
        let missing = dir.path().join("vocab.txt");
        let e = copy_into_package(&missing, &dir.path().join("out"), output, "vocab.txt").unwrap_err().to_string();
        assert!(e.contains(&missing.display().to_string()), "{e}");
        // The copy itself is exact.
        copy_into_package(&src, &dir.path().join("copy"), output, "tokenizer.json").unwrap();
        assert_eq!(std::fs::read(dir.path().join("copy")).unwrap(), std::fs::read(&src).unwrap());
    }
}
