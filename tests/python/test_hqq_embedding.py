"""`--quant-method hqq` with a tied head and embedding: one quantized table serves both.

GatherBlockQuantized takes no float zero points, so it reads the head's own MatMulNBits codes
and scales as a symmetric table, and the rows' block offsets (the head's `[k_blocks, N]`
initializer, gathered by column) are added after it (builder/src/quantize/rewrite.rs,
`gather_block_quantized`, `row_offsets`; where the EP has no GatherBlockQuantized the rows are
decoded from the bytes, test_quant.py). Checked here: the package stores no float table, and
the embedding output ORT computes equals, row by row, the head's dequantized weight
`(q - mid) * scale + offset` computed in numpy from the same bytes.
"""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from conftest import build_with
from test_quant import feeds_for, load, reference_inputs

FIXTURE = "tiny-qwen2-tied-mqa"


@pytest.mark.parametrize("bits", ["int4", "int8"])
def test_tied_hqq_table_is_stored_once_and_gathered_exactly(bits, tmp_path):
    pkg = build_with(tmp_path / "hqq", FIXTURE, "cpu", ["--quant", bits, "--quant-method", "hqq"])
    model = load(pkg)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    head = next(n for n in model.graph.node if n.op_type == "MatMulNBits" and n.name.startswith("lm_head/"))
    w = head.input[1][: -len("/quant/data")]
    nk = {(a.name, a.i) for a in head.attribute if a.name in ("N", "K")}
    nk = (dict(nk)["N"], dict(nk)["K"])
    floats = [n for n, v in inits.items() if v.dtype.kind == "f" and v.shape in (nk, nk[::-1])]
    assert not floats, f"float tables left: {floats}"
    gathers = [n for n in model.graph.node if n.op_type == "GatherBlockQuantized" and n.input[0] == head.input[1]]
    assert len(gathers) == 1, "the embedding gathers the head's codes"
    assert len(gathers[0].input) == 3, "no zero points: the offsets are added after it"
    out = next(n for n in model.graph.node if n.name == gathers[0].name + "/Reshape").output[0]

    data, scales = inits[head.input[1]], inits[head.input[2]]
    offsets = inits[f"{w}/quant/offsets"].T
    n, kb, blob = data.shape
    if bits == "int4":
        codes = np.stack([data & 0x0F, data >> 4], axis=-1).reshape(n, kb, blob * 2).astype(np.float32) - 8
    else:
        codes = data.astype(np.float32) - 128
    table = (codes * scales.reshape(n, kb, 1) + offsets.reshape(n, kb, 1)).reshape(n, -1)

    model.graph.output.append(helper.make_tensor_value_info(out, onnx.TensorProto.FLOAT, None))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = reference_inputs(FIXTURE)
    ids = ref["input_ids"]
    got = sess.run([out], feeds_for(model, ids, ref["attention_mask"], ref["position_ids"]))[0]
    np.testing.assert_array_equal(got, table[ids.astype(np.int64)])
