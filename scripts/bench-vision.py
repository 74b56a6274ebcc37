"""Vision-tower benchmark (never run in CI): runs the `vision.onnx` of two Qwen2.5-VL packages on
ONNX Runtime's CPU EP for one image of SIDE x SIDE pixels (random pixels; the tower's work
depends only on the patch grid) and prints each one's median wall time and peak RSS, and the
second's ratio to the first, measured in the same run (these machines are noisy).

Each run is its own process, so the peak RSS (`ru_maxrss`) is that run's. Typical use: the same
checkpoint built by two tailor binaries (the baseline first), e.g. the Qwen2.5-VL-shaped
checkpoint `tailor-bench --model qwen2.5-vl-small --write-only` writes:

    python scripts/bench-vision.py BASE_PKG NEW_PKG --side 1036 --runs 3

Usage: bench-vision.py PKG_A PKG_B [--side PIXELS] [--runs N]
"""
import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path


def one_run(pkg: Path, side: int) -> None:
    """Child: one session, one image; prints seconds and peak RSS (KiB) as JSON."""
    import numpy as np
    import onnxruntime as ort

    config = json.loads((pkg / "genai_config.json").read_text())["model"]["vision"]
    patch, merge = config["patch_size"], config["spatial_merge_size"]
    grid = side // (patch * merge) * merge
    session = ort.InferenceSession(str(pkg / "vision.onnx"), providers=["CPUExecutionProvider"])
    width = next(i for i in session.get_inputs() if i.name == "pixel_values").shape[1]
    pixels = np.random.default_rng(0).standard_normal((grid * grid, width), dtype=np.float32)
    feeds = {"pixel_values": pixels, "image_grid_thw": np.array([[1, grid, grid]], dtype=np.int64)}
    start = time.perf_counter()
    session.run(None, feeds)
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "patches": grid * grid, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))


def measure(pkg: Path, side: int, runs: int) -> dict:
    results = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, __file__, "--child", str(pkg), "--side", str(side)], capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{pkg}: the run failed:\n{done.stderr}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {
        "seconds": statistics.median(r["seconds"] for r in results),
        "rss_mib": max(r["rss_kib"] for r in results) / 1024,
        "patches": results[0]["patches"],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("packages", nargs="+", type=Path)
    p.add_argument("--side", type=int, default=1036)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        one_run(a.packages[0], a.side)
        return
    if len(a.packages) != 2:
        p.error("give two packages: the baseline, then the one to compare")
    base, new = (measure(pkg, a.side, a.runs) for pkg in a.packages)
    print(f"image {a.side}x{a.side}: {base['patches']} patches")
    for name, r in (("baseline", base), ("compared", new)):
        print(f"  {name}: {r['seconds']:.3f} s (median of {a.runs}), peak RSS {r['rss_mib']:.0f} MiB")
    print(f"  ratio compared/baseline: time {new['seconds'] / base['seconds']:.3f}, peak RSS {new['rss_mib'] / base['rss_mib']:.3f}")


if __name__ == "__main__":
    main()
