"""Writes tests/python/data/gguf-gemma/: the tiny Gemma fixtures (tests/fixtures/tiny-gemma,
tiny-gemma2, tiny-gemma3) written as GGUF files the way llama.cpp's `convert_hf_to_gguf.py`
writes them, and what transformers computes for each file, the reference of
tests/python/test_gguf_gemma.py.

Run once, not in CI (it needs torch, transformers, gguf, sentencepiece, safetensors):
    python scripts/make_gemma_gguf.py            # from the repository root

As llama.cpp's converter does (GemmaModel / Gemma2Model / Gemma3Model, read for facts):
- architecture `gemma`, `gemma2` or `gemma3`; metadata: context_length, embedding_length,
  block_count, feed_forward_length, attention.head_count(_kv), layer_norm_rms_epsilon,
  key_length/value_length; gemma2 adds attn_logit_softcapping, final_logit_softcapping and
  attention.sliding_window; gemma3 adds rope.freq_base (the full layers' theta),
  attention.sliding_window and final_logit_softcapping only when set. No query_pre_attn_scalar,
  no layer pattern, no local rope base: llama.cpp derives those from the architecture.
- every `*norm.weight` stored as weight + 1 (Gemma's RMSNorm multiplies by 1 + weight), q/k not
  permuted, `lm_head` dropped for gemma and gemma2 (their files are always tied: llama.cpp has
  no output tensor for them), kept as `output.weight` for gemma3.
- a SentencePiece vocabulary of the fixture's size (scripts/make_spm_gguf.py trains it), with
  the multi-space tokens stored as real spaces, type USER_DEFINED, as llama.cpp writes Gemma's.

Files: `<fixture>.F32.gguf` (every tensor float32) and `<fixture>.Q.gguf` (attention Q8_0, MLP
Q4_0, embedding Q8_0, norms F32). References (`<fixture>.reference.safetensors`), for the fixture's
`input_ids`: `logits_f32` and `logits_q` (and `dequant.<name>`: gguf-py's dequantization of
blk.0.attn_q (Q8_0) and blk.0.ffn_up (Q4_0)), transformers' Gemma model with the fixture's config
(tied head for gemma/gemma2, as the files are; the layer pattern the file implies: the
gemma3 file's two layers are both sliding, as llama.cpp and transformers' GGUF loader read it,
where the fixture's second layer is full) and the file's tensors dequantized by gguf-py with
the +1 undone, as transformers' GGUF loader loads them; and for the tokenizer, `reference.json`:
the ids transformers' GGUF loader (AutoTokenizer, gguf_file=) gives the test strings (Gemma's
tokenizer builder, chosen by architecture).
"""
import json
import sys
from pathlib import Path

import numpy as np
import torch
import gguf
from gguf import GGMLQuantizationType as T
from safetensors.numpy import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gguf_writing import add_own_sizes, add_tensors_and_close  # noqa: E402
from make_spm_gguf import TEST_STRINGS, train, vocab_of, write_vocab  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
OUT = ROOT / "tests" / "python" / "data" / "gguf-gemma"
ARCH = {"gemma": "gemma", "gemma2": "gemma2", "gemma3_text": "gemma3"}
IDS = {"pad": 0, "bos": 1, "eos": 2, "unk": 3}


def gemma_vocab(size):
    """A SentencePiece vocabulary of `size` tokens in Gemma's shape: <pad> <bos> <eos> <unk>,
    two control turn markers, byte fallback, and multi-space tokens as llama.cpp writes them."""
    sp = train(size, IDS, {"pad": "<pad>", "bos": "<bos>", "eos": "<eos>", "unk": "<unk>"}, ["<start_of_turn>", "<end_of_turn>"])
    tokens, scores, types = vocab_of(sp, [])
    # Gemma's tokenizer_config lists runs of spaces as added tokens (not special): llama.cpp writes
    # them with real spaces, USER_DEFINED, score -1000. Use the last two normal pieces' slots.
    for i, run in zip([size - 2, size - 1], ["  ", "   "]):
        tokens[i], scores[i], types[i] = run, -1000.0, 4
    return tokens, scores, types


def tensors_of(cfg, st, arch):
    """(gguf name, float32 array) as llama.cpp's converter maps and shifts them."""
    out = [("token_embd.weight", st["model.embed_tokens.weight"])]
    norm = lambda w: w + np.float32(1)  # noqa: E731
    out.append(("output_norm.weight", norm(st["model.norm.weight"])))
    layer_names = {
        "self_attn.q_proj.weight": "attn_q.weight",
        "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.v_proj.weight": "attn_v.weight",
        "self_attn.o_proj.weight": "attn_output.weight",
        "mlp.gate_proj.weight": "ffn_gate.weight",
        "mlp.up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight",
        "input_layernorm.weight": "attn_norm.weight",
    }
    if arch == "gemma":
        layer_names["post_attention_layernorm.weight"] = "ffn_norm.weight"
    else:
        layer_names["post_attention_layernorm.weight"] = "post_attention_norm.weight"
        layer_names["pre_feedforward_layernorm.weight"] = "ffn_norm.weight"
        layer_names["post_feedforward_layernorm.weight"] = "post_ffw_norm.weight"
    if arch == "gemma3":
        layer_names["self_attn.q_norm.weight"] = "attn_q_norm.weight"
        layer_names["self_attn.k_norm.weight"] = "attn_k_norm.weight"
    for i in range(cfg["num_hidden_layers"]):
        for hf, g in layer_names.items():
            w = st[f"model.layers.{i}.{hf}"]
            out.append((f"blk.{i}.{g}", norm(w) if hf.endswith("norm.weight") else w))
    if arch == "gemma3" and "lm_head.weight" in st:
        out.append(("output.weight", st["lm_head.weight"]))
    return out


def qtype_of(name, quantized):
    if not quantized or name.endswith("norm.weight"):
        return T.F32
    if ".ffn_" in name:
        return T.Q4_0
    return T.Q8_0


def write(path, cfg, st, arch, vocab, quantized):
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny {arch}")
    add_own_sizes(w, cfg)
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    if arch == "gemma2":
        w.add_attn_logit_softcapping(cfg["attn_logit_softcapping"])
        w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
        w.add_sliding_window(cfg["sliding_window"])
    if arch == "gemma3":
        rope = cfg["rope_parameters"]
        w.add_rope_freq_base(rope.get("full_attention", rope)["rope_theta"])
        if cfg.get("final_logit_softcapping"):
            w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
        if cfg.get("sliding_window_pattern") != 1:
            w.add_sliding_window(cfg["sliding_window"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
    tokens, scores, types = vocab
    write_vocab(w, tokens, scores, types, IDS, add_bos=True, add_eos=False, add_space_prefix=False)
    add_tensors_and_close(w, tensors_of(cfg, st, arch), lambda name, _: qtype_of(name, quantized))


def loaded(path):
    """The file's tensors as transformers' GGUF loader reads them: dequantized, norms - 1."""
    r = gguf.GGUFReader(str(path))
    out = {}
    for t in r.tensors:
        v = gguf.dequantize(t.data, t.tensor_type).astype(np.float32).reshape([int(d) for d in reversed(t.shape)])
        if "norm.weight" in t.name:
            v = v - np.float32(1)
        out[t.name] = v
    return out


def hf_state(cfg, g, arch):
    """The Hugging Face state dict of the file's tensors (inverse of tensors_of)."""
    st = {}
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}
    layer = {
        "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight", "attn_v.weight": "self_attn.v_proj.weight",
        "attn_output.weight": "self_attn.o_proj.weight", "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
        "ffn_down.weight": "mlp.down_proj.weight", "attn_norm.weight": "input_layernorm.weight",
        "post_attention_norm.weight": "post_attention_layernorm.weight", "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
        "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
        "ffn_norm.weight": "post_attention_layernorm.weight" if arch == "gemma" else "pre_feedforward_layernorm.weight",
    }
    for name, v in g.items():
        if name in names:
            st[names[name]] = v
        else:
            _, i, rest = name.split(".", 2)
            st[f"model.layers.{i}.{layer[rest]}"] = v
    if "lm_head.weight" not in st:
        st["lm_head.weight"] = st["model.embed_tokens.weight"]
    return st


def logits(fixture, cfg, state, ids, arch):
    """transformers' model for the file: the fixture's config, with the layer pattern the file
    implies (llama.cpp and transformers' GGUF loader alike: Gemma 2 every other layer from layer 0
    sliding, Gemma 3 five of every six), and the file's tensors."""
    from transformers import AutoConfig, AutoModelForCausalLM

    conf = AutoConfig.from_pretrained(str(FIX / fixture))
    conf.tie_word_embeddings = False
    n = cfg["num_hidden_layers"]
    if arch == "gemma2":
        conf.layer_types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    if arch == "gemma3":
        conf.layer_types = ["sliding_attention" if i % 6 < 5 else "full_attention" for i in range(n)]
    model = AutoModelForCausalLM.from_config(conf, attn_implementation="eager", dtype=torch.float32).eval()
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}, strict=False)
    assert not unexpected and all("rotary" in m for m in missing), (missing, unexpected)
    with torch.no_grad():
        return model(torch.from_numpy(ids)).logits.numpy().astype(np.float32)


def tokenizer_reference(path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    ids = [tok(s)["input_ids"] for s in TEST_STRINGS]
    if "--dump" in sys.argv:
        tok.save_pretrained(f"/tmp/{path.stem}-tokenizer")
    return {
        "generator": f"transformers {__import__('transformers').__version__} AutoTokenizer.from_pretrained(dir, gguf_file={path.name})",
        "strings": TEST_STRINGS,
        "ids": ids,
        "decoded": [tok.decode(i, skip_special_tokens=True) for i in ids],
        "tokens": [tok.convert_ids_to_tokens(i) for i in ids],
    }


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    vocab = None
    for fixture in ["tiny-gemma", "tiny-gemma2", "tiny-gemma3"]:
        cfg = json.loads((FIX / fixture / "config.json").read_text())
        arch = ARCH[cfg["model_type"]]
        if vocab is None:
            vocab = gemma_vocab(cfg["vocab_size"])
        assert len(vocab[0]) == cfg["vocab_size"]
        st = load_file(str(FIX / fixture / "model.safetensors"))
        ref = load_file(str(FIX / fixture / "reference.safetensors"))
        ids = ref["input_ids"].astype(np.int64)
        out = {"input_ids": ids}
        for kind, quantized in [("F32", False), ("Q", True)]:
            path = OUT / f"{fixture}.{kind}.gguf"
            write(path, cfg, st, arch, vocab, quantized)
            g = loaded(path)
            out[f"logits_{kind.lower()}"] = logits(fixture, cfg, hf_state(cfg, g, arch), ids, arch)
            if quantized:
                # gguf-py's dequantization of one Q8_0 and one Q4_0 tensor, for the weight check.
                for name in ["blk.0.attn_q.weight", "blk.0.ffn_up.weight"]:
                    out[f"dequant.{name}"] = g[name]
        diff = np.abs(out["logits_f32"] - ref["logits"]).max()
        print(fixture, "F32 file vs the fixture's own reference:", diff)
        if arch != "gemma" and "--loader" in sys.argv:
            # transformers' own GGUF loader on the same files, for the record (not committed).
            from transformers import AutoModelForCausalLM

            for kind in ["F32", "Q"]:
                m = AutoModelForCausalLM.from_pretrained(str(OUT), gguf_file=f"{fixture}.{kind}.gguf", dtype=torch.float32, attn_implementation="eager").eval()
                with torch.no_grad():
                    got = m(torch.from_numpy(ids)).logits.numpy()
                c = m.config
                print(fixture, kind, "transformers' GGUF loader vs the reference:", np.abs(got - out[f"logits_{kind.lower()}"]).max(),
                      "query_pre_attn_scalar", c.query_pre_attn_scalar, "layer_types", c.layer_types)
        save_file(out, str(OUT / f"{fixture}.reference.safetensors"), metadata={"generator": "scripts/make_gemma_gguf.py"})
        print(fixture, "quantized vs f32 logits:", np.abs(out["logits_q"] - out["logits_f32"]).max())
    ref = tokenizer_reference(OUT / "tiny-gemma2.F32.gguf")
    (OUT / "tokenizer-reference.json").write_text(json.dumps(ref, ensure_ascii=False, indent=1) + "\n")
    for s, t in zip(ref["strings"], ref["tokens"]):
        print(repr(s), t)


if __name__ == "__main__":
    main()
