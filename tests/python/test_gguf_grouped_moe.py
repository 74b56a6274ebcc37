"""GGUF files of DeepSeek-style experts (issue #29): tests/python/data/gguf-moe/tiny-deepseek_v3.*,
tiny-deepseek_v2.* (`deepseek2` files, scripts/make_deepseek_gguf.py: latent attention as MQA
metadata, `kv_b_proj` split into `attn_k_b` / `attn_v_b` for V3 and whole as older files have it
for V2, V3's `exp_probs_b` correction bias, the routing in `expert_*` keys) tiny-glm4_moe.*
(`glm4moe`: partial rotary, q/k norms and biases, a multi-token prediction layer appended to
the blocks) and tiny-dots1.* (`dots1`: Qwen3 attention, no windows), both by
scripts/make_gqa_moe_gguf.py with tiny-exaone_moe.* (`exaone-moe`: K-EXAONE's windowed
pre-norm blocks, RoPE on the sliding layers only, a prediction layer appended), and tiny-youtu.* (a `deepseek2` file without experts: Youtu-LLM's
latent attention in dense blocks, make_deepseek_gguf.py) and tiny-deepseek_v3-nextn (tiny-deepseek_v3 as GLM-4.7-Flash's converter writes a deepseek2 file, a
prediction layer appended), tiny-solar_open.* (Solar Open as its converter writes a `glm4moe` file:
no dense lead, no prediction layer, no `feed_forward_length`, half of each head rotated) and tiny-mistral4.* (`mistral4`:
the latent attention with softmax-routed grouped experts in one `ffn_gate_up_exps` stack; no
temperature key, as llama.cpp's converter writes it, so held to the fixture with
Mistral4Config's default beta; `tiny-mistral4-temperature` states the fixture's), built with `tailor build --model
FILE.gguf --ep cpu`:

- `<fixture>.F32.gguf`: the fixture's own weights: the package must give the fixture's reference
  logits (transformers on the original config) within its f32 bound, and genai its greedy
  tokens. This pins the metadata's reading (V2 or V3 from the gating function, groups, scale,
  renormalization, the latent sizes, YaRN's mscale from `yarn_log_multiplier`, GLM's rotary
  fraction and its prediction layer left unread) and the join of the split key/value projection.
  tiny-dots1 slides its last layer's window in transformers, which dots1 files cannot state
  (llama.cpp has no windows for it, nor does the released model use any): its file is held to
  the fixture built from safetensors with `max_window_layers` at its depth (no sliding layer).
- `<fixture>.Q.gguf`: against a float checkpoint of gguf-py's dequantization of the same file,
  built for the same EP at `--accuracy-level 0`: Q8_0 attention keeps its integers, Q4_0
  experts (V3, GLM) become 4-bit QMoE, exact to float rounding.
- the written tokenizer splits text as the models' own (`deepseek-v3`, `deepseek-llm`, `glm4`,
  `youtu`).
"""
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime_genai as og
import pytest
from safetensors.numpy import load_file

from conftest import FIXTURES, assert_splits, genai_greedy, prefill_logits, tailor_bin

DATA = Path(__file__).parent / "data" / "gguf-moe"
FIXTURES_HERE = ["tiny-deepseek_v3", "tiny-deepseek_v2", "tiny-glm4_moe", "tiny-dots1", "tiny-youtu", "tiny-exaone_moe", "tiny-mistral4", "tiny-afmoe", "tiny-solar_open"]
# deepseek2 files without experts (Youtu-LLM): latent attention in dense blocks.
DENSE = {"tiny-youtu"}
# Fixtures whose config states what their GGUF files cannot: the config a file of the same
# model reads as (tiny-dots1: no sliding layer).
AS_FILES_STATE = {
    "tiny-dots1": lambda c: {**c, "max_window_layers": c["num_hidden_layers"]},
    # llama.cpp's Mistral 4 converter writes no temperature key: Mistral4Config's beta, 0.1
    # (the fixture's is 0.25).
    "tiny-mistral4": lambda c: {**c, "rope_parameters": {**c["rope_parameters"], "llama_4_scaling_beta": 0.1}},
    # Solar Open's converter (a Glm4MoeModel) writes the rotated half of each head for a config
    # without `partial_rotary_factor` (GLM-4.5's default 0.5; Solar Open's own is 1).
    "tiny-solar_open": lambda c: {**c, "partial_rotary_factor": 0.5},
}
# The model type a file is read as where it is not the fixture's own: Solar Open's files are
# glm4moe files, read as GLM-4.5 (the same model with the file's keys).
READ_AS = {"tiny-solar_open": "glm4_moe"}


def build(src: Path, out: Path, flags=()):
    cmd = [str(tailor_bin()), "build", "--model", str(src), "--output", str(out), "--ep", "cpu", *flags]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr}"
    return out


def reference(fixture: str):
    ref = load_file(str(FIXTURES / fixture / "reference.safetensors"))
    bound = json.loads((FIXTURES / fixture / "reference.json").read_text())["tolerance"]["float32"]["atol"]
    return ref, bound


@pytest.mark.parametrize("fixture", FIXTURES_HERE)
def test_f32_file_gives_the_fixtures_reference(fixture, tmp_path):
    ref, bound = reference(fixture)
    pkg = build(DATA / f"{fixture}.F32.gguf", tmp_path / "pkg")
    stated = None
    if fixture in AS_FILES_STATE:
        src = FIXTURES / fixture / "model.safetensors"
        stated = build(float_checkpoint(fixture, tmp_path / "as-stated", src), tmp_path / "stated")
    for ids, want in [("input_ids", "logits"), ("short_input_ids", "short_logits")]:
        expected = ref[want] if stated is None else prefill_logits(stated, ref[ids])
        diff = np.abs(prefill_logits(pkg, ref[ids]) - expected).max()
        assert diff <= bound, f"{fixture} {want}: max |logit difference| {diff} > {bound}"
        if stated is not None:
            # What the file cannot state matters to the fixture's reference: the stated model
            # is another one.
            assert np.abs(expected - ref[want]).max() > 1e-2 or want == "short_logits"
    kinds = {n.op_type for n in onnx.load(str(pkg / "model.onnx"), load_external_data=False).graph.node}
    assert ("MoE" in kinds) != (fixture in DENSE), f"{fixture}: the cpu table fuses the grouped experts into com.microsoft.MoE: {sorted(kinds)}"
    if stated is None:
        tokens = genai_greedy(og.Model(str(pkg)), ref["input_ids"].astype(np.int32), ref["greedy_tokens"].shape[1])
        assert tokens == ref["greedy_tokens"][0].tolist(), f"{fixture}: genai {tokens}"


@pytest.mark.parametrize("fixture", FIXTURES_HERE)
def test_the_config_is_the_fixtures(fixture, tmp_path):
    """The file is read as the fixture's model type (deepseek2 files: V2 or V3 from the routing
    the metadata states; the routing and sizes themselves are pinned by the logits above)."""
    pkg = build(DATA / f"{fixture}.F32.gguf", tmp_path / "pkg")
    cfg = json.loads((FIXTURES / fixture / "config.json").read_text())
    report = json.loads((pkg / "build_report.json").read_text())
    assert report["model_type"] == READ_AS.get(fixture, cfg["model_type"]), f"{fixture}: read as {report['model_type']}"


def float_checkpoint(fixture: str, out: Path, weights: Path | None = None) -> Path:
    """The fixture's config (as its GGUF files state it) and tokenizer with `weights`, by
    default gguf-py's dequantized weights of the Q file."""
    out.mkdir()
    for f in (FIXTURES / fixture).iterdir():
        if f.suffix == ".json" and not f.name.startswith("reference"):
            shutil.copy(f, out / f.name)
    if fixture in AS_FILES_STATE:
        cfg = json.loads((out / "config.json").read_text())
        (out / "config.json").write_text(json.dumps(AS_FILES_STATE[fixture](cfg)))
    shutil.copy(weights or DATA / f"{fixture}.Q.dequantized.safetensors", out / "model.safetensors")
    return out


@pytest.mark.parametrize("fixture", FIXTURES_HERE)
def test_q_file_keeps_its_integers_and_matches_its_dequantization(fixture, tmp_path):
    ids = load_file(str(FIXTURES / fixture / "reference.safetensors"))
    pkg = build(DATA / f"{fixture}.Q.gguf", tmp_path / "q", ["--accuracy-level", "0"])
    ref = build(float_checkpoint(fixture, tmp_path / "dequantized"), tmp_path / "float")
    for key in ["input_ids", "short_input_ids"]:
        got, want = prefill_logits(pkg, ids[key]), prefill_logits(ref, ids[key])
        worst = float(np.abs(got - want).max() / np.abs(want).max())
        assert worst < 1e-5, f"{fixture} {key}: relative logit difference {worst}"
        # The dequantized model is another model than the fixture's (its weights were quantized).
        assert np.abs(want - ids[key.replace("input_ids", "logits")]).max() > 1e-3
    q = json.loads((pkg / "build_report.json").read_text())["parts"][0]["quantization"]
    imported = {t["weight"] for t in q["tensors"] if t["source"] == "gguf:Q8_0"}
    assert any("q_a_proj" in w or "q_proj" in w for w in imported), sorted(imported)
    assert fixture in ("tiny-glm4_moe", "tiny-dots1", "tiny-exaone_moe", "tiny-afmoe", "tiny-solar_open") or any("kv_a_proj_with_mqa" in w for w in imported), sorted(imported)
    if fixture in DENSE:
        assert any("mlp.down_proj" in w for w in imported), sorted(imported)
    elif fixture != "tiny-deepseek_v2":
        # Q4_0 experts where their rows are whole blocks: QMoE.
        experts = [t for t in q["tensors"] if t["role"] == "experts"]
        assert experts and {t["source"] for t in experts} == {"gguf:Q4_0"}, experts
        assert "QMoE" in {n.op_type for n in onnx.load(str(pkg / "model.onnx"), load_external_data=False).graph.node}


def test_appended_prediction_layers_of_a_deepseek2_file_are_left_unread(tmp_path):
    """GLM-4.7-Flash's converter (a DeepseekV2Model) appends its multi-token prediction layer to
    a deepseek2 file's blocks (`nextn_predict_layers`): tiny-deepseek_v3 written so is its own
    model (the fixture's reference and genai's tokens), the appended block left unread."""
    ref, bound = reference("tiny-deepseek_v3")
    pkg = build(DATA / "tiny-deepseek_v3-nextn.F32.gguf", tmp_path / "pkg")
    for ids, want in [("input_ids", "logits"), ("short_input_ids", "short_logits")]:
        diff = np.abs(prefill_logits(pkg, ref[ids]) - ref[want]).max()
        assert diff <= bound, f"{want}: max |logit difference| {diff} > {bound}"
    cfg = json.loads((FIXTURES / "tiny-deepseek_v3" / "config.json").read_text())
    # The decoder's layers only: one cache output per layer, none for the appended block.
    outputs = [o.name for o in onnx.load(str(pkg / "model.onnx"), load_external_data=False).graph.output if o.name.startswith("present.")]
    assert len(outputs) == 2 * cfg["num_hidden_layers"], outputs
    tokens = genai_greedy(og.Model(str(pkg)), ref["input_ids"].astype(np.int32), ref["greedy_tokens"].shape[1])
    assert tokens == ref["greedy_tokens"][0].tolist(), f"genai {tokens}"


def test_fused_gate_up_stacks_are_split_per_expert(tmp_path):
    """tiny-deepseek_v3-fused.*: the experts' gate and up stacks as one `ffn_gate_up_exps`
    (llama.cpp's `--fuse-gate-up-exps`, which its deepseek2 loader takes): the F32 file gives the
    fixture's reference, the Q file (Q4_0 experts) its dequantization within 1e-5 relative with
    the experts in 4-bit QMoE (each expert's gate and up rows cut apart keep their integers)."""
    ref, bound = reference("tiny-deepseek_v3")
    pkg = build(DATA / "tiny-deepseek_v3-fused.F32.gguf", tmp_path / "f32")
    for ids, want in [("input_ids", "logits"), ("short_input_ids", "short_logits")]:
        diff = np.abs(prefill_logits(pkg, ref[ids]) - ref[want]).max()
        assert diff <= bound, f"{want}: max |logit difference| {diff} > {bound}"
    q = build(DATA / "tiny-deepseek_v3-fused.Q.gguf", tmp_path / "q", ["--accuracy-level", "0"])
    deq = build(float_checkpoint("tiny-deepseek_v3", tmp_path / "deq-src", DATA / "tiny-deepseek_v3-fused.Q.dequantized.safetensors"), tmp_path / "deq")
    for key in ["input_ids", "short_input_ids"]:
        got, want = prefill_logits(q, ref[key]), prefill_logits(deq, ref[key])
        assert float(np.abs(got - want).max() / np.abs(want).max()) < 1e-5
    report = json.loads((q / "build_report.json").read_text())["parts"][0]["quantization"]
    experts = [t for t in report["tensors"] if t["role"] == "experts"]
    assert experts and {t["source"] for t in experts} == {"gguf:Q4_0"}, experts
    assert "QMoE" in {n.op_type for n in onnx.load(str(q / "model.onnx"), load_external_data=False).graph.node}


def test_mistral4_temperature_keys_are_its_query_scaling(tmp_path):
    """tiny-mistral4-temperature.F32.gguf states Llama 4's query scaling as llama.cpp's
    deepseek2 loader reads it (`attention.temperature_scale` = `llama_4_scaling_beta`,
    `attention.temperature_length` = YaRN's original length): the fixture's own reference, whose
    positions past that length (4) scale their queries, and genai's greedy tokens."""
    ref, bound = reference("tiny-mistral4")
    pkg = build(DATA / "tiny-mistral4-temperature.F32.gguf", tmp_path / "pkg")
    for ids, want in [("input_ids", "logits"), ("short_input_ids", "short_logits")]:
        diff = np.abs(prefill_logits(pkg, ref[ids]) - ref[want]).max()
        assert diff <= bound, f"{want}: max |logit difference| {diff} > {bound}"
    tokens = genai_greedy(og.Model(str(pkg)), ref["input_ids"].astype(np.int32), ref["greedy_tokens"].shape[1])
    assert tokens == ref["greedy_tokens"][0].tolist(), f"genai {tokens}"


def test_quantized_split_halves_are_joined_exactly(tmp_path):
    """tiny-deepseek_v3-wide.Q.gguf holds Q8_0 `attn_k_b` / `attn_v_b` (whole 32-value blocks):
    the joined key/value projection is their exact dequantization (k_b's blocks run along the
    wrong axis for any MatMulNBits, and the graph reads it per head), said per weight in the
    report; the package matches the float checkpoint of the file's dequantization."""
    ids = load_file(str(FIXTURES / "tiny-deepseek_v3" / "reference.safetensors"))
    pkg = build(DATA / "tiny-deepseek_v3-wide.Q.gguf", tmp_path / "q", ["--accuracy-level", "0"])
    ref = build(DATA / "tiny-deepseek_v3-wide", tmp_path / "float")
    for key in ["input_ids", "short_input_ids"]:
        got, want = prefill_logits(pkg, ids[key]), prefill_logits(ref, ids[key])
        worst = float(np.abs(got - want).max() / np.abs(want).max())
        assert worst < 1e-5, f"{key}: relative logit difference {worst}"
    report = json.loads((pkg / "build_report.json").read_text())
    kept = {k["weight"]: k["why"] for k in report["parts"][0]["quantization"]["kept_float"]}
    layers = json.loads((DATA / "tiny-deepseek_v3-wide" / "config.json").read_text())["num_hidden_layers"]
    joined = [w for w in kept if "kv_b_proj" in w]
    assert len(joined) == 2 * layers and all("exact float dequantization" in kept[w] for w in joined), kept
    assert any("kv_b_proj" in w for w in report["warnings"]), report["warnings"]


# The pieces each split rule cuts conftest's SPLIT_SAMPLE into, read off the rules' regexes:
# deepseek-v3 groups digits in threes and keeps a CJK/kana run whole; deepseek-llm cuts every
# digit and every line break alone; glm4 (Llama 3's regex) keeps the space before a word.
SPLITS = [
    ("tiny-deepseek_v3", ["Hello", " world", " ", "123", "456", "7", " ", "日本語のテキスト", ",", " ok", "!!\n\n", "x", "=", "3", ".", "14"]),
    ("tiny-deepseek_v2", ["Hello", " world", " ", *"1234567", " ", "日本語のテキスト", ",", " ok", "!!", "\n", "\n", "x", "=", "3", ".", "1", "4"]),
    ("tiny-glm4_moe", ["Hello", " world", " ", "123", "456", "7", " 日本語のテキスト", ",", " ok", "!!\n\n", "x", "=", "3", ".", "14"]),
    # exaone-moe: words joined across single spaces, each digit alone, at most one line break
    # after punctuation.
    ("tiny-exaone_moe", ["Hello world", " ", *"1234567", " 日本語のテキスト", ",", " ok", "!!\n", "\n", "x", "=", "3", ".", "1", "4"]),
    # youtu: the CJK/kana run first (so the space before it stands alone), then each digit alone.
    ("tiny-youtu", ["Hello", " world", " ", *"1234567", " ", "日本語のテキスト", ",", " ok", "!!\n\n", "x", "=", "3", ".", "1", "4"]),
]


# Split rules no fixture's file has, written over tiny-deepseek_v2's vocabulary by the generator
# (`pre`): deepseek-coder cuts line breaks, letters and punctuation (each with one leading
# space), CJK runs and each digit.
OTHER_SPLITS = [("deepseek-coder", ["Hello", " world", " ", *"1234567", " ", "日本語のテキスト", ",", " ok", "!!", "\n", "\n", "x", "=", "3", ".", "1", "4"])]


@pytest.mark.parametrize("pre,pieces", OTHER_SPLITS)
def test_other_split_rules(pre, pieces, tmp_path):
    """A `tokenizer.ggml.pre` of a model no fixture has, in a file the DeepSeek generator writes:
    its passes cut the sample as its regexes do, with no warning."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import make_deepseek_gguf

    cfg = json.loads((FIXTURES / "tiny-deepseek_v2" / "config.json").read_text())
    src = tmp_path / f"{pre}.gguf"
    make_deepseek_gguf.write(src, "tiny-deepseek_v2", cfg, load_file(str(FIXTURES / "tiny-deepseek_v2" / "model.safetensors")), False, pre=pre)
    assert_splits(src, pieces, tmp_path)


@pytest.mark.parametrize("fixture,pieces", SPLITS)
def test_the_tokenizer_splits_as_the_models_own(fixture, pieces, tmp_path):
    """The file's `tokenizer.ggml.pre` (`deepseek-v3`, `deepseek-llm`, `glm4`, `youtu`) becomes the
    model's own split, with no warning (an unknown rule would be one, which --strict refuses)."""
    assert_splits(DATA / f"{fixture}.F32.gguf", pieces, tmp_path)
