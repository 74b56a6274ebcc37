use crate::proto::tensor_proto::DataType;
use std::fmt;

/// Element types the tool reads, computes with or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    F16,
    BF16,
    F64,
    I64,
    I32,
    I16,
    I8,
    U8,
    Bool,
    /// Signed 4-bit, two per byte (low nibble first) over the flattened tensor, as ONNX packs
    /// it: the data of a symmetric blocked `DequantizeLinear`.
    I4,
    /// Unsigned 4-bit, packed as [`DType::I4`].
    U4,
}

impl DType {
    /// Bytes per element; 1 for the 4-bit types, whose tensors take [`DType::bytes_for`]
    /// bytes (never address a 4-bit tensor by element with this).
    pub fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 | DType::I16 => 2,
            DType::I8 | DType::U8 | DType::Bool | DType::I4 | DType::U4 => 1,
        }
    }

    /// Is this a sub-byte type (two elements per byte)?
    pub fn is_packed(self) -> bool {
        matches!(self, DType::I4 | DType::U4)
    }

    /// Bytes a tensor of `numel` elements takes.
    pub fn bytes_for(self, numel: usize) -> usize {
        if self.is_packed() {
            numel.div_ceil(2)
        } else {
            numel * self.size()
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
    }

    /// The short name used on the command line, in tables and in snapshots.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F64 => "f64",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::I16 => "i16",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::Bool => "bool",
            DType::I4 => "i4",
            DType::U4 => "u4",
        }
    }

    pub fn parse(name: &str) -> Option<DType> {
        Self::ALL.iter().copied().find(|d| d.name() == name)
    }

    pub const ALL: [DType; 12] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I64,
        DType::I32,
        DType::I16,
        DType::I8,
        DType::U8,
        DType::Bool,
        DType::I4,
        DType::U4,
    ];

    pub fn to_onnx(self) -> i32 {
        (match self {
            DType::F32 => DataType::Float,
            DType::F16 => DataType::Float16,
            DType::BF16 => DataType::Bfloat16,
            DType::F64 => DataType::Double,
            DType::I64 => DataType::Int64,
            DType::I32 => DataType::Int32,
            DType::I16 => DataType::Int16,
            DType::I8 => DataType::Int8,
            DType::U8 => DataType::Uint8,
            DType::Bool => DataType::Bool,
            DType::I4 => DataType::Int4,
            DType::U4 => DataType::Uint4,
        }) as i32
    }

    pub fn from_onnx(code: i32) -> Option<DType> {
        Some(match DataType::try_from(code).ok()? {
            DataType::Float => DType::F32,
            DataType::Float16 => DType::F16,
            DataType::Bfloat16 => DType::BF16,
            DataType::Double => DType::F64,
            DataType::Int64 => DType::I64,
            DataType::Int32 => DType::I32,
            DataType::Int16 => DType::I16,
            DataType::Int8 => DType::I8,
            DataType::Uint8 => DType::U8,
            DataType::Bool => DType::Bool,
            DataType::Int4 => DType::I4,
            DataType::Uint4 => DType::U4,
            _ => return None,
        })
    }

    /// The dtype of a safetensors tensor, or `None` for types the tool does not read.
    pub fn from_safetensors(dtype: safetensors::Dtype) -> Option<DType> {
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
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
