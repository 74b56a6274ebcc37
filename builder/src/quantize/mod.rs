//! The quantize step of the pipeline: weight-only INT4/INT8 quantization of the MatMul
//! weights, the lm_head and the embedding table, in the form the EP table's `[quant.*]`
//! section names (docs/quantization.md), and the expert stacks of a fused MoE node
//! (`com.microsoft.QMoE`, experts.rs) with the linear setting.
//!
//! It runs after the fusions and lowerings (so GroupQueryAttention, skip norms, QKV packing and
//! `lower.separate_rope` see float MatMuls, and a packed QKV weight is quantized as one) and
//! before folding. It changes
//! the graph only: each weight becomes a [`ir::QuantGroup`] whose parts are lazy recipes, so
//! nothing is quantized until the package is written, range by range (ir/src/qweight.rs).

mod experts;
pub mod import;
mod rewrite;
mod select;

use std::sync::Arc;

use ep_sets::{QuantBits, QuantChoice, QuantFormat, QuantPlan};
use ir::quant::{Bits, Method, QuantSettings};
use ir::{DType, Graph, QuantGroup};
use serde::Serialize;

use crate::{Error, Result};

pub use select::Role;


/// What the command line asks for; `None` fields take the EP table's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantRequest {
    /// `--quant`: the linear layers' bits. `None`: no `--quant`, only the roles the other
    /// flags name (`--quant-lm-head`, ...), which a pre-quantized checkpoint's float layers
    /// allow (import.rs).
    pub bits: Option<QuantBits>,
    /// 16..=256, a power of two.
    pub block_size: usize,
    pub symmetric: bool,
    pub accuracy_level: Option<i64>,
    pub lm_head: Option<QuantChoice>,
    pub embeddings: Option<QuantChoice>,
    /// Weight initializers (by name, `*` and `?` wildcards) that stay float.
    pub exclude: Vec<String>,
    pub method: Method,
    /// `--requantize-experts`: a pre-quantized checkpoint's expert stacks that QMoE cannot hold
    /// with their own integers (float zero points, act-order, ...) are quantized again (RTN,
    /// asymmetric) at these bits instead of written float. `None`: they stay float.
    pub requantize_experts: Option<QuantBits>,
}

impl QuantRequest {
    /// `--quant <bits>` with every other setting at its default.
    pub fn new(bits: QuantBits) -> QuantRequest {
        QuantRequest {
            bits: Some(bits),
            block_size: 32,
            symmetric: true,
            accuracy_level: None,
            lm_head: None,
            embeddings: None,
            exclude: Vec::new(),
            method: Method::Rtn,
            requantize_experts: None,
        }
    }
}

/// The request resolved against the EP table: everything the step needs.
#[derive(Clone, Debug)]
pub struct QuantStep {
    pub format: QuantFormat,
    pub block_size: usize,
    pub symmetric: bool,
    pub method: Method,
    pub accuracy_level: i64,
    /// Bits per role (`None`: that role stays float).
    pub linear: Option<QuantBits>,
    pub lm_head: Option<QuantBits>,
    pub embeddings: Option<QuantBits>,
    pub exclude: Vec<glob::Pattern>,
    /// The activation dtype, which the scales take.
    pub scale_dtype: DType,
    /// The table section it came from (for messages).
    pub table: String,
    /// Why fused MoE nodes keep float experts: the table claims no `com.microsoft.QMoE`
    /// kernel for the activation dtype (`None`: it does, and they become QMoE).
    pub no_qmoe: Option<String>,
    /// The checkpoint's own quantization, when it is pre-quantized: its packed layers are
    /// written with their integers whatever the role settings say (import.rs).
    pub source: Option<models::QuantSource>,
    /// The bit widths of pre-quantized weights the table has a `[quant.int<bits>]` section
    /// for; the others are written as their exact float dequantization.
    pub packed_bits: Vec<usize>,
    /// The table's `embedding_int4_zero_points_odd_blocks`: where it is false, an asymmetric
    /// 4-bit table of odd blocks per row is not read by the EP's GatherBlockQuantized
    /// ([`table_gather`]).
    pub embedding_int4_zero_points_odd_blocks: bool,
    /// [`QuantRequest::requantize_experts`], for an import.
    pub requantize_experts: Option<QuantBits>,
    /// The table's `embedding_gather_dequantize_linear`: a `dequantize_linear` table may read a
    /// quantized embedding's rows from DequantizeLinear data (rewrite.rs
    /// `gather_rows_dequantize_linear`, `gather_rows_decoded`).
    pub embedding_gather_dequantize_linear: bool,
    /// Why the table cannot gather a table's rows with `com.microsoft.GatherBlockQuantized`: it
    /// claims no kernel for it (`None`: it does). Tables are then gathered from the head's
    /// parts with standard ops (rewrite.rs `gather_dequantized`) where [`Self::no_gathered_bytes`]
    /// allows.
    pub no_gather_block_quantized: Option<String>,
    /// Why the table cannot gather a quantized table's bytes with standard ops (its Gather or
    /// Cast claims no uint8 data: webgpu), `None` when it can ([`table_gather`]).
    pub no_gathered_bytes: Option<String>,
    /// Whether `--quant-embeddings` was given (else the table's default chose the embeddings'
    /// bits, and a table it cannot hold stays float rather than failing the build).
    pub embeddings_asked: bool,
    /// Why the table's DequantizeLinear cannot take unsigned 4-bit / 8-bit data (`None`: it
    /// can): asymmetric blocks of that width are then written in the offset form, signed
    /// codes against the mid point plus per-block float offsets after the MatMul
    /// (`QuantGroup::offset_zero_points`; trt-rtx registers int4, not uint4).
    pub no_unsigned_dq: [Option<String>; 2],
}


/// How the MatMulNBits format reads a quantized embedding table's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TableGather {
    /// `com.microsoft.GatherBlockQuantized` (rewrite.rs `gather_block_quantized`).
    BlockQuantized,
    /// The rows' bytes with standard ops (rewrite.rs `gather_dequantized`).
    Bytes,
}

/// Which form reads a table of `k`-value rows quantized with `settings` (`float_zeros`: HQQ, or
/// a GGUF type with a min), or why neither can on this table. GatherBlockQuantized needs a
/// claim, whole blocks, and, where the table says its kernel fails on them, no packed 4-bit
/// zero points on rows of an odd number of blocks; float zero points are not its (its zero
/// points have the data's type, ORT 1.32 schema), so it reads their symmetric codes and the
/// rows' offsets are added after it. The byte form needs the table's Gather and Cast to take
/// uint8.
pub(crate) fn table_gather(step: &QuantStep, settings: &QuantSettings, k: usize, float_zeros: bool) -> std::result::Result<TableGather, String> {
    let bs = settings.block_size();
    let blocks = k.div_ceil(bs);
    let not_gbq = if let Some(why) = &step.no_gather_block_quantized {
        why.clone()
    } else if !k.is_multiple_of(bs) {
        format!("its rows ({k} values) are not whole blocks of {bs}, which com.microsoft.GatherBlockQuantized needs; choose {}", dividing_block_sizes(k))
    } else if !settings.symmetric() && !float_zeros && settings.bits() == Bits::Int4 && blocks % 2 == 1 && !step.embedding_int4_zero_points_odd_blocks {
        format!(
            "its rows hold {blocks} blocks of {bs}, an odd number, and the EP's GatherBlockQuantized cannot take their packed 4-bit zero points ({}: embedding_int4_zero_points_odd_blocks = false); drop --asymmetric, or choose a --block-size giving an even number of blocks per row",
            step.table
        )
    } else {
        return Ok(TableGather::BlockQuantized);
    };
    match &step.no_gathered_bytes {
        None => Ok(TableGather::Bytes),
        Some(bytes) => Err(format!("{not_gbq}; and its rows cannot be gathered with standard ops either ({bytes})")),
    }
}

/// The `--block-size` values (powers of two, 16..=256) that divide `k`, for messages.
fn dividing_block_sizes(k: usize) -> String {
    let sizes: Vec<String> = (4..=8).map(|p| 1usize << p).filter(|b| k.is_multiple_of(*b)).map(|b| b.to_string()).collect();
    match sizes.as_slice() {
        [] => format!("a --block-size dividing {k} (none of 16..256 does)"),
        [one] => format!("--block-size {one}"),
        [rest @ .., last] => format!("--block-size {} or {last}", rest.join(", ")),
    }
}

impl QuantStep {
    /// Why asymmetric blocks of `bits` cannot keep their integer zero points on this table
    /// (`None`: they can), from [`Self::no_unsigned_dq`].
    pub(crate) fn zero_points_as_offsets(&self, bits: ir::quant::Bits) -> Option<&str> {
        match self.format {
            QuantFormat::MatmulNbits => None,
            QuantFormat::DequantizeLinear => self.no_unsigned_dq[usize::from(bits == ir::quant::Bits::Int8)].as_deref(),
        }
    }

    /// Checks `req` against `plan` (`[quant.<bits>]` of table `table`) for a build in `dtype`.
    pub fn resolve(req: &QuantRequest, plan: &QuantPlan, table: &str, dtype: DType) -> Result<QuantStep> {
        let Some(bits) = req.bits else {
            return Err(Error::Request(
                "--quant-lm-head, --quant-embeddings and --accuracy-level without --quant apply to a pre-quantized checkpoint's float layers; this checkpoint is float: add --quant int4 or int8".into(),
            ));
        };
        let mut step = Self::common(req, plan, table, dtype)?;
        step.linear = Some(bits);
        step.lm_head = req.lm_head.unwrap_or(plan.lm_head).bits();
        // With HQQ a quantized embedding table reads the head's parts (GatherBlockQuantized of
        // the symmetric codes plus the rows' offsets, or the bytes decoded with standard ops:
        // `table_gather`): a tied head and embedding share one table, as with RTN.
        step.embeddings = req.embeddings.unwrap_or(plan.embeddings).bits();
        step.check_embeddings(table)?;
        Ok(step)
    }

    /// Every setting but the roles' bits (all float), checked against `plan`.
    fn common(req: &QuantRequest, plan: &QuantPlan, table: &str, dtype: DType) -> Result<QuantStep> {
        let bad = |m: String| Error::Request(m);
        QuantSettings::new(Bits::Int4, req.block_size, req.symmetric).map_err(|e| bad(format!("--block-size {}: {e}", req.block_size)))?;
        let accuracy_level = req.accuracy_level.unwrap_or(plan.accuracy_level);
        if !(0..=4).contains(&accuracy_level) {
            return Err(bad(format!("--accuracy-level {accuracy_level}: MatMulNBits takes 0 (unset), 1 (f32), 2 (f16), 3 (bf16) or 4 (int8)")));
        }
        if plan.format == QuantFormat::DequantizeLinear && accuracy_level != 0 {
            return Err(bad(format!(
                "--accuracy-level {accuracy_level}: the {table} EP writes standard DequantizeLinear + MatMul, which has no accuracy level (ONNX Runtime picks one when it fuses them: session entry session.qdq_matmulnbits_accuracy_level)"
            )));
        }
        let exclude = req
            .exclude
            .iter()
            .map(|p| glob::Pattern::new(p).map_err(|e| bad(format!("--quant-exclude `{p}`: {e}"))))
            .collect::<Result<Vec<_>>>()?;
        Ok(QuantStep {
            format: plan.format,
            block_size: req.block_size,
            // HQQ solves for a float zero point per block: always asymmetric.
            symmetric: req.symmetric && req.method != Method::Hqq,
            method: req.method,
            accuracy_level,
            linear: None,
            lm_head: None,
            embeddings: None,
            exclude,
            scale_dtype: dtype,
            table: format!("{table}.toml [quant.{}]", plan.bits),
            no_qmoe: None,
            source: None,
            packed_bits: Vec::new(),
            embedding_int4_zero_points_odd_blocks: plan.embedding_int4_zero_points_odd_blocks,
            requantize_experts: None,
            no_gather_block_quantized: None,
            no_gathered_bytes: None,
            embeddings_asked: req.embeddings.is_some(),
            embedding_gather_dequantize_linear: plan.embedding_gather_dequantize_linear,
            no_unsigned_dq: [None, None],
        })
    }

    /// The settings of `role` as QMoE expert stacks take them, or why they cannot be: HQQ's
    /// float zero points have no QMoE form (its zero points are packed integers).
    fn hqq_experts(&self) -> Option<String> {
        (self.method == Method::Hqq).then(|| "--quant-method hqq: com.microsoft.QMoE takes packed integer zero points only, and HQQ's are floats; the expert stacks stay float (use --quant-method rtn to quantize them)".to_string())
    }

    /// `--quant-embeddings` against the table's forms: the DequantizeLinear format gathers a
    /// quantized table's rows with ONNX `Gather` where the table says so
    /// (`embedding_gather_dequantize_linear`; 4-bit rows as bytes, decoded with standard ops:
    /// rewrite.rs `gather_rows_decoded`). The MatMulNBits format takes every table: with
    /// GatherBlockQuantized where it can, else from the head's parts with standard ops
    /// (rewrite.rs `gather_dequantized`).
    pub(crate) fn check_embeddings(&self, table: &str) -> Result<()> {
        let Some(bits) = self.embeddings else { return Ok(()) };
        let refuse = |why: String| Err(Error::Request(format!("--quant-embeddings {bits}: {why}")));
        match self.format {
            QuantFormat::DequantizeLinear if !self.embedding_gather_dequantize_linear => refuse(format!(
                "the {table} EP keeps embeddings float ({}: embedding_gather_dequantize_linear is not set, so a table's rows are not gathered as DequantizeLinear data there); use --quant-embeddings none",
                self.table
            )),
            _ => Ok(()),
        }
    }

    /// The settings for a tensor of `role`, or `None` when it stays float.
    fn settings(&self, role: Role) -> Option<QuantSettings> {
        let bits = match role {
            Role::Linear | Role::Experts => self.linear,
            Role::LmHead => self.lm_head,
            Role::Embedding => self.embeddings,
        }?;
        let s = QuantSettings::new(to_bits(bits), self.block_size, self.symmetric).expect("checked by resolve");
        Some(s.with_method(self.method))
    }

    /// The first `--quant-exclude` pattern that matches one of the checkpoint tensor names
    /// `weight` is read from ([`checkpoint_names`]), with that name.
    fn exclusion(&self, graph: &Graph, weight: &str) -> Option<Exclusion> {
        let names = checkpoint_names(graph, weight);
        self.exclude.iter().find_map(|p| names.iter().find(|n| p.matches(n)).map(|n| Exclusion { pattern: p.as_str().to_string(), name: n.clone(), names: names.clone() }))
    }
}

/// A weight `--quant-exclude` keeps float: the pattern, the checkpoint tensor it matched, and
/// every checkpoint tensor of the weight (more than one for a packed weight).
struct Exclusion {
    pattern: String,
    name: String,
    names: Vec<String>,
}

impl Exclusion {
    /// The kept-float reason. A packed weight (q, k and v concatenated by `fuse.pack_qkv`) is
    /// one MatMul with one quantized weight, so excluding one of its tensors keeps all of them
    /// float, and the reason says so.
    fn why(&self, graph: &Graph, node: &str) -> String {
        let head = format!("matches --quant-exclude `{}` (checkpoint tensor `{}`)", self.pattern, self.name);
        if self.names.len() < 2 {
            return head;
        }
        let others: Vec<String> = self.names.iter().filter(|n| **n != self.name).map(|n| format!("`{n}`")).collect();
        let by = graph.nodes.iter().find(|n| n.name == node).and_then(|n| n.metadata.get("rule")).map(|r| format!(" by {r}")).unwrap_or_default();
        format!(
            "{head}; it was packed with {}{by} into this one weight, which is quantized whole or not at all, so all of it stays float",
            others.join(", ")
        )
    }
}

/// The checkpoint tensor names an initializer is read from: its recipe's sources (a packed
/// QKV weight: q, k and v; an expert stack: every expert's tensors), or its own name for a
/// computed one. `--quant-exclude` matches these, so a pattern keeps naming the checkpoint's
/// tensors after a rule renamed or packed them.
pub(crate) fn checkpoint_names(graph: &Graph, weight: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for s in graph.initializer(weight).map(|r| r.sources()).unwrap_or_default() {
        if !names.contains(&s.name) {
            names.push(s.name.clone());
        }
    }
    if names.is_empty() {
        names.push(weight.to_string());
    }
    names
}

/// Fails on a `--quant-exclude` pattern that matches none of `weights`' checkpoint tensor
/// names (every weight the step looks at, whether it quantizes it or not): a typo would
/// otherwise quantize what the user meant to keep, silently. The message lists the names
/// there are, layer numbers folded into `*`.
fn check_exclusions(graph: &Graph, step: &QuantStep, weights: &[String]) -> Result<()> {
    let names: Vec<String> = weights.iter().flat_map(|w| checkpoint_names(graph, w)).collect();
    let Some(unused) = step.exclude.iter().find(|p| !names.iter().any(|n| p.matches(n))) else { return Ok(()) };
    let mut shapes: Vec<String> = Vec::new();
    for n in &names {
        let folded = fold_numbers(n);
        if !shapes.contains(&folded) {
            shapes.push(folded);
        }
    }
    const SHOWN: usize = 16;
    let more = if shapes.len() > SHOWN { format!(" and {} more", shapes.len() - SHOWN) } else { String::new() };
    shapes.truncate(SHOWN);
    Err(Error::Request(format!(
        "--quant-exclude `{}` matches no weight the quantize step takes; patterns are matched against the checkpoint's tensor names, which are: {}{more} (the head and the embedding table also have --quant-lm-head and --quant-embeddings)",
        unused.as_str(),
        shapes.join(", ")
    )))
}

/// `name` with every all-digit dot-separated part (a layer or expert index) replaced by `*`.
fn fold_numbers(name: &str) -> String {
    name.split('.').map(|part| if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) { "*" } else { part }).collect::<Vec<_>>().join(".")
}

fn to_bits(b: QuantBits) -> Bits {
    match b {
        QuantBits::Int4 => Bits::Int4,
        QuantBits::Int8 => Bits::Int8,
    }
}

/// One quantized weight, for the build report; its error is read after the write.
#[derive(Clone, Debug)]
pub struct QuantizedTensor {
    pub weight: String,
    pub role: Role,
    /// The nodes that read it (a tied table: the head and the embedding).
    pub ops: Vec<String>,
    pub group: Arc<QuantGroup>,
}

/// What the step did.
#[derive(Clone, Debug, Default)]
pub struct QuantOutcome {
    pub tensors: Vec<QuantizedTensor>,
    /// Weights left float, with why (an exclusion pattern, `--quant-lm-head none`, ...).
    pub kept_float: Vec<(String, String)>,
    /// Expert stacks among them that no request kept float: the table or the sizes did
    /// (an unfused MoE block, no QMoE kernel, a block size not dividing the sizes).
    pub float_experts: usize,
    /// Pre-quantized tensors no quantized node reads (expert stacks, say): written as their
    /// exact float dequantization, larger than the checkpoint (import.rs warns).
    pub dequantized: Vec<String>,
    /// 8-bit QMoE nodes of a build whose accuracy level is not 4: ONNX Runtime 1.32's CPU
    /// kernel quantizes their activations to int8 whatever the level says (a note says so).
    pub int8_activation_experts: Vec<String>,
    /// Pre-quantized expert stacks quantized again (`--requantize-experts`): the stack and the
    /// checkpoint types it was read from (`gguf:Q4_K`), which the report gives as its source.
    pub requantized: Vec<(String, String)>,
}

/// A quantized tensor as build_report.json records it (after the write, with its error).
#[derive(Clone, Debug, Serialize)]
pub struct TensorReport {
    pub weight: String,
    pub role: &'static str,
    pub ops: Vec<String>,
    /// [N, K]: output features (or table rows) by the reduced dimension.
    pub shape: [usize; 2],
    pub bits: usize,
    pub block_size: usize,
    pub symmetric: bool,
    /// How the zero points are written: `none` (symmetric), `integers` (the format's zero
    /// point input), or `offsets` (float zero points, HQQ and GGUF types with a min, or integer
    /// ones on a table whose DequantizeLinear takes no unsigned data: codes against the mid
    /// point, per-block offsets added after the MatMul).
    pub zero_points: &'static str,
    pub method: String,
    /// What the written integers come from: `float` (quantized here), the checkpoint's packed
    /// format (`gptq`, `gptq_v2`, `awq_gemm`, `gguf:Q4_0`, `mxfp4`), imported unchanged, or
    /// `requantized from gguf:Q4_K` (`--requantize-experts`: quantized here from those).
    pub source: String,
    pub max_abs_error: f32,
    pub rms_error: f64,
}

impl QuantOutcome {
    /// The per-tensor report, once the package is written (errors are accumulated then).
    pub fn report(&self) -> Vec<TensorReport> {
        self.tensors
            .iter()
            .map(|t| {
                let s = t.group.settings();
                let e = t.group.error();
                TensorReport {
                    weight: t.weight.clone(),
                    role: t.role.name(),
                    ops: t.ops.clone(),
                    shape: [t.group.n(), t.group.k()],
                    bits: s.bits().count(),
                    block_size: s.block_size(),
                    symmetric: s.symmetric(),
                    zero_points: if t.group.float_zeros() {
                        "offsets"
                    } else if t.group.has(ir::QuantPart::ZeroPoints) {
                        "integers"
                    } else {
                        "none"
                    },
                    method: match t.group.packed_source() {
                        Some(_) => "imported".to_string(),
                        None => format!("{:?}", s.method()).to_lowercase(),
                    },
                    source: match (t.group.packed_source(), self.requantized.iter().find(|(w, _)| *w == t.weight)) {
                        (None, Some((_, from))) => format!("{}{from}", import::REQUANTIZED),
                        (Some(p), _) => source_names(p.layers().map(|l| &**l)).join("+"),
                        (None, None) => "float".to_string(),
                    },
                    max_abs_error: e.max_abs,
                    rms_error: e.rms(),
                }
            })
            .collect()
    }
}

/// The checkpoint types of pre-quantized layers for reports (`gguf:Q4_K`, `gptq`), each once,
/// in order of first appearance.
fn source_names<'a>(layers: impl IntoIterator<Item = &'a ir::PackedWeight>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for l in layers {
        let name = match (l.format(), l.ggml_type()) {
            (ir::PackedFormat::Gguf, Some(t)) => format!("gguf:{t}"),
            _ => l.format().name().to_string(),
        };
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Quantizes every selected weight of `graph` in place.
pub fn run(graph: &mut Graph, step: &QuantStep) -> Result<QuantOutcome> {
    let candidates = select::candidates(graph);
    // The head is found by the name models give its nodes; a graph without one would apply the
    // linear setting to its head unnoticed, so that is an error, not a fallback. An import
    // without --quant-lm-head (an encoder's pre-quantized file has no head) applies no setting
    // to one.
    let sets_roles = step.source.is_none() || step.lm_head.is_some();
    if sets_roles && !candidates.iter().any(|c| c.role == Role::LmHead) {
        return Err(Error::Pipeline(format!(
            "quantize: no MatMul named `lm_head/...` reads a constant weight, so --quant-lm-head cannot be applied ({}); the model's head must be named after its module",
            step.table
        )));
    }
    let mut looked_at: Vec<String> = candidates.iter().map(|c| c.weight.clone()).collect();
    looked_at.extend(experts::candidates(graph).into_iter().flat_map(|c| [c.fc1, c.fc2]));
    looked_at.extend(experts::dense_stacks(graph));
    check_exclusions(graph, step, &looked_at)?;
    let mut outcome = QuantOutcome::default();
    let mut plan = Vec::new();
    for c in candidates {
        // A pre-quantized weight is written with its own integers, whatever the roles say.
        let packed = graph.initializer(&c.weight).is_some_and(ir::Recipe::has_packed);
        if packed {
            if let (Some(source), Some(_)) = (&step.source, step.settings(c.role)) {
                return Err(Error::Request(format!(
                    "--quant-{}: `{}` is already quantized in the checkpoint ({}); it is imported with its own integers, so drop the flag",
                    c.role.flag(),
                    c.weight,
                    source.summary()
                )));
            }
            if let Some(why) = unwritable_packed(graph, step, &c) {
                outcome.kept_float.push((c.weight.clone(), why));
                continue;
            }
            plan.push((c, None));
            continue;
        }
        let Some(settings) = step.settings(c.role) else {
            let why = match (&step.source, c.role) {
                (Some(_), Role::Linear) => "float in the pre-quantized checkpoint: it stays float".to_string(),
                (Some(_), _) => format!("float in the pre-quantized checkpoint: it stays float unless --quant-{} int4|int8 asks", c.role.flag()),
                (None, _) => format!("{} stays float (--quant-{} none)", c.role.name(), c.role.flag()),
            };
            outcome.kept_float.push((c.weight.clone(), why));
            continue;
        };
        if let Some(x) = step.exclusion(graph, &c.weight) {
            outcome.kept_float.push((c.weight.clone(), x.why(graph, &c.node)));
            continue;
        }
        if let Some(why) = unreadable_table(graph, step, &c, &settings) {
            // The table's default chose these bits: the table stays float. Asked for: refused.
            if step.embeddings_asked {
                return Err(Error::Request(format!("--quant-embeddings: embedding `{}`: {why}; or use --quant-embeddings none", c.weight)));
            }
            outcome.kept_float.push((c.weight.clone(), format!("{why}: it stays float")));
            continue;
        }
        plan.push((c, Some(settings)));
    }
    rewrite::apply(graph, step, plan, &mut outcome)?;
    experts::apply(graph, step, &mut outcome)?;
    for stack in experts::dense_stacks(graph) {
        let why = format!("expert stack of an unfused MoE block: {} has no quantized form of a batched MatMul (only QMoE, where the table fuses com.microsoft.MoE, quantizes experts)", step.table);
        outcome.kept_float.push((stack, why));
        outcome.float_experts += 1;
    }
    Ok(outcome)
}

/// Why no form of the MatMulNBits format can read embedding `c` quantized with `settings`
/// ([`table_gather`]).
fn unreadable_table(graph: &Graph, step: &QuantStep, c: &select::Candidate, settings: &QuantSettings) -> Option<String> {
    if c.role != Role::Embedding || step.format != QuantFormat::MatmulNbits {
        return None;
    }
    let k = *graph.initializer(&c.weight)?.shape().last()?;
    table_gather(step, settings, k, settings.method() == Method::Hqq).err()
}

/// Why a pre-quantized weight cannot keep its integers on this table, so it is written as its
/// exact float dequantization (import.rs warns): a width the table has no section for, GGUF
/// tensors of several widths stacked into one weight, and for an embedding table in the
/// DequantizeLinear format: a table that does not gather DequantizeLinear rows or has
/// act-order rows. Float zero points (a GGUF type with a min) are otherwise kept in the offset
/// form (rewrite.rs `block_offsets`). An embedding table keeps its integers where a form of
/// [`table_gather`] reads it (a table with a min: GatherBlockQuantized of its symmetric codes
/// plus the rows' offsets; dml: the bytes decoded with standard ops), else it is its exact
/// dequantization; in the DequantizeLinear format its rows are read from the head's parts
/// (`rewrite::gather_rows_decoded`, which also reads 4-bit tables).
fn unwritable_packed(graph: &Graph, step: &QuantStep, c: &select::Candidate) -> Option<String> {
    let recipe = graph.initializer(&c.weight)?;
    let mut layers: Vec<Arc<ir::PackedWeight>> = Vec::new();
    fn walk(r: &ir::Recipe, out: &mut Vec<Arc<ir::PackedWeight>>) {
        match r {
            ir::Recipe::Packed(p) => out.push(Arc::clone(p)),
            ir::Recipe::Transpose { input, .. } | ir::Recipe::Slice { input, .. } | ir::Recipe::Cast { input, .. } | ir::Recipe::Reshape { input, .. } | ir::Recipe::Offset { input, .. } => walk(input, out),
            ir::Recipe::Concat { inputs, .. } | ir::Recipe::Interleave { inputs, .. } => inputs.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    walk(recipe, &mut layers);
    if step.source.as_ref().is_some_and(|s| matches!(s.format, ir::PackedFormat::Gguf | ir::PackedFormat::Mxfp4)) {
        if let Some(p) = layers.iter().find(|p| !step.packed_bits.contains(&p.bits().count())) {
            return Some(format!("{} is {}-bit, and {} has no [quant.int{}] section: written as the exact float dequantization", p.source_type(), p.bits().count(), step.table, p.bits().count()));
        }
        let mut bits: Vec<usize> = layers.iter().map(|p| p.bits().count()).collect();
        bits.dedup();
        if bits.len() > 1 {
            return Some(format!("it stacks GGUF tensors of {bits:?} bits into one weight, which one MatMulNBits cannot hold: written as the exact float dequantization"));
        }
    }
    if let (Role::Embedding, QuantFormat::MatmulNbits) = (c.role, step.format) {
        // The settings the rewrite's group takes (`PackedStack::settings`: its block is the
        // largest power of two dividing the layers' groups), so planning and rewrite agree; a
        // stack that cannot be made fails the rewrite with its own error.
        let stack = ir::PackedStack::from_recipe(&c.weight, recipe)?.ok()?;
        if let Err(why) = table_gather(step, &stack.settings(), stack.k(), stack.float_zeros()) {
            return Some(format!("pre-quantized embedding table: {why} (exact dequantization)"));
        }
    }
    if c.role == Role::Embedding && step.format == QuantFormat::DequantizeLinear {
        if !step.embedding_gather_dequantize_linear {
            return Some(format!("pre-quantized embedding table: {} does not set embedding_gather_dequantize_linear, so its rows are not gathered as DequantizeLinear data (exact dequantization)", step.table));
        }
        if layers.iter().any(|p| p.order().is_some()) {
            return Some("pre-quantized embedding table with act-order rows, which cannot be gathered (exact dequantization)".into());
        }
    }
    None
}

/// After the pipeline: every weight the step quantized is still read in its quantized form,
/// and no MatMul or Gather the step should have quantized is left with a float constant.
pub fn validate(graph: &Graph, step: &QuantStep, outcome: &QuantOutcome) -> Vec<String> {
    let mut problems = Vec::new();
    let quantized: std::collections::HashSet<&str> = outcome.tensors.iter().map(|t| t.weight.as_str()).collect();
    for c in select::candidates(graph) {
        if graph.initializer(&c.weight).is_some_and(ir::Recipe::has_packed) && unwritable_packed(graph, step, &c).is_none() {
            problems.push(format!(
                "{} `{}` (node `{}`) is pre-quantized in the checkpoint but is read as float after the pipeline: its integers would be lost",
                c.role.name(),
                c.weight,
                c.node
            ));
            continue;
        }
        let table_kept = step.settings(c.role).is_some_and(|s| unreadable_table(graph, step, &c, &s).is_some());
        if step.settings(c.role).is_some() && step.exclusion(graph, &c.weight).is_none() && !table_kept && !quantized.contains(c.weight.as_str()) {
            problems.push(format!(
                "{} `{}` (node `{}`) was selected for quantization ({}) but is still float after the pipeline",
                c.role.name(),
                c.weight,
                c.node,
                step.table
            ));
        }
    }
    problems.extend(experts::validate(graph, outcome));
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use ir::{Node, Recipe};

    /// x -> MatMul(W1) -> MatMul(lm_head W2) -> logits, weights [K, N] initializers.
    fn graph() -> Graph {
        let mut g = Graph { name: "g".into(), ..Default::default() };
        g.inputs.push(ir::ValueInfo::new("x", ir::DType::F32, vec![ir::Dim::Fixed(1), ir::Dim::Fixed(32)]));
        g.outputs.push(ir::ValueInfo::new("logits", ir::DType::F32, vec![ir::Dim::Fixed(1), ir::Dim::Fixed(16)]));
        let w = |n: usize| Recipe::from_f32("w", vec![32, n], &(0..32 * n).map(|i| (i % 7) as f32 - 3.0).collect::<Vec<_>>());
        g.initializers.push(("w1".into(), w(32)));
        g.initializers.push(("head".into(), w(16)));
        g.nodes.push(Node::new("layer/MatMul", "MatMul", &["x", "w1"], &["h"]));
        g.nodes.push(Node::new("lm_head/MatMul", "MatMul", &["h", "head"], &["logits"]));
        g
    }

    fn step(lm_head: QuantChoice) -> QuantStep {
        let plan = QuantPlan {
            bits: QuantBits::Int4,
            format: QuantFormat::MatmulNbits,
            dtype: ir::DType::F32,
            accuracy_level: 0,
            lm_head,
            embeddings: QuantChoice::None,
            embedding_int4_zero_points_odd_blocks: true,
            embedding_gather_dequantize_linear: false,
            why: "test".into(),
            span: None,
        };
        QuantStep::resolve(&QuantRequest::new(QuantBits::Int4), &plan, "test", DType::F32).unwrap()
    }

    #[test]
    fn selected_weights_are_quantized_and_a_float_one_left_behind_is_named() {
        let mut g = graph();
        let s = step(QuantChoice::Int8);
        let outcome = run(&mut g, &s).unwrap();
        assert!(g.nodes.iter().all(|n| n.op == "MatMulNBits"), "{:?}", g.nodes);
        let bits: Vec<usize> = outcome.tensors.iter().map(|t| t.group.settings().bits().count()).collect();
        assert_eq!(bits, vec![4, 8], "linear int4, head int8 as --quant-lm-head says");
        assert!(validate(&g, &s, &outcome).is_empty());
        // A later stage that brought a float MatMul back on a selected weight fails validation.
        g.initializers.push(("w3".into(), Recipe::from_f32("w3", vec![32, 32], &[0.5; 32 * 32])));
        g.nodes.push(Node::new("late/MatMul", "MatMul", &["x", "w3"], &["y"]));
        let problems = validate(&g, &s, &outcome);
        assert!(problems.len() == 1 && problems[0].contains("`w3`") && problems[0].contains("late/MatMul"), "{problems:?}");
    }

    #[test]
    fn the_head_setting_and_exclusions_keep_weights_float() {
        let mut g = graph();
        let mut s = step(QuantChoice::None);
        s.exclude.push(glob::Pattern::new("w*").unwrap());
        let outcome = run(&mut g, &s).unwrap();
        assert!(outcome.tensors.is_empty() && g.nodes.iter().all(|n| n.op == "MatMul"));
        let why: Vec<&str> = outcome.kept_float.iter().map(|(_, w)| w.as_str()).collect();
        assert_eq!(why, vec!["matches --quant-exclude `w*` (checkpoint tensor `w1`)", "lm_head stays float (--quant-lm-head none)"]);
        assert!(validate(&g, &s, &outcome).is_empty(), "kept-float weights are not misses");
    }

    #[test]
    fn a_pattern_that_matches_no_weight_is_an_error_listing_the_names() {
        let mut g = graph();
        for (i, name) in ["layers.0.q.weight", "layers.1.q.weight"].into_iter().enumerate() {
            g.initializers.push((name.into(), Recipe::from_f32(name, vec![32, 32], &[0.5; 32 * 32])));
            g.nodes.push(Node::new(format!("l{i}/MatMul"), "MatMul", &["x", name], &[&format!("y{i}")]));
        }
        let mut s = step(QuantChoice::Int4);
        s.exclude = vec![glob::Pattern::new("w1").unwrap(), glob::Pattern::new("*.k.weight").unwrap()];
        let e = run(&mut g.clone(), &s).unwrap_err().to_string();
        assert!(e.contains("--quant-exclude `*.k.weight` matches no weight"), "{e}");
        assert!(e.contains("w1, head, layers.*.q.weight (the head"), "names once, layer numbers folded: {e}");
        s.exclude.pop();
        assert!(run(&mut g, &s).is_ok(), "a pattern naming a weight is fine");
    }

    #[test]
    fn a_graph_without_a_named_head_is_an_error() {
        let mut g = graph();
        g.nodes[1].name = "output/MatMul".into();
        let e = run(&mut g, &step(QuantChoice::Int4)).unwrap_err().to_string();
        assert!(e.contains("lm_head/"), "{e}");
    }
}
