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
- data/gguf-spm/tiny-spm-phi3.Q8_0.gguf (scripts/make_phi3_spm_gguf.py, its reference without
  torch: phi3-reference.json): the same trained pieces in Phi-3's shape as llama.cpp writes a
  Phi-3 file (padded with [PADi], Phi-3's chat markers CONTROL, `</s>` USER_DEFINED, no BOS
  added); architecture `phi3`, so transformers builds it with `phi3_tokenizer` (a `Prepend("▁")`
  + `Replace(" ", "▁")` normalizer on each piece of text between added tokens, no
  pre-tokenizer).

The converted tokenizer.json is checked with the `tokenizers` library (what transformers runs)
on every string, and onnxruntime-genai's tokenizer (onnxruntime-extensions) on the package.
"""
import json
import subprocess
import unicodedata
from pathlib import Path

import onnxruntime_genai as og
import pytest
from tokenizers import Tokenizer, decoders

from conftest import tailor_bin

DATA = Path(__file__).parent / "data"
CASES = {
    "llama": (DATA / "gguf-spm" / "tiny-spm-llama.Q8_0.gguf", DATA / "gguf-spm" / "reference.json"),
    "gemma": (DATA / "gguf-gemma" / "tiny-gemma2.F32.gguf", DATA / "gguf-gemma" / "tokenizer-reference.json"),
    "phi3": (DATA / "gguf-spm" / "tiny-spm-phi3.Q8_0.gguf", DATA / "gguf-spm" / "phi3-reference.json"),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, module_tmp):
    src, ref = CASES[request.param]
    pkg = module_tmp(f"spm-{request.param}") / "pkg"
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


@pytest.mark.parametrize("case", ["gemma", "llama"], indirect=True)
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


def pieces_between(text: str, added: list) -> list:
    """The pieces of `text` between added tokens (longest token first at each place), as both
    tokenizers split it before normalizing."""
    out, piece, i = [], "", 0
    by_length = sorted(added, key=len, reverse=True)
    while i < len(text):
        hit = next((t for t in by_length if text.startswith(t, i)), None)
        if hit:
            out.append(piece)
            piece, i = "", i + len(hit)
        else:
            piece, i = piece + text[i], i + 1
    return [p for p in out + [piece] if p]


def ort_extensions_cuts_a_merge(text: str, added: list) -> bool:
    """Where onnxruntime-extensions' encoding of the phi3 package is known to differ from
    transformers': it splits each piece of text (after prefixing its `▁`) with Llama 3's split
    regex before BPE (LLAMA_REGEX_PATTERN, what it uses for a SentencePiece tokenizer.json whose
    pre-tokenizer gives no regex), unless the piece starts with a space; transformers' phi3
    builder has no pre-tokenizer, so its BPE sees the whole piece. The regex takes a run of
    symbols (`[^\\s\\p{L}\\p{N}]+`, `▁` being one) apart from the letters after it, so a `▁`
    written right after another symbol cannot merge with the letter that follows (`▁▁literal`:
    transformers `▁ ▁l it..`, onnxruntime-extensions `▁ ▁ l it..`)."""
    letter = lambda c: unicodedata.category(c).startswith("L")  # noqa: E731
    for piece in pieces_between(text, added):
        if piece.startswith(" "):
            continue
        p = "\u2581" + piece
        if any(p[i] == "\u2581" and letter(p[i + 1]) and not (letter(p[i - 1]) or p[i - 1].isdigit() or p[i - 1].isspace()) for i in range(1, len(p) - 1)):
            return True
    return False


def ort_extensions_decoding(pkg: Path, ids: list) -> str:
    """How onnxruntime-extensions decodes the phi3 package (SpmId2Token in bpe_streaming.hpp):
    special tokens skipped, `▁` as a space, and the leading space of the first token after a
    skipped special token dropped, where transformers' `Strip` decoder drops the first space of
    the whole text only (the encoder prefixes `▁` to every piece between added tokens; the
    decoder undoes it per piece). Computed with the package's tokenizer.json in the `tokenizers`
    library: pieces that follow a special token with its decoder (its `Strip` drops that space),
    a first piece at the start of the text without `Strip`. An empty text comes out as U+FFFD
    (its UTF-8 check reads an empty string as invalid)."""
    tok = Tokenizer.from_file(str(pkg / "tokenizer.json"))
    unstripped = Tokenizer.from_file(str(pkg / "tokenizer.json"))
    unstripped.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    special = {t["id"] for t in json.loads((pkg / "tokenizer.json").read_text())["added_tokens"] if t["special"]}
    runs, after_special, run = [], False, []
    for i in ids:
        if i in special:
            if run:
                runs.append((after_special, run))
            after_special, run = True, []
        else:
            run.append(i)
    if run:
        runs.append((after_special, run))
    text = "".join(tok.decode(r) if after else unstripped.decode(r) for after, r in runs)
    return text or "\ufffd"


@pytest.mark.parametrize("case", ["phi3"], indirect=True)
def test_genai_tokenizer_phi3(case):
    """onnxruntime-genai on the phi3 package: transformers' ids (no BOS: the file says
    add_bos_token false) for every string but those where onnxruntime-extensions' split regex
    cuts a `▁`-letter merge (see above; 1 of the 26 strings here). onnxruntime-extensions'
    SentencePiece handling prefixes `▁` to every piece between added tokens and one more to a
    piece starting with a space, as Phi-3's normalizer does, so text with leading spaces and
    text after chat markers encode as transformers does. Decoding differs from transformers' in
    where one space is dropped (see `ort_extensions_decoding`): checked exactly."""
    _, pkg, ref = case
    added = [t["content"] for t in json.loads((pkg / "tokenizer.json").read_text())["added_tokens"]]
    tok = og.Tokenizer(og.Model(str(pkg)))
    tok.update_options(add_special_tokens="true")
    diverged = []
    for text, want, decoded in zip(ref["strings"], ref["ids"], ref["decoded"]):
        got = tok.encode(text).tolist()
        if ort_extensions_cuts_a_merge(text, added):
            assert got != want, f"{text!r}: expected onnxruntime-extensions' regex split to differ"
            diverged.append(text)
            continue
        assert got == want, f"{text!r}: onnxruntime-genai {got}, transformers {want}"
        if got:
            assert tok.decode(got) == ort_extensions_decoding(pkg, got), f"{text!r}: transformers decodes {decoded!r}"
    assert len(diverged) < len(ref["strings"]) // 10, diverged


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
    elif name == "phi3":
        # `</s>` is USER_DEFINED in the file but LlamaTokenizer's default eos: special (skipped
        # when decoding) in transformers' tokenizer; the [PADi] fillers are not added tokens.
        assert special["<|end|>"] and special["<|user|>"] and special["</s>"] and not any(t.startswith("[PAD") for t in special)
        assert tj["normalizer"] == {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"}, {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
        assert tj["pre_tokenizer"] is None and tj["decoder"]["decoders"][-1]["type"] == "Strip"
        config = json.loads((pkg / "tokenizer_config.json").read_text())
        assert (config["tokenizer_class"], config["add_bos_token"], config["eos_token"]) == ("LlamaTokenizer", False, "<|endoftext|>")
    else:
        assert special["<start_of_turn>"] and "<mask>" not in special, "no <mask> past the vocabulary"
        assert "\u2581\u2581" in model["vocab"] and "  " not in model["vocab"], "multi-space tokens respelled"
        assert tj["normalizer"]["type"] == "Replace" and model["unk_token"] == "<unk>"
