"""Quantized packages (`--quant`) on ONNX Runtime's CPU EP.

* The graph adds no error beyond the weights': every decoder fixture's cpu int4 package (built
  with --accuracy-level 0: no activation quantization) and its `default` int4 package
  (DequantizeLinear + MatMul, which ONNX Runtime fuses into MatMulNBits; the session entry
  below keeps that fused node at accuracy level 0) give, at f32 tolerance, the logits of the f32
  package of the same EP in which every quantized weight is replaced by its dequantized value
  (computed here with numpy from the package's own B, scales and zero points).
* At the table's default accuracy level, the cpu package's logits equal those of ONNX Runtime's
  own quantizer (`MatMulNBitsQuantizer`, same block size and symmetry) applied to our cpu f32
  package, embeddings kept float as that quantizer keeps them.
"""
import json
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from conftest import DECODER_FIXTURES, FIXTURES, MOE_FIXTURES, build_with, genai_greedy, tailor_bin

TOL = 1e-4


def load(pkg):
    return onnx.load(str(pkg / "model.onnx"), load_external_data=True)


def reference_inputs(fixture):
    from safetensors.numpy import load_file

    ref = load_file(str(FIXTURES / fixture / "reference.safetensors"))
    return ref


def feeds_for(model, ids, mask, pos):
    feeds = {"input_ids": ids.astype(np.int64), "attention_mask": mask.astype(np.int64)}
    names = {i.name for i in model.graph.input}
    if "position_ids" in names:
        feeds["position_ids"] = pos.astype(np.int64)
    for i in model.graph.input:
        if i.name.startswith("past_key_values."):
            dims = [d.dim_value if d.dim_value else 0 for d in i.type.tensor_type.shape.dim]
            dims[0] = ids.shape[0]
            feeds[i.name] = np.zeros(dims, dtype=np.float32)
    return feeds


def logits(model, fixture, accuracy_level_0=False):
    so = ort.SessionOptions()
    if accuracy_level_0:
        so.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", "0")
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    ref = reference_inputs(fixture)
    feeds = feeds_for(model, ref["input_ids"], ref["attention_mask"], ref["position_ids"])
    return sess.run(["logits"], feeds)[0]


def inits(model):
    return {i.name: i for i in model.graph.initializer}


def unpack_nbits(b, bits, k):
    """Packed rows (B [N, k_blocks, blob], or packed zero points [N, bytes]) -> the first k stored
    values of each row [N, k]; 4-bit values low nibble first."""
    n = b.shape[0]
    flat = b.reshape(n, -1)
    if bits == 4:
        q = np.empty((n, flat.shape[1] * 2), dtype=np.int32)
        q[:, 0::2] = flat & 0x0F
        q[:, 1::2] = flat >> 4
    else:
        q = flat.astype(np.int32)
    return q[:, :k]


def dequant_matmul_nbits(node, init):
    """[K, N] float weight of a MatMulNBits node."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    k, n, bits, bs = attrs["K"], attrs["N"], attrs["bits"], attrs["block_size"]
    b = numpy_helper.to_array(init[node.input[1]])
    scales = numpy_helper.to_array(init[node.input[2]]).astype(np.float32).reshape(n, -1)
    assert b.ndim == 3 and b.shape[2] == bs * bits // 8, f"{node.name}: B {b.shape} for {bits} bits, block {bs}"
    q = unpack_nbits(b, bits, k)
    kb = scales.shape[1]
    if len(node.input) > 3 and node.input[3]:
        zp = unpack_nbits(numpy_helper.to_array(init[node.input[3]]), bits, kb)
    else:
        zp = np.full((n, kb), 1 << (bits - 1), dtype=np.int32)
    block = np.arange(k) // bs
    w_nk = (q - zp[:, block]).astype(np.float32) * scales[:, block]
    return w_nk.T.copy()


DQ_BITS = {onnx.TensorProto.INT4: 4, onnx.TensorProto.UINT4: 4, onnx.TensorProto.INT8: 8, onnx.TensorProto.UINT8: 8}


def dequant_dq(node, init):
    """Float output of a blocked DequantizeLinear on [K, N] (axis 0)."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    bs = attrs["block_size"]
    x = numpy_helper.to_array(init[node.input[0]]).astype(np.int32)
    scale = numpy_helper.to_array(init[node.input[1]]).astype(np.float32)
    zp = numpy_helper.to_array(init[node.input[2]]).astype(np.int32) if len(node.input) > 2 else 0
    rows = np.arange(x.shape[0]) // bs
    zp = zp[rows] if not np.isscalar(zp) else zp
    return ((x - zp) * scale[rows]).astype(np.float32)


def dequant_qmoe(node, init):
    """{fc1 slot: [E, 2I, H], fc2 slot: [E, H, I]} float stacks of a QMoE node: per expert, the
    raw MatMulNBits bytes of its [N, K] weight (weights_prepacked 0)."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    bits, bs = attrs["expert_weight_bits"], attrs["block_size"]
    out = {}
    # (MoE slot, QMoE data, scales, zero points)
    for moe_slot, data_slot, scale_slot, zp_slot in [(2, 2, 3, 11), (4, 5, 6, 12)]:
        data = numpy_helper.to_array(init[node.input[data_slot]])
        scales = numpy_helper.to_array(init[node.input[scale_slot]]).astype(np.float32)
        e, n, kb = scales.shape
        k = kb * bs
        stacks = []
        for x in range(e):
            inputs = ["a", "b", "s"] + (["z"] if len(node.input) > zp_slot and node.input[zp_slot] else [])
            tables = {"b": numpy_helper.from_array(data[x].reshape(n, kb, -1), "b"), "s": numpy_helper.from_array(scales[x], "s")}
            if len(inputs) == 4:
                tables["z"] = numpy_helper.from_array(numpy_helper.to_array(init[node.input[zp_slot]])[x], "z")
            as_matmul = onnx.helper.make_node("MatMulNBits", inputs, ["y"], K=k, N=n, bits=bits, block_size=bs)
            stacks.append(dequant_matmul_nbits(as_matmul, tables).T)
        out[moe_slot] = np.stack(stacks)
    return out


def unpack_flat(part, count, signed):
    """The first `count` values of an ONNX 4-bit tensor's bytes, packed over the flattened
    tensor low nibble first (a `uint8` view of them)."""
    b = numpy_helper.to_array(part).reshape(-1)
    q = np.stack([b & 0x0F, b >> 4], axis=-1).reshape(-1)[:count].astype(np.int32)
    return np.where(q >= 8, q - 16, q) if signed else q


def dequant_decoded_table(init, weight, vocab, hidden):
    """[V, H] table of the `default` format's decoded embedding (4-bit, or float offsets): the
    head's [K = H, V] DequantizeLinear parts read by the spec, from their flat views: int4 data
    signed (symmetric, or codes against the mid point with float offsets), uint4 with uint4 zero
    points when asymmetric."""
    q = f"{weight}/quant"
    data = init.get(f"{q}/data/bytes") or init[f"{q}/data/flat"]
    scales = numpy_helper.to_array(init[f"{q}/scales/flat"]).astype(np.float32).reshape(-1, vocab)
    block = -(-hidden // scales.shape[0])
    if data.data_type == onnx.TensorProto.UINT8 and data.name.endswith("/bytes"):
        signed = f"{q}/zero_points/bytes" not in init
        codes = unpack_flat(data, hidden * vocab, signed).reshape(hidden, vocab)
    else:
        codes = numpy_helper.to_array(data).astype(np.int32).reshape(hidden, vocab)
    rows = np.arange(hidden) // block
    if f"{q}/zero_points/bytes" in init:
        zp = unpack_flat(init[f"{q}/zero_points/bytes"], scales.size, False).reshape(scales.shape)
        w = (codes - zp[rows]).astype(np.float32) * scales[rows]
    else:
        w = codes.astype(np.float32) * scales[rows]
    if f"{q}/offsets/flat" in init:
        w = w + numpy_helper.to_array(init[f"{q}/offsets/flat"]).astype(np.float32).reshape(-1, vocab)[rows]
    return w.T.copy()


def dequantized_weights(qmodel, table=None):
    """{node name: [K, N] or [V, H] float weight} for every quantized node of a package ({MoE
    input slot: stack} for a QMoE node). `table`: (vocab, hidden) of a `default` package whose
    embedding rows are decoded (4-bit, or float offsets)."""
    init = inits(qmodel)
    out = {}
    producers = {o: n for n in qmodel.graph.node for o in n.output}
    for node in qmodel.graph.node:
        if node.op_type == "Gather" and node.input[0].endswith(("/quant/data/bytes", "/quant/data/flat")):
            assert table, "a decoded table needs its (vocab, hidden)"
            weight = node.input[0].rsplit("/quant/", 1)[0]
            out[node.name] = dequant_decoded_table(init, weight, *table)
        elif node.op_type == "MatMulNBits":
            out[node.name] = dequant_matmul_nbits(node, init)
        elif node.op_type == "MatMul" and node.input[1] in producers and producers[node.input[1]].op_type == "DequantizeLinear":
            out[node.name] = dequant_dq(producers[node.input[1]], init)
        elif node.op_type == "GatherBlockQuantized":
            # The table's bytes are MatMulNBits' B for the [V, H] table read as [K = H, N = V].
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            data = numpy_helper.to_array(init[node.input[0]])
            scales = numpy_helper.to_array(init[node.input[2]]).astype(np.float32)
            v, bits, bs = data.shape[0], attrs["bits"], attrs["block_size"]
            kb = scales.reshape(v, -1).shape[1]
            as_matmul = onnx.helper.make_node("MatMulNBits", ["a", "b", "s"] + list(node.input[3:]), ["y"],
                                              K=kb * bs, N=v, bits=bits, block_size=bs)
            tables = dict(init)
            tables["b"] = numpy_helper.from_array(data.reshape(v, kb, -1), "b")
            tables["s"] = numpy_helper.from_array(scales.reshape(v, kb), "s")
            out[node.name] = dequant_matmul_nbits(as_matmul, tables).T.copy()
        elif node.op_type == "QMoE":
            out[node.name] = dequant_qmoe(node, init)
        elif node.op_type == "Gather" and node.input[0] in init and init[node.input[0]].data_type in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8):
            # The default format's embedding: Gather(axis 1) of the head's [K, V] codes, scales
            # and zero points, then DequantizeLinear (axis 0) and a Transpose.
            dq = next((n for n in qmodel.graph.node if n.op_type == "DequantizeLinear" and n.input[0] == node.output[0]), None)
            if dq is None:  # the Gather of its zero points
                continue
            table = {i: init[producers[i].input[0]] for i in dq.input[1:]}
            table[node.output[0]] = init[node.input[0]]
            out[node.name] = dequant_dq(dq, table).T.copy()
    return out


def own_head_copy(fmodel, init, node, slot, w):
    """Points `node`'s input `slot` (the tied table E, stored [N, K]) at a new initializer holding
    the dequantized head `w` ([K, N]) transposed, so the Gather keeps reading E."""
    source = node.input[slot]
    copy = numpy_helper.from_array(w.T.copy().astype(numpy_helper.to_array(init[source]).dtype), source + "/head")
    fmodel.graph.initializer.append(copy)
    node.input[slot] = copy.name


def with_dequantized_weights(fmodel, weights):
    """The float package with each quantized node's weight replaced by its dequantized value
    (nodes keep their names through the quantize step)."""
    init = inits(fmodel)
    producers = {o: n for n in fmodel.graph.node for o in n.output}
    replaced = 0
    for node in fmodel.graph.node:
        # A float tied head is Gemm(Flatten(A), E) [transB 1] (fold.tied_head_gemm), named
        # after the MatMul it replaced; the quantized package's head kept the MatMul's name.
        key = node.name.removesuffix("/Gemm") if node.op_type == "Gemm" else node.name
        if key not in weights:
            continue
        w = weights[key]
        if node.op_type == "MoE":  # the float package's fused experts, by input slot
            for slot, stack in w.items():
                init[node.input[slot]].CopyFrom(numpy_helper.from_array(stack.astype(np.float32), node.input[slot]))
            replaced += 1
            continue
        if node.op_type == "Gemm":  # reads E as [N, K] (transB)
            own_head_copy(fmodel, init, node, 1, w)
            replaced += 1
            continue
        if node.op_type == "MatMul":
            b = node.input[1]
            if b in init:
                target, value = b, w
            else:  # a tied head, MatMul(A, Transpose(E)): the Transpose reads E as [N, K]
                own_head_copy(fmodel, init, producers[b], 0, w)
                replaced += 1
                continue
        else:
            assert node.op_type == "Gather", node.op_type
            target, value = node.input[0], w
        dtype = numpy_helper.to_array(init[target]).dtype
        init[target].CopyFrom(numpy_helper.from_array(value.astype(dtype), target))
        replaced += 1
    assert replaced == len(weights), f"{replaced} of {len(weights)} quantized nodes found in the float package"
    return fmodel


@pytest.mark.parametrize("fixture", DECODER_FIXTURES)
@pytest.mark.parametrize("ep,extra", [("cpu", ["--accuracy-level", "0"]), ("default", [])])
def test_int4_adds_no_error_beyond_the_weights(tmp_path, fixture, ep, extra):
    q = load(build_with(tmp_path / "q", fixture, ep, ["--quant", "int4"] + extra))
    f = load(build_with(tmp_path / "f", fixture, ep, []))
    weights = dequantized_weights(q)
    assert weights, "nothing was quantized"
    expected = logits(with_dequantized_weights(f, weights), fixture)
    got = logits(q, fixture, accuracy_level_0=True)
    err = float(np.abs(got - expected).max())
    assert err < TOL, f"{fixture} {ep} int4: max |logits - dequantized f32| = {err}"


EMBEDDING_CASES = [(fixture, asym, bits, []) for fixture in ["tiny-llama", "tiny-qwen2-tied-mqa", "tiny-gemma"]
                   for asym in [False, True] for bits in ["int8", "int4"]]
# A block longer than the rows (hidden 64): one partial block per row, K not whole blocks.
EMBEDDING_CASES += [("tiny-qwen2-tied-mqa", asym, "int4", ["--block-size", "128"]) for asym in [False, True]]


@pytest.mark.parametrize("fixture,asym,bits,extra", EMBEDDING_CASES)
def test_default_quantized_embeddings_gather_rows(tmp_path, fixture, asym, bits, extra):
    """`--ep default --quant-embeddings int8|int4`: standard ops only, no float table left, and
    the logits of the f32 package with the dequantized weights, untied, tied and Gemma's scaled
    embedding. 8 bits: Gather of the head's [K, V] codes, scales and zero points on axis 1,
    DequantizeLinear, Transpose. 4 bits (ONNX Runtime's CPU Gather has no int4 kernel): Gather
    of a uint8 view of the same bytes, decoded with standard ops; the table here is decoded
    from those bytes by the ONNX 4-bit packing, independently of the graph; a tied head's
    DequantizeLinear data is the same bytes, stored once; and the decoded table is the float
    table within the quantization's error (a view of wrong bytes would decode consistently)."""
    flags = ["--quant", "int4", "--quant-embeddings", bits] + (["--asymmetric"] if asym else []) + extra
    pkg = build_with(tmp_path / "q", fixture, "default", flags)
    q = load(pkg)
    f = load(build_with(tmp_path / "f", fixture, "default", []))
    config = json.loads((FIXTURES / fixture / "config.json").read_text())
    vocab, hidden = config["vocab_size"], config["hidden_size"]
    assert not [n for n in q.graph.node if n.domain not in ("", "ai.onnx")]
    init = inits(q)
    if bits == "int8":
        codes = [n for n in q.graph.node if n.op_type == "Gather" and n.input[0].endswith("/quant/data")]
        assert [numpy_helper.to_array(init[g.input[0]]).dtype for g in codes] == [np.uint8 if asym else np.int8], [g.input for g in codes]
    else:
        codes = [n for n in q.graph.node if n.op_type == "Gather" and n.input[0].endswith("/quant/data/bytes")]
        assert len(codes) == 1, [n.input for n in q.graph.node if n.op_type == "Gather"]
        view = init[codes[0].input[0]]
        assert (view.data_type, list(view.dims)) == (onnx.TensorProto.UINT8, [-(-hidden * vocab // 2)])
        head = init.get(codes[0].input[0].removesuffix("/bytes"))
        assert (head is not None) == bool(config.get("tie_word_embeddings")), "a tied head reads the same int4 data"
        if head is not None:  # tied: the head's int4 data, one range of the data file
            assert head.data_type == (onnx.TensorProto.UINT4 if asym else onnx.TensorProto.INT4)
            raw = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
            where = {t.name: {e.key: e.value for e in t.external_data} for t in raw.graph.initializer}
            assert where[head.name]["offset"] == where[view.name]["offset"], (where[head.name], where[view.name])
    assert "model.embed_tokens.weight" not in init, "the float table is left"
    weights = dequantized_weights(q, table=(vocab, hidden))
    table = [w for name, w in weights.items() if "embed_tokens" in name]
    assert len(table) == 1, list(weights)
    floats = numpy_helper.to_array(inits(f)["model.embed_tokens.weight"])
    rel = float(np.sqrt(np.mean((table[0] - floats) ** 2) / np.mean(floats ** 2)))
    assert rel < 0.25, f"the decoded table is {rel:.3f} (relative RMS) from the float one"
    expected = logits(with_dequantized_weights(f, weights), fixture)
    got = logits(q, fixture, accuracy_level_0=True)
    err = float(np.abs(got - expected).max())
    assert err < TOL, f"{fixture} default {bits} embeddings: max |logits - dequantized f32| = {err}"


@pytest.mark.parametrize("asym", [False, True])
def test_cpu_default_level_equals_onnx_runtimes_quantizer(tmp_path, asym):
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    fixture = "tiny-llama"
    flags = ["--quant", "int4", "--quant-embeddings", "none", "--block-size", "32"] + (["--asymmetric"] if asym else [])
    ours = load(build_with(tmp_path / "q", fixture, "cpu", flags))
    f = load(build_with(tmp_path / "f", fixture, "cpu", []))
    cfg = DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=not asym, accuracy_level=4)
    quantizer = MatMulNBitsQuantizer(f, algo_config=cfg)
    quantizer.process()
    theirs = quantizer.model.model
    a, b = logits(ours, fixture), logits(theirs, fixture)
    assert float(np.abs(a - b).max()) < 1e-5, float(np.abs(a - b).max())
    # And the weights are the same bytes.
    ti, oi = inits(theirs), inits(ours)
    ours_mm = {n.name: n for n in ours.graph.node if n.op_type == "MatMulNBits"}
    theirs_mm = [n for n in theirs.graph.node if n.op_type == "MatMulNBits"]
    assert len(ours_mm) == len(theirs_mm) > 0
    for n in theirs_mm:
        mine = ours_mm[n.name.removesuffix("_Q4")] if n.name not in ours_mm else ours_mm[n.name]
        for slot in range(1, len(n.input)):
            assert numpy_helper.to_array(ti[n.input[slot]]).tobytes() == numpy_helper.to_array(oi[mine.input[slot]]).tobytes(), n.name


def dq_matmuls(model):
    """{MatMul node name: (x, x_scale, x_zero_point or None) initializers} for every MatMul whose B
    is a blocked DequantizeLinear of initializers."""
    init = inits(model)
    producers = {o: n for n in model.graph.node for o in n.output}
    out = {}
    for node in model.graph.node:
        dq = producers.get(node.input[1]) if node.op_type == "MatMul" else None
        if dq is not None and dq.op_type == "DequantizeLinear":
            out[node.name] = [init[name] if name else None for name in list(dq.input) + [""] * (3 - len(dq.input))]
    return out


def same_tensor(a, b, what):
    """Same ONNX element type, dims and values (4-bit values compared unpacked, as numpy_helper
    reads them)."""
    assert (a.data_type, list(a.dims)) == (b.data_type, list(b.dims)), (what, a.data_type, list(a.dims), b.data_type, list(b.dims))
    x, y = numpy_helper.to_array(a), numpy_helper.to_array(b)
    assert x.tobytes() == y.tobytes(), f"{what}: {int(np.count_nonzero(x != y))} of {x.size} values differ"


@pytest.mark.parametrize("fixture", DECODER_FIXTURES)
@pytest.mark.parametrize("asym", [False, True])
def test_default_int4_is_onnx_runtimes_qdq_quantizer(tmp_path, fixture, asym):
    """The `default` int4 package's DequantizeLinear data, scales and zero points are the
    initializers ONNX Runtime's MatMulNBitsQuantizer writes in QDQ format
    (quantize_qdq_matmul_4bits) for the same f32 weights, lm_head included (a tied head is
    given to the quantizer as its own copy: it takes only MatMuls with an initializer B)."""
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    flags = ["--quant", "int4", "--block-size", "32"] + (["--asymmetric"] if asym else [])
    ours = dq_matmuls(load(build_with(tmp_path / "q", fixture, "default", flags)))
    f = load(build_with(tmp_path / "f", fixture, "default", ["--tied-head", "copy"]))
    cfg = DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=not asym, bits=4, quant_format=QuantFormat.QDQ)
    quantizer = MatMulNBitsQuantizer(f, algo_config=cfg)
    quantizer.process()
    theirs = {name.removesuffix("_matmul_Q4"): parts for name, parts in dq_matmuls(quantizer.model.model).items()}
    assert "lm_head/MatMul" in ours and set(ours) == set(theirs), (sorted(ours), sorted(theirs))
    for name, parts in ours.items():
        for role, a, b in zip(["data", "scales", "zero points"], parts, theirs[name]):
            assert (a is None) == (b is None) == (role == "zero points" and not asym), (name, role)
            if a is not None:
                same_tensor(a, b, f"{fixture} {name} {role}")


@pytest.mark.parametrize("fixture", DECODER_FIXTURES)
@pytest.mark.parametrize("asym", [False, True])
def test_default_int8_is_onnx_runtimes_8bit_quantizer_relaid_out(tmp_path, fixture, asym):
    """ONNX Runtime has no QDQ quantizer for 8 bits (MatMulNBitsQuantizer refuses QDQ at 8 bits;
    the C++ QDQ quantizer has 2- and 4-bit entries only), so the `default` int8 package holds
    the values of its only 8-bit block quantizer, quantize_matmul_8bits, laid out for
    DequantizeLinear: x[k, n] = B[n, k // 32, k % 32] (int8 = B - 128 when symmetric),
    x_scale = scales^T, x_zero_point = zero_points^T."""
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    flags = ["--quant", "int8", "--block-size", "32"] + (["--asymmetric"] if asym else [])
    ours = dq_matmuls(load(build_with(tmp_path / "q", fixture, "default", flags)))
    f = load(build_with(tmp_path / "f", fixture, "default", ["--tied-head", "copy"]))
    fi = inits(f)
    weights = {n.name: numpy_helper.to_array(fi[n.input[1]]) for n in f.graph.node if n.op_type == "MatMul" and n.input[1] in fi}
    assert "lm_head/MatMul" in ours and set(ours) <= set(weights), sorted(set(ours) - set(weights))
    for name, (x, scale, zp) in ours.items():
        w = np.ascontiguousarray(weights[name].astype(np.float32))
        k, n = w.shape
        kb = (k + 31) // 32
        b = np.zeros((n, kb, 32), np.uint8)
        s = np.zeros((n, kb), np.float32)
        z = np.zeros((n, kb), np.uint8)
        C.quantize_matmul_8bits(b, w, s, z, 32, n, k, not asym)
        values = b.reshape(n, kb * 32)[:, :k].T
        expected = values.astype(np.int16) - 128 if not asym else values
        assert (x.data_type == onnx.TensorProto.UINT8) == asym
        got = numpy_helper.to_array(x)
        assert got.shape == (k, n) and np.array_equal(got.astype(np.int16), expected.astype(np.int16)), f"{fixture} {name} data"
        assert numpy_helper.to_array(scale).tobytes() == np.ascontiguousarray(s.T).tobytes(), f"{fixture} {name} scales"
        if asym:
            assert numpy_helper.to_array(zp).tobytes() == np.ascontiguousarray(z.T).tobytes(), f"{fixture} {name} zero points"
        else:
            assert zp is None


def qmoe_fits(fixture, block=32):
    """Whether the fixture's experts become QMoE at `block`: the hidden size and the experts'
    width multiples of it (else the quantize step keeps them float, saying so)."""
    config = json.loads((FIXTURES / fixture / "config.json").read_text())
    config = config.get("text_config", config)
    # HunYuan MoE's experts are `intermediate_size` wide (its per-layer `moe_intermediate_size`
    # list is not read).
    # DBRX's are `ffn_config.ffn_hidden_size` wide, its width `d_model`.
    width = config.get("moe_intermediate_size")
    width = width if isinstance(width, int) else config.get("intermediate_size") or config["ffn_config"]["ffn_hidden_size"]
    return config.get("hidden_size", config.get("d_model")) % block == 0 and width % block == 0


@pytest.mark.parametrize("fixture", [f for f in MOE_FIXTURES if qmoe_fits(f)])
@pytest.mark.parametrize("asym", [False, True])
def test_qmoe_experts_are_onnx_runtimes_bytes_per_expert(tmp_path, fixture, asym):
    """The cpu int4 package's QMoE stacks are, expert by expert, ONNX Runtime's own
    quantize_matmul_4bits output for that expert's [N, K] weight in the cpu f32 package's
    fused MoE node (the raw layout weights_prepacked 0 reads), with one QMoE node per MoE node."""
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    flags = ["--quant", "int4", "--block-size", "32"] + (["--asymmetric"] if asym else [])
    q = load(build_with(tmp_path / "q", fixture, "cpu", flags))
    f = load(build_with(tmp_path / "f", fixture, "cpu", []))
    qi, fi = inits(q), inits(f)
    moe = {n.name: n for n in f.graph.node if n.op_type == "MoE"}
    qmoe = [n for n in q.graph.node if n.op_type == "QMoE"]
    assert moe and len(qmoe) == len(moe), (len(qmoe), len(moe))
    for node in qmoe:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        assert (attrs["expert_weight_bits"], attrs["block_size"], attrs["weights_prepacked"]) == (4, 32, 0)
        for moe_slot, data_slot, scale_slot, zp_slot in [(2, 2, 3, 11), (4, 5, 6, 12)]:
            stack = numpy_helper.to_array(fi[moe[node.name].input[moe_slot]]).astype(np.float32)
            experts, n, k = stack.shape
            data = numpy_helper.to_array(qi[node.input[data_slot]])
            scales = numpy_helper.to_array(qi[node.input[scale_slot]])
            assert data.shape == (experts, n, k // 2) and scales.shape == (experts, n, k // 32)
            for e in range(experts):
                d = np.zeros((n, k // 32, 16), np.uint8)
                s = np.zeros((n, k // 32), np.float32)
                z = np.zeros((n, (k // 32 + 1) // 2), np.uint8)
                C.quantize_matmul_4bits(d, np.ascontiguousarray(stack[e].T), s, z, 32, n, k, not asym)
                assert data[e].tobytes() == d.tobytes(), (node.name, moe_slot, e)
                assert scales[e].tobytes() == s.tobytes(), (node.name, moe_slot, e)
                if asym:
                    assert numpy_helper.to_array(qi[node.input[zp_slot]])[e].tobytes() == z.tobytes(), (node.name, moe_slot, e)
                else:
                    assert len(node.input) <= zp_slot or not node.input[zp_slot]


def test_report_records_every_quantized_tensor(tmp_path):
    pkg = build_with(tmp_path / "q", "tiny-qwen2-tied-mqa", "cpu", ["--quant", "int8", "--asymmetric", "--block-size", "16"])
    report = json.loads((pkg / "build_report.json").read_text())
    q = report["parts"][0]["quantization"]
    assert (q["bits"], q["block_size"], q["symmetric"], q["format"]) == (8, 16, False, "matmul_nbits")
    model = load(pkg)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("GatherBlockQuantized") == 1 and "Gather" not in ops
    # Tied head and embedding: one tensor entry read by both nodes.
    tied = [t for t in q["tensors"] if len(t["ops"]) == 2]
    assert len(tied) == 1 and tied[0]["weight"] == "model.embed_tokens.weight", q["tensors"]
    for t in q["tensors"]:
        assert t["bits"] == 8 and t["block_size"] == 16 and not t["symmetric"]
        assert 0 < t["rms_error"] <= t["max_abs_error"] < 0.05, t
    assert len(q["tensors"]) == ops.count("MatMulNBits")


def genai_tokens(pkg, prompt, count):
    """`count` greedy tokens through onnxruntime-genai, eos suppressed (as test_genai.py)."""
    import onnxruntime_genai as og

    config = json.loads((pkg / "genai_config.json").read_text())
    config["model"]["eos_token_id"] = config["model"]["vocab_size"] - 1
    (pkg / "genai_config.json").write_text(json.dumps(config))
    return genai_greedy(og.Model(str(pkg)), prompt, count)


@pytest.mark.parametrize("fixture", DECODER_FIXTURES)
def test_genai_generates_what_onnx_runtimes_quantizer_gives(tmp_path, fixture):
    """Our cpu int4 package (table defaults, embeddings float as ORT's quantizer keeps them)
    and ORT's quantizer applied to our cpu f32 package generate the same greedy tokens through
    onnxruntime-genai; the package with quantized embeddings (the cpu default, a tied table
    stored once) generates too, and so does the `default` int4 package."""
    import shutil

    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    prompt = reference_inputs(fixture)["input_ids"]
    # A tied head as its own initializer (--tied-head copy): ORT's quantizer takes only MatMuls
    # with a constant B, not one reading the embedding through a Transpose node.
    # ORT's quantizer takes MatMuls only: a MoE fixture's experts stay float there, so here too
    # (test_qmoe_experts_are_onnx_runtimes_bytes_per_expert checks QMoE's bytes).
    # GraniteMoE (and GraniteMoeShared, GraniteMoeHybrid) stores its experts as `block_sparse_moe.input_linear` /
    # `output_linear` stacks (the shared MLP's `shared_mlp.*` are MatMuls, quantized by both), the
    # others (GraniteMoeSWA's transformers 5 names too) under `experts`.
    granite = ["*.block_sparse_moe.input_linear.*", "*.block_sparse_moe.output_linear.*"]
    stacks = granite if fixture in ("tiny-granitemoe", "tiny-granitemoeshared", "tiny-granitemoehybrid-moe") else ["*.experts.*"]
    experts = [flag for p in stacks for flag in ("--quant-exclude", p)] if fixture in MOE_FIXTURES else []
    ours = build_with(tmp_path / "q", fixture, "cpu", ["--quant", "int4", "--quant-embeddings", "none", "--tied-head", "copy"] + experts)
    f = build_with(tmp_path / "f", fixture, "cpu", ["--tied-head", "copy"])
    quantizer = MatMulNBitsQuantizer(load(f), algo_config=DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=True, accuracy_level=4))
    quantizer.process()
    theirs = tmp_path / "theirs"
    shutil.copytree(f, theirs)
    (theirs / "model.onnx.data").unlink()
    onnx.save(quantizer.model.model, str(theirs / "model.onnx"), save_as_external_data=True, location="model.onnx.data")
    expected = genai_tokens(theirs, prompt, 16)
    assert genai_tokens(ours, prompt, 16) == expected
    for ep, flags in [("cpu", []), ("default", [])]:
        pkg = build_with(tmp_path / f"{ep}-all", fixture, ep, ["--quant", "int4"] + flags)
        assert len(genai_tokens(pkg, prompt, 16)) == 16


def external_ranges(pkg):
    """{initializer name: (offset, length)} of a package's external tensors."""
    m = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
    out = {}
    for t in m.graph.initializer:
        e = {x.key: x.value for x in t.external_data}
        if e:
            out[t.name] = (int(e["offset"]), int(e["length"]))
    return out


@pytest.mark.parametrize("bits,asym", [("int4", False), ("int4", True), ("int8", False), ("int8", True)])
def test_a_tied_table_and_head_store_their_quantized_bytes_once(tmp_path, bits, asym):
    """A tied head (MatMulNBits) and embedding (GatherBlockQuantized) read one quantization:
    the embedding's views of it (the scales as [N, k_blocks, 1] when symmetric, the table as
    [N, K * bits / 8] when asymmetric) share the head's range of model.onnx.data, no two
    external tensors hold the same bytes in two ranges, and the logits are those of the f32
    package with the dequantized weights (accuracy level 0: no activation quantization)."""
    fixture = "tiny-qwen2-tied-mqa"
    flags = ["--quant", bits, "--accuracy-level", "0", "--block-size", "16"] + (["--asymmetric"] if asym else [])
    pkg = build_with(tmp_path / "q", fixture, "cpu", flags)
    q = load(pkg)
    ranges = external_ranges(pkg)
    nodes = {n.op_type: n for n in q.graph.node if n.op_type in ("GatherBlockQuantized",)}
    gbq = nodes["GatherBlockQuantized"]
    head = next(n for n in q.graph.node if n.op_type == "MatMulNBits" and n.name.startswith("lm_head/"))
    # Slot pairs that must be one range: data, scales (and zero points).
    for g_slot, h_slot in [(0, 1), (2, 2)] + ([(3, 3)] if asym else []):
        a, b = gbq.input[g_slot], head.input[h_slot]
        assert a == b or ranges[a] == ranges[b], (a, b, ranges.get(a), ranges.get(b))
    data = (pkg / "model.onnx.data").read_bytes()
    seen = {}
    for name, (off, length) in ranges.items():
        key = data[off:off + length]
        if key in seen and length > 64:
            assert ranges[seen[key]] == (off, length), f"{name} and {seen[key]} hold the same bytes twice"
        seen.setdefault(key, name)
    f = load(build_with(tmp_path / "f", fixture, "cpu", []))
    expected = logits(with_dequantized_weights(f, dequantized_weights(q)), fixture)
    err = float(np.abs(logits(q, fixture) - expected).max())
    assert err < TOL, err


@pytest.mark.parametrize("ep,extra", [("cpu", ["--accuracy-level", "0"]), ("default", [])])
def test_a_tied_head_and_table_of_different_widths_keep_their_own_parts(tmp_path, ep, extra):
    """`--quant int4 --quant-embeddings int8` on a tied model: the head is 4-bit and the table
    8-bit, each with its own parts (they used to share one name, so both read the first
    group's: a 4-bit MatMulNBits over 8-bit blobs on cpu, an 8-bit head on `default`, which ONNX
    Runtime does not fuse and dequantized whole on every step). Logits of the f32 package with
    both dequantized weights."""
    fixture = "tiny-qwen2-tied-mqa"
    q = load(build_with(tmp_path / "q", fixture, ep, ["--quant", "int4", "--quant-embeddings", "int8"] + extra))
    f = load(build_with(tmp_path / "f", fixture, ep, []))
    init = inits(q)
    producers = {o: n for n in q.graph.node for o in n.output}
    head = next(n for n in q.graph.node if n.name == "lm_head/MatMul")
    if ep == "cpu":
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in head.attribute}
        table = next(n for n in q.graph.node if n.op_type == "GatherBlockQuantized")
        table_bits = {a.name: onnx.helper.get_attribute_value(a) for a in table.attribute}["bits"]
        assert (head.op_type, attrs["bits"], table_bits) == ("MatMulNBits", 4, 8)
        assert head.input[1] != table.input[0]
    else:
        dq = producers[head.input[1]]
        table = next(n for n in q.graph.node if n.op_type == "Gather" and n.input[0].endswith("/quant/data"))
        assert (DQ_BITS[init[dq.input[0]].data_type], DQ_BITS[init[table.input[0]].data_type]) == (4, 8)
    weights = dequantized_weights(q)
    assert len(weights) >= 2 and any("embed_tokens" in name for name in weights), list(weights)
    expected = logits(with_dequantized_weights(f, weights), fixture)
    got = logits(q, fixture, accuracy_level_0=True)
    err = float(np.abs(got - expected).max())
    assert err < TOL, f"{ep}: max |logits - dequantized f32| = {err}"


def test_decoded_table_reads_ids_as_gather_does(tmp_path):
    """The decoded `default` table (4-bit) reads ids as the float Gather it replaces: a negative
    id counts from the end (-1 is V - 1), and an id past the table fails the run instead of
    reading another row."""
    fixture = "tiny-llama"
    q = load(build_with(tmp_path / "q", fixture, "default", ["--quant", "int4", "--quant-embeddings", "int4"]))
    vocab = json.loads((FIXTURES / fixture / "config.json").read_text())["vocab_size"]
    sess = ort.InferenceSession(q.SerializeToString(), providers=["CPUExecutionProvider"])

    def run(ids):
        ids = np.array([ids], dtype=np.int64)
        return sess.run(["logits"], feeds_for(q, ids, np.ones_like(ids), np.arange(ids.shape[1])[None]))[0]

    assert np.array_equal(run([5, -1, -vocab]), run([5, vocab - 1, 0]))
    assert not np.array_equal(run([5, -1, 7]), run([5, vocab - 2, 7]))
    for past_the_end in (vocab, vocab + 1, 2 * vocab):
        with pytest.raises(Exception, match="out of"):
            run([5, past_the_end, 7])


def embedding_rows(model, ids):
    """Runs only the nodes that read the embedding table (the table's Gather, renamed in place,
    the `<gather>/quant/*` nodes after it, and the `<gather>/Reshape` of a GatherBlockQuantized)
    on ORT's CPU EP; returns their output rows."""
    gather = next(n for n in model.graph.node if n.name.endswith("embed_tokens/Gather"))
    nodes = [n for n in model.graph.node if n.name in (gather.name, gather.name + "/Reshape") or n.name.startswith(gather.name + "/quant/")]
    produced = {o for n in nodes for o in n.output}
    out = next(o for n in nodes for o in n.output if not any(o in m.input for m in nodes))
    used = {i for n in nodes for i in n.input}
    graph = onnx.helper.make_graph(
        nodes, "rows", [onnx.helper.make_tensor_value_info("input_ids", onnx.TensorProto.INT64, list(ids.shape))],
        [onnx.helper.make_tensor_value_info(out, model.graph.output[0].type.tensor_type.elem_type, None)],
        [i for i in model.graph.initializer if i.name in used and i.name not in produced])
    sub = onnx.helper.make_model(graph, opset_imports=model.opset_import, ir_version=model.ir_version)
    sess = ort.InferenceSession(sub.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run([out], {"input_ids": ids})[0]


def widened_checkpoint(dest, hidden=160):
    """tiny-qwen2-tied-mqa with rows of `hidden` values (160: two whole blocks of 64 and a
    partial one, five blocks of 32) and random weights of the same names; the same config
    otherwise (head_dim kept, heads scaled), its reference inputs copied for `logits`."""
    import shutil

    from safetensors.numpy import load_file, save_file

    src = FIXTURES / "tiny-qwen2-tied-mqa"
    cfg = json.loads((src / "config.json").read_text())
    old = cfg["hidden_size"]
    head_dim = old // cfg["num_attention_heads"]
    assert hidden % head_dim == 0 and cfg["intermediate_size"] != old and cfg["num_key_value_heads"] * head_dim != old
    cfg.update(hidden_size=hidden, num_attention_heads=hidden // head_dim)
    dest.mkdir(parents=True)
    rng = np.random.default_rng(7)
    tensors = {}
    for name, t in load_file(str(src / "model.safetensors")).items():
        shape = [hidden if d == old else d for d in t.shape]
        tensors[name] = np.ones(shape, np.float32) if name.endswith("norm.weight") else (rng.standard_normal(shape) * 0.2).astype(np.float32)
    save_file(tensors, str(dest / "model.safetensors"))
    (dest / "config.json").write_text(json.dumps(cfg))
    for f in src.iterdir():
        if f.name not in ("config.json", "model.safetensors"):
            shutil.copy(f, dest / f.name)
    return dest


@pytest.fixture(scope="module")
def wide_checkpoint(module_tmp):
    return widened_checkpoint(module_tmp("wide") / "tiny-qwen2-wide")


MATMULNBITS_TABLES = [
    # (ep, checkpoint, table bits, flags, the op that reads the table)
    # dml claims no GatherBlockQuantized: every table as bytes with standard ops.
    ("dml", "tied", "int4", ["--quant", "int4", "--quant-embeddings", "int4"], "Gather"),
    ("dml", "tied", "int8", ["--quant", "int4", "--quant-embeddings", "int8"], "Gather"),
    ("dml", "gguf", "int8", [], "Gather"),
    ("dml", "tied", "int4", ["--quant", "int4", "--asymmetric", "--quant-embeddings", "int4"], "Gather"),
    # One block of 64 per row: a packed 4-bit zero point and a padding nibble.
    ("dml", "tied", "int4", ["--quant", "int4", "--asymmetric", "--block-size", "64", "--quant-embeddings", "int4"], "Gather"),
    ("dml", "tied", "int8", ["--quant", "int4", "--asymmetric", "--quant-embeddings", "int8"], "Gather"),
    # Rows of 64 values in a block of 128, which GatherBlockQuantized cannot hold.
    ("cpu", "tied", "int4", ["--quant", "int4", "--block-size", "128"], "Gather"),
    ("cpu", "tied", "int4", ["--quant", "int4", "--block-size", "128", "--asymmetric"], "Gather"),
    ("dml", "tied", "int8", ["--quant", "int8", "--block-size", "128", "--asymmetric", "--quant-embeddings", "int8"], "Gather"),
    # Rows of 160 values, blocks of 64: two whole and a partial one; three 4-bit zero points.
    ("cpu", "wide", "int4", ["--quant", "int4", "--block-size", "64", "--asymmetric"], "Gather"),
    ("dml", "wide", "int4", ["--quant", "int4", "--block-size", "64", "--asymmetric", "--quant-embeddings", "int4"], "Gather"),
    # Float zero points (HQQ's offsets): added to the decoded rows, or after
    # GatherBlockQuantized of the symmetric codes where it reads the table.
    ("dml", "tied", "int4", ["--quant", "int4", "--quant-method", "hqq", "--quant-embeddings", "int4"], "Gather"),
    ("cpu", "tied", "int4", ["--quant", "int4", "--quant-method", "hqq", "--block-size", "128"], "Gather"),
    ("cpu", "wide", "int4", ["--quant", "int4", "--quant-method", "hqq", "--block-size", "64"], "Gather"),
    ("cpu", "wide", "int4", ["--quant", "int4", "--quant-method", "hqq"], "GatherBlockQuantized"),
    ("cpu", "tied", "int8", ["--quant", "int4", "--quant-method", "hqq", "--quant-embeddings", "int8"], "GatherBlockQuantized"),
]


@pytest.mark.parametrize("ep,checkpoint,bits_flag,args,op", MATMULNBITS_TABLES)
def test_a_table_read_from_matmulnbits_parts_equals_them_dequantized(tmp_path, wide_checkpoint, ep, checkpoint, bits_flag, args, op):
    """A table read from its MatMulNBits parts (the head's when tied with the same settings:
    one copy; no float table left): as bytes with standard ops where GatherBlockQuantized cannot
    read it (dml claims none; rows that are not whole blocks), `(q - mid) * scale` or
    `(q - zero_point) * scale`, a partial block's padding sliced off; HQQ's offsets added after
    either form. The rows these nodes compute (on ORT's CPU EP: no DirectML here) equal the
    table dequantized in numpy from the same bytes by the MatMulNBits packing, that table is the
    checkpoint's within quantization error, and on cpu the whole model's logits are those of the
    f32 package with every weight dequantized."""
    fixture = str(wide_checkpoint) if checkpoint == "wide" else "tiny-qwen2-tied-mqa"
    if checkpoint == "gguf":
        pkg = tmp_path / ep
        done = subprocess.run([str(tailor_bin()), "build", "--model", str(Path(__file__).parent / "data/gguf-gemma/tiny-gemma.Q.gguf"),
                               "--output", str(pkg), "--ep", ep], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    else:
        # cpu at accuracy level 0 (f32 activations), for the whole-model comparison below.
        pkg = build_with(tmp_path / ep, fixture, ep, args + (["--accuracy-level", "0"] if ep == "cpu" else []))
    model = load(pkg)
    report = json.loads((pkg / "build_report.json").read_text())
    assert not report["parts"][0]["quantization"]["kept_float"], report["parts"][0]["quantization"]["kept_float"]
    init = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    head = next(n for n in model.graph.node if n.op_type == "MatMulNBits" and n.name.startswith("lm_head/"))
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in head.attribute}
    n, k = attrs["N"], attrs["K"]
    assert not [name for name, v in init.items() if v.dtype.kind == "f" and v.shape in ((n, k), (k, n))], "a float table is left"
    # The table's own MatMulNBits parts: the head's when their settings agree (one copy).
    gather = next(g for g in model.graph.node if g.name.endswith("embed_tokens/Gather"))
    assert gather.op_type == op, (gather.op_type, op)
    assert len([g for g in model.graph.node if g.op_type == "GatherBlockQuantized"]) == (op == "GatherBlockQuantized")
    data_name = gather.input[0]
    part = data_name.removesuffix("/data")
    if gather.op_type == "GatherBlockQuantized":  # scales viewed [N, k_blocks, 1] (the same bytes)
        init.setdefault(part + "/scales", init[gather.input[2]].reshape(n, -1))
    data, scales = init[data_name], init[part + "/scales"]
    bits = 4 if bits_flag == "int4" else 8
    block = data.shape[2] * 8 // bits
    assert data.shape == (n, -(-k // block), block * bits // 8), data.shape
    asymmetric = "--asymmetric" in args  # HQQ's zero points are offsets, not a zero_points part
    assert (part + "/zero_points" in init) == asymmetric
    assert (data_name == head.input[1]) == (bits == attrs["bits"]), (data_name, head.input[1])
    inputs = ["a", data_name, part + "/scales"] + ([part + "/zero_points"] if asymmetric else [])
    as_matmul = onnx.helper.make_node("MatMulNBits", inputs, ["y"], K=k, N=n, bits=bits, block_size=block)
    table = dequant_matmul_nbits(as_matmul, {name: numpy_helper.from_array(v, name) for name, v in init.items()}).T
    if "hqq" in args:  # the symmetric codes plus each block's offset ([k_blocks, N])
        offsets = init[part + "/offsets"].astype(np.float32).T
        table = table + np.repeat(offsets, block, axis=1)[:, :k]
    ids = np.array([[0, 3, n - 1, 17, 3]], dtype=np.int64)
    got = embedding_rows(model, ids).astype(np.float32)
    assert got.shape == (1, 5, k), got.shape
    want = table[ids]
    if checkpoint != "gguf":  # the table quantized from the checkpoint's own float table
        from safetensors.numpy import load_file

        floats = load_file(str(FIXTURES / fixture / "model.safetensors"))["model.embed_tokens.weight"].astype(np.float32)
        rel = float(np.sqrt(np.mean((table - floats) ** 2) / np.mean(floats ** 2)))
        assert rel < 0.25, f"the table is {rel:.3f} (relative RMS) from the checkpoint's"
    # f16 rows on dml: within f16 rounding of the f32 product; f32 on cpu.
    assert np.abs(got - want).max() <= 1e-3 * max(1.0, float(np.abs(want).max())), float(np.abs(got - want).max())
    if ep == "cpu":
        # The whole model: the f32 package with every quantized weight and the table replaced
        # by their dequantized values (numpy, from the package's bytes).
        f = load(build_with(tmp_path / "f", fixture, "cpu", []))
        weights = dequantized_weights(model)
        for node in model.graph.node:  # HQQ: each block's offset, added after MatMulNBits
            offsets = node.input[1].removesuffix("/data") + "/offsets" if node.op_type == "MatMulNBits" else None
            if offsets in init:
                node_block = next(a.i for a in node.attribute if a.name == "block_size")
                kb_n = init[offsets].astype(np.float32)
                weights[node.name] = weights[node.name] + np.repeat(kb_n, node_block, axis=0)[: weights[node.name].shape[0]]
        weights[gather.name] = table  # with its offsets, which dequantized_weights does not add
        expected = logits(with_dequantized_weights(f, weights), fixture)
        err = float(np.abs(logits(model, fixture, accuracy_level_0=True) - expected).max())
        assert err < TOL, err
