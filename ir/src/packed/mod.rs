//! Weights a checkpoint stores already quantized: GPTQ (v1 and v2) and AutoAWQ GEMM.
//!
//! A [`PackedWeight`] is one Linear layer's integer codes, per-group scales and zero points as
//! the checkpoint holds them (views into the mapped file). It is two things at once:
//!
//! * a float `[N, K]` tensor, [`Recipe::Packed`], whose value is the exact dequantization
//!   `scale * (q - zero)` in f32, so the generic graph and its rewrites see an ordinary
//!   Linear weight (a Q/K/V packing concatenates three of them);
//! * the source of a [`crate::QuantGroup`] that writes the *same integers* in MatMulNBits or
//!   DequantizeLinear layout ([`PackedStack`]), never re-rounding a float.
//!
//! GPTQ's `g_idx` maps each input row to its group. With `desc_act` the groups are not
//! contiguous: the rows are reordered so that they are (`order`), and the activation is
//! permuted the same way by a Gather before the MatMul (builder/src/quantize). MatMulNBits'
//! own `g_idx` input is deprecated, and ONNX Runtime 1.32's CPU kernel ignores packed zero
//! points beside it, so it is never written.
//!
//! What each format stores (K inputs, N outputs, G groups of `group_size` rows):
//!
//! | format | qweight | qzeros | zero stored as |
//! |---|---|---|---|
//! | GPTQ v1 (`checkpoint_format: gptq`) | int32 `[K*bits/32, N]`, packed along K | int32 `[G, N*bits/32]`, packed along N | zero - 1 |
//! | GPTQ v2 (`gptq_v2`) | the same | the same | zero |
//! | AWQ GEMM | int32 `[K, N/8]`, packed along N, nibble i = column 8c + [0,2,4,6,1,3,5,7][i] | int32 `[G, N/8]`, the same | zero |
//!
//! `scales` is `[G, N]` (f16, bf16 or f32) in all three; `g_idx` is int32 `[K]` (GPTQ only).
//!
//! GGUF tensors ([`PackedWeight::ggml`]) and transformers' MXFP4 expert stacks
//! ([`PackedWeight::mxfp4`]) are blocks that crate::ggml decodes row by row into codes and
//! per-block scales (and offsets), written in the same stacks.

pub mod pack;
mod pending;
mod stack;

pub use stack::PackedStack;
pub(crate) use stack::ZeroOut;

use crate::gguf::GgmlType;
use crate::quant::Bits;
use crate::{DType, Error, Result, SourceTensor};
use std::sync::Arc;

/// How `qweight` and `qzeros` are packed (see the module doc's table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PackedFormat {
    GptqV1,
    GptqV2,
    AwqGemm,
    /// A GGUF file's block-quantized tensor (the ggml type is the weight's own, see
    /// [`PackedWeight::ggml_type`]; crate::ggml decodes it).
    Gguf,
    /// MXFP4 as transformers stores it (`quant_method: mxfp4`, gpt-oss's expert stacks):
    /// `<name>_blocks` u8 `[..., N, K/32, 16]` and `<name>_scales` u8 `[..., N, K/32]`
    /// (crate::ggml::decode_mxfp4_pairs; see [`PackedWeight::mxfp4`]).
    Mxfp4,
}

impl PackedFormat {
    /// The name build reports and recipe descriptions use.
    pub fn name(self) -> &'static str {
        match self {
            PackedFormat::GptqV1 => "gptq",
            PackedFormat::GptqV2 => "gptq_v2",
            PackedFormat::AwqGemm => "awq_gemm",
            PackedFormat::Gguf => "gguf",
            PackedFormat::Mxfp4 => "mxfp4",
        }
    }
}

/// How a pre-quantized layer's integers are written as MatMulNBits: bits, values per scale and
/// the zero points' kind. Layers of one form can be stacked into one MatMulNBits keeping each
/// layer's integers, scales and zero points as they are ([`PackedStack`]); layers of different
/// forms cannot without widening one of them (4-bit codes written as 8-bit, a block split so
/// its scale is written twice, zero offsets added to a layer that has none), so the packing rules
/// (fuse.pack_qkv's `same_stored_form`, through the rule function `stored_form`) leave them
/// separate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StoredForm {
    pub bits: Bits,
    /// Values per scale: the group size, or a ggml type's (sub-)block.
    pub block: usize,
    pub zeros: ZeroForm,
    /// GPTQ act-order: the rows are gathered in the layer's `g_idx` order, named by a
    /// fingerprint of that order, so that only layers of one order share a form (and stack
    /// into one MatMulNBits, which gathers its input once).
    pub act_order: Option<u32>,
}

/// FNV-1a of a row order: [`StoredForm::act_order`].
fn order_fingerprint(order: &[u32]) -> u32 {
    order.iter().flat_map(|r| r.to_le_bytes()).fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// The zero points of a [`StoredForm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZeroForm {
    /// Every zero point is 2^(bits - 1) (symmetric GPTQ, Q4_0, Q5_0, Q8_0, Q6_K): none is written.
    Mid,
    /// Integer zero points (asymmetric GPTQ, AWQ).
    Integer,
    /// Float zero points (a ggml type with a min: Q4_1, Q5_1, Q2_K, Q4_K, Q5_K), written as
    /// per-block offsets.
    Float,
}

impl std::fmt::Display for StoredForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let zeros = match self.zeros {
            ZeroForm::Mid => "mid zero point",
            ZeroForm::Integer => "integer zero points",
            ZeroForm::Float => "float zero points",
        };
        write!(f, "{}-bit, block {}, {zeros}", self.bits.count(), self.block)?;
        match self.act_order {
            Some(order) => write!(f, ", act-order {order:08x}"),
            None => Ok(()),
        }
    }
}

/// AWQ's nibble order: nibble `i` of a word holds column `8c + AWQ_ORDER[i]`.
const AWQ_ORDER: [usize; 8] = [0, 2, 4, 6, 1, 3, 5, 7];
/// Its inverse: column `8c + j` sits in nibble `AWQ_NIBBLE[j]`.
const AWQ_NIBBLE: [usize; 8] = [0, 4, 1, 5, 2, 6, 3, 7];

/// The tensors of one pre-quantized Linear layer.
#[derive(Clone, Debug)]
pub struct PackedTensors {
    pub qweight: SourceTensor,
    pub qzeros: SourceTensor,
    pub scales: SourceTensor,
    /// GPTQ's row-to-group map; `None` for AWQ (and GPTQ exports that leave it out: groups
    /// are then contiguous).
    pub g_idx: Option<SourceTensor>,
}

/// A GGUF tensor's blocks (see [`PackedWeight::ggml`]), or transformers' MXFP4 pair
/// ([`PackedWeight::mxfp4`]: `tensor` the nibbles, `exponents` the scales).
#[derive(Debug)]
struct GgmlLayer {
    tensor: SourceTensor,
    /// transformers' MXFP4 `*_scales`, one e8m0 byte per block of a row, rows in order.
    exponents: Option<SourceTensor>,
    ty: GgmlType,
    /// File row of each weight row, when permuted.
    rows: Option<Arc<[u32]>>,
    row_bytes: usize,
    float_zeros: bool,
}

impl GgmlLayer {
    /// Decodes the ggml blocks of row `n` that hold values `k0..k1` into those blocks' places
    /// of the whole-row `codes`, `scales` and `zeros` (a DequantizeLinear band reads a K-range
    /// of every row: decoding whole rows made each band decode the whole tensor).
    #[allow(clippy::too_many_arguments)]
    fn decode(&self, w: &PackedWeight, n: usize, k0: usize, k1: usize, codes: &mut [u8], scales: &mut [f32], zeros: &mut [f32]) -> Result<()> {
        let row = self.rows.as_ref().map_or(n, |r| r[n] as usize);
        let Some((per, size)) = self.block() else {
            return Err(Error::Recipe { tensor: w.name.clone(), reason: format!("ggml type {} is not decoded", self.ty) });
        };
        let (first, last) = (k0 / per, k1.div_ceil(per).min(codes.len() / per));
        let g = w.group_size;
        let bytes = &self.tensor.bytes()?[row * self.row_bytes + first * size..row * self.row_bytes + last * size];
        let (codes, scales, zeros) = (&mut codes[first * per..last * per], &mut scales[first * per / g..last * per / g], &mut zeros[first * per / g..last * per / g]);
        if let Some(e) = &self.exponents {
            let blocks = w.k / per;
            crate::ggml::decode_mxfp4_pairs(bytes, &e.bytes()?[row * blocks + first..row * blocks + last], codes, scales);
        } else if !crate::ggml::decode_row(self.ty, bytes, codes, scales, zeros) {
            return Err(Error::Recipe { tensor: w.name.clone(), reason: format!("ggml type {} is not decoded", self.ty) });
        }
        // A corrupt block (an f16 scale or min that is NaN or infinite) would give a package of
        // NaN weights: refused, naming where it is in the file.
        let offsets = if self.float_zeros { &zeros[..scales.len()] } else { &[][..] };
        if let Some(b) = scales.iter().chain(offsets).position(|v| !v.is_finite()) {
            let block = first * per / g + b % scales.len();
            if let Some(e) = &self.exponents {
                // transformers' MXFP4: the exponent byte 255 (NaN in the OCP MX format), in
                // the scales tensor; rows are (expert, row) of the stack.
                let per_expert = e.shape.get(e.shape.len().wrapping_sub(2)).copied().unwrap_or(w.n).max(1);
                return Err(Error::Recipe {
                    tensor: w.name.clone(),
                    reason: format!(
                        "`{}` in {}: expert {}, row {}, block {block} (values {}..{}) has exponent 255, NaN in the MXFP4 format; the checkpoint is corrupt",
                        e.name,
                        e.file.path.display(),
                        row / per_expert,
                        row % per_expert,
                        block * per,
                        (block + 1) * per
                    ),
                });
            }
            return Err(Error::Recipe {
                tensor: w.name.clone(),
                reason: format!(
                    "{}{} row {row}, values {}..{}: the block's {} is not finite; the file is corrupt",
                    if self.tensor.name == w.name { String::new() } else { format!("`{}` ", self.tensor.name) },
                    self.ty,
                    block * w.group_size,
                    (block + 1) * w.group_size,
                    if b < scales.len() { "scale" } else { "min" }
                ),
            });
        }
        Ok(())
    }

    /// Values per block and bytes per block in `tensor` (transformers' MXFP4 keeps the
    /// exponent apart: 16 bytes).
    fn block(&self) -> Option<(usize, usize)> {
        match self.exponents {
            Some(_) => Some((32, 16)),
            None => self.ty.block(),
        }
    }
}

/// GGUF tensors of at least this many bytes (32 MiB) give back their file pages row run by row
/// run while each DequantizeLinear band is written, not only when the tensor is done: a band
/// reads a K-range of every row, so without it a token table's whole file bytes stay resident through
/// all its bands (Gemma 3 270M's Q8_0 table: 178 MB, the largest part of that import's peak).
/// Smaller tensors keep their pages between bands, which saves faulting them in again.
pub(crate) const RELEASE_WITHIN_BAND: usize = 32 << 20;

/// The quantization settings the checkpoint's config gives for a layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedSettings {
    pub format: PackedFormat,
    pub bits: Bits,
    /// Rows per group; `None`: one group over all of K (GPTQ's `group_size: -1`).
    pub group_size: Option<usize>,
    /// The config says symmetric: every zero point must be the mid value, and none is written.
    pub symmetric: bool,
}

/// One pre-quantized Linear layer; see the module doc.
#[derive(Debug)]
pub struct PackedWeight {
    /// The layer's scope (`model.layers.0.self_attn.q_proj`), for messages.
    pub name: String,
    settings: PackedSettings,
    n: usize,
    k: usize,
    group_size: usize,
    t: PackedTensors,
    /// A GGUF tensor's blocks, when the format is [`PackedFormat::Gguf`] (`t` is then empty).
    ggml: Option<GgmlLayer>,
    /// Checkpoint row of each MatMulNBits row when the groups are not contiguous (`desc_act`).
    order: Option<Arc<[u32]>>,
    /// Group of each checkpoint row when not `row / group_size`.
    groups: Option<Arc<[u32]>>,
    scale_dtype: DType,
    /// Elements repacked so far (see [`PackedWeight::done`]).
    repacked: std::sync::atomic::AtomicUsize,
    /// Rows read whose file pages are still mapped (see [`PackedWeight::rows_read`]).
    pending: pending::PendingRows,
}

/// Little-endian u32 `i` of a tensor's bytes (lengths are checked at construction).
#[inline(always)]
fn word(bytes: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([bytes[4 * i], bytes[4 * i + 1], bytes[4 * i + 2], bytes[4 * i + 3]])
}

impl PackedWeight {
    /// Checks the tensors of layer `name` against each other and `settings`, reads `g_idx`
    /// (to find the row order) and the zero points (to check them), and returns the layer.
    pub fn new(name: impl Into<String>, settings: PackedSettings, t: PackedTensors) -> Result<Arc<PackedWeight>> {
        let name = name.into();
        let bad = |reason: String| Error::Recipe { tensor: name.clone(), reason };
        let bits = settings.bits.count();
        let per = 32 / bits;
        if matches!(settings.format, PackedFormat::Gguf | PackedFormat::Mxfp4) {
            return Err(bad("a GGUF or MXFP4 tensor is made with PackedWeight::ggml or PackedWeight::mxfp4".into()));
        }
        if settings.format == PackedFormat::AwqGemm && settings.bits != Bits::Int4 {
            return Err(bad(format!("AWQ GEMM packs 4-bit weights, not {bits}-bit")));
        }
        for (what, st) in [("qweight", &t.qweight), ("qzeros", &t.qzeros)] {
            if st.dtype != DType::I32 || st.shape.len() != 2 {
                return Err(bad(format!("{what} `{}` is {}{:?}; a packed {what} is a 2-D int32 tensor", st.name, st.dtype, st.shape)));
            }
        }
        if !matches!(t.scales.dtype, DType::F16 | DType::BF16 | DType::F32) || t.scales.shape.len() != 2 {
            return Err(bad(format!("scales `{}` is {}{:?}; scales are a 2-D f16, bf16 or f32 tensor", t.scales.name, t.scales.dtype, t.scales.shape)));
        }
        let (q, s) = (&t.qweight.shape, &t.scales.shape);
        let (k, n) = match settings.format {
            PackedFormat::GptqV1 | PackedFormat::GptqV2 | PackedFormat::Gguf | PackedFormat::Mxfp4 => (q[0] * per, q[1]),
            PackedFormat::AwqGemm => (q[0], s[1]),
        };
        if k == 0 || n == 0 {
            return Err(bad(format!("qweight `{}` is empty ({q:?})", t.qweight.name)));
        }
        if n % per != 0 {
            return Err(bad(format!("{n} output features are not a multiple of {per}, so they cannot be packed {per} to an int32")));
        }
        let group_size = settings.group_size.unwrap_or(k);
        if group_size == 0 {
            return Err(bad("group_size 0".into()));
        }
        let groups = k.div_ceil(group_size);
        let want = |what: &str, st: &SourceTensor, shape: [usize; 2]| {
            if st.shape == shape {
                Ok(())
            } else {
                Err(bad(format!(
                    "{what} `{}` has shape {:?}; K = {k}, N = {n}, {bits} bits and group size {group_size} need {shape:?}",
                    st.name, st.shape
                )))
            }
        };
        if settings.format == PackedFormat::AwqGemm {
            want("qweight", &t.qweight, [k, n / per])?;
        }
        want("qzeros", &t.qzeros, [groups, n / per])?;
        want("scales", &t.scales, [groups, n])?;
        for st in [Some(&t.qweight), Some(&t.qzeros), Some(&t.scales), t.g_idx.as_ref()].into_iter().flatten() {
            let len = st.bytes()?.len();
            if len != st.numel() * st.dtype.size() {
                return Err(bad(format!("`{}` holds {len} bytes for {}{:?}", st.name, st.dtype, st.shape)));
            }
        }
        let (order, row_groups) = match &t.g_idx {
            Some(g) => row_order(&name, g, k, group_size)?,
            None => (None, None),
        };
        let w = PackedWeight { name, settings, n, k, group_size, scale_dtype: t.scales.dtype, t, ggml: None, order, groups: row_groups, repacked: Default::default(), pending: Default::default() };
        w.check_zero_points()?;
        Ok(Arc::new(w))
    }

    /// A GGUF tensor of ggml type `ty` holding `n` rows of `k` values (`tensor`: its raw
    /// blocks), read as the `[n, k]` weight whose row `i` is file row `rows[i]` (`None`: the
    /// file's order; llama.cpp permutes the rows of q and k). Refused when `ty` has no
    /// MatMulNBits form here (crate::ggml).
    pub fn ggml(name: impl Into<String>, tensor: SourceTensor, ty: GgmlType, n: usize, k: usize, rows: Option<Arc<[u32]>>) -> Result<Arc<PackedWeight>> {
        let name = name.into();
        let bad = |reason: String| Error::Recipe { tensor: name.clone(), reason };
        let Some(form) = crate::ggml::form(ty) else {
            return Err(bad(format!("ggml type {ty} has no MatMulNBits form here")));
        };
        let (per, size) = ty.block().expect("a type with a form has a block layout");
        if n == 0 || k == 0 || !k.is_multiple_of(per) {
            return Err(bad(format!("{ty} rows of {k} values are not whole {per}-value blocks")));
        }
        let row_bytes = k / per * size;
        if tensor.bytes()?.len() != n * row_bytes {
            return Err(bad(format!("`{}` holds {} bytes; {n} rows of {k} {ty} values take {}", tensor.name, tensor.len, n * row_bytes)));
        }
        if let Some(r) = &rows {
            let mut seen = vec![false; n];
            if r.len() != n || r.iter().any(|&i| (i as usize) >= n || std::mem::replace(&mut seen[i as usize], true)) {
                return Err(bad(format!("the row order of `{}` is not a permutation of its {n} rows", tensor.name)));
            }
        }
        let settings = PackedSettings { format: PackedFormat::Gguf, bits: form.bits, group_size: Some(form.block), symmetric: form.zeros == crate::ggml::Zeros::Mid };
        let empty = SourceTensor { name: String::new(), file: Arc::clone(&tensor.file), dtype: DType::U8, shape: vec![0], offset: 0, len: 0 };
        let t = PackedTensors { qweight: empty.clone(), qzeros: empty.clone(), scales: empty, g_idx: None };
        let ggml = GgmlLayer { tensor, exponents: None, ty, rows, row_bytes, float_zeros: form.zeros == crate::ggml::Zeros::Float };
        Ok(Arc::new(PackedWeight {
            name,
            settings,
            n,
            k,
            group_size: form.block,
            t,
            ggml: Some(ggml),
            order: None,
            groups: None,
            scale_dtype: DType::F32,
            repacked: Default::default(), pending: Default::default(),
        }))
    }

    /// transformers' MXFP4 weight of `n` rows of `k` values: `blocks` u8 `[..., K/32, 16]`
    /// (byte `j` of a block: values `2j` low nibble, `2j + 1` high) and `scales` u8
    /// `[..., K/32]` (e8m0), their leading dimensions multiplying to `n` (an expert stack's
    /// `[E, rows]`), read as the `[n, k]` weight in the 8-bit form of ggml's MXFP4 (exact).
    pub fn mxfp4(name: impl Into<String>, blocks: SourceTensor, scales: SourceTensor) -> Result<Arc<PackedWeight>> {
        let name = name.into();
        let bad = |reason: String| Error::Recipe { tensor: name.clone(), reason };
        let (b, s) = (&blocks.shape, &scales.shape);
        if blocks.dtype != DType::U8 || scales.dtype != DType::U8 || b.len() < 3 || b.last() != Some(&16) || b[..b.len() - 1] != s[..] {
            return Err(bad(format!(
                "`{}` is {}{b:?} and `{}` {}{s:?}; MXFP4 stores u8 blocks [..., K/32, 16] and u8 scales [..., K/32] of the same leading shape",
                blocks.name, blocks.dtype, scales.name, scales.dtype
            )));
        }
        let n: usize = s[..s.len() - 1].iter().product();
        let k = s[s.len() - 1] * 32;
        if n == 0 || k == 0 {
            return Err(bad(format!("`{}` is empty ({b:?})", blocks.name)));
        }
        for t in [&blocks, &scales] {
            if t.bytes()?.len() != t.numel() {
                return Err(bad(format!("`{}` holds {} bytes for u8{:?}", t.name, t.len, t.shape)));
            }
        }
        let ty = GgmlType::MXFP4;
        let form = crate::ggml::form(ty).expect("MXFP4 has a form");
        let settings = PackedSettings { format: PackedFormat::Mxfp4, bits: form.bits, group_size: Some(form.block), symmetric: true };
        let empty = SourceTensor { name: String::new(), file: Arc::clone(&blocks.file), dtype: DType::U8, shape: vec![0], offset: 0, len: 0 };
        let t = PackedTensors { qweight: empty.clone(), qzeros: empty.clone(), scales: empty, g_idx: None };
        let ggml = GgmlLayer { tensor: blocks, exponents: Some(scales), ty, rows: None, row_bytes: k / 2, float_zeros: false };
        Ok(Arc::new(PackedWeight { name, settings, n, k, group_size: form.block, t, ggml: Some(ggml), order: None, groups: None, scale_dtype: DType::F32, repacked: Default::default(), pending: Default::default() }))
    }

    /// The ggml type of a GGUF tensor (MXFP4 for transformers' MXFP4; `None` for GPTQ and AWQ
    /// layers).
    pub fn ggml_type(&self) -> Option<GgmlType> {
        self.ggml.as_ref().map(|g| g.ty)
    }

    /// Whether its zero points are floats (a GGUF type with a min: Q4_1, Q5_1, Q2_K, Q4_K, Q5_K), which only
    /// MatMulNBits' float `zero_points` input holds exactly.
    pub fn float_zeros(&self) -> bool {
        self.ggml.as_ref().is_some_and(|g| g.float_zeros)
    }

    /// The form its integers are written in (see [`StoredForm`]).
    pub fn stored_form(&self) -> StoredForm {
        let zeros = match (self.float_zeros(), self.settings.symmetric) {
            (true, _) => ZeroForm::Float,
            (false, true) => ZeroForm::Mid,
            (false, false) => ZeroForm::Integer,
        };
        StoredForm { bits: self.settings.bits, block: self.group_size, zeros, act_order: self.order.as_deref().map(order_fingerprint) }
    }

    /// The source type for reports: `Q4_1` for a GGUF tensor, else the format's name.
    pub fn source_type(&self) -> String {
        match &self.ggml {
            Some(g) if self.settings.format == PackedFormat::Gguf => g.ty.name(),
            _ => self.settings.format.name().to_string(),
        }
    }

    /// The file holding the weight's data, for messages.
    pub fn file_path(&self) -> &std::path::Path {
        match &self.ggml {
            Some(g) => &g.tensor.file.path,
            None => &self.t.qweight.file.path,
        }
    }

    fn ggml_buffers(&self) -> (Vec<u8>, Vec<f32>, Vec<f32>) {
        let blocks = self.k / self.group_size;
        (vec![0u8; self.k], vec![0f32; blocks], vec![0f32; blocks])
    }

    /// Row `n` of a GGUF weight decoded where it holds values `k0..k1` (whole ggml blocks
    /// around them): codes `[K]`, per block a scale and (float zeros) a zero point, each at its
    /// place in the whole row. `false` for GPTQ and AWQ layers.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn ggml_row(&self, n: usize, k0: usize, k1: usize, codes: &mut [u8], scales: &mut [f32], zeros: &mut [f32]) -> Result<bool> {
        match &self.ggml {
            Some(g) => g.decode(self, n, k0, k1, codes, scales, zeros).map(|_| true),
            None => Ok(false),
        }
    }

    pub fn settings(&self) -> PackedSettings {
        self.settings
    }
    pub fn format(&self) -> PackedFormat {
        self.settings.format
    }
    pub fn bits(&self) -> Bits {
        self.settings.bits
    }
    /// Output features.
    pub fn n(&self) -> usize {
        self.n
    }
    /// Input features.
    pub fn k(&self) -> usize {
        self.k
    }
    /// Rows per group (K for a single group).
    pub fn group_size(&self) -> usize {
        self.group_size
    }
    pub fn symmetric(&self) -> bool {
        self.settings.symmetric
    }
    /// The element type of the checkpoint's scales.
    pub fn scale_dtype(&self) -> DType {
        self.scale_dtype
    }
    /// The checkpoint row of each MatMulNBits row, when `g_idx` reorders them.
    pub fn order(&self) -> Option<&Arc<[u32]>> {
        self.order.as_ref()
    }
    pub fn tensors(&self) -> &PackedTensors {
        &self.t
    }

    /// Code `q[k, n]` (checkpoint row `k`).
    #[inline(always)]
    fn code(&self, qweight: &[u8], k: usize, n: usize) -> u8 {
        let bits = self.settings.bits.count();
        match self.settings.format {
            PackedFormat::GptqV1 | PackedFormat::GptqV2 | PackedFormat::Gguf | PackedFormat::Mxfp4 => {
                let per = 32 / bits;
                ((word(qweight, (k / per) * self.n + n) >> (bits * (k % per))) & ((1 << bits) - 1)) as u8
            }
            PackedFormat::AwqGemm => ((word(qweight, k * (self.n / 8) + n / 8) >> (4 * AWQ_NIBBLE[n % 8])) & 0xf) as u8,
        }
    }

    /// Zero point of group `g`, column `n`, as the dequantization uses it (v1 adds the 1
    /// back; a v1 nibble of all ones gives 2^bits, which no unsigned code can hold).
    fn zero(&self, qzeros: &[u8], g: usize, n: usize) -> u16 {
        let bits = self.settings.bits.count();
        let per = 32 / bits;
        let stored = match self.settings.format {
            PackedFormat::GptqV1 | PackedFormat::GptqV2 | PackedFormat::Gguf | PackedFormat::Mxfp4 => (word(qzeros, g * (self.n / per) + n / per) >> (bits * (n % per))) & ((1 << bits) - 1),
            PackedFormat::AwqGemm => (word(qzeros, g * (self.n / 8) + n / 8) >> (4 * AWQ_NIBBLE[n % 8])) & 0xf,
        } as u16;
        match self.settings.format {
            PackedFormat::GptqV1 => stored + 1,
            _ => stored,
        }
    }

    /// Scale of group `g`, column `n`, in f32 (exact from f16, bf16 and f32).
    fn scale(&self, scales: &[u8], g: usize, n: usize) -> f32 {
        let i = g * self.n + n;
        match self.scale_dtype {
            DType::F16 => half::f16::from_le_bytes([scales[2 * i], scales[2 * i + 1]]).to_f32(),
            DType::BF16 => f32::from_bits((u16::from_le_bytes([scales[2 * i], scales[2 * i + 1]]) as u32) << 16),
            _ => f32::from_le_bytes([scales[4 * i], scales[4 * i + 1], scales[4 * i + 2], scales[4 * i + 3]]),
        }
    }

    /// The group of checkpoint row `k`.
    #[inline(always)]
    fn group_of(&self, k: usize) -> usize {
        match &self.groups {
            Some(g) => g[k] as usize,
            None => k / self.group_size,
        }
    }

    /// Every zero point fits the code range (GPTQ v1's zero - 1 underflows for a zero of 0:
    /// the stored all-ones nibble reads back as 2^bits), and is the mid value when the config
    /// says symmetric.
    fn check_zero_points(&self) -> Result<()> {
        if self.ggml.is_some() {
            return Ok(());
        }
        let qzeros = self.t.qzeros.bytes()?;
        let (max, mid) = (self.settings.bits.max_q() as u16, self.settings.bits.mid() as u16);
        for g in 0..self.k.div_ceil(self.group_size) {
            for n in 0..self.n {
                let z = self.zero(qzeros, g, n);
                if z > max {
                    return Err(Error::Recipe {
                        tensor: self.t.qzeros.name.clone(),
                        reason: format!(
                            "group {g}, column {n} stores zero - 1 = {} (GPTQ v1), a zero point of {z}, outside the {}-bit codes 0..={max}: \
                             v1 packing underflows a zero point of 0; re-export the checkpoint in gptq_v2 format",
                            z - 1,
                            self.settings.bits.count()
                        ),
                    });
                }
                if self.settings.symmetric && z != mid {
                    return Err(Error::Recipe {
                        tensor: self.t.qzeros.name.clone(),
                        reason: format!(
                            "quantization_config says sym: true, but group {g}, column {n} has zero point {z}, not {mid}; the checkpoint does not match its config"
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// The codes of output rows `n0..n1`, checkpoint rows `k0..k1`, into `out` as
    /// `[n1 - n0, k1 - k0]` (each output row's codes contiguous).
    pub(crate) fn codes(&self, n0: usize, n1: usize, k0: usize, k1: usize, out: &mut [u8]) -> Result<()> {
        if let Some(g) = &self.ggml {
            let width = k1 - k0;
            let (mut codes, mut scales, mut zeros) = self.ggml_buffers();
            for (c, n) in (n0..n1).enumerate() {
                g.decode(self, n, k0, k1, &mut codes, &mut scales, &mut zeros)?;
                out[c * width..(c + 1) * width].copy_from_slice(&codes[k0..k1]);
            }
            return Ok(());
        }
        let qweight = self.t.qweight.bytes()?;
        let width = k1 - k0;
        debug_assert_eq!(out.len(), (n1 - n0) * width);
        match self.settings.format {
            PackedFormat::GptqV1 | PackedFormat::GptqV2 | PackedFormat::Gguf | PackedFormat::Mxfp4 => {
                // Word row r holds checkpoint rows r*per.. of every column: read each row's run
                // of columns once, in file order.
                let bits = self.settings.bits.count();
                let (per, mask) = (32 / bits, (1u32 << bits) - 1);
                for r in k0 / per..k1.div_ceil(per) {
                    for (c, n) in (n0..n1).enumerate() {
                        let w = word(qweight, r * self.n + n);
                        for j in 0..per {
                            let k = r * per + j;
                            if (k0..k1).contains(&k) {
                                out[c * width + k - k0] = ((w >> (bits * j)) & mask) as u8;
                            }
                        }
                    }
                }
            }
            PackedFormat::AwqGemm => {
                for k in k0..k1 {
                    for (c, n) in (n0..n1).enumerate() {
                        out[c * width + k - k0] = self.code(qweight, k, n);
                    }
                }
            }
        }
        Ok(())
    }

    /// Rows `k0..k1` of columns `n0..n1` packed as MatMulNBits packs them, straight from the
    /// checkpoint's words, column `c` at `out[c * stride..]`: where the words run along K
    /// (GPTQ), a word's little-endian bytes are its `32 / bits` codes packed low bits first,
    /// which is MatMulNBits' order, so a column's bytes are its words in order (no code is
    /// unpacked: it was half of a GPTQ import's time). `false`, nothing written, for any other
    /// layout or rows that do not start and end on a word.
    pub(crate) fn packed_along_k(&self, n0: usize, n1: usize, k0: usize, k1: usize, out: &mut [u8], stride: usize) -> Result<bool> {
        if self.ggml.is_some() || !matches!(self.settings.format, PackedFormat::GptqV1 | PackedFormat::GptqV2) {
            return Ok(false);
        }
        let per = 32 / self.settings.bits.count();
        if !k0.is_multiple_of(per) || !k1.is_multiple_of(per) {
            return Ok(false);
        }
        let qweight = self.t.qweight.bytes()?;
        for (i, r) in (k0 / per..k1 / per).enumerate() {
            let words = &qweight[4 * (r * self.n + n0)..4 * (r * self.n + n1)];
            for (c, w) in words.chunks_exact(4).enumerate() {
                out[c * stride + 4 * i..c * stride + 4 * i + 4].copy_from_slice(w);
            }
        }
        Ok(true)
    }

    /// The dequantized weight `[N, K]` in f32, checkpoint row order: `scale * (q - zero)` of
    /// each row's group, exact (a small integer times an f16/bf16/f32 scale).
    pub fn dequantize(&self) -> Result<Vec<f32>> {
        let out = self.dequantize_rows(0, self.n)?;
        self.done(self.n * self.k);
        Ok(out)
    }

    /// Rows `n0..n1` of [`Self::dequantize`] (the writer streams a float view of a packed
    /// weight by ranges: no whole-weight copy per range). Does not count as written.
    pub fn dequantize_rows(&self, n0: usize, n1: usize) -> Result<Vec<f32>> {
        if let Some(g) = &self.ggml {
            let mut out = vec![0f32; (n1 - n0) * self.k];
            let (mut codes, mut scales, mut zeros) = self.ggml_buffers();
            let (bs, mid) = (self.group_size, self.settings.bits.mid() as f32);
            for (n, row) in (n0..n1).zip(out.chunks_exact_mut(self.k)) {
                g.decode(self, n, 0, self.k, &mut codes, &mut scales, &mut zeros)?;
                for (i, v) in row.iter_mut().enumerate() {
                    let scaled = scales[i / bs] * (codes[i] as f32 - mid);
                    *v = if g.float_zeros { scaled + zeros[i / bs] } else { scaled };
                }
            }
            return Ok(out);
        }
        let (qweight, qzeros, scales) = (self.t.qweight.bytes()?, self.t.qzeros.bytes()?, self.t.scales.bytes()?);
        let mut out = vec![0f32; (n1 - n0) * self.k];
        for (c, n) in (n0..n1).enumerate() {
            for k in 0..self.k {
                let g = self.group_of(k);
                let q = self.code(qweight, k, n) as f32;
                out[c * self.k + k] = self.scale(scales, g, n) * (q - self.zero(qzeros, g, n) as f32);
            }
        }
        Ok(out)
    }

    /// Records that `elements` more of the weight were written; once all of it is (the ranges
    /// of one write run in any order, on any thread), its tensors' pages leave the resident
    /// set (`MappedFile::release`), as a float weight's do range by range: a packed range
    /// reads words from every row of `qweight`, so the pages are released per tensor.
    pub(crate) fn done(&self, elements: usize) {
        let total = self.n * self.k;
        let before = self.repacked.fetch_add(elements, std::sync::atomic::Ordering::Relaxed);
        if (before + elements) / total > before / total {
            self.pending.clear();
            for t in self.sources() {
                t.file.release(t.offset, t.len);
            }
        }
    }

    /// [`Self::done`] for rows `n0..n1` written whole (or their last columns); see
    /// [`Self::rows_read`].
    pub(crate) fn rows_done(&self, n0: usize, n1: usize, elements: usize) {
        self.rows_read(n0, n1);
        self.done(elements);
    }

    /// Rows `n0..n1` are read whole (or their last columns): a GGUF layer stores each row's
    /// blocks together, so those rows' pages leave the resident set once they make a run of
    /// [`Self::run_rows`] (joined across calls and threads, see `pending.rs`), not only when
    /// the whole tensor is written (a 262,144-row Q8_0 token table kept 174 MB resident until
    /// its last row). Rows of a permuted layer (llama's q/k) lie apart in the file and wait for
    /// the tensor. Releasing rows another range still reads only faults those pages in again.
    pub(crate) fn rows_read(&self, n0: usize, n1: usize) {
        if let Some(run) = self.run_rows() {
            self.pending.add(n0, n1, run, |a, b| self.release_rows(a, b));
        }
    }

    /// Gives back the rows [`Self::rows_read`] still holds (a call that read a block of rows
    /// ends: what it leaves pending would otherwise stay resident until the next call).
    pub(crate) fn flush_rows(&self) {
        self.pending.flush(|a, b| self.release_rows(a, b));
    }

    /// Rows of about 4 MiB of the file, given back together: one `madvise` per row costs a TLB
    /// shootdown each and faults neighbouring rows in again. `None` for a permuted GGUF layer
    /// (its rows lie apart) or a GPTQ/AWQ layer (its tensors run along K).
    fn run_rows(&self) -> Option<usize> {
        let g = self.ggml.as_ref().filter(|g| g.rows.is_none())?;
        Some(((4 << 20) / g.row_bytes.max(1)).max(1))
    }

    /// Rows per run whose file pages a DequantizeLinear band gives back as it goes (about 4 MiB
    /// of the file): a band reads a K-range of every row (see [`RELEASE_WITHIN_BAND`]). `None`
    /// for a tensor smaller than that threshold, a permuted one (its rows lie apart) or a
    /// GPTQ/AWQ layer.
    pub(crate) fn release_run_rows(&self) -> Option<usize> {
        self.run_rows().filter(|_| self.ggml.as_ref().is_some_and(|g| g.tensor.len >= RELEASE_WITHIN_BAND))
    }

    /// Drops rows `n0..n1`' file pages from the resident set without counting them written
    /// (a GGUF layer whose rows lie in file order; rows of a permuted one lie apart).
    pub(crate) fn release_rows(&self, n0: usize, n1: usize) {
        if let Some(g) = self.ggml.as_ref().filter(|g| g.rows.is_none()) {
            g.tensor.file.release(g.tensor.offset + n0 * g.row_bytes, (n1 - n0) * g.row_bytes);
            if let Some(e) = &g.exponents {
                let blocks = self.k / 32;
                e.file.release(e.offset + n0 * blocks, (n1 - n0) * blocks);
            }
        }
    }

    /// How the weight is described in recipe chains: `gptq[4b,g32,sym](file:scope)`.
    pub fn describe(&self) -> String {
        if let Some(g) = &self.ggml {
            let file = g.tensor.file.path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            let perm = if g.rows.is_some() { ",rows_permuted" } else { "" };
            if g.exponents.is_some() {
                return format!("mxfp4({file}:{})", g.tensor.name);
            }
            return format!("gguf[{}{perm}]({file}:{})", g.ty, g.tensor.name);
        }
        let file = self.t.qweight.file.path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        format!(
            "{}[{}b,g{},{}{}]({file}:{})",
            self.settings.format.name(),
            self.settings.bits.count(),
            self.group_size,
            if self.settings.symmetric { "sym" } else { "asym" },
            if self.order.is_some() { ",act_order" } else { "" },
            self.name
        )
    }

    /// The source tensors it reads.
    pub fn sources(&self) -> Vec<&SourceTensor> {
        if let Some(g) = &self.ggml {
            return std::iter::once(&g.tensor).chain(g.exponents.as_ref()).collect();
        }
        [Some(&self.t.qweight), Some(&self.t.qzeros), Some(&self.t.scales), self.t.g_idx.as_ref()].into_iter().flatten().collect()
    }
}

/// A row order and the rows' groups (`None`: rows in order, row `k` in group `k / group_size`).
type RowOrder = (Option<Arc<[u32]>>, Option<Arc<[u32]>>);

/// Reads `g_idx` and returns (row order, row groups): both `None` when row `k` is in group
/// `k / group_size` (contiguous groups, `desc_act: false` or `static_groups`); with act-order,
/// the rows sorted by group (stable), which must give groups of exactly `group_size` rows in
/// turn, and the map itself.
fn row_order(name: &str, g_idx: &SourceTensor, k: usize, group_size: usize) -> Result<RowOrder> {
    let bad = |reason: String| Error::Recipe { tensor: g_idx.name.clone(), reason };
    if !matches!(g_idx.dtype, DType::I32) || g_idx.shape != [k] {
        return Err(bad(format!("g_idx of `{name}` is {}{:?}; it must be int32 [{k}] (one group per input row)", g_idx.dtype, g_idx.shape)));
    }
    let bytes = g_idx.bytes()?;
    let groups = k.div_ceil(group_size);
    let mut map = Vec::with_capacity(k);
    for i in 0..k {
        let g = word(bytes, i) as i32;
        if g < 0 || g as usize >= groups {
            return Err(bad(format!("row {i} is in group {g}, outside 0..{groups}")));
        }
        map.push(g as u32);
    }
    if map.iter().enumerate().all(|(i, &g)| g as usize == i / group_size) {
        return Ok((None, None));
    }
    let mut order: Vec<u32> = (0..k as u32).collect();
    order.sort_by_key(|&r| map[r as usize]);
    if let Some(i) = order.iter().enumerate().position(|(i, &r)| map[r as usize] as usize != i / group_size) {
        return Err(bad(format!(
            "the groups of `{name}` are not all {group_size} rows: sorted by group, row {i} (checkpoint row {}) is in group {}, not {}; \
             MatMulNBits blocks are contiguous runs of one size, so this g_idx cannot be imported",
            order[i],
            map[order[i] as usize],
            i / group_size
        )));
    }
    Ok((Some(order.into()), Some(map.into())))
}

#[cfg(test)]
mod tests;
