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
///
/// model.onnx is read as a regular file of at most 2 GiB ([`crate::MODEL_PROTO_LIMIT`]), and
/// every tensor's external data is checked before it is mapped: its location is a relative
/// path inside the model's folder (no absolute path, no `..`, no link that leads out), a
/// regular file, and long enough for the tensor's offset and length. A problem is an error
/// naming the tensor.
pub fn load_model(path: &Path) -> Result<Model> {
    let bytes = crate::read_regular(path, crate::MODEL_PROTO_LIMIT)?
        .ok_or_else(|| Error::io(path, std::io::Error::from(std::io::ErrorKind::NotFound)))?;
    let proto = proto::ModelProto::decode(bytes.as_slice())
        .map_err(|e| Error::Decode { path: path.into(), reason: e.to_string() })?;
    let mut loader = Loader {
        dir: path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf(),
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
    /// The file an external-data `location` names, if it is a regular file inside the model's
    /// folder; else why not. Checked before anything is opened, so a model cannot make a reader
    /// map (or block on) a file elsewhere.
    fn data_file(&self, location: &str) -> std::result::Result<PathBuf, String> {
        use std::path::Component;
        let rel = Path::new(location);
        if location.is_empty() {
            return Err("has an empty location".into());
        }
        if rel.is_absolute() {
            return Err(format!("names `{location}`, an absolute path: external data must lie in the model's folder"));
        }
        if rel.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(format!("names `{location}`, which leads out of the model's folder (`..`)"));
        }
        let path = self.dir.join(rel);
        match crate::entry_kind(&path) {
            crate::EntryKind::Regular => {}
            crate::EntryKind::Absent => return Err(format!("names `{location}`, which does not exist beside {}", self.model_path.display())),
            kind => return Err(format!("names `{location}`, which {}", kind.describe())),
        }
        let (real, folder) = (path.canonicalize(), self.dir.canonicalize());
        match (real, folder) {
            (Ok(real), Ok(folder)) if real.starts_with(&folder) => Ok(path),
            (Ok(real), Ok(_)) => Err(format!("names `{location}`, a link to {}, outside the model's folder", real.display())),
            (Err(e), _) | (_, Err(e)) => Err(format!("names `{location}`, which cannot be resolved ({e})")),
        }
    }

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
            let bad = |reason: String| Error::ExternalData { model: self.model_path.clone(), tensor: name.clone(), reason };
            let get = |k: &str| t.external_data.iter().find(|e| e.key.as_deref() == Some(k)).and_then(|e| e.value.clone());
            let number = |key: &str| -> Result<Option<usize>> {
                get(key).map(|v| v.trim().parse::<usize>().map_err(|_| bad(format!("has {key} `{v}`, which is not a byte count")))).transpose()
            };
            let location = get("location").ok_or_else(|| bad("has no location".into()))?;
            let offset = number("offset")?.unwrap_or(0);
            if let Some(length) = number("length")? {
                if length != len {
                    return Err(bad(format!("has length {length}, but {dtype}{shape:?} is {len} bytes")));
                }
            }
            let file = match self.files.get(&location) {
                Some(f) => Arc::clone(f),
                None => {
                    let path = self.data_file(&location).map_err(&bad)?;
                    let f = MappedFile::open(&path)?;
                    self.files.insert(location.clone(), Arc::clone(&f));
                    f
                }
            };
            let size = file.bytes().len();
            match offset.checked_add(len) {
                Some(end) if end <= size => {}
                _ => {
                    return Err(bad(format!(
                        "lies at bytes {offset}..{} of {location}, which holds {size} bytes: the file is truncated (or the model names the wrong file)",
                        offset as u128 + len as u128
                    )))
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{save_model, DATA_FILE_SUFFIX};

    /// A model of two external tensors (over the inline limit) saved in `dir`.
    fn saved(dir: &Path) -> PathBuf {
        let mut model = Model::default();
        for name in ["a", "b"] {
            let values: Vec<f32> = (0..512).map(|v| v as f32).collect();
            model.graph.initializers.push((name.into(), Recipe::from_f32(name, vec![512], &values)));
        }
        model.graph.nodes.push(Node {
            name: "add".into(),
            op: "Add".into(),
            domain: String::new(),
            opset: crate::OPSET,
            inputs: vec!["a".into(), "b".into()],
            outputs: vec!["y".into()],
            attrs: vec![],
            metadata: BTreeMap::new(),
        });
        model.graph.outputs.push(ValueInfo { name: "y".into(), dtype: DType::F32, shape: Some(vec![Dim::Fixed(512)]) });
        save_model(&model, dir, "model.onnx").unwrap();
        dir.join("model.onnx")
    }

    /// Rewrites tensor `b`'s external-data entry `key` to `value` in the saved model.
    fn set_entry(path: &Path, key: &str, value: &str) {
        let mut proto = proto::ModelProto::decode(std::fs::read(path).unwrap().as_slice()).unwrap();
        let t = proto.graph.as_mut().unwrap().initializer.iter_mut().find(|t| t.name.as_deref() == Some("b")).unwrap();
        let e = t.external_data.iter_mut().find(|e| e.key.as_deref() == Some(key)).unwrap();
        e.value = Some(value.into());
        std::fs::write(path, proto.encode_to_vec()).unwrap();
    }

    fn load_error(path: &Path) -> String {
        let e = load_model(path).expect_err("the model must be refused").to_string();
        assert!(e.contains("tensor `b`"), "names the tensor: {e}");
        e
    }

    #[test]
    fn a_truncated_data_file_is_refused_naming_the_tensor() {
        let dir = tempfile::tempdir().unwrap();
        let path = saved(dir.path());
        assert_eq!(load_model(&path).unwrap().graph.initializers.len(), 2);
        let data = dir.path().join(format!("model.onnx{DATA_FILE_SUFFIX}"));
        let len = std::fs::metadata(&data).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&data).unwrap().set_len(len - 1).unwrap();
        let e = load_error(&path);
        assert!(e.contains("truncated") && e.contains(&format!("holds {} bytes", len - 1)), "{e}");
    }

    #[test]
    fn locations_outside_the_folder_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("pkg");
        std::fs::create_dir(&dir).unwrap();
        let path = saved(&dir);
        let data = format!("model.onnx{DATA_FILE_SUFFIX}");
        std::fs::copy(dir.join(&data), root.path().join("outside.data")).unwrap();
        let outside = root.path().join("outside.data").display().to_string();
        std::os::unix::fs::symlink(root.path().join("outside.data"), dir.join("link.data")).unwrap();
        std::os::unix::fs::symlink(dir.join(&data), dir.join("inside-link.data")).unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        let fifo = std::ffi::CString::new(dir.join("fifo.data").into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        for (location, expect) in [
            (outside.as_str(), "absolute path"),
            ("../outside.data", "`..`"),
            ("sub/../../outside.data", "`..`"),
            ("link.data", "outside the model's folder"),
            ("missing.data", "does not exist"),
            ("sub", "folder"),
            ("fifo.data", "FIFO"),
            ("", "empty location"),
        ] {
            set_entry(&path, "location", location);
            let e = load_error(&path);
            assert!(e.contains(expect), "{location:?}: {e}");
        }
        // A link that stays inside the folder is fine.
        set_entry(&path, "location", "inside-link.data");
        assert!(load_model(&path).is_ok());
    }

    #[test]
    fn offsets_and_lengths_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = saved(dir.path());
        for (key, value, expect) in [
            ("offset", "x", "not a byte count"),
            ("offset", "18446744073709551615", "truncated"),
            ("offset", "4096000", "truncated"),
            ("length", "12", "has length 12, but f32[512] is 2048 bytes"),
        ] {
            let fresh = tempfile::tempdir().unwrap();
            let p = saved(fresh.path());
            set_entry(&p, key, value);
            let e = load_error(&p);
            assert!(e.contains(expect), "{key}={value}: {e}");
        }
        assert!(load_model(&path).is_ok());
    }

    #[test]
    fn model_onnx_must_be_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let fifo_path = dir.path().join("model.onnx");
        let fifo = std::ffi::CString::new(fifo_path.clone().into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let e = load_model(&fifo_path).expect_err("a FIFO is refused").to_string();
        assert!(e.contains("FIFO"), "{e}");
    }
}
