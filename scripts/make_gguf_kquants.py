"""Writes tests/python/data/gguf_kquants.gguf: a two-layer llama GGUF file whose projections are
of the ggml types llama.cpp's Q2_K, Q3_K_M, Q5_K_M, Q5_1, IQ4_NL and IQ4_XS files use (issue
#29), and a tied Q4_K token table, the input of tests/python/test_gguf_kquants.py; then
gguf_kquants_untied.gguf, the same layer types (other random blocks) with an untied Q5_K
token table (8-bit codes with a min) and a Q4_0 `output.weight`.

Run once, not in CI (it needs gguf and numpy, no torch):
    python scripts/make_gguf_kquants.py tests/python/data

The model: hidden 256, 4 query heads and 2 key/value heads of 64, MLP 256, vocabulary 416,
tied head (no `output.weight`: llama.cpp writes the head only when it is not the table).

| tensor | layer 0 | layer 1 |
|---|---|---|
| attn_q, attn_k, attn_v | Q3_K (alike: packable) | Q5_K (alike: packable) |
| attn_output | Q5_K | Q3_K |
| ffn_gate, ffn_up | Q2_K | IQ4_NL |
| ffn_down | Q5_1 | IQ4_XS |

token_embd (and so the head) is Q4_K, norms F32 (the untied file: token_embd Q5_K, output Q4_0). The blocks are random (seeded): random codes,
sub-block scales and mins, and f16 super-block scales sized so that values are about
`1/sqrt(K)` (1.0 for the table), centred by the mins. Whatever they decode to is the model:
the test dequantizes the file with gguf-py and compares the import with a float build of
those values. Every tensor is decoded by gguf-py here and checked to be finite and not
constant. Block layouts as llama.cpp's `dequantize_row_*` read them (ggml-quants.c), q and k
rows permuted as llama.cpp's converter writes them (any byte string of valid blocks is a
valid tensor, so permuting the rows of blocks is permuting the weight). The tokenizer is
tiny-llama's byte-level BPE padded to 416 tokens, as scripts/make_gguf_kmix.py writes it."""
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T, GGUFWriter, dequantize

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gguf_writing import add_small_llama, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, LAYERS, VOCAB  # noqa: E402

TYPES = {
    0: {"attn_q": T.Q3_K, "attn_k": T.Q3_K, "attn_v": T.Q3_K, "attn_output": T.Q5_K, "ffn_gate": T.Q2_K, "ffn_up": T.Q2_K, "ffn_down": T.Q5_1},
    1: {"attn_q": T.Q5_K, "attn_k": T.Q5_K, "attn_v": T.Q5_K, "attn_output": T.Q3_K, "ffn_gate": T.IQ4_NL, "ffn_up": T.IQ4_NL, "ffn_down": T.IQ4_XS},
}
# (values per block, bytes per block)
LAYOUT = {T.Q4_0: (32, 18), T.Q2_K: (256, 84), T.Q3_K: (256, 110), T.Q4_K: (256, 144), T.Q5_K: (256, 176), T.Q5_1: (32, 24), T.IQ4_NL: (32, 18), T.IQ4_XS: (256, 136)}

rng = np.random.default_rng(33)


def f16_bytes(x):
    return np.asarray(x, dtype=np.float16).view(np.uint8).reshape(*np.shape(x), 2)


def random_blocks(ty, rows, k, std):
    """`rows` rows of `k` values of `ty` as random valid blocks whose values are about `std`."""
    per, size = LAYOUT[ty]
    n = rows * k // per
    raw = rng.integers(0, 256, (n, size), dtype=np.uint8)
    if ty == T.Q2_K:
        # scales: low nibble scale, high nibble min; value d*sc*q - dmin*m, q 0..3.
        sc = rng.integers(4, 16, (n, 16))
        m = rng.integers(0, 16, (n, 16))
        raw[:, 0:16] = (sc | (m << 4)).astype(np.uint8)
        d = std / 8.0 / 1.5
        raw[:, 80:82] = f16_bytes(np.full(n, d))
        raw[:, 82:84] = f16_bytes(np.full(n, d * 1.5 * 10 / 7.5))
    elif ty == T.Q3_K:
        # 6-bit scales (32 is 0) unpacked by llama.cpp's kmask dance: any 12 bytes are valid.
        raw[:, 108:110] = f16_bytes(np.full(n, std / 16 / 2.5))
    elif ty in (T.Q4_K, T.Q5_K):
        # d*sc*q - dmin*m, 6-bit sc and m; centre: dmin*m about d*sc*(levels/2).
        levels = 15 if ty == T.Q4_K else 31
        d = std / 32 / (levels / 3.5)
        raw[:, 0:2] = f16_bytes(np.full(n, d))
        raw[:, 2:4] = f16_bytes(np.full(n, d * levels / 2))
    elif ty == T.Q4_0:
        # f16 d; value d * (q - 8), q 0..15.
        raw[:, 0:2] = f16_bytes(np.full(n, std / 4.5))
    elif ty == T.IQ4_NL:
        # f16 d; value d * level, levels -127..113.
        raw[:, 0:2] = f16_bytes(np.full(n, std / 60))
    elif ty == T.IQ4_XS:
        # f16 d, 6-bit sub-block scales ls (ls - 32); value d * (ls - 32) * level.
        raw[:, 0:2] = f16_bytes(np.full(n, std / 60 / 16))
    else:  # Q5_1: f16 d, f16 m; value d*q + m, q 0..31
        d = rng.uniform(0.5, 1.5, n) * std / 9.0
        raw[:, 0:2] = f16_bytes(d)
        raw[:, 2:4] = f16_bytes(-d * 15.5 + rng.normal(0, std / 4, n))
    return raw.reshape(rows, -1)


def permute(w, heads):
    """llama.cpp's q/k row order: rows [heads, 2, hd/2] read as [heads, hd/2, 2]."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def main():
    out = Path(sys.argv[1])
    write(out / "gguf_kquants.gguf", T.Q4_K, None)
    write(out / "gguf_kquants_untied.gguf", T.Q5_K, T.Q4_0)


def write(path, table, head):
    """The file at `path`: token_embd of type `table`, and `output.weight` of type `head`
    unless that is None (tied)."""
    w = GGUFWriter(str(path), "llama")
    add_small_llama(w)

    def add(name, ty, rows, k, std, heads=None):
        blocks = random_blocks(ty, rows, k, std)
        if heads:
            blocks = permute(blocks, heads)
        values = dequantize(blocks.reshape(-1), ty).reshape(rows, k)
        assert np.isfinite(values).all() and values.std() > 0, name
        print(f"{name}: {ty.name} [{rows}, {k}], std {values.std():.4f} (wanted about {std:.4f}), mean {values.mean():+.4f}")
        w.add_tensor(name, blocks, raw_dtype=ty)

    add("token_embd.weight", table, VOCAB, HIDDEN, 1.0)
    if head is not None:
        add("output.weight", head, VOCAB, HIDDEN, HIDDEN ** -0.5)
    w.add_tensor("output_norm.weight", (1 + rng.normal(0, 0.1, HIDDEN)).astype(np.float32))
    for layer in range(LAYERS):
        shapes = {"attn_q": (HEADS * HEAD_DIM, HIDDEN), "attn_k": (KV_HEADS * HEAD_DIM, HIDDEN), "attn_v": (KV_HEADS * HEAD_DIM, HIDDEN),
                  "attn_output": (HIDDEN, HEADS * HEAD_DIM), "ffn_gate": (INTER, HIDDEN), "ffn_up": (INTER, HIDDEN), "ffn_down": (HIDDEN, INTER)}
        for n, (rows, k) in shapes.items():
            add(f"blk.{layer}.{n}.weight", TYPES[layer][n], rows, k, k ** -0.5, {"attn_q": HEADS, "attn_k": KV_HEADS}.get(n))
        for n in ("attn_norm", "ffn_norm"):
            w.add_tensor(f"blk.{layer}.{n}.weight", (1 + rng.normal(0, 0.1, HIDDEN)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("file", path.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
