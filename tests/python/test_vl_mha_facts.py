"""The ONNX Runtime 1.32 facts fuse.mha_tower rests on, checked on one com.microsoft
MultiHeadAttention node on the CPU EP against a numpy softmax attention: with no mask input
(SigLIP's blocks, `fuse.mha_tower` / `.bias`), and with a 3-D int32 key_padding_mask
`(batch, S, T)` that is block-diagonal with blocks of unequal sizes (Qwen2.5-VL's windows,
`fuse.mha_tower.block_mask`). If an ONNX Runtime upgrade changes one of them, this file says
which."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper, TensorProto

HEADS, HEAD, SEQ = 2, 8, 12
HIDDEN = HEADS * HEAD
# Windows of 4, 4, 2 and 2 patches (the layout of tiny-qwen2_5_vl's 3x4 grid).
BLOCKS = np.array([0] * 4 + [1] * 4 + [2] * 2 + [3] * 2)


def session(mask, bias):
    names = ["q", "k", "v"]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, SEQ, HIDDEN]) for n in names]
    inits = []
    node_inputs = list(names)
    if bias is not None:
        inits.append(numpy_helper.from_array(bias, "bias"))
        node_inputs.append("bias")
    if mask:
        node_inputs += [""] * (4 - len(node_inputs)) + ["mask"]
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.INT32, [1, SEQ, SEQ]))
    node = helper.make_node("MultiHeadAttention", node_inputs, ["y"], domain="com.microsoft", num_heads=HEADS)
    graph = helper.make_graph([node], "mha", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def reference(q, k, v, keep):
    split = lambda x: x.reshape(SEQ, HEADS, HEAD).transpose(1, 0, 2)
    scores = split(q) @ split(k).transpose(0, 2, 1) / np.sqrt(HEAD)
    scores = np.where(keep[None], scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ split(v)).transpose(1, 0, 2).reshape(1, SEQ, HIDDEN)


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_multi_head_attention_without_mask_and_with_a_3d_block_mask(masked, with_bias):
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((1, SEQ, HIDDEN)).astype(np.float32) for _ in range(3))
    bias = rng.standard_normal(3 * HIDDEN).astype(np.float32) if with_bias else None
    keep = BLOCKS[:, None] == BLOCKS[None, :] if masked else np.ones((SEQ, SEQ), bool)
    feeds = {"q": q, "k": k, "v": v}
    if masked:
        feeds["mask"] = keep.astype(np.int32)[None]
    (y,) = session(masked, bias).run(None, feeds)
    if with_bias:
        q, k, v = q + bias[:HIDDEN], k + bias[HIDDEN : 2 * HIDDEN], v + bias[2 * HIDDEN :]
    want = reference(q[0], k[0], v[0], keep)
    assert np.abs(y - want).max() < 1e-5
    if masked:
        # The mask matters: unmasked attention is measurably different.
        assert np.abs(want - reference(q[0], k[0], v[0], np.ones((SEQ, SEQ), bool))).max() > 1e-2
