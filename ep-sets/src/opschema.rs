//! Operator schemas: which type constraint each formal input and output carries. EP tables
//! claim kernels by constraint (`T = ["f16"]`, `M = ["i32"]`); validation needs to know that,
//! say, GroupQueryAttention's input 5 is `M`, to bind a node's dtypes to those names. Type
//! inference (`rules::op_types`) gives an output the dtype its constraint binds.
//! `schemas.toml` is generated from ONNX Runtime 1.32's schema registry by
//! `tools/gen_schemas.py`.

use crate::{DType, ElemType, Error, Location, Result};
use serde::Deserialize;
use std::collections::BTreeMap;

const BUILTIN: &str = include_str!("../schemas.toml");

#[derive(Debug, Clone, Deserialize)]
pub struct OpSchema {
    pub domain: String,
    pub name: String,
    pub since: i64,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    #[serde(default)]
    pub variadic: bool,
    pub constraints: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct File {
    op: Vec<OpSchema>,
}

/// The schemas of every operator an EP table claims or an inference declaration names.
#[derive(Debug, Clone)]
pub struct OpSchemas {
    by_op: BTreeMap<(String, String), OpSchema>,
}

impl OpSchemas {
    pub fn builtin() -> Result<OpSchemas> {
        let file: File = toml::from_str(BUILTIN)
            .map_err(|e| Error::Parse { location: Location::file("schemas.toml"), message: e.to_string() })?;
        let by_op = file.op.into_iter().map(|s| ((s.domain.clone(), s.name.clone()), s)).collect();
        Ok(OpSchemas { by_op })
    }

    pub fn get(&self, domain: &str, op: &str) -> Option<&OpSchema> {
        let domain = crate::domain::normalize(domain);
        self.by_op.get(&(domain.to_string(), op.to_string()))
    }

    /// Binds constraint names to the dtypes of a node's inputs and outputs (`None` where a slot
    /// is absent or its type unknown). The first slot that carries a constraint decides it.
    pub fn bindings(&self, domain: &str, op: &str, inputs: &[Option<DType>], outputs: &[Option<DType>]) -> Option<BTreeMap<String, DType>> {
        let schema = self.get(domain, op)?;
        let mut out = BTreeMap::new();
        let formal = |list: &Vec<String>, i: usize, variadic: bool| -> Option<String> {
            list.get(i).cloned().or_else(|| if variadic { list.last().cloned() } else { None })
        };
        for (i, dtype) in inputs.iter().enumerate() {
            if let (Some(d), Some(c)) = (dtype, formal(&schema.inputs, i, schema.variadic)) {
                if schema.constraints.contains(&c) {
                    out.entry(c).or_insert(*d);
                }
            }
        }
        for (i, dtype) in outputs.iter().enumerate() {
            if let (Some(d), Some(c)) = (dtype, formal(&schema.outputs, i, false)) {
                if schema.constraints.contains(&c) {
                    out.entry(c).or_insert(*d);
                }
            }
        }
        Some(out)
    }

    /// The dtypes of a node's outputs that follow from its inputs' dtypes (`None` where an input
    /// is absent or unknown): an output whose type parameter some input also carries takes the
    /// dtype [`bindings`](Self::bindings) gives it, a fixed tensor type (`tensor(int64)`) is that
    /// type, anything else is unknown. `None` when the operator has no schema.
    pub fn output_dtypes(&self, domain: &str, op: &str, inputs: &[Option<DType>]) -> Option<Vec<Option<DType>>> {
        let schema = self.get(domain, op)?;
        let bound = self.bindings(domain, op, inputs, &[])?;
        let dtype = |formal: &String| match bound.get(formal) {
            Some(d) => Some(*d),
            None if !schema.constraints.contains(formal) => ElemType::from_onnx_name(formal).and_then(ElemType::dtype),
            None => None,
        };
        Some(schema.outputs.iter().map(dtype).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_gqa_slots_to_their_constraints() {
        let s = OpSchemas::builtin().unwrap();
        let f = |x: &str| Some(DType::parse(x).unwrap());
        let inputs = vec![f("f32"), f("f32"), f("f32"), f("f32"), f("f32"), f("i32"), f("i32")];
        let b = s.bindings("com.microsoft", "GroupQueryAttention", &inputs, &[f("f32")]).unwrap();
        assert_eq!(b.get("T").copied(), Some(DType::F32));
        assert_eq!(b.get("M").copied(), Some(DType::I32));
        assert_eq!(b.get("T_CACHE").copied(), Some(DType::F32));
        let concat = s.bindings("", "Concat", &[f("f16"), f("f16"), f("f16")], &[]).unwrap();
        assert_eq!(concat.get("T").copied(), Some(DType::F16));
        assert!(s.get("", "NoSuchOp").is_none());
    }

    #[test]
    fn outputs_take_the_dtype_their_type_parameter_binds() {
        let s = OpSchemas::builtin().unwrap();
        let f = |x: &str| Some(DType::parse(x).unwrap());
        // GatherBlockQuantized: output is T2, which only `scales` (input 2) carries.
        let gbq = s.output_dtypes("com.microsoft", "GatherBlockQuantized", &[f("u8"), f("i64"), f("f16")]).unwrap();
        assert_eq!(gbq, [f("f16")]);
        // SkipSimplifiedLayerNormalization: outputs 1 and 2 are U, which no input carries.
        let skip = s.output_dtypes("com.microsoft", "SkipSimplifiedLayerNormalization", &[f("bf16"), f("bf16"), f("bf16")]).unwrap();
        assert_eq!(skip, [f("bf16"), None, None, f("bf16")]);
        // An unknown input leaves its parameter unknown; a fixed output type needs no input.
        assert_eq!(s.output_dtypes("", "Shape", &[None]).unwrap(), [None]);
        let fixed = OpSchema {
            domain: "x".into(),
            name: "Count".into(),
            since: 1,
            inputs: vec!["T".into()],
            outputs: vec!["tensor(int64)".into(), "T".into()],
            variadic: false,
            constraints: vec!["T".into()],
        };
        let one = OpSchemas { by_op: [(("x".to_string(), "Count".to_string()), fixed)].into() };
        assert_eq!(one.output_dtypes("x", "Count", &[f("f16")]).unwrap(), [f("i64"), f("f16")]);
        assert_eq!(s.output_dtypes("com.microsoft", "MatMulNBits", &[None, f("u8"), f("f32")]).unwrap(), [f("f32")]);
        assert!(s.output_dtypes("com.microsoft", "NoSuchOp", &[]).is_none());
    }
}
