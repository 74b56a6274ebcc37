"""The ONNX Runtime 1.32 CPU facts of the GroupQueryAttention static form (docs/generic-graph.md,
"Static KV cache", the two static forms), checked on one com.microsoft GroupQueryAttention node
whose past key/value are fixed [batch, kv_heads, N, head] buffers, against a numpy reference
that rotates every token at its own position.

What the kernel does (onnxruntime/contrib_ops/cpu/bert/gqa_attention_base.h, ApplyAttention and
ComputeFlashAttention; group_query_attention_helper.h, CheckInputs and the attention_bias checks):
* it shares the buffer when the present output *is* the past input (pointer equality:
  `past_key_data == present_key_data && past_value_data == present_value_data`), which
  onnxruntime-genai arranges with `past_present_share_buffer`; then it writes the new rows in
  place at `seqlens_k[b] + 1 - seq` and leaves every other row untouched. Otherwise it zeroes a
  fresh present of max(total_sequence_length, N) rows and copies the past rows it reads;
* `total_sequence_length` is the attention_mask width (it decides prompt or decode:
  `seq == total` is the first prompt), not N; `seqlens_k` is that width minus one for every row
  (the any-padding form); `attention_bias` must be [batch, 1, seq, total_sequence_length]
  (a bias as wide as N is refused), so the static graph's mask of N columns is cut to the width.
The tests below drive a left-padded, a right-padded and an unpadded batch of two through a prefill
and decode steps with the buffer shared through IOBinding (as genai shares it) and unshared, a
sliding window, and a buffer poisoned with 1e4 past the valid length. If an ONNX Runtime upgrade
changes one of these, this file says which."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper, TensorProto

from attention_reference import attend, rope_tables, rotate as rope_rotate

BATCH, HEADS, KV_HEADS, HEAD, N = 2, 4, 2, 16, 16
MASKED = -10000.0  # what the helper gqa_padding writes for pad keys
COS, SIN = rope_tables(HEAD)


def rotate(x, positions):
    return rope_rotate(x, positions, COS, SIN)


def session(window=-1):
    names = ["q", "k", "v", "past_k", "past_v", "seqlens_k", "total", "cos", "sin", "", "bias"]
    types = {"seqlens_k": TensorProto.INT32, "total": TensorProto.INT32}
    inputs = [helper.make_tensor_value_info(n, types.get(n, TensorProto.FLOAT), None) for n in names if n and n not in ("cos", "sin")]
    node = helper.make_node(
        "GroupQueryAttention", names, ["y", "present_k", "present_v"], domain="com.microsoft",
        num_heads=HEADS, kv_num_heads=KV_HEADS, do_rotary=1, local_window_size=window,
    )
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ["y", "present_k", "present_v"]]
    caches = [numpy_helper.from_array(COS, "cos"), numpy_helper.from_array(SIN, "sin")]
    graph = helper.make_graph([node], "gqa_static", inputs, outputs, caches)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def feeds(q, k, v, mask, seqlens=None, total=None, bias_width=None):
    """The node's inputs as the static form gives them: seqlens_k every row's padded width - 1,
    total_sequence_length the width, the bias cut to the width (or as wide as asked)."""
    seq, width = q.shape[1], mask.shape[1]
    bias_width = bias_width or width
    keep = np.zeros([BATCH, bias_width], np.int64)
    keep[:, :width] = mask
    bias = np.where(keep == 1, 0, MASKED).astype(np.float32)[:, None, None, :]
    return {
        "q": q.reshape(BATCH, seq, -1), "k": k.reshape(BATCH, seq, -1), "v": v.reshape(BATCH, seq, -1),
        "seqlens_k": np.full([BATCH], (width if seqlens is None else seqlens) - 1, np.int32),
        "total": np.array(width if total is None else total, np.int32),
        "bias": np.ascontiguousarray(np.broadcast_to(bias, (BATCH, 1, seq, bias_width))),
    }


def run_shared(s, inputs, cache):
    """One run with present bound to the past buffers (what genai does with a shared buffer)."""
    io = s.io_binding()
    io.bind_output("y")
    for name, x in inputs.items():
        io.bind_cpu_input(name, x)
    for past, present, buf in [("past_k", "present_k", cache[0]), ("past_v", "present_v", cache[1])]:
        value = ort.OrtValue.ortvalue_from_numpy(buf)
        io.bind_ortvalue_input(past, value)
        io.bind_ortvalue_output(present, value)
    s.run_with_iobinding(io)
    return io.get_outputs()[0].numpy()


def steps(rng, prompt, pad, decode):
    """(q, k, v, attention_mask so far) per step; row 1 has |pad| pads, left if pad > 0, right if < 0."""
    mask = np.ones([BATCH, prompt], np.int64)
    if pad > 0:
        mask[1, :pad] = 0
    elif pad < 0:
        mask[1, pad:] = 0
    out = []
    for i, s in enumerate([prompt] + [1] * decode):
        if i:
            mask = np.concatenate([mask, np.ones([BATCH, 1], np.int64)], 1)
        x = lambda h: rng.standard_normal([BATCH, s, h, HEAD]).astype(np.float32)
        out.append((x(HEADS), x(KV_HEADS), x(KV_HEADS), mask.copy()))
    return out


def own_positions(mask, seq):
    """Each token's own position (transformers): the count of valid slots before it."""
    return (np.maximum(np.cumsum(mask, 1) - 1, 0))[:, -seq:]


def drive(s, seq_steps, shared=True, poison=0.0, window=0):
    """Runs the steps over one fixed buffer of N slots; checks the outputs of the valid rows
    against the reference and the buffer's rows; returns the largest difference."""
    cache = [np.full([BATCH, KV_HEADS, N, HEAD], poison, np.float32) for _ in range(2)]
    dense = None
    worst = 0.0
    for q, k, v, mask in seq_steps:
        seq, width = q.shape[1], mask.shape[1]
        inputs = feeds(q, k, v, mask)
        if shared:
            y = run_shared(s, inputs, cache)
            pk, pv = cache
        else:
            y, pk, pv = s.run(None, {**inputs, "past_k": cache[0], "past_v": cache[1]})
            assert pk.shape == (BATCH, KV_HEADS, N, HEAD)  # max(total_sequence_length, N) rows
            cache = [pk, pv]
        # The kernel rotates k at the slot; what it stores is the rotated key at slot total - seq + i.
        slots = np.broadcast_to(np.arange(width - seq, width), (BATCH, seq))
        kr = rotate(k, slots)
        dense = (kr, v) if dense is None else (np.concatenate([dense[0], kr], 1), np.concatenate([dense[1], v], 1))
        np.testing.assert_allclose(pk[:, :, :width].transpose(0, 2, 1, 3), dense[0], atol=1e-5)
        np.testing.assert_array_equal(pv[:, :, :width].transpose(0, 2, 1, 3), dense[1])
        if shared:  # written in place: the rows past the width are untouched
            assert (pk[:, :, width:] == poison).all() and (pv[:, :, width:] == poison).all()
        else:  # a fresh present: zeroed, then the past rows copied
            assert (pk[:, :, width:] == 0).all()
        # the reference rotates at the tokens' own positions; scores depend on differences only
        pos = own_positions(mask, width)
        y_ref = reference(q, k, mask, dense, pos, window)
        valid = mask[:, -seq:] == 1
        diff = np.abs(y.reshape(BATCH, seq, HEADS, HEAD) - y_ref)[valid]
        worst = max(worst, float(diff.max()) if diff.size else 0.0)
    return worst


def reference(q, k, mask, dense, pos, window):
    """q rotated at the tokens' own positions against the cached keys re-rotated at their own
    positions (slot rotations undone): transformers' attention over the valid keys."""
    seq, width = q.shape[1], mask.shape[1]
    slots_all = np.broadcast_to(np.arange(width), (BATCH, width))
    keys = unrotate(dense[0], slots_all)
    keys = rotate(keys, pos)
    qr = rotate(q, pos[:, -seq:])
    # A window counts slots in the generic graph's mask as well as in the kernel.
    return attend(qr, keys, dense[1], mask, window)


def unrotate(x, positions):
    return rope_rotate(x, positions, COS, -SIN)


@pytest.mark.parametrize("pad", [2, -2, 0], ids=["left", "right", "none"])
@pytest.mark.parametrize("shared", [True, False], ids=["shared", "copied"])
def test_a_fixed_buffer_with_seqlens_k_the_width_matches_the_reference(pad, shared):
    """Prefill and three decode steps. A right-padded row is checked in its prefill only: the
    kernel rotates a later token at its slot (after the pads), transformers at its own position,
    and with pads between them the two differ (the dynamic GroupQueryAttention form has the same
    property; onnxruntime-genai pads on the left)."""
    rng = np.random.default_rng(0)
    assert drive(session(), steps(rng, 6, pad, 0 if pad < 0 else 3), shared=shared) < 1e-4


def test_rows_past_the_valid_length_poisoned_with_1e4_change_nothing_and_stay_untouched():
    rng = np.random.default_rng(1)
    assert drive(session(), steps(rng, 5, 2, 3), shared=True, poison=1e4) < 1e-4


def test_a_sliding_window_over_the_fixed_buffer_is_local_window_size():
    rng = np.random.default_rng(2)
    # No padding: with a window the slot count and the token count agree only without pads
    # before the window (the generic graph's window counts slots too).
    assert drive(session(window=3), steps(rng, 6, 0, 3), window=3) < 1e-4


def test_a_bias_as_wide_as_the_buffer_is_refused():
    rng = np.random.default_rng(3)
    q, k, v, mask = steps(rng, 4, 0, 0)[0]
    cache = [np.zeros([BATCH, KV_HEADS, N, HEAD], np.float32) for _ in range(2)]
    with pytest.raises(Exception, match="attention_bias dimension 3 must be equal to total_sequence_length"):
        session().run(None, {**feeds(q, k, v, mask, bias_width=N), "past_k": cache[0], "past_v": cache[1]})


def test_total_sequence_length_n_is_not_a_prompt_and_refuses_a_batched_prefill():
    """total_sequence_length says prompt or decode (seq == total is the first prompt), so it is
    the attention_mask width, never the buffer length N."""
    rng = np.random.default_rng(4)
    q, k, v, mask = steps(rng, 4, 0, 0)[0]
    cache = [np.zeros([BATCH, KV_HEADS, N, HEAD], np.float32) for _ in range(2)]
    with pytest.raises(Exception, match="batch_size must be 1 when sequence_length > 1"):
        session().run(None, {**feeds(q, k, v, mask, total=N, bias_width=N), "past_k": cache[0], "past_v": cache[1]})
