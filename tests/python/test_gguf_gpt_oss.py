"""gpt-oss GGUF files (issue #29): tests/python/data/gguf-moe/tiny-gpt-oss.*, tests/fixtures/
tiny-gpt-oss as llama.cpp's converter writes gpt-oss (scripts/make_gpt_oss_gguf.py): no q/k
permutation, attention sinks, the router with its bias, the experts split into gate, up and
down stacks with biases, YaRN and sliding-window keys, and a `gpt-4o` vocabulary.

llama.cpp's graph fixes the clamped SwiGLU's limit at 7.0 (no key carries it), and the fixture's
is 2.0, so the files stand for the fixture with limit 7.0: each test builds that checkpoint from
safetensors (the path whose gpt-oss packages match transformers, tests/tests) beside the file.

- `F32`: the same model, so the same logits and greedy tokens, on cpu (fused MoE) and default.
- `Q`: MXFP4 experts become 8-bit com.microsoft.QMoE on cpu whose weights are exactly gguf-py's
  dequantization of the file (8-bit QMoE runs int8 activations in ONNX Runtime 1.32: close
  logits, not equal); on `default` the experts are their exact float dequantization.
"""
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime_genai as og
import pytest
from onnx import numpy_helper
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from conftest import FIXTURES, genai_greedy, prefill_logits, tailor_bin

DATA = Path(__file__).parent / "data" / "gguf-moe"
FIXTURE = "tiny-gpt-oss"
# llama.cpp's `build_moe_ffn` (LLM_FFN_SWIGLU_OAI_MOE): `constexpr float limit = 7.0f`.
LLAMA_CPP_LIMIT = 7.0


def build(src: Path, out: Path, ep: str, flags=()):
    cmd = [str(tailor_bin()), "build", "--model", str(src), "--output", str(out), "--ep", ep, *flags]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr}"
    return out


def checkpoint(out: Path, weights: Path | None = None) -> Path:
    """The fixture with llama.cpp's SwiGLU limit (and `weights` for its safetensors)."""
    out.mkdir()
    for f in (FIXTURES / FIXTURE).iterdir():
        if not f.name.startswith("reference"):
            shutil.copy(f, out / f.name)
    config = json.loads((out / "config.json").read_text())
    assert config["swiglu_limit"] != LLAMA_CPP_LIMIT, "the fixture must differ from the file's limit for the test to show it is read"
    config["swiglu_limit"] = LLAMA_CPP_LIMIT
    (out / "config.json").write_text(json.dumps(config))
    if weights:
        shutil.copy(weights, out / "model.safetensors")
    return out


def inputs():
    return load_file(str(FIXTURES / FIXTURE / "reference.safetensors"))


def worst(pkg: Path, ref: Path, config: dict | None = None) -> float:
    """Max |logit difference| over both prompts, relative to the largest logit (`config`: the
    package's session entries)."""
    ids, w = inputs(), 0.0
    for key in ["input_ids", "short_input_ids"]:
        got, want = prefill_logits(pkg, ids[key], config), prefill_logits(ref, ids[key])
        w = max(w, float(np.abs(got - want).max() / np.abs(want).max()))
    return w


def graph(pkg: Path):
    model = onnx.load(str(pkg / "model.onnx"))
    return model, {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}


@pytest.mark.parametrize("ep", ["cpu", "default"])
def test_f32_file_is_the_fixture_with_llama_cpps_limit(ep, tmp_path):
    pkg = build(DATA / f"{FIXTURE}.F32.gguf", tmp_path / "gguf", ep)
    ref = build(checkpoint(tmp_path / "ckpt"), tmp_path / "ref", ep)
    assert worst(pkg, ref) < 1e-6, worst(pkg, ref)
    ids = inputs()
    # The limit is the file's, not the fixture's: transformers' logits at limit 2.0 differ.
    assert np.abs(prefill_logits(pkg, ids["input_ids"]) - ids["logits"]).max() > 1e-3
    prompt = ids["input_ids"].astype(np.int32)
    tokens = genai_greedy(og.Model(str(pkg)), prompt, 12)
    assert tokens == genai_greedy(og.Model(str(ref)), prompt, 12), tokens
    if ep == "cpu":
        ops = {n.op_type for n in graph(pkg)[0].graph.node}
        assert {"MoE", "GroupQueryAttention"} <= ops, sorted(ops)


def test_mxfp4_experts_become_8_bit_qmoe_holding_the_files_values(tmp_path):
    pkg = build(DATA / f"{FIXTURE}.Q.gguf", tmp_path / "q", "cpu", ["--accuracy-level", "0"])
    dequantized = DATA / f"{FIXTURE}.Q.dequantized.safetensors"
    ref = build(checkpoint(tmp_path / "ckpt", dequantized), tmp_path / "ref", "cpu")
    # ORT 1.32's 8-bit QMoE quantizes activations to int8 at every accuracy level: the bound of
    # test_gguf_moe.py's Q8_0 experts.
    assert worst(pkg, ref) < 5e-2, worst(pkg, ref)
    model, inits = graph(pkg)
    nodes = [n for n in model.graph.node if n.op_type == "QMoE"]
    config = json.loads((FIXTURES / FIXTURE / "config.json").read_text())
    assert len(nodes) == config["num_hidden_layers"], [n.op_type for n in model.graph.node]
    want = load_file(str(dequantized))
    for layer, n in enumerate(nodes):
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        assert (attrs["expert_weight_bits"], attrs["block_size"], attrs["weights_prepacked"]) == (8, 32, 0), attrs
        assert len(n.input) <= 11 or not n.input[11], "MXFP4 is symmetric: no zero points"
        # fc1 [E, 2I, H] (gate and up rows interleaved) and fc2 [E, H, I]: (code - 128) * scale
        # is gguf-py's dequantization exactly.
        p = f"model.layers.{layer}.mlp.experts."
        for data, scales, hf in [(n.input[2], n.input[3], "gate_up_proj"), (n.input[5], n.input[6], "down_proj")]:
            codes, s = inits[data].astype(np.float32), inits[scales]
            values = (codes - 128.0) * np.repeat(s, 32, axis=-1)
            np.testing.assert_array_equal(values, want[p + hf].transpose(0, 2, 1), err_msg=f"{hf} of layer {layer}")
        assert attrs["swiglu_limit"] == LLAMA_CPP_LIMIT, attrs
    report = json.loads((pkg / "build_report.json").read_text())["parts"][0]["quantization"]
    experts = [t for t in report["tensors"] if t["role"] == "experts"]
    assert len(experts) == 2 * config["num_hidden_layers"] and {t["source"] for t in experts} == {"gguf:MXFP4"}, experts
    assert all(t["max_abs_error"] == 0.0 for t in experts), experts


def test_mxfp4_experts_on_default_are_their_exact_dequantization(tmp_path):
    pkg = build(DATA / f"{FIXTURE}.Q.gguf", tmp_path / "q", "default")
    ref = build(checkpoint(tmp_path / "ckpt", DATA / f"{FIXTURE}.Q.dequantized.safetensors"), tmp_path / "ref", "default")
    # ONNX Runtime fuses the Q8_0 layers' DequantizeLinear + MatMul into MatMulNBits at accuracy
    # level 4 (int8 activations) unless told otherwise.
    exact = {"session.qdq_matmulnbits_accuracy_level": "0"}
    assert worst(pkg, ref, exact) < 1e-5, worst(pkg, ref, exact)
    warnings = json.loads((pkg / "build_report.json").read_text())["warnings"]
    assert any("float dequantization" in w for w in warnings), warnings


def test_the_gpt_4o_vocabulary_splits_as_o200k(tmp_path):
    """The file's `tokenizer.ggml.pre` `gpt-4o` gives o200k's split, which onnxruntime-genai's
    tokenizer runs as the `tokenizers` library does."""
    pkg = build(DATA / f"{FIXTURE}.F32.gguf", tmp_path / "gguf", "cpu")
    tok = json.loads((pkg / "tokenizer.json").read_text())
    split = tok["pre_tokenizer"]["pretokenizers"][0]
    assert split["type"] == "Split" and r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+" in split["pattern"]["Regex"], split
    text = "HelloWorld it's 12345 tokens/second\n\n  CamelCase ÀÉÎ"
    ours = Tokenizer.from_file(str(pkg / "tokenizer.json"))
    # o200k splits a capitalised word from the next ("Hello", "World") and digits by three.
    pieces = [p for p, _ in ours.pre_tokenizer.pre_tokenize_str(text)]
    assert pieces[:6] == ["Hello", "World", "Ġit's", "Ġ", "123", "45"], pieces
    want = ours.encode(text, add_special_tokens=False).ids
    got = og.Tokenizer(og.Model(str(pkg))).encode(text).tolist()
    assert got == want, (got, want)
