"""Built packages load in onnxruntime-genai and generate transformers' greedy tokens, and pass
the ONNX checker with full_check."""
import json
import shutil
import subprocess

import onnx
import onnxruntime_genai as og
import pytest
from safetensors.numpy import load_file

from conftest import DECODER_FIXTURES, FIXTURES, PREQUANT_FIXTURES, REGISTRY, genai_greedy, tailor_bin

EPS = ["default", "cpu"]
TRAITS = {f["name"]: f.get("traits", []) for f in REGISTRY["fixture"]}
# Builds that cannot be made yet, with the reason (strict: an unexpected pass fails the run).
PENDING: dict = {}

# (fixture, ep) pairs whose packages must generate the reference tokens.
GENERATION_CASES = [
    pytest.param(f, ep, marks=pytest.mark.xfail(reason=PENDING[(f, ep)], strict=True)) if (f, ep) in PENDING else (f, ep)
    for f in DECODER_FIXTURES
    for ep in EPS
]


def generate(pkg, prompt, expected):
    """The greedy tokens onnxruntime-genai generates after `prompt`, as many as `expected`.

    The reference generated them without stopping at eos, and some include eos. With
    min_length = max_length, onnxruntime-genai suppresses eos instead, so the copy tested
    here names as eos a token the reference never produced: the model itself is unchanged."""
    config = json.loads((pkg / "genai_config.json").read_text())
    config["model"]["eos_token_id"] = min(set(range(config["model"]["vocab_size"])) - set(expected))
    (pkg / "genai_config.json").write_text(json.dumps(config))
    return genai_greedy(og.Model(str(pkg)), prompt, len(expected))


@pytest.mark.parametrize("fixture", PREQUANT_FIXTURES)
def test_prequantized_package_generates_reference_greedy_tokens(fixture, tmp_path):
    """A GPTQ / AWQ checkpoint imported with its own integers generates through
    onnxruntime-genai: on cpu at accuracy level 0 (float activations) the reference's greedy
    tokens, which transformers computed with the dequantized model (every projection
    MatMulNBits, the lm_head float). The `default` package (DequantizeLinear + MatMul) runs at
    the accuracy level ONNX Runtime fuses it with, `session.qdq_matmulnbits_accuracy_level`,
    4 unless set, which genai_config.json cannot set: it generates what the cpu package at
    accuracy level 4 generates."""
    from conftest import build_with

    ref = load_file(str(FIXTURES / fixture / "reference.safetensors"))
    expected = ref["greedy_tokens"][0].tolist()
    exact = build_with(tmp_path / "cpu0", fixture, "cpu", ["--accuracy-level", "0"])
    nodes = onnx.load(str(exact / "model.onnx"), load_external_data=False).graph.node
    assert [n.op_type for n in nodes].count("MatMulNBits") >= 2 * 4, f"{fixture}: the projections are MatMulNBits"
    assert any(n.op_type == "MatMul" and n.name.startswith("lm_head/") for n in nodes), "the float lm_head stays float"
    assert generate(exact, ref["input_ids"], expected) == expected
    portable = build_with(tmp_path / "default", fixture, "default", [])
    ops = [n.op_type for n in onnx.load(str(portable / "model.onnx"), load_external_data=False).graph.node]
    assert "DequantizeLinear" in ops and "MatMulNBits" not in ops
    for pkg in (exact, portable):
        onnx.checker.check_model(str(pkg / "model.onnx"), full_check=True)
    level4 = build_with(tmp_path / "cpu4", fixture, "cpu", ["--accuracy-level", "4"])
    assert generate(portable, ref["input_ids"], expected) == generate(level4, ref["input_ids"], expected)


@pytest.mark.parametrize("fixture,ep", GENERATION_CASES)
def test_generates_reference_greedy_tokens(build_package, fixture, ep, tmp_path):
    ref = load_file(str(FIXTURES / fixture / "reference.safetensors"))
    prompt = ref["input_ids"]
    expected = ref["greedy_tokens"][0].tolist()
    pkg = tmp_path / "pkg"
    shutil.copytree(build_package(fixture, ep), pkg)
    if ep == "cpu" and {"moe", "olmoe"} & set(TRAITS.get(fixture, [])):
        ops = {n.op_type for n in onnx.load(str(pkg / "model.onnx"), load_external_data=False).graph.node}
        assert "MoE" in ops and "Softmax" not in ops, f"{fixture}: the cpu package generates through com.microsoft MoE"
    assert generate(pkg, prompt, expected) == expected


@pytest.mark.parametrize("fixture,ep", GENERATION_CASES)
def test_passes_the_onnx_checker(build_package, fixture, ep):
    pkg = build_package(fixture, ep)
    onnx.checker.check_model(str(pkg / "model.onnx"), full_check=True)
    model = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
    domains = {n.domain for n in model.graph.node}
    if ep == "default":
        assert domains <= {"", "ai.onnx"}, f"default packages are standard ONNX only, found {domains}"


STATIC_LENGTH = 64


@pytest.mark.parametrize("ep,form", [("default", "TensorScatter"), ("cpu", "GroupQueryAttention")])
@pytest.mark.parametrize("fixture", DECODER_FIXTURES)
def test_static_cache_package_generates_reference_greedy_tokens(fixture, ep, form, tmp_path):
    """A `--kv-cache static --max-length 64` package: genai shares past and present (one
    preallocated buffer of 64 slots, past_present_share_buffer true) and generates the 16
    reference tokens after the prompt; `default` writes the buffer with TensorScatter, `cpu`
    with GroupQueryAttention in place."""
    from conftest import build_with

    if {"attention_sinks", "sinks"} & set(TRAITS.get(fixture, [])):
        # Sink attention (gpt-oss's, Flint's) has no static form yet: refused by the model
        # builder, by name, before anything is written.
        cmd = [str(tailor_bin()), "build", "--model", str(FIXTURES / fixture), "--output", str(tmp_path / "pkg"),
               "--ep", ep, "--kv-cache", "static", "--max-length", str(STATIC_LENGTH)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode != 0 and "no static KV cache form" in done.stderr, done.stderr
        assert not (tmp_path / "pkg").exists()
        return
    ref = load_file(str(FIXTURES / fixture / "reference.safetensors"))
    prompt = ref["input_ids"]
    expected = ref["greedy_tokens"][0].tolist()
    pkg = build_with(tmp_path / "pkg", fixture, ep, ["--kv-cache", "static", "--max-length", str(STATIC_LENGTH)])
    ops = {n.op_type for n in onnx.load(str(pkg / "model.onnx"), load_external_data=False).graph.node}
    assert form in ops, f"{ep}: the static form writes the cache with {form}"
    config = json.loads((pkg / "genai_config.json").read_text())
    assert config["search"]["past_present_share_buffer"] is True
    assert config["search"]["max_length"] == STATIC_LENGTH
    config["model"]["eos_token_id"] = min(set(range(config["model"]["vocab_size"])) - set(expected))
    (pkg / "genai_config.json").write_text(json.dumps(config))
    model = og.Model(str(pkg))
    params = og.GeneratorParams(model)
    params.set_search_options(min_length=STATIC_LENGTH, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt)
    for _ in expected:
        generator.generate_next_token()
    produced = [int(t) for t in generator.get_sequence(0)[prompt.shape[1]:]]
    assert produced == expected
