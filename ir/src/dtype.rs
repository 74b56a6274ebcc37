//! [`DType`] is defined in `ep-sets` (the vocabulary crate at the bottom of the workspace, so
//! the tables are keyed by it too) and re-exported here. What needs `ir`'s dependencies stays
//! here: reading a safetensors dtype, and the check that its codes are the ONNX protobuf's.

pub use ep_sets::DType;

/// The dtype of a safetensors tensor, or `None` for types the tool does not read.
pub fn dtype_from_safetensors(dtype: safetensors::Dtype) -> Option<DType> {
    use safetensors::Dtype as S;
    Some(match dtype {
        S::F32 => DType::F32,
        S::F16 => DType::F16,
        S::BF16 => DType::BF16,
        S::F64 => DType::F64,
        S::I64 => DType::I64,
        S::I32 => DType::I32,
        S::I16 => DType::I16,
        S::I8 => DType::I8,
        S::U8 => DType::U8,
        S::BOOL => DType::Bool,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use crate::proto::tensor_proto::DataType;
    use ep_sets::ElemType;

    /// `ep-sets` writes the `TensorProto.DataType` codes by hand; they are the protobuf's.
    #[test]
    fn element_type_codes_are_the_onnx_protobufs() {
        for &t in ElemType::ALL {
            let proto = DataType::try_from(t.code()).unwrap_or_else(|_| panic!("{t}: code {} is not in onnx.proto", t.code()));
            let name = proto.as_str_name().to_ascii_lowercase();
            assert_eq!(name, t.onnx_name(), "{t}: code {} is {name} in onnx.proto", t.code());
        }
    }
}
