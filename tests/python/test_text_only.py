"""`--text-only` packages of vision-language checkpoints through onnxruntime-genai 0.18: a
plain decoder package (no vision or embedding section) that generates transformers' greedy
tokens of the checkpoint's text path, and encodes the text prompt with the package's own
tokenizer as transformers' processor did."""
import json

import numpy as np
import onnxruntime_genai as og
import pytest
from safetensors.numpy import load_file

from conftest import FIXTURES, REGISTRY, build_with, genai_greedy

VL_FIXTURES = [f["name"] for f in REGISTRY["fixture"] if f["kind"] == "vlm"]
# Vision-language fixtures whose vision parts are not built: only --text-only makes a package.
TEXT_ONLY = [f["name"] for f in REGISTRY["fixture"] if "text_only" in f.get("traits", [])]


def reference(fixture):
    return load_file(str(FIXTURES / fixture / "reference.safetensors")), json.loads((FIXTURES / fixture / "reference.json").read_text())


@pytest.mark.parametrize("fixture", VL_FIXTURES)
def test_text_only_package_generates_transformers_tokens(fixture, tmp_path):
    pkg = build_with(tmp_path / "pkg", fixture, "cpu", ["--text-only"])
    genai = json.loads((pkg / "genai_config.json").read_text())["model"]
    assert "vision" not in genai and "embedding" not in genai, genai.keys()
    assert not (pkg / "vision.onnx").exists() and not (pkg / "processor_config.json").exists()
    report = json.loads((pkg / "build_report.json").read_text())
    assert any("--text-only" in n for n in report["notes"]), report["notes"]
    ref, meta = reference(fixture)
    model = og.Model(str(pkg))
    if "text_prompt" in meta:
        # The text prompt of a vision-language fixture: the package's tokenizer gives the ids
        # transformers' processor gave, and genai continues them as transformers did.
        ids = ref["text_input_ids"].astype(np.int32)
        tokenizer = og.Tokenizer(model)
        np.testing.assert_array_equal(np.asarray(tokenizer.encode(meta["text_prompt"])), ids.reshape(-1))
        want = ref["text_greedy_tokens"].reshape(-1).tolist()
    else:
        ids = ref["input_ids"].astype(np.int32)
        want = ref["greedy_tokens"].reshape(-1).tolist()
    assert genai_greedy(model, ids, len(want)) == want


@pytest.mark.parametrize("fixture", TEXT_ONLY)
def test_a_tower_not_built_is_refused_naming_the_flag(fixture, tmp_path):
    import subprocess

    from conftest import tailor_bin

    out = tmp_path / "pkg"
    done = subprocess.run([str(tailor_bin()), "build", "--model", str(FIXTURES / fixture), "--output", str(out)], capture_output=True, text=True)
    assert done.returncode != 0
    assert "--text-only" in done.stderr and "is not supported" in done.stderr, done.stderr
    assert not out.exists()


def test_int4_text_only_package_runs(tmp_path):
    pkg = build_with(tmp_path / "pkg", "tiny-mistral3", "cpu", ["--text-only", "--quant", "int4"])
    report = json.loads((pkg / "build_report.json").read_text())
    assert [p["role"] for p in report["parts"]] == ["decoder"]
    assert report["parts"][0]["quantization"] is not None
    ref, _ = reference("tiny-mistral3")
    model = og.Model(str(pkg))
    assert len(genai_greedy(model, ref["input_ids"].astype(np.int32), 8)) == 8
