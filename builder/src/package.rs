//! One build: read the checkpoint, build the generic graph, write the package.

use crate::companions::{Companions, CHECKPOINT_FILES};
use crate::output::Claim;
use crate::pipeline::{optimize, PipelineReport};
use crate::quantize::{QuantRequest, QuantStep, TensorReport};
use crate::{genai_config, Error, Result};
use ep_sets::EpSets;
use ir::DType;
use models::tasks::Task;
use models::{BuildOptions, Checkpoint};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

/// The `tool` field of build_report.json: how `--force` recognises a package it may replace.
pub(crate) const TOOL_NAME: &str = "onnx-tailor";
/// The build report's file name.
pub(crate) const BUILD_REPORT: &str = "build_report.json";
/// Files every package may hold (an encoder package has no genai_config.json).
const PACKAGE_FILES: &[&str] = &["model.onnx", "model.onnx.data", "genai_config.json", BUILD_REPORT];
/// genai_config.json: only decoder packages hold one (onnxruntime-genai runs decoders).
const GENAI_CONFIG: &str = "genai_config.json";
/// Files a package written before the report listed them may hold.
pub(crate) fn legacy_package_files() -> Vec<&'static str> {
    PACKAGE_FILES.iter().chain(CHECKPOINT_FILES).copied().collect()
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
        }
    }
}

#[derive(Clone, Debug)]
pub struct BuildReport {
    pub output: PathBuf,
    pub nodes: usize,
    pub initializers: usize,
    pub model_bytes: u64,
    pub data_bytes: u64,
    pub copied_files: Vec<String>,
    /// Things a user should know about the package (e.g. a runtime model-type fallback).
    pub notes: Vec<String>,
    /// Problems that make the package less useful, such as missing tokenizer files (errors
    /// under `strict`).
    pub warnings: Vec<String>,
    /// What the EP pipeline did and what validation found (also in build_report.json).
    pub pipeline: PipelineReport,
    /// The task the package was built for.
    pub task: Task,
    /// Every quantized weight with its error (empty without `--quant`).
    pub quantized: Vec<TensorReport>,
    pub seconds: f64,
}

/// Builds the package described by `req`. On error nothing is left at `req.output` (an
/// existing folder given with `force` is untouched).
pub fn build(req: &BuildRequest, progress: &mut dyn FnMut(&str)) -> Result<BuildReport> {
    let start = Instant::now();
    let started = SystemTime::now();
    if !req.dtype.is_plan() {
        return Err(models::Error::Dtype {
            dtype: req.dtype,
            supported: DType::plan_names(),
        }
        .into());
    }
    if req.threads > MAX_THREADS {
        return Err(Error::Request(format!(
            "--threads {} is more than the limit of {MAX_THREADS}; use 0 for one per core",
            req.threads
        )));
    }
    // The (EP, dtype) pair is resolved before any weight is read.
    let sets = EpSets::builtin()?;
    if sets.get(&req.ep).is_none() {
        return Err(Error::UnknownEp { ep: req.ep.clone(), available: sets.names().collect::<Vec<_>>().join(", ") });
    }
    let table = sets.plan(&req.ep, req.dtype)?.0;
    let quant = resolve_quant(req.quant.as_ref(), table, req.dtype)?;
    if let models::KvCache::Static { max_length } = req.kv_cache {
        table.static_kv_cache(req.dtype).map_err(|why| {
            Error::Request(format!("--kv-cache static (max length {max_length}) is not offered for ({}, {}): {why}", table.name, req.dtype))
        })?;
    }
    let claim = Claim::new(&req.output, &req.model_dir, req.force, started)?;
    let mut notes = claim.notes.clone();

    progress(&format!("reading checkpoint {}", req.model_dir.display()));
    let ckpt = Checkpoint::open(&req.model_dir)?;
    let task = match req.task {
        Some(t) => t,
        None => Task::default_for(&ckpt)?,
    };
    task.check(&ckpt)?;
    // The plan of the sub-model's role: an encoder runs its own rule lists (no
    // GroupQueryAttention, no KV-cache rules), from the table's [role.encoder.*] sections.
    let (table, plan) = sets.role_plan(&req.ep, role_of(task), req.dtype)?;
    if task.is_encoder() && req.kv_cache != models::KvCache::Dynamic {
        return Err(Error::Request(format!("--kv-cache static: task {task} has no KV cache (an encoder attends over its input only); drop --kv-cache and --max-length")));
    }
    if task.is_encoder() && quant.is_some() {
        return Err(Error::Request(format!(
            "--quant: task {task} is not quantized yet (the quantize step knows a decoder's lm_head and embedding roles only); build the float package"
        )));
    }
    let companions = Companions::of(&req.model_dir, !task.is_encoder());
    let mut warnings = companions.warnings.clone();
    if req.strict && !warnings.is_empty() {
        return Err(Error::Strict { warnings });
    }
    progress(&format!(
        "building {} {task} graph: {} layers, hidden {}, dtype {}",
        ckpt.config.model_type,
        ckpt.config.num_hidden_layers,
        ckpt.config.hidden_size,
        req.dtype
    ));
    let options = BuildOptions { tied_head: req.tied_head, kv_cache: req.kv_cache, ..build_options(plan, req.dtype) };
    let mut model = task.build(&ckpt, &options)?;
    progress(&format!("applying the {} {} pipeline", table.name, req.dtype));
    let pipeline = optimize(&mut model, table, plan, req.explain, quant.as_ref())?;
    warnings.extend(left_padding_warning(table, req.dtype, &pipeline));
    warnings.extend(float_experts_warning(table, &pipeline));
    // Warnings the pipeline raised fail a strict build too, before anything is written.
    if req.strict && !warnings.is_empty() {
        return Err(Error::Strict { warnings });
    }

    let staging = claim.stage()?;
    progress("writing model.onnx and model.onnx.data");
    let bar = write_progress_bar();
    let progress: ir::Progress = {
        let bar = bar.clone();
        std::sync::Arc::new(move |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        })
    };
    let write = ir::WriteOptions { threads: req.threads, progress: Some(progress), ..Default::default() };
    let saved = ir::save_model_with(&model, staging.path(), "model.onnx", write);
    bar.finish_and_clear();
    // The error names the staging folder's file; say which package it was for.
    let saved = saved.map_err(|source| match source {
        ir::Error::Io { .. } => Error::Write { output: req.output.clone(), source },
        other => Error::Ir(other),
    })?;
    if task.is_encoder() {
        notes.push(format!(
            "genai_config.json is not written: onnxruntime-genai runs decoders only; this {task} package runs on ONNX Runtime directly (inputs {})",
            model.graph.inputs.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ")
        ));
    } else {
        let generation = read_generation_config(&req.model_dir)?;
        let provider_options: Vec<serde_json::Value> = table
            .genai_provider_options()
            .map(|p| vec![serde_json::json!({ p.name.clone(): p.options })])
            .unwrap_or_default();
        let (config, genai_notes) = genai_config(&ckpt.config, &model.graph, provider_options, generation.as_ref());
        notes.extend(genai_notes);
        if let Some(p) = table.genai_provider_options() {
            let source = p.source.as_deref().unwrap_or("no source given");
            notes.push(format!("genai_config.json provider_options `{}` come from {}.toml [ep.genai]: {source}", p.name, table.name));
        }
        write_json(staging.path(), &req.output, GENAI_CONFIG, &config)?;
    }
    notes.extend(pipeline.not_implemented.iter().map(|r| {
        format!("{}.toml lists `{r}` for {}, which this build does not implement yet; it was skipped", table.name, req.dtype)
    }));
    let quantized = pipeline.quant.as_ref().map(|q| q.report()).unwrap_or_default();
    let copied_files = copy_checkpoint_files(&req.model_dir, staging.path(), &req.output, &companions.copyable)?;
    let files: Vec<&str> = PACKAGE_FILES
        .iter()
        .copied()
        .filter(|f| !(task.is_encoder() && *f == GENAI_CONFIG))
        .chain(copied_files.iter().map(String::as_str))
        .collect();
    let report = serde_json::json!({
        "tool": TOOL_NAME,
        "tool_version": env!("CARGO_PKG_VERSION"),
        "ep": table.name,
        "provider": table.provider,
        "dtype": req.dtype.name(),
        "model_type": ckpt.config.model_type,
        "task": task.name(),
        "role": plan.role.name(),
        "genai_config": !task.is_encoder(),
        "files": files,
        "tokenizer": { "genai_loadable": companions.genai_loadable() },
        "notes": notes,
        "warnings": warnings,
        "pipeline": [pipeline],
        "quantization": quant.as_ref().map(|q| quantization_json(req.quant.as_ref(), q, &pipeline, &quantized)),
        "validation": { "ok": true, "problems": [] },
    });
    write_json(staging.path(), &req.output, BUILD_REPORT, &report)?;
    claim.commit(staging)?;

    Ok(BuildReport {
        output: req.output.clone(),
        nodes: model.graph.nodes.len(),
        initializers: saved.external_tensors + saved.inline_tensors,
        model_bytes: saved.model_bytes,
        data_bytes: saved.data_bytes,
        copied_files,
        notes,
        warnings,
        pipeline,
        task,
        quantized,
        seconds: start.elapsed().as_secs_f64(),
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

/// The `--quant` request checked against the table's `[quant.<bits>]` section, before any
/// weight is read.
fn resolve_quant(req: Option<&QuantRequest>, table: &ep_sets::EpTable, dtype: DType) -> Result<Option<QuantStep>> {
    let Some(req) = req else { return Ok(None) };
    let Some(plan) = table.quant(req.bits) else {
        let offered: Vec<&str> = table.quant_plans().map(|q| q.bits.name()).collect();
        return Err(Error::Request(format!(
            "--quant {}: the {} table (ep-sets/tables/{}.toml) has no [quant.{}] section; it offers {}",
            req.bits,
            table.name,
            table.name,
            req.bits,
            if offered.is_empty() { "no quantization".to_string() } else { offered.join(", ") }
        )));
    };
    let mut step = QuantStep::resolve(req, plan, &table.name, dtype)?;
    let qmoe = table.kernels("com.microsoft", "QMoE").iter().any(|k| k.types.get("T").is_some_and(|t| t.contains(&dtype.elem())));
    if !qmoe {
        step.no_qmoe = Some(format!("ep-sets/tables/{}.toml claims no com.microsoft.QMoE kernel for {dtype} activations", table.name));
    }
    Ok(Some(step))
}

/// build_report.json's `quantization` entry: the settings, what stayed float and why, and
/// every quantized tensor with its weight error.
fn quantization_json(req: Option<&QuantRequest>, step: &QuantStep, pipeline: &PipelineReport, tensors: &[TensorReport]) -> serde_json::Value {
    let kept: Vec<serde_json::Value> = pipeline
        .quant
        .iter()
        .flat_map(|q| q.kept_float.iter().map(|(w, why)| serde_json::json!({ "weight": w, "why": why })))
        .collect();
    serde_json::json!({
        "bits": req.map(|r| r.bits.count()),
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

/// [`optimized_model_with`] for a chosen task (`None`: the checkpoint's default).
pub fn optimized_model_for(
    model_dir: &Path,
    task: Option<Task>,
    ep: &str,
    dtype: DType,
    explain: bool,
    quant: Option<&QuantRequest>,
) -> Result<(ir::Model, PipelineReport)> {
    let sets = EpSets::builtin()?;
    let ckpt = Checkpoint::open(model_dir)?;
    let task = match task {
        Some(t) => t,
        None => Task::default_for(&ckpt)?,
    };
    let (table, plan) = sets.role_plan(ep, role_of(task), dtype)?;
    let step = resolve_quant(quant, table, dtype)?;
    let mut model = task.build(&ckpt, &build_options(plan, dtype))?;
    let report = optimize(&mut model, table, plan, explain, step.as_ref())?;
    Ok((model, report))
}

/// The sub-model role a task's graph has: the EP pipeline runs that role's plan.
pub fn role_of(task: Task) -> ep_sets::Role {
    if task.is_encoder() { ep_sets::Role::Encoder } else { ep_sets::Role::Decoder }
}

/// The task options an EP table's structural flags ask for. Flags reach `models` by name,
/// never as an EP: `concrete_dims` fixes the dims the table's `limits` give (`batch`).
pub fn build_options(plan: &ep_sets::DtypePlan, dtype: DType) -> BuildOptions {
    let mut options = BuildOptions { dtype, ..Default::default() };
    if plan.has_flag("concrete_dims") {
        if let Some(&batch) = plan.limits.get("batch") {
            options.concrete_dims.insert("batch_size".into(), batch);
        }
    }
    options
}

/// The checkpoint's `generation_config.json`, when present.
fn read_generation_config(dir: &Path) -> Result<Option<serde_json::Value>> {
    let path = dir.join("generation_config.json");
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    serde_json::from_str(&text).map(Some).map_err(|e| Error::Config { path, reason: format!("not valid JSON: {e}") })
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
