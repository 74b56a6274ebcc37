"""Writes tests/python/data/gguf_kmix.gguf and gguf_kmix_reference.npz: a two-layer llama GGUF
file whose projections mix ggml types the way llama.cpp's Q4_K_M does (issue #29), and what
transformers' own GGUF loader computes from it, the reference of tests/python/test_gguf_kmix.py.

Run once, not in CI (it needs torch, transformers, gguf and numpy):
    python scripts/make_gguf_kmix.py tests/python/data

The model: hidden 256, 4 query heads and 2 key/value heads of 64, MLP 256, vocabulary 416,
random float weights (seeded), quantized here:

| tensor | layer 0 | layer 1 |
|---|---|---|
| attn_q, attn_k | Q4_K | Q4_K |
| attn_v | Q4_K (q/k/v alike: packable) | Q6_K (Q4_K_M's "more bits" layers) |
| attn_output, ffn_gate, ffn_up | Q4_K | Q4_K |
| ffn_down | Q4_K | Q6_K |

token_embd is Q8_0 (gguf-py's quantizer), output (untied) Q6_K, norms F32. gguf-py has no
K-quant quantizer, so Q4_K and Q6_K blocks are encoded here from their layouts as llama.cpp's
`dequantize_row_q4_K` / `dequantize_row_q6_K` read them (any valid encoding will do: the file is
the truth), and every tensor is checked against gguf-py's `dequantize` before the file is kept.
q and k rows are permuted as llama.cpp's converter does (`[heads, 2, hd/2]` -> `[heads, hd/2, 2]`).

Saved in the npz: `input_ids` [1, 12] and `logits` [12, 416] (a prefill with no past), the 16
greedy tokens after the first 6 ids (`prompt_ids`, `greedy`), and per quantized projection a
few sampled rows (`<name>.rows`, Hugging Face row order) with the file's codes (`.codes`: Q4_K
nibbles 0..15, Q6_K 6-bit codes 0..63, Q8_0 signed bytes), block scales (`.scales`, f32: `d *
sc` per 32 or 16 values) and the values transformers' loader dequantized (`.values`). The
tokenizer is tiny-llama's byte-level BPE (411 tokens, its merges), padded to 416 with unused
tokens."""
import sys
from pathlib import Path

import numpy as np
import torch
from gguf import GGMLQuantizationType as T, GGUFWriter, dequantize, quantize

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gguf_writing import add_small_llama, tiny_llama_bpe, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, LAYERS, VOCAB  # noqa: E402

TYPES = {
    0: {"attn_q": T.Q4_K, "attn_k": T.Q4_K, "attn_v": T.Q4_K, "attn_output": T.Q4_K, "ffn_gate": T.Q4_K, "ffn_up": T.Q4_K, "ffn_down": T.Q4_K},
    1: {"attn_q": T.Q4_K, "attn_k": T.Q4_K, "attn_v": T.Q6_K, "attn_output": T.Q4_K, "ffn_gate": T.Q4_K, "ffn_up": T.Q4_K, "ffn_down": T.Q6_K},
}
HF = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}


def f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def q4_k(w):
    """Q4_K blocks of `w` [rows, K]: per 256 values f16 d, f16 dmin, 12 bytes of 6-bit
    scales and mins, 128 bytes of nibbles; value = d*sc*q - dmin*m. Returns the bytes
    [rows, K/256*144], the codes [rows, K], the scales d*sc [rows, K/32] (f32) and the values
    the blocks stand for."""
    rows, k = w.shape
    x = w.reshape(rows, k // 256, 8, 32).astype(np.float32)
    lo = np.minimum(x.min(axis=3), 0.0)
    hi = x.max(axis=3)
    scale = (hi - lo) / 15.0
    mins = -lo
    d = f16(scale.max(axis=2) / 63.0).astype(np.float32)
    dmin = f16(mins.max(axis=2) / 63.0).astype(np.float32)
    sc = np.where(d[..., None] > 0, np.rint(scale / np.where(d > 0, d, 1)[..., None]), 0).clip(0, 63).astype(np.uint8)
    m = np.where(dmin[..., None] > 0, np.rint(mins / np.where(dmin > 0, dmin, 1)[..., None]), 0).clip(0, 63).astype(np.uint8)
    step = d[..., None] * sc.astype(np.float32)
    off = dmin[..., None] * m.astype(np.float32)
    q = np.where(step[..., None] > 0, np.rint((x + off[..., None]) / np.where(step > 0, step, 1)[..., None]), 0).clip(0, 15).astype(np.uint8)
    packed = np.zeros((rows, k // 256, 12), np.uint8)
    packed[..., 0:4] = sc[..., 0:4] | ((sc[..., 4:8] >> 4) << 6)
    packed[..., 4:8] = m[..., 0:4] | ((m[..., 4:8] >> 4) << 6)
    packed[..., 8:12] = (sc[..., 4:8] & 15) | ((m[..., 4:8] & 15) << 4)
    codes = q.reshape(rows, k // 256, 4, 2, 32)  # chunk c: sub-blocks 2c (low nibble) and 2c+1 (high)
    qs = (codes[:, :, :, 0, :] | (codes[:, :, :, 1, :] << 4)).reshape(rows, k // 256, 128)
    blocks = np.concatenate([f16(d)[..., None].view(np.uint8), f16(dmin)[..., None].view(np.uint8), packed, qs], axis=2)
    values = step[..., None] * q.astype(np.float32) - off[..., None]
    return blocks.reshape(rows, -1), q.reshape(rows, k), step.reshape(rows, -1), values.reshape(rows, k)


def q6_k(w):
    """Q6_K blocks of `w` [rows, K]: per 256 values 128 bytes of low nibbles, 64 of 2-bit
    highs, 16 int8 scales, f16 d; value = d*sc*(q - 32), q 0..63. Returns the bytes
    [rows, K/256*210], the codes [rows, K], the scales d*sc [rows, K/16] (f32) and the values."""
    rows, k = w.shape
    x = w.reshape(rows, k // 256, 16, 16).astype(np.float32)
    scale = np.abs(x).max(axis=3) / 31.0
    d = f16(scale.max(axis=2) / 127.0).astype(np.float32)
    sc = np.where(d[..., None] > 0, np.rint(scale / np.where(d > 0, d, 1)[..., None]), 0).clip(0, 127).astype(np.int8)
    step = d[..., None] * sc.astype(np.float32)
    q = (np.where(step[..., None] > 0, np.rint(x / np.where(step > 0, step, 1)[..., None]), 0) + 32).clip(0, 63).astype(np.uint8)
    y = q.reshape(rows, k // 256, 2, 4, 32)  # half h, quarter j: values 128h + 32j + l
    ql = np.concatenate([(y[:, :, :, 0] & 15) | ((y[:, :, :, 2] & 15) << 4), (y[:, :, :, 1] & 15) | ((y[:, :, :, 3] & 15) << 4)], axis=3)
    qh = (y[:, :, :, 0] >> 4) | ((y[:, :, :, 1] >> 4) << 2) | ((y[:, :, :, 2] >> 4) << 4) | ((y[:, :, :, 3] >> 4) << 6)
    blocks = np.concatenate([ql.reshape(rows, k // 256, 128), qh.reshape(rows, k // 256, 64), sc.view(np.uint8), f16(d)[..., None].view(np.uint8)], axis=2)
    values = step[..., None] * (q.astype(np.float32) - 32)
    return blocks.reshape(rows, -1), q.reshape(rows, k), step.reshape(rows, -1), values.reshape(rows, k)


def q8_0(w):
    blocks = quantize(w, T.Q8_0)
    raw = blocks.reshape(w.shape[0], -1, 34)
    codes = raw[:, :, 2:].copy().view(np.int8).reshape(w.shape)
    scales = raw[:, :, :2].copy().view(np.float16).astype(np.float32).reshape(w.shape[0], -1)
    return blocks, codes, scales, np.repeat(scales, 32, axis=1) * codes.astype(np.float32)


ENCODERS = {T.Q4_K: q4_k, T.Q6_K: q6_k, T.Q8_0: q8_0}


def permute(w, heads):
    """llama.cpp's q/k row order: rows [heads, 2, hd/2] read as [heads, hd/2, 2]."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def main():
    out = Path(sys.argv[1])
    rng = np.random.default_rng(29)
    # The ids drawn for the test input: tiny-llama's own tokens, not the padding.
    n_vocab = sum(not t.startswith("<unused") for t in tiny_llama_bpe(VOCAB)[0])

    def normal(*shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    # Hugging Face row order; q/k permuted only when written.
    weights = {"token_embd.weight": normal(VOCAB, HIDDEN, std=1.0), "output.weight": normal(VOCAB, HIDDEN, std=HIDDEN**-0.5)}
    weights["output_norm.weight"] = (1 + normal(HIDDEN, std=0.1))
    for layer in range(LAYERS):
        shapes = {"attn_q": (HEADS * HEAD_DIM, HIDDEN), "attn_k": (KV_HEADS * HEAD_DIM, HIDDEN), "attn_v": (KV_HEADS * HEAD_DIM, HIDDEN),
                  "attn_output": (HIDDEN, HEADS * HEAD_DIM), "ffn_gate": (INTER, HIDDEN), "ffn_up": (INTER, HIDDEN), "ffn_down": (HIDDEN, INTER)}
        for n, s in shapes.items():
            weights[f"blk.{layer}.{n}.weight"] = normal(*s, std=s[1] ** -0.5)
        for n in ("attn_norm", "ffn_norm"):
            weights[f"blk.{layer}.{n}.weight"] = 1 + normal(HIDDEN, std=0.1)

    path = out / "gguf_kmix.gguf"
    w = GGUFWriter(str(path), "llama")
    add_small_llama(w)
    samples, samples_meant = {}, {}
    for name, value in weights.items():
        if value.ndim == 1:
            w.add_tensor(name, value)
            continue
        layer = int(name.split(".")[1]) if name.startswith("blk.") else None
        kind = name.split(".")[-2]
        ty = T.Q8_0 if name == "token_embd.weight" else T.Q6_K if name == "output.weight" else TYPES[layer][kind]
        blocks, codes, scales, meant = ENCODERS[ty](value)
        heads = {"attn_q": HEADS, "attn_k": KV_HEADS}.get(kind)
        if heads:
            # Rows are quantized one by one, so permuting the blocks is permuting the weight.
            blocks = permute(blocks, heads)
        back = dequantize(blocks.reshape(-1), ty).reshape(value.shape)
        if heads:
            back = back.reshape(heads, HEAD_DIM // 2, 2, -1).swapaxes(1, 2).reshape(value.shape)
        # gguf-py reads the blocks as the encoder meant them.
        assert np.allclose(back, meant, rtol=1e-5, atol=1e-6), f"{name} {ty.name}: gguf-py reads other values"
        err = np.abs(back - value).max() / np.abs(value).max()
        assert err < 0.2, f"{name} {ty.name}: relative error {err}"
        w.add_tensor(name, blocks, raw_dtype=ty)
        rows = np.sort(rng.choice(value.shape[0], 3, replace=False))
        samples[name] = (ty, rows, codes[rows], scales[rows])
        samples_meant[name] = meant[rows]
        print(f"{name}: {ty.name} {value.shape}, max relative error {err:.4f}")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(out), gguf_file=path.name, dtype=torch.float32).eval()
    state = model.state_dict()
    hf_name = {"token_embd.weight": "model.embed_tokens.weight", "output.weight": "lm_head.weight"}
    for layer in range(LAYERS):
        for k, v in HF.items():
            hf_name[f"blk.{layer}.{k}.weight"] = f"model.layers.{layer}.{v}.weight"
    saved = {}
    for name, (ty, rows, codes, scales) in samples.items():
        values = state[hf_name[name]].numpy()[rows]
        # The loader's rows (Hugging Face order, q/k un-permuted) are the encoder's.
        assert np.allclose(values, samples_meant[name], rtol=1e-5, atol=1e-6), name
        key = hf_name[name]
        saved[f"{key}.type"] = np.array(ty.name)
        saved[f"{key}.rows"] = rows.astype(np.int64)
        saved[f"{key}.codes"] = codes.astype(np.int16)
        saved[f"{key}.scales"] = scales.astype(np.float32)
        saved[f"{key}.values"] = values.astype(np.float32)
    ids = torch.tensor(rng.integers(3, n_vocab, (1, 12)), dtype=torch.long)
    with torch.no_grad():
        logits = model(ids).logits[0].float().numpy()
        prompt = ids[:, :6]
        gen = model.generate(prompt, max_new_tokens=16, do_sample=False, attention_mask=torch.ones_like(prompt), eos_token_id=None)
        steps = model(gen[:, :-1]).logits[0, prompt.shape[1] - 1:]
        t2 = torch.topk(steps, 2, dim=1).values
        print("min greedy margin", (t2[:, 0] - t2[:, 1]).min().item())
    np.savez_compressed(
        out / "gguf_kmix_reference.npz",
        input_ids=ids.numpy(),
        logits=logits.astype(np.float32),
        prompt_ids=prompt.numpy(),
        greedy=gen[0, prompt.shape[1]:].numpy().astype(np.int64),
        **saved,
    )
    print("file", path.stat().st_size, "bytes; greedy", gen[0, prompt.shape[1]:].tolist())


if __name__ == "__main__":
    main()
