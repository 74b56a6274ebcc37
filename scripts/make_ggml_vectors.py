"""Writes ir/tests/data/ggml_blocks.safetensors: random blocks of each ggml type that ir::ggml
decodes (finite f16 scales, MXFP4 scale bytes 100..149, every other byte random) and the values gguf-py's `dequantize`
gives for them, the reference tests/ggml_blocks.rs compares against. Run once, in a venv with
`pip install gguf numpy safetensors` (not in CI): python scripts/make_ggml_vectors.py"""
import numpy as np
from gguf import GGMLQuantizationType as T, dequantize
from safetensors.numpy import save_file

rng = np.random.default_rng(29)
# (type, values per block, bytes per block, offsets of f16 fields that must be finite)
CASES = [(T.Q4_0, 32, 18, [0]), (T.Q4_1, 32, 20, [0, 2]), (T.Q5_0, 32, 22, [0]), (T.Q8_0, 32, 34, [0]),
         (T.Q4_K, 256, 144, [0, 2]), (T.Q6_K, 256, 210, [208]), (T.Q5_1, 32, 24, [0, 2]),
         (T.Q5_K, 256, 176, [0, 2]), (T.Q3_K, 256, 110, [108]), (T.Q2_K, 256, 84, [80, 82]),
         (T.IQ4_NL, 32, 18, [0]), (T.IQ4_XS, 256, 136, [0]), (T.MXFP4, 32, 17, [])]
ROWS, K = 4, 512
out = {}
for t, per, size, halves in CASES:
    n = ROWS * K // per
    raw = rng.integers(0, 256, (n, size), dtype=np.uint8)
    for h in halves:
        raw[:, h:h + 2] = (rng.standard_normal(n) * 0.05).astype(np.float16).view(np.uint8).reshape(n, 2)
    if t == T.MXFP4:
        # The e8m0 scale byte: 2^(e - 128), kept finite and normal.
        raw[:, 0] = rng.integers(100, 150, n, dtype=np.uint8)
    out[f"{t.name}.raw"] = raw.reshape(ROWS, -1)
    out[f"{t.name}.values"] = dequantize(raw.reshape(-1), t).astype(np.float32).reshape(ROWS, K)
save_file(out, "ir/tests/data/ggml_blocks.safetensors", metadata={"generator": "gguf-py dequantize", "rows": str(ROWS), "k": str(K)})
