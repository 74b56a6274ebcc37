"""The ONNX Runtime facts the padding-safe GroupQueryAttention rests on (docs/rule-language.md,
"GroupQueryAttention facts"), checked on one com.microsoft GroupQueryAttention node on the CPU
EP against a numpy reference that rotates every token at its own position (what transformers
does): a left-padded batch of two, a prefill and three decode steps with the cache the node
returns. If an ONNX Runtime upgrade changes one of them, this file says which."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper, TensorProto

from attention_reference import attend, rope_tables, rotate as rope_rotate

BATCH, HEADS, KV_HEADS, HEAD = 2, 4, 2, 16
PROMPT, PADS, STEPS = 6, (2, 0), 3
MASKED = -10000.0  # what the helper gqa_padding writes for pad keys
COS, SIN = rope_tables(HEAD)


def rotate(x, positions):
    return rope_rotate(x, positions, COS, SIN)


def session(rotary=True, softcap=0.0, positions=True):
    names = ["q", "k", "v", "past_k", "past_v", "seqlens_k", "total", "cos", "sin", "positions", "bias"]
    types = [TensorProto.FLOAT] * 5 + [TensorProto.INT32, TensorProto.INT32, None, None, TensorProto.INT64, TensorProto.FLOAT]
    inputs = [helper.make_tensor_value_info(n, t, None) for n, t in zip(names, types) if t is not None]
    node = helper.make_node(
        "GroupQueryAttention",
        (names if positions else names[:9] + ["", "bias"]) if rotary else names[:7] + ["", "", "", "bias"],
        ["y", "present_k", "present_v"],
        domain="com.microsoft",
        num_heads=HEADS,
        kv_num_heads=KV_HEADS,
        do_rotary=int(rotary),
        softcap=softcap,
    )
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ["y", "present_k", "present_v"]]
    caches = [numpy_helper.from_array(COS, "cos"), numpy_helper.from_array(SIN, "sin")] if rotary else []
    if not (rotary and positions):
        inputs = [i for i in inputs if i.name != "positions"]
    graph = helper.make_graph([node], "gqa", inputs, outputs, caches)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def run(s, q, k, v, past, mask, positions=None, bias=None):
    seq, total = q.shape[1], mask.shape[1]
    if bias is None:
        bias = np.broadcast_to(np.where(mask == 1, 0, MASKED).astype(np.float32)[:, None, None, :], (BATCH, 1, seq, total))
    feeds = {
        "q": q.reshape(BATCH, seq, -1), "k": k.reshape(BATCH, seq, -1), "v": v.reshape(BATCH, seq, -1),
        "past_k": past[0], "past_v": past[1],
        "seqlens_k": np.full([BATCH], total - 1, np.int32),  # every row is the padded width
        "total": np.array(total, np.int32),
        "positions": positions, "bias": np.ascontiguousarray(bias),
    }
    wanted = {i.name for i in s.get_inputs()}
    y, pk, pv = s.run(None, {n: x for n, x in feeds.items() if n in wanted})
    return y.reshape(BATCH, seq, HEADS, HEAD), (pk, pv)


def own_positions(mask):
    return np.clip(np.cumsum(mask, 1) - 1, 0, None)


def left_padded_run(positions_of, softcap=0.0):
    """Max error of the valid rows over the prefill and each decode step, against numpy with
    every token rotated at its own position. `positions_of(mask, seq)` gives what slot 9 gets;
    `positions_of` None leaves slot 9 out (what the fusions emit)."""
    rng = np.random.default_rng(7)
    mask = np.ones([BATCH, PROMPT], np.int64)
    for row, pads in enumerate(PADS):
        mask[row, :pads] = 0
    s = session(rotary=True, softcap=softcap, positions=positions_of is not None)
    given = positions_of or (lambda m, seq: None)
    new = lambda n, h: rng.standard_normal([BATCH, n, h, HEAD]).astype(np.float32)
    q, k, v = new(PROMPT, HEADS), new(PROMPT, KV_HEADS), new(PROMPT, KV_HEADS)
    empty = np.zeros([BATCH, KV_HEADS, 0, HEAD], np.float32)
    pos = given(mask, PROMPT)
    y, past = run(s, q, k, v, (empty, empty), mask, pos)
    want = attend(rotate(q, own_positions(mask)), rotate(k, own_positions(mask)), v, mask, softcap=softcap)
    errors = [float(np.abs(y - want)[mask == 1].max())]
    keys, values = [k], [v]
    for _ in range(STEPS):
        mask = np.concatenate([mask, np.ones([BATCH, 1], np.int64)], 1)
        q1, k1, v1 = new(1, HEADS), new(1, KV_HEADS), new(1, KV_HEADS)
        y, past = run(s, q1, k1, v1, past, mask, given(mask, 1))
        keys.append(k1), values.append(v1)
        mine = own_positions(mask)
        want = attend(rotate(q1, mine[:, -1:]), rotate(np.concatenate(keys, 1), mine), np.concatenate(values, 1), mask, softcap=softcap)
        errors.append(float(np.abs(y - want).max()))
    return errors


def slots(mask, seq):
    total = mask.shape[1]
    return np.broadcast_to(np.arange(total - seq, total), (BATCH, seq)).astype(np.int64).copy()


def test_slots_and_a_bias_are_exact_for_a_left_padded_batch():
    # position_ids left out (what the fusions emit) and given as slots: the same rotation.
    for positions_of in (None, slots):
        errors = left_padded_run(positions_of)
        assert max(errors) < 1e-5, errors


def test_own_positions_are_right_in_the_prompt_and_wrong_in_decode():
    # The prompt reads only position_ids[b, 0] and rotates contiguously from it; decode honours
    # position_ids, so keys cached at slots meet a query rotated at its own position.
    errors = left_padded_run(lambda m, s: own_positions(m)[:, -s:].astype(np.int64))
    assert errors[0] < 1e-5, errors
    assert min(errors[1:]) > 1e-2, errors


def test_the_prompt_reads_only_the_first_position():
    rng = np.random.default_rng(3)
    mask = np.ones([BATCH, PROMPT], np.int64)
    q = rng.standard_normal([BATCH, PROMPT, HEADS, HEAD]).astype(np.float32)
    k = rng.standard_normal([BATCH, PROMPT, KV_HEADS, HEAD]).astype(np.float32)
    empty = np.zeros([BATCH, KV_HEADS, 0, HEAD], np.float32)
    s = session()
    base = slots(mask, PROMPT)
    other = base.copy()
    other[:, 1:] = [9, 3, 40, 7, 2]
    a, _ = run(s, q, k, k, (empty, empty), mask, base)
    b, _ = run(s, q, k, k, (empty, empty), mask, other)
    assert np.array_equal(a, b)


def test_the_bias_is_added_after_softcap():
    errors = left_padded_run(None, softcap=5.0)
    assert max(errors) < 1e-5, errors


def test_the_bias_needs_a_row_per_query():
    s = session(rotary=False)
    mask = np.ones([BATCH, PROMPT], np.int64)
    x = np.zeros([BATCH, PROMPT, HEADS, HEAD], np.float32)
    kv = np.zeros([BATCH, PROMPT, KV_HEADS, HEAD], np.float32)
    empty = np.zeros([BATCH, KV_HEADS, 0, HEAD], np.float32)
    with pytest.raises(Exception, match="attention_bias dimension 2 must be equal to the sequence length"):
        run(s, x, kv, kv, (empty, empty), mask, bias=np.zeros([BATCH, 1, 1, PROMPT], np.float32))
