"""The passage and prompt of the real-GGUF tests (test_gguf.py, test_gguf_gemma3_270m.py), the
same text scripts/gguf_reference.py feeds transformers."""
import numpy as np

PASSAGE = (
    "The lighthouse stood at the end of a narrow spit of land, where the river met the sea. "
    "For more than a century its keepers had climbed the spiral stairs each evening to light "
    "the lamp, and each morning they wrote in a leather book how the weather had changed, which "
    "ships had passed, and whether the fog had come in from the east or the south. When the "
    "light was finally automated, the last keeper carried the books down the stairs one by one."
)
PROMPT = "The three primary colors are"


def passage_nll(logits, ids) -> float:
    """Mean next-token negative log-likelihood of `ids` under `logits` ([S, V])."""
    z = logits[:-1].astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(ids) - 1), ids[1:]].mean())
