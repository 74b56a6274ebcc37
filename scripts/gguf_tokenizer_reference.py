"""Reference ids for tests/python/test_gguf_real_tokenizers.py: a real GGUF file's byte-level BPE
tokenizer (DeepSeek-R1-Distill-Qwen-7B's Q4_K_M header, see scripts/test.sh) as transformers'
GGUF loader encodes text, with the file's ids for its added tokens.

transformers 5.24's GGUF loader respells a control token written outside GPT-2's byte alphabet
(`<｜begin▁of▁sentence｜>`, id 151646 in the file) and then adds it as a new token past the
vocabulary (id 152065 of a 152064-row embedding: the model would fail on it), and leaves the
user-defined ones written so (`<｜User｜>`, `<｜Assistant｜>`, which the file's chat template
emits) to byte-level BPE, so their text is cut into pieces. The model's own tokenizer and
llama.cpp match every added token in text as its file id. So the reference is transformers'
encoding of the text between added tokens (split leftmost-longest over the file's control and
user-defined tokens, as `tokenizers` matches added tokens), each added token as its file id, the
file's BOS first (`add_bos_token`). transformers' whole-string ids are kept beside it, to show
where and why they differ.

Needs transformers, gguf and torch (transformers' AutoTokenizer wants torch for a GGUF file);
run once, not in CI, and commit the output:
    /work/venv-ref/bin/python scripts/gguf_tokenizer_reference.py HEAD.gguf tests/python/data/gguf_deepseek_qwen_tokenizer_reference.json
"""
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gguf_header_model  # noqa: E402

STRINGS = [
    "Hello world",
    " leading space",
    "  two spaces\tand tab\n\nnewlines",
    "12345 numbers 3.14159",
    "<｜begin▁of▁sentence｜>text after bos",
    "<｜User｜>What is 2+2?<｜Assistant｜><think>\nokay</think>",
    "中文字符和日本語のテキスト",
    "emoji 😀👍🏽 and accents café naïve",
    "code: def f(x):\n    return x**2  # comment",
    "<|im_start|>user\nhi<|im_end|>",
    "I'm we'll they've DON'T",
    "trailing space ",
    "\u00a0nbsp",
    "a<｜end▁of▁sentence｜>b",
    '<tool_call>{"name": "x"}</tool_call>',
    "ÀÉÎõü ß ﬁ ligature",
    "   ",
    "",
    "<｜User｜><｜User｜>x<｜Assistant｜>",
]


def split_added(text: str, added: dict) -> list:
    """`text` as pieces: plain strings and the ids of added tokens, leftmost-longest."""
    out, plain, i = [], "", 0
    by_length = sorted(added, key=len, reverse=True)
    while i < len(text):
        hit = next((t for t in by_length if text.startswith(t, i)), None)
        if hit is None:
            plain += text[i]
            i += 1
            continue
        if plain:
            out.append(plain)
            plain = ""
        out.append(added[hit])
        i += len(hit)
    if plain:
        out.append(plain)
    return out


def main(head: Path, out: Path) -> None:
    from transformers import AutoTokenizer

    with open(head, "rb") as f:
        kv = gguf_header_model.Header(f.read()).kv
    tokens = kv["tokenizer.ggml.tokens"][1][1]
    types = kv["tokenizer.ggml.token_type"][1][1]
    bos = kv["tokenizer.ggml.bos_token_id"][1]
    added = {t: i for i, t in enumerate(tokens) if types[i] in (3, 4)}
    with tempfile.TemporaryDirectory() as tmp:
        gguf_header_model.write(head, Path(tmp) / "model.gguf")
        tok = AutoTokenizer.from_pretrained(tmp, gguf_file="model.gguf")
        cases = []
        for s in STRINGS:
            ids = [bos]
            for piece in split_added(s, added):
                ids += [piece] if isinstance(piece, int) else tok(piece, add_special_tokens=False)["input_ids"]
            cases.append({"text": s, "ids": ids, "transformers_ids": tok(s)["input_ids"]})
    out.write_text(json.dumps({"vocabulary": len(tokens), "bos": bos, "cases": cases}, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
