"""The tokenizer files `tailor build` warns about are the ones onnxruntime-genai cannot load.

For each way a checkpoint's tokenizer.json or tokenizer_config.json is broken, the package
built from it must (1) carry a build warning naming the file (an error under --strict), and
(2) really fail to open in onnxruntime-genai: so the warning says something true. The
unbroken package opens and encodes, so a failure is the file's doing. And a SentencePiece
tokenizer.model does not stand in for tokenizer.json. Facts checked on onnxruntime-genai 0.18;
builder/src/companions.rs cites them.
"""
import json
import shutil
import struct
import subprocess

import onnxruntime_genai as og
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


def open_tokenizer(pkg):
    model = og.Model(str(pkg))
    tokenizer = og.Tokenizer(model)
    return list(tokenizer.encode("hello world"))


def test_the_unbroken_package_opens_its_tokenizer(tmp_path):
    done = build(checkpoint(tmp_path), tmp_path / "pkg", "--strict")
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr, done.stderr
    assert len(open_tokenizer(tmp_path / "pkg")) > 0


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_tokenizer_file_is_a_warning_and_genai_fails_on_it(tmp_path, case):
    file, data, says = BROKEN[case]
    model = checkpoint(tmp_path, file, data)
    done = build(model, tmp_path / "pkg")
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if line.startswith("warning:") and file in line]
    assert warning and says in warning[0] and "onnxruntime-genai will not load" in warning[0], done.stderr
    report = json.loads((tmp_path / "pkg" / "build_report.json").read_text())
    assert report["tokenizer"]["genai_loadable"] is False
    with pytest.raises(Exception):
        open_tokenizer(tmp_path / "pkg")

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
    with pytest.raises(Exception, match="tokenizer.json"):
        open_tokenizer(tmp_path / "pkg")
