"""Checks a real GGUF file's import against transformers' GGUF loader, the checks
tests/python/test_gguf.py and test_gguf_gemma3_270m.py make for the files CI has, for a file
too large to fetch in CI (docs/quantization.md, "Checked once on a larger real file").

    python scripts/gguf_reference.py DIR REF.npz FILE.gguf      # once, needs torch
    python scripts/check_real_gguf.py DIR/FILE.gguf REF.npz WORK [TAILOR]

Builds WORK/<ep> for cpu (accuracy level 1 and the table's default), default, webgpu, dml and
cuda with the release binary (or TAILOR), and prints per build its warnings, the tensors kept
float and the model files' size over the file's; then, on ONNX Runtime's CPU EP, the largest
logit difference over the passage (cpu level 1, default with the fused MatMulNBits at level 1),
the cpu default's passage NLL against the reference's, and whether onnxruntime-genai with the
converted tokenizer encodes the passage and prompt to transformers' ids and generates its
greedy tokens."""
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime_genai as og

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
from conftest import genai_greedy, prefill_logits  # noqa: E402
from real_gguf_passage import PASSAGE, PROMPT, passage_nll  # noqa: E402

BUILDS = [("cpu-level1", ["--ep", "cpu", "--accuracy-level", "1"]), ("cpu", ["--ep", "cpu"]), ("default", ["--ep", "default"]),
          ("webgpu", ["--ep", "webgpu"]), ("dml", ["--ep", "dml"]), ("cuda", ["--ep", "cuda"])]


def main(file: Path, ref_path: Path, work: Path, tailor: Path) -> None:
    ref = np.load(ref_path)
    work.mkdir(parents=True, exist_ok=True)
    size = file.stat().st_size
    for name, flags in BUILDS:
        pkg = work / name
        if not pkg.exists():
            t0 = time.perf_counter()
            done = subprocess.run([str(tailor), "build", "--model", str(file), "--output", str(pkg), *flags], capture_output=True, text=True)
            if done.returncode != 0:
                print(f"{name}: build failed\n{done.stderr}")
                continue
            print(f"{name}: built in {time.perf_counter() - t0:.1f} s")
        report = json.loads((pkg / "build_report.json").read_text())
        q = report["parts"][0]["quantization"]
        model = sum((pkg / f).stat().st_size for f in ("model.onnx", "model.onnx.data"))
        print(f"{name}: warnings {report['warnings']} kept_float {q.get('kept_float')} model / file {model / size:.3f}")
    ids = ref["passage_ids"]
    for name, options in [("cpu-level1", None), ("default", {"session.qdq_matmulnbits_accuracy_level": "1"})]:
        got = prefill_logits(work / name, ids[None, :], options)[0] if options else prefill_logits(work / name, ids[None, :])[0]
        diff = np.abs(np.take_along_axis(got, ref["logit_ids"], axis=1) - ref["logits"]).max()
        print(f"{name}: max |logit difference| {diff:.3g} over {len(ids)} tokens (largest reference logit {np.abs(ref['logits']).max():.1f})")
    nll = passage_nll(prefill_logits(work / "cpu", ids[None, :])[0], ids)
    print(f"cpu (accuracy level 4): passage NLL {nll:.4f}, reference {float(ref['nll']):.4f}")
    model = og.Model(str(work / "cpu-level1"))
    tok = og.Tokenizer(model)
    tok.update_options(add_special_tokens="true")
    prompt = tok.encode(PROMPT)
    expected = ref["greedy"].tolist()
    print(f"genai: passage ids equal {tok.encode(PASSAGE).tolist() == ids.tolist()}, prompt ids equal "
          f"{prompt.tolist() == ref['prompt_ids'].tolist()}, greedy tokens equal {genai_greedy(model, prompt[None, :], len(expected)) == expected}")


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]) if len(sys.argv) == 5 else REPO / "target" / "release" / "tailor")
