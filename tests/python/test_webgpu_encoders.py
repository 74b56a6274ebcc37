"""webgpu encoder packages (ep-sets/tables/webgpu.toml [role.encoder.*]): they pass the table's
validation only with BERT's position Range and the pooling mask narrowed to int32
(lower.int64_to_int32's `.positions` and `.mask` variants; WebGPU registers Range, Unsqueeze and
Cast for int32, not int64). No WebGPU device here: the f32 packages, whose contrib ops also run
on ONNX Runtime's CPU EP, are checked there against the checkpoints' references, which shows
the lowering keeps the values; the f16 builds (the table's default) must build.
"""
import json
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from safetensors.numpy import load_file

from conftest import FIXTURES, tailor_bin
from test_encoders import REFERENCE, encode, minilm_dir


def build(src: Path, out: Path, flags=()):
    done = subprocess.run([str(tailor_bin()), "build", "--model", str(src), "--output", str(out), "--ep", "webgpu", *flags], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return out


def int64_nodes(pkg: Path, ops):
    """The nodes of `ops` that still compute on int64 (their output's type)."""
    m = onnx.shape_inference.infer_shapes(onnx.load(str(pkg / "model.onnx"), load_external_data=False))
    types = {v.name: v.type.tensor_type.elem_type for v in list(m.graph.value_info) + list(m.graph.output)}
    return [n.name for n in m.graph.node if n.op_type in ops and types.get(n.output[0]) == onnx.TensorProto.INT64]


@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_bert_builds_with_int32_positions(dtype, tmp_path):
    pkg = build(FIXTURES / "tiny-bert", tmp_path / "pkg", ["--dtype", dtype])
    assert not int64_nodes(pkg, {"Range"}), int64_nodes(pkg, {"Range"})
    rules = json.loads((pkg / "build_report.json").read_text())["parts"][0]["pipeline"]["diagnostics"]["rules"]
    fired = {r["rule"]: r["fired"] for r in rules}
    assert fired.get("lower.int64_to_int32.positions") == 1, fired


def test_the_lowered_bert_keeps_its_values(tmp_path):
    pkg = build(FIXTURES / "tiny-bert", tmp_path / "pkg", ["--dtype", "f32"])
    ref = load_file(str(FIXTURES / "tiny-bert" / "reference.safetensors"))
    s = ort.InferenceSession(str(pkg / "model.onnx"), providers=["CPUExecutionProvider"])
    names = [i.name for i in s.get_inputs()]
    feeds = {n: ref[n].astype(np.int64) for n in names}
    (hidden,) = s.run(["last_hidden_state"], feeds)
    diff = float(np.abs(hidden - ref["last_hidden_state"]).max())
    assert diff < 1e-4, diff


def test_sentence_embedding_pools_an_int32_mask(tmp_path):
    pkg = build(minilm_dir(), tmp_path / "pkg", ["--dtype", "f32"])
    assert not int64_nodes(pkg, {"Range", "Unsqueeze"}), int64_nodes(pkg, {"Range", "Unsqueeze"})
    s = ort.InferenceSession(str(pkg / "model.onnx"), providers=["CPUExecutionProvider"])
    (emb,) = s.run(["sentence_embedding"], encode(pkg, REFERENCE["sentences"]))
    diff = float(np.abs(emb - np.array(REFERENCE["sentence_embedding"], dtype=np.float32)).max())
    assert diff <= REFERENCE["tolerance"]["float32"]["atol"], diff
    build(minilm_dir(), tmp_path / "f16")
