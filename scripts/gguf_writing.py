"""What the GGUF test-data generators (scripts/make_*gguf*.py, run once, never in CI) write
alike: tiny-llama's byte-level BPE as a GGUF vocabulary, the metadata of a small llama file,
TextModel's size keys, float-or-quantized tensors, and the check of a written file against its
fixture. Needs gguf, numpy and safetensors only."""
import json
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T

ROOT = Path(__file__).resolve().parent.parent

# The small llama of scripts/make_gguf_kmix.py and make_gguf_kquants.py: K-quant blocks are 256
# values, so hidden and MLP sizes are 256.
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, LAYERS, VOCAB = 256, 4, 2, 64, 256, 2, 416
EPS, THETA, CTX = 1e-5, 10000.0, 256


def tiny_llama_bpe(size):
    """tests/fixtures/tiny-llama's byte-level BPE padded to `size` tokens with unused ones
    (`<unused{i}>`, USER_DEFINED), its added tokens CONTROL: (tokens, token types, merges)."""
    tok = json.loads((ROOT / "tests/fixtures/tiny-llama/tokenizer.json").read_text())
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])
    assert [i for _, i in vocab] == list(range(len(vocab)))
    tokens = [t for t, _ in vocab] + [f"<unused{i}>" for i in range(size - len(vocab))]
    types = [int(gguf.TokenType.NORMAL)] * len(vocab) + [int(gguf.TokenType.USER_DEFINED)] * (size - len(vocab))
    for a in tok["added_tokens"]:
        types[a["id"]] = int(gguf.TokenType.CONTROL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    return tokens, types, merges


def add_own_sizes(w, cfg):
    """The size keys in the order the converters that write their own keys use (GemmaModel,
    MiniCPM3Model): context, embedding, blocks, feed-forward, heads, key/value heads, the RMS
    epsilon."""
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])


def add_text_sizes(w, cfg, blocks=None, kv_heads=None):
    """`TextModel.set_gguf_parameters`' size keys, in its order, from a Hugging Face config;
    `blocks` / `kv_heads` where the converter writes other counts (appended prediction layers,
    DeepSeek's latent as one MQA head)."""
    w.add_block_count(cfg["num_hidden_layers"] if blocks is None else blocks)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    # Optional there (`find_hparam(..., optional=True)`): Solar Open's config has none.
    if cfg.get("intermediate_size") is not None:
        w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"] if kv_heads is None else kv_heads)


def check_round_trip(path, back, st, quantized, exact=lambda err: err == 0.0):
    """`back` (the file's tensors dequantized, in Hugging Face names) against the fixture's `st`:
    the same names; an F32 file holds the fixture's weights (`exact` of the largest difference);
    a quantized file's dequantization is saved beside it as `<stem>.dequantized.safetensors`."""
    from safetensors.numpy import save_file

    assert set(back) == set(st), set(back) ^ set(st)
    err = max(float(np.abs(back[k] - st[k]).max()) for k in st)
    if quantized:
        save_file(back, str(path.with_suffix(".dequantized.safetensors")))
    else:
        assert exact(err), f"{path.name}: the F32 file must hold the fixture's weights exactly ({err})"
    print(f"{path.name}: {path.stat().st_size} bytes, max |weight - fixture| {err:.3g}")


def add_small_llama(w):
    """The `llama` metadata of the small test file (the sizes above), with tiny-llama's BPE
    (bos 1, eos 2)."""
    w.add_context_length(CTX)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(INTER)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(EPS)
    w.add_rope_freq_base(THETA)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_vocab_size(VOCAB)
    tokens, types, merges = tiny_llama_bpe(VOCAB)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)


def add_tensors_and_close(w, items, qtype_of):
    """Adds each `(name, array)` as float32, or quantized by gguf-py to `qtype_of(name, array)`
    when that is not F32, then writes the file."""
    for name, data in items:
        data = np.ascontiguousarray(data.astype(np.float32))
        q = qtype_of(name, data)
        if q == T.F32:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, gguf.quantize(data, q), raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
