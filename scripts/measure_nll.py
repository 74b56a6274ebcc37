"""Passage NLL of decoder packages on ONNX Runtime's CPU EP (a measurement, not a test).

    .venv/bin/python scripts/measure_nll.py PKG [PKG ...]

Tokenizes PASSAGE with the first package's tokenizer.json, runs each package's model.onnx once
over the whole passage (one prefill, no past) and prints the mean negative log-likelihood of
each next token, the package's size on disk and its greedy continuation's agreement with the
first package's over 24 tokens. docs/quantization.md quotes what it printed.
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from tokenizers import Tokenizer

PASSAGE = (
    "The river rises in the hills to the north of the town and runs south through a wide valley of "
    "farms and small villages. In spring the snow melts and the water climbs the banks, so the old "
    "bridge was built high on stone arches. Most of the people who live along the river work on the "
    "land, growing wheat, barley and potatoes, and many keep a few cows or sheep. On market days the "
    "square fills with carts, and traders come from the coast to sell fish and salt."
)


def feeds(model, ids):
    f = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    names = {i.name for i in model.graph.input}
    if "position_ids" in names:
        f["position_ids"] = np.arange(ids.shape[1], dtype=np.int64)[None]
    for i in model.graph.input:
        if i.name.startswith("past_key_values."):
            dims = [d.dim_value if d.dim_value else 0 for d in i.type.tensor_type.shape.dim]
            dims[0] = 1
            f[i.name] = np.zeros(dims, dtype=np.float32)
    return f


def greedy(sess, model, ids, n=24):
    out = []
    ids = ids.copy()
    for _ in range(n):
        logits = sess.run(["logits"], feeds(model, ids))[0]
        t = int(logits[0, -1].argmax())
        out.append(t)
        ids = np.concatenate([ids, [[t]]], axis=1)
    return out


def passage_nll(pkg, ids):
    """The NLL of `ids` under one package, with its session and graph (for further runs)."""
    model = onnx.load(os.path.join(pkg, "model.onnx"), load_external_data=False)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(os.path.join(pkg, "model.onnx"), so, providers=["CPUExecutionProvider"])
    logits = sess.run(["logits"], feeds(model, ids))[0][0].astype(np.float64)
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    return float(-np.mean([logp[t, ids[0, t + 1]] for t in range(ids.shape[1] - 1)])), sess, model


def passage_ids(pkg):
    """The passage's token ids by the package's own tokenizer."""
    tok = Tokenizer.from_file(os.path.join(pkg, "tokenizer.json"))
    return np.array([tok.encode(PASSAGE).ids], dtype=np.int64)


def nll(pkg):
    """The passage NLL of one package (its own tokenizer)."""
    return passage_nll(pkg, passage_ids(pkg))[0]


def main(pkgs):
    ids = passage_ids(pkgs[0])
    first = None
    for pkg in pkgs:
        value, sess, model = passage_nll(pkg, ids)
        tokens = greedy(sess, model, ids[:, :16])
        first = first or tokens
        size = sum(os.path.getsize(os.path.join(pkg, f)) for f in os.listdir(pkg) if f.startswith("model.onnx"))
        same = sum(a == b for a, b in zip(tokens, first))
        print(f"{pkg}: {ids.shape[1]} tokens, NLL {value:.4f}, model {size / 1e6:.1f} MB, greedy equal to the first {same}/24")


if __name__ == "__main__":
    main(sys.argv[1:])
