"""The ONNX Runtime 1.32 CPU facts the static KV cache rests on (docs/generic-graph.md, "Static
KV cache"), checked on a toy graph of the same form as the one `--kv-cache static` builds:
opset-24 TensorScatter writes the new rows into a fixed [batch, kv_heads, N, head_dim] cache on
axis 2 at the write index derived from attention_mask, and opset-24 Attention attends with a 4-D
q over the whole cache under a boolean mask padded to N. Checked against a numpy reference on a
left-padded and a right-padded batch, a prefill and decode steps, a poisoned cache and a sliding
window. If an ONNX Runtime upgrade changes one of them, this file says which."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper, TensorProto

from attention_reference import attend

BATCH, HEADS, KV_HEADS, HEAD, N = 2, 4, 2, 8, 16
F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def const(name, values):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(name, I64, [len(values)], values))


def toy(mask_to_n=True, q_4d=True, nonpad=False, causal_attr=False, explicit_mask=True, window=0):
    """The static-cache attention of one layer: q [b, Hq, s, D] (or 3-D), new k/v [b, Hkv, s, D],
    caches [b, Hkv, N, D], attention_mask [b, total]; outputs y and the updated caches."""
    nodes = [
        const("one", [1]), const("two", [2]), const("zero", [0]), const("n", [N]), const("axes12", [1, 2]),
        helper.make_node("Shape", ["k"], ["s"], start=2, end=3),
        helper.make_node("Shape", ["attention_mask"], ["total"], start=1, end=2),
        helper.make_node("Shape", ["attention_mask"], ["b"], start=0, end=1),
        helper.make_node("Sub", ["total", "s"], ["past"]),
        # one write index per row: every row's slot is its column in the padded attention_mask
        helper.make_node("Expand", ["past", "b"], ["write"]),
        helper.make_node("TensorScatter", ["past_k", "k", "write"], ["present_k"], axis=2),
        helper.make_node("TensorScatter", ["past_v", "v", "write"], ["present_v"], axis=2),
        helper.make_node("Squeeze", ["past"], ["past0"]),
        helper.make_node("Squeeze", ["total"], ["total0"]),
        helper.make_node("Squeeze", ["one"], ["one0"]),
        helper.make_node("Squeeze", ["n" if mask_to_n else "total"], ["keys0"]),
        helper.make_node("Squeeze", ["zero"], ["zero0"]),
        helper.make_node("Range", ["zero0", "keys0", "one0"], ["kpos"]),
        helper.make_node("Range", ["past0", "total0", "one0"], ["qpos"]),
        helper.make_node("Unsqueeze", ["qpos", "one"], ["qcol"]),
        helper.make_node("LessOrEqual", ["kpos", "qcol"], ["causal"]),
        helper.make_node("Cast", ["attention_mask"], ["mbool"], to=BOOL),
    ]
    if mask_to_n:
        nodes += [
            helper.make_node("Sub", ["n", "total"], ["extra"]),
            helper.make_node("Concat", ["zero", "zero", "zero", "extra"], ["pads"], axis=0),
            helper.make_node("Pad", ["mbool", "pads"], ["mpad"]),
        ]
    else:
        nodes.append(helper.make_node("Identity", ["mbool"], ["mpad"]))
    nodes.append(helper.make_node("Unsqueeze", ["mpad", "axes12"], ["padding"]))
    allowed = "causal"
    if window:
        nodes += [
            helper.make_node("Constant", [], ["w"], value=helper.make_tensor("w", I64, [], [window])),
            helper.make_node("Sub", ["qcol", "w"], ["lo"]),
            helper.make_node("Greater", ["kpos", "lo"], ["inwin"]),
            helper.make_node("And", ["causal", "inwin"], ["causal_w"]),
        ]
        allowed = "causal_w"
    nodes.append(helper.make_node("And", [allowed, "padding"], ["mask"]))
    if nonpad:
        nodes.append(helper.make_node("Expand", ["total", "b"], ["nonpad"]))
    inputs = ["q4" if q_4d else "q3", "present_k", "present_v", "mask" if explicit_mask else "", "", "", "nonpad" if nonpad else ""]
    while inputs[-1] == "":
        inputs.pop()
    if not q_4d:
        nodes += [
            helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1, 3]),
            const("q3shape", [0, 0, HEADS * HEAD]),
            helper.make_node("Reshape", ["qt", "q3shape"], ["q3"]),
        ]
    else:
        nodes.append(helper.make_node("Identity", ["q"], ["q4"]))
    attrs = {"is_causal": int(causal_attr)}
    if not q_4d:
        attrs.update(q_num_heads=HEADS, kv_num_heads=KV_HEADS)
    nodes.append(helper.make_node("Attention", inputs, ["y"], **attrs))
    graph = helper.make_graph(
        nodes, "static",
        [helper.make_tensor_value_info("q", F, None), helper.make_tensor_value_info("k", F, None),
         helper.make_tensor_value_info("v", F, None), helper.make_tensor_value_info("past_k", F, None),
         helper.make_tensor_value_info("past_v", F, None), helper.make_tensor_value_info("attention_mask", I64, None)],
        [helper.make_tensor_value_info(n, F, None) for n in ["y", "present_k", "present_v"]],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def reference(q, keys, values, mask, window=0):
    """Attention of q [b, Hq, s, D] over the dense keys [b, Hkv, total, D]: causal, pad keys masked."""
    heads_last = lambda x: x.transpose(0, 2, 1, 3)
    return heads_last(attend(heads_last(q), heads_last(keys), heads_last(values), mask, window))


def steps(rng, prompt, pad, decode):
    """Per step: (q, k, v, attention_mask so far) for a batch whose row 1 has `pad` padding
    (left when pad > 0, right when pad < 0) in a prompt of `prompt` slots, then `decode` steps."""
    mask = np.ones([BATCH, prompt], np.int64)
    if pad > 0:
        mask[1, :pad] = 0
    elif pad < 0:
        mask[1, pad:] = 0
    out, lengths = [], [prompt] + [1] * decode
    for i, s in enumerate(lengths):
        if i:
            mask = np.concatenate([mask, np.ones([BATCH, 1], np.int64)], 1)
        shape = lambda h: rng.standard_normal([BATCH, h, s, HEAD]).astype(np.float32)
        out.append((shape(HEADS), shape(KV_HEADS), shape(KV_HEADS), mask.copy()))
    return out


def run_static(sess, seq_steps, poison=None, window=0):
    """Runs the steps through the static graph (caches fed back as genai does when it shares the
    buffer) and checks each step against the reference; returns the largest difference."""
    cache = [np.zeros([BATCH, KV_HEADS, N, HEAD], np.float32) for _ in range(2)]
    if poison is not None:
        cache = [np.full_like(c, poison) for c in cache]
    dense_k = dense_v = None
    worst = 0.0
    for q, k, v, mask in seq_steps:
        y, pk, pv = sess.run(None, {"q": q, "k": k, "v": v, "past_k": cache[0], "past_v": cache[1], "attention_mask": mask})
        dense_k = k if dense_k is None else np.concatenate([dense_k, k], 2)
        dense_v = v if dense_v is None else np.concatenate([dense_v, v], 2)
        total = mask.shape[1]
        assert pk.shape == (BATCH, KV_HEADS, N, HEAD)
        np.testing.assert_array_equal(pk[:, :, :total], dense_k)
        np.testing.assert_array_equal(pv[:, :, :total], dense_v)
        if poison is not None:  # rows past the valid length are untouched
            assert (pk[:, :, total:] == poison).all()
        y_ref = reference(q, dense_k, dense_v, mask, window)
        worst = max(worst, float(np.abs(y - y_ref).max()))
        cache = [pk, pv]
    return worst


@pytest.mark.parametrize("pad", [2, -2, 0], ids=["left", "right", "none"])
def test_scatter_and_attention_over_a_mask_padded_to_n_match_the_dense_reference(pad):
    rng = np.random.default_rng(0)
    assert run_static(toy(), steps(rng, 6, pad, 3)) < 1e-5


def test_poisoned_rows_past_the_valid_length_do_not_change_the_output():
    rng = np.random.default_rng(1)
    assert run_static(toy(), steps(rng, 5, 2, 2), poison=1e4) < 1e-5


def test_a_sliding_window_over_the_static_cache():
    rng = np.random.default_rng(2)
    assert run_static(toy(window=3), steps(rng, 6, 2, 3), window=3) < 1e-5


def test_a_mask_as_long_as_attention_mask_is_refused_the_cpu_kernel_wants_n():
    rng = np.random.default_rng(3)
    with pytest.raises(Exception, match="inconsistent total_sequence_length"):
        run_static(toy(mask_to_n=False), steps(rng, 4, 0, 0))


def test_a_3d_q_over_the_4d_cache_is_refused():
    rng = np.random.default_rng(4)
    with pytest.raises(Exception, match="Q and K must have the same rank"):
        run_static(toy(q_4d=False), steps(rng, 4, 0, 0))


def test_nonpad_kv_seqlen_with_the_mask_gives_the_same_result():
    rng = np.random.default_rng(5)
    assert run_static(toy(nonpad=True), steps(rng, 6, 2, 2)) < 1e-5


def test_is_causal_with_nonpad_kv_seqlen_is_aligned_bottom_right():
    """No explicit mask, is_causal=1 and nonpad_kv_seqlen = total: a decode step's query (the last
    slot) sees every slot up to total, and a prefill after a past does too: so the kernel's causal
    diagonal ends at nonpad_kv_seqlen, not at the top-left of the cache."""
    rng = np.random.default_rng(6)
    assert run_static(toy(nonpad=True, causal_attr=True, explicit_mask=False), steps(rng, 6, 0, 3)) < 1e-5
