"""Writes tests/python/data/mxfp4/tiny-gpt-oss-mxfp4: tests/fixtures/tiny-gpt-oss with its expert
stacks stored as transformers stores gpt-oss's published checkpoints (`quant_method: mxfp4`,
issue #29), for tests/python/test_mxfp4_import.py.

Run once, not in CI (numpy and safetensors; `--reference` also needs torch and transformers):
    .venv/bin/python scripts/make_mxfp4_checkpoint.py                  # from the repository root
    /path/to/torch-env/bin/python scripts/make_mxfp4_checkpoint.py --reference

The layout (read for facts in transformers' `integrations/mxfp4.py`, `convert_moe_packed_tensors`,
and openai/gpt-oss-20b's `model.safetensors.index.json`): for each expert stack `<name>` of shape
`[E, K, N]` in the float model (`gate_up_proj` `[E, hidden, 2 * inter]`, `down_proj`
`[E, inter, hidden]`) the checkpoint holds `<name>_blocks` u8 `[E, N, K / 32, 16]` and
`<name>_scales` u8 `[E, N, K / 32]`: the weight transposed to `[E, N, K]`, cut in blocks of 32
along K, byte j of a block holding value 2j in its low nibble and 2j + 1 in its high one, each
nibble an E2M1 code (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives), the block's value
`fp4[q] * 2^(scale - 127)`. Everything else (attention, router, embeddings, head, biases) stays
float, as `modules_to_not_convert` says.

Files:
- `config.json` (the fixture's, with transformers' `quantization_config`), `model.safetensors`
  (experts packed, the rest the fixture's f32), tokenizer and generation files;
- `dequantized.safetensors`: the float checkpoint whose experts are the packed values, decoded
  here in numpy as `convert_moe_packed_tensors` decodes them;
- with `--reference`, `reference.safetensors`: transformers' own logits for the fixture's
  `input_ids` and `short_input_ids`, loading the packed checkpoint (its MXFP4 experts
  dequantized on CPU) in float32.
"""
import argparse
import json
import shutil
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "tiny-gpt-oss"
OUT = ROOT / "tests" / "python" / "data" / "mxfp4" / "tiny-gpt-oss-mxfp4"
FP4 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float32)


def quantize(w: np.ndarray):
    """`[E, K, N]` float -> blocks `[E, N, K/32, 16]`, scales `[E, N, K/32]` (nearest E2M1 code
    under the smallest power-of-two scale that holds the block's largest magnitude)."""
    e_, k, n = w.shape
    rows = w.transpose(0, 2, 1).reshape(e_, n, k // 32, 32).astype(np.float32)
    amax = np.abs(rows).max(axis=-1)
    exp = np.where(amax > 0, np.ceil(np.log2(np.maximum(amax, 1e-30) / 6.0)), -127).astype(np.int32)
    scales = np.clip(exp + 127, 0, 254).astype(np.uint8)
    scaled = rows / np.ldexp(1.0, scales.astype(np.int32) - 127)[..., None]
    q = np.abs(scaled[..., None] - FP4).argmin(axis=-1).astype(np.uint8)
    blocks = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    # safetensors' numpy writer copies the buffer as it lies: C order first.
    return np.ascontiguousarray(blocks), np.ascontiguousarray(scales)


def dequantize(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """transformers' `convert_moe_packed_tensors` in numpy: `[E, N, G, 16]`, `[E, N, G]` ->
    `[E, G * 32, N]`."""
    e_, n, g, _ = blocks.shape
    out = np.empty((e_, n, g, 32), dtype=np.float32)
    out[..., 0::2] = FP4[blocks & 0x0F]
    out[..., 1::2] = FP4[blocks >> 4]
    out = np.ldexp(out, scales.astype(np.int32)[..., None] - 127)
    return out.reshape(e_, n, g * 32).transpose(0, 2, 1).copy()


def write():
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    for f in FIX.iterdir():
        if f.name not in ("model.safetensors", "config.json") and not f.name.startswith("reference"):
            shutil.copy(f, OUT / f.name)
    config = json.loads((FIX / "config.json").read_text())
    config["quantization_config"] = {
        "quant_method": "mxfp4",
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"],
    }
    (OUT / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    weights = load_file(str(FIX / "model.safetensors"))
    packed, float_ckpt = {}, {}
    for name, w in weights.items():
        if name.endswith(("mlp.experts.gate_up_proj", "mlp.experts.down_proj")):
            blocks, scales = quantize(w)
            packed[name + "_blocks"], packed[name + "_scales"] = blocks, scales
            float_ckpt[name] = dequantize(blocks, scales)
            assert float_ckpt[name].shape == w.shape
            print(f"{name}: {w.shape} -> blocks {blocks.shape}, max |w - dequantized| {np.abs(w - float_ckpt[name]).max():.3g}")
        else:
            packed[name] = w
            float_ckpt[name] = w
    save_file(packed, str(OUT / "model.safetensors"), metadata={"format": "pt"})
    save_file(float_ckpt, str(OUT / "dequantized.safetensors"), metadata={"format": "pt"})


def reference():
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(OUT), dtype=torch.float32)
    model.eval()
    experts = model.model.layers[0].mlp.experts
    want = load_file(str(OUT / "dequantized.safetensors"))["model.layers.0.mlp.experts.gate_up_proj"]
    got = experts.gate_up_proj.detach().float().numpy()
    assert np.array_equal(got, want), "transformers' dequantized experts differ from this script's"
    ids = load_file(str(FIX / "reference.safetensors"))
    out = {}
    with torch.no_grad():
        for key, logits in [("input_ids", "logits"), ("short_input_ids", "short_logits")]:
            out[key] = ids[key]
            out[logits] = model(torch.from_numpy(ids[key].astype(np.int64))).logits.float().numpy()
    save_file(out, str(OUT / "reference.safetensors"))
    print("reference logits", {k: v.shape for k, v in out.items()})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", action="store_true", help="only compute reference.safetensors with transformers (needs torch)")
    args = parser.parse_args()
    if args.reference:
        reference()
    else:
        write()
