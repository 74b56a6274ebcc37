"""Mixture-of-experts GGUF files (issue #29): tests/python/data/gguf-moe/, the tiny MoE fixtures
written as llama.cpp's converter writes them by scripts/make_moe_gguf.py (experts merged into
3-D `ffn_{gate,up,down}_exps` stacks, the router `ffn_gate_inp`, GraniteMoE's `input_linear`
split into gate and up stacks, Mixtral as `llama` with
q/k permuted, Qwen2-MoE's shared expert and its `[hidden]` gate vector, Mellum's windows with a
RoPE base per layer type and its dense first layer, Hy3's sigmoid experts with their correction
bias beside the shared MLP after a dense layer, GraniteMoeSWA's fused gate/up stacks and shared
MLP beside sinks, windows and NoPE layers), built with
`tailor build --model FILE.gguf --ep cpu`:

- `<fixture>.F32.gguf`: every tensor F32, the fixture's own weights: the package must give the
  fixture's reference logits (transformers on the original config) within its f32 bound, and
  genai the fixture's greedy tokens. This pins the expert split, the routing settings
  llama.cpp fixes per architecture (renormalized for llama and qwen3moe, not for qwen2moe) and
  the dense layer of tiny-qwen2-moe.
- `<fixture>.Q.gguf`: against a float checkpoint of gguf-py's dequantization of the same file,
  built by tailor for the same EP at `--accuracy-level 0`. Q4_0 experts (tiny-qwen3-moe) become
  `com.microsoft.QMoE` with 4-bit blocks of 32: exact to float rounding. Q8_0 experts
  (tiny-mixtral) become 8-bit QMoE, which ONNX Runtime 1.32's CPU kernel runs with int8
  activations at every accuracy level (tests/python/test_qmoe_facts.py): close, not exact.
  Q4_1 experts (tiny-qwen2-moe, a minimum per block) have no QMoE form (its zero points are
  integers): they are written as their exact float dequantization, and the build says so.
- Where the fixture has what a file cannot state (AS_FILES_STATE: clips, biases, PhiMoE's
  mscales and jitter), the file against the fixture built as the file states it; PhiMoE's
  experts stay a dense float block (no fused form for sparsemixer).
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

from conftest import FIXTURES, genai_greedy, prefill_logits, tailor_bin

DATA = Path(__file__).parent / "data" / "gguf-moe"
MOE = ["tiny-mixtral", "tiny-qwen3-moe", "tiny-qwen2-moe", "tiny-granitemoe", "tiny-minimax_m2", "tiny-mellum", "tiny-granitemoeshared", "tiny-hy_v3", "tiny-granitemoe_swa"]


def build(src: Path, out: Path, flags=()):
    cmd = [str(tailor_bin()), "build", "--model", str(src), "--output", str(out), "--ep", "cpu", *flags]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr}"
    return out, done.stderr


def bound(fixture: str) -> float:
    return json.loads((FIXTURES / fixture / "reference.json").read_text())["tolerance"]["float32"]["atol"]


def ops(pkg: Path):
    model = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
    return model, [n.op_type for n in model.graph.node]


@pytest.mark.parametrize("fixture", MOE)
def test_f32_file_gives_the_fixtures_reference(fixture, tmp_path):
    ref = load_file(str(FIXTURES / fixture / "reference.safetensors"))
    pkg, _ = build(DATA / f"{fixture}.F32.gguf", tmp_path / "pkg")
    for ids, want in [("input_ids", "logits"), ("short_input_ids", "short_logits")]:
        diff = np.abs(prefill_logits(pkg, ref[ids]) - ref[want]).max()
        assert diff <= bound(fixture), f"{fixture} {want}: max |logit difference| {diff} > {bound(fixture)}"
    _, kinds = ops(pkg)
    assert "MoE" in kinds, f"{fixture}: the cpu table fuses the experts into com.microsoft.MoE: {sorted(set(kinds))}"
    tokens = genai_greedy(og.Model(str(pkg)), ref["input_ids"].astype(np.int32), ref["greedy_tokens"].shape[1])
    assert tokens == ref["greedy_tokens"][0].tolist(), f"{fixture}: genai {tokens}"


def test_qwen3_vl_moe_text_file_gives_the_text_models_reference(tmp_path):
    """`qwen3vlmoe` (Qwen3VLMoeTextModel: Qwen3-MoE's keys and stacks with the multimodal RoPE
    sections and the deepstack count; scripts/make_moe_gguf.py's VL_VARIANTS): the text model,
    where a text token has one position in every section, is tiny-qwen3-moe's."""
    ref = load_file(str(FIXTURES / "tiny-qwen3-moe" / "reference.safetensors"))
    pkg, _ = build(DATA / "tiny-qwen3-moe-vl.F32.gguf", tmp_path / "pkg")
    for ids, want in [("input_ids", "logits"), ("short_input_ids", "short_logits")]:
        diff = np.abs(prefill_logits(pkg, ref[ids]) - ref[want]).max()
        assert diff <= bound("tiny-qwen3-moe"), f"{want}: max |logit difference| {diff}"
    assert "MoE" in ops(pkg)[1]


def float_checkpoint(fixture: str, out: Path) -> Path:
    """The fixture's config and tokenizer with gguf-py's dequantized weights of the Q file."""
    out.mkdir()
    for f in (FIXTURES / fixture).iterdir():
        if f.suffix == ".json" and not f.name.startswith("reference"):
            shutil.copy(f, out / f.name)
    shutil.copy(DATA / f"{fixture}.Q.dequantized.safetensors", out / "model.safetensors")
    return out


def compare(fixture, tmp_path, flags=()):
    """Max |logit difference| of the Q file's package (built with `flags`) against its
    dequantization's, relative to the largest logit, over both prompts; and the Q package."""
    ids = load_file(str(FIXTURES / fixture / "reference.safetensors"))
    pkg, stderr = build(DATA / f"{fixture}.Q.gguf", tmp_path / "q", ["--accuracy-level", "0", *flags])
    ref, _ = build(float_checkpoint(fixture, tmp_path / "dequantized"), tmp_path / "float")
    worst = 0.0
    for key in ["input_ids", "short_input_ids"]:
        got, want = prefill_logits(pkg, ids[key]), prefill_logits(ref, ids[key])
        worst = max(worst, float(np.abs(got - want).max() / np.abs(want).max()))
        # The dequantized model is another model than the fixture's (its weights were quantized).
        assert np.abs(want - ids[key.replace("input_ids", "logits")]).max() > 1e-3
    return worst, pkg, stderr


def qmoe_nodes(pkg):
    model, kinds = ops(pkg)
    inits = {i.name: i for i in model.graph.initializer}
    nodes = [n for n in model.graph.node if n.op_type == "QMoE"]
    # No expert stack is left float: no 3-D float initializer but the QMoE scales.
    float_stacks = [i.name for i in inits.values() if len(i.dims) == 3 and i.data_type == onnx.TensorProto.FLOAT and "/quant/" not in i.name]
    return nodes, float_stacks, kinds


def attr(node, name):
    return next(onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == name)


def sparse_layers(fixture: str) -> int:
    """The fixture's layers with experts (tiny-mellum's first is dense: `mlp_layer_types`)."""
    cfg = json.loads((FIXTURES / fixture / "config.json").read_text())
    return sum(t == "sparse" for t in cfg.get("mlp_layer_types") or ["sparse"] * cfg["num_hidden_layers"])


@pytest.mark.parametrize("fixture", ["tiny-qwen3-moe", "tiny-minimax_m2", "tiny-mellum", "tiny-hy_v3"])
def test_q4_0_experts_become_4_bit_qmoe_exact_to_their_dequantization(fixture, tmp_path):
    worst, pkg, _ = compare(fixture, tmp_path)
    assert worst < 1e-5, f"relative logit difference {worst}"
    nodes, float_stacks, kinds = qmoe_nodes(pkg)
    layers = sparse_layers(fixture)
    assert len(nodes) == layers and not float_stacks and "MoE" not in kinds, (kinds, float_stacks)
    for n in nodes:
        assert (attr(n, "expert_weight_bits"), attr(n, "block_size"), attr(n, "weights_prepacked")) == (4, 32, 0)
        assert len(n.input) <= 11 or not n.input[11], "Q4_0 is symmetric: no zero points"
    q = json.loads((pkg / "build_report.json").read_text())["parts"][0]["quantization"]
    experts = [t for t in q["tensors"] if t["role"] == "experts"]
    assert len(experts) == 2 * layers and {t["source"] for t in experts} == {"gguf:Q4_0"}, experts
    assert all(t["max_abs_error"] == 0.0 for t in experts), "Q4_0 scales are f16: exact in f32"


def test_q8_0_experts_become_8_bit_qmoe(tmp_path):
    worst, pkg, _ = compare("tiny-mixtral", tmp_path)
    # ORT 1.32's 8-bit QMoE quantizes activations to int8 at every accuracy level: the bound of
    # test_qmoe_facts.py's int8 paths (5e-2 of the largest output; measured 2.3e-2 here).
    assert worst < 5e-2, f"relative logit difference {worst}"
    nodes, float_stacks, _ = qmoe_nodes(pkg)
    assert nodes and not float_stacks
    assert {(attr(n, "expert_weight_bits"), attr(n, "block_size")) for n in nodes} == {(8, 32)}
    # --accuracy-level 0 asked for float activations, which 8-bit QMoE does not have: a note.
    notes = json.loads((pkg / "build_report.json").read_text()).get("notes", [])
    assert any("8-bit QMoE" in n and "int8 activations" in n for n in notes), notes


@pytest.mark.parametrize("fixture", ["tiny-granitemoe", "tiny-granitemoeshared", "tiny-granitemoe_swa"])
def test_granite_input_linear_is_joined_back_keeping_its_integers(fixture, tmp_path):
    """GraniteMoE's `input_linear`, split by the converter into gate and up stacks, is joined
    back along its rows: the Q8_0 experts stay 8-bit QMoE (int8 activations: the 8-bit bound
    above) and every attention weight keeps its integers. GraniteMoeShared's shared
    `input_linear`, split into `ffn_gate_shexp` / `ffn_up_shexp`, is joined back too and split
    again by the family: its Q8_0 gate and up stay MatMulNBits of the file's integers.
    GraniteMoeSWA's files keep both fused (`ffn_gate_up_exps`, `ffn_up_shexp`): read as they are."""
    worst, pkg, _ = compare(fixture, tmp_path)
    assert worst < 5e-2, f"relative logit difference {worst}"
    nodes, float_stacks, _ = qmoe_nodes(pkg)
    layers = json.loads((FIXTURES / fixture / "config.json").read_text())["num_hidden_layers"]
    assert len(nodes) == layers and not float_stacks, (len(nodes), float_stacks)
    assert {(attr(n, "expert_weight_bits"), attr(n, "block_size")) for n in nodes} == {(8, 32)}
    assert_linears_imported(pkg)
    if fixture in ("tiny-granitemoeshared", "tiny-granitemoe_swa"):
        tensors = json.loads((pkg / "build_report.json").read_text())["parts"][0]["quantization"]["tensors"]
        shared = [t for t in tensors if "shared_mlp.input_linear" in t["weight"]]
        assert len(shared) == 2 * layers and all(t["source"] == "gguf:Q8_0" for t in shared), shared


def assert_linears_imported(pkg):
    """Every linear weight of the package's report is the file's own integers (`gguf:` source,
    `imported`), and there are some."""
    tensors = json.loads((pkg / "build_report.json").read_text())["parts"][0]["quantization"]["tensors"]
    linears = [t for t in tensors if t["role"] == "linear"]
    assert linears and all(t["source"].startswith("gguf:") and t["method"] == "imported" for t in linears), linears


def test_experts_with_a_minimum_are_written_float_with_the_reason(tmp_path):
    worst, pkg, stderr = compare("tiny-qwen2-moe", tmp_path)
    assert worst < 1e-5, f"relative logit difference {worst}"
    report = json.loads((pkg / "build_report.json").read_text())
    q = report["parts"][0]["quantization"]
    reasons = [k for k in q["kept_float"] if "_exps" in json.dumps(k) or "experts" in json.dumps(k)]
    assert any("float zero points" in json.dumps(k) and "Q4_1" in json.dumps(k) and "--requantize-experts" in json.dumps(k) for k in reasons), q["kept_float"]
    assert any("float dequantization" in w for w in report["warnings"]), report["warnings"]
    nodes, float_stacks, _ = qmoe_nodes(pkg)
    assert not nodes and float_stacks


@pytest.mark.parametrize("bits", [4, 8])
def test_requantize_experts_turns_experts_with_a_minimum_into_qmoe(bits, tmp_path):
    """--requantize-experts: the Q4_1 experts quantized again (RTN, asymmetric, block 32) into
    QMoE, said so in the report and a warning; the rest of the file keeps its integers."""
    worst, pkg, stderr = compare("tiny-qwen2-moe", tmp_path, ["--requantize-experts", f"int{bits}"])
    # 8 bits: RTN of the Q4_1 values (step range/255) and 8-bit QMoE's int8 activations, the
    # int8 bound above; 4 bits: another 4-bit grid than Q4_1's (integer zero points).
    assert worst < (5e-2 if bits == 8 else 2e-1), f"relative logit difference {worst}"
    nodes, float_stacks, _ = qmoe_nodes(pkg)
    cfg = json.loads((FIXTURES / "tiny-qwen2-moe" / "config.json").read_text())
    routed = cfg["num_hidden_layers"] - len(cfg.get("mlp_only_layers", []))
    assert len(nodes) == routed and not float_stacks, (len(nodes), float_stacks)
    for n in nodes:
        assert (attr(n, "expert_weight_bits"), attr(n, "block_size")) == (bits, 32)
        assert len(n.input) > 12 and n.input[11] and n.input[12], "asymmetric: zero points for fc1 and fc2"
    report = json.loads((pkg / "build_report.json").read_text())
    experts = [t for t in report["parts"][0]["quantization"]["tensors"] if t["role"] == "experts"]
    assert len(experts) == 2 * routed and {t["source"] for t in experts} == {"requantized from gguf:Q4_1"}, experts
    assert all(t["method"] == "rtn" and not t["symmetric"] and t["rms_error"] > 0 for t in experts), experts
    # Asked for: a note, not a warning (--strict refuses warnings).
    assert any("--requantize-experts" in n and "quantized again" in n for n in report.get("notes", [])), report.get("notes")
    assert not any("--requantize-experts" in w for w in report["warnings"]), report["warnings"]
    q = report["parts"][0]["quantization"]
    assert q["requantized_experts"] == {"bits": bits, "block_size": 32, "symmetric": False, "method": "rtn"}, q["requantized_experts"]
    assert q["imported_tensors"] == sum(t["source"].startswith("gguf:") for t in q["tensors"]), q["imported_tensors"]
    # Q8_0 attention keeps its integers.
    others = [t for t in report["parts"][0]["quantization"]["tensors"] if t["role"] == "linear"]
    assert others and all(t["source"].startswith("gguf:") and t["method"] == "imported" for t in others), others


# What a GGUF file of these fixtures' architectures can state, where the fixture has more: the
# config and weights the file's model is (tiny-olmoe clips q/k/v at 1.0, which neither the
# converter nor llama.cpp's olmoe graph has; tiny-ernie4_5_moe has `use_bias`, whose MLP and head
# biases llama.cpp's ernie4_5-moe loader does not read: its files are written without biases;
# likewise tiny-hunyuan_v1_moe's attention biases).
AS_FILES_STATE = {
    "tiny-olmoe": (lambda c: {**c, "clip_qkv": None}, lambda st: st),
    "tiny-ernie4_5_moe": (lambda c: {**c, "use_bias": False}, lambda st: {k: v for k, v in st.items() if not k.endswith(".bias") or "moe_statics" in k}),
    # Hunyuan-A13B has no attention biases; tiny-hunyuan_v1_moe's are left out of its files.
    "tiny-hunyuan_v1_moe": (lambda c: {**c, "attention_bias": False}, lambda st: {k: v for k, v in st.items() if not k.endswith(".bias")}),
    # Hunyuan's dense sibling, written by the same script (the same attention and RoPE).
    "tiny-hunyuan_v1_dense": (lambda c: {**c, "attention_bias": False}, lambda st: {k: v for k, v in st.items() if not k.endswith(".bias")}),
    # PhiMoE's `short_mscale` / `long_mscale` (1.1 / 1.3 here) are not in the file: the Phi-3
    # converter writes one `attn_factor` from the lengths, sqrt(1 + ln(256/32) / ln(32)), which
    # llama.cpp applies to both factor sets (that value is also LongRoPE's own default for these
    # lengths, so this test does not tell whether the key is read; the unit test
    # `phimoe_files_read_longrope_biases_and_mixtral_experts` does). Nor is `router_jitter_noise`
    # (0.1 here): PhiMoE's default, 0.01 (Phi-3.5-MoE's own), applies.
    "tiny-phimoe": (
        lambda c: {
            **{k: v for k, v in c.items() if k != "router_jitter_noise"},
            "rope_scaling": {**c["rope_scaling"], "short_mscale": float(np.sqrt(1 + np.log(8) / np.log(32))), "long_mscale": float(np.sqrt(1 + np.log(8) / np.log(32)))},
        },
        lambda st: st,
    ),
}
# Experts with no fused form on cpu (PhiMoE's sparsemixer: docs/models.md): a dense block whose
# stacks are float, each with its reason.
DENSE_MOE = {"tiny-phimoe"}


def as_stated(fixture: str, out: Path, weights: Path) -> Path:
    """`fixture`'s config and tokenizer with `weights`, both as its GGUF files state them."""
    from safetensors.numpy import save_file

    config, tensors = AS_FILES_STATE[fixture]
    out.mkdir()
    for f in (FIXTURES / fixture).iterdir():
        if f.suffix == ".json" and not f.name.startswith("reference"):
            shutil.copy(f, out / f.name)
    (out / "config.json").write_text(json.dumps(config(json.loads((out / "config.json").read_text()))))
    save_file(tensors(load_file(str(weights))), str(out / "model.safetensors"))
    return out


@pytest.mark.parametrize("fixture", sorted(AS_FILES_STATE))
def test_files_are_the_fixture_as_they_state_it(fixture, tmp_path):
    """`<fixture>.F32.gguf` against the fixture built from safetensors as the file states it
    (within the fixture's f32 bound; what the file cannot state matters to the fixture's own
    reference), experts fused into MoE on cpu; `<fixture>.Q.gguf` against its dequantization
    (within 1e-5 relative), Q4_0 experts as 4-bit QMoE (tiny-hunyuan_v1_dense, dense: its Q8_0
    layers in MatMulNBits)."""
    ref = load_file(str(FIXTURES / fixture / "reference.safetensors"))
    pkg, _ = build(DATA / f"{fixture}.F32.gguf", tmp_path / "pkg")
    stated, _ = build(as_stated(fixture, tmp_path / "stated-src", FIXTURES / fixture / "model.safetensors"), tmp_path / "stated")
    cfg = json.loads((FIXTURES / fixture / "config.json").read_text())
    # And a prompt past the original context where the model has one (LongRoPE's long set).
    long_ids = np.random.default_rng(0).integers(3, cfg["vocab_size"], (1, cfg.get("original_max_position_embeddings", 0) + 8))
    for ids in (ref["input_ids"], long_ids):
        got, want = prefill_logits(pkg, ids), prefill_logits(stated, ids)
        assert np.abs(got - want).max() <= bound(fixture), (ids.shape, np.abs(got - want).max())
    want = prefill_logits(stated, ref["input_ids"])
    assert np.abs(want - ref["logits"]).max() > 1e-2, "what the file cannot state changes the fixture's logits: the comparison above must not be with its reference"
    experts = cfg.get("num_experts") or cfg.get("moe_num_experts") or cfg.get("num_local_experts")
    assert not experts or ("MoE" in ops(pkg)[1]) != (fixture in DENSE_MOE)
    q, _ = build(DATA / f"{fixture}.Q.gguf", tmp_path / "q", ["--accuracy-level", "0"])
    deq, _ = build(as_stated(fixture, tmp_path / "deq-src", DATA / f"{fixture}.Q.dequantized.safetensors"), tmp_path / "deq")
    got, want = prefill_logits(q, ref["input_ids"]), prefill_logits(deq, ref["input_ids"])
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-5
    nodes, float_stacks, kinds = qmoe_nodes(q)
    assert_linears_imported(q)
    if fixture in DENSE_MOE:
        kept = json.loads((q / "build_report.json").read_text())["parts"][0]["quantization"]["kept_float"]
        stacks = [k for k in kept if "experts" in k["weight"]]
        assert len(stacks) == 3 * cfg["num_hidden_layers"] and all("unfused MoE" in k["why"] for k in stacks), kept
        assert not nodes and len(float_stacks) == len(stacks), (nodes, float_stacks)
        return
    if not experts:
        return
    sparse = sum(1 for i in range(cfg["num_hidden_layers"]) if i >= cfg.get("moe_layer_start_index", 0))
    assert len(nodes) == sparse and not float_stacks, (len(nodes), float_stacks)
