"""Writes tests/python/data/gguf-spm/: a tiny llama GGUF whose tokenizer is a real SentencePiece BPE
vocabulary (`tokenizer.ggml.model = "llama"`: tokens, scores, token types, no merges), and the
token ids transformers' own GGUF loader gives for a set of test strings, the reference of
tests/python/test_gguf_spm.py.

Run once, not in CI (it needs sentencepiece, gguf, numpy, transformers):
    python scripts/make_spm_gguf.py            # from the repository root

The vocabulary: sentencepiece (BPE, byte fallback, so <0x00>..<0xFF> exist) trained on this
repository's docs at commit 03faefb plus a few lines of other scripts, with unk/bos/eos at 0/1/2
and two control symbols. It is written as llama.cpp's `convert_hf_to_gguf.py` writes a
SentencePiece vocabulary (`_create_vocab_sentencepiece`: piece text, score, type UNKNOWN 2 /
CONTROL 3 / UNUSED 5 / BYTE 6 / else NORMAL 1; added tokens with score -1000, USER_DEFINED 4 or
CONTROL 3), `tokenizer.ggml.pre = "default"`, bos/eos/unk/pad ids and add_bos/add_eos flags.
The model itself is random (seeded), 1 layer, Q8_0 projections and tied Q8_0 embeddings: the test
reads the tokenizer through a package, not the logits.
"""
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import sentencepiece as spm
import gguf
from gguf import GGMLQuantizationType as T

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "python" / "data" / "gguf-spm"
DOCS_COMMIT = "03faefb"
DOCS = ["README.md", "docs/architecture.md", "docs/pipeline.md", "docs/quantization.md"]
EXTRA = [
    "Le café de la gare est fermé le dimanche, mais la boulangerie reste ouverte.",
    "Die Größe des Modells hängt von der Anzahl der Schichten ab.",
    "El niño comió una manzana y después durmió la siesta.",
    "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "Быстрая коричневая лиса прыгает через ленивую собаку.",
    "数字 1234567890 和 3.14159 在文本中很常见。",
]
# Strings the test encodes: ASCII, leading and repeated spaces, newlines and tabs, digits,
# characters in the vocabulary and ones that only byte fallback can spell, special tokens in text.
TEST_STRINGS = [
    "Hello world",
    "The model is built from a GGUF file.",
    " leading space",
    "  two leading spaces",
    "multiple   spaces   inside  here",
    "trailing space ",
    " ",
    "",
    "line one\nline two\n\nline four\n",
    "tabs\tand\r\nwindows newlines",
    "digits 0123456789 and 3.14159 and 1,000,000",
    "café naïve Größe niño",
    "Быстрая лиса и 数字",
    "emoji 🦙🚀 and rare 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ǅ",
    "Ελληνικά: αλεπού",
    "special <s> and </s> inside",
    "<|im_start|>user\nhi there<|im_end|>",
    "<think>reasoning</think> done",
    "▁literal metaspace ▁▁",
    "zero\u200bwidth and\u00a0nbsp",
    "quantization: MatMulNBits, GatherBlockQuantized; tailor build --model FILE.gguf",
]


def corpus():
    text = []
    for doc in DOCS:
        text += subprocess.run(["git", "show", f"{DOCS_COMMIT}:{doc}"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.splitlines()
    return [line for line in text + EXTRA * 20 if line.strip()]


def train(vocab_size, ids, pieces, control):
    """A sentencepiece BPE model: special ids/pieces as given, byte fallback, deterministic."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus()), model_writer=model, model_type="bpe", vocab_size=vocab_size,
        byte_fallback=True, character_coverage=0.9995, num_threads=1, split_digits=True,
        unk_id=ids["unk"], bos_id=ids["bos"], eos_id=ids["eos"], pad_id=ids.get("pad", -1),
        unk_piece=pieces["unk"], bos_piece=pieces["bos"], eos_piece=pieces["eos"], pad_piece=pieces.get("pad", "<pad>"),
        control_symbols=control, minloglevel=2, shuffle_input_sentence=False,
    )
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(model.getvalue())
    return sp


def vocab_of(sp, added):
    """llama.cpp's `_create_vocab_sentencepiece`: (tokens, scores, types), then `added`
    ((text, type) appended with score -1000, as added_tokens_decoder entries are)."""
    tokens, scores, types = [], [], []
    for i in range(sp.vocab_size()):
        t = 1
        if sp.IsUnknown(i):
            t = 2
        elif sp.IsControl(i):
            t = 3
        elif sp.IsUnused(i):
            t = 5
        elif sp.IsByte(i):
            t = 6
        tokens.append(sp.IdToPiece(i))
        scores.append(sp.GetScore(i))
        types.append(t)
    for text, t in added:
        tokens.append(text)
        scores.append(-1000.0)
        types.append(t)
    return tokens, scores, types


def write_vocab(w, tokens, scores, types, ids, add_bos=True, add_eos=False, add_space_prefix=None):
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(ids["bos"])
    w.add_eos_token_id(ids["eos"])
    w.add_unk_token_id(ids["unk"])
    if "pad" in ids:
        w.add_pad_token_id(ids["pad"])
    w.add_add_bos_token(add_bos)
    w.add_add_eos_token(add_eos)
    if add_space_prefix is not None:
        w.add_add_space_prefix(add_space_prefix)


def tensor(w, name, data, qtype):
    data = data.astype(np.float32)
    if qtype == T.F32:
        w.add_tensor(name, data)
    else:
        w.add_tensor(name, gguf.quantize(data, qtype), raw_dtype=qtype)


def write_llama(path, tokens, scores, types, ids):
    rng = np.random.default_rng(29)
    hidden, ff, heads, kv, layers = 64, 128, 4, 2, 1
    hd = hidden // heads
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny spm llama")
    w.add_context_length(256)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    write_vocab(w, tokens, scores, types, ids)
    r = lambda *s: rng.standard_normal(s) * 0.1  # noqa: E731
    tensor(w, "token_embd.weight", r(len(tokens), hidden), T.Q8_0)
    tensor(w, "output_norm.weight", 1 + r(hidden), T.F32)
    for i in range(layers):
        tensor(w, f"blk.{i}.attn_norm.weight", 1 + r(hidden), T.F32)
        tensor(w, f"blk.{i}.ffn_norm.weight", 1 + r(hidden), T.F32)
        tensor(w, f"blk.{i}.attn_q.weight", r(heads * hd, hidden), T.Q8_0)
        tensor(w, f"blk.{i}.attn_k.weight", r(kv * hd, hidden), T.Q8_0)
        tensor(w, f"blk.{i}.attn_v.weight", r(kv * hd, hidden), T.Q8_0)
        tensor(w, f"blk.{i}.attn_output.weight", r(hidden, heads * hd), T.Q8_0)
        tensor(w, f"blk.{i}.ffn_gate.weight", r(ff, hidden), T.Q8_0)
        tensor(w, f"blk.{i}.ffn_up.weight", r(ff, hidden), T.Q8_0)
        tensor(w, f"blk.{i}.ffn_down.weight", r(hidden, ff), T.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def reference(folder, name):
    """What transformers' GGUF loader encodes and decodes, and the tokenizer it builds."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder), gguf_file=name)
    ids = [tok(s)["input_ids"] for s in TEST_STRINGS]
    return {
        "generator": f"transformers {__import__('transformers').__version__} AutoTokenizer.from_pretrained(dir, gguf_file=...)",
        "strings": TEST_STRINGS,
        "ids": ids,
        "decoded": [tok.decode(i, skip_special_tokens=True) for i in ids],
        "tokens": [tok.convert_ids_to_tokens(i) for i in ids],
    }, tok


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    ids = {"unk": 0, "bos": 1, "eos": 2}
    sp = train(1000, ids, {"unk": "<unk>", "bos": "<s>", "eos": "</s>"}, ["<|im_start|>", "<|im_end|>"])
    tokens, scores, types = vocab_of(sp, [("<think>", 4), ("</think>", 4), ("<|tool|>", 3)])
    name = "tiny-spm-llama.Q8_0.gguf"
    write_llama(OUT / name, tokens, scores, types, ids)
    ref, tok = reference(OUT, name)
    (OUT / "reference.json").write_text(json.dumps(ref, ensure_ascii=False, indent=1) + "\n")
    if "--dump" in sys.argv:
        tok.save_pretrained("/tmp/spm-llama-tokenizer")
    for s, i in zip(ref["strings"], ref["tokens"]):
        print(repr(s), i)


if __name__ == "__main__":
    main()
