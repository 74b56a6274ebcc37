"""Emit the [[ops...]] sections of the EP tables.

cpu: read from the installed ONNX Runtime's own kernel registry (get_all_opkernel_def), so the
claims are exactly what that build registers.
default: the ONNX standard itself (each op's opset-24 schema and its allowed types): the
portable table promises standard ONNX, not one runtime's kernels.
cuda/dml/webgpu: from the rows files next to this script, transcribed from
ONNX Runtime sources (see each file's header).
trt-rtx: a graph EP with no kernels; each standard op's opset-24 schema types cut down to the element
types ORT's NvTensorRTRTX EP lets through, plus GroupQueryAttention (see trt_rtx()).

usage: python gen_ops.py cpu|default|cuda|dml|webgpu|trt-rtx  > fragment.toml
"""
import sys, os

ONNX_OPS = """Add And Attention Cast Concat ConstantOfShape Cos CumSum Div Equal Erf Expand Flatten Gather Gelu Gemm
DequantizeLinear Greater GreaterOrEqual Identity If LayerNormalization Less LessOrEqual MatMul Max Min Mul Neg Not
Or Pow RMSNormalization Log Range ReduceMax ReduceMean ReduceSum Reshape RotaryEmbedding ScatterND
Shape Sigmoid SimplifiedLayerNormalization Sin Slice Softmax Split Sqrt Squeeze Sub Tanh
TensorScatter Transpose Trilu Unsqueeze Where Compress Mod ScatterElements""".split()
MS_OPS = """GroupQueryAttention SkipSimplifiedLayerNormalization SkipLayerNormalization RotaryEmbedding
FastGelu BiasGelu Gelu MatMulNBits GatherBlockQuantized MultiHeadAttention MoE QMoE""".split()
# Ops ORT registers in the default domain that are not standard ONNX.
NON_STANDARD = {"SimplifiedLayerNormalization"}
SHORT = {"float": "f32", "float16": "f16", "bfloat16": "bf16", "double": "f64", "int8": "i8",
         "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16",
         "uint32": "u32", "uint64": "u64", "bool": "bool", "string": "string", "int4": "i4",
         "uint4": "u4", "int2": "i2", "uint2": "u2", "float8e4m3fn": "f8e4m3fn",
         "float8e4m3fnuz": "f8e4m3fnuz", "float8e5m2": "f8e5m2", "float8e5m2fnuz": "f8e5m2fnuz",
         "float8e8m0": "f8e8m0", "float4e2m1": "f4e2m1"}
MAX = 2147483647
CPU_CONTRIB_ONNX = {("", "SimplifiedLayerNormalization"), ("", "LayerNormalization", 1)}


def emit(domain, op, since, until, types, source, note=None, host=False):
    print(f'[[ops."{domain}".{op}]]')
    print(f"since = {since}")
    if until is not None:
        print(f"until = {until}")
    for k in sorted(types):
        print(f"{k} = [" + ", ".join(f'"{d}"' for d in types[k]) + "]")
    if host:
        print("host = true")
    print(f'source = "{source}"')
    if note:
        print(f'note = "{note}"')
    print()


def cpu(default_only):
    import onnxruntime
    from onnxruntime.capi import onnxruntime_pybind11_state as C
    ver = onnxruntime.__version__
    rows = []
    for k in C.get_all_opkernel_def():
        if k.provider != "CPUExecutionProvider":
            continue
        dom = k.domain
        if dom == "" and k.op_name in ONNX_OPS:
            pass
        elif dom == "com.microsoft" and k.op_name in MS_OPS and not default_only:
            pass
        else:
            continue
        if default_only and k.op_name in NON_STANDARD:
            continue
        since, until = k.version_range
        if until != MAX and until < 21:
            continue  # the generic graph is opset 24; older ranges only add noise
        types = {}
        for name, lst in k.type_constraints.items():
            short = [SHORT[t[len("tensor("):-1]] for t in lst
                     if t.startswith("tensor(") and t[len("tensor("):-1] in SHORT]
            if short:
                types[name] = sorted(set(short))
        contrib = dom == "com.microsoft" or k.op_name == "SimplifiedLayerNormalization" or \
            (k.op_name == "LayerNormalization" and until == 16)
        f = "onnxruntime/contrib_ops/cpu/cpu_contrib_kernels.cc" if contrib else \
            "onnxruntime/core/providers/cpu/cpu_execution_provider.cc"
        src = f"ORT {ver} CPU kernel registry (get_all_opkernel_def); registered in {f}"
        rows.append((dom, k.op_name, since, None if until == MAX else until, types, src))
    for r in sorted(rows, key=lambda r: (r[0], r[1], r[2], str(r[4]))):
        emit(*r)


def standard():
    """The portable table claims what the ONNX standard allows: each op's opset-24 schema
    (from the onnx package), with every tensor type its constraints admit."""
    import onnx
    from onnx import defs
    for op in sorted(set(ONNX_OPS) - NON_STANDARD):
        try:
            schema = defs.get_schema(op, 24, "")
        except Exception:
            continue
        types = {}
        for c in schema.type_constraints:
            short = [SHORT[t[len("tensor("):-1]] for t in c.allowed_type_strs
                     if t.startswith("tensor(") and t[len("tensor("):-1] in SHORT]
            if short:
                types[c.type_param_str] = sorted(set(short))
        emit("", op, schema.since_version, None, types,
             f"ONNX opset-24 schema of {op} (since version {schema.since_version}), onnx {onnx.__version__} defs")


def from_rows(path, source_of, status_source=None):
    """Rows are `op|since|until|constraints`, optionally followed by `|status|note` (webgpu:
    status `ran`, `observed` or `cpu`, turned into the source by status_source; note copied as is)."""
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            op, since, until, cons, *rest = line.split("|")
            status = rest[0] if rest else ""
            note = rest[1] if len(rest) > 1 else None
            dom, _, name = op.rpartition(":")
            types = {}
            for c in cons.split(";") if cons else []:
                k, v = c.split("=")
                types[k] = v.split(",")
            source = source_of(dom, name)
            if status:
                source = status_source(source, status)
            emit(dom, name, int(since), int(until) if until else None, types, source, note, host=status == "cpu")


HERE = os.path.dirname(os.path.abspath(__file__))
# docs/OperatorKernels.md is generated from the registered kernels. At commit 001d12d2 the C API header
# (include/onnxruntime/core/session/onnxruntime_c_api.h) says ORT_API_VERSION 25: a 1.25 development
# snapshot of main, older than the installed 1.32.0 (whose CPU registry splits Cast into [25,27] and 28+,
# where this file still lists Cast 25+). No 1.32 copy of the file is in the code index.
DOC = "docs/OperatorKernels.md @001d12d2 (ORT 1.25 development main: ORT_API_VERSION 25 at that commit; generated from registered kernels)"
# CUDA contrib registrations the builds use, re-read in the newest stored cuda_contrib_kernels.cc.
CUDA_CONTRIB_READ = {"GroupQueryAttention", "SkipLayerNormalization", "SkipSimplifiedLayerNormalization",
                     "FastGelu", "RotaryEmbedding", "MatMulNBits"}
CUDA_CONTRIB_AT = "@004b79ed (newer main than the doc)"
# Contrib kernels whose registration was also read in their own source file (the code index's stored
# copies, commit not pinned to the doc's), and which no GPU here has run.
# Standard ops claimed from the registration source itself (not transcribed from the doc).
CUDA_REGISTRATION_READ = {"Log": "onnxruntime/core/providers/cuda/cuda_execution_provider.cc @0018ddb6 (main): "
                                 "ONNX_OPERATOR_TYPED_KERNEL_CLASS_NAME(kCudaExecutionProvider, kOnnxDomain, 13, "
                                 "float / double / MLFloat16, Log); no BFloat16 registration in that file; unverified on a GPU here"}
CUDA_KERNEL_READ = {"MoE": "onnxruntime/contrib_ops/cuda/moe/moe.cc (REGISTER_KERNEL_TYPED float, MLFloat16, BFloat16 "
                           "in the stored copies read; docs/rule-language.md, MoE facts); unverified on a GPU here"}

# TensorRT-RTX: ORT's NvTensorRTRTX EP (onnxruntime/core/providers/nv_tensorrt_rtx/nv_execution_provider.cc
# @01cb2200, ORT_API_VERSION 23 at that commit) registers no compute kernels (only MemcpyFromHost/ToHost).
# GetCapability drops every node with an input or output element type outside IsSupportedDataType()
# (float, float16, bfloat16, bool, int4, int8, uint8, int32, int64, float8e4m3fn), then hands the rest to
# the TensorRT-RTX ONNX parser (supportsModelV2), which decides per node. Its custom-op domains are
# "trt.plugins" (TensorRT plugin registry) and "trt" (TRT_FP4DynamicQuantize, TRT_FP8QuantizeLinear,
# TRT_FP8DequantizeLinear); none is com.microsoft.
NV_TYPES = {"f32", "f16", "bf16", "bool", "i4", "i8", "u8", "i32", "i64", "f8e4m3fn"}
NV_SRC = ("ORT NvTensorRTRTX EP, onnxruntime/core/providers/nv_tensorrt_rtx/nv_execution_provider.cc @01cb2200 "
          "(ORT_API_VERSION 23): GetCapability keeps a node only if all its element types are in IsSupportedDataType "
          "and the TensorRT-RTX ONNX parser accepts it; types = ONNX opset-24 schema of {op} (onnx {onnx}) "
          "intersected with IsSupportedDataType")
NV_PARSER_NOTE = "op support is the TensorRT-RTX parser's (closed source, no op list in ORT): NOT VERIFIED per op"
# onnx-tensorrt docs/Changelog.md: Attention importer from TensorRT 10.14, RotaryEmbedding and RMSNormalization
# from 10.15. Which TensorRT-RTX release carries those importers is not stated there.
NV_NEW_OPS = {"Attention": "10.14", "RotaryEmbedding": "10.15", "RMSNormalization": "10.15"}
# Element types the TensorRT ONNX parser takes differently from the schema: onnx-tensorrt
# onnxOpImporters.cpp @96e78110 (QuantizeLinear / DequantizeLinear) reads a UINT8 zero point as
# INT8 (a warning) and refuses a constant zero point that is not all zeros, so uint8 data, which
# needs one, is cut; asymmetric blocks are written without zero points (the offset form).
NV_PARSER_CUTS = {"DequantizeLinear": ("T1", "u8", "u8 cut: onnx-tensorrt onnxOpImporters.cpp @96e78110 reads a UINT8 "
                                              "zero point as INT8 and asserts that a constant zero point is all zeros "
                                              "(TensorRT quantizes symmetrically); the TensorRT-RTX parser is closed and "
                                              "assumed to share it")}
# Standard ops the trt-rtx builds (or its rules) may emit; SimplifiedLayerNormalization is an ORT-only
# default-domain op the TensorRT parser does not know, If is forbidden by the table.
NV_OPS = """Add And Attention Cast Concat ConstantOfShape Cos CumSum DequantizeLinear Div Equal Erf Expand Gather Gelu Greater
GreaterOrEqual LayerNormalization Less LessOrEqual MatMul Max Min Mul Neg Not Or Pow RMSNormalization Range
ReduceMax ReduceMean ReduceSum Reshape RotaryEmbedding ScatterND Shape Sigmoid Sin Slice Softmax Split Sqrt
Squeeze Sub Tanh TensorScatter Transpose Trilu Unsqueeze Where""".split()


def trt_rtx():
    import onnx
    from onnx import defs
    for op in NV_OPS:
        schema = defs.get_schema(op, 24, "")
        types = {}
        for c in schema.type_constraints:
            short = [SHORT[t[len("tensor("):-1]] for t in c.allowed_type_strs
                     if t.startswith("tensor(") and t[len("tensor("):-1] in SHORT]
            short = sorted(set(short) & NV_TYPES)
            if short:
                types[c.type_param_str] = short
        note = NV_PARSER_NOTE
        if op in NV_PARSER_CUTS:
            constraint, cut, why = NV_PARSER_CUTS[op]
            types[constraint] = [t for t in types[constraint] if t != cut]
            note += "; " + why
        if op in NV_NEW_OPS:
            note += (f"; onnx-tensorrt docs/Changelog.md adds the {op} importer in TensorRT "
                     f"{NV_NEW_OPS[op]}, the TensorRT-RTX parser release carrying it is not known")
        emit("", op, schema.since_version, None, types,
             NV_SRC.format(op=op, onnx=onnx.__version__), note)
    # com.microsoft: the EP has no kernel for it; the claim rests on onnxruntime-genai's model builder,
    # which emits GroupQueryAttention (RoPE inside, packed QKV) for ep "trt-rtx" in f16 and bf16.
    emit("com.microsoft", "GroupQueryAttention", 1, None, {"M": ["i32"], "T": ["bf16", "f16"]},
         "onnxruntime-genai src/python/py/models/builders/base.py @004a30a4: is_gqa_supported() lists "
         "(trt-rtx, FLOAT16) and (trt-rtx, BFLOAT16), use_rope_in_attn for every EP but dml; ORT's "
         "nv_execution_provider.cc @01cb2200 has no GQA kernel or plugin, so the TensorRT-RTX parser takes it",
         "inferred from the GenAI builder's choice, not from a parser op list; M = int32 seqlens_k as in the "
         "contrib op schema")

# What scripts/check-webgpu.py observed (one-node probes, default provider options).
WEBGPU_RAN = ("ran on onnxruntime-webgpu 1.27.0 WebGpuExecutionProvider (Dawn on Mesa lavapipe), "
              "scripts/check-webgpu.py: every listed element type placed on WebGPU and run, at opset 24 and at "
              "the range ends; ORT 1.27, not the 1.32 the tables target")
WEBGPU_CPU = ("no WebGPU kernel, ORT places the node on CPUExecutionProvider: ran on onnxruntime-webgpu 1.27.0 WebGpuExecutionProvider (Dawn on Mesa "
              "lavapipe), scripts/check-webgpu.py: the WebGPU EP has no kernel for these types (log: webgpu kernel "
              "not found in registries) and ORT runs the node on CPUExecutionProvider; observed at opset 24 only; "
              "ORT 1.27, not 1.32")


def webgpu_status(source, status):
    if status == "ran":
        return f"{source}; {WEBGPU_RAN}"
    if status == "observed":  # added from the run; the registration itself was not read
        return f"registration not read; {WEBGPU_RAN}"
    if status == "cpu":
        return WEBGPU_CPU
    sys.exit(f"webgpu_rows.txt: unknown status {status!r} (ran | observed | cpu)")


if __name__ == "__main__":
    which = sys.argv[1]
    if which == "cpu":
        cpu(False)
    elif which == "default":
        standard()
    elif which == "cuda":
        from_rows(os.path.join(HERE, "cuda_rows.txt"), lambda d, o: f"CUDAExecutionProvider: {CUDA_REGISTRATION_READ[o]}"
                  if not d and o in CUDA_REGISTRATION_READ else f"{DOC}, CUDAExecutionProvider; registered in " + (
            "onnxruntime/contrib_ops/cuda/cuda_contrib_kernels.cc" if d or o == "SimplifiedLayerNormalization"
            else "onnxruntime/core/providers/cuda/cuda_execution_provider.cc") + (
            f"; same typed registrations re-read in that file {CUDA_CONTRIB_AT}" if d and o in CUDA_CONTRIB_READ else "") + (
            f"; kernel in {CUDA_KERNEL_READ[o]}" if d and o in CUDA_KERNEL_READ else ""))
    elif which == "dml":
        from_rows(os.path.join(HERE, "dml_rows.txt"), lambda d, o: f"{DOC}, DmlExecutionProvider; registered in "
                  "onnxruntime/core/providers/dml/DmlExecutionProvider/src/Operators/OperatorRegistration.cpp")
    elif which == "webgpu":
        from_rows(os.path.join(HERE, "webgpu_rows.txt"), lambda d, o: "registered in " + (
            "onnxruntime/contrib_ops/webgpu/webgpu_contrib_kernels.cc" if d or o == "SimplifiedLayerNormalization"
            else "onnxruntime/core/providers/webgpu/webgpu_execution_provider.cc") + " (main-branch snapshot read via code search)",
            webgpu_status)
    elif which == "trt-rtx":
        trt_rtx()
    else:
        sys.exit("usage: gen_ops.py cpu|default|cuda|dml|webgpu|trt-rtx")
