"""Writes tests/python/data/gguf-spm/tiny-spm-phi3.Q8_0.gguf: a tiny `phi3` GGUF whose tokenizer is a
SentencePiece vocabulary in Phi-3's shape, and phi3-reference.json: the ids and text
transformers' own GGUF loader gives for the test strings (tests/python/test_gguf_sentencepiece.py).

Run once, not in CI (sentencepiece, gguf, numpy, transformers 5.24, tokenizers; no torch):
    /work/venv-tools/bin/python scripts/make_phi3_spm_gguf.py     # from the repository root

The vocabulary (llama.cpp's `Phi3MiniModel.set_vocab`, convert_hf_to_gguf.py, read for facts):
the 1000 pieces scripts/make_spm_gguf.py trains (unk/bos/eos 0/1/2, byte fallback), typed as
`_create_vocab_sentencepiece` types them, padded to the model's vocabulary (1024) with
`[PADi]` tokens of type UNUSED and score -10000; then Phi-3's added tokens as its
`tokenizer_config.json` lists them (`added_tokens_decoder`, Phi-3 / Phi-3.5-mini): every entry
gets score -1000 and type CONTROL when `special`, else USER_DEFINED, so `<unk>` and `<s>` become
CONTROL, `</s>` (special false in Phi-3's config) USER_DEFINED, and `<|endoftext|>` ..
`<|user|>` (ids 1000..1010 here, 32000..32010 in Phi-3) CONTROL. `tokenizer.ggml.pre` is
"default"; eos and pad are `<|endoftext|>`, `add_bos_token` / `add_eos_token` false (Phi-3.5's
config), Phi-3's chat template. The model (Phi3MiniModel.set_gguf_parameters: fused attn_qkv and
ffn_up, its own head) is random, 1 layer, Q8_0: the test reads the tokenizer through a package.

The reference, without torch: `AutoTokenizer.from_pretrained(dir, gguf_file=...)` needs torch
in transformers 5.24 only to choose the tokenizer class (it reads the model config through
`modeling_gguf_pytorch_utils.load_gguf_checkpoint`, which refuses to run without torch) and
because `integrations/gguf/reader.py` imports torch at module level (its metadata reader,
`read_gguf_metadata`, does not use it). For a phi3 file the class it chooses is
`TokenizersBackend` (no tokenizer_config.json beside the file, `Phi3Config` names no tokenizer
class, and `models/auto/tokenization_auto.py` maps `phi3` to TokenizersBackend: it is in
`MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS`), so this calls
`TokenizersBackend.from_pretrained(dir, gguf_file=...)`, the call AutoTokenizer makes, after
importing the gguf integration with a placeholder `torch` module (module-level names only; no
torch function runs) that is removed again. The tokenizer itself is built by the GGUF builders
whatever the class (`TokenizersBackend.__init__` takes `convert_gguf_tokenizer`'s tokenizer).
`--check-llama` runs the same path on tiny-spm-llama.Q8_0.gguf (TokenizersBackend too:
`LlamaConfig` has no entry in TOKENIZER_MAPPING, so AutoTokenizer falls back to it) and compares
with reference.json, which was made with AutoTokenizer itself (and torch).
"""
import json
import sys
import types
from pathlib import Path

import numpy as np
import gguf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_spm_gguf import TEST_STRINGS, tensor, train, vocab_of  # noqa: E402
from gguf import GGMLQuantizationType as T  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "python" / "data" / "gguf-spm"
NAME = "tiny-spm-phi3.Q8_0.gguf"
VOCAB = 1024
# Phi-3's added tokens (32000.. there), each with its `special` flag from added_tokens_decoder.
PHI3_ADDED = ["<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>", "<|placeholder3|>", "<|placeholder4|>", "<|system|>", "<|end|>", "<|placeholder5|>", "<|placeholder6|>", "<|user|>"]
PHI3_DECODER = {0: ("<unk>", True), 1: ("<s>", True), 2: ("</s>", False)}
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}"
    "{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"
)
# The shared strings, with the chat markers of this vocabulary instead of ChatML's, and text where
# Phi-3's normalizer (a `▁` prefixed to every piece between added tokens) shows.
PHI3_STRINGS = [s for s in TEST_STRINGS if not s.startswith(("<|im_start|>", "<think>"))] + [
    "<|user|>\nhi there<|end|>\n<|assistant|>",
    "<|system|> You are   helpful.<|end|><|user|>  two spaces<|end|>",
    "<|endoftext|>",
    " <|user|>x",
    "text</s>more </s> after",
    "<s> bos in text",
]


def phi3_vocab():
    sp = train(1000, {"unk": 0, "bos": 1, "eos": 2}, {"unk": "<unk>", "bos": "<s>", "eos": "</s>"}, [])
    tokens, scores, types_ = vocab_of(sp, [])
    tokens += [f"[PAD{i}]" for i in range(len(tokens), VOCAB)]
    scores += [-10000.0] * (VOCAB - len(scores))
    types_ += [5] * (VOCAB - len(types_))
    decoder = dict(PHI3_DECODER)
    decoder.update({1000 + i: (t, True) for i, t in enumerate(PHI3_ADDED)})
    for i, (text, special) in decoder.items():
        tokens[i], scores[i], types_[i] = text, -1000.0, 3 if special else 4
    return tokens, scores, types_


def write_phi3(path, tokens, scores, types_):
    rng = np.random.default_rng(29)
    hidden, ff, heads, layers = 32, 64, 2, 1
    w = gguf.GGUFWriter(str(path), "phi3")
    w.add_name("tiny spm phi3")
    # Phi3MiniModel.set_gguf_parameters, in its order.
    w.add_context_length(256)
    w.add_rope_scaling_orig_ctx_len(256)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ff)
    w.add_block_count(layers)
    w.add_head_count(heads)
    w.add_head_count_kv(heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(hidden // heads)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_sliding_window(0)
    # set_vocab, then SpecialVocab (ids, flags and chat template from tokenizer_config.json).
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types_)
    w.add_bos_token_id(1)
    w.add_eos_token_id(1000)
    w.add_unk_token_id(0)
    w.add_pad_token_id(1000)
    w.add_add_bos_token(False)
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    r = lambda *s: rng.standard_normal(s) * 0.1  # noqa: E731
    tensor(w, "token_embd.weight", r(len(tokens), hidden), T.Q8_0)
    tensor(w, "output_norm.weight", 1 + r(hidden), T.F32)
    tensor(w, "output.weight", r(len(tokens), hidden), T.Q8_0)
    for i in range(layers):
        tensor(w, f"blk.{i}.attn_norm.weight", 1 + r(hidden), T.F32)
        tensor(w, f"blk.{i}.ffn_norm.weight", 1 + r(hidden), T.F32)
        tensor(w, f"blk.{i}.attn_qkv.weight", r(3 * hidden, hidden), T.Q8_0)
        tensor(w, f"blk.{i}.attn_output.weight", r(hidden, hidden), T.Q8_0)
        tensor(w, f"blk.{i}.ffn_up.weight", r(2 * ff, hidden), T.Q8_0)
        tensor(w, f"blk.{i}.ffn_down.weight", r(hidden, ff), T.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gguf_tokenizer(folder, name, class_name):
    """transformers' GGUF tokenizer for the file, through `<class_name>.from_pretrained(dir,
    gguf_file=...)` (see the module doc for why not AutoTokenizer)."""
    import transformers

    stub = types.ModuleType("torch")
    stub.__getattr__ = lambda name: object  # annotations and dtype constants at module level
    assert "torch" not in sys.modules
    sys.modules["torch"] = stub
    try:
        import transformers.integrations.gguf.reader  # noqa: F401  (the module-level `import torch`)
    finally:
        del sys.modules["torch"]
    return getattr(transformers, class_name).from_pretrained(str(folder), gguf_file=name)


def reference(tok, name, strings, class_name):
    ids = [tok(s)["input_ids"] for s in strings]
    return {
        "generator": f"transformers {__import__('transformers').__version__} {class_name}.from_pretrained(dir, gguf_file={name}) "
        "(the class AutoTokenizer picks; scripts/make_phi3_spm_gguf.py says why not AutoTokenizer itself)",
        "strings": strings,
        "ids": ids,
        "decoded": [tok.decode(i, skip_special_tokens=True) for i in ids],
        "tokens": [tok.convert_ids_to_tokens(i) for i in ids],
    }


def main():
    if "--check-llama" in sys.argv:
        ref = json.loads((OUT / "reference.json").read_text())
        tok = gguf_tokenizer(OUT, "tiny-spm-llama.Q8_0.gguf", "TokenizersBackend")
        got = reference(tok, "tiny-spm-llama.Q8_0.gguf", ref["strings"], "TokenizersBackend")
        assert got["ids"] == ref["ids"] and got["decoded"] == ref["decoded"], "this path differs from AutoTokenizer's reference"
        print(f"llama: {len(ref['strings'])} strings, ids and text as reference.json (AutoTokenizer)")
        return
    tokens, scores, types_ = phi3_vocab()
    write_phi3(OUT / NAME, tokens, scores, types_)
    tok = gguf_tokenizer(OUT, NAME, "TokenizersBackend")
    ref = reference(tok, NAME, PHI3_STRINGS, "TokenizersBackend")
    (OUT / "phi3-reference.json").write_text(json.dumps(ref, ensure_ascii=False, indent=1) + "\n")
    if "--dump" in sys.argv:
        tok.save_pretrained("/tmp/spm-phi3-tokenizer")
    for s, i in zip(ref["strings"], ref["tokens"]):
        print(repr(s), i)


if __name__ == "__main__":
    main()
