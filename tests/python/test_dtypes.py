"""Every decoder fixture builds in f32, f16 and bf16 and each package passes the ONNX checker
with full_check (the bf16 structural checks themselves live in tests/tests/dtypes.rs)."""
import onnx
import pytest

from conftest import DECODER_FIXTURES

ELEM = {"f32": onnx.TensorProto.FLOAT, "f16": onnx.TensorProto.FLOAT16, "bf16": onnx.TensorProto.BFLOAT16}
FLOATS = set(ELEM.values()) | {onnx.TensorProto.DOUBLE}


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("fixture", DECODER_FIXTURES)
def test_passes_the_checker_in_every_dtype(build_package, fixture, dtype):
    pkg = build_package(fixture, "default", dtype)
    onnx.checker.check_model(str(pkg / "model.onnx"), full_check=True)
    model = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
    g = model.graph
    for v in list(g.input) + list(g.output):
        t = v.type.tensor_type.elem_type
        assert t not in FLOATS or t == ELEM[dtype], f"{v.name} has elem_type {t}"
    # DeepSeek's routing keeps its router weight, correction and scaling factor in f32, as
    # transformers does, and its top-k constants, and ALiBi's bias is computed in f32 and cast
    # (`/alibi_f32/`): an f32 initializer is allowed where only such nodes read it.
    readers = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, []).append(n.name)
    for init in g.initializer:
        routing = init.data_type == ELEM["f32"] and readers.get(init.name) and all("/routing_f32/" in r or "/alibi_f32/" in r for r in readers[init.name])
        assert init.data_type not in FLOATS or init.data_type == ELEM[dtype] or routing, f"{init.name}: {init.data_type}"
