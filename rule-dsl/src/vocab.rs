//! The fixed vocabularies a `.rule` file is checked against: domains and their operators,
//! the functions a check may call and the native helpers an `emit` may call.

/// The ONNX default domain. `""` and `ai.onnx` name the same domain.
pub const ONNX: &str = ep_sets::Domain::ONNX;
pub const MICROSOFT: &str = "com.microsoft";

/// Operators of the default ONNX domain (opset 24), plus SimplifiedLayerNormalization, which
/// ONNX Runtime registers in the default domain (since opset 1) without it being standard.
pub const ONNX_OPS: &[&str] = &[
    "Abs", "Acos", "Acosh", "Add", "AffineGrid", "And", "ArgMax", "ArgMin", "Asin", "Asinh", "Atan", "Atanh",
    "Attention", "AveragePool", "BatchNormalization", "Bernoulli", "BitShift", "BitwiseAnd", "BitwiseNot",
    "BitwiseOr", "BitwiseXor", "BlackmanWindow", "Cast", "CastLike", "Ceil", "Celu", "CenterCropPad", "Clip",
    "Col2Im", "Compress", "Concat", "ConcatFromSequence", "Constant", "ConstantOfShape", "Conv", "ConvInteger",
    "ConvTranspose", "Cos", "Cosh", "CumSum", "DFT", "DeformConv", "DepthToSpace", "DequantizeLinear", "Det",
    "Div", "Dropout", "DynamicQuantizeLinear", "Einsum", "Elu", "Equal", "Erf", "Exp", "Expand", "EyeLike",
    "Flatten", "Floor", "GRU", "Gather", "GatherElements", "GatherND", "Gelu", "Gemm", "GlobalAveragePool",
    "GlobalLpPool", "GlobalMaxPool", "Greater", "GreaterOrEqual", "GridSample", "GroupNormalization",
    "HammingWindow", "HannWindow", "HardSigmoid", "HardSwish", "Hardmax", "Identity", "If", "ImageDecoder",
    "InstanceNormalization", "IsInf", "IsNaN", "LRN", "LSTM", "LayerNormalization", "LeakyRelu", "Less",
    "LessOrEqual", "Log", "LogSoftmax", "Loop", "LpNormalization", "LpPool", "MatMul", "MatMulInteger", "Max",
    "MaxPool", "MaxRoiPool", "MaxUnpool", "Mean", "MeanVarianceNormalization", "MelWeightMatrix", "Min", "Mish",
    "Mod", "Mul", "Multinomial", "Neg", "NegativeLogLikelihoodLoss", "NonMaxSuppression", "NonZero", "Not",
    "OneHot", "Optional", "OptionalGetElement", "OptionalHasElement", "Or", "PRelu", "Pad", "Pow", "QLinearConv",
    "QLinearMatMul", "QuantizeLinear", "RMSNormalization", "RNN", "RandomNormal", "RandomNormalLike",
    "RandomUniform", "RandomUniformLike", "Range", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum",
    "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
    "RegexFullMatch", "Relu", "Reshape", "Resize", "ReverseSequence", "RoiAlign", "RotaryEmbedding", "Round",
    "STFT", "Scan", "Scatter", "ScatterElements", "ScatterND", "Selu", "SequenceAt", "SequenceConstruct",
    "SequenceEmpty", "SequenceErase", "SequenceInsert", "SequenceLength", "SequenceMap", "Shape", "Shrink",
    "Sigmoid", "Sign", "SimplifiedLayerNormalization", "Sin", "Sinh", "Size", "Slice", "Softmax", "SoftmaxCrossEntropyLoss", "Softplus",
    "Softsign", "SpaceToDepth", "Split", "SplitToSequence", "Sqrt", "Squeeze", "StringConcat", "StringNormalizer",
    "StringSplit", "Sub", "Sum", "Swish", "Tan", "Tanh", "TensorScatter", "TfIdfVectorizer", "ThresholdedRelu",
    "Tile", "TopK", "Transpose", "Trilu", "Unique", "Unsqueeze", "Upsample", "Where", "Xor",
];

/// Operators of ONNX Runtime's `com.microsoft` domain that rules may match or emit.
pub const MICROSOFT_OPS: &[&str] = &[
    "Attention", "BiasAdd", "BiasGelu", "BiasSplitGelu", "DecoderMaskedMultiHeadAttention", "DequantizeLinear",
    "DynamicQuantizeMatMul", "EmbedLayerNormalization", "FastGelu", "FusedMatMul", "GatherBlockQuantized",
    "Gelu", "GemmFastGelu", "GroupQueryAttention", "MatMulNBits", "MoE", "MultiHeadAttention", "PackedAttention",
    "QuickGelu", "RotaryEmbedding", "SimplifiedLayerNormalization", "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization", "SparseAttention", "QuantizeLinear",
];

/// The operators a domain defines, or `None` for an unknown domain.
pub fn ops_of(domain: &str) -> Option<&'static [&'static str]> {
    match domain {
        ONNX | "" => Some(ONNX_OPS),
        MICROSOFT => Some(MICROSOFT_OPS),
        _ => None,
    }
}

/// Functions a check or message may call: name, number of arguments, what it returns.
pub const FUNCTIONS: &[(&str, usize, &str)] = &[
    ("shape", 1, "the value's shape, e.g. [batch, seq, 64]"),
    ("rank", 1, "the value's rank"),
    ("dim", 2, "dimension i of the value (negative i counts from the end); fails when symbolic"),
    ("dtype", 1, "the value's element type as a string, e.g. \"f32\""),
    ("is_graph_input", 1, "whether the value is an input of the graph being rewritten"),
    ("is_graph_output", 1, "whether the value is an output of the graph being rewritten"),
    ("is_initializer", 1, "whether the value is an initializer (a constant weight)"),
    ("producer", 1, "the operator producing the value, e.g. \"ai.onnx.MatMul\", or \"graph input\""),
    ("uses", 1, "how many nodes read the value"),
    ("name", 1, "the value's name"),
    ("const_int", 1, "the integer held by a one-element computed constant initializer"),
    ("const_float", 1, "the number held by a one-element float constant initializer (f32/f64/f16/bf16, or an f32 one cast)"),
    ("limit", 1, "a named bound from the EP table's limits, e.g. limit(\"max_context\"); fails when the table gives none"),
    ("limit_or", 2, "limit(name), or the integer default when the EP table gives none, e.g. limit_or(\"gqa_softcap\", 1): a kernel limit only some tables declare"),
    ("numel", 1, "the element count of a value whose shape is fully fixed"),
    (
        "stored_form",
        1,
        "how an initializer is stored: \"float\", or the bits, block and zero points of the pre-quantized layers it reads, e.g. \"4-bit, block 32, float zero points\" (\"mixed: ...\" when they differ)",
    ),
    (
        "stored_as",
        1,
        "what an initializer is stored as, for messages: \"float\", or each pre-quantized layer's type with its form, e.g. \"Q4_K (4-bit, block 32, float zero points)\"",
    ),
    ("branch_outputs", 1, "how many outputs a subgraph attribute (an If branch) has"),
    ("branch_dtype", 2, "the declared element type of output i of a subgraph attribute"),
    ("branch_shape", 2, "the declared shape of output i of a subgraph attribute"),
    ("branch_dtypes", 1, "the declared element types of every output of a subgraph attribute, as a list"),
    ("branch_shapes", 1, "the declared shapes of every output of a subgraph attribute, as a list"),
    ("len", 1, "how many items a list (a list capture, a computed list, a shape) has"),
    ("min", 1, "the smallest number of a non-empty list, e.g. min(rank(?ys))"),
    ("int", 1, "a whole number as an integer (2.0 gives 2, so a float constant can be an int attribute); fails on a fraction"),
    ("nested_graphs", 1, "how many nodes of a subgraph attribute carry subgraphs themselves"),
    ("fallible_nodes", 1, "names of a subgraph's nodes that can fail on data (Gather, Slice, Reshape, integer Div, ... reading non-constants)"),
];

/// Functions of a value (their first argument). Given a list capture (`..?ys`) instead, they
/// give the list of their results, one per value: `rank(?ys)` is `[3, 3]`.
pub const VALUE_FUNCTIONS: &[&str] = &[
    "shape", "rank", "dim", "dtype", "is_graph_input", "is_graph_output", "is_initializer", "producer", "uses", "name",
    "const_int", "const_float", "numel", "stored_form", "stored_as",
];

/// Output count of a helper that returns as many values as its input has (`inline_branch`).
pub const ANY: usize = usize::MAX;

/// Helpers whose inputs are subgraph attribute captures (`[then_branch: ?g]`), not values.
pub const GRAPH_HELPERS: &[&str] = &["inline_branch"];

/// Helpers whose last input is an integer list computed by a `let` (`let ?sizes = [..]`), an
/// attribute capture; their other inputs are values.
pub const LIST_HELPERS: &[&str] = &["slice_weight"];

/// The native helpers an `emit` block may call: name, inputs, outputs. The list is fixed; a
/// helper takes bound values and returns new values, and never decides whether a rule applies.
pub const HELPERS: &[(&str, usize, usize, &str)] = &[
    (
        "gqa_seqlens",
        1,
        2,
        "GroupQueryAttention's seqlens_k (int32 [batch] = sum(attention_mask, 1) - 1) and total_sequence_length (int32 scalar), built once per graph from the 2-D attention_mask",
    ),
    (
        "gqa_padding",
        3,
        3,
        "GroupQueryAttention's inputs for a batch padded on either side, from the 2-D attention_mask, the generic boolean attention mask and the query: seqlens_k (int32 [batch], the padded width - 1 for every row), total_sequence_length (int32 scalar), attention_bias (Where(mask, 0, -10000) in the query's float type); lengths once per graph, the bias once per mask",
    ),
    (
        "gqa_padded_lengths",
        1,
        2,
        "gqa_padding's seqlens_k (int32 [batch], the padded width - 1 for every row) and total_sequence_length (int32 scalar) alone, for a fusion whose attention bias is the generic graph's own float mask (ALiBi); once per graph, shared with gqa_padding",
    ),
    (
        "gqa_static_padding",
        3,
        3,
        "gqa_padding for the static KV cache: the generic boolean mask of N key columns cut to the attention_mask width (Slice on axis 3) before the bias is made, since GroupQueryAttention's attention_bias must be [batch, 1, seq, total_sequence_length]; the cut mask once per mask",
    ),
    (
        "gqa_static_bias",
        2,
        3,
        "gqa_static_padding for a float mask that is already the attention bias (ALiBi): seqlens_k and total_sequence_length of gqa_padded_lengths, and the mask of N key columns cut to the attention_mask width (Slice on axis 3); the cut once per mask",
    ),
    (
        "gqa_positions",
        2,
        1,
        "int64 [batch, seq] positions at the slot index in the padded row, Range(total - seq, total) from GroupQueryAttention's total_sequence_length and its 3-D query: the rotation the kernel applies without position_ids when seqlens_k is every row's width",
    ),
    (
        "concat_weights",
        3,
        1,
        "one initializer whose recipe concatenates three initializers' recipes on their last axis (packing Q, K, V weights)",
    ),
    (
        "interleave_rows",
        2,
        1,
        "one initializer whose recipe interleaves the rows (second-to-last axis) of two initializers of one shape: row 2r from the first, 2r+1 from the second (com.microsoft MoE's fused gate/up weight, streamed)",
    ),
    (
        "split_sizes",
        3,
        1,
        "an int64 [3] initializer holding the last dimension of each of three initializers (the Split sizes that undo concat_weights)",
    ),
    (
        "inline_branch",
        1,
        ANY,
        "copies an If branch (a subgraph attribute capture) into the enclosing graph with fresh names for what it defines; returns its outputs",
    ),
    (
        "slice_weight",
        2,
        ANY,
        "cuts an initializer along its last axis into consecutive pieces of the sizes in a `let` integer list: one sliced initializer recipe per size",
    ),
    (
        "padding_bias",
        3,
        1,
        "MultiHeadAttention's attention_bias from the 2-D int64 attention_mask, the [batch, 1, seq, seq] shape of the generic encoder mask and the query: (mask - 1) * 10000 in the query's float type through an int32 mask, expanded over the queries, once per mask and type, for EPs whose MultiHeadAttention has no key_padding_mask",
    ),
    (
        "key_mask_int32",
        1,
        1,
        "the 2-D int64 attention_mask cast to int32, built once per graph: MultiHeadAttention's [batch, kv_sequence_length] key_padding_mask",
    ),
];
