"""webgpu encoder packages (ep-sets/tables/webgpu.toml [role.encoder.*]): they pass the table's
validation only with BERT's position Range and the pooling mask narrowed to int32
(lower.int64_to_int32's `.positions` and `.mask` variants; WebGPU registers Range, Unsqueeze and
Cast for int32, not int64), and RoBERTa's padding-aware positions counted in f32
(`.padding_positions`: WebGPU's CumSum takes f32/f16 only). No WebGPU device here: the f32 packages, whose contrib ops also run
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


@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_roberta_counts_its_positions_in_f32(dtype, tmp_path):
    """No int64 arithmetic left in the positions (the table refuses it), the count a float
    CumSum, the Gather index int32."""
    pkg = build(FIXTURES / "tiny-roberta", tmp_path / "pkg", ["--dtype", dtype])
    ops = {"CumSum", "Mul", "Add", "Equal", "Gather"}
    assert not int64_nodes(pkg, ops), int64_nodes(pkg, ops)
    m = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
    m = onnx.shape_inference.infer_shapes(m)
    types = {v.name: v.type.tensor_type.elem_type for v in list(m.graph.value_info) + list(m.graph.input)}
    types |= {t.name: t.data_type for t in m.graph.initializer}
    T = onnx.TensorProto
    by_op = lambda op: [n for n in m.graph.node if n.op_type == op]
    (cumsum,) = by_op("CumSum")
    assert types[cumsum.input[0]] == T.FLOAT, "the count is taken in f32 whatever the model's dtype"
    (equal,) = by_op("Equal")
    assert types[equal.input[0]] == types[equal.input[1]] == T.INT32
    position_gather = [n for n in by_op("Gather") if n.input[0] == "embeddings.position_embeddings.weight"]
    assert len(position_gather) == 1 and types[position_gather[0].input[1]] == T.INT32
    rules = json.loads((pkg / "build_report.json").read_text())["parts"][0]["pipeline"]["diagnostics"]["rules"]
    fired = {r["rule"]: r["fired"] for r in rules}
    assert fired.get("lower.int64_to_int32.padding_positions") == 1, fired


def test_the_lowered_roberta_keeps_its_values_with_padding(tmp_path):
    """The reference pads rows on either side with the pad id, so the count must skip them as
    transformers' `create_position_ids_from_input_ids` does: positions off by one would move
    every token's position embedding."""
    pkg = build(FIXTURES / "tiny-roberta", tmp_path / "pkg", ["--dtype", "f32"])
    ref = load_file(str(FIXTURES / "tiny-roberta" / "reference.safetensors"))
    assert (ref["attention_mask"] == 0).any(axis=1).sum() >= 2
    s = ort.InferenceSession(str(pkg / "model.onnx"), providers=["CPUExecutionProvider"])
    feeds = {i.name: ref[i.name].astype(np.int64) for i in s.get_inputs()}
    (hidden,) = s.run(["last_hidden_state"], feeds)
    diff = float(np.abs(hidden - ref["last_hidden_state"]).max())
    assert diff < 1e-4, diff


@pytest.mark.parametrize("fixture", ["tiny-bert", "tiny-roberta"])
def test_the_padding_goes_in_as_an_attention_bias(fixture, tmp_path):
    """WebGPU's MultiHeadAttention fails at run time on a key_padding_mask (slot 4) and reads
    attention_bias (slot 5): every attention of a webgpu package takes the bias, built once."""
    pkg = build(FIXTURES / fixture, tmp_path / "pkg", ["--dtype", "f32"])
    m = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
    mha = [n for n in m.graph.node if n.op_type == "MultiHeadAttention"]
    assert mha and all(len(n.input) == 6 and n.input[4] == "" and n.input[5] for n in mha), [list(n.input) for n in mha]
    assert len({n.input[5] for n in mha}) == 1
    fired = {r["rule"]: r["fired"] for r in json.loads((pkg / "build_report.json").read_text())["parts"][0]["pipeline"]["diagnostics"]["rules"]}
    assert fired.get("fuse.mha_additive_mask.bias") == len(mha), fired
