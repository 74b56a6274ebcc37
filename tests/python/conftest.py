"""Shared fixtures for the Python tests: where the `tailor` binary and the fixtures are, and
which fixtures there are (the registry, tests/fixtures/fixtures.toml, read here once)."""
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
# The fixture registry; the Rust tests read the same file and check it against the folders.
REGISTRY = tomllib.loads((FIXTURES / "fixtures.toml").read_text())
# Every decoder fixture, in registry order.
DECODER_FIXTURES = [f["name"] for f in REGISTRY["fixture"] if f["kind"] == "decoder"]
# The pre-quantized decoders (GPTQ, AWQ): imported with their own integers.
PREQUANT_FIXTURES = [f["name"] for f in REGISTRY["fixture"] if f["kind"] == "prequant"]
# The mixture-of-experts decoders (trait `moe`).
# Fixtures whose experts the cpu table fuses into MoE (QMoE when quantized): the `moe` trait, and
# OLMoE (`olmoe`) and gpt-oss (`attention_sinks`), traits of their own because their op counts differ.
MOE_FIXTURES = [f["name"] for f in REGISTRY["fixture"] if {"moe", "olmoe", "attention_sinks", "grouped_routing", "sink_moe"} & set(f.get("traits", []))]


def real_file(env: str, size: int, what: str) -> Path:
    """A real checkpoint file scripts/test.sh fetches and names in `env`, checked by size, or a
    failure saying how to get it (never a skip: CI must run the tests that read it)."""
    named = os.environ.get(env)
    if not named:
        pytest.fail(f"{env} is not set: scripts/test.sh fetches {what} and sets it")
    path = Path(named)
    if not path.is_file() or path.stat().st_size != size:
        pytest.fail(f"{path} is missing or not the {size}-byte {what}; run scripts/test.sh, which fetches and checks it")
    return path


def tailor_bin() -> Path:
    path = os.environ.get("TAILOR_BIN")
    if not path or not Path(path).is_file():
        raise RuntimeError(
            "TAILOR_BIN must point at a built `tailor` binary; run the tests with scripts/test.sh"
        )
    return Path(path)


@pytest.fixture(scope="module")
def module_tmp(request, tmp_path_factory):
    """`tmp_path_factory.mktemp` for a module's fixtures, whose folders are removed when the
    module ends if none of its tests failed. pytest keeps a session's factory folders until the
    session ends; the real-checkpoint modules write 0.1-1.1 GB each, and CI's disk ran out."""
    made = []
    failed_before = request.session.testsfailed

    def mktemp(name: str) -> Path:
        made.append(tmp_path_factory.mktemp(name))
        return made[-1]

    yield mktemp
    if request.session.testsfailed == failed_before:
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def build_package(tmp_path_factory):
    """Builds (once per argument set) a package and returns its folder."""
    cache = {}

    def build(fixture: str, ep: str = "default", dtype: str = "f32") -> Path:
        key = (fixture, ep, dtype)
        if key not in cache:
            out = tmp_path_factory.mktemp(f"{fixture}-{ep}-{dtype}") / "pkg"
            cmd = [str(tailor_bin()), "build", "--model", str(FIXTURES / fixture),
                   "--output", str(out), "--ep", ep, "--dtype", dtype]
            done = subprocess.run(cmd, capture_output=True, text=True)
            assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr}"
            cache[key] = out
        return cache[key]

    return build


def build_folder(model: Path, out: Path, ep: str = "default") -> subprocess.CompletedProcess:
    """`tailor build` of the checkpoint folder `model` (a fixture copy a test edited) into `out`;
    the finished process, for tests that expect a refusal as well as a package."""
    cmd = [str(tailor_bin()), "build", "--model", str(model), "--output", str(out), "--ep", ep]
    return subprocess.run(cmd, capture_output=True, text=True)


def build_with(out: Path, fixture: str, ep: str, flags: list) -> Path:
    """Builds `fixture` for `ep` with extra command-line `flags` into `out`; returns `out`."""
    cmd = [str(tailor_bin()), "build", "--model", str(FIXTURES / fixture), "--output", str(out), "--ep", ep, *flags]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr}"
    return out


def prefill_logits(pkg: Path, ids, config: dict | None = None):
    """The logits of a no-past prefill of `ids` ([1, S] int64) through a decoder package's
    model.onnx on ORT's CPU EP: empty caches, all-ones mask, positions 0..S-1 where the model
    takes them; `config`: session config entries (e.g. the accuracy level ONNX Runtime gives
    a `default` package's fused DequantizeLinear + MatMul). Shape [1, S, V]."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
    so = ort.SessionOptions()
    for key, value in (config or {}).items():
        so.add_session_config_entry(key, value)
    sess = ort.InferenceSession(str(pkg / "model.onnx"), so, providers=["CPUExecutionProvider"])
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    names = {i.name for i in model.graph.input}
    if "position_ids" in names:
        feeds["position_ids"] = np.arange(ids.shape[1], dtype=np.int64)[None, :]
    for i in model.graph.input:
        if i.name.startswith("past_key_values."):
            dims = [d.dim_value if d.dim_value else 0 for d in i.type.tensor_type.shape.dim]
            dims[0] = 1
            feeds[i.name] = np.zeros(dims, dtype=np.float32)
    return sess.run(["logits"], feeds)[0]


def assert_reference_logits(pkg: Path, fixture: str, atol: float = 1e-4):
    """A decoder package built from an edited copy of `fixture` still gives the fixture's
    reference logits on its unpadded prompt (the edit was left out, as it should be)."""
    import numpy as np
    from safetensors.numpy import load_file

    ref = load_file(str(FIXTURES / fixture / "reference.safetensors"))
    assert ref["attention_mask"].all(), f"{fixture}'s prompt is unpadded"
    np.testing.assert_allclose(prefill_logits(pkg, ref["input_ids"]), ref["logits"], atol=atol)


def genai_greedy(model, prompt, new_tokens: int) -> list:
    """The `new_tokens` greedy tokens onnxruntime-genai generates after `prompt` ([1, S] int32)
    with an `og.Model`; min_length = max_length, so eos does not stop it early."""
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    total = prompt.shape[1] + new_tokens
    params.set_search_options(max_length=total, min_length=total, do_sample=False)
    gen = og.Generator(model, params)
    gen.append_tokens(prompt)
    while not gen.is_done():
        gen.generate_next_token()
    return [int(t) for t in gen.get_sequence(0)[prompt.shape[1]:]]


# A text whose pieces tell split rules apart (words, digit runs, a CJK/kana run, punctuation
# runs, blank lines): the GGUF tests' `tokenizer.ggml.pre` cases list the pieces each rule cuts.
SPLIT_SAMPLE = "Hello world 1234567 日本語のテキスト, ok!!\n\nx=3.14"


def assert_splits(src: Path, pieces, tmp_path: Path):
    """`src` builds with --strict (no unknown split) and its tokenizer.json cuts SPLIT_SAMPLE into
    `pieces`."""
    from tokenizers import Tokenizer, pre_tokenizers

    done = subprocess.run([str(tailor_bin()), "build", "--model", str(src), "--output", str(tmp_path / "pkg"), "--ep", "cpu", "--strict"], capture_output=True, text=True)
    assert done.returncode == 0 and "tokenizer.ggml.pre" not in done.stderr, done.stderr
    got = [p for p, _ in Tokenizer.from_file(str(tmp_path / "pkg" / "tokenizer.json")).pre_tokenizer.pre_tokenize_str(SPLIT_SAMPLE)]
    # The expected text pieces in the byte-level alphabet the written pieces are spelled in.
    spell = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    assert got == [spell.pre_tokenize_str(p)[0][0] for p in pieces], got
