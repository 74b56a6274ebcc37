"""Writes a synthetic GPTQ v1 checkpoint of a llama shape for import benchmarks: random 4-bit
codes packed as GPTQ packs them (`qweight` int32 [K/8, N], code j of a word at bits 4j..4j+3
for row 8r+j; `qzeros` int32 [K/group, N/8] holding zero-1; f16 `scales` [K/group, N]; `g_idx`
[K]), f16 embeddings, head and norms, and a config whose `quantization_config` says so. The
tokenizer files are copied from the tiny-llama fixture (its 512-token vocabulary is below the
config's, which the build does not check). Needs numpy and safetensors only.

usage: make_gptq_bench.py OUT_DIR [--hidden 2048] [--intermediate 5632] [--layers 12]
                                   [--heads 16] [--kv-heads 4] [--vocab 32000] [--group 128]
                                   [--desc-act]
"""
import argparse
import json
import shutil
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file


def packed_linear(rng, k, n, group, order):
    """(qweight, qzeros, scales, g_idx) of a random K x N GPTQ v1 layer; `order` (act-order) is
    a permutation of the groups' rows, shared by the layers that read one input, as GPTQ's
    Hessian order is."""
    codes = rng.integers(0, 16, size=(k, n), dtype=np.uint32)
    qweight = np.zeros((k // 8, n), dtype=np.uint32)
    for j in range(8):
        qweight |= codes[j::8] << (4 * j)
    zeros = rng.integers(1, 16, size=(k // group, n), dtype=np.uint32) - 1  # v1 stores zero-1
    qzeros = np.zeros((k // group, n // 8), dtype=np.uint32)
    for j in range(8):
        qzeros |= zeros[:, j::8] << (4 * j)
    scales = (rng.random((k // group, n), dtype=np.float32) * 0.02 + 0.001).astype(np.float16)
    g_idx = np.arange(k, dtype=np.int32) // group
    if order is not None:
        g_idx = g_idx[order]
    return qweight.view(np.int32), qzeros.view(np.int32), scales, g_idx


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--intermediate", type=int, default=5632)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--desc-act", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    head_dim = a.hidden // a.heads
    a.out.mkdir(parents=True, exist_ok=True)
    tensors = {
        "model.embed_tokens.weight": (rng.standard_normal((a.vocab, a.hidden), dtype=np.float32) * 0.02).astype(np.float16),
        "lm_head.weight": (rng.standard_normal((a.vocab, a.hidden), dtype=np.float32) * 0.02).astype(np.float16),
        "model.norm.weight": np.ones(a.hidden, dtype=np.float16),
    }
    shapes = {
        "self_attn.q_proj": (a.hidden, a.heads * head_dim),
        "self_attn.k_proj": (a.hidden, a.kv_heads * head_dim),
        "self_attn.v_proj": (a.hidden, a.kv_heads * head_dim),
        "self_attn.o_proj": (a.heads * head_dim, a.hidden),
        "mlp.gate_proj": (a.hidden, a.intermediate),
        "mlp.up_proj": (a.hidden, a.intermediate),
        "mlp.down_proj": (a.intermediate, a.hidden),
    }
    for layer in range(a.layers):
        p = f"model.layers.{layer}"
        tensors[f"{p}.input_layernorm.weight"] = np.ones(a.hidden, dtype=np.float16)
        tensors[f"{p}.post_attention_layernorm.weight"] = np.ones(a.hidden, dtype=np.float16)
        # One act-order per input: q/k/v read the attention's, gate/up the MLP's.
        orders = {}
        for name, (k, n) in shapes.items():
            source = {"self_attn.k_proj": "self_attn.q_proj", "self_attn.v_proj": "self_attn.q_proj", "mlp.up_proj": "mlp.gate_proj"}.get(name, name)
            if a.desc_act and source not in orders:
                orders[source] = rng.permutation(k)
            qweight, qzeros, scales, g_idx = packed_linear(rng, k, n, a.group, orders.get(source))
            tensors[f"{p}.{name}.qweight"] = qweight
            tensors[f"{p}.{name}.qzeros"] = qzeros
            tensors[f"{p}.{name}.scales"] = scales
            tensors[f"{p}.{name}.g_idx"] = g_idx
    save_file(tensors, str(a.out / "model.safetensors"))
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": a.hidden,
        "intermediate_size": a.intermediate,
        "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads,
        "head_dim": head_dim,
        "vocab_size": a.vocab,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "quantization_config": {
            "quant_method": "gptq",
            "bits": 4,
            "group_size": a.group,
            "desc_act": a.desc_act,
            "sym": False,
            "checkpoint_format": "gptq",
        },
    }
    (a.out / "config.json").write_text(json.dumps(config, indent=2))
    fixture = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "tiny-llama"
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(fixture / name, a.out / name)


if __name__ == "__main__":
    main()
