"""The tokenizer files `tailor build` warns about are the ones onnxruntime-genai cannot load.

For each way a checkpoint's tokenizer.json or tokenizer_config.json is broken, the package
built from it must (1) carry a build warning naming the file (an error under --strict), and
(2) be unusable in onnxruntime-genai: its tokenizer fails to open, or opens and encodes a
probe text to other ids than the unbroken tokenizer (a BPE model without `merges` does either,
or crashes genai 0.18, from run to run): so the warning says something true. The unbroken package opens
and encodes, so a failure is the file's doing. And a SentencePiece
tokenizer.model does not stand in for tokenizer.json. Facts checked on onnxruntime-genai 0.18;
builder/src/companions.rs cites them.
"""
import json
import shutil
import struct
import subprocess
import sys

import onnxruntime_genai  # noqa: F401  (the child processes import it; fail here if it is missing)
import pytest

from conftest import FIXTURES, tailor_bin

FIXTURE = "tiny-llama"
TOKENIZER = json.loads((FIXTURES / FIXTURE / "tokenizer.json").read_text())


def edited(edit):
    t = json.loads(json.dumps(TOKENIZER))
    edit(t)
    return json.dumps(t).encode()


# (file, bytes, what the warning says)
BROKEN = {
    "not-json": ("tokenizer.json", b"{not json", "not valid JSON"),
    "empty": ("tokenizer.json", b"", "not valid JSON"),
    "a-list": ("tokenizer.json", b"[]", "not a tokenizer object"),
    "no-model": ("tokenizer.json", b'{"version": "1.0"}', "no `model` object"),
    "model-a-string": ("tokenizer.json", b'{"version": "1.0", "model": "x"}', "`model` is a string"),
    "model-without-vocab": ("tokenizer.json", edited(lambda t: t["model"].pop("vocab")), "has no `vocab`"),
    "bpe-vocab-a-list": ("tokenizer.json", edited(lambda t: t["model"].__setitem__("vocab", [])), "`model.vocab` is a list"),
    "bpe-without-merges": ("tokenizer.json", edited(lambda t: t["model"].pop("merges")), "no `merges` list"),
    "added-tokens-a-string": ("tokenizer.json", edited(lambda t: t.__setitem__("added_tokens", "x")), "`added_tokens` is a string"),
    "config-not-json": ("tokenizer_config.json", b"{not json", "not valid JSON"),
    "config-a-list": ("tokenizer_config.json", b"[]", "not a JSON object"),
}


def checkpoint(tmp_path, file=None, data=None):
    model = tmp_path / "model"
    shutil.copytree(FIXTURES / FIXTURE, model, ignore=shutil.ignore_patterns("reference*"))
    if file is not None:
        (model / file).write_bytes(data)
    return model


def build(model, out, *flags):
    cmd = [str(tailor_bin()), "build", "--model", str(model), "--output", str(out), *flags]
    return subprocess.run(cmd, capture_output=True, text=True)


PROBE = "hello world, how are you?"


# Run in a child process: on some broken files genai 0.18 crashes (a segmentation fault
# encoding with a BPE model that has no merges), which would end the test run.
OPEN = """
import json, sys
import onnxruntime_genai as og
tokenizer = og.Tokenizer(og.Model(sys.argv[1]))
print(json.dumps([int(t) for t in tokenizer.encode(sys.argv[2])]))
"""


def open_tokenizer(pkg):
    """The probe's ids through genai's tokenizer of `pkg`; raises when it fails or crashes."""
    done = subprocess.run([sys.executable, "-c", OPEN, str(pkg), PROBE], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"genai's tokenizer of {pkg} failed (exit {done.returncode}): {done.stderr[-300:]}")
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def good_ids(module_tmp):
    """The probe's ids through the unbroken package, built with --strict (no warning)."""
    tmp = module_tmp("good")
    done = build(checkpoint(tmp), tmp / "pkg", "--strict")
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr, done.stderr
    return open_tokenizer(tmp / "pkg")


def test_the_unbroken_package_opens_its_tokenizer(good_ids):
    assert len(good_ids) > 0


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_tokenizer_file_is_a_warning_and_genai_cannot_use_it(tmp_path, case, good_ids):
    file, data, says = BROKEN[case]
    model = checkpoint(tmp_path, file, data)
    done = build(model, tmp_path / "pkg")
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if line.startswith("warning:") and file in line]
    assert warning and says in warning[0] and "onnxruntime-genai cannot use" in warning[0], done.stderr
    report = json.loads((tmp_path / "pkg" / "build_report.json").read_text())
    assert report["tokenizer"]["genai_loadable"] is False
    try:
        ids = open_tokenizer(tmp_path / "pkg")
    except Exception:
        return
    assert ids != good_ids, f"genai opened the {case} tokenizer and encodes as the unbroken one"

    strict = build(model, tmp_path / "strict", "--strict")
    assert strict.returncode == 1 and "--strict" in strict.stderr and file in strict.stderr, strict.stderr
    assert not (tmp_path / "strict").exists()


def sentencepiece_model():
    """A small well-formed SentencePiece ModelProto: a few pieces, a unigram trainer spec."""
    def varint(n):
        out = b""
        while True:
            low, n = n & 0x7F, n >> 7
            if not n:
                return out + bytes([low])
            out += bytes([low | 0x80])

    def field(number, wire, payload):
        key = varint((number << 3) | wire)
        return key + (varint(len(payload)) + payload if wire == 2 else payload)

    def piece(text, score, kind):
        return field(1, 2, text.encode()) + field(2, 5, struct.pack("<f", score)) + field(3, 0, varint(kind))

    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)] + [(c, -float(i), 1) for i, c in enumerate("\u2581helowrd")]
    model = b"".join(field(1, 2, piece(*p)) for p in pieces)
    return model + field(2, 2, field(3, 0, varint(1)))


def test_a_sentencepiece_model_without_tokenizer_json_is_a_warning_and_genai_fails_on_it(tmp_path):
    """onnxruntime-genai reads tokenizer.json from the folder; a SentencePiece tokenizer.model
    is not taken in its place (it fails with "Invalid file: .../tokenizer.json"), so a
    checkpoint that has only tokenizer.model gets the "lacks tokenizer.json" warning."""
    model = checkpoint(tmp_path, "tokenizer.model", sentencepiece_model())
    (model / "tokenizer.json").unlink()
    config = json.loads((model / "tokenizer_config.json").read_text())
    config["tokenizer_class"] = "LlamaTokenizer"
    (model / "tokenizer_config.json").write_text(json.dumps(config))
    done = build(model, tmp_path / "pkg")
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if line.startswith("warning:") and "lacks tokenizer.json" in line]
    assert warning and "not a SentencePiece tokenizer.model" in warning[0], done.stderr
    assert "tokenizer.model:" not in done.stderr, "the model itself is well formed"
    assert (tmp_path / "pkg" / "tokenizer.model").is_file()
    with pytest.raises(RuntimeError, match="tokenizer.json"):
        open_tokenizer(tmp_path / "pkg")
