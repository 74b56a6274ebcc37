"""Gemma GGUF files (architectures `gemma`, `gemma2`, `gemma3`): the tiny Gemma fixtures written
as llama.cpp's converter writes them (scripts/make_gemma_gguf.py: norms stored as weight + 1,
no q/k permutation, gemma/gemma2 tied, metadata as the converter writes it), built with
`tailor build --model FILE.gguf` and compared with what transformers computes for the same
weights (tests/python/data/gguf-gemma/*.reference.safetensors):

- `<fixture>.F32.gguf` (every tensor float32): the logits of transformers' Gemma model with the
  fixture's config and the file's weights within 1e-4, the fixtures' f32 bound. The config is
  the one the file implies (the head tied for gemma/gemma2, as their files always are; gemma3's
  layer pattern, five of every six sliding, which the file cannot state: its two layers are both
  sliding, where the fixture's second is full), so these are not the fixtures' own references.
- `<fixture>.Q.gguf` (attention and embedding Q8_0, MLP Q4_0): the logits of that model with
  gguf-py's dequantization of the file's tensors (what transformers' GGUF loader loads), at
  accuracy level 1 (f32 activations).
"""
import json
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from safetensors.numpy import load_file

from conftest import prefill_logits, tailor_bin

DATA = Path(__file__).parent / "data" / "gguf-gemma"
GEMMAS = ["tiny-gemma", "tiny-gemma2", "tiny-gemma3"]


def build(src: Path, out: Path, flags=()) -> Path:
    cmd = [str(tailor_bin()), "build", "--model", str(src), "--output", str(out), "--ep", "cpu", *flags]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr}"
    return out


def logits(pkg: Path, ids: np.ndarray) -> np.ndarray:
    return prefill_logits(pkg, ids)


@pytest.mark.parametrize("fixture", GEMMAS)
def test_f32_file_matches_transformers(fixture, tmp_path):
    ref = load_file(str(DATA / f"{fixture}.reference.safetensors"))
    pkg = build(DATA / f"{fixture}.F32.gguf", tmp_path / "pkg")
    got = logits(pkg, ref["input_ids"])
    diff = np.abs(got - ref["logits_f32"]).max()
    assert diff <= 1e-4, f"{fixture}: max |logit difference| {diff}"
    cfg = json.loads((pkg / "genai_config.json").read_text())["model"]
    assert cfg["type"] == {"tiny-gemma": "gemma", "tiny-gemma2": "gemma2", "tiny-gemma3": "gemma3_text"}[fixture]


@pytest.mark.parametrize("fixture", GEMMAS)
def test_quantized_file_keeps_its_integers_and_matches(fixture, tmp_path):
    ref = load_file(str(DATA / f"{fixture}.reference.safetensors"))
    pkg = build(DATA / f"{fixture}.Q.gguf", tmp_path / "pkg", ["--accuracy-level", "1"])
    got = logits(pkg, ref["input_ids"])
    diff = np.abs(got - ref["logits_q"]).max()
    assert diff <= 1e-4, f"{fixture}: max |logit difference| {diff}"
    report = json.loads((pkg / "build_report.json").read_text())
    q = report["parts"][0]["quantization"]
    assert q["source"]["format"] == "gguf"
    assert {t["source"] for t in q["tensors"]} >= {"gguf:Q8_0", "gguf:Q4_0"}
    ops = [n.op_type for n in onnx.load(str(pkg / "model.onnx"), load_external_data=False).graph.node]
    assert ops.count("MatMulNBits") >= 2 * 4 and "GatherBlockQuantized" in ops, ops
