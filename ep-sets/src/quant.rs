//! What a table says about weight-only quantization: one `[quant.int4]` / `[quant.int8]`
//! section per bit width the EP runs, giving the form the quantize step writes, the activation
//! dtype, the accuracy level and which tensors are quantized by default. A build with `--quant`
//! reads these; a flag given on the command line overrides the table's default.

use std::ops::Range;

use serde::Deserialize;

/// Bits per quantized weight, as tables and the CLI spell them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuantBits {
    Int4,
    Int8,
}

impl QuantBits {
    pub const ALL: [QuantBits; 2] = [QuantBits::Int4, QuantBits::Int8];

    pub fn name(self) -> &'static str {
        match self {
            QuantBits::Int4 => "int4",
            QuantBits::Int8 => "int8",
        }
    }

    pub fn parse(name: &str) -> Option<QuantBits> {
        QuantBits::ALL.into_iter().find(|b| b.name() == name)
    }

    /// 4 or 8.
    pub fn count(self) -> usize {
        match self {
            QuantBits::Int4 => 4,
            QuantBits::Int8 => 8,
        }
    }
}

impl std::fmt::Display for QuantBits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The operators the quantize step writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuantFormat {
    /// `com.microsoft.MatMulNBits` for MatMuls, `com.microsoft.GatherBlockQuantized` for
    /// embeddings.
    MatmulNbits,
    /// Standard ONNX only: blocked `DequantizeLinear` (opset 21+) feeding the float `MatMul` or
    /// `Gather`.
    DequantizeLinear,
}

impl QuantFormat {
    pub fn name(self) -> &'static str {
        match self {
            QuantFormat::MatmulNbits => "matmul_nbits",
            QuantFormat::DequantizeLinear => "dequantize_linear",
        }
    }
}

/// A per-tensor-kind default: quantize with these bits, or keep float.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuantChoice {
    Int4,
    Int8,
    None,
}

impl QuantChoice {
    pub fn name(self) -> &'static str {
        match self {
            QuantChoice::Int4 => "int4",
            QuantChoice::Int8 => "int8",
            QuantChoice::None => "none",
        }
    }

    pub fn parse(name: &str) -> Option<QuantChoice> {
        [QuantChoice::Int4, QuantChoice::Int8, QuantChoice::None].into_iter().find(|c| c.name() == name)
    }

    /// The bits, or `None` for float.
    pub fn bits(self) -> Option<QuantBits> {
        match self {
            QuantChoice::Int4 => Some(QuantBits::Int4),
            QuantChoice::Int8 => Some(QuantBits::Int8),
            QuantChoice::None => None,
        }
    }
}

/// One `[quant.<bits>]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantPlan {
    pub bits: QuantBits,
    pub format: QuantFormat,
    /// The activation dtype (`--dtype` default) of a quantized build; a `[role.decoder.*]` section of
    /// the table.
    pub dtype: crate::DType,
    /// MatMulNBits' `accuracy_level` (`--accuracy-level` default); 0 for the standard form.
    pub accuracy_level: i64,
    /// Default of `--quant-lm-head`.
    pub lm_head: QuantChoice,
    /// Default of `--quant-embeddings`.
    pub embeddings: QuantChoice,
    /// Whether the EP's GatherBlockQuantized takes 4-bit zero points (packed two per byte) on
    /// table rows of an odd number of blocks; `false`: such an asymmetric embedding is read
    /// with standard ops where the EP's Gather takes uint8 bytes, else it stays float (refused
    /// when `--quant-embeddings` asks for it).
    pub embedding_int4_zero_points_odd_blocks: bool,
    /// Whether a `dequantize_linear` table reads a quantized embedding from the head's
    /// `[K, V]` DequantizeLinear data: 8-bit as a Gather on axis 1, a blocked DequantizeLinear
    /// of the gathered rows and a Transpose (a runtime input to DequantizeLinear, which an EP
    /// that takes block quantization for constant weights only cannot run); 4-bit, or with
    /// float offsets, as Gathers of bytes decoded with plain ops (Div, Mod, Cast, Mul, Add),
    /// which no table without the flag has been checked to run. `false`: such a table's
    /// embeddings stay float.
    pub embedding_gather_dequantize_linear: bool,
    /// Why these defaults (shown by `--help`-level docs and the build report).
    pub why: String,
    pub span: Option<Range<usize>>,
}

/// The on-disk form of a `[quant.*]` section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawQuant {
    pub format: QuantFormat,
    pub dtype: String,
    #[serde(default)]
    pub accuracy_level: i64,
    pub lm_head: QuantChoice,
    pub embeddings: QuantChoice,
    #[serde(default = "yes")]
    pub embedding_int4_zero_points_odd_blocks: bool,
    #[serde(default)]
    pub embedding_gather_dequantize_linear: bool,
    #[serde(default)]
    pub why: Option<String>,
}

fn yes() -> bool {
    true
}
