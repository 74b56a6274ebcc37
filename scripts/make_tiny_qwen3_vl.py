#!/usr/bin/env python3
"""Writes the `tiny-qwen3_vl` fixture (run once with torch and transformers >= 5.23; never in
CI): a random-weight Qwen3-VL checkpoint small enough for the tests, its processor settings and
tokenizer (the `tiny-qwen2_5_vl` fixture's byte-level BPE, whose special tokens Qwen3-VL shares),
and transformers' reference tensors for every part, in the layout of the other VL fixtures
(reference.json says what each tensor is), plus `deepstack_features`.

    /work/venv-ref/bin/python scripts/make_tiny_qwen3_vl.py tests/fixtures/tiny-qwen3_vl

The image processor is transformers' PIL backend (no torchvision); the prompt's image tokens are
expanded as the processor does (one `<|image_pad|>` per merged token).
"""
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file
from transformers import PreTrainedTokenizerFast, Qwen3VLConfig, Qwen3VLForConditionalGeneration
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "tests" / "fixtures" / "tiny-qwen2_5_vl"  # tokenizer, chat template, image
PROMPT = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
          "<|vision_start|><|image_pad|><|vision_end|>describe the picture<|im_end|>\n<|im_start|>assistant\n")
TEXT_PROMPT = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
               "what color is the fox<|im_end|>\n<|im_start|>assistant\n")
STEPS = 8


def config() -> Qwen3VLConfig:
    return Qwen3VLConfig(
        text_config={
            "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "hidden_act": "silu",
            "max_position_embeddings": 256, "initializer_range": 0.2, "rms_norm_eps": 1e-6,
            "attention_bias": False, "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 0,
            "rope_parameters": {"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [2, 3, 3],
                                "mrope_interleaved": True},
        },
        vision_config={
            "depth": 3, "hidden_size": 32, "hidden_act": "gelu_pytorch_tanh", "intermediate_size": 64,
            "num_heads": 2, "in_channels": 3, "patch_size": 16, "spatial_merge_size": 2,
            "temporal_patch_size": 2, "out_hidden_size": 64, "num_position_embeddings": 16,
            "deepstack_visual_indexes": [0, 2], "initializer_range": 0.2,
        },
        image_token_id=5, video_token_id=6, vision_start_token_id=3, vision_end_token_id=4,
        tie_word_embeddings=False,
    )


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(1234)
    cfg = config()
    model = Qwen3VLForConditionalGeneration(cfg).eval()
    with torch.no_grad():  # larger random weights than the init, so every part matters in the logits
        for name, p in model.named_parameters():
            if p.dim() == 1 and ("norm" in name or "ln" in name) and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith("bias") or "norm" in name:
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(0.2 * torch.randn_like(p))
    model.save_pretrained(str(out), safe_serialization=True)
    for name in ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "image.png"]:
        shutil.copy(SOURCE / name, out / name)
    tok_cfg = json.loads((out / "tokenizer_config.json").read_text())
    tok_cfg["processor_class"] = "Qwen3VLProcessor"
    (out / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=2))
    size = {"shortest_edge": 4096, "longest_edge": 32768}
    image_processor = Qwen2VLImageProcessorPil(patch_size=16, temporal_patch_size=2, merge_size=2,
                                               image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5], size=size)
    (out / "processor_config.json").write_text(json.dumps({
        "image_processor": {"do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
                            "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
                            "image_processor_type": "Qwen2VLImageProcessorFast", "merge_size": 2, "patch_size": 16,
                            "resample": 3, "rescale_factor": 1 / 255, "size": size, "temporal_patch_size": 2},
        "processor_class": "Qwen3VLProcessor"}, indent=2))
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(out / "tokenizer.json"))
    image = Image.open(out / "image.png").convert("RGB")
    vision = image_processor(images=[image], return_tensors="pt")
    pixel_values, grid = vision["pixel_values"], vision["image_grid_thw"]
    n_image = int(grid.prod(-1).item()) // 4
    prompt = PROMPT.replace("<|image_pad|>", "<|image_pad|>" * n_image)
    input_ids = torch.tensor([tokenizer.encode(prompt)])
    assert int((input_ids == 5).sum()) == n_image
    mask = torch.ones_like(input_ids)
    mm = (input_ids == 5).long()
    text_ids = torch.tensor([tokenizer.encode(TEXT_PROMPT)])
    text_mask = torch.ones_like(text_ids)

    with torch.no_grad():
        feats = model.model.get_image_features(pixel_values, grid)
        image_features = torch.cat(feats.pooler_output, 0)
        deepstack = torch.stack([torch.cat(f, 0) for f in feats.deepstack_features])
        embeds = model.model.get_input_embeddings()(input_ids).clone()
        embeds[0, input_ids[0] == 5] = image_features
        position_ids, rope_deltas = model.model.get_rope_index(input_ids, mm, grid, None, mask)
        logits = model(input_ids=input_ids, attention_mask=mask, pixel_values=pixel_values, image_grid_thw=grid,
                       mm_token_type_ids=mm).logits
        gen = model.generate(input_ids=input_ids, attention_mask=mask, pixel_values=pixel_values, image_grid_thw=grid,
                             mm_token_type_ids=mm, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False)
        text_logits = model(input_ids=text_ids, attention_mask=text_mask).logits
        text_gen = model.generate(input_ids=text_ids, attention_mask=text_mask, max_new_tokens=STEPS,
                                  min_new_tokens=STEPS, do_sample=False)
        text_embeds = model.model.get_input_embeddings()(text_ids)
    tensors = {
        "input_ids": input_ids, "attention_mask": mask, "mm_token_type_ids": mm, "pixel_values": pixel_values.float(),
        "image_grid_thw": grid, "image_features": image_features, "deepstack_features": deepstack,
        "inputs_embeds": embeds, "position_ids": position_ids, "rope_deltas": rope_deltas.reshape(1, 1),
        "logits": logits, "greedy_tokens": gen[:, input_ids.shape[1]:],
        "text_input_ids": text_ids, "text_attention_mask": text_mask, "text_inputs_embeds": text_embeds,
        "text_logits": text_logits, "text_greedy_tokens": text_gen[:, text_ids.shape[1]:],
    }
    tensors = {k: v.detach().contiguous() for k, v in tensors.items()}
    save_file(tensors, str(out / "reference.safetensors"))
    top2 = torch.topk(logits[0, -1], 2).values
    meta = {
        "architecture": "Qwen3VLForConditionalGeneration", "model_type": "qwen3_vl",
        "generator": f"scripts/make_tiny_qwen3_vl.py; transformers {__import__('transformers').__version__}, torch {torch.__version__}, eager, float32, seed 1234",
        "image": "image.png", "image_hw": [image.height, image.width], "prompt": PROMPT, "text_prompt": TEXT_PROMPT,
        "image_token_id": 5, "video_token_id": 6, "vision_start_token_id": 3, "vision_end_token_id": 4,
        "vocab_size": 512, "text_hidden_size": 64, "num_image_tokens": n_image,
        "mrope_section": [2, 3, 3], "mrope_interleaved": True, "deepstack_visual_indexes": [0, 2],
        "_last_logit_margin": float(top2[0] - top2[1]),
        "tolerance": {"float32": {"atol": 0.001}},
        "greedy_tokens": f"{STEPS} greedy tokens after the image prompt (generate, do_sample False, no eos stop)",
        "text_greedy_tokens": f"{STEPS} greedy tokens after text_input_ids",
        "image_features": "[num_image_tokens, text_hidden]: vision tower after the merger (pooler_output)",
        "deepstack_features": "[len(deepstack_visual_indexes), num_image_tokens, text_hidden]: the deepstack mergers' outputs, in list order; added to the decoder's hidden states at the image tokens after layers 0..k-1",
        "inputs_embeds": "[1,S,text_hidden]: embed_tokens(input_ids), image_pad rows replaced by image_features",
        "pixel_values": "[patches, C*T*P*P] float32 in HF merge-block order",
        "position_ids": "[3,1,S] int64 mRoPE (t, h, w) ids from get_rope_index",
        "tensors": {k: [list(v.shape), str(v.dtype).removeprefix("torch.")] for k, v in tensors.items()},
    }
    (out / "reference.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    print(f"wrote {out}: {n_image} image tokens, grid {grid.tolist()}, greedy {tensors['greedy_tokens'].tolist()}, margin {meta['_last_logit_margin']:.3f}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
