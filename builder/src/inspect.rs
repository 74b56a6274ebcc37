//! `tailor inspect PACKAGE`: what a user looks at before shipping a package, read from the
//! package alone: its EP, dtype and task, then every part (a decoder package has one, a
//! vision-language package its vision tower, embedding and decoder): its file and role, the
//! table plan it ran, its quantization, inputs and outputs, op histogram by domain, the
//! fusions that fired (from build_report.json's `parts`), host-placed nodes, sizes, its
//! external data and the largest tensors; and whether genai_config.json's sections name each
//! part's file, inputs and outputs.
//!
//! Weights are not read: each model is loaded with its initializers as mapped recipes, so
//! inspecting a multi-gigabyte package costs the size of its model files.

use std::collections::BTreeMap;
use std::path::{Component, Path};

use serde::Serialize;
use serde_json::Value;

use crate::{Error, Result};

/// One input or output.
#[derive(Clone, Debug, Serialize)]
pub struct Port {
    pub name: String,
    pub dtype: String,
    /// Dims as written: numbers or symbolic names.
    pub shape: Vec<String>,
}

/// One initializer, for the largest-tensors list.
#[derive(Clone, Debug, Serialize)]
pub struct TensorSize {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<usize>,
    pub bytes: usize,
    /// Another initializer stored on the same range of the same data file (a view the writer
    /// stored once: a tied table read as bytes, a reshaped scale), so its bytes count once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_bytes_as: Option<String>,
}

/// Where a part's initializers are stored. Every external tensor was checked as the model was
/// loaded (its location a file inside the package, the file long enough for it); a failed
/// check fails `inspect` naming the tensor, so a report exists only for data that passed.
#[derive(Clone, Debug, Serialize)]
pub struct ExternalData {
    /// Initializers stored in external data files.
    pub tensors: usize,
    /// Initializers stored inside the model file.
    pub inline_tensors: usize,
    /// The external data files, relative to the package.
    pub files: Vec<String>,
}

/// What `inspect` reports of one part.
#[derive(Clone, Debug, Serialize)]
pub struct PartInspection {
    /// The model file, relative to the package.
    pub file: String,
    /// `decoder`, `encoder`, `vision` or `embedding`.
    pub role: String,
    /// The EP table section the part was optimized under (`[role.vision.f32]`), when the report
    /// says.
    pub plan: Option<String>,
    /// `bits`, `format`, `block_size`, `symmetric`, tensor count and the worst RMS error, when
    /// the part is quantized.
    pub quantization: Option<Value>,
    pub inputs: Vec<Port>,
    pub outputs: Vec<Port>,
    /// domain (`ai.onnx` for the default one) -> op -> count.
    pub ops: BTreeMap<String, BTreeMap<String, usize>>,
    /// The rules that fired in this part's pipeline, with counts.
    pub fused: BTreeMap<String, usize>,
    pub host_nodes: Vec<String>,
    pub model_bytes: u64,
    pub data_bytes: u64,
    pub external_data: ExternalData,
    pub largest: Vec<TensorSize>,
}

/// Everything `inspect` reports.
#[derive(Clone, Debug, Serialize)]
pub struct Inspection {
    pub package: String,
    pub ep: Option<String>,
    pub dtype: Option<String>,
    pub model_type: Option<String>,
    /// `causal-lm`, `feature-extraction` or `sentence-embedding` (absent in reports written
    /// before tasks existed: those are causal-lm packages).
    pub task: Option<String>,
    /// Every part, in the order the build wrote them.
    pub parts: Vec<PartInspection>,
    /// Names genai_config.json gives that the parts do not have (empty: consistent).
    pub genai_mismatches: Vec<String>,
    /// The LoRA slots (from the graph) and adapter files (read from adapters/, with what
    /// build_report.json says of each), when the package has slots.
    pub lora: Option<Value>,
}

impl Inspection {
    /// The part in `file`, if the package has one.
    pub fn part(&self, file: &str) -> Option<&PartInspection> {
        self.parts.iter().find(|p| p.file == file)
    }

    /// Bytes of every part's model and external data files.
    pub fn bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.model_bytes + p.data_bytes).sum()
    }
}

/// A package's JSON file (`genai_config.json`, `build_report.json`), when present: read as the
/// build reads a checkpoint's config.json (a regular file of at most `limit` bytes, never
/// opened in a way that blocks), else an error naming it.
pub(crate) fn read_json(path: &Path, limit: u64) -> Result<Option<Value>> {
    let Some(bytes) = ir::read_regular(path, limit)? else { return Ok(None) };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| Error::Config { path: path.to_path_buf(), reason: format!("not valid JSON: {e}") })
}

/// A package's genai_config.json, when present.
pub(crate) fn read_genai_config(dir: &Path) -> Result<Option<Value>> {
    read_json(&dir.join("genai_config.json"), ir::SETTINGS_LIMIT)
}

fn port(v: &ir::ValueInfo) -> Port {
    let shape = match &v.shape {
        Some(dims) => dims.iter().map(|d| d.to_string()).collect(),
        None => vec!["?".into()],
    };
    Port { name: v.name.clone(), dtype: v.dtype.name().into(), shape }
}

/// The file a package has when nothing lists its parts (a decoder or encoder package).
const MODEL_FILE: &str = "model.onnx";
/// genai_config.json's sections that name a part's file, by role.
const GENAI_SECTIONS: [&str; 3] = ["vision", "embedding", "decoder"];

/// A part as the package's own files list it, before its model is read.
struct Listed<'r> {
    file: String,
    role: String,
    plan: Option<String>,
    /// The part's pipeline reports (one; reports written before packages had parts may hold
    /// several roles' under one model).
    pipelines: Vec<&'r Value>,
    quantization: Option<&'r Value>,
}

/// The parts of the package: build_report.json's `parts`; without them (a report written
/// before packages had parts, or none) the files genai_config.json's sections name, else
/// `model.onnx`. File names come from files a user may have edited, so each must be a plain
/// name inside the package.
fn listed_parts<'r>(dir: &Path, report: Option<&'r Value>, genai: Option<&Value>) -> Result<Vec<Listed<'r>>> {
    let plain = |name: &str, from: &str| -> Result<String> {
        let mut parts = Path::new(name).components();
        match (parts.next(), parts.next()) {
            (Some(Component::Normal(_)), None) => Ok(name.to_string()),
            _ => Err(Error::Config { path: dir.join(from), reason: format!("part file `{name}` is not a file name inside the package") }),
        }
    };
    if let Some(parts) = report.and_then(|r| r.get("parts")).and_then(Value::as_array) {
        let mut out = Vec::new();
        for p in parts {
            let file = p.get("file").and_then(Value::as_str).ok_or_else(|| Error::Config {
                path: dir.join(crate::package::BUILD_REPORT),
                reason: "a part has no `file`".into(),
            })?;
            out.push(Listed {
                file: plain(file, crate::package::BUILD_REPORT)?,
                role: p.get("role").and_then(Value::as_str).unwrap_or("decoder").to_string(),
                plan: p.get("plan").and_then(Value::as_str).map(String::from),
                pipelines: p.get("pipeline").into_iter().collect(),
                quantization: p.get("quantization").filter(|q| !q.is_null()),
            });
        }
        return Ok(out);
    }
    let legacy = |file: String, role: &str| Listed {
        file,
        role: role.to_string(),
        plan: None,
        pipelines: report.and_then(|r| r.get("pipeline")).and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default(),
        quantization: report.and_then(|r| r.get("quantization")).filter(|q| !q.is_null()),
    };
    let from_genai: Vec<(String, &str)> = GENAI_SECTIONS
        .iter()
        .filter_map(|s| genai?.pointer(&format!("/model/{s}/filename")).and_then(Value::as_str).map(|f| (f.to_string(), *s)))
        .collect();
    if from_genai.len() > 1 {
        return from_genai
            .into_iter()
            .map(|(f, role)| Ok(Listed { pipelines: Vec::new(), quantization: None, ..legacy(plain(&f, "genai_config.json")?, role) }))
            .collect();
    }
    let encoder = matches!(report.and_then(|r| r.get("task")).and_then(Value::as_str), Some("feature-extraction" | "sentence-embedding"));
    Ok(vec![legacy(MODEL_FILE.to_string(), if encoder { "encoder" } else { "decoder" })])
}

/// Inspects the package folder `dir`.
pub fn inspect(dir: &Path) -> Result<Inspection> {
    inspect_models(dir).map(|(i, _)| i)
}

/// [`inspect`], also returning each part's loaded model (for `diff`), in the parts' order.
pub(crate) fn inspect_models(dir: &Path) -> Result<(Inspection, Vec<ir::Model>)> {
    let report = read_json(&dir.join(crate::package::BUILD_REPORT), ir::DATA_FILE_LIMIT)?;
    let genai = read_genai_config(dir)?;
    let listed = listed_parts(dir, report.as_ref(), genai.as_ref())?;
    let mut parts = Vec::with_capacity(listed.len());
    let mut models = Vec::with_capacity(listed.len());
    for l in &listed {
        let model_path = dir.join(&l.file);
        match ir::entry_kind(&model_path) {
            ir::EntryKind::Regular => {}
            ir::EntryKind::Absent if report.is_none() && l.file == MODEL_FILE => {
                return Err(Error::Request(format!(
                    "{} is not a package: it has no {MODEL_FILE} (give the folder `tailor build --output` wrote)",
                    dir.display()
                )))
            }
            ir::EntryKind::Absent => {
                return Err(Error::Request(format!("{} lacks its {} part {}: the package is incomplete", dir.display(), l.role, l.file)))
            }
            kind => return Err(Error::Ir(ir::Error::NotAFile { path: model_path, what: kind.describe() })),
        }
        // Also checks every tensor's external data: inside the package, present, long enough.
        let model = ir::load_model(&model_path)?;
        parts.push(inspect_part(dir, l, &model));
        models.push(model);
    }
    let field = |k: &str| report.as_ref().and_then(|r| r.get(k)).and_then(Value::as_str).map(String::from);
    let genai_mismatches = match (&genai, report.as_ref().and_then(|r| r.get("genai_config")).and_then(Value::as_bool)) {
        (Some(c), _) => genai_mismatches(c, &parts),
        // An encoder package has none by design (onnxruntime-genai runs decoders only).
        (None, Some(false)) => vec![format!(
            "not written for a {} package (onnxruntime-genai runs decoders only; run it on ONNX Runtime directly)",
            field("task").unwrap_or_else(|| "encoder".into())
        )],
        (None, _) => vec!["no genai_config.json".into()],
    };
    // LoRA slots are graph inputs of the decoder part.
    let lora = match listed.iter().zip(&models).find(|(l, _)| l.role == "decoder") {
        Some((_, m)) => lora_of(dir, &m.graph, report.as_ref())?,
        None => None,
    };
    let inspection = Inspection {
        lora,
        package: dir.display().to_string(),
        ep: field("ep"),
        dtype: field("dtype"),
        model_type: field("model_type"),
        task: field("task"),
        parts,
        genai_mismatches,
    };
    Ok((inspection, models))
}

/// What one loaded part holds, with what its report entry says.
fn inspect_part(dir: &Path, l: &Listed, model: &ir::Model) -> PartInspection {
    let g = &model.graph;
    let mut ops: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for n in &g.nodes {
        let domain = if ep_sets::Domain::is_onnx(&n.domain) { "ai.onnx".to_string() } else { n.domain.clone() };
        *ops.entry(domain).or_default().entry(n.op.clone()).or_default() += 1;
    }
    // The first initializer (in the model's order) on each range of a data file.
    let mut first_on: BTreeMap<(std::path::PathBuf, usize, usize), &str> = BTreeMap::new();
    for (name, r) in &g.initializers {
        if let ir::Recipe::Source(t) = r {
            first_on.entry((t.file.path.clone(), t.offset, t.len)).or_insert(name);
        }
    }
    let mut largest: Vec<TensorSize> = g
        .initializers
        .iter()
        .map(|(name, r)| {
            let same_bytes_as = match r {
                ir::Recipe::Source(t) => first_on.get(&(t.file.path.clone(), t.offset, t.len)).filter(|n| **n != name).map(|n| n.to_string()),
                _ => None,
            };
            TensorSize { name: name.clone(), dtype: r.dtype().name().into(), shape: r.shape(), bytes: r.byte_len(), same_bytes_as }
        })
        .collect();
    largest.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.name.cmp(&b.name)));
    largest.truncate(5);

    let mut external = ExternalData { tensors: 0, inline_tensors: 0, files: Vec::new() };
    for (_, r) in &g.initializers {
        match r {
            ir::Recipe::Source(t) => {
                external.tensors += 1;
                let file = t.file.path.strip_prefix(dir).unwrap_or(&t.file.path).display().to_string();
                if !external.files.contains(&file) {
                    external.files.push(file);
                }
            }
            _ => external.inline_tensors += 1,
        }
    }
    let size = |path: &Path| std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let data_bytes = external.files.iter().map(|f| size(&dir.join(f))).sum();

    let mut fused: BTreeMap<String, usize> = BTreeMap::new();
    let mut host_nodes = Vec::new();
    for p in &l.pipelines {
        for r in p.pointer("/diagnostics/rules").and_then(Value::as_array).into_iter().flatten() {
            let fired = r.get("fired").and_then(Value::as_u64).unwrap_or(0) as usize;
            if let (Some(rule), true) = (r.get("rule").and_then(Value::as_str), fired > 0) {
                *fused.entry(rule.to_string()).or_default() += fired;
            }
        }
        host_nodes.extend(p.get("host_nodes").and_then(Value::as_array).into_iter().flatten().filter_map(|h| h.as_str().map(String::from)));
    }
    PartInspection {
        file: l.file.clone(),
        role: l.role.clone(),
        plan: l.plan.clone(),
        quantization: l.quantization.map(quantization_summary),
        inputs: g.inputs.iter().map(port).collect(),
        outputs: g.outputs.iter().map(port).collect(),
        ops,
        fused,
        host_nodes,
        model_bytes: size(&dir.join(&l.file)),
        data_bytes,
        external_data: external,
        largest,
    }
}

/// A part's quantization entry, summarized: the settings, the tensor count, the worst RMS
/// error and what the integers come from.
fn quantization_summary(q: &Value) -> Value {
    let tensors = q.get("tensors").and_then(Value::as_array).cloned().unwrap_or_default();
    let worst = tensors.iter().max_by(|a, b| {
        let e = |t: &Value| t.get("rms_error").and_then(Value::as_f64).unwrap_or(0.0);
        e(a).total_cmp(&e(b))
    });
    // Per tensor, what its integers come from: `float` (quantized by the build) or the
    // checkpoint's packed format, counted.
    let mut sources: BTreeMap<String, usize> = BTreeMap::new();
    for t in &tensors {
        *sources.entry(t.get("source").and_then(Value::as_str).unwrap_or("float").to_string()).or_default() += 1;
    }
    // The widths the tensors were written with: a GGUF file's mix has several.
    let mut widths: Vec<u64> = tensors.iter().filter_map(|t| t.get("bits").and_then(Value::as_u64)).collect();
    widths.sort_unstable();
    widths.dedup();
    serde_json::json!({
        "bits": q.get("bits"), "bit_widths": widths, "format": q.get("format"), "block_size": q.get("block_size"),
        "symmetric": q.get("symmetric"), "accuracy_level": q.get("accuracy_level"),
        "method": q.get("method"),
        "source": q.get("source"),
        "tensor_sources": sources,
        "tensors": tensors.len(),
        "worst": worst.map(|w| serde_json::json!({ "weight": w.get("weight"), "rms_error": w.get("rms_error") })),
    })
}

/// The package's LoRA slots and adapter files: every `adapters/*.onnx_adapter` read (a file
/// that is not an adapter is an error naming it), with its tensors and the largest rank it
/// binds, and the targets, rank and scaling build_report.json records for it.
fn lora_of(dir: &Path, g: &ir::Graph, report: Option<&Value>) -> Result<Option<Value>> {
    use crate::lora::{format, Slots, ADAPTERS_DIR, EXTENSION};
    let slots = Slots::of(g);
    if slots.0.is_empty() {
        return Ok(None);
    }
    let recorded: Vec<&Value> = report.and_then(|r| r.pointer("/lora/adapters")).and_then(Value::as_array).into_iter().flatten().collect();
    let mut files: Vec<std::path::PathBuf> = match std::fs::read_dir(dir.join(ADAPTERS_DIR)) {
        Ok(entries) => entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == EXTENSION)).collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    let mut adapters = Vec::new();
    for path in files {
        let bytes = ir::read_regular(&path, crate::lora::FILE_LIMIT)?.ok_or_else(|| Error::Request(format!("{} is not a regular file", path.display())))?;
        let decoded = format::decode(&bytes).ok_or_else(|| Error::Request(format!("{} is not an .onnx_adapter file (no TORT FlatBuffer)", path.display())))?;
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let unbound: Vec<&str> = decoded.params.iter().map(|p| p.name.as_str()).filter(|n| !g.inputs.iter().any(|i| i.name == *n)).collect();
        let rec = recorded.iter().find(|r| r.get("name").and_then(Value::as_str) == Some(name.as_str()));
        adapters.push(serde_json::json!({
            "name": name,
            "file": format!("{ADAPTERS_DIR}/{name}.{EXTENSION}"),
            "format_version": decoded.format_version,
            "tensors": decoded.params.len(),
            "targets": rec.and_then(|r| r.get("targets")).cloned().unwrap_or_else(|| {
                Value::from(decoded.params.iter().filter_map(|p| p.name.strip_suffix(models::lora::A_SUFFIX)).collect::<Vec<_>>())
            }),
            "rank": rec.and_then(|r| r.get("rank")).cloned().unwrap_or_else(|| Value::from(decoded.params.iter().filter(|p| p.name.ends_with(models::lora::A_SUFFIX)).filter_map(|p| p.dims.get(1).copied()).max())),
            "scaling": rec.and_then(|r| r.get("scaling")).cloned(),
            "names_without_input": unbound,
        }));
    }
    let slot_list: Vec<Value> =
        slots.0.iter().map(|(m, s)| serde_json::json!({ "module": m, "in": s.inp, "out": s.out, "dtype": s.dtype.name() })).collect();
    Ok(Some(serde_json::json!({ "slots": slot_list, "adapters": adapters })))
}

/// What genai_config.json says that the parts do not hold: a section (`model.decoder`,
/// `model.vision`, `model.embedding`) for a part of that role that is missing or names another
/// file, a section naming a file that is no part, and names in a section's `inputs` /
/// `outputs` that its part's graph lacks (`%d` patterns expanded over the decoder's layers).
fn genai_mismatches(config: &Value, parts: &[PartInspection]) -> Vec<String> {
    let layers = config.pointer("/model/decoder/num_hidden_layers").and_then(Value::as_u64).unwrap_or(0);
    let mut out = Vec::new();
    for section in GENAI_SECTIONS {
        let Some(s) = config.pointer(&format!("/model/{section}")) else {
            if let Some(p) = parts.iter().find(|p| p.role == section) {
                out.push(format!("genai_config.json has no model.{section} section for the {section} part {}", p.file));
            }
            continue;
        };
        // genai's decoder file defaults to model.onnx when the section names none.
        let file = s.get("filename").and_then(Value::as_str).unwrap_or(MODEL_FILE);
        let Some(part) = parts.iter().find(|p| p.file == file) else {
            out.push(format!("model.{section}.filename names `{file}`, which is no part of the package"));
            continue;
        };
        if part.role != section {
            out.push(format!("model.{section}.filename names `{file}`, which is the package's {} part", part.role));
        }
        for (kind, ports) in [("inputs", &part.inputs), ("outputs", &part.outputs)] {
            let Some(map) = s.get(kind).and_then(Value::as_object) else {
                out.push(format!("genai_config.json has no model.{section}.{kind}"));
                continue;
            };
            for (key, name) in map {
                let Some(name) = name.as_str() else { continue };
                let names: Vec<String> = if name.contains("%d") { (0..layers).map(|l| name.replace("%d", &l.to_string())).collect() } else { vec![name.to_string()] };
                for n in names {
                    if !ports.iter().any(|p| p.name == n) {
                        out.push(format!("model.{section}.{kind}.{key} names `{n}`, which the {file} graph's {kind} lack"));
                    }
                }
            }
        }
    }
    out
}

impl Inspection {
    /// The text `tailor inspect` prints.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let or = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".into());
        s.push_str(&format!("package {}\n", self.package));
        s.push_str(&format!("  ep {}, dtype {}, model type {}\n", or(&self.ep), or(&self.dtype), or(&self.model_type)));
        if let Some(task) = &self.task {
            s.push_str(&format!("  task {task}\n"));
        }
        let list: Vec<String> = self.parts.iter().map(|p| format!("{} ({})", p.file, p.role)).collect();
        s.push_str(&format!("  parts: {}\n", list.join(", ")));
        for p in &self.parts {
            s.push_str(&p.text());
        }
        if let Some(l) = &self.lora {
            let slots = l["slots"].as_array().map_or(0, Vec::len);
            let mut kinds: Vec<&str> = l["slots"].as_array().into_iter().flatten().filter_map(|s| s["module"].as_str()?.rsplit('.').next()).collect();
            kinds.sort();
            kinds.dedup();
            s.push_str(&format!("  LoRA slots: {slots} ({}), each with its own rank and an empty default\n", kinds.join(", ")));
            for a in l["adapters"].as_array().into_iter().flatten() {
                let targets = a["targets"].as_array().map_or(0, Vec::len);
                s.push_str(&format!(
                    "    adapter {}: {}, {} tensors, rank {}, scaling {}, {} targets{}\n",
                    a["name"].as_str().unwrap_or("?"),
                    a["file"].as_str().unwrap_or("?"),
                    a["tensors"],
                    a["rank"],
                    if a["scaling"].is_null() { "?".to_string() } else { a["scaling"].to_string() },
                    targets,
                    match a["names_without_input"].as_array().map_or(0, Vec::len) {
                        0 => String::new(),
                        n => format!("; {n} tensor(s) name no graph input (genai will refuse it)"),
                    }
                ));
            }
        }
        if self.genai_mismatches.is_empty() {
            s.push_str("genai_config.json: matches every part's inputs and outputs\n");
        } else {
            for m in &self.genai_mismatches {
                s.push_str(&format!("genai_config.json: {m}\n"));
            }
        }
        s
    }
}

impl PartInspection {
    /// The part's section of `tailor inspect`'s text.
    fn text(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!("part {} ({}{})\n", self.file, self.role, self.plan.as_ref().map(|p| format!(", plan {p}")).unwrap_or_default()));
        match &self.quantization {
            Some(q) => s.push_str(&format!(
                "  quantized: {} {} block {} {}, method {}, {} tensors, worst rms error {}\n",
                match q["bit_widths"].as_array().map(Vec::as_slice) {
                    Some(widths) if !widths.is_empty() => widths.iter().map(|b| format!("int{b}")).collect::<Vec<_>>().join("+"),
                    _ => format!("int{}", q["bits"]),
                },
                q["format"].as_str().unwrap_or("?"),
                q["block_size"],
                if q["symmetric"] == Value::Bool(true) { "symmetric" } else { "asymmetric" },
                q["method"].as_str().unwrap_or("?"),
                q["tensors"],
                q["worst"].get("rms_error").map(|e| format!("{e} ({})", q["worst"]["weight"].as_str().unwrap_or("?"))).unwrap_or_else(|| "-".into())
            )),
            None => s.push_str("  float weights\n"),
        }
        if let Some(q) = self.quantization.as_ref().filter(|q| q["source"].is_object()) {
            let counts: Vec<String> = q["tensor_sources"].as_object().into_iter().flatten().map(|(src, n)| format!("{n} from {src}")).collect();
            s.push_str(&format!(
                "  source: pre-quantized {}; tensors: {}\n",
                q["source"]["summary"].as_str().unwrap_or("?"),
                counts.join(", ")
            ));
        }
        for (title, ports) in [("inputs", &self.inputs), ("outputs", &self.outputs)] {
            s.push_str(&format!("  {title}:\n"));
            for line in grouped_ports(ports) {
                s.push_str(&format!("    {line}\n"));
            }
        }
        s.push_str("  ops:\n");
        for (domain, ops) in &self.ops {
            let list: Vec<String> = ops.iter().map(|(op, n)| format!("{op} x{n}")).collect();
            s.push_str(&format!("    {domain}: {}\n", list.join(", ")));
        }
        if !self.fused.is_empty() {
            let list: Vec<String> = self.fused.iter().map(|(r, n)| format!("{r} x{n}")).collect();
            s.push_str(&format!("  fired [{}]: {}\n", self.role, list.join(", ")));
        }
        if !self.host_nodes.is_empty() {
            s.push_str(&format!("  host-placed nodes: {}\n", self.host_nodes.join(", ")));
        }
        let data = self.external_data.files.join(", ");
        s.push_str(&format!(
            "  size: {} {} B, {} {} B\n",
            self.file,
            self.model_bytes,
            if data.is_empty() { "external data".to_string() } else { data },
            self.data_bytes
        ));
        let e = &self.external_data;
        s.push_str(&match e.tensors {
            0 => format!("  external data: none ({} tensors inside {})\n", e.inline_tensors, self.file),
            n => format!(
                "  external data: {n} tensors in {}, each inside the package and within its file; {} inline\n",
                e.files.join(", "),
                e.inline_tensors
            ),
        });
        s.push_str("  largest tensors:\n");
        for t in &self.largest {
            let shared = t.same_bytes_as.as_ref().map(|n| format!(" (shares its stored bytes with {n})")).unwrap_or_default();
            s.push_str(&format!("    {} {}{:?} {} B{shared}\n", t.name, t.dtype, t.shape, t.bytes));
        }
        s
    }
}

/// The text lines of `ports`, repeated ones folded into one: ports whose names differ only in
/// one number and that share a dtype and shape (`past_key_values.0.key` ...
/// `past_key_values.23.key`) become `past_key_values.{0..23}.key f32[...]` (`{0,2,4}` when
/// the numbers are not a run), at the place of the first. The JSON form keeps every port.
fn grouped_ports(ports: &[Port]) -> Vec<String> {
    let line = |name: &str, p: &Port| format!("{name} {}[{}]", p.dtype, p.shape.join(", "));
    let mut taken = vec![false; ports.len()];
    let mut lines = Vec::new();
    for i in 0..ports.len() {
        if taken[i] {
            continue;
        }
        let p = &ports[i];
        // The first number in the name that others vary: (prefix, suffix, members by number).
        let group = digit_runs(&p.name).into_iter().find_map(|(start, end)| {
            let (prefix, suffix) = (&p.name[..start], &p.name[end..]);
            let members: Vec<(usize, u64)> = (i..ports.len())
                .filter(|&j| !taken[j] && ports[j].dtype == p.dtype && ports[j].shape == p.shape)
                .filter_map(|j| {
                    let middle = ports[j].name.strip_prefix(prefix)?.strip_suffix(suffix)?;
                    let plain = !middle.is_empty() && middle.bytes().all(|b| b.is_ascii_digit()) && (middle == "0" || !middle.starts_with('0'));
                    plain.then(|| middle.parse().ok().map(|n| (j, n)))?
                })
                .collect();
            (members.len() > 1).then_some((prefix, suffix, members))
        });
        match group {
            Some((prefix, suffix, members)) => {
                let mut numbers: Vec<u64> = members.iter().map(|&(_, n)| n).collect();
                numbers.sort_unstable();
                let run = numbers.windows(2).all(|w| w[1] == w[0] + 1);
                let set = if run {
                    format!("{}..{}", numbers[0], numbers[numbers.len() - 1])
                } else {
                    numbers.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
                };
                for &(j, _) in &members {
                    taken[j] = true;
                }
                lines.push(line(&format!("{prefix}{{{set}}}{suffix}"), p));
            }
            None => {
                taken[i] = true;
                lines.push(line(&p.name, p));
            }
        }
    }
    lines
}

/// The byte ranges of the runs of ASCII digits in `name`.
fn digit_runs(name: &str) -> Vec<(usize, usize)> {
    let bytes = name.as_bytes();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            runs.push((start, i));
        } else {
            i += 1;
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(name: &str, dtype: &str, shape: &[&str]) -> Port {
        Port { name: name.into(), dtype: dtype.into(), shape: shape.iter().map(|d| d.to_string()).collect() }
    }

    #[test]
    fn repeated_ports_are_folded_in_text() {
        let kv = ["batch_size", "2", "past_sequence_length", "16"];
        let mut ports = vec![port("input_ids", "i64", &["batch_size", "sequence_length"])];
        for l in 0..24 {
            ports.push(port(&format!("past_key_values.{l}.key"), "f32", &kv));
            ports.push(port(&format!("past_key_values.{l}.value"), "f32", &kv));
        }
        assert_eq!(
            grouped_ports(&ports),
            [
                "input_ids i64[batch_size, sequence_length]",
                "past_key_values.{0..23}.key f32[batch_size, 2, past_sequence_length, 16]",
                "past_key_values.{0..23}.value f32[batch_size, 2, past_sequence_length, 16]",
            ]
        );
    }

    /// Another shape is another group (layers with another cache length), a number that is
    /// not a run is listed, and a lone numbered port stays as it is.
    #[test]
    fn only_ports_of_one_dtype_and_shape_share_a_line() {
        let ports = vec![
            port("present.0.key", "f16", &["b", "2", "t", "8"]),
            port("present.1.key", "f16", &["b", "2", "64", "8"]),
            port("present.2.key", "f16", &["b", "2", "t", "8"]),
            port("present.4.key", "f16", &["b", "2", "t", "8"]),
            port("present.3.key", "f16", &["b", "2", "64", "8"]),
            port("logits2", "f32", &["b"]),
            port("x01", "f32", &["b"]),
            port("x1", "f32", &["b"]),
        ];
        assert_eq!(
            grouped_ports(&ports),
            ["present.{0,2,4}.key f16[b, 2, t, 8]", "present.{1,3}.key f16[b, 2, 64, 8]", "logits2 f32[b]", "x01 f32[b]", "x1 f32[b]"]
        );
    }
}
