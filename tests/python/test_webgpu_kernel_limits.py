"""What webgpu's kernels do not do, refused at build time rather than built wrong
(ep-sets/tables/webgpu.toml). WebGPU's GroupQueryAttention ignores `softcap` (measured on
onnxruntime-webgpu 1.27 with lavapipe: the fused tiny-gemma2 package gave exactly the logits of
the same package with softcap 0 on the CPU EP); the table says `limits.gqa_softcap = 0`, so Gemma
2's capped attention is not fused and the required fuse.gqa_rotary fails the build with the check
that says why. Other tables keep fusing it (ORT's CPU kernel applies the cap)."""
import json
import subprocess

from conftest import FIXTURES, tailor_bin


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
