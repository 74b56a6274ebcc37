"""What webgpu's kernels do not do, refused at build time rather than built wrong, or lowered
to what they do (ep-sets/tables/webgpu.toml).

WebGPU has no Min or Max kernel (onnxruntime-webgpu 1.27 placed them on the CPU EP for every
type), but runs Clip: lower.minmax_to_clip turns OLMo's clip_qkv and Nemotron's squared ReLU
into Clips, so they build for webgpu, and so does gpt-oss's clamped SwiGLU (its sink attention
fused, then right-padded by lower.gqa_right_padding.sink); the f32 packages, run on ONNX
Runtime's CPU EP, give the transformers reference (on WebGPU itself, lavapipe: 6.5e-6, 1.3e-5
and 7.4e-6, docs/ep-tables.md).

WebGPU's GroupQueryAttention ignores `softcap` (measured on
onnxruntime-webgpu 1.27 with lavapipe: the fused tiny-gemma2 package gave exactly the logits of
the same package with softcap 0 on the CPU EP); the table says `limits.gqa_softcap = 0`, so Gemma
2's capped attention is not fused and the required fuse.gqa_rotary fails the build with the check
that says why. Other tables keep fusing it (ORT's CPU kernel applies the cap)."""
import json
import subprocess

import numpy as np
import onnx
import pytest
from safetensors.numpy import load_file

from conftest import FIXTURES, build_with, prefill_logits, tailor_bin


def run(ep, out):
    return subprocess.run([str(tailor_bin()), "build", "--model", str(FIXTURES / "tiny-gemma2"), "--ep", ep, "--output", str(out)], capture_output=True, text=True)


def test_gemma2_is_refused_on_webgpu_for_its_softcap(tmp_path):
    done = run("webgpu", tmp_path / "webgpu")
    assert done.returncode != 0
    assert "softcap_in_kernel" in done.stderr and "ignores softcap" in done.stderr, done.stderr
    assert not (tmp_path / "webgpu").exists()


def test_cpu_still_fuses_the_capped_attention(tmp_path):
    done = run("cpu", tmp_path / "cpu")
    assert done.returncode == 0, done.stderr
    rules = json.loads((tmp_path / "cpu" / "build_report.json").read_text())["parts"][0]["pipeline"]["diagnostics"]["rules"]
    fired = sum(r["fired"] for r in rules if r["rule"].startswith("fuse.gqa_rotary"))
    assert fired == 2, rules


@pytest.mark.parametrize("fixture", ["tiny-olmo", "tiny-nemotron", "tiny-gpt-oss"])
def test_min_and_max_become_clips_with_the_same_values(fixture, tmp_path):
    pkg = build_with(tmp_path / "pkg", fixture, "webgpu", ["--dtype", "f32"])
    ops = {n.op_type for n in onnx.load(str(pkg / "model.onnx"), load_external_data=False).graph.node}
    assert "Clip" in ops and not ops & {"Min", "Max"}, sorted(ops)
    ref = load_file(str(FIXTURES / fixture / "reference.safetensors"))
    logits = prefill_logits(pkg, ref["input_ids"].astype(np.int64))
    diff = float(np.abs(logits - ref["logits"]).max())
    assert diff < 1e-4, diff


def test_gpt_oss_keeps_its_sinks_through_the_right_padded_form(tmp_path):
    """WebGPU's plan right-pads GroupQueryAttention (no attention_bias: its generic mask is int64
    arithmetic WebGPU has no kernel for); the sinks stay in slot 11, slots 9 and 10 empty."""
    pkg = build_with(tmp_path / "pkg", "tiny-gpt-oss", "webgpu", ["--dtype", "f32"])
    gqa = [n for n in onnx.load(str(pkg / "model.onnx"), load_external_data=False).graph.node if n.op_type == "GroupQueryAttention"]
    assert len(gqa) == 2 and all(len(n.input) == 12 and n.input[9] == n.input[10] == "" and n.input[11] for n in gqa), [list(n.input) for n in gqa]


def test_flint_keeps_its_sinks_on_unrotated_layers_too(tmp_path):
    """Flint's full layers have no RoPE: their sink attention fuses without rotary in the kernel
    (fuse.gqa_sink.unrotated) and is right-padded with slots 7-10 empty, the sinks in 11
    (lower.gqa_right_padding.sink_no_rotary); the sliding layers rotate in the kernel. Run on the
    CPU EP, the package gives transformers' logits."""
    pkg = build_with(tmp_path / "pkg", "tiny-flint", "webgpu", ["--dtype", "f32"])
    gqa = [n for n in onnx.load(str(pkg / "model.onnx"), load_external_data=False).graph.node if n.op_type == "GroupQueryAttention"]
    unrotated = [n for n in gqa if n.input[7] == ""]
    layers = json.loads((FIXTURES / "tiny-flint" / "config.json").read_text())["num_hidden_layers"]
    assert len(gqa) == layers and len(unrotated) == 3, [list(n.input) for n in gqa]
    assert all(len(n.input) == 12 and n.input[11] and not any(n.input[7:11]) for n in unrotated), [list(n.input) for n in unrotated]
    ref = load_file(str(FIXTURES / "tiny-flint" / "reference.safetensors"))
    diff = float(np.abs(prefill_logits(pkg, ref["input_ids"].astype(np.int64)) - ref["logits"]).max())
    assert diff < 1e-4, diff


def test_dml_refuses_a_sliding_window_it_would_ignore(tmp_path):
    """DML's GroupQueryAttention reads num_heads, kv_num_heads and scale only
    (DmlOperatorGroupQueryAttention.cpp @076c3788): dml.toml says limits.gqa_window = 0, so
    Mistral's sliding window is refused there, not fused into a kernel that would attend to
    every key."""
    out = tmp_path / "dml"
    done = subprocess.run([str(tailor_bin()), "build", "--model", str(FIXTURES / "tiny-mistral-sw"), "--ep", "dml", "--output", str(out)], capture_output=True, text=True)
    assert done.returncode != 0
    assert "window_in_kernel" in done.stderr and "ignores local_window_size" in done.stderr, done.stderr
    assert not out.exists()
