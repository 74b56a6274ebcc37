"""Split GGUF files (llama.cpp's `gguf-split` names, `PREFIX-00001-of-0000N.gguf`, the first
holding the metadata): the real SmolLM2 Q4_1 file split into three with gguf-py's writer
(scripts/split_gguf.py) builds the package the one file builds, byte for byte, whether the first
file or their folder is named; a later file or an incomplete set is refused saying what to pass."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import tailor_bin
from test_gguf import gguf_path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from split_gguf import split  # noqa: E402

PACKAGE_FILES = ["model.onnx", "model.onnx.data", "genai_config.json", "tokenizer.json", "tokenizer_config.json"]


def build(model: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(tailor_bin()), "build", "--model", str(model), "--output", str(out), "--ep", "cpu"], capture_output=True, text=True)


@pytest.fixture(scope="module")
def split_set(module_tmp):
    folder = module_tmp("smollm2-split")
    # 273 tensors: 100 per file makes three files, each with a mix of Q4_1, Q8_0 and F32.
    paths = [Path(p) for p in split(str(gguf_path()), str(folder / "SmolLM2-135M-Instruct.Q4_1"), 100)]
    assert [p.name for p in paths] == [f"SmolLM2-135M-Instruct.Q4_1-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    return folder, paths


@pytest.fixture(scope="module")
def whole(module_tmp):
    out = module_tmp("smollm2-whole") / "pkg"
    done = build(gguf_path(), out)
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.parametrize("named", ["first file", "folder"])
def test_a_split_set_builds_the_package_of_the_one_file(split_set, whole, named, tmp_path):
    folder, paths = split_set
    out = tmp_path / "pkg"
    done = build(paths[0] if named == "first file" else folder, out)
    assert done.returncode == 0, done.stderr
    for name in PACKAGE_FILES:
        assert (out / name).read_bytes() == (whole / name).read_bytes(), f"{name} differs from the one file's package"
    source = json.loads((out / "build_report.json").read_text())["parts"][0]["quantization"]["source"]
    assert source["file"] == f"{paths[0].name} and the 2 other files of its split set"
    assert source["tensor_types"] == json.loads((whole / "build_report.json").read_text())["parts"][0]["quantization"]["source"]["tensor_types"]
    diff = subprocess.run([str(tailor_bin()), "diff", str(whole), str(out)], capture_output=True, text=True)
    assert diff.returncode == 0 and "same model" in diff.stdout, diff.stdout + diff.stderr


def test_a_later_file_or_a_missing_one_is_refused_saying_what_to_pass(split_set, tmp_path):
    folder, paths = split_set
    done = build(paths[1], tmp_path / "a")
    assert done.returncode != 0 and not (tmp_path / "a").exists()
    assert f"pass the first, `{paths[0].name}`" in done.stderr, done.stderr
    # The set without its last file, in a folder of its own.
    partial = tmp_path / "partial"
    partial.mkdir()
    for p in paths[:2]:
        (partial / p.name).symlink_to(p)
    done = build(partial / paths[0].name, tmp_path / "b")
    assert done.returncode != 0 and not (tmp_path / "b").exists()
    assert f"file 3 of 3, `{partial / paths[2].name}`, is not beside it" in done.stderr, done.stderr
