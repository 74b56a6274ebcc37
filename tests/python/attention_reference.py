"""Numpy references the ONNX Runtime facts tests check kernels against (test_gqa_padding.py,
test_gqa_static_facts.py, test_static_cache_facts.py): half-split RoPE and causal attention with
pad keys masked, as transformers computes them. One copy, so a fix reaches every test."""
import numpy as np


def rope_tables(head, positions=64, theta=10000.0):
    """cos, sin [positions, head / 2] (f32) of the default RoPE."""
    inv = 1.0 / (theta ** (np.arange(0, head, 2) / head))
    angles = np.arange(positions)[:, None] * inv[None]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def rotate(x, positions, cos, sin):
    """Half-split RoPE of x [batch, seq, heads, head] at positions [batch, seq]; `-sin` undoes it."""
    c, s = cos[positions][:, :, None], sin[positions][:, :, None]
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * c - b * s, b * c + a * s], -1)


def attend(q, k, v, mask, window=0, softcap=0.0):
    """Causal attention of q [batch, seq, heads, head] (the last `seq` slots) over the dense keys
    and values [batch, total, kv_heads, head], pad keys (mask [batch, total] == 0) masked, each
    query seeing only its last `window` slots when window > 0, scores capped as
    `softcap * tanh(scores / softcap)` when softcap > 0. Returns [batch, seq, heads, head]."""
    seq, total, heads, head = q.shape[1], k.shape[1], q.shape[2], q.shape[3]
    k, v = np.repeat(k, heads // k.shape[2], 2), np.repeat(v, heads // v.shape[2], 2)
    scores = np.einsum("bshd,bthd->bhst", q, k) / np.sqrt(head)
    if softcap:
        scores = np.tanh(scores / softcap) * softcap
    slots, queries = np.arange(total), total - seq + np.arange(seq)
    allowed = slots[None, :] <= queries[:, None]
    if window:
        allowed &= slots[None, :] > queries[:, None] - window
    allowed = allowed[None, None] & (mask[:, None, None, :] == 1)
    scores = np.where(allowed, scores, -np.inf)
    top = np.max(scores, -1, keepdims=True)
    p = np.exp(scores - np.where(np.isfinite(top), top, 0))
    p = p / np.maximum(p.sum(-1, keepdims=True), 1e-30)
    return np.einsum("bhst,bthd->bshd", p, v)
