//! Writing a [`Model`] as `model.onnx` plus one external data file.

use crate::proto::{self, tensor_proto::DataLocation};
use crate::{layout_external_data, AttrValue, DataSlot, Dim, Error, Graph, Model, Recipe, Result, ValueInfo};
use crate::stream::{write_data_file, WriteOptions};
use crate::{INLINE_LIMIT, IR_VERSION};
use prost::Message;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// The external data file is named after the model file plus this suffix.
pub const DATA_FILE_SUFFIX: &str = ".data";

/// What [`save_model`] wrote.
#[derive(Debug, Default)]
pub struct SaveReport {
    pub model_bytes: u64,
    pub data_bytes: u64,
    pub external_tensors: usize,
    pub inline_tensors: usize,
    /// Initializers that no node reads, dropped without being materialized.
    pub unused_initializers: Vec<String>,
}

/// Writes `dir/<file_name>` and `dir/<file_name>.data`. Only initializers that some node (or
/// a graph output) reads are materialized; the rest are reported and dropped.
pub fn save_model(model: &Model, dir: &Path, file_name: &str) -> Result<SaveReport> {
    save_model_with(model, dir, file_name, WriteOptions::default())
}

/// [`save_model`] with explicit streaming options (block size, writer threads).
pub fn save_model_with(model: &Model, dir: &Path, file_name: &str, opts: WriteOptions) -> Result<SaveReport> {
    let data_name = format!("{file_name}{DATA_FILE_SUFFIX}");
    let data_path = dir.join(&data_name);
    let mut report = SaveReport::default();

    // Decide which initializers are written, and where.
    let used = model.graph.used_names();
    let mut external: Vec<&(String, Recipe)> = Vec::new();
    for entry in &model.graph.initializers {
        if !used.contains(&entry.0) {
            report.unused_initializers.push(entry.0.clone());
        } else if entry.1.byte_len() >= INLINE_LIMIT {
            external.push(entry);
        }
    }
    // A reshape of another written initializer holds that one's bytes: it points at that
    // one's range of the data file instead of being written again (a tied embedding's
    // GatherBlockQuantized reads the head's quantized table and scales through such views).
    let shared = shared_bytes(&external);
    let stored: Vec<&(String, Recipe)> = external.iter().enumerate().filter(|(i, _)| shared[*i].is_none()).map(|(_, e)| *e).collect();
    let stored_slots = layout_external_data(&stored.iter().map(|(_, r)| r.byte_len() as u64).collect::<Vec<_>>());

    // Sources are read through their mappings while the data file is written: overwriting one
    // of them (saving a loaded model over itself) would truncate a mapped file under the reader.
    for (_, recipe) in &external {
        for source in recipe.sources() {
            if same_file(&source.file.path, &data_path) {
                return Err(Error::Graph(format!(
                    "cannot write {}: the model reads its weights from that file; save to another folder",
                    data_path.display()
                )));
            }
        }
    }

    // Stream tensors into the data file in bounded blocks, at offsets fixed by the layout.
    let streamed: Vec<(&str, Recipe, DataSlot)> =
        stored.iter().zip(&stored_slots).map(|((name, r), slot)| (name.as_str(), r.normalized(), *slot)).collect();
    write_data_file(&data_path, &streamed, opts)?;
    let mut slots: Vec<DataSlot> = vec![DataSlot { offset: 0, len: 0 }; external.len()];
    let own = (0..external.len()).filter(|i| shared[*i].is_none());
    for (i, slot) in own.zip(&stored_slots) {
        slots[i] = *slot;
    }
    for (i, base) in shared.iter().enumerate() {
        if let Some(b) = base {
            slots[i] = slots[*b];
        }
    }
    let placed: BTreeMap<&str, DataSlot> = external.iter().zip(&slots).map(|((n, _), s)| (n.as_str(), *s)).collect();
    report.data_bytes = stored_slots.last().map(|s| s.offset + s.len).unwrap_or(0);
    report.external_tensors = placed.len();

    // A quantized weight none of whose parts went to the data file is stored inline, through
    // `materialize`, which records no error: record it here, once per weight.
    let mut inline_groups: Vec<&std::sync::Arc<crate::QuantGroup>> = Vec::new();
    for (name, recipe) in &model.graph.initializers {
        if !used.contains(name) || recipe.byte_len() >= INLINE_LIMIT {
            continue;
        }
        let Some((group, _, _)) = crate::stream::quantized_part(recipe) else { continue };
        let streamed = streamed.iter().any(|(_, r, _)| crate::stream::quantized_part(r).is_some_and(|(g, _, _)| std::sync::Arc::ptr_eq(g, group)));
        if !streamed && !inline_groups.iter().any(|g| std::sync::Arc::ptr_eq(g, group)) {
            group.record_error()?;
            inline_groups.push(group);
        }
    }
    let graph = graph_to_proto(&model.graph, &placed, &data_name, &used, &mut report)?;
    let proto = proto::ModelProto {
        ir_version: Some(IR_VERSION),
        opset_import: opset_imports(&model.graph)?,
        producer_name: Some(model.producer.clone()),
        producer_version: Some(env!("CARGO_PKG_VERSION").into()),
        graph: Some(graph),
        metadata_props: model
            .metadata
            .iter()
            .map(|(k, v)| proto::StringStringEntryProto { key: Some(k.clone()), value: Some(v.clone()) })
            .collect(),
        ..Default::default()
    };
    let model_path = dir.join(file_name);
    let bytes = proto.encode_to_vec();
    std::fs::write(&model_path, &bytes).map_err(|e| Error::io(&model_path, e))?;
    report.model_bytes = bytes.len() as u64;
    Ok(report)
}

/// For each external tensor, the earlier one whose bytes it shares, if any: a tensor whose
/// recipe is a reshape (the same bytes under another shape) of another tensor's recipe, or of
/// the same recipe as an earlier view. Only views are compared, so the cost is views x tensors.
fn shared_bytes(external: &[&(String, Recipe)]) -> Vec<Option<usize>> {
    fn unreshaped(r: &Recipe) -> &Recipe {
        match r {
            Recipe::Reshape { input, .. } | Recipe::View { input, .. } => unreshaped(input),
            other => other,
        }
    }
    let mut shared: Vec<Option<usize>> = vec![None; external.len()];
    for (i, (_, recipe)) in external.iter().enumerate() {
        if !matches!(recipe, Recipe::Reshape { .. } | Recipe::View { .. }) {
            continue;
        }
        let base = unreshaped(recipe);
        let same = |(j, (_, other)): &(usize, &&(String, Recipe))| {
            *j != i && shared[*j].is_none() && other.byte_len() == recipe.byte_len() && unreshaped(other) == base
        };
        // A tensor that is not a view first (the part itself), else an earlier view of it.
        let target = external.iter().enumerate().filter(|(_, (_, o))| !matches!(o, Recipe::Reshape { .. } | Recipe::View { .. })).find(same)
            .or_else(|| external.iter().enumerate().take(i).find(same));
        shared[i] = target.map(|(j, _)| j);
    }
    shared
}

/// One opset import per domain used; nodes of one domain must agree on its version.
fn opset_imports(graph: &Graph) -> Result<Vec<proto::OperatorSetIdProto>> {
    fn visit(g: &Graph, seen: &mut BTreeMap<String, (i64, String)>) -> Result<()> {
        for n in &g.nodes {
            if let Some((v, who)) = seen.get(&n.domain) {
                if *v != n.opset {
                    return Err(Error::Graph(format!(
                        "domain `{}` is used at opset {} by `{}` and at opset {} by `{}`",
                        n.domain, v, who, n.opset, n.name
                    )));
                }
            } else {
                seen.insert(n.domain.clone(), (n.opset, n.name.clone()));
            }
            for sub in n.subgraphs() {
                visit(sub, seen)?;
            }
        }
        Ok(())
    }
    let mut seen = BTreeMap::new();
    seen.insert(String::new(), (crate::OPSET, "<default>".to_string()));
    visit(graph, &mut seen)?;
    Ok(seen
        .into_iter()
        .map(|(domain, (version, _))| proto::OperatorSetIdProto { domain: Some(domain), version: Some(version) })
        .collect())
}

pub(crate) fn value_info_to_proto(v: &ValueInfo) -> proto::ValueInfoProto {
    use proto::tensor_shape_proto::{dimension::Value, Dimension};
    let shape = v.shape.as_ref().map(|dims| proto::TensorShapeProto {
        dim: dims
            .iter()
            .map(|d| Dimension {
                value: Some(match d {
                    Dim::Fixed(x) => Value::DimValue(*x),
                    Dim::Sym(s) => Value::DimParam(s.clone()),
                }),
                denotation: None,
            })
            .collect(),
    });
    proto::ValueInfoProto {
        name: Some(v.name.clone()),
        r#type: Some(proto::TypeProto {
            value: Some(proto::type_proto::Value::TensorType(proto::type_proto::Tensor {
                elem_type: Some(v.dtype.to_onnx()),
                shape,
            })),
            denotation: None,
        }),
        ..Default::default()
    }
}

/// An initializer stored in the external data file at `slot`.
pub(crate) fn external_tensor_proto(name: &str, recipe: &Recipe, location: &str, slot: DataSlot) -> proto::TensorProto {
    let entry = |k: &str, v: String| proto::StringStringEntryProto { key: Some(k.into()), value: Some(v) };
    proto::TensorProto {
        name: Some(name.into()),
        dims: recipe.shape().iter().map(|&d| d as i64).collect(),
        data_type: Some(recipe.dtype().to_onnx()),
        data_location: Some(DataLocation::External as i32),
        external_data: vec![
            entry("location", location.into()),
            entry("offset", slot.offset.to_string()),
            entry("length", slot.len.to_string()),
        ],
        ..Default::default()
    }
}

pub(crate) fn inline_tensor_proto(name: &str, recipe: &Recipe) -> Result<proto::TensorProto> {
    Ok(proto::TensorProto {
        name: Some(name.into()),
        dims: recipe.shape().iter().map(|&d| d as i64).collect(),
        data_type: Some(recipe.dtype().to_onnx()),
        raw_data: Some(recipe.materialize().map_err(|e| e.in_tensor(name))?),
        ..Default::default()
    })
}

fn graph_to_proto(
    g: &Graph,
    placed: &BTreeMap<&str, DataSlot>,
    location: &str,
    used: &HashSet<String>,
    report: &mut SaveReport,
) -> Result<proto::GraphProto> {
    let mut initializer = Vec::new();
    for (name, recipe) in &g.initializers {
        if !used.contains(name) {
            continue;
        }
        if let Some(slot) = placed.get(name.as_str()) {
            initializer.push(external_tensor_proto(name, recipe, location, *slot));
        } else {
            report.inline_tensors += 1;
            initializer.push(inline_tensor_proto(name, recipe)?);
        }
    }
    let mut node = Vec::with_capacity(g.nodes.len());
    for n in &g.nodes {
        let mut attribute = Vec::with_capacity(n.attrs.len());
        for a in &n.attrs {
            attribute.push(attr_to_proto(&a.name, &a.value, placed, location, report)?);
        }
        node.push(proto::NodeProto {
            input: n.inputs.clone(),
            output: n.outputs.clone(),
            name: Some(n.name.clone()),
            op_type: Some(n.op.clone()),
            domain: Some(n.domain.clone()),
            attribute,
            metadata_props: n
                .metadata
                .iter()
                .map(|(k, v)| proto::StringStringEntryProto { key: Some(k.clone()), value: Some(v.clone()) })
                .collect(),
            ..Default::default()
        });
    }
    Ok(proto::GraphProto {
        node,
        name: Some(g.name.clone()),
        initializer,
        input: g.inputs.iter().map(value_info_to_proto).collect(),
        output: g.outputs.iter().map(value_info_to_proto).collect(),
        value_info: g.value_info.iter().map(value_info_to_proto).collect(),
        ..Default::default()
    })
}

fn attr_to_proto(
    name: &str,
    value: &AttrValue,
    placed: &BTreeMap<&str, DataSlot>,
    location: &str,
    report: &mut SaveReport,
) -> Result<proto::AttributeProto> {
    use proto::attribute_proto::AttributeType as T;
    let mut a = proto::AttributeProto { name: Some(name.into()), ..Default::default() };
    let ty = match value {
        AttrValue::Int(v) => {
            a.i = Some(*v);
            T::Int
        }
        AttrValue::Float(v) => {
            a.f = Some(*v);
            T::Float
        }
        AttrValue::String(v) => {
            a.s = Some(v.as_bytes().to_vec());
            T::String
        }
        AttrValue::Ints(v) => {
            a.ints = v.clone();
            T::Ints
        }
        AttrValue::Floats(v) => {
            a.floats = v.clone();
            T::Floats
        }
        AttrValue::Strings(v) => {
            a.strings = v.iter().map(|s| s.as_bytes().to_vec()).collect();
            T::Strings
        }
        AttrValue::Tensor(r) => {
            a.t = Some(inline_tensor_proto("", r)?);
            T::Tensor
        }
        AttrValue::Graph(g) => {
            // Subgraph initializers are small by construction; they stay inline.
            let used = g.used_names();
            a.g = Some(graph_to_proto(g, placed, location, &used, report)?);
            T::Graph
        }
    };
    a.r#type = Some(ty as i32);
    Ok(a)
}

/// Whether two paths name the same existing file (device and inode).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn external_entries_carry_64_bit_offsets() {
        let r = Recipe::from_f32("w", vec![2], &[1.0, 2.0]);
        let slot = DataSlot { offset: 6 * (1u64 << 30) + 64, len: 8 };
        let t = external_tensor_proto("w", &r, "model.onnx.data", slot);
        let get = |k: &str| t.external_data.iter().find(|e| e.key.as_deref() == Some(k)).unwrap().value.clone();
        assert_eq!(get("offset").unwrap(), "6442451008");
        assert_eq!(get("length").unwrap(), "8");
        assert_eq!(t.data_type, Some(DType::F32.to_onnx()));
        assert!(t.raw_data.is_none());
    }

    /// A reshape of a written tensor (here before and after it in the list, and a view of a
    /// view) shares its data-file range; the bytes are stored once and read back for both.
    #[test]
    fn reshapes_of_a_written_tensor_share_its_bytes() {
        let values: Vec<f32> = (0..600).map(|i| i as f32).collect();
        let w = Recipe::from_f32("w", vec![20, 30], &values);
        let other = Recipe::from_f32("o", vec![600], &vec![1.0; 600]);
        let mut g = Graph { name: "g".into(), ..Default::default() };
        // Two views of a tensor that is not itself written: the second shares the first's bytes.
        let lone = Recipe::from_f32("t", vec![300], &vec![2.0; 300]);
        let names = ["view", "w", "o", "view2", "view_of_o", "lone_a", "lone_b"];
        let recipes = [
            w.clone().reshape(vec![600]),
            w.clone(),
            other.clone(),
            w.clone().reshape(vec![2, 300]).reshape(vec![600, 1]),
            other.clone().reshape(vec![30, 20]),
            lone.clone().reshape(vec![3, 100]),
            lone.clone().reshape(vec![100, 3]),
        ];
        for (name, r) in names.iter().zip(recipes) {
            g.initializers.push((name.to_string(), r));
            g.outputs.push(ValueInfo::new(*name, DType::F32, vec![]));
        }
        let model = Model { graph: g, ..Default::default() };
        let dir = tempfile::tempdir().unwrap();
        let report = save_model(&model, dir.path(), "m.onnx").unwrap();
        assert_eq!(report.external_tensors, 7);
        assert_eq!(report.data_bytes, 2 * 4096 + 1200, "three tensors stored, page-aligned");
        let loaded = crate::load_model(&dir.path().join("m.onnx")).unwrap();
        for name in names {
            let r = loaded.graph.initializer(name).unwrap();
            let want = if name.starts_with("lone") {
                &lone
            } else if name.ends_with('o') {
                &other
            } else {
                &w
            };
            assert_eq!(r.materialize().unwrap(), want.materialize().unwrap(), "{name}");
        }
        let proto = proto::ModelProto::decode(std::fs::read(dir.path().join("m.onnx")).unwrap().as_slice()).unwrap();
        let offsets: BTreeMap<String, String> = proto
            .graph
            .unwrap()
            .initializer
            .iter()
            .map(|t| (t.name.clone().unwrap(), t.external_data.iter().find(|e| e.key.as_deref() == Some("offset")).unwrap().value.clone().unwrap()))
            .collect();
        assert_eq!((offsets["view"].as_str(), offsets["w"].as_str(), offsets["view2"].as_str()), ("0", "0", "0"));
        assert_eq!((offsets["o"].as_str(), offsets["view_of_o"].as_str()), ("4096", "4096"));
        assert_eq!((offsets["lone_a"].as_str(), offsets["lone_b"].as_str()), ("8192", "8192"));
    }
    /// A byte view of a quantized part (the `uint8` view of 4-bit DequantizeLinear data an
    /// embedding's Gather reads) shares the part's range when the part is written too, and is
    /// written as the part's own bytes when it is not; an odd element count included.
    #[test]
    fn byte_views_of_a_quantized_part_share_or_hold_its_bytes() {
        use crate::quant::{Bits, QuantSettings};
        use crate::{QuantForm, QuantGroup, QuantPart};
        // K = 33: not whole blocks of 32, and K * N odd (a last half byte).
        let (k, n) = (33, 129);
        let values: Vec<f32> = (0..k * n).map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0).collect();
        let settings = QuantSettings::new(Bits::Int4, 32, true).unwrap();
        let group = |name: &str| QuantGroup::new(name, Recipe::from_f32("w", vec![n, k], &values), settings, DType::F32, QuantForm::Dq).unwrap();
        let (shared, alone) = (group("shared"), group("alone"));
        let data = Recipe::quantized(&shared, QuantPart::Data);
        let bytes = data.byte_len();
        assert_eq!(bytes, (k * n).div_ceil(2));
        let mut g = Graph { name: "g".into(), ..Default::default() };
        let tensors = [
            ("data", data.clone()),
            ("data_bytes", data.clone().view(DType::U8, vec![bytes]).unwrap()),
            ("alone_bytes", Recipe::quantized(&alone, QuantPart::Data).view(DType::U8, vec![bytes]).unwrap()),
        ];
        for (name, r) in tensors {
            g.outputs.push(ValueInfo::new(name, r.dtype(), vec![]));
            g.initializers.push((name.to_string(), r));
        }
        assert!(data.clone().view(DType::U8, vec![bytes + 1]).is_err(), "a view of another length");
        let model = Model { graph: g, ..Default::default() };
        let dir = tempfile::tempdir().unwrap();
        let report = save_model(&model, dir.path(), "m.onnx").unwrap();
        assert_eq!(report.external_tensors, 3);
        assert_eq!(report.data_bytes, 4096 + bytes as u64, "two tensors stored, page-aligned");
        let want = data.materialize().unwrap();
        let loaded = crate::load_model(&dir.path().join("m.onnx")).unwrap();
        for name in ["data", "data_bytes", "alone_bytes"] {
            assert_eq!(loaded.graph.initializer(name).unwrap().materialize().unwrap(), want, "{name}");
        }
        assert_eq!(loaded.graph.initializer("data_bytes").unwrap().dtype(), DType::U8);
    }
}
