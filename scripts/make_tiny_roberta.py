"""Writes tests/fixtures/tiny-roberta: a random 2-layer RoBERTa (every parameter perturbed after
init, so no norm weight is all ones and no bias zero), a small byte-level BPE tokenizer, and
the reference outputs transformers computes for it. Run once with torch; the result is
committed and the tests never need torch.

    python3 -m venv /tmp/torch && /tmp/torch/bin/pip install torch transformers tokenizers safetensors
    /tmp/torch/bin/python scripts/make_tiny_roberta.py

The reference batch has three rows of 7 tokens: unpadded, right-padded and left-padded (pad id
1 = padding_idx), so RoBERTa's positions (padding_idx + 1 + the count of real tokens so far,
padding_idx for pads) are exercised on both sides. Every position of last_hidden_state is
compared, padded ones included (transformers computes them too: padded queries attend to the
real keys).
"""

import json
import os

import torch
import transformers
from safetensors.torch import save_file
from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders, processors

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "tiny-roberta")
TEXT = ["the quick brown fox jumps over the lazy dog", "hello world, this is a tiny roberta", "encoders pool tokens into one vector"] * 20


def tokenizer(vocab_size):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXT, trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return tok


def main():
    torch.manual_seed(1234)
    os.makedirs(OUT, exist_ok=True)
    config = transformers.RobertaConfig(
        vocab_size=512,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=40,
        type_vocab_size=1,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        layer_norm_eps=1e-5,
        hidden_act="gelu",
        initializer_range=0.2,
    )
    model = transformers.RobertaModel(config, add_pooling_layer=True).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model.save_pretrained(OUT, safe_serialization=True)
    tok = tokenizer(config.vocab_size)
    tok.save(os.path.join(OUT, "tokenizer.json"))
    with open(os.path.join(OUT, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "RobertaTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
                   "unk_token": "<unk>", "mask_token": "<mask>", "model_max_length": 38}, f, indent=1)
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(5, config.vocab_size, (3, 7), generator=g)
    mask = torch.ones_like(ids)
    ids[1, 5:] = config.pad_token_id
    mask[1, 5:] = 0
    ids[2, :3] = config.pad_token_id
    mask[2, :3] = 0
    model.config._attn_implementation = "eager"
    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
    save_file({"input_ids": ids.contiguous(), "attention_mask": mask.contiguous(), "last_hidden_state": hidden.contiguous()},
              os.path.join(OUT, "reference.safetensors"))
    with open(os.path.join(OUT, "reference.json"), "w") as f:
        json.dump({
            "generator": f"scripts/make_tiny_roberta.py: transformers {transformers.__version__}, torch {torch.__version__}, eager attention, float32, seed 1234 weights / 7 inputs",
            "model_type": "roberta",
            "last_hidden_state": "encoder output for input_ids [3, 7]: row 0 unpadded, row 1 right-padded (2 pads), row 2 left-padded (3 pads); every position is compared",
            "tolerance": {"float32": {"atol": 1e-4}, "float16": {"atol": 0.05}, "bfloat16": "not runnable on ORT's CPU EP: check structurally"},
        }, f, indent=1)
        f.write("\n")
    # The checkpoint reloads to the same outputs.
    again = transformers.RobertaModel.from_pretrained(OUT, attn_implementation="eager").eval()
    with torch.no_grad():
        diff = (again(input_ids=ids, attention_mask=mask).last_hidden_state - hidden).abs().max()
    print("reload max |diff|", float(diff))


if __name__ == "__main__":
    main()
