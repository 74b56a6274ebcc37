"""Writes the float checkpoint scripts/bench-gguf.py compares a GGUF import with: config.json,
model.safetensors (f32) and the tokenizer files of what transformers' own GGUF loader reads from
FILE.gguf (every tensor dequantized by gguf-py, q/k rows un-permuted). transformers refuses
save_pretrained of a GGUF-loaded model, so the state dict is saved directly (a tied head is
left out: config.json says tie_word_embeddings), and config.json without the loader's
`quantization_config` (`quant_method: gguf`), which would make the checkpoint a quantized one.

Run once, not in CI (it needs torch, transformers, gguf and safetensors):
    python scripts/gguf_float_checkpoint.py FILE.gguf OUT_DIR"""
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    gguf, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    state = model.state_dict()
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    save_file({k: v.contiguous() for k, v in state.items()}, str(out / "model.safetensors"), metadata={"format": "pt"})
    model.config.save_pretrained(str(out))
    # The loader records `quantization_config: {quant_method: gguf}`; the weights written are float.
    config = json.loads((out / "config.json").read_text())
    config.pop("quantization_config", None)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(str(out))
    print(f"{len(state)} tensors, {sum(v.numel() for v in state.values())} values -> {out}")


if __name__ == "__main__":
    main()
