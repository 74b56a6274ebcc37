#!/usr/bin/env python3
"""Mixture-of-experts GGUF import benchmark (never run in CI; issue #29): memory and time of
`tailor build --model FILE.gguf --ep cpu` on a file shaped like a real MoE checkpoint, against
baselines measured in the same run.

    .venv/bin/python scripts/bench-gguf-moe.py TAILOR WORKDIR [--layers N] [--experts E]
        [--hidden H] [--expert-ff F] [--used K] [--arch qwen3moe|gpt-oss|gpt-oss-hf]

The file: a `qwen3moe` GGUF with Qwen3-30B-A3B's layer shape by default (hidden 2048, 32 query
and 4 key/value heads of 128, 128 experts of 768, 8 used per token), N layers (default 2) and
tiny-qwen3-moe's 512-token vocabulary; or with `--arch gpt-oss` a `gpt-oss` GGUF with
gpt-oss-20b's layer shape (hidden 2880, 64 query and 8 key/value heads of 64, 32 experts of
2880, 4 used; sizes from `--hidden`, `--experts`, ... when given), MXFP4 experts with biases,
sinks, the router's bias, YaRN and a 128-token window, as the gpt-oss releases are; or with
`--arch gpt-oss-hf` the same model as transformers stores the published gpt-oss checkpoints
(a folder: config.json with `quantization_config.quant_method: mxfp4`, one model.safetensors
with the experts as `_blocks`/`_scales` and the rest f16, the byte size of the bf16 release). Its blocks are random bytes of the right types, written
directly (no quantizer run): experts Q4_0 or `--expert-type` (one 3-D stack per projection and layer, as
llama.cpp's converter merges them), attention and the embedding/head Q8_0, norms and the router F32. The
numbers do not mean anything; the layout and the sizes are what the import streams.

Baselines in the same run: copying the file (`shutil.copyfile`: the I/O floor of reading and
writing that many bytes) and the largest single tensor of the file (one expert stack). Printed:
file size, build wall time and peak RSS (`/usr/bin/time -v`), the ratios build / copy time,
peak RSS / file size and peak RSS / largest tensor, the package size / file size, and one
prefill + 8 decode steps on ONNX Runtime's CPU EP (finite logits; seconds per step).
"""
import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_arch_gguf import write_vocab  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = "tiny-qwen3-moe"


def random_blocks(rng, qtype, rows, k):
    """Random blocks of `qtype` for a [rows, k] weight: codes uniform, scales around 0.01."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n = rows * (k // block)
    raw = rng.integers(0, 256, (n, size), dtype=np.uint8)
    # The leading f16 scale (d; Q4_K: d then dmin) kept finite and small.
    for at in (0, 2) if qtype == T.Q4_K else (0,):
        raw[:, at:at + 2] = (rng.uniform(0.005, 0.02, n).astype(np.float16)).view(np.uint8).reshape(n, 2)
    return raw.reshape(rows, (k // block) * size)


def random_mxfp4(rng, rows, k):
    """Random MXFP4 blocks for a [rows, k] weight: nibbles uniform, scales 2^-10..2^-5."""
    n = rows * (k // 32)
    raw = rng.integers(0, 256, (n, 17), dtype=np.uint8)
    raw[:, 0] = rng.integers(118, 124, n, dtype=np.uint8)
    return raw.reshape(rows, (k // 32) * 17)


def write_gpt_oss(path, a, rng):
    """A gpt-oss file as llama.cpp's GptOssModel writes one (scripts/make_gpt_oss_gguf.py)."""
    cfg = json.loads((ROOT / "tests" / "fixtures" / "tiny-gpt-oss" / "config.json").read_text())
    head, heads, kv, vocab = 64, a.hidden // 45, a.hidden // 360, cfg["vocab_size"]
    w = gguf.GGUFWriter(str(path), "gpt-oss")
    w.add_name("bench-gpt-oss")
    w.add_block_count(a.layers)
    w.add_context_length(131072)
    w.add_embedding_length(a.hidden)
    w.add_feed_forward_length(a.expert_ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_key_length(head)
    w.add_value_length(head)
    w.add_rope_freq_base(150000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_expert_count(a.experts)
    w.add_expert_used_count(a.used)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_MXFP4_MOE)
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(32.0)
    w.add_rope_scaling_orig_ctx_len(4096)
    w.add_sliding_window(128)
    w.add_expert_feed_forward_length(a.expert_ff)
    write_vocab(w, "tiny-gpt-oss", cfg)
    w.add_tokenizer_pre("gpt-4o")

    def small(name, *shape):
        w.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))

    def q8(name, rows, k):
        w.add_tensor(name, random_blocks(rng, T.Q8_0, rows, k), raw_dtype=T.Q8_0)

    q8("token_embd.weight", vocab, a.hidden)
    q8("output.weight", vocab, a.hidden)
    w.add_tensor("output_norm.weight", np.ones(a.hidden, dtype=np.float32))
    for i in range(a.layers):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", np.ones(a.hidden, dtype=np.float32))
        w.add_tensor(b + "post_attention_norm.weight", np.ones(a.hidden, dtype=np.float32))
        for name, rows in [("attn_q", heads * head), ("attn_k", kv * head), ("attn_v", kv * head)]:
            q8(b + name + ".weight", rows, a.hidden)
            small(b + name + ".bias", rows)
        q8(b + "attn_output.weight", a.hidden, heads * head)
        small(b + "attn_output.bias", a.hidden)
        small(b + "attn_sinks.weight", heads)
        small(b + "ffn_gate_inp.weight", a.experts, a.hidden)
        small(b + "ffn_gate_inp.bias", a.experts)
        for name, rows, k in [("ffn_gate_exps", a.expert_ff, a.hidden), ("ffn_up_exps", a.expert_ff, a.hidden), ("ffn_down_exps", a.hidden, a.expert_ff)]:
            w.add_tensor(b + name + ".weight", random_mxfp4(rng, a.experts * rows, k).reshape(a.experts, rows, -1), raw_dtype=T.MXFP4)
            small(b + name + ".bias", a.experts, rows)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return a.experts * a.expert_ff * a.hidden * 17 // 32


def write_gpt_oss_hf(folder, a, rng):
    """The gpt-oss model of `write_gpt_oss` as transformers stores gpt-oss (MXFP4 experts,
    scripts/make_mxfp4_checkpoint.py); returns the largest tensor's bytes."""
    from safetensors.numpy import save_file

    fix = ROOT / "tests" / "fixtures" / "tiny-gpt-oss"
    cfg = json.loads((fix / "config.json").read_text())
    head, heads, kv = 64, a.hidden // 45, a.hidden // 360
    cfg.update(hidden_size=a.hidden, intermediate_size=a.expert_ff, num_hidden_layers=a.layers, num_attention_heads=heads,
               num_key_value_heads=kv, head_dim=head, num_local_experts=a.experts, num_experts_per_tok=a.used, sliding_window=128,
               layer_types=["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(a.layers)], swiglu_limit=7.0,
               quantization_config={"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    for f in ["tokenizer.json", "tokenizer_config.json", "generation_config.json"]:
        shutil.copy(fix / f, folder / f)
    vocab = cfg["vocab_size"]
    t = {}

    def small(name, *shape):
        t[name] = (rng.standard_normal(shape) * 0.02).astype(np.float16)

    def mxfp4(name, rows, k):
        t[name + "_blocks"] = rng.integers(0, 256, (a.experts, rows, k // 32, 16), dtype=np.uint8)
        t[name + "_scales"] = rng.integers(118, 124, (a.experts, rows, k // 32), dtype=np.uint8)

    small("model.embed_tokens.weight", vocab, a.hidden)
    small("lm_head.weight", vocab, a.hidden)
    t["model.norm.weight"] = np.ones(a.hidden, dtype=np.float16)
    for i in range(a.layers):
        b = f"model.layers.{i}."
        t[b + "input_layernorm.weight"] = np.ones(a.hidden, dtype=np.float16)
        t[b + "post_attention_layernorm.weight"] = np.ones(a.hidden, dtype=np.float16)
        for name, rows in [("q_proj", heads * head), ("k_proj", kv * head), ("v_proj", kv * head)]:
            small(b + f"self_attn.{name}.weight", rows, a.hidden)
            small(b + f"self_attn.{name}.bias", rows)
        small(b + "self_attn.o_proj.weight", a.hidden, heads * head)
        small(b + "self_attn.o_proj.bias", a.hidden)
        small(b + "self_attn.sinks", heads)
        small(b + "mlp.router.weight", a.experts, a.hidden)
        small(b + "mlp.router.bias", a.experts)
        mxfp4(b + "mlp.experts.gate_up_proj", 2 * a.expert_ff, a.hidden)
        small(b + "mlp.experts.gate_up_proj_bias", a.experts, 2 * a.expert_ff)
        mxfp4(b + "mlp.experts.down_proj", a.hidden, a.expert_ff)
        small(b + "mlp.experts.down_proj_bias", a.experts, a.hidden)
    save_file(t, str(folder / "model.safetensors"))
    return max(v.nbytes for v in t.values())


def write_file(path, a, rng):
    if a.arch == "gpt-oss":
        return write_gpt_oss(path, a, rng)
    cfg = json.loads((ROOT / "tests" / "fixtures" / FIXTURE / "config.json").read_text())
    head, heads, kv, vocab = 128, a.hidden // 64, max(1, a.hidden // 512), cfg["vocab_size"]
    w = gguf.GGUFWriter(str(path), "qwen3moe")
    w.add_name("bench-qwen3-moe")
    w.add_block_count(a.layers)
    w.add_context_length(4096)
    w.add_embedding_length(a.hidden)
    w.add_feed_forward_length(a.expert_ff * 8)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_key_length(head)
    w.add_value_length(head)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(a.experts)
    w.add_expert_used_count(a.used)
    w.add_expert_feed_forward_length(a.expert_ff)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0)
    write_vocab(w, FIXTURE, cfg)

    def quant(name, qtype, rows, k, stack=None):
        shape = (rows, k) if stack is None else (stack, rows, k)
        data = random_blocks(rng, qtype, rows * (stack or 1), k).reshape(*shape[:-1], -1)
        w.add_tensor(name, data, raw_dtype=qtype)

    def ones(name, n):
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    quant("token_embd.weight", T.Q8_0, vocab, a.hidden)
    quant("output.weight", T.Q8_0, vocab, a.hidden)
    ones("output_norm.weight", a.hidden)
    for i in range(a.layers):
        b = f"blk.{i}."
        ones(b + "attn_norm.weight", a.hidden)
        ones(b + "ffn_norm.weight", a.hidden)
        ones(b + "attn_q_norm.weight", head)
        ones(b + "attn_k_norm.weight", head)
        quant(b + "attn_q.weight", T.Q8_0, heads * head, a.hidden)
        quant(b + "attn_k.weight", T.Q8_0, kv * head, a.hidden)
        quant(b + "attn_v.weight", T.Q8_0, kv * head, a.hidden)
        quant(b + "attn_output.weight", T.Q8_0, a.hidden, heads * head)
        w.add_tensor(b + "ffn_gate_inp.weight", (rng.standard_normal((a.experts, a.hidden)) * 0.02).astype(np.float32))
        experts = T[a.expert_type]
        quant(b + "ffn_gate_exps.weight", experts, a.expert_ff, a.hidden, stack=a.experts)
        quant(b + "ffn_up_exps.weight", experts, a.expert_ff, a.hidden, stack=a.experts)
        quant(b + "ffn_down_exps.weight", experts, a.hidden, a.expert_ff, stack=a.experts)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    block, size = gguf.GGML_QUANT_SIZES[T[a.expert_type]]
    return a.experts * a.expert_ff * a.hidden * size // block


def run_package(pkg, steps=8):
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(str(pkg / "model.onnx"), so, providers=["CPUExecutionProvider"])
    inputs = {i.name: i for i in model.graph.input}
    past = [n for n in inputs if n.startswith("past_key_values.")]
    dims = [d.dim_value for d in inputs[past[0]].type.tensor_type.shape.dim]
    ids = np.array([[1, 5, 9, 13, 17, 21, 25, 29]], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    if "position_ids" in inputs:
        feeds["position_ids"] = np.arange(ids.shape[1], dtype=np.int64)[None]
    feeds.update({n: np.zeros((1, dims[1], 0, dims[3]), dtype=np.float32) for n in past})
    feeds = {k: v for k, v in feeds.items() if k in inputs}
    outs = [o.name for o in sess.get_outputs()]
    times = []
    for _ in range(steps + 1):
        t = time.perf_counter()
        got = dict(zip(outs, sess.run(outs, feeds)))
        times.append(time.perf_counter() - t)
        assert np.isfinite(got["logits"]).all(), "non-finite logits"
        nxt = np.array([[int(got["logits"][0, -1].argmax())]], dtype=np.int64)
        feeds["attention_mask"] = np.ones((1, feeds["attention_mask"].shape[1] + 1), dtype=np.int64)
        if "position_ids" in inputs:
            feeds["position_ids"] = np.array([[feeds["attention_mask"].shape[1] - 1]], dtype=np.int64)
        feeds["input_ids"] = nxt
        for n in past:
            feeds[n] = got[n.replace("past_key_values.", "present.")]
    return times[0], float(np.median(times[1:]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tailor")
    p.add_argument("workdir", type=Path)
    p.add_argument("--arch", default="qwen3moe", choices=["qwen3moe", "gpt-oss", "gpt-oss-hf"])
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--experts", type=int)
    p.add_argument("--hidden", type=int)
    p.add_argument("--expert-ff", type=int)
    p.add_argument("--used", type=int)
    p.add_argument("--expert-type", default="Q4_0", choices=["Q4_0", "Q8_0", "Q4_K", "Q6_K"], help="ggml type of the experts (Q4_K: a minimum per block, float experts unless --flags asks)")
    p.add_argument("--flags", default="", help="extra tailor build flags, e.g. '--requantize-experts int8'")
    a = p.parse_args()
    # Qwen3-30B-A3B's or gpt-oss-20b's layer shape unless given.
    shape = {"qwen3moe": (128, 2048, 768, 8), "gpt-oss": (32, 2880, 2880, 4), "gpt-oss-hf": (32, 2880, 2880, 4)}[a.arch]
    for name, default in zip(["experts", "hidden", "expert_ff", "used"], shape):
        if getattr(a, name) is None:
            setattr(a, name, default)
    if a.arch.startswith("gpt-oss"):
        a.expert_type = "MXFP4"
    a.workdir.mkdir(parents=True, exist_ok=True)
    (a.workdir / "file").mkdir(exist_ok=True)
    if a.arch == "gpt-oss-hf":
        path = a.workdir / "file" / "bench-gpt-oss-hf"
        largest = write_gpt_oss_hf(path, a, np.random.default_rng(0))
        data = path / "model.safetensors"
    else:
        path = data = a.workdir / "file" / f"bench-{a.arch}.gguf"
        largest = write_file(path, a, np.random.default_rng(0))
    size = data.stat().st_size
    t = time.perf_counter()
    shutil.copyfile(data, a.workdir / "copy.bin")
    copy = time.perf_counter() - t
    (a.workdir / "copy.bin").unlink()
    out = a.workdir / "pkg"
    shutil.rmtree(out, ignore_errors=True)
    cmd = ["/usr/bin/time", "-v", a.tailor, "build", "--model", str(path), "--output", str(out), "--ep", "cpu", *a.flags.split()]
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if done.returncode:
        sys.exit(done.stderr)
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1)) * 1024
    pkg = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    ops = {}
    import onnx

    for n in onnx.load(str(out / "model.onnx"), load_external_data=False).graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    print(f"file {size / 1e6:.1f} MB ({a.layers} layers of {a.experts} {a.expert_type} experts x {a.expert_ff}, hidden {a.hidden}); largest tensor {largest / 1e6:.1f} MB; flags {a.flags or 'none'}")
    print(f"copy of the file: {copy:.2f} s")
    print(f"import: {wall:.2f} s = {wall / copy:.1f}x the copy; peak RSS {rss / 1e6:.1f} MB = {rss / size:.3f}x the file, {rss / largest:.2f}x the largest tensor")
    print(f"package {pkg / 1e6:.1f} MB = {pkg / size:.3f}x the file; QMoE nodes {ops.get('QMoE', 0)}, MatMulNBits {ops.get('MatMulNBits', 0)}")
    prefill, step = run_package(out)
    print(f"ORT CPU: prefill of 8 tokens {prefill:.2f} s, decode step median {step * 1e3:.0f} ms, logits finite")


if __name__ == "__main__":
    main()
