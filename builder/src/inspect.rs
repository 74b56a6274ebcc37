//! `tailor inspect PACKAGE`: what a user looks at before shipping a package, read from the
//! package alone: its EP, dtype and quantization, inputs and outputs, op histogram by domain,
//! the fusions that fired per role (from build_report.json), host-placed nodes, sizes and the
//! largest tensors, and whether genai_config.json names the graph's inputs and outputs.
//!
//! Weights are not read: the model is loaded with its initializers as mapped recipes, so
//! inspecting a multi-gigabyte package costs the size of model.onnx.

use std::collections::BTreeMap;
use std::path::Path;

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
    /// `bits`, `format`, `block_size`, `symmetric`, tensor count and the worst RMS error, when
    /// the package is quantized.
    pub quantization: Option<Value>,
    pub inputs: Vec<Port>,
    pub outputs: Vec<Port>,
    /// domain (`ai.onnx` for the default one) -> op -> count.
    pub ops: BTreeMap<String, BTreeMap<String, usize>>,
    /// Per role: the rules that fired, with counts.
    pub fused: BTreeMap<String, BTreeMap<String, usize>>,
    pub host_nodes: Vec<String>,
    pub model_bytes: u64,
    pub data_bytes: u64,
    pub largest: Vec<TensorSize>,
    /// Names genai_config.json gives that the graph does not have (empty: consistent).
    pub genai_mismatches: Vec<String>,
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

/// Every part's pipeline report in build_report.json (`parts[].pipeline`; reports written
/// before packages had parts hold one `pipeline` array).
fn pipelines(report: &Value) -> Vec<&Value> {
    match report.get("parts").and_then(Value::as_array) {
        Some(parts) => parts.iter().filter_map(|p| p.get("pipeline")).collect(),
        None => report.get("pipeline").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default(),
    }
}

/// The quantization entry of the quantized part (a top-level entry in reports written before
/// packages had parts).
fn quantization_of(report: &Value) -> Option<&Value> {
    let quantized = |q: &&Value| !q.is_null();
    match report.get("parts").and_then(Value::as_array) {
        Some(parts) => parts.iter().filter_map(|p| p.get("quantization")).find(quantized),
        None => report.get("quantization").filter(quantized),
    }
}

/// Inspects the package folder `dir`.
pub fn inspect(dir: &Path) -> Result<Inspection> {
    let model_path = dir.join("model.onnx");
    match ir::entry_kind(&model_path) {
        ir::EntryKind::Regular => {}
        ir::EntryKind::Absent => {
            return Err(Error::Request(format!(
                "{} is not a package: it has no model.onnx (give the folder `tailor build --output` wrote)",
                dir.display()
            )))
        }
        kind => return Err(Error::Ir(ir::Error::NotAFile { path: model_path, what: kind.describe() })),
    }
    // Also checks every tensor's external data: inside the package, present, long enough.
    let model = ir::load_model(&model_path)?;
    let report = read_json(&dir.join(crate::package::BUILD_REPORT), ir::DATA_FILE_LIMIT)?;
    let genai = read_genai_config(dir)?;
    let g = &model.graph;

    let mut ops: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for n in &g.nodes {
        let domain = if ep_sets::Domain::is_onnx(&n.domain) { "ai.onnx".to_string() } else { n.domain.clone() };
        *ops.entry(domain).or_default().entry(n.op.clone()).or_default() += 1;
    }
    let mut largest: Vec<TensorSize> = g
        .initializers
        .iter()
        .map(|(name, r)| TensorSize { name: name.clone(), dtype: r.dtype().name().into(), shape: r.shape(), bytes: r.byte_len() })
        .collect();
    largest.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.name.cmp(&b.name)));
    largest.truncate(5);

    let size = |name: &str| std::fs::metadata(dir.join(name)).map(|m| m.len()).unwrap_or(0);
    let field = |k: &str| report.as_ref().and_then(|r| r.get(k)).and_then(Value::as_str).map(String::from);
    let mut fused: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    let mut host_nodes = Vec::new();
    for p in report.as_ref().map(pipelines).into_iter().flatten() {
        let role = p.get("role").and_then(Value::as_str).unwrap_or("decoder").to_string();
        for r in p.pointer("/diagnostics/rules").and_then(Value::as_array).into_iter().flatten() {
            let fired = r.get("fired").and_then(Value::as_u64).unwrap_or(0) as usize;
            if let (Some(rule), true) = (r.get("rule").and_then(Value::as_str), fired > 0) {
                *fused.entry(role.clone()).or_default().entry(rule.to_string()).or_default() += fired;
            }
        }
        host_nodes.extend(p.get("host_nodes").and_then(Value::as_array).into_iter().flatten().filter_map(|h| h.as_str().map(String::from)));
    }
    let quantization = report.as_ref().and_then(quantization_of).map(|q| {
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
        serde_json::json!({
            "bits": q.get("bits"), "format": q.get("format"), "block_size": q.get("block_size"),
            "symmetric": q.get("symmetric"), "accuracy_level": q.get("accuracy_level"),
            "method": q.get("method"),
            "source": q.get("source"),
            "tensor_sources": sources,
            "tensors": tensors.len(),
            "worst": worst.map(|w| serde_json::json!({ "weight": w.get("weight"), "rms_error": w.get("rms_error") })),
        })
    });

    Ok(Inspection {
        package: dir.display().to_string(),
        ep: field("ep"),
        dtype: field("dtype"),
        model_type: field("model_type"),
        task: field("task"),
        quantization,
        inputs: g.inputs.iter().map(port).collect(),
        outputs: g.outputs.iter().map(port).collect(),
        ops,
        fused,
        host_nodes,
        model_bytes: size("model.onnx"),
        data_bytes: size(&format!("model.onnx{}", ir::DATA_FILE_SUFFIX)),
        largest,
        // An encoder package has none by design (onnxruntime-genai runs decoders only).
        genai_mismatches: match (&genai, report.as_ref().and_then(|r| r.get("genai_config")).and_then(Value::as_bool)) {
            (Some(c), _) => genai_mismatches(c, g),
            (None, Some(false)) => vec![format!(
                "not written for a {} package (onnxruntime-genai runs decoders only; run it on ONNX Runtime directly)",
                field("task").unwrap_or_else(|| "encoder".into())
            )],
            (None, _) => vec!["no genai_config.json".into()],
        },
    })
}

/// Names in genai_config.json's `model.decoder.inputs` / `outputs` that the graph lacks
/// (`%d` patterns expanded over the layers).
fn genai_mismatches(config: &Value, g: &ir::Graph) -> Vec<String> {
    let layers = config.pointer("/model/decoder/num_hidden_layers").and_then(Value::as_u64).unwrap_or(0);
    let mut out = Vec::new();
    for (section, ports) in [("inputs", &g.inputs), ("outputs", &g.outputs)] {
        let Some(map) = config.pointer(&format!("/model/decoder/{section}")).and_then(Value::as_object) else {
            out.push(format!("genai_config.json has no model.decoder.{section}"));
            continue;
        };
        for (key, name) in map {
            let Some(name) = name.as_str() else { continue };
            let names: Vec<String> = if name.contains("%d") { (0..layers).map(|l| name.replace("%d", &l.to_string())).collect() } else { vec![name.to_string()] };
            for n in names {
                if !ports.iter().any(|p| p.name == n) {
                    out.push(format!("model.decoder.{section}.{key} names `{n}`, which the graph's {section} lack"));
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
        match &self.quantization {
            Some(q) => s.push_str(&format!(
                "  quantized: int{} {} block {} {}, method {}, {} tensors, worst rms error {}\n",
                q["bits"],
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
        for (role, rules) in &self.fused {
            let list: Vec<String> = rules.iter().map(|(r, n)| format!("{r} x{n}")).collect();
            s.push_str(&format!("  fired [{role}]: {}\n", list.join(", ")));
        }
        if !self.host_nodes.is_empty() {
            s.push_str(&format!("  host-placed nodes: {}\n", self.host_nodes.join(", ")));
        }
        s.push_str(&format!("  size: model.onnx {} B, model.onnx.data {} B\n", self.model_bytes, self.data_bytes));
        s.push_str("  largest tensors:\n");
        for t in &self.largest {
            s.push_str(&format!("    {} {}{:?} {} B\n", t.name, t.dtype, t.shape, t.bytes));
        }
        if self.genai_mismatches.is_empty() {
            s.push_str("  genai_config.json: matches the graph's inputs and outputs\n");
        } else {
            for m in &self.genai_mismatches {
                s.push_str(&format!("  genai_config.json: {m}\n"));
            }
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
