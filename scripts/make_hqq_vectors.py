"""Writes ir/tests/data/hqq_vectors.safetensors: weights of several shapes and the codes, scales
and float zero points ONNX Runtime 1.32's HQQ quantizer gives them (`HQQWeightOnlyQuantizer.
quantize_internal`, which `HQQWeightOnlyQuantizer.quantize` calls on the transposed [K, N]
MatMul weight with the config's bits and block size), the reference ir/tests/hqq_vectors.rs
compares `ir::quant::hqq` against. Needs torch: run once, not in CI, in a venv with
`pip install torch onnxruntime==1.32.0 onnx numpy safetensors`:
python scripts/make_hqq_vectors.py"""
import numpy as np
import torch
from onnxruntime.quantization.matmul_nbits_quantizer import HQQWeightOnlyQuantConfig, HQQWeightOnlyQuantizer
from safetensors.numpy import save_file

rng = np.random.default_rng(33)
# (name, N, K, bits, block): K not a multiple of the block pads the last block with zeros
# (they join its min/max and its zero's mean); "flat" has constant blocks (max == min).
CASES = [
    ("normal", 24, 128, 4, 32),
    ("padded", 10, 72, 4, 32),
    ("block16", 12, 64, 4, 16),
    ("block64", 8, 192, 4, 64),
    ("outliers", 16, 96, 4, 32),
    ("flat", 6, 64, 4, 32),
    ("int8", 12, 96, 8, 32),
    # Weights of magnitude ~3: residuals past the shrink threshold (the power path).
    ("large", 8, 64, 4, 32),
]
out = {}
for name, n, k, bits, block in CASES:
    w = (rng.standard_normal((n, k)) * (3.0 if name == "large" else 0.05)).astype(np.float32)
    if name == "outliers":
        idx = rng.integers(0, n * k, n * k // 40)
        w.reshape(-1)[idx] *= 25.0
    if name == "flat":
        w[:, :32] = 0.125
        w[: n // 2, 32:] = -0.5
    q = HQQWeightOnlyQuantizer(HQQWeightOnlyQuantConfig(block_size=block, bits=bits))
    # quantize() hands quantize_internal the transpose of the [K, N] MatMul weight: [N, K].
    w_q, scale, zero = q.quantize_internal(torch.from_numpy(w), bits=bits, group_size=block)
    out[f"{name}.weight"] = w  # [N, K], row n = MatMul output column n
    out[f"{name}.codes"] = w_q.numpy().astype(np.uint8)  # [N, K padded]
    out[f"{name}.scales"] = scale.numpy().astype(np.float32)  # [N, k_blocks]
    out[f"{name}.zeros"] = zero.numpy().astype(np.float32)  # [N, k_blocks]
    out[f"{name}.config"] = np.array([bits, block], dtype=np.int64)
save_file(out, "ir/tests/data/hqq_vectors.safetensors",
          metadata={"generator": "onnxruntime 1.32.0 HQQWeightOnlyQuantizer.quantize_internal", "torch": torch.__version__})
print("cases:", ", ".join(c[0] for c in CASES))
