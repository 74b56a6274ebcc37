"""Writes tests/fixtures/tiny-qwen2-moe: a random 3-layer Qwen2-MoE (every parameter perturbed
after init, so a weight that is never loaded shows up), and the reference outputs transformers
computes for it, in the layout of the other decoder fixtures (tests/fixtures/README.md). Run once
with torch; the result is committed and the tests never need torch.

    python3 -m venv /tmp/torch && /tmp/torch/bin/pip install torch transformers safetensors
    /tmp/torch/bin/python scripts/make_tiny_qwen2_moe.py

What it exercises that the shared MoE fixtures do not: a shared expert
(`shared_expert_intermediate_size`) scaled by `sigmoid(mlp.shared_expert_gate(x))`, the top-k
probabilities not renormalized (`norm_topk_prob` false, Qwen2-MoE's default), q/k/v biases
(`qkv_bias`), and a dense layer among the sparse ones (`mlp_only_layers` = [1], its MLP sized by
`intermediate_size`). The inputs are those of the shared fixtures (same vocabulary size), the
tokenizer files are tiny-qwen3-moe's.
"""

import json
import os
import shutil

import torch
import transformers
from safetensors.torch import save_file

from make_tiny_decoders import perturbed_and_saved, references, run, write_reference_json

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures")
OUT = os.path.join(FIXTURES, "tiny-qwen2-moe")
INPUTS_FROM = os.path.join(FIXTURES, "tiny-qwen3-moe")


def main():
    torch.manual_seed(1234)
    os.makedirs(OUT, exist_ok=True)
    config = transformers.Qwen2MoeConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        decoder_sparse_step=1,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=48,
        num_experts_per_tok=2,
        num_experts=4,
        norm_topk_prob=False,
        mlp_only_layers=[1],
        qkv_bias=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        initializer_range=0.2,
    )
    model = perturbed_and_saved(transformers.Qwen2MoeForCausalLM(config), OUT)
    # transformers 5.24 writes `sliding_window: 0` when `use_sliding_window` is false; published
    # Qwen2-MoE configs carry a real window (or null) there, and the window is off either way.
    path = os.path.join(OUT, "config.json")
    with open(path) as f:
        written = json.load(f)
    if written.get("sliding_window") == 0 and not written.get("use_sliding_window"):
        written["sliding_window"] = None
    with open(path, "w") as f:
        json.dump(written, f, indent=2, sort_keys=True)
        f.write("\n")
    for name in ["tokenizer.json", "tokenizer_config.json", "generation_config.json"]:
        shutil.copy(os.path.join(INPUTS_FROM, name), os.path.join(OUT, name))

    ref = references(model, "tiny-qwen3-moe")
    ids, mask = ref["input_ids"], ref["attention_mask"]
    save_file({k: v.contiguous() for k, v in ref.items()}, os.path.join(OUT, "reference.safetensors"))

    half = transformers.Qwen2MoeForCausalLM.from_pretrained(OUT, attn_implementation="eager", dtype=torch.float16).eval()
    f16_err = float((run(half, ids, mask).logits.float() - ref["logits"]).abs().max())
    generator = (f"scripts/make_tiny_qwen2_moe.py: transformers {transformers.__version__}, torch {torch.__version__}, "
                 "eager attention, float32, seed 1234 weights; inputs of tiny-qwen3-moe")
    write_reference_json(os.path.join(OUT, "reference.json"), "qwen2_moe", generator, f16_err)
    # The checkpoint reloads to the same outputs.
    again = transformers.Qwen2MoeForCausalLM.from_pretrained(OUT, attn_implementation="eager").eval()
    print("reload max |diff|", float((run(again, ids, mask).logits - ref["logits"]).abs().max()), "f16 err", f16_err)


if __name__ == "__main__":
    main()
