"""MXFP4 checkpoints as transformers stores gpt-oss (issue #29): tests/python/data/mxfp4/
tiny-gpt-oss-mxfp4 is tests/fixtures/tiny-gpt-oss with `quantization_config.quant_method: mxfp4`
and its expert stacks as `<name>_blocks` / `<name>_scales` (scripts/make_mxfp4_checkpoint.py);
beside it `dequantized.safetensors`, the float checkpoint of the same values (transformers'
`convert_moe_packed_tensors`, in numpy), and `reference.safetensors`, transformers' own logits
of the MXFP4 checkpoint.

- cpu: the experts become 8-bit com.microsoft.QMoE whose weights are exactly the checkpoint's
  values (the form of llama.cpp's MXFP4, test_gguf_gpt_oss.py); ORT 1.32's 8-bit QMoE runs int8
  activations, so the logits are close to the float build of the dequantized checkpoint, not equal.
- default: the experts are their exact float dequantization: the logits of that float build, and
  transformers' logits within the fixture's float32 tolerance.
- A config that lies, a missing half of a pair, a NaN exponent and --quant are refused, naming
  the tensor or the key, with nothing written.
"""
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from safetensors.numpy import load_file, save_file

from conftest import FIXTURES, prefill_logits, tailor_bin

DATA = Path(__file__).parent / "data" / "mxfp4" / "tiny-gpt-oss-mxfp4"
FP4 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float32)


def run(src: Path, out: Path, ep: str, flags=()):
    cmd = [str(tailor_bin()), "build", "--model", str(src), "--output", str(out), "--ep", ep, *flags]
    return subprocess.run(cmd, capture_output=True, text=True)


def build(src: Path, out: Path, ep: str, flags=()):
    done = run(src, out, ep, flags)
    assert done.returncode == 0, f"{src} on {ep} failed:\n{done.stderr}"
    return out


def copy(out: Path, weights: Path | None = None) -> Path:
    """The MXFP4 checkpoint in `out` (`weights`: the float dequantization instead, config without
    quantization_config)."""
    shutil.copytree(DATA, out, ignore=shutil.ignore_patterns("dequantized.safetensors", "reference.safetensors"))
    if weights:
        shutil.copy(weights, out / "model.safetensors")
        config = json.loads((out / "config.json").read_text())
        del config["quantization_config"]
        (out / "config.json").write_text(json.dumps(config))
    return out


def worst(pkg: Path, ref: Path, config: dict | None = None) -> float:
    ids, w = load_file(str(FIXTURES / "tiny-gpt-oss" / "reference.safetensors")), 0.0
    for key in ["input_ids", "short_input_ids"]:
        got, want = prefill_logits(pkg, ids[key], config), prefill_logits(ref, ids[key])
        w = max(w, float(np.abs(got - want).max() / np.abs(want).max()))
    return w


def test_the_fixture_holds_transformers_layout():
    """The checkpoint decodes, by transformers' formula written out here, to the dequantized file
    (so the tests below compare against the values transformers would load)."""
    packed, want = load_file(str(DATA / "model.safetensors")), load_file(str(DATA / "dequantized.safetensors"))
    stacks = [k[: -len("_blocks")] for k in packed if k.endswith("_blocks")]
    config = json.loads((DATA / "config.json").read_text())
    assert len(stacks) == 2 * config["num_hidden_layers"] and config["quantization_config"]["quant_method"] == "mxfp4"
    for s in stacks:
        blocks, scales = packed[s + "_blocks"], packed[s + "_scales"]
        values = np.stack([FP4[blocks & 15], FP4[blocks >> 4]], axis=-1).reshape(*blocks.shape[:-1], 32)
        values = np.ldexp(values, scales.astype(np.int32)[..., None] - 127).reshape(blocks.shape[0], blocks.shape[1], -1)
        np.testing.assert_array_equal(values.transpose(0, 2, 1), want[s], err_msg=s)


def test_cpu_experts_become_8_bit_qmoe_holding_the_checkpoints_values(tmp_path):
    pkg = build(copy(tmp_path / "ckpt"), tmp_path / "q", "cpu", ["--accuracy-level", "0"])
    ref = build(copy(tmp_path / "float", DATA / "dequantized.safetensors"), tmp_path / "ref", "cpu")
    # ORT 1.32's 8-bit QMoE quantizes activations to int8 at every accuracy level
    # (test_gguf_gpt_oss.py's bound for the same form).
    assert worst(pkg, ref) < 5e-2, worst(pkg, ref)
    model = onnx.load(str(pkg / "model.onnx"))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    nodes = [n for n in model.graph.node if n.op_type == "QMoE"]
    config = json.loads((DATA / "config.json").read_text())
    assert len(nodes) == config["num_hidden_layers"], sorted({n.op_type for n in model.graph.node})
    want = load_file(str(DATA / "dequantized.safetensors"))
    for layer, n in enumerate(nodes):
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        assert (attrs["expert_weight_bits"], attrs["block_size"]) == (8, 32), attrs
        assert attrs["swiglu_limit"] == config["swiglu_limit"], attrs
        assert all(len(n.input) <= i or not n.input[i] for i in (11, 12)), "MXFP4 is symmetric: no zero points"
        p = f"model.layers.{layer}.mlp.experts."
        for data, scales, hf in [(n.input[2], n.input[3], "gate_up_proj"), (n.input[5], n.input[6], "down_proj")]:
            values = (inits[data].astype(np.float32) - 128.0) * np.repeat(inits[scales], 32, axis=-1)
            np.testing.assert_array_equal(values, want[p + hf].transpose(0, 2, 1), err_msg=f"{hf} of layer {layer}")
    q = json.loads((pkg / "build_report.json").read_text())["parts"][0]["quantization"]
    assert q["source"]["format"] == "mxfp4" and "MXFP4" in q["source"]["summary"], q["source"]
    experts = [t for t in q["tensors"] if t["role"] == "experts"]
    assert len(experts) == 2 * config["num_hidden_layers"] and {t["source"] for t in experts} == {"mxfp4"}, experts
    assert all(t["max_abs_error"] == 0.0 for t in experts), experts
    # Attention, router, embeddings and head stay float: nothing else is quantized.
    assert {t["role"] for t in q["tensors"]} == {"experts"}, q["tensors"]


def test_default_experts_are_their_exact_dequantization(tmp_path):
    pkg = build(copy(tmp_path / "ckpt"), tmp_path / "q", "default")
    ref = build(copy(tmp_path / "float", DATA / "dequantized.safetensors"), tmp_path / "ref", "default")
    exact = {"session.qdq_matmulnbits_accuracy_level": "0"}
    assert worst(pkg, ref, exact) < 1e-5, worst(pkg, ref, exact)
    # transformers' own logits of the MXFP4 checkpoint (it loads the experts dequantized on CPU),
    # at the fixture's float32 tolerance.
    want = load_file(str(DATA / "reference.safetensors"))
    for ids, logits in [("input_ids", "logits"), ("short_input_ids", "short_logits")]:
        got = prefill_logits(pkg, want[ids], exact)
        assert np.abs(got - want[logits]).max() < 1e-4, (ids, np.abs(got - want[logits]).max())


@pytest.mark.parametrize("ep", ["cuda", "dml", "trt-rtx"])
def test_tables_without_qmoe_write_the_experts_float_and_say_so(ep, tmp_path):
    """The GPU tables keep gpt-oss's experts generic (no QMoE): the stacks are written as their
    exact float dequantization with a warning, even where the table has no 8-bit section
    (trt-rtx); the attention and head stay float as in the checkpoint."""
    pkg = build(copy(tmp_path / "ckpt"), tmp_path / "q", ep)
    report = json.loads((pkg / "build_report.json").read_text())
    assert any("float dequantization" in w and "experts" in w for w in report["warnings"]), report["warnings"]
    ops = {n.op_type for n in onnx.load(str(pkg / "model.onnx"), load_external_data=False).graph.node}
    assert not ops & {"QMoE", "MatMulNBits", "DequantizeLinear"}, sorted(ops)


def test_inspect_names_the_source_and_diff_sees_one_model(tmp_path):
    pkg = build(copy(tmp_path / "ckpt"), tmp_path / "q", "cpu")
    text = subprocess.run([str(tailor_bin()), "inspect", str(pkg)], capture_output=True, text=True, check=True).stdout
    assert "source: pre-quantized MXFP4 expert stacks" in text and "4 from mxfp4" in text, text
    other = build(copy(tmp_path / "elsewhere"), tmp_path / "q2", "cpu")
    done = subprocess.run([str(tailor_bin()), "diff", str(pkg), str(other)], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("same model"), done.stdout + done.stderr


def refused(src: Path, tmp_path: Path, expect: list[str], flags=("--ep", "cpu")):
    out = tmp_path / "refused"
    done = subprocess.run([str(tailor_bin()), "build", "--model", str(src), "--output", str(out), *flags], capture_output=True, text=True)
    assert done.returncode != 0 and "panicked" not in done.stderr, done.stderr
    for e in expect:
        assert e in done.stderr, (e, done.stderr)
    assert not out.exists(), "output left behind"


def edit_weights(ckpt: Path, edit):
    weights = load_file(str(ckpt / "model.safetensors"))
    edit(weights)
    save_file(weights, str(ckpt / "model.safetensors"))


def test_broken_checkpoints_are_refused_naming_what_is_wrong(tmp_path):
    # A pair without its scales.
    ckpt = copy(tmp_path / "no-scales")
    edit_weights(ckpt, lambda w: w.pop("model.layers.1.mlp.experts.down_proj_scales"))
    refused(ckpt, tmp_path, ["model.layers.1.mlp.experts.down_proj_scales", "blocks and their scales"])
    # Exponent 255 is NaN in the OCP MX format.
    ckpt = copy(tmp_path / "nan")

    def nan(w):
        s = w["model.layers.0.mlp.experts.gate_up_proj_scales"].copy()
        s[1, 2, 0] = 255
        w["model.layers.0.mlp.experts.gate_up_proj_scales"] = s

    edit_weights(ckpt, nan)
    refused(ckpt, tmp_path, ["model.layers.0.mlp.experts.gate_up_proj_scales", "expert 1, row 2, block 0", "exponent 255"], ("--ep", "default"))
    # Packed tensors but no quantization_config.
    ckpt = copy(tmp_path / "no-config")
    config = json.loads((ckpt / "config.json").read_text())
    del config["quantization_config"]
    (ckpt / "config.json").write_text(json.dumps(config))
    refused(ckpt, tmp_path, ["no quantization_config", "_blocks"])
    # Blocks of a plain Linear layout (3-D) are not transformers' expert stacks.
    ckpt = copy(tmp_path / "flat")

    def flat(w):
        for part in ["_blocks", "_scales"]:
            t = w["model.layers.0.mlp.experts.down_proj" + part]
            w["model.layers.0.mlp.experts.down_proj" + part] = t.reshape(-1, *t.shape[2:]).copy()

    edit_weights(ckpt, flat)
    refused(ckpt, tmp_path, ["model.layers.0.mlp.experts.down_proj_blocks", "only expert stacks"])


@pytest.mark.parametrize("flags", [["--quant", "int4"], ["--quant", "int8"]])
def test_quant_on_an_mxfp4_checkpoint_is_refused_with_its_settings(flags, tmp_path):
    refused(copy(tmp_path / "ckpt"), tmp_path, ["already quantized", "MXFP4"], ("--ep", "cpu", *flags))
