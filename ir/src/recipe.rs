//! Lazy initializers. A recipe names where the bytes come from (a source tensor or computed
//! data) and the transforms to apply; it is materialized only when the model is written, one
//! tensor at a time, so a build never holds the whole model in memory.

use crate::packed::PackedWeight;
use crate::qweight::{QuantGroup, QuantPart};
use crate::{DType, Error, Result, SourceTensor};
use half::{bf16, f16};
use std::sync::Arc;

/// Values computed by the builder itself (RoPE caches, shape constants), with a label that says
/// what they are, for snapshots and error messages.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorData {
    pub label: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub values: DataValues,
}

/// How a [`TensorData`]'s values are held.
#[derive(Clone, Debug, PartialEq)]
pub enum DataValues {
    /// The bytes themselves (small constants).
    Bytes(Vec<u8>),
    /// A rotary cos/sin table, computed row by row when it is written: a long context's pair
    /// of caches is tens of megabytes (Llama 3.1: 131,072 positions x 64 x f32 x 2 = 67 MB;
    /// Gemma 3 has two pairs), which a build would otherwise hold from graph construction to
    /// the end of the write.
    Trig(TrigTable),
}

/// `f(p * inv_freq[i]) * scale` at row `p`, column `i` (f32, in that order of operations, as
/// transformers computes its caches); `shape[0]` rows. Tables compare by their parameters' bits
/// (as [`Recipe::Offset`] does): equal parameters give equal bytes, and `-0.0` is not `0.0`.
#[derive(Clone, Debug)]
pub struct TrigTable {
    pub inv_freq: Vec<f32>,
    pub scale: f32,
    pub func: TrigFn,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrigFn {
    Cos,
    Sin,
}

impl PartialEq for TrigTable {
    fn eq(&self, other: &Self) -> bool {
        let bits = |t: &TrigTable| (t.func, t.scale.to_bits(), t.inv_freq.iter().map(|f| f.to_bits()).collect::<Vec<_>>());
        bits(self) == bits(other)
    }
}

impl TrigTable {
    /// Flat elements `start..end` of the `[rows, inv_freq.len()]` table, as f32 values.
    fn fill(&self, start: usize, end: usize, out: &mut [u8]) {
        debug_assert_eq!(out.len(), 4 * (end - start));
        let width = self.inv_freq.len();
        for (e, o) in (start..end).zip(out.chunks_exact_mut(4)) {
            let angle = (e / width) as f32 * self.inv_freq[e % width];
            let v = match self.func {
                TrigFn::Cos => angle.cos(),
                TrigFn::Sin => angle.sin(),
            };
            let v = if self.scale == 1.0 { v } else { v * self.scale };
            o.copy_from_slice(&v.to_le_bytes());
        }
    }
}

impl TensorData {
    /// The bytes of flat elements `start..end` into `out` (exactly that long).
    pub fn read_into(&self, start: usize, end: usize, out: &mut [u8]) {
        debug_assert!(matches!(self.values, DataValues::Bytes(_)) || self.dtype == DType::F32, "a trig table is f32");
        match &self.values {
            DataValues::Bytes(b) => {
                let esize = self.dtype.size();
                out.copy_from_slice(&b[start * esize..end * esize]);
            }
            DataValues::Trig(t) => t.fill(start, end, out),
        }
    }

    /// All of the bytes (computed for a table).
    pub fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        match &self.values {
            DataValues::Bytes(b) => std::borrow::Cow::Borrowed(b),
            DataValues::Trig(_) => {
                let n = self.shape.iter().product::<usize>();
                let mut out = vec![0u8; self.dtype.bytes_for(n)];
                self.read_into(0, n, &mut out);
                std::borrow::Cow::Owned(out)
            }
        }
    }
}

#[derive(Clone, Debug)]
pub enum Recipe {
    Source(Arc<SourceTensor>),
    Data(Arc<TensorData>),
    Transpose { input: Box<Recipe>, perm: Vec<usize> },
    Concat { inputs: Vec<Recipe>, axis: usize },
    /// Inputs of one shape woven together along `axis`: output index `i * n + j` along it is
    /// index `i` of input `j` (n inputs). com.microsoft MoE's fused SwiGLU weight is the gate
    /// and up stacks interleaved row by row (`[E, 2 x inter, hidden]`, gate on even rows).
    /// Streamed like a concat: every output run is a contiguous run of one input.
    Interleave { inputs: Vec<Recipe>, axis: usize },
    Slice { input: Box<Recipe>, axis: usize, start: usize, end: usize },
    Cast { input: Box<Recipe>, to: DType },
    Reshape { input: Box<Recipe>, shape: Vec<usize> },
    /// The same bytes read as another element type and shape ([`Recipe::view`]): a `uint8`
    /// view of packed 4-bit DequantizeLinear data, which ONNX `Gather` can index where it has
    /// no 4-bit kernel. The writer stores a view of a written tensor once (save.rs).
    View { input: Box<Recipe>, dtype: DType, shape: Vec<usize> },
    /// `input + by`, element-wise in f32 (the input is an f32 recipe, the result is f32).
    /// Gemma's RMSNorm multiplies by `1 + weight`: the `+ 1` is folded into the weight here,
    /// once, instead of an `Add` node in every graph.
    Offset { input: Box<Recipe>, by: f32 },
    /// One output tensor of a quantized weight (qweight.rs); the writer computes a group's
    /// parts together.
    Quantized { group: Arc<QuantGroup>, part: QuantPart },
    /// A Linear weight the checkpoint stores pre-quantized (packed/mod.rs): as a float it is
    /// its exact dequantization, `[N, K]` f32; the quantize step writes its integers instead.
    Packed(Arc<PackedWeight>),
}

impl PartialEq for Recipe {
    fn eq(&self, other: &Self) -> bool {
        use Recipe::*;
        match (self, other) {
            (Source(a), Source(b)) => {
                a.name == b.name && a.file.path == b.file.path && a.offset == b.offset && a.len == b.len
            }
            (Data(a), Data(b)) => a == b,
            (Transpose { input: a, perm: p }, Transpose { input: b, perm: q }) => a == b && p == q,
            (Concat { inputs: a, axis: x }, Concat { inputs: b, axis: y }) => a == b && x == y,
            (Interleave { inputs: a, axis: x }, Interleave { inputs: b, axis: y }) => a == b && x == y,
            (Slice { input: a, axis: x, start: s, end: e }, Slice { input: b, axis: y, start: t, end: f }) => {
                a == b && x == y && s == t && e == f
            }
            (Cast { input: a, to: x }, Cast { input: b, to: y }) => a == b && x == y,
            (Reshape { input: a, shape: x }, Reshape { input: b, shape: y }) => a == b && x == y,
            (View { input: a, dtype: d, shape: x }, View { input: b, dtype: e, shape: y }) => a == b && d == e && x == y,
            (Offset { input: a, by: x }, Offset { input: b, by: y }) => a == b && x.to_bits() == y.to_bits(),
            (Quantized { group: a, part: p }, Quantized { group: b, part: q }) => Arc::ptr_eq(a, b) && p == q,
            (Packed(a), Packed(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

fn to_bytes<T: Copy, const N: usize>(values: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| f(v)).collect()
}

impl Recipe {
    pub fn source(t: SourceTensor) -> Recipe {
        Recipe::Source(Arc::new(t))
    }

    pub fn data(label: impl Into<String>, dtype: DType, shape: Vec<usize>, bytes: Vec<u8>) -> Recipe {
        debug_assert_eq!(dtype.bytes_for(shape.iter().product::<usize>()), bytes.len());
        Recipe::Data(Arc::new(TensorData { label: label.into(), dtype, shape, values: DataValues::Bytes(bytes) }))
    }

    /// A `[rows, inv_freq.len()]` f32 cos or sin table computed when written ([`TrigTable`]).
    pub fn trig_table(label: impl Into<String>, rows: usize, table: TrigTable) -> Recipe {
        let shape = vec![rows, table.inv_freq.len()];
        Recipe::Data(Arc::new(TensorData { label: label.into(), dtype: DType::F32, shape, values: DataValues::Trig(table) }))
    }

    pub fn from_f32(label: impl Into<String>, shape: Vec<usize>, values: &[f32]) -> Recipe {
        Self::data(label, DType::F32, shape, to_bytes(values, f32::to_le_bytes))
    }

    pub fn from_i64(label: impl Into<String>, shape: Vec<usize>, values: &[i64]) -> Recipe {
        Self::data(label, DType::I64, shape, to_bytes(values, i64::to_le_bytes))
    }

    /// Transposes by `perm`; transposing back what a transpose (under a cast, perhaps) did is
    /// the input itself, so a tensor a checkpoint stores in the other orientation and a model
    /// reads transposed back (gpt-oss's GGUF experts) keeps the recipe that rearranges rows only
    /// (pre-quantized layers keep their integers through it).
    pub fn transpose(self, perm: Vec<usize>) -> Recipe {
        let undoes = |inner: &[usize]| inner.len() == perm.len() && perm.iter().enumerate().all(|(i, &p)| inner.get(p) == Some(&i));
        match self {
            Recipe::Transpose { input, perm: inner } if undoes(&inner) => *input,
            Recipe::Cast { input, to } if matches!(&*input, Recipe::Transpose { perm: inner, .. } if undoes(inner)) => {
                let Recipe::Transpose { input, .. } = *input else { unreachable!("matched above") };
                Recipe::Cast { input, to }
            }
            other => Recipe::Transpose { input: Box::new(other), perm },
        }
    }

    /// Casts to `to`; a cast to the recipe's own dtype is no transform at all.
    pub fn cast(self, to: DType) -> Recipe {
        if self.dtype() == to {
            self
        } else {
            Recipe::Cast { input: Box::new(self), to }
        }
    }

    /// Elements `start..end` along `axis`. A slice of a transpose is the transpose of the
    /// input's slice along the axis it came from: the same values, with a pre-quantized
    /// weight's rows still visible under it (GPT-2's Conv1D `c_attn` read from a GGUF file is
    /// the transpose of the file's `[out, in]` rows, split by output columns). A slice of a
    /// concatenation along its axis that lies within one input is that input's slice (the
    /// whole input when it covers it): a fused projection joined from a GGUF file's halves
    /// (GraniteMoeShared's shared gate and up) splits back into the halves, integers kept.
    pub fn slice(self, axis: usize, start: usize, end: usize) -> Recipe {
        match self {
            Recipe::Transpose { input, perm } if axis < perm.len() => {
                let from = perm[axis];
                input.slice(from, start, end).transpose(perm)
            }
            Recipe::Concat { inputs, axis: along } if along == axis => {
                let mut at = 0;
                let mut within = None;
                for (i, r) in inputs.iter().enumerate() {
                    let n = r.shape()[axis];
                    if start >= at && end <= at + n {
                        within = Some((i, at, n));
                        break;
                    }
                    at += n;
                }
                match within {
                    Some((i, at, n)) => {
                        let input = inputs.into_iter().nth(i).expect("found above");
                        if start == at && end == at + n {
                            input
                        } else {
                            input.slice(axis, start - at, end - at)
                        }
                    }
                    None => Recipe::Slice { input: Box::new(Recipe::Concat { inputs, axis: along }), axis, start, end },
                }
            }
            other => Recipe::Slice { input: Box::new(other), axis, start, end },
        }
    }

    /// Reshapes to `shape` (row-major, as numpy and ONNX). A reshape of a reshape is one reshape
    /// of the inner input, and a reshape to the recipe's own shape is no transform: so a stack a
    /// checkpoint stores transposed per expert and a model reads as rows (DBRX's GGUF `w2`:
    /// reshaped to rows, reshaped back, transposed back) comes back to the file's own rows,
    /// whose pre-quantized integers are kept. An inner reshape of the wrong element count stays,
    /// so reading the recipe still fails on it. (An identity reshape no longer marks a tensor
    /// as a view of another: `save`'s byte sharing keys on `Reshape`, so a caller that wants two
    /// initializers to share bytes reshapes to another shape, as every one does.)
    pub fn reshape(self, shape: Vec<usize>) -> Recipe {
        match self {
            Recipe::Reshape { input, shape: inner } if input.numel() == inner.iter().product::<usize>() => input.reshape(shape),
            other if other.shape() == shape => other,
            other => Recipe::Reshape { input: Box::new(other), shape },
        }
    }

    /// The recipe's bytes as `dtype` elements of `shape` ([`Recipe::View`]); the byte lengths
    /// must agree.
    pub fn view(self, dtype: DType, shape: Vec<usize>) -> Result<Recipe> {
        let len = dtype.bytes_for(shape.iter().product());
        if len != self.byte_len() {
            return Err(Error::Recipe {
                tensor: self.describe(),
                reason: format!("cannot view {} bytes as {dtype}{shape:?} ({len} bytes)", self.byte_len()),
            });
        }
        Ok(Recipe::View { input: Box::new(self), dtype, shape })
    }

    /// `self + by` computed in f32 (the recipe is cast to f32 first; cast the result to the
    /// graph's dtype afterwards, so the sum is rounded once).
    pub fn offset(self, by: f32) -> Recipe {
        Recipe::Offset { input: Box::new(self.cast(DType::F32)), by }
    }

    pub fn concat(inputs: Vec<Recipe>, axis: usize) -> Result<Recipe> {
        let first = inputs.first().ok_or_else(|| Error::Recipe { tensor: "concat".into(), reason: "no inputs".into() })?;
        let (d, s) = (first.dtype(), first.shape());
        for r in &inputs[1..] {
            let rs = r.shape();
            let same_rank = rs.len() == s.len() && axis < s.len();
            let ok = same_rank && r.dtype() == d && (0..s.len()).all(|i| i == axis || rs[i] == s[i]);
            if !ok {
                return Err(Error::Recipe {
                    tensor: r.describe(),
                    reason: format!("cannot concatenate {}{:?} with {}{:?} on axis {axis}", d, s, r.dtype(), rs),
                });
            }
        }
        Ok(Recipe::Concat { inputs, axis })
    }

    /// Interleaves recipes of one dtype and shape along `axis` ([`Recipe::Interleave`]).
    pub fn interleave(inputs: Vec<Recipe>, axis: usize) -> Result<Recipe> {
        let first = inputs.first().ok_or_else(|| Error::Recipe { tensor: "interleave".into(), reason: "no inputs".into() })?;
        let (d, s) = (first.dtype(), first.shape());
        if axis >= s.len() {
            return Err(Error::Recipe { tensor: first.describe(), reason: format!("cannot interleave {d}{s:?} on axis {axis}") });
        }
        for r in &inputs[1..] {
            if r.dtype() != d || r.shape() != s {
                return Err(Error::Recipe {
                    tensor: r.describe(),
                    reason: format!("cannot interleave {}{:?} with {d}{s:?}: interleaved inputs have one dtype and shape", r.dtype(), r.shape()),
                });
            }
        }
        Ok(Recipe::Interleave { inputs, axis })
    }

    pub fn dtype(&self) -> DType {
        match self {
            Recipe::Source(t) => t.dtype,
            Recipe::Data(d) => d.dtype,
            Recipe::Cast { to, .. } => *to,
            Recipe::Offset { .. } => DType::F32,
            Recipe::View { dtype, .. } => *dtype,
            Recipe::Transpose { input, .. } | Recipe::Slice { input, .. } | Recipe::Reshape { input, .. } => {
                input.dtype()
            }
            Recipe::Concat { inputs, .. } | Recipe::Interleave { inputs, .. } => inputs[0].dtype(),
            Recipe::Quantized { group, part } => group.dtype(*part),
            Recipe::Packed(_) => DType::F32,
        }
    }

    pub fn shape(&self) -> Vec<usize> {
        match self {
            Recipe::Source(t) => t.shape.clone(),
            Recipe::Data(d) => d.shape.clone(),
            Recipe::Cast { input, .. } | Recipe::Offset { input, .. } => input.shape(),
            Recipe::Transpose { input, perm } => {
                let s = input.shape();
                perm.iter().map(|&p| s[p]).collect()
            }
            Recipe::Slice { input, axis, start, end } => {
                let mut s = input.shape();
                s[*axis] = end - start;
                s
            }
            Recipe::Reshape { shape, .. } | Recipe::View { shape, .. } => shape.clone(),
            Recipe::Concat { inputs, axis } => {
                let mut s = inputs[0].shape();
                s[*axis] = inputs.iter().map(|r| r.shape()[*axis]).sum();
                s
            }
            Recipe::Interleave { inputs, axis } => {
                let mut s = inputs[0].shape();
                s[*axis] *= inputs.len();
                s
            }
            Recipe::Quantized { group, part } => group.shape(*part),
            Recipe::Packed(p) => vec![p.n(), p.k()],
        }
    }

    pub fn numel(&self) -> usize {
        self.shape().iter().product()
    }

    pub fn byte_len(&self) -> usize {
        self.dtype().bytes_for(self.numel())
    }

    /// Source tensors this recipe reads.
    pub fn sources(&self) -> Vec<&SourceTensor> {
        match self {
            Recipe::Source(t) => vec![t.as_ref()],
            Recipe::Data(_) => vec![],
            Recipe::Transpose { input, .. }
            | Recipe::Slice { input, .. }
            | Recipe::Cast { input, .. }
            | Recipe::Reshape { input, .. }
            | Recipe::View { input, .. }
            | Recipe::Offset { input, .. } => input.sources(),
            Recipe::Concat { inputs, .. } | Recipe::Interleave { inputs, .. } => inputs.iter().flat_map(|r| r.sources()).collect(),
            Recipe::Quantized { group, .. } => group.weight().sources(),
            Recipe::Packed(p) => p.sources(),
        }
    }

    /// Whether the recipe reads a pre-quantized weight ([`Recipe::Packed`]) as float anywhere
    /// (a quantized part, which writes its integers, does not).
    pub fn has_packed(&self) -> bool {
        match self {
            Recipe::Packed(_) => true,
            Recipe::Source(_) | Recipe::Data(_) => false,
            Recipe::Transpose { input, .. }
            | Recipe::Slice { input, .. }
            | Recipe::Cast { input, .. }
            | Recipe::Reshape { input, .. }
            | Recipe::View { input, .. }
            | Recipe::Offset { input, .. } => input.has_packed(),
            Recipe::Concat { inputs, .. } | Recipe::Interleave { inputs, .. } => inputs.iter().any(Recipe::has_packed),
            Recipe::Quantized { .. } => false,
        }
    }

    /// The pre-quantized layers the recipe reads through the transforms that keep their integers
    /// (transposes, float casts, reshapes, slices, concatenations, interleaves), in order, and
    /// whether it reads anything else: float data, or pre-quantized layers computed on (an
    /// offset). What [`Recipe::stored_form`] and [`Recipe::stored_as`] describe.
    pub fn stored_parts(&self) -> (Vec<Arc<PackedWeight>>, bool) {
        fn walk(r: &Recipe, layers: &mut Vec<Arc<PackedWeight>>, other: &mut bool) {
            match r {
                Recipe::Packed(p) => layers.push(Arc::clone(p)),
                Recipe::Cast { input, to } if to.is_float() => walk(input, layers, other),
                Recipe::Transpose { input, .. } | Recipe::Slice { input, .. } | Recipe::Reshape { input, .. } => walk(input, layers, other),
                Recipe::Concat { inputs, .. } | Recipe::Interleave { inputs, .. } => inputs.iter().for_each(|i| walk(i, layers, other)),
                _ => *other = true,
            }
        }
        let (mut layers, mut other) = (Vec::new(), false);
        walk(self, &mut layers, &mut other);
        (layers, other)
    }

    /// How the weight is stored, which decides whether weights can be packed into one
    /// MatMulNBits in their stored form: `float` (no pre-quantized layer), the
    /// [`crate::StoredForm`] its pre-quantized layers share (`4-bit, block 32, float zero
    /// points`), or `mixed: ...` naming each form (and `float`) it reads. The rule function
    /// `stored_form`.
    pub fn stored_form(&self) -> String {
        let (layers, other) = self.stored_parts();
        let mut forms: Vec<String> = Vec::new();
        for f in layers.iter().map(|p| p.stored_form().to_string()).chain(other.then(|| "float".to_string())) {
            if !forms.contains(&f) {
                forms.push(f);
            }
        }
        match forms.len() {
            0 => "float".into(),
            1 => forms.remove(0),
            _ => format!("mixed: {}", forms.join(" + ")),
        }
    }

    /// What the weight is stored as, for messages: `float`, or each pre-quantized layer's
    /// type (a GGUF tensor's ggml type, `gptq`, `awq_gemm`) with its form, `Q4_K (4-bit, block
    /// 32, float zero points)`, joined by ` + ` when it reads several. The rule function
    /// `stored_as`.
    pub fn stored_as(&self) -> String {
        let (layers, other) = self.stored_parts();
        let mut parts: Vec<String> = Vec::new();
        for t in layers.iter().map(|p| format!("{} ({})", p.source_type(), p.stored_form())).chain(other.then(|| "float".to_string())) {
            if !parts.contains(&t) {
                parts.push(t);
            }
        }
        if parts.is_empty() {
            "float".into()
        } else {
            parts.join(" + ")
        }
    }

    /// The transform chain as text, e.g. `transpose[1,0](model.safetensors:lm_head.weight)`.
    pub fn describe(&self) -> String {
        match self {
            Recipe::Source(t) => {
                let file = t.file.path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
                format!("{file}:{}", t.name)
            }
            Recipe::Data(d) => format!("computed({})", d.label),
            Recipe::Transpose { input, perm } => format!("transpose{perm:?}({})", input.describe()),
            Recipe::Slice { input, axis, start, end } => {
                format!("slice[axis={axis},{start}..{end}]({})", input.describe())
            }
            Recipe::Cast { input, to } => format!("cast[{to}]({})", input.describe()),
            Recipe::Reshape { input, shape } => format!("reshape{shape:?}({})", input.describe()),
            Recipe::View { input, dtype, shape } => format!("view[{dtype}]{shape:?}({})", input.describe()),
            Recipe::Offset { input, by } => format!("offset[{by:+}]({})", input.describe()),
            Recipe::Concat { inputs, axis } => {
                let parts: Vec<String> = inputs.iter().map(|r| r.describe()).collect();
                format!("concat[axis={axis}]({})", parts.join(", "))
            }
            Recipe::Interleave { inputs, axis } => {
                let parts: Vec<String> = inputs.iter().map(|r| r.describe()).collect();
                format!("interleave[axis={axis}]({})", parts.join(", "))
            }
            Recipe::Quantized { group, part } => {
                let q = group.settings();
                let sym = if q.symmetric() { "sym" } else { "asym" };
                let form = format!("{:?}", group.form()).to_lowercase();
                format!(
                    "quant[{form},{},{}b,block={},{sym},{:?}].{}({})",
                    group.scale_dtype(),
                    q.bits().count(),
                    q.block_size(),
                    q.method(),
                    part.name(),
                    group.weight().describe()
                )
            }
            Recipe::Packed(p) => p.describe(),
        }
    }

    /// Computes the tensor's bytes (little-endian, row-major).
    pub fn materialize(&self) -> Result<Vec<u8>> {
        match self {
            Recipe::Source(t) => {
                let bytes = t.bytes()?;
                if bytes.len() != t.dtype.bytes_for(t.numel()) {
                    return Err(Error::Recipe {
                        tensor: t.name.clone(),
                        reason: format!("{} bytes stored for {}{:?}", bytes.len(), t.dtype, t.shape),
                    });
                }
                Ok(bytes.to_vec())
            }
            Recipe::Data(d) => Ok(d.bytes().into_owned()),
            Recipe::Transpose { input, perm } => {
                let bytes = input.materialize()?;
                Ok(transpose_bytes(&bytes, &input.shape(), perm, input.dtype().size()))
            }
            Recipe::Slice { input, axis, start, end } => {
                let shape = input.shape();
                let esize = input.dtype().size();
                if *end > shape[*axis] || start > end {
                    return Err(Error::Recipe {
                        tensor: input.describe(),
                        reason: format!("slice {start}..{end} out of range for axis {axis} of {shape:?}"),
                    });
                }
                let bytes = input.materialize()?;
                let outer: usize = shape[..*axis].iter().product();
                let inner: usize = shape[*axis + 1..].iter().product::<usize>() * esize;
                let row = shape[*axis] * inner;
                let mut out = Vec::with_capacity(outer * (end - start) * inner);
                for o in 0..outer {
                    out.extend_from_slice(&bytes[o * row + start * inner..o * row + end * inner]);
                }
                Ok(out)
            }
            Recipe::Cast { input, to } => cast_bytes(&input.materialize()?, input.dtype(), *to),
            Recipe::Offset { input, by } => {
                let bytes = input.materialize()?;
                let mut values = vec![0f32; bytes.len() / 4];
                decode_floats(&bytes, DType::F32, &mut values);
                values.iter_mut().for_each(|v| *v += by);
                Ok(to_bytes(&values, f32::to_le_bytes))
            }
            Recipe::Reshape { input, shape } => {
                if shape.iter().product::<usize>() != input.numel() {
                    return Err(Error::Recipe {
                        tensor: input.describe(),
                        reason: format!("cannot reshape {:?} to {shape:?}", input.shape()),
                    });
                }
                input.materialize()
            }
            Recipe::View { input, .. } => {
                let bytes = input.materialize()?;
                if bytes.len() != self.byte_len() {
                    return Err(Error::Recipe {
                        tensor: input.describe(),
                        reason: format!("cannot view {} bytes as {}{:?}", bytes.len(), self.dtype(), self.shape()),
                    });
                }
                Ok(bytes)
            }
            Recipe::Concat { inputs, axis } => {
                let esize = inputs[0].dtype().size();
                let shape0 = inputs[0].shape();
                let outer: usize = shape0[..*axis].iter().product();
                let parts: Vec<(Vec<u8>, usize)> = inputs
                    .iter()
                    .map(|r| {
                        let chunk = r.shape()[*axis..].iter().product::<usize>() * esize;
                        r.materialize().map(|b| (b, chunk))
                    })
                    .collect::<Result<_>>()?;
                let mut out = Vec::with_capacity(parts.iter().map(|(b, _)| b.len()).sum());
                for o in 0..outer {
                    for (bytes, chunk) in &parts {
                        out.extend_from_slice(&bytes[o * chunk..(o + 1) * chunk]);
                    }
                }
                Ok(out)
            }
            Recipe::Interleave { inputs, axis } => {
                let esize = inputs[0].dtype().size();
                let shape = inputs[0].shape();
                let inner = shape[*axis + 1..].iter().product::<usize>() * esize;
                let rows: usize = shape[..=*axis].iter().product();
                let parts: Vec<Vec<u8>> = inputs.iter().map(Recipe::materialize).collect::<Result<_>>()?;
                let mut out = Vec::with_capacity(parts.iter().map(Vec::len).sum());
                for r in 0..rows {
                    for bytes in &parts {
                        out.extend_from_slice(&bytes[r * inner..(r + 1) * inner]);
                    }
                }
                Ok(out)
            }
            Recipe::Quantized { group, part } => group.materialize(*part),
            Recipe::Packed(p) => Ok(to_bytes(&p.dequantize()?, f32::to_le_bytes)),
        }
    }
}

/// Permutes the axes of a row-major tensor of `esize`-byte elements.
fn transpose_bytes(bytes: &[u8], shape: &[usize], perm: &[usize], esize: usize) -> Vec<u8> {
    let rank = shape.len();
    let mut in_strides = vec![1usize; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        in_strides[i] = in_strides[i + 1] * shape[i + 1];
    }
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let strides: Vec<usize> = perm.iter().map(|&p| in_strides[p]).collect();
    let numel: usize = shape.iter().product();
    let mut out = Vec::with_capacity(bytes.len());
    if rank == 2 {
        // The common case (weight matrices): a plain double loop.
        let (rows, cols) = (out_shape[0], out_shape[1]);
        for r in 0..rows {
            for c in 0..cols {
                let src = (r * strides[0] + c * strides[1]) * esize;
                out.extend_from_slice(&bytes[src..src + esize]);
            }
        }
        return out;
    }
    let mut index = vec![0usize; rank];
    for _ in 0..numel {
        let src: usize = index.iter().zip(&strides).map(|(i, s)| i * s).sum::<usize>() * esize;
        out.extend_from_slice(&bytes[src..src + esize]);
        for axis in (0..rank).rev() {
            index[axis] += 1;
            if index[axis] < out_shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    out
}

/// Decodes little-endian floats of `from` into `out` (same element count).
fn decode_floats(bytes: &[u8], from: DType, out: &mut [f32]) {
    match from {
        DType::F32 => out.iter_mut().zip(bytes.chunks_exact(4)).for_each(|(o, c)| *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        DType::F16 => out.iter_mut().zip(bytes.chunks_exact(2)).for_each(|(o, c)| *o = f16::from_le_bytes([c[0], c[1]]).to_f32()),
        // bf16 is the top half of an f32: a shift, exact.
        DType::BF16 => out.iter_mut().zip(bytes.chunks_exact(2)).for_each(|(o, c)| *o = f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16)),
        DType::F64 => out.iter_mut().zip(bytes.chunks_exact(8)).for_each(|(o, c)| *o = f64::from_le_bytes(c.try_into().unwrap()) as f32),
        _ => unreachable!("checked by the caller"),
    }
}

/// Encodes `values` as little-endian `to` into `out`.
fn encode_floats(values: &[f32], to: DType, out: &mut [u8]) {
    match to {
        DType::F32 => out.chunks_exact_mut(4).zip(values).for_each(|(o, v)| o.copy_from_slice(&v.to_le_bytes())),
        DType::F16 => {
            // The slice conversion uses the CPU's f16c instructions where present.
            use half::slice::HalfFloatSliceExt;
            match bytemuck::try_cast_slice_mut::<u8, f16>(out) {
                Ok(halves) => halves.convert_from_f32_slice(values),
                Err(_) => {
                    let mut halves = vec![f16::ZERO; values.len()];
                    halves.convert_from_f32_slice(values);
                    out.copy_from_slice(bytemuck::cast_slice(&halves));
                }
            }
        }
        DType::BF16 => out.chunks_exact_mut(2).zip(values).for_each(|(o, v)| o.copy_from_slice(&bf16::from_f32(*v).to_le_bytes())),
        DType::F64 => out.chunks_exact_mut(8).zip(values).for_each(|(o, v)| o.copy_from_slice(&(*v as f64).to_le_bytes())),
        _ => unreachable!("checked by the caller"),
    }
}

/// Converts float tensors between f32, f16, bf16 and f64 (round to nearest even), through f32
/// in small chunks (exact for the widening step, so one rounding only).
pub(crate) fn cast_bytes(bytes: &[u8], from: DType, to: DType) -> Result<Vec<u8>> {
    let mut out = vec![0u8; bytes.len() / from.size() * to.size()];
    cast_into(bytes, from, to, &mut out)?;
    Ok(out)
}

/// [`cast_bytes`] into a caller's buffer of exactly the converted length, so the streaming
/// writer can reuse its buffers instead of allocating (and page-faulting) a new one per block.
pub(crate) fn cast_into(bytes: &[u8], from: DType, to: DType, out: &mut [u8]) -> Result<()> {
    if from == to {
        out.copy_from_slice(bytes);
        return Ok(());
    }
    if !from.is_float() || !to.is_float() {
        return Err(Error::Cast { from: from.to_string(), to: to.to_string() });
    }
    // The casts of every bf16 checkpoint build, in one pass (convert.rs).
    match (from, to) {
        (DType::BF16, DType::F32) => {
            crate::convert::bf16_to_f32(bytes, out);
            return Ok(());
        }
        (DType::BF16, DType::F16) => {
            crate::convert::bf16_to_f16(bytes, out);
            return f16_in_range(bytes, from, out);
        }
        _ => {}
    }
    // Small enough that zeroing the staging buffer is cheap for the short per-row casts of a
    // transposed block.
    const CHUNK: usize = 512;
    let n = bytes.len() / from.size();
    let mut tmp = [0f32; CHUNK];
    for (src, dst) in bytes.chunks(CHUNK * from.size()).zip(out.chunks_mut(CHUNK * to.size())) {
        let k = src.len() / from.size();
        decode_floats(src, from, &mut tmp[..k]);
        encode_floats(&tmp[..k], to, dst);
        // Checked while the chunk is in the L1 cache.
        if to == DType::F16 {
            f16_in_range(src, from, dst)?;
        }
    }
    debug_assert_eq!(out.len(), n * to.size());
    Ok(())
}

/// Refuses a cast to f16 that turned a finite value into an infinity (beyond f16's +-65504):
/// such a weight would poison every output it touches, so the build stops and names it. An
/// infinity the source already held is kept, as any other value is.
fn f16_in_range(bytes: &[u8], from: DType, out: &[u8]) -> Result<()> {
    const INF: u16 = 0x7c00;
    let is_inf = |h: u16| h & 0x7fff == INF;
    // The common case, no infinity, as a branch-free OR over each block (vectorized; `any`
    // with its early exit is not): a few percent of a bf16 -> f16 conversion.
    let any_inf = |halves: &[u16]| halves.chunks(4096).any(|c| c.iter().fold(0u16, |acc, &h| acc | u16::from(is_inf(h))) != 0);
    let first = match bytemuck::try_cast_slice::<u8, u16>(out) {
        Ok(halves) if !any_inf(halves) => return Ok(()),
        Ok(halves) => halves.iter().position(|&h| is_inf(h)),
        Err(_) => out.chunks_exact(2).position(|c| is_inf(u16::from_le_bytes([c[0], c[1]]))),
    };
    let Some(mut at) = first else { return Ok(()) };
    let size = from.size();
    let mut value = [0f32; 1];
    loop {
        decode_floats(&bytes[at * size..(at + 1) * size], from, &mut value);
        if value[0].is_finite() {
            return Err(Error::F16Overflow { tensor: String::new(), value: value[0] });
        }
        match out[(at + 1) * 2..].chunks_exact(2).position(|c| is_inf(u16::from_le_bytes([c[0], c[1]]))) {
            Some(next) => at += 1 + next,
            None => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(bytes: &[u8]) -> Vec<f32> {
        bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
    }

    fn iota(shape: Vec<usize>) -> Recipe {
        let n: usize = shape.iter().product();
        Recipe::from_f32("iota", shape, &(0..n).map(|v| v as f32).collect::<Vec<_>>())
    }

    /// A finite value beyond f16's range is an error from every source dtype, through the
    /// general path and bf16's fast one; a source infinity, a NaN and f16's largest value pass.
    #[test]
    fn casts_to_f16_refuse_values_beyond_its_range() {
        let encode = |values: &[f32], dtype: DType| {
            let mut bytes = vec![0u8; values.len() * dtype.size()];
            encode_floats(values, dtype, &mut bytes);
            bytes
        };
        for from in [DType::F32, DType::BF16, DType::F64] {
            let mut values = vec![1.0f32; 1500];
            values[3] = f32::INFINITY;
            values[4] = f32::NAN;
            // f16's largest magnitude (bf16's nearest below it for bf16, which has no 65504).
            values[5] = if from == DType::BF16 { -65280.0 } else { -65504.0 };
            let fine = encode(&values, from);
            assert!(cast_bytes(&fine, from, DType::F16).is_ok(), "{from}");
            // Past the first chunk, after an infinity the source held.
            values[1200] = 1.0e6;
            let e = cast_bytes(&encode(&values, from), from, DType::F16).unwrap_err();
            assert!(matches!(e, Error::F16Overflow { value, .. } if value == 1.0e6 || (from == DType::BF16 && value > 9.9e5)), "{from}: {e}");
            assert!(e.in_tensor("w").to_string().contains("tensor `w` holds"));
        }
        // Other targets are not checked: f32 holds every bf16 value.
        assert!(cast_bytes(&encode(&[1.0e30], DType::BF16), DType::BF16, DType::F32).is_ok());
    }

    /// A slice of a concatenation within one input is that input (or its slice); across
    /// inputs, or along another axis, a slice of the whole; the values equal either way.
    #[test]
    fn slices_of_a_concat_within_one_input_are_that_inputs() {
        let cat = || Recipe::concat(vec![iota(vec![2, 3]), Recipe::from_f32("b", vec![3, 3], &[10.0; 9])], 0).unwrap();
        assert!(matches!(cat().slice(0, 0, 2), Recipe::Data { .. }), "the first input itself");
        assert!(matches!(cat().slice(0, 2, 5), Recipe::Data { .. }), "the second input itself");
        let inner = cat().slice(0, 3, 4);
        assert!(matches!(&inner, Recipe::Slice { input, start: 1, end: 2, .. } if matches!(**input, Recipe::Data { .. })), "{inner:?}");
        assert_eq!(f32s(&inner.materialize().unwrap()), vec![10.0; 3]);
        let across = cat().slice(0, 1, 3);
        assert!(matches!(&across, Recipe::Slice { input, .. } if matches!(**input, Recipe::Concat { .. })));
        assert_eq!(f32s(&across.materialize().unwrap()), vec![3., 4., 5., 10., 10., 10.]);
        assert!(matches!(cat().slice(1, 0, 1), Recipe::Slice { .. }));
    }

    #[test]
    fn transpose_2d_and_3d() {
        let t = iota(vec![2, 3]).transpose(vec![1, 0]);
        assert_eq!(t.shape(), vec![3, 2]);
        assert_eq!(f32s(&t.materialize().unwrap()), vec![0., 3., 1., 4., 2., 5.]);
        let t = iota(vec![2, 1, 3]).transpose(vec![2, 0, 1]);
        assert_eq!(t.shape(), vec![3, 2, 1]);
        assert_eq!(f32s(&t.materialize().unwrap()), vec![0., 3., 1., 4., 2., 5.]);
    }

    /// A transpose back (also through a cast) is the input: no Transpose node is left.
    #[test]
    fn a_transpose_back_is_the_input() {
        let x = iota(vec![2, 3, 4]);
        let back = x.clone().transpose(vec![0, 2, 1]).transpose(vec![0, 2, 1]);
        assert!(matches!(back, Recipe::Data(_)), "{}", back.describe());
        let cast = x.clone().transpose(vec![2, 0, 1]).cast(DType::F16).transpose(vec![1, 2, 0]);
        assert!(matches!(&cast, Recipe::Cast { input, to: DType::F16 } if matches!(**input, Recipe::Data(_))), "{}", cast.describe());
        assert_eq!(cast.shape(), vec![2, 3, 4]);
        // Not the inverse: a second transpose stays.
        let twice = x.transpose(vec![2, 0, 1]).transpose(vec![2, 0, 1]);
        assert_eq!(twice.shape(), vec![3, 4, 2]);
        assert_eq!(f32s(&twice.materialize().unwrap())[..4], [0., 12., 1., 13.]);
    }

    /// A reshape of a reshape is one reshape, a reshape to the own shape none: a stack read as
    /// rows, seen as a stack again and transposed back is the input (DBRX's GGUF `w2`).
    #[test]
    fn reshapes_compose_and_a_transpose_back_through_them_is_the_input() {
        let x = iota(vec![2, 3, 4]);
        let same = x.clone().reshape(vec![2, 3, 4]);
        assert!(matches!(same, Recipe::Data(_)), "{}", same.describe());
        let once = x.clone().reshape(vec![6, 4]).reshape(vec![24]);
        assert!(matches!(&once, Recipe::Reshape { input, shape } if matches!(**input, Recipe::Data(_)) && shape == &vec![24]), "{}", once.describe());
        let rows = x.clone().transpose(vec![0, 2, 1]).reshape(vec![8, 3]);
        let back = rows.clone().reshape(vec![2, 4, 3]).transpose(vec![0, 2, 1]);
        assert!(matches!(back, Recipe::Data(_)), "{}", back.describe());
        assert_eq!(f32s(&rows.materialize().unwrap())[..4], [0., 4., 8., 1.]);
        // A wrong inner reshape is kept, so reading still fails on it.
        assert!(iota(vec![2, 2]).reshape(vec![3]).reshape(vec![2, 2]).materialize().is_err());
    }

    /// A slice of a transpose moves inside it, along the axis it came from, with the values of
    /// slicing the transposed tensor.
    #[test]
    fn a_slice_of_a_transpose_slices_its_input() {
        let x = iota(vec![2, 3, 4]);
        let t = x.clone().transpose(vec![2, 0, 1]);
        let whole = f32s(&t.clone().materialize().unwrap());
        let s = t.slice(0, 1, 3);
        assert!(matches!(&s, Recipe::Transpose { input, .. } if matches!(**input, Recipe::Slice { axis: 2, start: 1, end: 3, .. })), "{}", s.describe());
        assert_eq!(s.shape(), vec![2, 2, 3]);
        assert_eq!(f32s(&s.materialize().unwrap()), whole[6..18]);
        let m = iota(vec![3, 5]).transpose(vec![1, 0]).slice(1, 1, 2);
        assert_eq!((m.shape(), f32s(&m.materialize().unwrap())), (vec![5, 1], vec![5., 6., 7., 8., 9.]));
    }

    #[test]
    fn concat_slice_reshape() {
        let c = Recipe::concat(vec![iota(vec![2, 2]), iota(vec![2, 1])], 1).unwrap();
        assert_eq!(c.shape(), vec![2, 3]);
        assert_eq!(f32s(&c.materialize().unwrap()), vec![0., 1., 0., 2., 3., 1.]);
        let s = c.clone().slice(1, 1, 3);
        assert_eq!(f32s(&s.materialize().unwrap()), vec![1., 0., 3., 1.]);
        assert!(Recipe::concat(vec![iota(vec![2, 2]), iota(vec![3, 1])], 1).is_err());
        assert!(iota(vec![2, 2]).reshape(vec![3]).materialize().is_err());
    }

    /// MoE's fused gate/up weight: per expert, row 2r is gate row r and row 2r+1 up row r.
    #[test]
    fn interleave_weaves_rows_of_each_input_in_turn() {
        let gate = iota(vec![2, 2, 3]);
        let up = iota(vec![2, 2, 3]).offset(100.0);
        let w = Recipe::interleave(vec![gate.clone(), up.clone()], 1).unwrap();
        assert_eq!((w.shape(), w.dtype()), (vec![2, 4, 3], DType::F32));
        #[rustfmt::skip]
        let want = vec![
            0., 1., 2., 100., 101., 102., 3., 4., 5., 103., 104., 105.,
            6., 7., 8., 106., 107., 108., 9., 10., 11., 109., 110., 111.,
        ];
        assert_eq!(f32s(&w.materialize().unwrap()), want);
        assert_eq!(w.describe(), "interleave[axis=1](computed(iota), offset[+100](computed(iota)))");
        // Along the last axis: element by element; three inputs.
        let e = Recipe::interleave(vec![iota(vec![2]), iota(vec![2]).offset(10.0), iota(vec![2]).offset(20.0)], 0).unwrap();
        assert_eq!(f32s(&e.materialize().unwrap()), vec![0., 10., 20., 1., 11., 21.]);
        let err = Recipe::interleave(vec![gate.clone(), iota(vec![2, 3, 3])], 1).unwrap_err().to_string();
        assert!(err.contains("one dtype and shape"), "{err}");
        let err = Recipe::interleave(vec![gate.clone(), gate.clone().cast(DType::F16)], 1).unwrap_err().to_string();
        assert!(err.contains("f16"), "{err}");
        assert!(Recipe::interleave(vec![gate.clone(), up.clone()], 3).is_err());
        assert!(Recipe::interleave(vec![], 0).is_err());
    }

    /// Gemma's `1 + weight`: added in f32 on an f16 source, then one rounding to the target.
    #[test]
    fn offset_adds_in_f32_and_rounds_once() {
        let half = iota(vec![3]).cast(DType::F16);
        let r = half.offset(1.0);
        assert_eq!((r.dtype(), r.shape()), (DType::F32, vec![3]));
        assert_eq!(f32s(&r.materialize().unwrap()), vec![1., 2., 3.]);
        assert_eq!(r.describe(), "offset[+1](cast[f32](cast[f16](computed(iota))))");
        let back = r.cast(DType::F16).materialize().unwrap();
        assert_eq!(back, iota(vec![3]).offset(1.0).cast(DType::F16).materialize().unwrap());
    }

    #[test]
    fn casts_round_trip_through_halves() {
        let r = Recipe::from_f32("v", vec![3], &[1.0, -2.5, 65504.0]);
        let h = r.clone().cast(DType::F16);
        assert_eq!(h.byte_len(), 6);
        let back = h.cast(DType::F32).materialize().unwrap();
        assert_eq!(f32s(&back), vec![1.0, -2.5, 65504.0]);
        let b = r.cast(DType::BF16).cast(DType::F32).materialize().unwrap();
        assert_eq!(f32s(&b)[..2], [1.0, -2.5]);
        assert!(Recipe::from_i64("i", vec![1], &[1]).cast(DType::F32).materialize().is_err());
    }

    /// A rotary table computed when written: any element range (as the writer streams it,
    /// through an f16 cast) holds `f(row * inv_freq[col]) * scale` of that element's row and
    /// column; tables of other parameters are other tensors.
    #[test]
    fn trig_tables_are_computed_by_range() {
        let inv_freq = vec![1.0f32, 0.25, 0.0625];
        let table = |func, scale| TrigTable { inv_freq: inv_freq.clone(), scale, func };
        let cos = Recipe::trig_table("cos", 5, table(TrigFn::Cos, 1.0));
        let sin = Recipe::trig_table("sin", 5, table(TrigFn::Sin, 1.5));
        assert_eq!((cos.dtype(), cos.shape()), (DType::F32, vec![5, 3]));
        let (c, s) = (f32s(&cos.materialize().unwrap()), f32s(&sin.materialize().unwrap()));
        for p in 0..5 {
            for (i, f) in inv_freq.iter().enumerate() {
                let angle = p as f32 * f;
                assert_eq!(c[p * 3 + i], angle.cos(), "cos row {p} col {i}");
                assert_eq!(s[p * 3 + i], angle.sin() * 1.5, "sin row {p} col {i}");
            }
        }
        let half = sin.clone().cast(DType::F16);
        let whole = half.materialize().unwrap();
        let mut part = vec![0u8; 2 * 7];
        half.read_into(4, 11, &mut part).unwrap();
        assert_eq!(part, whole[8..22]);
        assert_ne!(sin, Recipe::trig_table("sin", 5, table(TrigFn::Sin, 1.0)));
        assert_ne!(cos, Recipe::trig_table("cos", 5, table(TrigFn::Sin, 1.0)));
        assert_eq!(cos, Recipe::trig_table("cos", 5, table(TrigFn::Cos, 1.0)));
        let signed = |zero: f32| Recipe::trig_table("sin", 2, TrigTable { inv_freq: vec![zero], scale: 1.0, func: TrigFn::Sin });
        assert_ne!(signed(0.0), signed(-0.0), "sin(-0) is -0: other bytes");
        assert_eq!(cos.describe(), "computed(cos)");
    }
}
