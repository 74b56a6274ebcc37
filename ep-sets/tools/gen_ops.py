"""Emit the [[ops...]] sections of the EP tables.

cpu: read from the installed ONNX Runtime's own kernel registry (get_all_opkernel_def), so the
claims are exactly what that build registers.
default: the ONNX standard itself (each op's opset-24 schema and its allowed types): the
portable table promises standard ONNX, not one runtime's kernels.
cuda/dml/webgpu: from the rows files next to this script, transcribed from
ONNX Runtime sources (see each file's header).

usage: python gen_ops.py cpu|default|cuda|dml|webgpu  > fragment.toml
"""
import sys, os

ONNX_OPS = """Add And Attention Cast Concat ConstantOfShape Cos Div Equal Erf Expand Gather Gelu
Greater GreaterOrEqual Identity If LayerNormalization Less LessOrEqual MatMul Max Min Mul Neg Not
Or Pow RMSNormalization Range ReduceMax ReduceMean ReduceSum Reshape RotaryEmbedding ScatterND
Shape Sigmoid SimplifiedLayerNormalization Sin Slice Softmax Split Sqrt Squeeze Sub Tanh
Transpose Trilu Unsqueeze Where""".split()
MS_OPS = """GroupQueryAttention SkipSimplifiedLayerNormalization SkipLayerNormalization RotaryEmbedding
FastGelu BiasGelu Gelu MatMulNBits MultiHeadAttention""".split()
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


def emit(domain, op, since, until, types, source, note=None):
    print(f'[[ops."{domain}".{op}]]')
    print(f"since = {since}")
    if until is not None:
        print(f"until = {until}")
    for k in sorted(types):
        print(f"{k} = [" + ", ".join(f'"{d}"' for d in types[k]) + "]")
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


def from_rows(path, source_of):
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            op, since, until, cons = line.split("|")
            dom, _, name = op.rpartition(":")
            types = {}
            for c in cons.split(";") if cons else []:
                k, v = c.split("=")
                types[k] = v.split(",")
            emit(dom, name, int(since), int(until) if until else None, types, source_of(dom, name))


HERE = os.path.dirname(os.path.abspath(__file__))
DOC = "docs/OperatorKernels.md @001d12d2 (generated from registered kernels)"

if __name__ == "__main__":
    which = sys.argv[1]
    if which == "cpu":
        cpu(False)
    elif which == "default":
        standard()
    elif which == "cuda":
        from_rows(os.path.join(HERE, "cuda_rows.txt"), lambda d, o: f"{DOC}, CUDAExecutionProvider; registered in " + (
            "onnxruntime/contrib_ops/cuda/cuda_contrib_kernels.cc" if d or o == "SimplifiedLayerNormalization"
            else "onnxruntime/core/providers/cuda/cuda_execution_provider.cc"))
    elif which == "dml":
        from_rows(os.path.join(HERE, "dml_rows.txt"), lambda d, o: f"{DOC}, DmlExecutionProvider; registered in "
                  "onnxruntime/core/providers/dml/DmlExecutionProvider/src/Operators/OperatorRegistration.cpp")
    elif which == "webgpu":
        from_rows(os.path.join(HERE, "webgpu_rows.txt"), lambda d, o: "registered in " + (
            "onnxruntime/contrib_ops/webgpu/webgpu_contrib_kernels.cc" if d or o == "SimplifiedLayerNormalization"
            else "onnxruntime/core/providers/webgpu/webgpu_execution_provider.cc") + " (main-branch snapshot read via code search)")
    elif which == "trt-rtx":
        # A graph EP: no per-kernel registry in ORT. Claims mirror the CUDA rows minus the
        # skip norms this table forbids; they are NOT verified against TensorRT-RTX.
        import tempfile
        rows = [l for l in open(os.path.join(HERE, "cuda_rows.txt")) if "Skip" not in l]
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as t:
            t.writelines(rows)
        from_rows(t.name, lambda d, o: "NOT VERIFIED: NvTensorRTRTXExecutionProvider claims nodes through the "
                  "TensorRT-RTX ONNX parser (onnxruntime/core/providers/nv_tensorrt_rtx/nv_execution_provider.cc "
                  "GetCapability); types copied from the CUDA kernels as a placeholder")
    else:
        sys.exit("usage: gen_ops.py cpu|default|cuda|dml|webgpu|trt-rtx")
