//! Dtype names used in tables.
//!
//! Tables spell element types the short way (`f32`, `i64`, ...) so that a kernel's type list
//! reads like the model's dtype flag; [`onnx_name`] maps them back to ONNX's `tensor(float)` form
//! for messages that quote ONNX Runtime.

/// The dtypes a model can be built in (`[dtype.<name>]` sections).
pub const PLAN_DTYPES: &[&str] = &["f32", "f16", "bf16"];

/// Every element type a kernel's type constraint may list, with ONNX's name for it.
pub const TENSOR_DTYPES: &[(&str, &str)] = &[
    ("f32", "float"),
    ("f16", "float16"),
    ("bf16", "bfloat16"),
    ("f64", "double"),
    ("i8", "int8"),
    ("i16", "int16"),
    ("i32", "int32"),
    ("i64", "int64"),
    ("u8", "uint8"),
    ("u16", "uint16"),
    ("u32", "uint32"),
    ("u64", "uint64"),
    ("bool", "bool"),
    ("string", "string"),
    ("i4", "int4"),
    ("u4", "uint4"),
    ("i2", "int2"),
    ("u2", "uint2"),
    ("f8e4m3fn", "float8e4m3fn"),
    ("f8e4m3fnuz", "float8e4m3fnuz"),
    ("f8e5m2", "float8e5m2"),
    ("f8e5m2fnuz", "float8e5m2fnuz"),
    ("f8e8m0", "float8e8m0"),
    ("f4e2m1", "float4e2m1"),
];

/// Is `name` a dtype a `[dtype.*]` section may be named after?
pub fn is_plan_dtype(name: &str) -> bool {
    PLAN_DTYPES.contains(&name)
}

/// Is `name` an element type a kernel may list?
pub fn is_tensor_dtype(name: &str) -> bool {
    TENSOR_DTYPES.iter().any(|(short, _)| *short == name)
}

/// ONNX's name (`float16`) for a table's short name (`f16`).
pub fn onnx_name(short: &str) -> Option<&'static str> {
    TENSOR_DTYPES.iter().find(|(s, _)| *s == short).map(|(_, o)| *o)
}

/// The table's short name for an ONNX element type name (`float16` or `tensor(float16)`).
pub fn short_name(onnx: &str) -> Option<&'static str> {
    let bare = onnx.strip_prefix("tensor(").and_then(|s| s.strip_suffix(')')).unwrap_or(onnx);
    TENSOR_DTYPES.iter().find(|(_, o)| *o == bare).map(|(s, _)| *s)
}
