"""`--quant int4 --quant-method hqq` against ONNX Runtime 1.32's own HQQ quantizer.

`tests/fixtures/hqq_reference.safetensors` holds what `MatMulNBitsQuantizer` with
`HQQWeightOnlyQuantConfig(block_size=32, bits=4)` writes for every MatMul weight of our float
cpu package of each decoder fixture (scripts/make_hqq_reference.py, run once with torch, which
the quantizer needs). Per tensor:

* at least 99% of the dequantized values equal ONNX Runtime's to within 8 f32 roundings of the block's zero
  point (times its scale)
  (the solver iterates in f32 and torch sums in another order, so a zero point may differ in its
  last bits and a value on a rounding boundary may round the other way);
* the RMS weight error is at most 1.02x ONNX Runtime's, and below the RTN int4 package's.

And the package runs: at accuracy level 0 its logits are those of the same package with ONNX
Runtime's weights swapped in, within 1e-4.
"""
import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from safetensors.numpy import load_file

from conftest import FIXTURES, build_with
from test_quant import load, logits

REFERENCE = load_file(str(FIXTURES / "hqq_reference.safetensors"))
HQQ_FIXTURES = sorted({k.split("/", 1)[0] for k in REFERENCE})
BLOCK = 32


def reference(fixture):
    """weight -> (codes [N, K], scales [N, kb], zeros [N, kb]) of ONNX Runtime's quantizer."""
    out = {}
    for key in REFERENCE:
        fx, rest = key.split("/", 1)
        if fx != fixture or not rest.endswith(".data"):
            continue
        w = rest[: -len(".data")]
        data = REFERENCE[key]
        n, kb, blob = data.shape
        codes = np.stack([data & 0x0F, data >> 4], axis=-1).reshape(n, kb * blob * 2)
        out[w] = (codes, REFERENCE[f"{fx}/{w}.scales"].reshape(n, kb), REFERENCE[f"{fx}/{w}.zeros"].reshape(n, kb))
    return out


def ours(pkg, hqq=True):
    """weight -> (codes [N, K padded], scales [N, kb], zeros [N, kb], K) of each MatMulNBits; with
    `hqq`, checks that it has float zero points (else they are unpacked, or the implicit 8)."""
    model = load(pkg)
    inits = {i.name: i for i in model.graph.initializer}
    out = {}
    for node in model.graph.node:
        if node.op_type != "MatMulNBits":
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        assert attrs["bits"] == 4 and attrs["block_size"] == BLOCK, node.name
        data = numpy_helper.to_array(inits[node.input[1]])
        n, kb, blob = data.shape
        codes = np.stack([data & 0x0F, data >> 4], axis=-1).reshape(n, kb * blob * 2)
        has_zp = len(node.input) > 3 and node.input[3]
        w = node.input[1][: -len("/quant/data")]
        scales = numpy_helper.to_array(inits[node.input[2]]).reshape(n, kb)
        if hqq:
            # MatMulNBits without zero points (the implicit 8) plus each block's offset
            # `scale * (8 - zero)` times the activation's block sum: zero = 8 - offset / scale.
            assert not has_zp, f"{node.name}: HQQ's zero points are written as offsets"
            offsets = numpy_helper.to_array(inits[f"{w}/quant/offsets"]).T.reshape(n, kb)
            zeros = 8.0 - offsets / scales
        elif has_zp:
            packed = numpy_helper.to_array(inits[node.input[3]]).reshape(n, -1)
            zeros = np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(n, -1)[:, :kb].astype(np.float32)
        else:
            zeros = np.full((n, kb), 8.0, dtype=np.float32)
        out[w] = (codes, scales, zeros, attrs["K"])
    return out, model


def dequantized(codes, scales, zeros, k):
    c = codes[:, :k].astype(np.float32)
    s = np.repeat(scales, BLOCK, axis=1)[:, :k]
    z = np.repeat(zeros, BLOCK, axis=1)[:, :k]
    return (c - z) * s, s


def float_weights(pkg):
    model = load(pkg)
    return {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}


@pytest.mark.parametrize("fixture", HQQ_FIXTURES)
def test_hqq_weights_equal_onnx_runtime_hqq(fixture, tmp_path):
    flags = ["--quant", "int4", "--quant-method", "hqq", "--accuracy-level", "0"]
    pkg = build_with(tmp_path / "hqq", fixture, "cpu", flags)
    flt = float_weights(build_with(tmp_path / "f32", fixture, "cpu", []))
    rtn, _ = ours(build_with(tmp_path / "rtn", fixture, "cpu", ["--quant", "int4", "--quant-embeddings", "none"]), hqq=False)
    report = json.loads((pkg / "build_report.json").read_text())
    quant = next(p["quantization"] for p in report["parts"] if p.get("quantization"))
    assert quant["method"] == "hqq" and quant["symmetric"] is False, quant
    theirs = reference(fixture)
    mine, _ = ours(pkg)
    assert theirs, f"{fixture}: no reference weights"
    missing = sorted(set(theirs) - set(mine))
    assert not missing, f"{fixture}: ONNX Runtime quantized {missing}, the hqq package did not"
    for w, (rc, rs, rz) in theirs.items():
        mc, ms, mz, k = mine[w]
        wf = flt[w].T  # [N, K]: the MatMul weight is [K, N]
        a, scale = dequantized(mc, ms, mz, k)
        b, _ = dequantized(rc, rs, rz, k)
        zero = np.repeat(np.maximum(np.abs(rz), 1.0), BLOCK, axis=1)[:, :k]
        equal = np.abs(a - b) <= 8 * np.finfo(np.float32).eps * zero * np.abs(scale)
        assert equal.mean() >= 0.99, f"{fixture} {w}: {equal.mean():.4f} of the dequantized values equal ONNX Runtime's"
        rms, ref_rms = np.sqrt(np.mean((wf - a) ** 2)), np.sqrt(np.mean((wf - b) ** 2))
        assert rms <= 1.02 * ref_rms, f"{fixture} {w}: rms {rms} vs ONNX Runtime's {ref_rms}"
        if w in rtn:
            rtn_rms = np.sqrt(np.mean((wf - dequantized(*rtn[w])[0]) ** 2))
            assert rms < rtn_rms, f"{fixture} {w}: HQQ rms {rms} is not below RTN's {rtn_rms}"


@pytest.mark.parametrize("fixture", HQQ_FIXTURES)
def test_hqq_logits_equal_onnx_runtime_hqq(fixture, tmp_path):
    pkg = build_with(tmp_path / "hqq", fixture, "cpu", ["--quant", "int4", "--quant-method", "hqq", "--accuracy-level", "0"])
    mine, model = ours(pkg)
    got = logits(model, fixture)
    theirs = reference(fixture)
    inits = {i.name: i for i in model.graph.initializer}
    swapped = 0
    for node in model.graph.node:
        w = node.input[1][: -len("/quant/data")] if node.op_type == "MatMulNBits" else None
        if w not in theirs:
            continue
        data = REFERENCE[f"{fixture}/{w}.data"]
        offsets = (theirs[w][1] * (8.0 - theirs[w][2])).T.astype(np.float32)
        for name, value in [(node.input[1], data), (node.input[2], theirs[w][1]), (f"{w}/quant/offsets", offsets)]:
            inits[name].CopyFrom(numpy_helper.from_array(value.reshape(numpy_helper.to_array(inits[name]).shape), name))
        swapped += 1
    assert swapped == len(theirs)
    want = logits(model, fixture)
    # The zero points differ from ONNX Runtime's in their last bits and codes on a rounding
    # boundary may flip; measured over the fixtures: at most 2.6e-5 (tiny-phi3-longrope), so the
    # f32 tolerance of the other quantized tests holds.
    assert np.abs(got - want).max() < 1e-4, f"{fixture}: {np.abs(got - want).max()}"


def default_parts(model):
    """weight -> (codes [N, K], scales [N, kb], offsets [N, kb]) of each quantized weight of a
    `default` HQQ package: its `<weight>/quant/data` int4 `[K, N]` codes against the mid point 8
    (no zero point), scales `[kb, N]`, and the `<weight>/quant/offsets` `[kb, N]` its MatMul's
    result is added with (or its gathered rows, for the table)."""
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    out = {}
    for tensor in model.graph.initializer:
        if not tensor.name.endswith("/quant/data"):
            continue
        w = tensor.name[: -len("/quant/data")]
        assert tensor.data_type == onnx.TensorProto.INT4, (w, tensor.data_type)
        assert f"{w}/quant/zero_points" not in inits, f"{w}: HQQ's zero points are written as offsets"
        data = inits[tensor.name].astype(np.int32)
        out[w] = ((data + 8).T, inits[f"{w}/quant/scales"].T, inits[f"{w}/quant/offsets"].T)
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear" and node.input[0].endswith("/quant/data"):
            assert len(node.input) == 2 or not node.input[2], f"{node.name}: HQQ's zero points are written as offsets"
    return out


@pytest.mark.parametrize("fixture", HQQ_FIXTURES)
def test_default_hqq_writes_the_cpu_packages_values(fixture, tmp_path):
    """`default` writes HQQ as standard DequantizeLinear of the codes against the mid point plus
    each block's offset times the activation's block sums (the offset form): every weight it
    shares with the cpu package (not packed there) has the cpu package's codes, scales and
    offsets bit for bit, which the tests above compare with ONNX Runtime's HQQ; each quantized
    embedding table's rows, decoded from its DequantizeLinear parts, equal the cpu package's
    (GatherBlockQuantized plus offsets); and its logits at accuracy level 0 are those of the
    `default` f32 package with those weights and tables dequantized."""
    flags = ["--quant", "int4", "--quant-method", "hqq", "--quant-embeddings", "int4"]
    cpu = load(build_with(tmp_path / "cpu", fixture, "cpu", flags))
    pkg = build_with(tmp_path / "default", fixture, "default", flags)
    model = load(pkg)
    assert not [n.op_type for n in model.graph.node if n.domain not in ("", "ai.onnx")], "standard ONNX only"
    quant = next(p["quantization"] for p in json.loads((pkg / "build_report.json").read_text())["parts"] if p.get("quantization"))
    assert quant["method"] == "hqq" and quant["format"] == "dequantize_linear", quant
    mine = default_parts(model)
    cpu_inits = {i.name: numpy_helper.to_array(i) for i in cpu.graph.initializer}
    shared = 0
    for w, (codes, scales, offsets) in mine.items():
        if f"{w}/quant/data" not in cpu_inits:
            continue  # packed on cpu (q/k/v): another tensor, with its own solver stop
        n, k = codes.shape
        b = cpu_inits[f"{w}/quant/data"]
        cpu_codes = np.stack([b & 0x0F, b >> 4], axis=-1).reshape(n, -1)[:, :k]
        assert np.array_equal(codes, cpu_codes), f"{fixture} {w}: codes"
        assert np.array_equal(scales, cpu_inits[f"{w}/quant/scales"].reshape(n, -1)), f"{fixture} {w}: scales"
        assert np.array_equal(offsets, cpu_inits[f"{w}/quant/offsets"].T), f"{fixture} {w}: offsets"
        shared += 1
    assert shared >= 3, f"{fixture}: only {shared} weights in common with the cpu package"
    # Logits: the f32 package with each weight dequantized, (code - 8) * scale + offset.
    from test_quant import with_dequantized_weights

    weights = {}
    producers = {o: n for n in model.graph.node for o in n.output}
    for node in model.graph.node:
        dq = producers.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) > 1 else None
        if dq is None or dq.op_type != "DequantizeLinear":
            continue
        codes, scales, offsets = mine[dq.input[0][: -len("/quant/data")]]
        k = codes.shape[1]
        block = np.repeat(np.arange(-(-k // BLOCK)), BLOCK)[:k]
        weights[node.name] = ((codes - 8).astype(np.float32) * scales[:, block] + offsets[:, block]).T
    assert weights
    # Each table's rows (the token table's, GPT-2's position table's), decoded from the same
    # parts (its own, or the tied head's), equal the cpu package's: GatherBlockQuantized of the
    # symmetric codes with the rows' offsets added.
    from test_quant import dequant_decoded_table

    gbqs = {n.name: n for n in cpu.graph.node if n.op_type == "GatherBlockQuantized"}
    tables = [n for n in model.graph.node if n.op_type == "Gather" and n.input[0].endswith("/quant/data/bytes")]
    assert tables and len(tables) == len(gbqs), (len(tables), list(gbqs))
    for table in tables:
        gbq = gbqs[table.name]
        b = cpu_inits[gbq.input[0]]
        vocab, hidden = b.shape[0], b.shape[1] * b.shape[2] * 2
        rows = dequant_decoded_table({i.name: i for i in model.graph.initializer}, table.input[0][: -len("/quant/data/bytes")], vocab, hidden)
        cpu_codes = np.stack([b & 0x0F, b >> 4], axis=-1).reshape(vocab, hidden).astype(np.int32)
        cpu_scales = cpu_inits[gbq.input[2]].reshape(vocab, -1)
        cpu_offsets = cpu_inits[gbq.input[0][: -len("/data")] + "/offsets"].T
        block = np.arange(hidden) // BLOCK
        cpu_rows = (cpu_codes - 8).astype(np.float32) * cpu_scales[:, block] + cpu_offsets[:, block]
        assert np.array_equal(rows, cpu_rows), f"{fixture} {table.name}: the table's rows differ from the cpu package's"
        weights[table.name] = rows
    want = logits(with_dequantized_weights(load(build_with(tmp_path / "f32", fixture, "default", [])), weights), fixture)
    got = logits(model, fixture, accuracy_level_0=True)
    assert np.abs(got - want).max() < 1e-4, f"{fixture}: {np.abs(got - want).max()}"
