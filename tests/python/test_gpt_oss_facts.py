"""The ONNX Runtime 1.32 CPU facts the gpt-oss rules rest on (rules/rules/fuse.moe.rule
`fuse.moe.swiglu_limit`, rules/rules/fuse.gqa_sink.rule), each checked on one contrib node
against a numpy reference written from transformers' `modeling_gpt_oss.py` (facts only):

- com.microsoft MoE with `swiglu_fusion` 1, `activation_alpha` a, `activation_beta` 1,
  `swiglu_limit` L, fc1/fc2 biases and `normalize_routing_weights` 1 computes gpt-oss's experts:
  gate on even fc1 rows, up on odd ones (the checkpoint's `gate_up_proj` [E, hidden, 2*inter]
  transposed), `(clamp(up, -L, L) + 1) * g * sigmoid(a * g)` with `g = min(gate, L)`, and the
  top-k weights a softmax over the chosen logits (router bias included in the logits).
- com.microsoft GroupQueryAttention's `head_sink` input (slot 11, [num_heads], the query's
  float type) is gpt-oss's attention sink: one logit per head that joins each softmax row and
  is dropped, with or without `local_window_size`, at prefill, decode and a chunk after a past.
If an ONNX Runtime upgrade changes one of them, this file says which."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper, TensorProto

# max |ORT - reference| / max |reference| (measured 2.4e-7 for the MoE, 1.9e-7 absolute for GQA
# with unit-scale inputs): f32 rounding.
EXACT = 1e-6

_rng = np.random.default_rng(30)


def _session(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])


def _f32(name):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, None)


def moe_reference(x, logits, gate_up, gate_up_bias, down, down_bias, k, alpha, limit):
    """transformers' GptOssMLP per token: top-k logits, softmax over them, clamped SwiGLU."""
    out = np.zeros((len(x), down.shape[2]))
    for t in range(len(x)):
        chosen = np.argsort(-logits[t], kind="stable")[:k]
        top = logits[t, chosen].astype(np.float64)
        w = np.exp(top - top.max())
        w /= w.sum()
        for e, we in zip(chosen, w):
            a = x[t].astype(np.float64) @ gate_up[e] + gate_up_bias[e]
            g, u = np.minimum(a[0::2], limit), np.clip(a[1::2], -limit, limit)
            out[t] += we * (((u + 1) * g / (1 + np.exp(-alpha * g))) @ down[e] + down_bias[e])
    return out


@pytest.mark.parametrize("alpha,limit,k", [(1.702, 2.0, 2), (1.702, 7.0, 2), (1.0, 0.5, 3)])
def test_moe_swiglu_limit_is_gpt_oss_experts(alpha, limit, k):
    experts, hidden, inter, tokens = 4, 16, 8, 9
    x = _rng.standard_normal((tokens, hidden)).astype(np.float32)
    logits = _rng.standard_normal((tokens, experts)).astype(np.float32)
    # Scaled with the limit so that it binds on some values at every limit.
    gate_up = (_rng.standard_normal((experts, hidden, 2 * inter)) * 0.25 * limit).astype(np.float32)
    gate_up_bias = _rng.standard_normal((experts, 2 * inter)).astype(np.float32)
    down = (_rng.standard_normal((experts, inter, hidden)) * 0.5).astype(np.float32)
    down_bias = _rng.standard_normal((experts, hidden)).astype(np.float32)
    inits = [
        numpy_helper.from_array(np.ascontiguousarray(gate_up.transpose(0, 2, 1)), "fc1"),
        numpy_helper.from_array(gate_up_bias, "fc1_bias"),
        numpy_helper.from_array(np.ascontiguousarray(down.transpose(0, 2, 1)), "fc2"),
        numpy_helper.from_array(down_bias, "fc2_bias"),
    ]
    node = helper.make_node(
        "MoE", ["x", "router", "fc1", "fc1_bias", "fc2", "fc2_bias"], ["y"], domain="com.microsoft",
        k=k, normalize_routing_weights=1, activation_type="swiglu", swiglu_fusion=1,
        activation_alpha=alpha, activation_beta=1.0, swiglu_limit=limit,
    )
    s = _session([node], [_f32("x"), _f32("router")], [_f32("y")], inits)
    y = s.run(None, {"x": x, "router": logits})[0]
    ref = moe_reference(x, logits, gate_up, gate_up_bias, down, down_bias, k, alpha, limit)
    assert np.abs(y - ref).max() / np.abs(ref).max() < EXACT
    # The limit binds here (else this would not test it): some gate or up value is clamped.
    pre = np.einsum("th,ehn->etn", x, gate_up) + gate_up_bias[:, None]
    assert (pre[..., 0::2] > limit).any() and (np.abs(pre[..., 1::2]) > limit).any()


def gqa_reference(q, k, v, past_k, past_v, sinks, heads, kv_heads, window):
    b, s, _ = q.shape
    d = past_k.shape[3]
    past = past_k.shape[2]
    total = past + s
    keys = np.concatenate([past_k, k.reshape(b, s, kv_heads, d).transpose(0, 2, 1, 3)], 2)
    values = np.concatenate([past_v, v.reshape(b, s, kv_heads, d).transpose(0, 2, 1, 3)], 2)
    qh = q.reshape(b, s, heads, d).transpose(0, 2, 1, 3).astype(np.float64)
    keys, values = np.repeat(keys, heads // kv_heads, 1), np.repeat(values, heads // kv_heads, 1)
    scores = qh @ keys.transpose(0, 1, 3, 2) / np.sqrt(d)
    query, key = np.arange(past, total)[:, None], np.arange(total)[None]
    allowed = key <= query
    if window > 0:
        allowed &= key > query - window
    scores = np.where(allowed, scores, -np.inf)
    rows = np.concatenate([scores, np.broadcast_to(sinks.reshape(1, heads, 1, 1), (b, heads, s, 1))], -1)
    p = np.exp(rows - rows.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p[..., :-1] @ values).transpose(0, 2, 1, 3).reshape(b, s, heads * d)


@pytest.mark.parametrize("seq,past,window", [(5, 0, -1), (1, 6, -1), (6, 0, 3), (1, 6, 3), (3, 4, 3)])
def test_gqa_head_sink_is_an_attention_sink(seq, past, window):
    heads, kv_heads, d = 4, 2, 16
    q = _rng.standard_normal((1, seq, heads * d)).astype(np.float32)
    k = _rng.standard_normal((1, seq, kv_heads * d)).astype(np.float32)
    v = _rng.standard_normal((1, seq, kv_heads * d)).astype(np.float32)
    past_k = _rng.standard_normal((1, kv_heads, past, d)).astype(np.float32)
    past_v = _rng.standard_normal((1, kv_heads, past, d)).astype(np.float32)
    sinks = (_rng.standard_normal(heads) * 3).astype(np.float32)
    inputs = ["q", "k", "v", "past_k", "past_v", "seqlens_k", "total", "", "", "", "", "sinks"]
    node = helper.make_node("GroupQueryAttention", inputs, ["y", "pk", "pv"], domain="com.microsoft",
                            num_heads=heads, kv_num_heads=kv_heads, local_window_size=window)
    graph_inputs = [_f32(n) for n in ["q", "k", "v", "past_k", "past_v"]]
    graph_inputs += [helper.make_tensor_value_info(n, TensorProto.INT32, None) for n in ["seqlens_k", "total"]] + [_f32("sinks")]
    s = _session([node], graph_inputs, [_f32("y"), _f32("pk"), _f32("pv")])
    total = past + seq
    feeds = {"q": q, "k": k, "v": v, "past_k": past_k, "past_v": past_v, "sinks": sinks,
             "seqlens_k": np.array([total - 1], np.int32), "total": np.array(total, np.int32)}
    y = s.run(None, feeds)[0]
    ref = gqa_reference(q, k, v, past_k, past_v, sinks, heads, kv_heads, window)
    assert np.abs(y - ref).max() < EXACT
    # The sinks matter (else this would not test them): without them the output differs.
    no_sink = gqa_reference(q, k, v, past_k, past_v, np.full(heads, -1e30, np.float32), heads, kv_heads, window)
    assert np.abs(no_sink - ref).max() > 1e-3
