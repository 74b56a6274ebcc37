"""The ONNX Runtime 1.32 CPU facts the `fuse.moe` rule rests on (rules/rules/fuse/moe.rule,
docs/rule-language.md "MoE facts"), checked on one com.microsoft MoE node against a numpy
reference that routes as transformers' Mixtral / Qwen MoE blocks do: softmax of the router
logits in f32, top-k, optional renormalization, silu(gate) * up per expert, the weighted sum.
If an ONNX Runtime upgrade changes one of them, this file says which."""
import itertools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper, TensorProto
from onnxruntime.capi import onnxruntime_pybind11_state as C

EXPERTS, TOP_K, HIDDEN, INTER, TOKENS = 4, 2, 16, 8, 10
# max |ORT - reference| / max |reference|: the kernel's f32 GEMMs against an f64 reference
# (measured 1.0e-7 to 2.1e-7 over these shapes and scales: f32 rounding, not a formula change).
EXACT = 3e-7

_rng = np.random.default_rng(17)
X = _rng.standard_normal((TOKENS, HIDDEN)).astype(np.float32)
LOGITS = _rng.standard_normal((TOKENS, EXPERTS)).astype(np.float32)
GATE = (_rng.standard_normal((EXPERTS, INTER, HIDDEN)) * 0.3).astype(np.float32)
UP = (_rng.standard_normal((EXPERTS, INTER, HIDDEN)) * 0.3).astype(np.float32)
DOWN = (_rng.standard_normal((EXPERTS, HIDDEN, INTER)) * 0.3).astype(np.float32)


def interleave(first, second):
    """[E, 2*inter, hidden] with row 2r = first[r] and row 2r+1 = second[r] per expert."""
    out = np.empty((first.shape[0], 2 * first.shape[1], first.shape[2]), np.float32)
    out[:, 0::2], out[:, 1::2] = first, second
    return out


def expert(e, x, scale=1.0):
    """Expert e's gated MLP on token x, gate and up weights multiplied by `scale`."""
    g = (GATE[e] * np.float32(scale)).astype(np.float64) @ x
    u = (UP[e] * np.float32(scale)).astype(np.float64) @ x
    return DOWN[e].astype(np.float64) @ (g / (1 + np.exp(-g)) * u)


def reference(logits, normalize, ties_to_lower=True, scale=1.0):
    """transformers' routing; ties among equal probabilities go to the lower expert index
    (torch.topk on CPU) unless `ties_to_lower` is False."""
    out = np.zeros((len(logits), HIDDEN))
    for t, row in enumerate(logits.astype(np.float32)):
        p = np.exp(row - row.max())
        p = p / p.sum()
        order = np.argsort(-p, kind="stable") if ties_to_lower else (len(p) - 1 - np.argsort(-p[::-1], kind="stable"))
        chosen = order[:TOP_K]
        w = p[chosen].astype(np.float64)
        if normalize:
            w = w / w.sum()
        for e, we in zip(chosen, w):
            out[t] += we * expert(e, X[t].astype(np.float64), scale)
    return out


def model(fc1, fc3=None, **attrs):
    inputs = ["x", "router", "fc1", "", "fc2"] + (["", "fc3"] if fc3 is not None else [])
    attrs = {"k": TOP_K, "activation_type": "swiglu", **attrs}
    node = helper.make_node("MoE", inputs, ["y"], domain="com.microsoft", **attrs)
    weights = [numpy_helper.from_array(fc1, "fc1"), numpy_helper.from_array(DOWN, "fc2")]
    if fc3 is not None:
        weights.append(numpy_helper.from_array(fc3, "fc3"))
    io = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
    graph = helper.make_graph([node], "moe", [io("x"), io("router")], [io("y")], weights)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    return m.SerializeToString()


def session(fc1, **attrs):
    return ort.InferenceSession(model(fc1, **attrs), providers=["CPUExecutionProvider"])


def run(fc1, x=X, logits=LOGITS, **attrs):
    return session(fc1, **attrs).run(None, {"x": x, "router": logits})[0]


def error(y, ref):
    return np.abs(y.reshape(ref.shape) - ref).max() / np.abs(ref).max()


FUSED = dict(swiglu_fusion=1, activation_alpha=1.0, activation_beta=0.0)


def test_schema_slots_and_attribute_defaults():
    (s,) = [s for s in C.get_all_operator_schema() if s.name == "MoE" and s.domain == "com.microsoft"]
    assert s.since_version == 1
    assert [i.name for i in s.inputs] == [
        "input", "router_probs", "fc1_experts_weights", "fc1_experts_bias",
        "fc2_experts_weights", "fc2_experts_bias", "fc3_experts_weights", "fc3_experts_bias",
    ]
    defaults = {}
    for name, a in s.attributes.items():
        proto = onnx.AttributeProto()
        proto.ParseFromString(a._default_value)
        defaults[name] = helper.get_attribute_value(proto) if proto.name else None
    assert defaults["k"] == 1 and defaults["normalize_routing_weights"] == 0
    assert defaults["activation_type"] == b"relu" and defaults["swiglu_fusion"] == 0
    # alpha 1 and beta 0 make swiglu = g * sigmoid(g) * up; swiglu_limit has no default (no clamp).
    assert defaults["activation_alpha"] == 1.0 and defaults["activation_beta"] == 0.0
    assert defaults["swiglu_limit"] is None


def test_cpu_registers_moe_for_float_only():
    kernels = [k for k in C.get_all_opkernel_def() if k.op_name == "MoE" and k.domain == "com.microsoft" and k.provider == "CPUExecutionProvider"]
    assert len(kernels) == 1
    assert kernels[0].type_constraints == {"T": ["tensor(float)"]}


@pytest.mark.parametrize("normalize", [1, 0])
def test_router_logits_swiglu_interleaved_gate_on_even_rows(normalize):
    """router_probs takes the logits (the kernel does softmax and top-k); fc1 row 2r is gate row
    r and row 2r+1 up row r; normalize_routing_weights renormalizes the top-k weights."""
    ref = reference(LOGITS, normalize)
    assert error(run(interleave(GATE, UP), normalize_routing_weights=normalize, **FUSED), ref) < EXACT
    # The other parity and the concatenated [gate | up] layout are wrong, not nearly right.
    assert error(run(interleave(UP, GATE), normalize_routing_weights=normalize, **FUSED), ref) > 0.1
    assert error(run(np.concatenate([GATE, UP], 1), normalize_routing_weights=normalize, **FUSED), ref) > 0.1
    # The other setting of normalize is wrong too (the attribute is read from the graph).
    assert error(run(interleave(GATE, UP), normalize_routing_weights=1 - normalize, **FUSED), ref) > 1e-3


def test_swiglu_defaults_are_plain_silu_times_up_without_clamp():
    """Large activations: the defaults clamp nothing, and alpha 1 / beta 0 change nothing."""
    big = 20.0
    fc1 = interleave(GATE * np.float32(big), UP * np.float32(big))
    plain = run(fc1, swiglu_fusion=1)
    assert np.array_equal(plain, run(fc1, **FUSED))
    ref = reference(LOGITS, 0, scale=big)
    assert np.abs(ref).max() > 100  # gates far past any clamp a swiglu variant uses (7)
    assert error(plain, ref) < EXACT
    assert error(run(fc1, swiglu_limit=7.0, **FUSED), ref) > 0.1
    assert error(run(fc1, swiglu_fusion=1, activation_alpha=1.702), ref) > 1e-4
    assert error(run(fc1, swiglu_fusion=1, activation_beta=1.0), ref) > 1e-3


def test_three_d_input_with_two_d_router():
    """input [batch, seq, hidden] is taken; router_probs must be [tokens, experts]."""
    fc1 = interleave(GATE, UP)
    y = run(fc1, x=X.reshape(2, TOKENS // 2, HIDDEN), normalize_routing_weights=1, **FUSED)
    assert y.shape == (2, TOKENS // 2, HIDDEN)
    assert error(y, reference(LOGITS, 1)) < EXACT
    with pytest.raises(Exception, match="router_probs"):
        run(fc1, x=X.reshape(2, TOKENS // 2, HIDDEN), logits=LOGITS.reshape(2, TOKENS // 2, EXPERTS), **FUSED)


def test_cpu_refuses_the_unfused_and_concatenated_layouts_and_fc3():
    with pytest.raises(Exception, match="only supports interleaved SwiGLU"):
        session(interleave(GATE, UP), swiglu_fusion=0)
    with pytest.raises(Exception, match="only supports interleaved SwiGLU"):
        session(np.concatenate([GATE, UP], 1), swiglu_fusion=2)
    s = ort.InferenceSession(model(interleave(GATE, UP), fc3=UP, **FUSED), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match="FC3 is not implemented"):
        s.run(None, {"x": X, "router": LOGITS})


def test_top_k_ties_go_to_the_higher_expert_index():
    """Equal probabilities: the kernel keeps the higher expert index (it sorts (p, e) pairs
    descending), torch.topk and the generic graph's rank count the lower one. Only exact ties
    differ, which random float logits do not produce."""
    logits = LOGITS.copy()
    ties = [[0.5, 0.5, 0.5, 0.5], [0.1, 0.7, 0.7, 0.7], [0.9, 0.2, 0.2, 0.2], [0.3, 0.3, 0.3, 0.9]]
    logits[: len(ties)] = ties
    y = run(interleave(GATE, UP), logits=logits, normalize_routing_weights=0, **FUSED)
    higher, lower = reference(logits, 0, ties_to_lower=False), reference(logits, 0)
    assert error(y, higher) < EXACT
    for t in range(len(ties)):
        assert np.abs(y[t] - lower[t]).max() > 1e-3, f"row {t} {ties[t]}: ties went to the lower index"
    assert error(y[len(ties):], lower[len(ties):]) < EXACT
    # The chosen pairs, spelled out.
    for t, want in enumerate([(2, 3), (2, 3), (0, 3), (2, 3)]):
        p = np.exp(logits[t] - logits[t].max())
        p = p / p.sum()
        best = min(itertools.combinations(range(EXPERTS), TOP_K), key=lambda c: np.abs(sum(p[e] * expert(e, X[t]) for e in c) - y[t]).max())
        assert best == want, f"row {t}: kernel chose {best}"


@pytest.mark.parametrize("normalize", [1, 0])
def test_log_weights_route_any_top_k(normalize):
    """fuse.moe.grouped's premise: with router_probs = log(w), where w is positive on the k
    experts a token chose by any rule (DeepSeek's groups, a bias for the choice) and 0 elsewhere
    (log: -inf), the kernel computes exactly those experts weighted w / sum(w), with no NaN,
    whichever normalize_routing_weights says; the graph multiplies by sum(w) * factor after it."""
    rng = np.random.default_rng(5)
    w = np.zeros((TOKENS, EXPERTS), np.float32)
    for t in range(TOKENS):
        # Chosen against the logits' order, so the kernel cannot be picking by LOGITS.
        w[t, rng.choice(EXPERTS, TOP_K, replace=False)] = rng.uniform(0.01, 0.9, TOP_K)
    with np.errstate(divide="ignore"):
        logw = np.log(w)
    assert np.isinf(logw).sum() == TOKENS * (EXPERTS - TOP_K)
    y = run(interleave(GATE, UP), logits=logw, normalize_routing_weights=normalize, **FUSED)
    ref = np.zeros((TOKENS, HIDDEN))
    for t in range(TOKENS):
        for e in np.flatnonzero(w[t]):
            ref[t] += w[t, e] / w[t].sum() * expert(e, X[t].astype(np.float64))
    assert not np.isnan(y).any()
    assert error(y, ref) < EXACT
    # The weights themselves (not their logarithm) route by the softmax of w: wrong.
    assert error(run(interleave(GATE, UP), logits=w, normalize_routing_weights=normalize, **FUSED), ref) > 1e-3
