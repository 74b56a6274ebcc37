"""GGUF files of the llama (Llama 3 rope factors), qwen3, phi3, granite, olmo2 (OLMo 3 too),
starcoder2, phi2, smollm3, glm4, ernie4_5, olmo, nemotron, seed_oss, arcee, exaone, exaone4, command-r, cohere2, stablelm, mistral3, apertus, gptneox and gpt2
architectures (issue #29): tests/python/data/gguf-arch/, the tiny fixtures
written as llama.cpp's converter writes them by scripts/make_arch_gguf.py (llama, granite and
smollm3 q/k permuted, `rope_freqs.weight` from the llama3 scaling; qwen3's q/k norms; phi3's
fused `attn_qkv` and `ffn_up`, LongRoPE factor tensors, partial rotary `rope.dimension_count`;
granite's four scales; olmo2's post-norms and whole-projection q/k norms; starcoder2's and
phi2's LayerNorms and biases; phi2's q/k/v separate, and fused in `tiny-phi-fused`; smollm3,
whose NoPE layers the file does not state; glm4's four norms, fused MLP and partial rotary;
ernie4_5's biases and tied head; olmo's weightless LayerNorms, permuted q/k and q/k/v clamp;
nemotron's `+ 1` LayerNorm1P weights, relu2 MLP and partial rotary; gpt2's learned positions,
Conv1D weights stored transposed and fused `c_attn`; OLMo 3 as olmo2 with its window pattern and
the full layers' YaRN; seed_oss's q/k/v biases and `post_attention_norm`; arcee's permuted q/k
and relu2 MLP; exaone4's post-norms, per-head q/k norms, window pattern and unrotated full
layers; cohere2's bias-free LayerNorms, parallel block, logit scale and window; command-r's per-head
q/k norms, one `[heads, head_dim]` weight each (Command R+); stablelm's per-head q/k norms
stacked by the converter and split back per head, and its parallel residual read from the
missing `ffn_norm`, StableLM 2 12B; mistral3's YaRN with its log multiplier and the query
scale's `attention.temperature_scale`, Ministral 3; apertus's xIELU scalars from the global
`xielu.*` metadata and its Llama 3 `rope_freqs.weight`; gptneox's `attn_qkv` restacked by the
converter and put back per head, Q8_0 in the Q file through the packed rows' order; falcon's
likewise put back per key/value group (tiny-falcon: Falcon-7B's multi-query file as the converter
writes it; tiny-falcon2: two groups, and the rope base, MLP width and biases FalconModel does not
write stated so that the file is the fixture's model); jais2's biased LayerNorms and relu2 MLP;
minicpm3's latent attention and LongRoPE factors; granite_swa's sinks, windows and NoPE layers
from `attention.rope_pattern`; chatglm's fused q/k/v with biases as THUDM's GLM-4-9B-chat stores
them, half of each head rotated in adjacent pairs, the fused gate/up MLP; exaone's own names
mapped by the converter, nothing permuted, its llama3 `rope_freqs.weight`, read as Llama; the
ALiBi architectures: bloom's embedding LayerNorm and per-head `query_key_value` restacked by the
converter and put back per head, the context the converter writes (the width, for a config
without `seq_length`); mpt's `Wqkv` as stored, its clamp `attention.clamp_kqv` and ALiBi maximum
`attention.max_alibi_bias`, its softmax scale unwritten; dbrx's `Wqkv` as stored with its clamp,
`attn_output_norm` before the experts, the experts' rows as 3-D stacks, `w2` transposed per
expert by the converter and read back as the file's rows, Q4_0 experts into QMoE), built with
`tailor build --model FILE.gguf --ep cpu`:

- `<stem>.F32.gguf`: every tensor F32, the fixture's own weights, so the package must give the
  fixture's own reference logits (tests/fixtures/<fixture>/reference.safetensors, transformers
  on the original config) within the fixture's f32 bound; for LongRoPE also the short prompt
  (below `original_max_position_embeddings`, the short factors).
- the same comparison fails for the config a mis-read key or a wrong loader default would give
  (`MISREAD`: the fixture's checkpoint built with that one key changed), so the bound tells the
  right reading from a wrong one.
- `<stem>.Q.gguf` (attention, embedding and head Q8_0, MLP Q4_0): against a float checkpoint
  of gguf-py's dequantization of the same file (committed as
  `<fixture>.Q.dequantized.safetensors`, with the fixture's config.json and tokenizer) built by
  tailor for the same EP, at accuracy level 1 (f32 activations); every projection stays a
  MatMulNBits of the file's type (no MatMul reads a float weight) and no tensor is written as
  its float dequantization.
"""
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from safetensors.numpy import load_file

from conftest import FIXTURES, assert_splits, prefill_logits, tailor_bin

DATA = Path(__file__).parent / "data" / "gguf-arch"
F32 = [
    "tiny-llama3-rope", "tiny-qwen3", "tiny-phi3", "tiny-phi3-longrope", "tiny-phi3-partial",
    "tiny-granite", "tiny-olmo2", "tiny-starcoder2", "tiny-phi", "tiny-phi-fused", "tiny-smollm3",
    "tiny-glm4", "tiny-ernie4_5", "tiny-olmo", "tiny-nemotron", "tiny-gpt2",
    "tiny-olmo3", "tiny-seed_oss", "tiny-arcee", "tiny-exaone4", "tiny-cohere2", "tiny-stablelm",
    "tiny-cohere-qknorm", "tiny-stablelm2-12b", "tiny-ministral3", "tiny-stablelm-key-default",
    "tiny-apertus", "tiny-gpt_neox", "tiny-granite-fused", "tiny-seed_oss-fused", "tiny-gpt_bigcode",
    "tiny-jais2", "tiny-falcon", "tiny-falcon2", "tiny-minicpm3", "tiny-granite_swa", "tiny-glm",
    "tiny-exaone", "tiny-bloom", "tiny-mpt", "tiny-dbrx", "tiny-granite-minicpm", "tiny-granite-minicpm-longrope",
    "tiny-qwen3-vl",
]
QUANTIZED = ["tiny-granite-minicpm", "tiny-dbrx", "tiny-bloom", "tiny-mpt", "tiny-exaone", "tiny-llama3-rope", "tiny-phi3-longrope", "tiny-granite", "tiny-phi-fused", "tiny-glm4", "tiny-nemotron", "tiny-gpt2", "tiny-olmo3", "tiny-gpt_neox", "tiny-granite-fused", "tiny-gpt_bigcode", "tiny-jais2", "tiny-falcon2", "tiny-minicpm3", "tiny-granite_swa", "tiny-glm"]
# Files of another layout than their fixture's (scripts/make_arch_gguf.py's VARIANTS).
# tiny-stablelm-key-default: `use_parallel_residual` true as the converter writes it for a config
# without the key, beside the sequential tensors (`ffn_norm` present): read from the tensors.
# tiny-granite-fused / tiny-seed_oss-fused: q, k and v in one `attn_qkv` as llama.cpp's
# `--fuse-qkv` writes it (granite's q/k rows permuted before the concat; seed_oss's biases fused
# too), which its loaders take through `create_tensor_qkv`.
# tiny-granite-minicpm: tiny-granite as MiniCPMModel writes a MiniCPM checkpoint (`minicpm`:
# Granite's scalings are MiniCPM's; no attention scale key, so 1/sqrt(head size): AS_FILES_STATE).
# tiny-qwen3-vl: tiny-qwen3 as Qwen3-VL's text file (`qwen3vl`: multimodal RoPE sections and a
# deepstack count beside Qwen3's keys), whose text model is the fixture's.
VARIANTS = {"tiny-phi-fused": "tiny-phi", "tiny-stablelm-key-default": "tiny-stablelm", "tiny-granite-fused": "tiny-granite", "tiny-seed_oss-fused": "tiny-seed_oss", "tiny-granite-minicpm": "tiny-granite", "tiny-granite-minicpm-longrope": "tiny-granite", "tiny-qwen3-vl": "tiny-qwen3"}
# Files whose fixture's config states what they cannot (the config the file is read as), by stem:
# tiny-minicpm3's `dim_model_base` 16, where llama.cpp's graph fixes MiniCPM3-4B's 256 (the file
# has no key for it), and LongRoPE's original length 64, where the file states none and llama.cpp
# takes the context length (256). Its file is held to the fixture built with those values (the
# fixture's own checkpoint, so the weights and every other key are the fixture's).
AS_FILES_STATE = {
    "tiny-minicpm3": lambda c: {**c, "dim_model_base": 256, "rope_scaling": {**c["rope_scaling"], "original_max_position_embeddings": c["max_position_embeddings"]}},
    # tiny-granite_swa's layer 4 rotates at 5e5, the others at 1e4: a granite_swa file has one
    # `rope.freq_base` (1e4, the config's) and says per layer only whether it rotates.
    "tiny-granite_swa": lambda c: {**c, "layer_rope_theta": [0, 10000.0, 10000.0, 10000.0, 10000.0]},
    # tiny-mpt's `softmax_scale` 0.2: MPTModel does not write it, and llama.cpp's graph scales by
    # 1/sqrt(head size), MPT's default; the file is that model.
    "tiny-mpt": lambda c: {**c, "attn_config": {**c["attn_config"], "softmax_scale": None}},
    # MiniCPM has no attention scale key (llama.cpp's minicpm loader reads none): 1/sqrt(16),
    # where tiny-granite's multiplier is 0.05.
    "tiny-granite-minicpm": lambda c: {**c, "attention_multiplier": 0.25},
    # And MiniCPM4's LongRoPE factor sets (scripts/make_arch_gguf.py's MINICPM_LONGROPE), with the
    # context as their original length (the file states none; llama.cpp takes the context): the
    # short set within it, no attention factor.
    "tiny-granite-minicpm-longrope": lambda c: {**c, "attention_multiplier": 0.25, "rope_parameters": {
        "rope_type": "longrope", "rope_theta": 10000.0, "original_max_position_embeddings": 256,
        "long_factor": [2.0 + i for i in range(8)], "short_factor": [1.0 + 0.25 * i for i in range(8)]}},
}
# What the import reads from each new architecture's file (or takes from llama.cpp's loader),
# and a wrong reading of it: the config key it becomes, with the wrong value.
MISREAD = {
    # `attention.scale` taken as llama.cpp's default 1/sqrt(head size) instead of 0.05.
    "tiny-granite": {"attention_multiplier": 0.25},
    # `logit_scale` not applied.
    "tiny-granite-logits": {"logits_scaling": 1.0},
    # `rope.freq_base` (500000) missed: the default 10000.
    "tiny-olmo2": {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}},
    # ggml's GELU (tanh) read as the exact one.
    "tiny-starcoder2": {"hidden_act": "gelu"},
    # `rope.dimension_count` (8 of 16) read as the whole head.
    "tiny-phi": {"partial_rotary_factor": 1.0},
    # llama.cpp's NoPE layers (every 4th) missed: all layers rotate.
    "tiny-smollm3": {"no_rope_layers": [1, 1, 1, 1]},
    # `rope.dimension_count` (8 of 16) read as the whole head.
    "tiny-glm4": {"partial_rotary_factor": 1.0},
    "tiny-nemotron": {"partial_rotary_factor": 1.0},
    # `attention.clamp_kqv` missed: no clamp.
    "tiny-olmo": {"clip_qkv": None},
    # ggml's GELU (tanh) read as the exact one.
    "tiny-gpt2": {"activation_function": "gelu"},
    # OLMo 3's window pattern missed: every layer full.
    "tiny-olmo3": {"layer_types": ["full_attention"] * 4},
    # The file's `yarn_attn_factor` (the config's 1.2) missed: transformers' default 0.1 ln 4 + 1.
    "tiny-olmo3-attn_factor": {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "beta_fast": 32.0, "beta_slow": 1.0}},
    # Arcee's relu2 read as Llama's default SiLU.
    "tiny-arcee": {"hidden_act": "silu"},
    # EXAONE 4's window missed: every layer full and rotating.
    "tiny-exaone4": {"sliding_window": None, "layer_types": ["full_attention"] * 4},
    # Cohere 2's `logit_scale` (0.25) missed: transformers' default 0.0625.
    "tiny-cohere2": {"logit_scale": 0.0625},
    # StableLM's `rope.dimension_count` (4 of 16) read as the whole head.
    "tiny-stablelm": {"partial_rotary_factor": 1.0},
    # Command R+'s `logit_scale` (0.125) missed: transformers' default 0.0625.
    "tiny-cohere-qknorm": {"logit_scale": 0.0625},
    # Ministral 3's `attention.temperature_scale` missed: no query scaling.
    # tiny-falcon2's `rope.freq_base` (500042) missed: llama.cpp's default 10000.
    "tiny-falcon2": {"rope_theta": 10000.0},
    # chatglm's `rope.dimension_count` (8 of 16) read as the whole head.
    "tiny-glm": {"partial_rotary_factor": 1.0},
    # EXAONE's `rope_freqs.weight` (its llama3 scaling) missed: the plain base.
    "tiny-exaone": {"rope_scaling": None},
    # Jais 2's relu2 read as Llama's default SiLU.
    "tiny-jais2": {"hidden_act": "silu"},
    # DBRX's `rope.freq_base` (500000) missed: the default 10000.
    "tiny-dbrx": {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "attn_config": {"clip_qkv": 1.5, "kv_n_heads": 2, "rope_theta": 10000.0}},
    # llama.cpp's renormalized routing (no key: its dbrx graph always divides by the sum) read as
    # DBRX's unnormalized top-k weights.
    "tiny-dbrx-routing": {"ffn_config": {"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2, "moe_normalize_expert_weights": None}},
    # MPT's `attention.clamp_kqv` (1.5) missed: no clamp.
    "tiny-mpt": {"attn_config": {"alibi": True, "alibi_bias_max": 8, "clip_qkv": None, "softmax_scale": 0.2}},
    "tiny-ministral3": {"rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 16.0, "original_max_position_embeddings": 3,
                                            "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.0}},
}


def fixture_of(stem: str) -> str:
    return VARIANTS.get(stem, stem)


def build(src: Path, out: Path, flags=()) -> Path:
    cmd = [str(tailor_bin()), "build", "--model", str(src), "--output", str(out), "--ep", "cpu", *flags]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr}"
    return out


def bound(fixture: str) -> float:
    return json.loads((FIXTURES / fixture / "reference.json").read_text())["tolerance"]["float32"]["atol"]


def as_file_states(stem: str, out: Path) -> Path:
    """The file's fixture's checkpoint with AS_FILES_STATE's config for the file."""
    shutil.copytree(FIXTURES / fixture_of(stem), out)
    cfg = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps(AS_FILES_STATE[stem](cfg)))
    return out


@pytest.mark.parametrize("stem", F32)
def test_f32_file_gives_the_fixtures_reference(stem, tmp_path):
    fixture = fixture_of(stem)
    ref = load_file(str(FIXTURES / fixture / "reference.safetensors"))
    pkg = build(DATA / f"{stem}.F32.gguf", tmp_path / "pkg")
    atol = bound(fixture)
    stated = stem in AS_FILES_STATE and build(as_file_states(stem, tmp_path / "stated"), tmp_path / "stated-pkg")
    for ids, want in [("input_ids", "logits"), ("short_input_ids", "short_logits")]:
        got = prefill_logits(pkg, ref[ids])
        if stated:
            # The file's model, not the fixture's: the fixture's reference is missed by the
            # scalings the file cannot state, the build of the stated config is met.
            assert np.abs(got - ref[want]).max() > 10 * atol, f"{fixture}: the file's model should differ from the fixture's"
            ref = {**ref, want: prefill_logits(stated, ref[ids])}
        diff = np.abs(got - ref[want]).max()
        assert diff <= atol, f"{fixture} {want}: max |logit difference| {diff} > {atol}"
    model_type = json.loads((FIXTURES / fixture / "config.json").read_text())["model_type"]
    # onnxruntime-genai's type for the model_type (builder/src/genai.rs: 0.18 lists neither
    # olmo2, starcoder2 nor glm4; its gpt2 wants a combined KV cache), as a build of the
    # fixture's own checkpoint writes it.
    runtime = {"olmo2": "olmo", "starcoder2": "llama", "glm4": "llama", "gpt2": "llama", "olmo3": "llama", "seed_oss": "llama", "arcee": "llama", "exaone4": "llama", "cohere": "llama", "cohere2": "llama", "stablelm": "llama", "ministral3": "llama", "apertus": "llama", "gpt_neox": "llama", "gpt_bigcode": "llama", "jais2": "llama", "falcon": "llama", "minicpm3": "llama", "granite_swa": "llama", "glm": "llama", "exaone": "llama", "bloom": "llama", "mpt": "llama", "dbrx": "llama"}.get(model_type, model_type)
    assert json.loads((pkg / "genai_config.json").read_text())["model"]["type"] == runtime


def test_a_file_of_float_tensors_is_a_float_checkpoint(tmp_path):
    """No block-quantized tensor: nothing is imported packed, so --quant quantizes it like any
    float checkpoint (an import refuses --quant) and no [quant] section is required."""
    pkg = build(DATA / "tiny-granite.F32.gguf", tmp_path / "q", ["--quant", "int4"])
    q = json.loads((pkg / "build_report.json").read_text())["parts"][0]["quantization"]
    assert q["method"] == "rtn" and q["bits"] == 4 and "source" not in q, q
    assert all(t["source"] == "float" for t in q["tensors"]), q["tensors"]


@pytest.mark.parametrize("case", sorted(MISREAD))
def test_a_misread_key_would_miss_the_reference(case, tmp_path):
    """The fixture's own checkpoint with one key as a wrong reading of the file would give:
    its logits are outside the bound the F32 file meets."""
    fixture = case.removesuffix("-logits").removesuffix("-attn_factor").removesuffix("-routing")
    src = tmp_path / "misread"
    shutil.copytree(FIXTURES / fixture, src)
    cfg = json.loads((src / "config.json").read_text())
    cfg.update(MISREAD[case])
    (src / "config.json").write_text(json.dumps(cfg))
    ref = load_file(str(FIXTURES / fixture / "reference.safetensors"))
    diff = np.abs(prefill_logits(build(src, tmp_path / "pkg"), ref["input_ids"]) - ref["logits"]).max()
    assert diff > 10 * bound(fixture), f"{case}: {MISREAD[case]} gives max |logit difference| {diff}, which the F32 test would not catch"


def float_checkpoint(stem: str, out: Path) -> Path:
    """The fixture's config (as the file states it) and tokenizer with gguf-py's dequantized
    weights of the Q file."""
    out.mkdir()
    for f in (FIXTURES / fixture_of(stem)).iterdir():
        if f.suffix == ".json" and not f.name.startswith("reference"):
            shutil.copy(f, out / f.name)
    if stem in AS_FILES_STATE:
        cfg = json.loads((out / "config.json").read_text())
        (out / "config.json").write_text(json.dumps(AS_FILES_STATE[stem](cfg)))
    shutil.copy(DATA / f"{stem}.Q.dequantized.safetensors", out / "model.safetensors")
    return out


@pytest.mark.parametrize("stem", QUANTIZED)
def test_quantized_file_keeps_its_integers_and_matches_its_dequantization(stem, tmp_path):
    fixture = fixture_of(stem)
    ids = load_file(str(FIXTURES / fixture / "reference.safetensors"))
    flags = ["--accuracy-level", "1"]
    pkg = build(DATA / f"{stem}.Q.gguf", tmp_path / "q", flags)
    ref = build(float_checkpoint(stem, tmp_path / "dequantized"), tmp_path / "float")
    for key in ["input_ids", "short_input_ids"]:
        got, want = prefill_logits(pkg, ids[key]), prefill_logits(ref, ids[key])
        diff = np.abs(got - want).max()
        assert diff <= bound(fixture), f"{fixture} {key}: max |logit difference| {diff}"
    # The float build is another model than the fixture's (the weights were quantized).
    assert np.abs(prefill_logits(ref, ids["input_ids"]) - ids["logits"]).max() > 1e-3
    report = json.loads((pkg / "build_report.json").read_text())
    q = report["parts"][0]["quantization"]
    assert q["source"]["format"] == "gguf"
    assert {t["source"] for t in q["tensors"]} == {"gguf:Q8_0", "gguf:Q4_0"}, q["tensors"]
    model = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    ops = [n.op_type for n in model.graph.node]
    # Routers stay F32 in llama.cpp's files (its quantizer skips `ffn_gate_inp`).
    float_weights = [n.name for n in model.graph.node if n.op_type in ("MatMul", "Gemm") and any(i in inits for i in n.input) and ".router." not in n.name]
    if stem == "tiny-minicpm3":
        # Its `attn_kv_b` rows (24 values) are not whole blocks, so the file holds it F32: the
        # latent attention's absorbed key and value products read it as the float it is.
        latent = [n for n in float_weights if "/latent/" in n]
        assert len(latent) == 2 * json.loads((FIXTURES / fixture / "config.json").read_text())["num_hidden_layers"], latent
        float_weights = [n for n in float_weights if n not in latent]
    assert not float_weights, f"projections read as float weights: {float_weights}"
    config = json.loads((FIXTURES / fixture / "config.json").read_text())
    layers = next(config[k] for k in ("num_hidden_layers", "n_layer", "num_layers", "n_layers") if k in config)
    # Per layer at least attention (qkv, o) and MLP (gate/up, down; a QMoE holds both), plus the
    # head.
    assert ops.count("MatMulNBits") + 2 * ops.count("QMoE") >= 4 * layers + 1, ops
    if "moe_num_experts" in config.get("ffn_config", {}):
        assert ops.count("QMoE") == layers, "the Q4_0 expert stacks keep their integers in QMoE"
    assert "GatherBlockQuantized" in ops, ops
    assert not report["parts"][0]["quantization"].get("dequantized"), report["parts"][0]["quantization"]


# The pieces of conftest's SPLIT_SAMPLE under the files' `tokenizer.ggml.pre`, read off the
# rules' regexes. falcon: punctuation runs first (so the blank lines before `x` are cut from it
# and stand alone), GPT-2's words with one leading space, digits in threes after that (the space
# before them alone); jais-2: Llama 3's split (digit triples, punctuation with its line breaks).
ARCH_SPLITS = [
    ("tiny-falcon", ["Hello", " world", " ", "123", "456", "7", " 日本語のテキスト", ",", " ok", "!!", "\n", "\n", "x", "=", "3", ".", "14"]),
    ("tiny-jais2", ["Hello", " world", " ", "123", "456", "7", " 日本語のテキスト", ",", " ok", "!!\n\n", "x", "=", "3", ".", "14"]),
    # exaone: each digit alone, then GPT-2's words without its final `\s+` (the blank lines
    # come apart as falcon's do).
    ("tiny-exaone", ["Hello", " world", " ", "1", "2", "3", "4", "5", "6", "7", " 日本語のテキスト", ",", " ok", "!!", "\n", "\n", "x", "=", "3", ".", "1", "4"]),
    # chatglm-bpe: Llama 3's regex (llama.cpp's CHATGLM4 split).
    ("tiny-glm", ["Hello", " world", " ", "123", "456", "7", " 日本語のテキスト", ",", " ok", "!!\n\n", "x", "=", "3", ".", "14"]),
    # bloom: runs of anything but whitespace and `.,!?` (and their CJK and Indic kin) with one
    # leading space; what the runs leave (the comma, `!!` with the line breaks, the point) alone.
    ("tiny-bloom", ["Hello", " world", " 1234567", " 日本語のテキスト", ",", " ok", "!!\n\n", "x=3", ".", "14"]),
    # mpt: GPT-2's split (its trailing-whitespace rule leaves the last line break for the next
    # piece, and that one alone).
    ("tiny-mpt", ["Hello", " world", " 1234567", " 日本語のテキスト", ",", " ok", "!!", "\n", "\n", "x", "=", "3", ".", "14"]),
]


@pytest.mark.parametrize("stem,pieces", ARCH_SPLITS)
def test_the_tokenizer_splits_as_the_files_rule(stem, pieces, tmp_path):
    """The file's `tokenizer.ggml.pre` (`falcon`, `jais-2`, `chatglm-bpe`, `exaone`, `bloom`, `mpt`) becomes that rule's split, with no
    warning (an unknown rule would be one, which --strict refuses)."""
    assert_splits(DATA / f"{stem}.F32.gguf", pieces, tmp_path)
