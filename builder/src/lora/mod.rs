//! LoRA adapters for one base package (docs/adapters.md): PEFT folders read and checked
//! ([`peft`]), the package's slots read from its decoder graph ([`Slots`]), each adapter
//! converted to the slots' layout and written as an `.onnx_adapter` file ([`format`]) that
//! onnxruntime-genai binds at run time.

pub mod format;
pub mod peft;

use crate::{Error, Result};
use ir::{DType, Dim};
use models::lora::{A_SUFFIX, B_SUFFIX};
use peft::PeftAdapter;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The package folder adapter files are written in.
pub const ADAPTERS_DIR: &str = "adapters";
/// The most bytes an adapter's safetensors or `.onnx_adapter` file is read with.
pub const FILE_LIMIT: u64 = 64 << 30;
/// An adapter file's extension (a convention: genai takes any path).
pub const EXTENSION: &str = "onnx_adapter";

pub(crate) fn lora_error(path: &Path, reason: impl Into<String>) -> Error {
    Error::Config { path: path.to_path_buf(), reason: reason.into() }
}

/// `--lora NAME=DIR`: an adapter to convert, under the name its file takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoraRequest {
    pub name: String,
    pub dir: PathBuf,
}

impl LoraRequest {
    /// Parses `NAME=DIR`.
    pub fn parse(s: &str) -> std::result::Result<LoraRequest, String> {
        let (name, dir) = s.split_once('=').ok_or_else(|| format!("`{s}`: expected NAME=PEFT_DIR"))?;
        check_name(name)?;
        if dir.is_empty() {
            return Err(format!("`{s}`: the PEFT folder is empty"));
        }
        Ok(LoraRequest { name: name.to_string(), dir: dir.into() })
    }
}

/// An adapter name is its file's stem: letters, digits, `-`, `_`, `.`, not starting with `.`.
pub fn check_name(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!("adapter name `{name}`: use 1 to 128 letters, digits, `-`, `_` or `.` (not starting with `.`); it names adapters/{name}.{EXTENSION}"))
    }
}

/// The package path of adapter `name`'s file.
pub fn file_of(name: &str) -> String {
    format!("{ADAPTERS_DIR}/{name}.{EXTENSION}")
}

/// One LoRA slot of a graph: the projection's widths and the element type of A and B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub inp: usize,
    pub out: usize,
    pub dtype: DType,
}

/// A graph's LoRA slots by module path, read from its inputs (`{module}.lora_A.weight`
/// `[in, r]` and `{module}.lora_B.weight` `[r, out]`): the graph is the one record, for a build
/// and for an existing package alike.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Slots(pub BTreeMap<String, Slot>);

impl Slots {
    pub fn of(graph: &ir::Graph) -> Slots {
        let mut slots = BTreeMap::new();
        for a in &graph.inputs {
            let Some(module) = a.name.strip_suffix(A_SUFFIX) else { continue };
            let Some(b) = graph.inputs.iter().find(|b| b.name == format!("{module}{B_SUFFIX}")) else { continue };
            if let (Some([Dim::Fixed(inp), _]), Some([_, Dim::Fixed(out)])) = (a.shape.as_deref(), b.shape.as_deref()) {
                slots.insert(module.to_string(), Slot { inp: *inp as usize, out: *out as usize, dtype: a.dtype });
            }
        }
        Slots(slots)
    }

    /// The slots a target module's pair goes to, each with the first row of B it takes: the
    /// module's own slot, or for a fused projection (`qkv_proj`, `gate_up_proj`, `c_attn`) its
    /// parts' slots in stacking order ([`models::lora::FUSED_PARTS`]).
    pub fn of_module(&self, module: &str) -> Option<Vec<(String, Slot, usize)>> {
        if let Some(slot) = self.0.get(module) {
            return Some(vec![(module.to_string(), *slot, 0)]);
        }
        models::lora::FUSED_PARTS.iter().find_map(|parts| {
            let mut row = 0;
            parts
                .iter()
                .map(|part| {
                    let scope = models::lora::part_scope(module, part);
                    let slot = *self.0.get(&scope)?;
                    row += slot.out;
                    Some((scope, slot, row - slot.out))
                })
                .collect()
        })
    }

    /// Does the adapter fit: each of its pairs has a slot (or, for a fused projection, the
    /// parts' slots) of its widths? The error names the tensor that does not.
    pub fn check(&self, name: &str, adapter: &PeftAdapter) -> Result<()> {
        let path = adapter.dir.join(peft::WEIGHTS_FILE);
        for p in adapter.pairs.values() {
            let Some(slots) = self.of_module(&p.module) else {
                let known: Vec<&str> = self.0.keys().map(String::as_str).take(8).collect();
                return Err(lora_error(
                    &path,
                    format!(
                        "adapter `{name}`: tensor `{}` targets `{}`, which has no LoRA slot in the package (a module the base graph does not build as a projection: an expert, a tied lm_head that reads the embedding table, a fused projection laid out per head such as GPT-NeoX's `query_key_value`, or a name this model does not have; {}{}{})",
                        p.a_key,
                        p.module,
                        if self.0.is_empty() { "the package has no slots" } else { "slots: " },
                        known.join(", "),
                        if self.0.len() > known.len() { ", ..." } else { "" }
                    ),
                ));
            };
            let (inp, out) = (slots[0].1.inp, slots.iter().map(|(_, s, _)| s.out).sum::<usize>());
            if p.inp != inp {
                return Err(lora_error(&path, format!("adapter `{name}`: tensor `{}` is [{}, {}], but the base projection `{}` takes {inp} inputs", p.a_key, p.r, p.inp, p.module)));
            }
            if p.out != out {
                return Err(lora_error(&path, format!("adapter `{name}`: tensor `{}` is [{}, {}], but the base projection `{}` has {out} outputs", p.b_key, p.out, p.r, p.module)));
            }
        }
        Ok(())
    }
}

/// The union of the projections `adapters` target: the slots a build gives its decoder.
pub fn targets<'a>(adapters: impl IntoIterator<Item = &'a PeftAdapter>) -> BTreeSet<String> {
    adapters.into_iter().flat_map(|a| a.pairs.keys().cloned()).collect()
}

/// The largest adapter file (bytes) the FlatBuffers format's signed 32-bit offsets address.
const FLATBUFFER_LIMIT: usize = i32::MAX as usize - (1 << 20);

/// The adapter format is a FlatBuffer: its 32-bit offsets reach 2 GiB, and ONNX Runtime would
/// refuse a larger file at load time, after a build that looked fine. Refused here instead,
/// with what to change.
fn fits_the_format(name: &str, dir: &Path, params: &[format::Parameter], limit: usize) -> Result<()> {
    let bytes: usize = params.iter().map(|p| p.raw.len() + p.name.len() + 64).sum();
    if bytes <= limit {
        return Ok(());
    }
    Err(Error::Request(format!(
        "LoRA adapter `{name}` ({}): its {} tensors take {bytes} bytes, more than the {limit} bytes ONNX Runtime's adapter format can address; convert fewer target modules or a lower rank",
        dir.display(),
        params.len()
    )))
}

/// One converted adapter: its file's bytes and what build_report.json says of it.
pub struct Converted {
    pub name: String,
    pub bytes: Vec<u8>,
    pub report: serde_json::Value,
}

/// Converts `adapter` for `slots` (checked first): per pair `A^T` `[in, r]` and
/// `B^T * scaling` `[r, out]`, in the slots' element type, named as the graph inputs.
pub fn convert(name: &str, adapter: &PeftAdapter, slots: &Slots) -> Result<Converted> {
    slots.check(name, adapter)?;
    let mut params = Vec::new();
    for p in adapter.pairs.values() {
        let (r, inp) = (p.r, p.inp);
        // A: [r, in] -> [in, r].
        let at: Vec<f32> = (0..inp).flat_map(|i| (0..r).map(move |k| (i, k))).map(|(i, k)| p.a[k * inp + i]).collect();
        // Each slot (one, or a fused projection's parts) takes A and its rows `first..first + out`
        // of B: [out, r] -> [r, out], times the scaling (in f64, rounded once).
        for (scope, slot, first) in slots.of_module(&p.module).expect("checked above") {
            let out = slot.out;
            let bt: Vec<f32> =
                (0..r).flat_map(|k| (first..first + out).map(move |o| (k, o))).map(|(k, o)| (p.b[o * r + k] as f64 * p.scaling) as f32).collect();
            params.push(parameter(&models::lora::a_input(&scope), vec![inp, r], &at, slot.dtype)?);
            params.push(parameter(&models::lora::b_input(&scope), vec![r, out], &bt, slot.dtype)?);
        }
    }
    fits_the_format(name, &adapter.dir, &params, FLATBUFFER_LIMIT)?;
    let bytes = format::encode(&params, 1, 1);
    let c = &adapter.config;
    let report = serde_json::json!({
        "name": name,
        "file": file_of(name),
        "source": adapter.dir.display().to_string(),
        "rank": c.r,
        "lora_alpha": c.alpha,
        "use_rslora": c.use_rslora,
        "scaling": c.scaling(),
        // Modules whose `rank_pattern` / `alpha_pattern` entry gives another scaling.
        "module_scaling": adapter.pairs.values().filter(|p| p.scaling != c.scaling()).map(|p| (p.module.clone(), serde_json::json!(p.scaling))).collect::<serde_json::Map<_, _>>(),
        "targets": adapter.pairs.keys().collect::<Vec<_>>(),
        "tensors": params.len(),
        "bytes": bytes.len(),
    });
    Ok(Converted { name: name.to_string(), bytes, report })
}

fn parameter(name: &str, shape: Vec<usize>, values: &[f32], dtype: DType) -> Result<format::Parameter> {
    let raw: Vec<u8> = match dtype {
        DType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::F16 => values.iter().flat_map(|v| half::f16::from_f32(*v).to_le_bytes()).collect(),
        DType::BF16 => values.iter().flat_map(|v| half::bf16::from_f32(*v).to_le_bytes()).collect(),
        other => return Err(Error::Request(format!("LoRA slot `{name}` is {other}; adapters are converted to f32, f16 or bf16 slots only"))),
    };
    Ok(format::Parameter { name: name.to_string(), dims: shape.iter().map(|&d| d as i64).collect(), data_type: dtype.to_onnx(), raw })
}

/// build_report.json's `lora` entry: every slot and every adapter.
pub fn report_json(slots: &Slots, adapters: &[serde_json::Value]) -> serde_json::Value {
    let slots: Vec<serde_json::Value> = slots
        .0
        .iter()
        .map(|(m, s)| serde_json::json!({ "module": m, "in": s.inp, "out": s.out, "dtype": s.dtype.name(), "rank_dim": models::lora::rank_dim(m) }))
        .collect();
    serde_json::json!({ "slots": slots, "adapters": adapters })
}

/// What `tailor adapter` wrote.
#[derive(Clone, Debug)]
pub struct AddedAdapter {
    /// The file, in the package.
    pub file: PathBuf,
    pub report: serde_json::Value,
}

/// `tailor adapter PEFT_DIR --package PKG --name NAME`: converts one more adapter for an
/// existing package. The package's decoder graph gives the slots; an adapter they do not take
/// (a target with no slot, other widths) is refused naming the tensor, and nothing is written.
/// The file is written beside as a temporary file and renamed into place; then
/// build_report.json lists it (written the same way).
pub fn add_to_package(peft_dir: &Path, package: &Path, name: &str, force: bool) -> Result<AddedAdapter> {
    check_name(name).map_err(Error::Request)?;
    let report_path = package.join(crate::package::BUILD_REPORT);
    let bytes = ir::read_regular(&report_path, ir::DATA_FILE_LIMIT)?
        .ok_or_else(|| lora_error(&report_path, "not found: --package must be a package `tailor build` wrote"))?;
    let mut report: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| lora_error(&report_path, format!("not valid JSON: {e}")))?;
    if report.get("tool").and_then(|t| t.as_str()) != Some(crate::package::TOOL_NAME) {
        return Err(lora_error(&report_path, "not written by this tool"));
    }
    let decoder = report
        .get("parts")
        .and_then(|p| p.as_array())
        .and_then(|parts| parts.iter().find(|p| p.get("role").and_then(|r| r.as_str()) == Some("decoder")))
        .and_then(|p| p.get("file").and_then(|f| f.as_str()))
        .ok_or_else(|| lora_error(&report_path, "the package has no decoder part; LoRA slots are on a causal LM's projections"))?
        .to_string();
    let adapter = peft::PeftAdapter::read(peft_dir)?;
    let model = ir::load_model(&package.join(&decoder))?;
    let slots = Slots::of(&model.graph);
    if slots.0.is_empty() {
        return Err(lora_error(
            &package.join(&decoder),
            "the package has no LoRA slots; rebuild it with `tailor build --lora NAME=DIR` for the adapters' targets",
        ));
    }
    let converted = convert(name, &adapter, &slots)?;
    let file = file_of(name);
    let path = package.join(&file);
    let listed = |r: &serde_json::Value| r.get("files").and_then(|f| f.as_array()).is_some_and(|f| f.iter().any(|x| x.as_str() == Some(file.as_str())));
    if (path.exists() || listed(&report)) && !force {
        return Err(Error::Request(format!("{} already exists; give --force to replace it", path.display())));
    }
    let dir = package.join(ADAPTERS_DIR);
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(lora_error(&dir, "is not a folder")),
        Err(_) => std::fs::create_dir(&dir).map_err(|e| Error::write_file(package, ADAPTERS_DIR, e))?,
    }
    // Report first in memory, then both files through temporary names and renames.
    if !listed(&report) {
        if let Some(files) = report.get_mut("files").and_then(|f| f.as_array_mut()) {
            files.push(serde_json::Value::String(file.clone()));
        }
    }
    let lora = report.as_object_mut().expect("a JSON object").entry("lora").or_insert_with(|| report_json(&slots, &[]));
    if let Some(list) = lora.get_mut("adapters").and_then(|a| a.as_array_mut()) {
        list.retain(|a| a.get("name").and_then(|n| n.as_str()) != Some(name));
        list.push(converted.report.clone());
    }
    write_replacing(package, &file, &converted.bytes)?;
    let text = serde_json::to_string_pretty(&report).expect("JSON values serialize") + "\n";
    write_replacing(package, crate::package::BUILD_REPORT, text.as_bytes())?;
    Ok(AddedAdapter { file: path, report: converted.report })
}

/// Writes `package/name` through a temporary file in the same folder and one rename, so a
/// reader never sees half a file.
fn write_replacing(package: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let path = package.join(name);
    let dir = path.parent().unwrap_or(package);
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| Error::write_file(package, name, e))?;
    tmp.write_all(bytes).and_then(|()| tmp.as_file().sync_all()).map_err(|e| Error::write_file(package, name, e))?;
    tmp.persist(&path).map_err(|e| Error::write_file(package, name, e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An adapter past the format's reach is refused, naming it and what to change; one
    /// within it passes.
    #[test]
    fn an_adapter_too_large_for_the_format_is_refused() {
        let params = vec![parameter("a", vec![4, 2], &[0.5; 8], DType::F32).unwrap(), parameter("b", vec![2, 4], &[0.5; 8], DType::F32).unwrap()];
        let size: usize = params.iter().map(|p| p.raw.len() + p.name.len() + 64).sum();
        assert!(fits_the_format("style", Path::new("/a/style"), &params, size).is_ok());
        let e = fits_the_format("style", Path::new("/a/style"), &params, size - 1).unwrap_err().to_string();
        assert!(e.contains("LoRA adapter `style`") && e.contains("/a/style") && e.contains("lower rank"), "{e}");
    }
}
