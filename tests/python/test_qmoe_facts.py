"""The ONNX Runtime facts the quantized-experts step rests on (docs/quantization.md, "Quantized
experts: QMoE"), checked on one com.microsoft QMoE node on the CPU EP against a numpy reference
that runs the experts on the dequantized weights: the expert bytes are ORT's own
`quantize_matmul_4bits` / `quantize_matmul_8bits` output, per expert, of the `[N, K]` weight
(weights_prepacked = 0 reads that raw layout). If an ONNX Runtime upgrade changes one of them,
this file says which."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.capi import onnxruntime_pybind11_state as C

EXPERTS, INTER, HIDDEN, TOP_K, TOKENS, BLOCK = 4, 64, 96, 2, 7, 32


def quantize(w, bits, symmetric):
    """ORT's block quantizer on one expert's [N, K] weight: data [N, K*bits/8], scales
    [N, K/BLOCK], packed zero points [N, ceil(K/BLOCK*bits/8)]."""
    n, k = w.shape
    blocks = k // BLOCK
    data = np.zeros((n, blocks, BLOCK * bits // 8), np.uint8)
    scales = np.zeros((n, blocks), np.float32)
    zero_points = np.zeros((n, (blocks * bits + 7) // 8), np.uint8)
    quantizer = C.quantize_matmul_4bits if bits == 4 else C.quantize_matmul_8bits
    quantizer(data, np.ascontiguousarray(w.T), scales, zero_points, BLOCK, n, k, symmetric)
    return data.reshape(n, -1), scales, zero_points


def dequantize(data, scales, zero_points, bits, symmetric):
    n, blocks = scales.shape
    if bits == 4:
        q = np.stack([data & 15, data >> 4], -1).reshape(n, blocks, BLOCK)
        z = np.stack([zero_points & 15, zero_points >> 4], -1).reshape(n, -1)[:, :blocks]
    else:
        q, z = data.reshape(n, blocks, BLOCK), zero_points[:, :blocks]
    z = np.full((n, blocks), 2 ** (bits - 1)) if symmetric else z
    return ((q.astype(np.float32) - z[..., None]) * scales[..., None]).reshape(n, -1)


def experts(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((TOKENS, HIDDEN)).astype(np.float32)
    logits = rng.standard_normal((TOKENS, EXPERTS)).astype(np.float32)
    gate, up = (rng.standard_normal((EXPERTS, INTER, HIDDEN)).astype(np.float32) * 0.1 for _ in range(2))
    down = rng.standard_normal((EXPERTS, HIDDEN, INTER)).astype(np.float32) * 0.1
    # swiglu_fusion = 1: fc1 rows interleaved, gate row r at 2r, up row r at 2r + 1.
    fc1 = np.stack([gate, up], 2).reshape(EXPERTS, 2 * INTER, HIDDEN)
    return x, logits, fc1, down


def reference(x, logits, fc1, fc2, renormalize):
    """transformers' routing (softmax over all experts in f32, top k, optionally renormalized)
    and silu(gate) * up experts, on float weights."""
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = np.zeros((TOKENS, HIDDEN))
    for t in range(TOKENS):
        top = np.argsort(-p[t], kind="stable")[:TOP_K]
        w = p[t, top] / p[t, top].sum() if renormalize else p[t, top]
        for e, we in zip(top, w):
            g, u = fc1[e][0::2] @ x[t], fc1[e][1::2] @ x[t]
            out[t] += we * (fc2[e] @ (g / (1 + np.exp(-g)) * u))
    return out, p


def qmoe(x, logits, fc1, fc2, bits, symmetric, normalize, router_weights=None, accuracy_level=None):
    """Runs one QMoE node; returns its output and the dequantized fc1, fc2."""
    q1 = [quantize(fc1[e], bits, symmetric) for e in range(EXPERTS)]
    q2 = [quantize(fc2[e], bits, symmetric) for e in range(EXPERTS)]
    stack = lambda q, i: np.stack([part[i] for part in q])
    inits = [numpy_helper.from_array(a, n) for a, n in [(stack(q1, 0), "fc1"), (stack(q1, 1), "fc1_scales"), (stack(q2, 0), "fc2"), (stack(q2, 1), "fc2_scales")]]
    inputs = ["x", "router", "fc1", "fc1_scales", "", "fc2", "fc2_scales", "", "", "", "", "", "", "", ""]
    if not symmetric:
        inits += [numpy_helper.from_array(stack(q1, 2), "fc1_zp"), numpy_helper.from_array(stack(q2, 2), "fc2_zp")]
        inputs[11], inputs[12] = "fc1_zp", "fc2_zp"
    feeds = {"x": x, "router": logits}
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [TOKENS, HIDDEN]), helper.make_tensor_value_info("router", TensorProto.FLOAT, [TOKENS, EXPERTS])]
    if router_weights is not None:
        inputs[14] = "router_weights"
        feeds["router_weights"] = router_weights.astype(np.float32)
        graph_inputs.append(helper.make_tensor_value_info("router_weights", TensorProto.FLOAT, [TOKENS, EXPERTS]))
    while inputs[-1] == "":
        inputs.pop()
    attrs = dict(k=TOP_K, normalize_routing_weights=normalize, activation_type="swiglu", swiglu_fusion=1, activation_alpha=1.0, activation_beta=0.0,
                 expert_weight_bits=bits, block_size=BLOCK, weights_prepacked=0)
    if accuracy_level is not None:
        attrs["accuracy_level"] = accuracy_level
    node = helper.make_node("QMoE", inputs, ["y"], domain="com.microsoft", **attrs)
    graph = helper.make_graph([node], "qmoe", graph_inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [TOKENS, HIDDEN])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24), helper.make_opsetid("com.microsoft", 1)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    dq = lambda q: np.stack([dequantize(*part, bits, symmetric) for part in q])
    return session.run(None, feeds)[0], dq(q1), dq(q2)


def test_the_cpu_kernel_is_registered_for_the_activation_dtypes():
    kernels = [k for k in C.get_all_opkernel_def() if k.op_name == "QMoE" and k.provider == "CPUExecutionProvider"]
    assert sorted(k.type_constraints["T"][0] for k in kernels) == ["tensor(bfloat16)", "tensor(float)", "tensor(float16)"]
    assert all(k.type_constraints["T1"] == ["tensor(uint8)"] for k in kernels)


@pytest.mark.parametrize("symmetric", [True, False])
def test_int4_experts_are_exact_on_their_dequantized_weights(symmetric):
    """4-bit, block-wise, raw layout (weights_prepacked 0), float activations (accuracy_level
    unset): exact to float rounding; no zero points means 8, as MatMulNBits."""
    x, logits, fc1, fc2 = experts(0)
    y, w1, w2 = qmoe(x, logits, fc1, fc2, 4, symmetric, normalize=1)
    ref, _ = reference(x, logits, w1, w2, renormalize=True)
    assert np.abs(y - ref).max() < 1e-6 * max(1.0, np.abs(ref).max())


def test_normalize_0_is_ignored_without_router_weights():
    """The CPU QMoE kernel renormalizes the top-k weights whatever normalize_routing_weights
    says; a family that does not (Qwen2-MoE) must pass the softmax as router_weights."""
    x, logits, fc1, fc2 = experts(1)
    y, w1, w2 = qmoe(x, logits, fc1, fc2, 4, True, normalize=0)
    renormalized, _ = reference(x, logits, w1, w2, renormalize=True)
    plain, _ = reference(x, logits, w1, w2, renormalize=False)
    assert np.abs(y - renormalized).max() < 1e-6
    assert np.abs(y - plain).max() > 1e-2


def test_router_weights_give_the_softmax_weights_unrenormalized():
    """router_probs (the logits) selects the top k; router_weights (the softmax over every
    expert) is gathered at them as the mixing weights, not renormalized with normalize 0."""
    x, logits, fc1, fc2 = experts(2)
    _, p = reference(x, logits, fc1, fc2, renormalize=False)
    y, w1, w2 = qmoe(x, logits, fc1, fc2, 4, True, normalize=0, router_weights=p)
    plain, _ = reference(x, logits, w1, w2, renormalize=False)
    assert np.abs(y - plain).max() < 1e-6


@pytest.mark.parametrize("bits,accuracy_level", [(8, None), (4, 4)])
def test_int8_activation_paths_are_close_not_exact(bits, accuracy_level):
    """8-bit experts (every accuracy level) and 4-bit with accuracy_level 4 quantize the
    activations to int8 inside the kernel: about 1e-2 from the float result, as MatMulNBits'
    accuracy level 4."""
    x, logits, fc1, fc2 = experts(3)
    y, w1, w2 = qmoe(x, logits, fc1, fc2, bits, True, normalize=1, accuracy_level=accuracy_level)
    ref, _ = reference(x, logits, w1, w2, renormalize=True)
    error = np.abs(y - ref).max() / np.abs(ref).max()
    assert 1e-5 < error < 5e-2, error
