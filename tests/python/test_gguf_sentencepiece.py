"""SentencePiece tokenizers in GGUF files (`tokenizer.ggml.model = "llama"`: tokens, scores and
token types, no merges), converted by `tailor build` into tokenizer.json and
tokenizer_config.json, against the ids transformers' own GGUF loader gives (committed by
scripts/make_spm_gguf.py and scripts/make_gemma_gguf.py, run with transformers 5.24):

- data/gguf-spm/tiny-spm-llama.Q8_0.gguf: a 1003-token BPE vocabulary trained with
  sentencepiece (byte fallback, two control symbols), written as llama.cpp writes Llama 2's,
  plus two user-defined and one control token appended as llama.cpp writes added tokens;
  architecture `llama`, so transformers builds it with LlamaTokenizer.
- data/gguf-gemma/tiny-gemma2.F32.gguf: a 512-token vocabulary in Gemma's shape (multi-space
  tokens stored with real spaces); architecture `gemma2`, so transformers builds it with
  GemmaTokenizer (merges ranked by position, spaces normalized to ▁, no prefix space).

The converted tokenizer.json is checked with the `tokenizers` library (what transformers runs)
on every string, and onnxruntime-genai's tokenizer (onnxruntime-extensions) on the package.
"""
import json
import subprocess
from pathlib import Path

import onnxruntime_genai as og
import pytest
from tokenizers import Tokenizer

from conftest import tailor_bin

DATA = Path(__file__).parent / "data"
CASES = {
    "llama": (DATA / "gguf-spm" / "tiny-spm-llama.Q8_0.gguf", DATA / "gguf-spm" / "reference.json"),
    "gemma": (DATA / "gguf-gemma" / "tiny-gemma2.F32.gguf", DATA / "gguf-gemma" / "tokenizer-reference.json"),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory):
    src, ref = CASES[request.param]
    pkg = tmp_path_factory.mktemp(f"spm-{request.param}") / "pkg"
    cmd = [str(tailor_bin()), "build", "--model", str(src), "--output", str(pkg), "--ep", "cpu"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr}"
    return request.param, pkg, json.loads(ref.read_text())


def test_tokenizer_json_encodes_as_transformers(case):
    """The written tokenizer.json, run by the tokenizers library, gives transformers' ids and
    decodes them to transformers' text for every test string."""
    _, pkg, ref = case
    tok = Tokenizer.from_file(str(pkg / "tokenizer.json"))
    for text, want, decoded in zip(ref["strings"], ref["ids"], ref["decoded"]):
        got = tok.encode(text).ids
        assert got == want, f"{text!r}: {tok.encode(text).tokens}"
        assert tok.decode(got, skip_special_tokens=True) == decoded, text


def ort_extensions_prefixes_differently(text: str, added: list) -> bool:
    """Where onnxruntime-extensions' SentencePiece path is known to differ from transformers'
    `Metaspace(prepend_scheme="first")`: it prefixes `▁` to every piece of text between added
    tokens, and to text that already starts with a space or `▁`."""
    if text[:1] in (" ", "\u2581"):
        return True
    return any(t in text and not text.endswith(t) for t in added)


def test_genai_tokenizer_encodes_as_transformers(case):
    """onnxruntime-genai on the package: transformers' ids (BOS included when the file asks) for
    every string, except, for the Llama builder, the strings where onnxruntime-extensions
    prefixes `▁` where transformers does not (see above; the Gemma builder adds no prefix, so
    every string matches there). Decoding gives transformers' text back."""
    name, pkg, ref = case
    config = json.loads((pkg / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == {"llama": "LlamaTokenizer", "gemma": "GemmaTokenizer"}[name]
    added = [t["content"] for t in json.loads((pkg / "tokenizer.json").read_text())["added_tokens"]]
    tok = og.Tokenizer(og.Model(str(pkg)))
    tok.update_options(add_special_tokens="true")
    diverged = []
    for text, want, decoded in zip(ref["strings"], ref["ids"], ref["decoded"]):
        got = tok.encode(text).tolist()
        if name == "llama" and ort_extensions_prefixes_differently(text, added):
            diverged.append(text)
            continue
        assert got == want, f"{text!r}: onnxruntime-genai {got}, transformers {want}"
        # onnxruntime-genai decodes a lone BOS to U+FFFD; text with content decodes exactly.
        if decoded:
            assert tok.decode(got) == decoded, text
    # The Llama strings skipped: leading spaces or `▁`, text after an added token.
    assert len(diverged) < len(ref["strings"]) // 2, diverged
    assert all(i[0] == ref["ids"][0][0] for i in ref["ids"]), "transformers adds BOS to every string"


def test_sentencepiece_vocabulary_facts(case):
    """What the conversion writes: byte fallback over <0x00>..<0xFF>, merges rebuilt from the
    vocabulary (the file has none), the control tokens special, user-defined ones not."""
    name, pkg, _ = case
    tj = json.loads((pkg / "tokenizer.json").read_text())
    model = tj["model"]
    assert model["type"] == "BPE" and model["byte_fallback"] and model["fuse_unk"]
    assert all(f"<0x{b:02X}>" in model["vocab"] for b in range(256))
    assert len(model["merges"]) > 50
    special = {t["content"]: t["special"] for t in tj["added_tokens"]}
    if name == "llama":
        assert special["<|im_start|>"] and special["<|tool|>"] and not special["<think>"]
        assert tj["pre_tokenizer"]["type"] == "Metaspace" and tj["pre_tokenizer"]["prepend_scheme"] == "first"
    else:
        assert special["<start_of_turn>"] and "<mask>" not in special, "no <mask> past the vocabulary"
        assert "\u2581\u2581" in model["vocab"] and "  " not in model["vocab"], "multi-space tokens respelled"
        assert tj["normalizer"]["type"] == "Replace" and model["unk_token"] == "<unk>"
