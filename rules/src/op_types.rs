//! Type inference for the operators `ir` does not define: ONNX Runtime's contrib ops that the
//! rules (and the quantization stage) emit, and the one it registers in the default domain.
//!
//! Each operator is a [`Declaration`]: the output dtypes come from its ONNX Runtime schema
//! (`ep_sets::OpSchemas`: an output whose type parameter an input also carries takes that
//! input's dtype), the shapes from a small function of the input shapes and attributes. A
//! declaration names the formal inputs (by position) and the attributes its shape reads, so a
//! test can check them against the installed ONNX Runtime's schemas
//! (`tests/tests/op_declarations.rs`). `ir::infer_types(graph, rules::op_types())` uses them.

use ep_sets::{Domain, OpSchemas};
use ir::{DType, Dim, Inferred, Node, OpInference, ValueInfo};
use std::sync::LazyLock;

/// One output's shape, as a declaration says it.
#[derive(Debug, Clone, PartialEq)]
pub enum OutShape {
    Dims(Vec<Dim>),
    /// The dtype is known, the shape (or rank) is not.
    Unknown,
    /// The declaration says nothing of this output (the graph declares it, or nobody reads it).
    NotInferred,
}

/// The inputs' types, by position (`None`: absent or unknown).
type Inputs<'a> = [Option<&'a ValueInfo>];

/// An operator's inference declaration.
pub struct Declaration {
    /// The domain as nodes store it (`""` for the default domain).
    pub domain: &'static str,
    pub op: &'static str,
    /// The formal inputs the shape function reads: (position, the schema's name for it).
    pub inputs: &'static [(usize, &'static str)],
    /// The attributes the shape function reads.
    pub attrs: &'static [&'static str],
    /// The outputs' shapes, in order; outputs past the end are [`OutShape::NotInferred`].
    pub shape: fn(&Node, &Inputs) -> Vec<OutShape>,
}

const MS: &str = Domain::MICROSOFT;

/// Every declared operator. `ep-sets/tools/gen_schemas.py` reads the `domain`/`op` pairs of
/// this list, so each one has a schema in `ep-sets/schemas.toml`.
pub const DECLARATIONS: &[Declaration] = &[
    Declaration { domain: MS, op: "RotaryEmbedding", inputs: &[(0, "input")], attrs: &[], shape: same_as_first },
    Declaration { domain: MS, op: "FastGelu", inputs: &[(0, "X")], attrs: &[], shape: same_as_first },
    Declaration { domain: MS, op: "QuickGelu", inputs: &[(0, "X")], attrs: &[], shape: same_as_first },
    Declaration { domain: MS, op: "Gelu", inputs: &[(0, "X")], attrs: &[], shape: same_as_first },
    Declaration { domain: MS, op: "BiasGelu", inputs: &[(0, "A")], attrs: &[], shape: same_as_first },
    // ONNX Runtime registers it in the default domain (since opset 1); Y is the scale's type.
    Declaration { domain: "", op: "SimplifiedLayerNormalization", inputs: &[(0, "X")], attrs: &[], shape: same_as_first },
    Declaration { domain: MS, op: "SkipSimplifiedLayerNormalization", inputs: &[(0, "input")], attrs: &[], shape: skip_norm },
    Declaration { domain: MS, op: "SkipLayerNormalization", inputs: &[(0, "input")], attrs: &[], shape: skip_norm },
    Declaration {
        domain: MS,
        op: "GroupQueryAttention",
        inputs: &[(0, "query"), (1, "key")],
        attrs: &["num_heads", "kv_num_heads"],
        shape: group_query_attention,
    },
    Declaration {
        domain: MS,
        op: "MultiHeadAttention",
        inputs: &[(0, "query"), (2, "value")],
        attrs: &[],
        shape: multi_head_attention,
    },
    // The routed experts' sum has the input's shape ([tokens, hidden] or [batch, seq, hidden]).
    Declaration { domain: MS, op: "MoE", inputs: &[(0, "input")], attrs: &[], shape: same_as_first },
    // QMoE (the quantize step's form of a fused MoE node): the same output.
    Declaration { domain: MS, op: "QMoE", inputs: &[(0, "input")], attrs: &[], shape: same_as_first },
    Declaration { domain: MS, op: "MatMulNBits", inputs: &[(0, "A")], attrs: &["N"], shape: matmul_nbits },
    Declaration {
        domain: MS,
        op: "GatherBlockQuantized",
        inputs: &[(0, "data"), (1, "indices")],
        attrs: &["gather_axis", "bits"],
        shape: gather_block_quantized,
    },
];

fn shape_of(inputs: &Inputs, i: usize) -> Option<Vec<Dim>> {
    inputs.get(i).copied().flatten().and_then(|v| v.shape.clone())
}

fn dims_or_unknown(dims: Option<Vec<Dim>>) -> OutShape {
    dims.map_or(OutShape::Unknown, OutShape::Dims)
}

/// Elementwise ops and normalizations: the output has the first input's shape.
fn same_as_first(_: &Node, inputs: &Inputs) -> Vec<OutShape> {
    vec![dims_or_unknown(shape_of(inputs, 0))]
}

/// (output, mean, inv_std_var, input_skip_bias_sum): the sum has the input's shape too.
fn skip_norm(_: &Node, inputs: &Inputs) -> Vec<OutShape> {
    let x = dims_or_unknown(shape_of(inputs, 0));
    vec![x.clone(), OutShape::NotInferred, OutShape::NotInferred, x]
}

/// Output `[B, S, num_heads * head_size]`. Unpacked, that is the query's shape; packed (no
/// `key`), the query is `[B, S, (num_heads + 2 * kv_num_heads) * head_size]`. The present
/// key and value depend on the runtime total length; the graph declares them.
fn group_query_attention(n: &Node, inputs: &Inputs) -> Vec<OutShape> {
    let query = shape_of(inputs, 0);
    let out = if n.input(1).is_some() {
        query
    } else {
        match (query, n.attr_int("num_heads"), n.attr_int("kv_num_heads")) {
            (Some(q), Some(h), Some(kv)) if q.len() == 3 => match q[2] {
                Dim::Fixed(width) if h > 0 && kv >= 0 && width % (h + 2 * kv) == 0 => {
                    Some(vec![q[0].clone(), q[1].clone(), Dim::Fixed(h * (width / (h + 2 * kv)))])
                }
                _ => None,
            },
            _ => None,
        }
    };
    vec![dims_or_unknown(out)]
}

/// Y: A's shape with the last dim replaced by the attribute N.
/// MultiHeadAttention with separate 3-D query, key and value: `[batch, seq, v_hidden]`.
fn multi_head_attention(_: &Node, inputs: &Inputs) -> Vec<OutShape> {
    let out = match (shape_of(inputs, 0), shape_of(inputs, 2)) {
        (Some(q), Some(v)) if q.len() == 3 && v.len() == 3 => Some(vec![q[0].clone(), q[1].clone(), v[2].clone()]),
        _ => None,
    };
    vec![dims_or_unknown(out)]
}

fn matmul_nbits(n: &Node, inputs: &Inputs) -> Vec<OutShape> {
    let out = match (shape_of(inputs, 0), n.attr_int("N")) {
        (Some(mut a), Some(cols)) if !a.is_empty() => {
            *a.last_mut().expect("non-empty") = Dim::Fixed(cols);
            Some(a)
        }
        _ => None,
    };
    vec![dims_or_unknown(out)]
}

/// A Gather of the unpacked data: `data[..axis] + indices + data[axis + 1..]`, where uint8 data
/// with `bits` < 8 packs 8 / bits values per byte along its last dim (attribute defaults:
/// gather_axis 0, bits 4).
fn gather_block_quantized(n: &Node, inputs: &Inputs) -> Vec<OutShape> {
    let data = inputs.first().copied().flatten();
    let out = match (data.and_then(|d| d.shape.clone()), shape_of(inputs, 1)) {
        (Some(mut data_dims), Some(indices)) if !data_dims.is_empty() => {
            let bits = n.attr_int("bits").unwrap_or(4);
            let packed = data.is_some_and(|d| d.dtype == DType::U8) && (1..8).contains(&bits) && 8 % bits == 0;
            match data_dims.last_mut() {
                Some(Dim::Fixed(last)) if packed => *last *= 8 / bits,
                Some(Dim::Sym(_)) if packed => return vec![OutShape::Unknown],
                _ => {}
            }
            let rank = data_dims.len() as i64;
            let axis = n.attr_int("gather_axis").unwrap_or(0);
            let axis = if axis < 0 { axis + rank } else { axis };
            (0..rank).contains(&axis).then(|| {
                let a = axis as usize;
                [&data_dims[..a], &indices[..], &data_dims[a + 1..]].concat()
            })
        }
        _ => None,
    };
    vec![dims_or_unknown(out)]
}

/// The declarations, with the schemas their dtypes come from.
pub struct OpTypes {
    schemas: OpSchemas,
}

impl OpTypes {
    /// The declaration of `op` in `domain` (either spelling of the default domain).
    pub fn declaration(&self, domain: &str, op: &str) -> Option<&'static Declaration> {
        DECLARATIONS.iter().find(|d| d.op == op && Domain::same(d.domain, domain))
    }
}

impl OpInference for OpTypes {
    fn infer(&self, node: &Node, inputs: &[Option<&ValueInfo>]) -> Vec<Inferred> {
        let Some(decl) = self.declaration(&node.domain, &node.op) else { return Vec::new() };
        let in_dtypes: Vec<Option<DType>> = inputs.iter().map(|v| v.map(|v| v.dtype)).collect();
        let Some(dtypes) = self.schemas.output_dtypes(&node.domain, &node.op, &in_dtypes) else { return Vec::new() };
        let mut shapes = (decl.shape)(node, inputs).into_iter();
        dtypes
            .into_iter()
            .map(|dtype| {
                let shape = shapes.next().unwrap_or(OutShape::NotInferred);
                let dtype = dtype?;
                match shape {
                    OutShape::Dims(d) => Some((dtype, Some(d))),
                    OutShape::Unknown => Some((dtype, None)),
                    OutShape::NotInferred => None,
                }
            })
            .collect()
    }
}

static OP_TYPES: LazyLock<OpTypes> =
    LazyLock::new(|| OpTypes { schemas: OpSchemas::builtin().expect("ep-sets/schemas.toml parses (ep-sets tests)") });

/// The declared operators, for `ir::infer_types`.
pub fn op_types() -> &'static OpTypes {
    &OP_TYPES
}
