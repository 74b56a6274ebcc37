//! Pre-quantized checkpoints (GPTQ, AWQ, GGUF, MXFP4): the quantize step without requantizing.
//!
//! The checkpoint's packed layers reach the graph as float weights ([`ir::Recipe::Packed`],
//! their exact dequantization), so every fusion sees ordinary MatMuls. The quantize step then
//! writes each one's own integers, scales and zero points in the table's form (MatMulNBits,
//! or DequantizeLinear + MatMul), with the block the checkpoint's groups give; act-order rows
//! are sorted by group and the activation gathered in that order (rewrite.rs).
//!
//! Which settings apply:
//! * the form, and the default `accuracy_level`, come from the table's `[quant.int<bits>]`
//!   section for the checkpoint's bits (a table without it cannot run them: refused);
//! * layers that are float in the checkpoint stay float, the lm_head and the embeddings
//!   included, unless `--quant-lm-head` / `--quant-embeddings` ask (RTN from their float);
//! * `--quant` itself is refused: it would requantize what the checkpoint already quantized;
//! * pre-quantized expert stacks become `com.microsoft.QMoE` with their integers where the
//!   table fuses MoE and runs QMoE, and QMoE can hold their form (experts.rs); otherwise they
//!   are their exact float dequantization, with a warning.

use ep_sets::{EpTable, QuantBits};
use ir::DType;
use serde_json::json;

use super::{QuantRequest, QuantStep};
use crate::{Error, Result};

/// The quantize step of a build: `--quant` on a float checkpoint, the import of a
/// pre-quantized one (with the float roles the flags name), or none.
pub fn resolve(req: Option<&QuantRequest>, source: Option<&models::QuantSource>, table: &EpTable, dtype: DType) -> Result<Option<QuantStep>> {
    let Some(source) = source else {
        let Some(req) = req else { return Ok(None) };
        if let Some(b) = req.requantize_experts {
            return Err(Error::Request(format!(
                "--requantize-experts {b}: the checkpoint is float, so there is nothing to requantize; --quant int4|int8 quantizes its experts (QMoE where the table fuses them)"
            )));
        }
        let Some(bits) = req.bits else {
            return Err(Error::Request(
                "--quant-lm-head, --quant-embeddings and --accuracy-level without --quant apply to a pre-quantized checkpoint's float layers; this checkpoint is float: add --quant int4 or int8".into(),
            ));
        };
        return float_step(req, bits, table, dtype).map(Some);
    };
    if let Some(bits) = req.and_then(|r| r.bits) {
        return Err(Error::Request(format!(
            "--quant {bits}: the checkpoint is already quantized ({}); its integers are imported as they are, and --quant would requantize them. \
             Drop --quant; --quant-lm-head / --quant-embeddings quantize the layers it keeps float",
            source.summary()
        )));
    }
    let mut bits = match source.bits.count() {
        4 => QuantBits::Int4,
        _ => QuantBits::Int8,
    };
    // MXFP4 packs experts only, and a table without their 8-bit section writes them as their
    // exact float dequantization like any experts it cannot hold (quantize::unwritable_packed
    // says so); its other section still quantizes the float roles the flags name.
    if source.format == ir::PackedFormat::Mxfp4 && table.quant(bits).is_none() && table.quant(QuantBits::Int4).is_some() {
        bits = QuantBits::Int4;
    }
    let Some(plan) = table.quant(bits) else {
        return Err(Error::Request(format!(
            "the checkpoint is {} and the {} table (ep-sets/tables/{}.toml) has no [quant.{bits}] section, so it cannot run {}-bit weights; it offers {}",
            source.summary(),
            table.name,
            table.name,
            source.bits.count(),
            offered(table)
        )));
    };
    let defaults = QuantRequest { bits: None, ..QuantRequest::new(bits) };
    let req = req.unwrap_or(&defaults);
    let mut step = QuantStep::common(req, plan, &table.name, dtype)?;
    // A GGUF file mixes bit widths: tensors of a width the table has no section for are
    // written as their exact float dequantization (quantize::unwritable_packed says so).
    step.packed_bits = source.bit_widths.iter().map(|b| b.count()).filter(|&b| table.quant(if b == 4 { QuantBits::Int4 } else { QuantBits::Int8 }).is_some()).collect();
    step.lm_head = req.lm_head.and_then(|c| c.bits());
    step.embeddings = req.embeddings.and_then(|c| c.bits());
    step.no_gather_block_quantized = no_gather_block_quantized(table);
    step.no_gathered_bytes = no_gathered_bytes(table);
    step.no_unsigned_dq = no_unsigned_dq(table);
    step.check_embeddings(&table.name)?;
    step.source = Some(source.clone());
    // Pre-quantized experts become QMoE where the table runs it (experts.rs).
    step.no_qmoe = no_qmoe(table, dtype);
    step.requantize_experts = req.requantize_experts;
    Ok(Some(step))
}

/// Records every initializer still reading a pre-quantized layer as float after the step
/// (only MatMul weights are imported: an expert stack of packed experts, for one), with why.
pub(crate) fn note_dequantized(graph: &ir::Graph, outcome: &mut super::QuantOutcome) {
    // Initializers no node reads are not written (a weight a fusion replaced, say).
    let read: std::collections::HashSet<&str> = graph.nodes.iter().flat_map(|n| n.inputs.iter().map(String::as_str)).collect();
    for (name, recipe) in graph.initializers.iter().filter(|(n, _)| read.contains(n.as_str())) {
        if recipe.has_packed() {
            outcome.dequantized.push(name.clone());
            if outcome.kept_float.iter().any(|(n, _)| n == name) {
                continue;
            }
            outcome.kept_float.push((
                name.clone(),
                "pre-quantized in the checkpoint, but no MatMul reads it as a 2-D weight (an expert stack, say): written as its exact float dequantization".into(),
            ));
        }
    }
}

/// The note of a build whose 8-bit experts (QMoE) take int8 activations although the
/// accuracy level asks for float ones (tests/python/test_qmoe_facts.py: ORT 1.32's CPU QMoE has
/// no float-activation path for 8-bit weights; about 1e-2 relative, as accuracy level 4).
pub fn int8_experts_note(pipeline: &crate::pipeline::PipelineReport) -> Option<String> {
    let q = pipeline.quant.as_ref()?;
    (!q.int8_activation_experts.is_empty()).then(|| {
        format!(
            "{} 8-bit QMoE node(s) ({}) run with int8 activations whatever the accuracy level says: ONNX Runtime 1.32's CPU QMoE kernel has no float-activation path for 8-bit experts (about 1e-2 relative error, as accuracy level 4)",
            q.int8_activation_experts.len(),
            q.int8_activation_experts.iter().take(2).cloned().collect::<Vec<_>>().join(", ")
        )
    })
}

/// The note of a build that quantized pre-quantized experts again (`--requantize-experts`):
/// their integers are no longer the checkpoint's. A note, not a warning: the user asked for it
/// (and `--strict` would otherwise refuse every such build).
pub fn requantized_note(pipeline: &crate::pipeline::PipelineReport) -> Option<String> {
    let q = pipeline.quant.as_ref()?;
    (!q.requantized.is_empty()).then(|| {
        format!(
            "{} pre-quantized expert stack(s) were quantized again (--requantize-experts), not kept exact: {}; build_report.json gives each one's weight error",
            q.requantized.len(),
            q.requantized.iter().take(2).map(|(w, from)| format!("{w} ({from})")).collect::<Vec<_>>().join(", ")
        )
    })
}

/// The warning of a build that writes pre-quantized tensors as float.
pub fn dequantized_warning(pipeline: &crate::pipeline::PipelineReport) -> Option<String> {
    let q = pipeline.quant.as_ref()?;
    (!q.dequantized.is_empty()).then(|| {
        format!(
            "{} pre-quantized tensor(s) are written as their float dequantization (exact, but larger than the checkpoint): {}; build_report.json says why",
            q.dequantized.len(),
            q.dequantized.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
        )
    })
}

/// The `--quant` step of a float checkpoint against the table's `[quant.<bits>]` section.
fn float_step(req: &QuantRequest, bits: QuantBits, table: &EpTable, dtype: DType) -> Result<QuantStep> {
    let Some(plan) = table.quant(bits) else {
        return Err(Error::Request(format!(
            "--quant {bits}: the {} table (ep-sets/tables/{}.toml) has no [quant.{bits}] section; it offers {}",
            table.name,
            table.name,
            offered(table)
        )));
    };
    // HQQ's float zero points are written as offsets after the MatMul in either format
    // (rewrite.rs `block_offsets`), its codes against the mid point.
    let mut step = QuantStep::resolve(req, plan, &table.name, dtype)?;
    step.no_qmoe = no_qmoe(table, dtype);
    step.no_gather_block_quantized = no_gather_block_quantized(table);
    step.no_gathered_bytes = no_gathered_bytes(table);
    step.no_unsigned_dq = no_unsigned_dq(table);
    step.check_embeddings(&table.name)?;
    Ok(step)
}

/// Why `table`'s DequantizeLinear cannot take uint4 / uint8 data (`QuantStep::no_unsigned_dq`).
fn no_unsigned_dq(table: &EpTable) -> [Option<String>; 2] {
    [DType::U4, DType::U8].map(|data| {
        let types: std::collections::BTreeMap<String, DType> = [("T1".to_string(), data)].into();
        match table.claims("", "DequantizeLinear", ir::OPSET, &types) {
            ep_sets::Claim::Yes { .. } => None,
            ep_sets::Claim::No { reason } => Some(reason),
        }
    })
}

/// Why `table` cannot write a quantized embedding as `com.microsoft.GatherBlockQuantized`.
fn no_gather_block_quantized(table: &EpTable) -> Option<String> {
    table
        .kernels("com.microsoft", "GatherBlockQuantized")
        .is_empty()
        .then(|| format!("ep-sets/tables/{}.toml claims no com.microsoft.GatherBlockQuantized kernel", table.name))
}

/// Why `table` cannot gather a quantized table's rows as bytes with standard ops (rewrite.rs
/// `gather_dequantized`: a Gather of uint8 rows, a Cast of the bytes to int64 indices).
fn no_gathered_bytes(table: &EpTable) -> Option<String> {
    use std::collections::BTreeMap;
    let u8_to_i64: BTreeMap<String, DType> = [("T1".to_string(), DType::U8), ("T2".to_string(), DType::I64)].into();
    let u8_data: BTreeMap<String, DType> = [("T".to_string(), DType::U8)].into();
    [table.claims("", "Gather", ir::OPSET, &u8_data), table.claims("", "Cast", ir::OPSET, &u8_to_i64)].into_iter().find_map(|c| match c {
        ep_sets::Claim::Yes { .. } => None,
        ep_sets::Claim::No { reason } => Some(reason),
    })
}

/// Why fused MoE nodes cannot become QMoE on `table` in `dtype` (`None`: they can).
fn no_qmoe(table: &EpTable, dtype: DType) -> Option<String> {
    let qmoe = table.kernels("com.microsoft", "QMoE").iter().any(|k| k.types.get("T").is_some_and(|t| t.contains(&dtype.elem())));
    (!qmoe).then(|| format!("ep-sets/tables/{}.toml claims no com.microsoft.QMoE kernel for {dtype} activations", table.name))
}

fn offered(table: &EpTable) -> String {
    let offered: Vec<&str> = table.quant_plans().map(|q| q.bits.name()).collect();
    if offered.is_empty() {
        "no quantization".to_string()
    } else {
        offered.join(", ")
    }
}

/// How a report's tensor `source` begins for stacks `--requantize-experts` quantized again.
pub const REQUANTIZED: &str = "requantized from ";

/// build_report.json's `quantization` entry of an import: what the checkpoint stores
/// (`source`), the form and block it is written in, the float roles quantized on request (with
/// their RTN settings), what stayed float, and every tensor with its source.
pub fn quantization_json(source: &models::QuantSource, step: &QuantStep, kept_float: Vec<serde_json::Value>, tensors: &[super::TensorReport]) -> serde_json::Value {
    let imported: Vec<&super::TensorReport> = tensors.iter().filter(|t| t.source != "float" && !t.source.starts_with(REQUANTIZED)).collect();
    let requantized = tensors.iter().find(|t| t.source.starts_with(REQUANTIZED)).map(|t| json!({"bits": t.bits, "block_size": t.block_size, "symmetric": t.symmetric, "method": t.method}));
    let mut blocks: Vec<usize> = imported.iter().map(|t| t.block_size).collect();
    blocks.sort_unstable();
    blocks.dedup();
    let float_roles = (step.lm_head.is_some() || step.embeddings.is_some()).then(|| {
        json!({
            "block_size": step.block_size,
            "symmetric": step.symmetric,
            "method": format!("{:?}", step.method).to_lowercase(),
        })
    });
    json!({
        "bits": source.bits.count(),
        "source": source_json(source),
        "format": step.format.name(),
        "block_size": if blocks.len() == 1 { json!(blocks[0]) } else { json!(blocks) },
        "symmetric": source.symmetric,
        "method": "imported",
        "accuracy_level": step.accuracy_level,
        "lm_head": step.lm_head.map_or("none", |b| b.name()),
        "embeddings": step.embeddings.map_or("none", |b| b.name()),
        "float_roles": float_roles,
        "requantized_experts": requantized,
        "imported_tensors": imported.len(),
        "kept_float": kept_float,
        "tensors": tensors,
    })
}

/// build_report.json's `quantization.source`: what the checkpoint stores.
pub fn source_json(source: &models::QuantSource) -> serde_json::Value {
    if source.format == ir::PackedFormat::Gguf {
        let types: serde_json::Map<String, serde_json::Value> = source.types.iter().map(|(t, n)| (t.clone(), json!(n))).collect();
        return json!({
            "format": "gguf",
            "file": source.origin,
            "tensor_types": types,
            "bits": source.bit_widths.iter().map(|b| b.count()).collect::<Vec<_>>(),
            "summary": source.summary(),
        });
    }
    if source.format == ir::PackedFormat::Mxfp4 {
        return json!({
            "format": "mxfp4",
            "bits": source.bits.count(),
            "group_size": source.group_size,
            "symmetric": source.symmetric,
            "from": source.origin,
            "summary": source.summary(),
        });
    }
    json!({
        "format": source.format.name(),
        "bits": source.bits.count(),
        "group_size": source.group_size,
        "symmetric": source.symmetric,
        "desc_act": source.desc_act,
        "lm_head": source.lm_head,
        "from": source.origin,
        "summary": source.summary(),
    })
}
