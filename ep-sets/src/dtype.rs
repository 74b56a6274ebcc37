//! Element types: [`DType`], the types the tool builds and reads (the workspace's one dtype
//! type: `ir` re-exports it), and [`ElemType`], every element type ONNX defines, which ONNX
//! Runtime's kernel registrations and operator schemas (and so the tables' kernel claims)
//! may name.
//!
//! Both are spelled the short way (`f32`, `i64`, ...) in tables, on the command line and in
//! snapshots; [`ElemType::onnx_name`] gives ONNX's `float16` form for messages that quote ONNX
//! Runtime.

use std::fmt;

/// Declares [`ElemType`]: variant, short name, ONNX name, `TensorProto.DataType` code.
macro_rules! elem_types {
    ($($variant:ident $short:literal $onnx:literal $code:literal,)*) => {
        /// Every element type of ONNX's `TensorProto.DataType`, by its short name.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum ElemType {
            $($variant,)*
        }

        impl ElemType {
            pub const ALL: &'static [ElemType] = &[$(ElemType::$variant,)*];

            /// The short name (`f16`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(ElemType::$variant => $short,)*
                }
            }

            /// ONNX's name (`float16`), as in `tensor(float16)`.
            pub const fn onnx_name(self) -> &'static str {
                match self {
                    $(ElemType::$variant => $onnx,)*
                }
            }

            /// The `TensorProto.DataType` code (`ir` checks these against the ONNX protobuf).
            pub const fn code(self) -> i32 {
                match self {
                    $(ElemType::$variant => $code,)*
                }
            }
        }
    };
}

elem_types! {
    F32 "f32" "float" 1,
    U8 "u8" "uint8" 2,
    I8 "i8" "int8" 3,
    U16 "u16" "uint16" 4,
    I16 "i16" "int16" 5,
    I32 "i32" "int32" 6,
    I64 "i64" "int64" 7,
    String "string" "string" 8,
    Bool "bool" "bool" 9,
    F16 "f16" "float16" 10,
    F64 "f64" "double" 11,
    U32 "u32" "uint32" 12,
    U64 "u64" "uint64" 13,
    BF16 "bf16" "bfloat16" 16,
    F8E4M3FN "f8e4m3fn" "float8e4m3fn" 17,
    F8E4M3FNUZ "f8e4m3fnuz" "float8e4m3fnuz" 18,
    F8E5M2 "f8e5m2" "float8e5m2" 19,
    F8E5M2FNUZ "f8e5m2fnuz" "float8e5m2fnuz" 20,
    U4 "u4" "uint4" 21,
    I4 "i4" "int4" 22,
    F4E2M1 "f4e2m1" "float4e2m1" 23,
    F8E8M0 "f8e8m0" "float8e8m0" 24,
    U2 "u2" "uint2" 25,
    I2 "i2" "int2" 26,
}

impl ElemType {
    /// By short name (`f16`).
    pub fn parse(short: &str) -> Option<ElemType> {
        Self::ALL.iter().copied().find(|t| t.name() == short)
    }

    /// By ONNX name, bare (`float16`) or as a tensor type (`tensor(float16)`).
    pub fn from_onnx_name(onnx: &str) -> Option<ElemType> {
        let bare = onnx.strip_prefix("tensor(").and_then(|s| s.strip_suffix(')')).unwrap_or(onnx);
        Self::ALL.iter().copied().find(|t| t.onnx_name() == bare)
    }

    /// The [`DType`] of this element type, if the tool has one.
    pub fn dtype(self) -> Option<DType> {
        DType::ALL.iter().copied().find(|d| d.elem() == self)
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An element type the tool builds with or reads: the dtype of every tensor in its graphs and
/// checkpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

    /// The dtypes a model can be built in (`--dtype`, the tables' `[role.<role>.<name>]` sections).
    pub const PLAN: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

    /// The ONNX element type.
    pub const fn elem(self) -> ElemType {
        match self {
            DType::F32 => ElemType::F32,
            DType::F16 => ElemType::F16,
            DType::BF16 => ElemType::BF16,
            DType::F64 => ElemType::F64,
            DType::I64 => ElemType::I64,
            DType::I32 => ElemType::I32,
            DType::I16 => ElemType::I16,
            DType::I8 => ElemType::I8,
            DType::U8 => ElemType::U8,
            DType::Bool => ElemType::Bool,
            DType::I4 => ElemType::I4,
            DType::U4 => ElemType::U4,
        }
    }

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

    /// Is this one of [`DType::PLAN`]?
    pub fn is_plan(self) -> bool {
        Self::PLAN.contains(&self)
    }

    /// The short name used on the command line, in tables and in snapshots.
    pub const fn name(self) -> &'static str {
        self.elem().name()
    }

    pub fn parse(name: &str) -> Option<DType> {
        Self::ALL.iter().copied().find(|d| d.name() == name)
    }

    /// A plan dtype by name (`None` for any other name, `i64` included).
    pub fn parse_plan(name: &str) -> Option<DType> {
        Self::parse(name).filter(|d| d.is_plan())
    }

    /// The [`DType::PLAN`] names, for messages: `f32, f16, bf16`.
    pub fn plan_names() -> String {
        Self::PLAN.map(|d| d.name()).join(", ")
    }

    /// The `TensorProto.DataType` code.
    pub const fn to_onnx(self) -> i32 {
        self.elem().code()
    }

    pub fn from_onnx(code: i32) -> Option<DType> {
        Self::ALL.iter().copied().find(|d| d.to_onnx() == code)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<DType> for ElemType {
    fn from(d: DType) -> ElemType {
        d.elem()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_round_trip() {
        for &t in ElemType::ALL {
            assert_eq!(ElemType::parse(t.name()), Some(t));
            assert_eq!(ElemType::from_onnx_name(t.onnx_name()), Some(t));
            assert_eq!(ElemType::from_onnx_name(&format!("tensor({})", t.onnx_name())), Some(t));
        }
        for d in DType::ALL {
            assert_eq!(DType::parse(d.name()), Some(d));
            assert_eq!(DType::from_onnx(d.to_onnx()), Some(d));
            assert_eq!(d.elem().dtype(), Some(d));
        }
        assert_eq!(DType::parse_plan("i64"), None);
        assert_eq!(DType::parse_plan("bf16"), Some(DType::BF16));
        assert_eq!(ElemType::F8E4M3FN.dtype(), None);
    }
}
