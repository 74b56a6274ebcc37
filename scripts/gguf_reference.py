"""Writes what transformers' own GGUF loader (`from_pretrained(dir, gguf_file=...)`, which
dequantizes every tensor to float32) computes for a real GGUF file: the references of
tests/python/test_gguf.py (SmolLM2-135M-Instruct.Q4_1.gguf, the default FILE:
data/gguf_smollm2_reference.npz) and tests/python/test_gguf_gemma3_270m.py
(gemma-3-270m-q4_k_m.gguf: data/gguf_gemma3_270m_reference.npz).

Run once, not in CI (it needs torch, transformers, gguf and accelerate):
    python scripts/gguf_reference.py DIR_WITH_THE_GGUF OUT.npz [FILE]

Saved: the passage's token ids (transformers' tokenizer built from the file's metadata, with
its default special tokens), the passage's mean next-token NLL, the logits of every passage
position at a fixed sample of vocabulary ids (seeded) plus each position's top 8 ids (the full
[T, 49152] table would be 20 MB), and the 24 greedy tokens after the prompt."""
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "python"))
from real_gguf_passage import PASSAGE, PROMPT  # noqa: E402  (the tests' own text)

FILE = sys.argv[3] if len(sys.argv) > 3 else "SmolLM2-135M-Instruct.Q4_1.gguf"
SAMPLE, TOP, NEW = 512, 8, 24
LONG, TAIL = 640, 32

folder, out = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
tok = AutoTokenizer.from_pretrained(folder, gguf_file=FILE)
model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=FILE, dtype=torch.float32).eval()
ids = tok(PASSAGE, return_tensors="pt")["input_ids"]
with torch.no_grad():
    logits = model(ids).logits[0].float()
    nll = torch.nn.functional.cross_entropy(logits[:-1], ids[0, 1:]).item()
    prompt = tok(PROMPT, return_tensors="pt")["input_ids"]
    gen = model.generate(prompt, max_new_tokens=NEW, do_sample=False, attention_mask=torch.ones_like(prompt))
vocab = logits.shape[1]
sample = np.sort(np.random.default_rng(29).choice(vocab, SAMPLE, replace=False))
top = torch.topk(logits, TOP, dim=1).indices.numpy()
cols = np.concatenate([np.broadcast_to(sample, (logits.shape[0], SAMPLE)), top], axis=1).astype(np.int32)
values = np.take_along_axis(logits.numpy(), cols, axis=1).astype(np.float32)
print("tokens", ids.shape[1], "nll", nll, "greedy", tok.decode(gen[0, prompt.shape[1]:]))
# The top-2 margin of each greedy step, to judge how robust the 24 tokens are.
with torch.no_grad():
    steps = model(gen[:, :-1]).logits[0, prompt.shape[1] - 1:]
    t2 = torch.topk(steps, 2, dim=1).values
    print("min greedy margin", (t2[:, 0] - t2[:, 1]).min().item())
# Past a sliding window (Gemma 3's 512): the passage repeated to LONG tokens, the logits of its
# last TAIL positions at the same columns (each position attends past the window there).
ids_long = tok(" ".join([PASSAGE] * 8), return_tensors="pt")["input_ids"][:, :LONG]
with torch.no_grad():
    tail = model(ids_long).logits[0, -TAIL:].float()
long_cols = np.concatenate([np.broadcast_to(sample, (TAIL, SAMPLE)), torch.topk(tail, TOP, dim=1).indices.numpy()], axis=1).astype(np.int32)
np.savez_compressed(
    out,
    passage_ids=ids[0].numpy().astype(np.int64),
    logit_ids=cols,
    logits=values,
    nll=np.float64(nll),
    prompt_ids=prompt[0].numpy().astype(np.int64),
    greedy=gen[0, prompt.shape[1]:].numpy().astype(np.int64),
    long_ids=ids_long[0].numpy().astype(np.int64),
    long_logit_ids=long_cols,
    long_logits=np.take_along_axis(tail.numpy(), long_cols, axis=1).astype(np.float32),
)
tok.save_pretrained(out + ".tokenizer")
