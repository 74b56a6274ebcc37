"""A GPTQ-quantized encoder (BERT) imports with its own integers (issue #29's pre-quantized
import, on the encoder path): the six Linear layers of each block as MatMulNBits whose codes
and zero points are the checkpoint's, and the package computes what the dequantized float
checkpoint computes.

The checkpoint is written here from tiny-bert (numpy only): each Linear weight quantized
asymmetrically to 4 bits in groups of 32 along K and packed as GPTQ v1 packs it (`qweight`
int32 [K/8, N], code j of a word at bits 4j..4j+3 for row 8r+j; `qzeros` int32 [K/32, N/8]
holding zero - 1; f16 `scales` [K/32, N]; `g_idx` [K]), beside the float checkpoint of exactly
the dequantized values (`scale * (q - zero)` in f32 from the f16 scale).
"""
import json
import shutil
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper
from safetensors.numpy import load_file, save_file

from conftest import FIXTURES, tailor_bin

GROUP = 32
LINEARS = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense", "intermediate.dense", "output.dense")


def quantize(w, rng):
    """GPTQ v1 tensors and the dequantized f32 weight of an HF Linear weight `w` [N, K]."""
    wt = w.T.astype(np.float32)  # [K, N]: what x @ W^T reads
    k, n = wt.shape
    groups = wt.reshape(k // GROUP, GROUP, n)
    lo, hi = groups.min(axis=1), groups.max(axis=1)
    scales = np.maximum((hi - lo) / 15.0, 1e-4).astype(np.float16)
    s = scales.astype(np.float32)
    zeros = np.clip(np.round(-lo / s), 1, 15).astype(np.uint32)
    codes = np.clip(np.round(groups / s[:, None, :]) + zeros[:, None, :], 0, 15).astype(np.uint32).reshape(k, n)
    # A few codes moved at random, so the weights are not what RTN of the float would give.
    flip = rng.random(codes.shape) < 0.05
    codes[flip] = rng.integers(0, 16, size=int(flip.sum()), dtype=np.uint32)
    deq = (s.repeat(GROUP, axis=0) * (codes.astype(np.float32) - zeros.repeat(GROUP, axis=0).astype(np.float32))).T
    qweight = np.zeros((k // 8, n), dtype=np.uint32)
    for j in range(8):
        qweight |= codes[j::8] << (4 * j)
    qzeros = np.zeros((k // GROUP, n // 8), dtype=np.uint32)
    for j in range(8):
        qzeros |= (zeros[:, j::8] - 1) << (4 * j)
    g_idx = (np.arange(k) // GROUP).astype(np.int32)
    # Contiguous copies: safetensors writes an array's memory as it lies (w.T is a view).
    packed = tuple(np.ascontiguousarray(t) for t in (qweight.view(np.int32), qzeros.view(np.int32), scales, g_idx))
    return packed, np.ascontiguousarray(deq), codes, zeros


@pytest.fixture(scope="module")
def checkpoints(module_tmp):
    """(gptq folder, dequantized float folder, {layer: (codes [K, N], zeros [K/32, N])})."""
    root = module_tmp("gptq-bert")
    src = FIXTURES / "tiny-bert"
    weights = load_file(str(src / "model.safetensors"))
    cfg = json.loads((src / "config.json").read_text())
    rng = np.random.default_rng(7)
    packed, floats, truth = {}, dict(weights), {}
    for layer in range(cfg["num_hidden_layers"]):
        for lin in LINEARS:
            name = f"encoder.layer.{layer}.{lin}"
            (qw, qz, sc, gi), deq, codes, zeros = quantize(weights[f"{name}.weight"], rng)
            packed |= {f"{name}.qweight": qw, f"{name}.qzeros": qz, f"{name}.scales": sc, f"{name}.g_idx": gi}
            floats[f"{name}.weight"] = deq
            truth[name] = (codes, zeros)
    packed |= {k: v for k, v in weights.items() if not any(k == f"encoder.layer.{i}.{lin}.weight" for i in range(cfg["num_hidden_layers"]) for lin in LINEARS)}
    folders = []
    for sub, tensors, config in (
        ("gptq", packed, cfg | {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "sym": False, "desc_act": False, "checkpoint_format": "gptq"}}),
        ("dequantized", floats, cfg),
    ):
        d = root / sub
        d.mkdir()
        save_file(tensors, str(d / "model.safetensors"))
        (d / "config.json").write_text(json.dumps(config))
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(src / f, d / f)
        folders.append(d)
    return folders[0], folders[1], truth


def build(model, out, flags=()):
    done = subprocess.run([str(tailor_bin()), "build", "--model", str(model), "--output", str(out), "--ep", "cpu", "--dtype", "f32", *flags], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return out


def hidden(pkg):
    ref = load_file(str(FIXTURES / "tiny-bert" / "reference.safetensors"))
    s = ort.InferenceSession(str(pkg / "model.onnx"), providers=["CPUExecutionProvider"])
    return s.run(["last_hidden_state"], {i.name: ref[i.name].astype(np.int64) for i in s.get_inputs()})[0]


def test_the_package_keeps_the_checkpoints_integers(checkpoints, tmp_path):
    gptq, _, truth = checkpoints
    pkg = build(gptq, tmp_path / "pkg", ["--accuracy-level", "0"])
    m = onnx.load(str(pkg / "model.onnx"))
    inits = {t.name: t for t in m.graph.initializer}
    nodes = [n for n in m.graph.node if n.op_type == "MatMulNBits"]
    assert len(nodes) == len(truth), [n.name for n in nodes]
    for name, (codes, zeros) in truth.items():
        (node,) = [n for n in nodes if n.name.startswith(name + "/")]
        k, n = codes.shape
        b = numpy_helper.to_array(inits[node.input[1]]).reshape(n, k // GROUP, GROUP // 2)
        got = np.stack([b & 0xF, b >> 4], axis=-1).reshape(n, k).T
        assert np.array_equal(got, codes), name
        zp = numpy_helper.to_array(inits[node.input[3]]).reshape(n, -1)
        got_z = np.stack([zp & 0xF, zp >> 4], axis=-1).reshape(n, -1)[:, : k // GROUP].T
        assert np.array_equal(got_z, zeros), name
    report = json.loads((pkg / "build_report.json").read_text())
    assert "gptq" in json.dumps(report).lower()


def test_the_package_computes_what_the_dequantized_checkpoint_does(checkpoints, tmp_path):
    gptq, dequantized, _ = checkpoints
    got = hidden(build(gptq, tmp_path / "gptq", ["--accuracy-level", "0"]))
    want = hidden(build(dequantized, tmp_path / "float"))
    diff = float(np.abs(got - want).max())
    assert diff < 1e-4, diff
    # The float model it came from differs: the check can tell a requantized weight.
    base = hidden(build(FIXTURES / "tiny-bert", tmp_path / "base"))
    assert float(np.abs(base - want).max()) > 1e-3
