//! Reading `model.onnx` (and its external data, memory-mapped) back into a [`Model`].

use crate::proto::{self, tensor_proto::DataLocation};
use crate::{Attr, AttrValue, DType, Dim, Error, Graph, MappedFile, Model, Node, Recipe, Result, SourceTensor, ValueInfo};
use prost::Message;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

struct Loader {
    dir: PathBuf,
    model_path: PathBuf,
    opsets: HashMap<String, i64>,
    files: HashMap<String, Arc<MappedFile>>,
}

/// Loads a model written by [`crate::save_model`] (or any ONNX model with raw or external data).
pub fn load_model(path: &Path) -> Result<Model> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let proto = proto::ModelProto::decode(bytes.as_slice())
        .map_err(|e| Error::Decode { path: path.into(), reason: e.to_string() })?;
    let mut loader = Loader {
        dir: path.parent().unwrap_or(Path::new(".")).to_path_buf(),
        model_path: path.to_path_buf(),
        opsets: proto
            .opset_import
            .iter()
            .map(|o| (o.domain.clone().unwrap_or_default(), o.version.unwrap_or(0)))
            .collect(),
        files: HashMap::new(),
    };
    let graph = proto.graph.as_ref().ok_or_else(|| loader.err("the model has no graph"))?;
    Ok(Model {
        graph: loader.graph(graph)?,
        metadata: proto
            .metadata_props
            .iter()
            .map(|e| (e.key.clone().unwrap_or_default(), e.value.clone().unwrap_or_default()))
            .collect::<BTreeMap<_, _>>(),
        producer: proto.producer_name.unwrap_or_default(),
    })
}

impl Loader {
    fn err(&self, reason: impl Into<String>) -> Error {
        Error::Decode { path: self.model_path.clone(), reason: reason.into() }
    }

    fn graph(&mut self, g: &proto::GraphProto) -> Result<Graph> {
        let mut initializers = Vec::new();
        for t in &g.initializer {
            initializers.push((t.name.clone().unwrap_or_default(), self.tensor(t)?));
        }
        let mut nodes = Vec::new();
        for n in &g.node {
            let domain = n.domain.clone().unwrap_or_default();
            let mut attrs = Vec::new();
            for a in &n.attribute {
                attrs.push(Attr { name: a.name.clone().unwrap_or_default(), value: self.attr(a)? });
            }
            nodes.push(Node {
                name: n.name.clone().unwrap_or_default(),
                op: n.op_type.clone().unwrap_or_default(),
                opset: self.opsets.get(&domain).copied().unwrap_or(0),
                domain,
                inputs: n.input.clone(),
                outputs: n.output.clone(),
                attrs,
                metadata: n
                    .metadata_props
                    .iter()
                    .map(|e| (e.key.clone().unwrap_or_default(), e.value.clone().unwrap_or_default()))
                    .collect(),
            });
        }
        let vi = |v: &Vec<proto::ValueInfoProto>| v.iter().map(|x| self.value_info(x)).collect::<Result<Vec<_>>>();
        Ok(Graph {
            name: g.name.clone().unwrap_or_default(),
            inputs: vi(&g.input)?,
            outputs: vi(&g.output)?,
            nodes,
            initializers,
            value_info: vi(&g.value_info)?,
        })
    }

    fn value_info(&self, v: &proto::ValueInfoProto) -> Result<ValueInfo> {
        use proto::tensor_shape_proto::dimension::Value;
        let name = v.name.clone().unwrap_or_default();
        let Some(proto::type_proto::Value::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
            return Err(self.err(format!("value `{name}` is not a tensor")));
        };
        let dtype = DType::from_onnx(t.elem_type.unwrap_or(0))
            .ok_or_else(|| self.err(format!("value `{name}` has an unsupported element type")))?;
        let shape = t.shape.as_ref().map(|s| {
            s.dim
                .iter()
                .map(|d| match &d.value {
                    Some(Value::DimValue(x)) => Dim::Fixed(*x),
                    Some(Value::DimParam(p)) => Dim::Sym(p.clone()),
                    None => Dim::Sym(String::new()),
                })
                .collect()
        });
        Ok(ValueInfo { name, dtype, shape })
    }

    fn attr(&mut self, a: &proto::AttributeProto) -> Result<AttrValue> {
        use proto::attribute_proto::AttributeType as T;
        let name = a.name.clone().unwrap_or_default();
        let string = |b: &Vec<u8>| String::from_utf8_lossy(b).into_owned();
        Ok(match T::try_from(a.r#type.unwrap_or(0)).unwrap_or(T::Undefined) {
            T::Int => AttrValue::Int(a.i.unwrap_or(0)),
            T::Float => AttrValue::Float(a.f.unwrap_or(0.0)),
            T::String => AttrValue::String(a.s.as_ref().map(string).unwrap_or_default()),
            T::Ints => AttrValue::Ints(a.ints.clone()),
            T::Floats => AttrValue::Floats(a.floats.clone()),
            T::Strings => AttrValue::Strings(a.strings.iter().map(string).collect()),
            T::Tensor => AttrValue::Tensor(self.tensor(a.t.as_ref().ok_or_else(|| self.err("empty tensor attribute"))?)?),
            T::Graph => AttrValue::Graph(Box::new(
                self.graph(a.g.as_ref().ok_or_else(|| self.err("empty graph attribute"))?)?,
            )),
            other => return Err(self.err(format!("attribute `{name}` has unsupported type {other:?}"))),
        })
    }

    fn tensor(&mut self, t: &proto::TensorProto) -> Result<Recipe> {
        let name = t.name.clone().unwrap_or_default();
        let dtype = DType::from_onnx(t.data_type.unwrap_or(0))
            .ok_or_else(|| self.err(format!("tensor `{name}` has an unsupported element type")))?;
        let shape: Vec<usize> = t.dims.iter().map(|&d| d as usize).collect();
        let len = dtype.bytes_for(shape.iter().product::<usize>());
        if t.data_location == Some(DataLocation::External as i32) {
            let get = |k: &str| t.external_data.iter().find(|e| e.key.as_deref() == Some(k)).and_then(|e| e.value.clone());
            let location = get("location").ok_or_else(|| self.err(format!("tensor `{name}` has no location")))?;
            let offset: usize = get("offset").map(|v| v.parse().unwrap_or(usize::MAX)).unwrap_or(0);
            let file = match self.files.get(&location) {
                Some(f) => Arc::clone(f),
                None => {
                    let f = MappedFile::open(&self.dir.join(&location))?;
                    self.files.insert(location.clone(), Arc::clone(&f));
                    f
                }
            };
            return Ok(Recipe::source(SourceTensor { name, file, dtype, shape, offset, len }));
        }
        let bytes = if let Some(raw) = &t.raw_data {
            raw.clone()
        } else {
            match dtype {
                DType::F32 => t.float_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
                DType::I64 => t.int64_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
                DType::F64 => t.double_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
                DType::I32 => t.int32_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
                // 4-bit values come packed two per element, one byte each.
                DType::Bool | DType::U8 | DType::I8 | DType::I4 | DType::U4 => t.int32_data.iter().map(|&v| v as u8).collect(),
                DType::F16 | DType::BF16 | DType::I16 => {
                    t.int32_data.iter().flat_map(|&v| (v as u16).to_le_bytes()).collect()
                }
            }
        };
        if bytes.len() != len {
            return Err(self.err(format!("tensor `{name}` holds {} bytes for {dtype}{shape:?}", bytes.len())));
        }
        Ok(Recipe::data(name, dtype, shape, bytes))
    }
}
