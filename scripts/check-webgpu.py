#!/usr/bin/env python3
"""Manual check of the `webgpu` EP table on a real WebGPU execution provider. Never run in CI.

What it does
  1. Builds every decoder and encoder fixture (tests/fixtures/*) with `tailor build --ep webgpu`
     for f32 and f16, opens each package with WebGpuExecutionProvider, reads ORT's verbose log
     for node placement (which nodes ended on the CPU EP, and whether the WebGPU EP had no
     kernel for them or ORT's CPU-preference heuristic moved them), and compares with the
     transformers reference (reference.safetensors; f32 atol 1e-4, f16 atol 5e-2, as in
     tests/fixtures/README.md): for a decoder the unpadded 7-token prefill, one decode step fed
     with the prefill's cache and the 3-token short prefill (logits and the prefill's present
     KV); for an encoder `last_hidden_state` at every position of the reference's padded batch.
     Pre-quantized fixtures (GPTQ, AWQ) are built with `--accuracy-level 0`: their reference is
     the dequantized model.
     --baseline also runs each package on the same wheel's CPUExecutionProvider; --int64 sets
     ep.webgpuexecutionprovider.enableInt64=1 for the package sessions.
  2. With --probe: builds one-node models for every op in ep-sets/tables/webgpu.toml (and a few
     it does not claim), one per element type per type constraint at opset 24, plus each
     entry's since/until and the opset after until, and records whether the WebGPU EP takes
     the node, with default provider options and with enableInt64; nodes it takes are run once.
     A claimed type the EP does not take is reported as contradicting the table; so is a type
     only a CPU-fallback entry (`host = true`) claims if WebGPU takes it.

What it needs (nothing here is installed by the script)
  - A Python with onnxruntime-webgpu 1.27.0 (the newest WebGPU wheel on PyPI; the tables
    target ORT 1.32, which has no WebGPU wheel) and numpy, e.g.
        python3 -m venv /tmp/wgpu-venv && /tmp/wgpu-venv/bin/pip install onnxruntime-webgpu==1.27.0 numpy
    No `onnx` package: the probe models are encoded by hand below.
  - A Vulkan driver Dawn can use. Without a GPU: Mesa's lavapipe (CPU Vulkan), Mesa 25 from
    Debian bookworm-backports:
        apt-get install -t bookworm-backports mesa-vulkan-drivers
    and the environment (set by this script when unset and the file exists):
        VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.json XDG_RUNTIME_DIR=/tmp
  - A release `tailor` binary (cargo build --release -p builder, or --tailor PATH).

    /tmp/wgpu-venv/bin/python scripts/check-webgpu.py [--tailor PATH] [--probe] [--baseline]
        [--int64] [--dtypes f32 f16] [--no-fixtures] [--workdir DIR] [--json OUT]

Every session runs in a child process of this script (a driver crash costs one line, not the
run) with ORT logging at verbose level on its stderr, which is what the placement is read from.
Exit status 1 when a fixture fails its tolerance or a claim is contradicted. Results of the
last run and their limits: docs/ep-tables.md, "Verifying a table on a real EP".
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
TABLE = REPO / "ep-sets" / "tables" / "webgpu.toml"
EP = "WebGpuExecutionProvider"
ATOL = {"f32": 1e-4, "f16": 5e-2}
NP = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "u32": np.uint32, "i64": np.int64,
      "bool": np.bool_, "u8": np.uint8}
INT64_CONFIG = {"ep.webgpuexecutionprovider.enableInt64": "1"}


# ---------------------------------------------------------------------------------------------
# Minimal ONNX protobuf writer (field numbers from onnx.proto), enough for one-node models.

def _varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _int(field, v):
    return _varint(field << 3) + _varint(v)


def _len(field, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return _varint((field << 3) | 2) + _varint(len(payload)) + payload


ELEM = {"f32": 1, "u8": 2, "i8": 3, "i32": 6, "i64": 7, "bool": 9, "f16": 10, "f64": 11, "u32": 12,
        "u64": 13, "bf16": 16}


def _value_info(name, elem, shape):
    dims = b"".join(_len(1, _int(1, d) if isinstance(d, int) else _len(2, d)) for d in shape)
    return _len(1, name) + _len(2, _len(1, _int(1, ELEM[elem]) + _len(2, dims)))


def _attr(name, v):
    if isinstance(v, float):  # AttributeProto.f (field 2, fixed32), type FLOAT = 1
        return _len(1, name) + _varint((2 << 3) | 5) + struct.pack("<f", v) + _int(20, 1)
    if isinstance(v, int):  # i (3), type INT = 2
        return _len(1, name) + _int(3, v) + _int(20, 2)
    if isinstance(v, list):  # ints (8), type INTS = 7
        return _len(1, name) + b"".join(_int(8, i) for i in v) + _int(20, 7)
    raise TypeError(v)


def onnx_model(domain, op, inputs, outputs, attrs, opset=24):
    """inputs/outputs: [(name, elem, shape)]; an input name "" is an omitted optional input."""
    node = b"".join(_len(1, i[0]) for i in inputs) + b"".join(_len(2, o[0]) for o in outputs)
    node += _len(3, "probe") + _len(4, op)
    node += b"".join(_len(5, _attr(k, v)) for k, v in attrs.items())
    if domain:
        node += _len(7, domain)
    graph = _len(1, node) + _len(2, "probe")
    graph += b"".join(_len(11, _value_info(*i)) for i in inputs if i[0])
    graph += b"".join(_len(12, _value_info(*o)) for o in outputs if o[0])
    opsets = _len(8, _int(2, opset)) + _len(8, _len(1, "com.microsoft") + _int(2, 1))
    return _int(1, 10) + _len(2, "check-webgpu") + opsets + _len(7, graph)


# ---------------------------------------------------------------------------------------------
# safetensors reader (the format is an 8-byte header length, a JSON header, raw data).

ST_DTYPE = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32, "BOOL": np.bool_}


def read_safetensors(path):
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        lo, hi = meta["data_offsets"]
        data = np.frombuffer(raw[8 + n + lo:8 + n + hi], dtype=ST_DTYPE[meta["dtype"]])
        out[name] = data.reshape(meta["shape"])
    return out


# ---------------------------------------------------------------------------------------------
# ORT log parsing.

LINE = re.compile(r"\[(?P<sev>[VIWEF]):onnxruntime:(?P<logid>[^,]*), (?P<src>[^ ]+) (?P<fn>\w+)\] (?P<msg>.*)")


def parse_log(text):
    """-> {logid: {"placed": {ep: [(op, node)]}, "no_kernel": set(node), "forced_cpu": set(node),
    "transformers": Counter(name)}}. Lines without a session logid (ORT's default logger) are
    attributed to the most recent session logid seen."""
    sessions = defaultdict(lambda: {"placed": defaultdict(list), "no_kernel": set(), "forced_cpu": set(),
                                    "transformers": Counter()})
    current, placing_on = "", None
    for line in text.splitlines():
        m = LINE.search(line)
        if not m:
            continue
        logid, msg = m["logid"], m["msg"]
        if logid:
            current = logid
        s = sessions[current]
        if m["fn"] == "VerifyEachNodeIsAssignedToAnEp":
            p = re.match(r"\s*(All nodes|Node\(s\)) placed on \[(\w+)\]", msg)
            if p:
                placing_on = p[2]
                s["placed"][placing_on]
                if p[1] == "All nodes":  # no node list follows
                    s["all_on"] = placing_on
                continue
            n = re.match(r"\s+(\S+) \((.*)\)$", msg)
            if n and placing_on:
                s["placed"][placing_on].append((n[1], n[2]))
            continue
        placing_on = None
        k = re.match(r"webgpu kernel not found in registries for Op type: (\S+) node name: (.*)", msg)
        if k:
            s["no_kernel"].add(k[2].strip())
        f = re.match(r"ORT optimization- Force fallback to CPU execution for node: (.*?) because", msg)
        if f:
            s["forced_cpu"].add(f[1].strip())
        if "cannot be used with this model" in msg:
            s["declined"] = msg
        t = re.match(r"GraphTransformer (\S+) modified: 1", msg)
        if t:
            s["transformers"][t[1]] += 1
    return sessions


def merged(sessions):
    """One child's sessions as one (a package child opens one session; lines ORT's default
    logger wrote before the session's first line have no logid)."""
    out = {"placed": defaultdict(list), "no_kernel": set(), "forced_cpu": set(), "transformers": Counter()}
    for s in sessions.values():
        for ep, nodes in s["placed"].items():
            out["placed"][ep].extend(nodes)
        out["no_kernel"] |= s["no_kernel"]
        out["forced_cpu"] |= s["forced_cpu"]
        out["transformers"] += s["transformers"]
    return out


def placement_of(session_log, node_name=None):
    if session_log.get("all_on"):
        return session_log["all_on"]
    for ep, nodes in session_log["placed"].items():
        if node_name is None or any(n == node_name for _, n in nodes):
            return ep
    return None


# ---------------------------------------------------------------------------------------------
# Child processes. Their stderr (ORT's log) goes to a file the parent parses.

def child_env():
    env = dict(os.environ)
    lvp = "/usr/share/vulkan/icd.d/lvp_icd.json"
    if "VK_ICD_FILENAMES" not in env and Path(lvp).exists():
        env["VK_ICD_FILENAMES"] = lvp
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    return env


def run_child(args, log_path):
    with open(log_path, "w") as log:
        p = subprocess.run([sys.executable, __file__, *args], stdout=subprocess.PIPE, stderr=log,
                           text=True, env=child_env())
    text = Path(log_path).read_text(errors="replace")
    try:
        result = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        tail = "\n".join(text.splitlines()[-5:])
        result = {"error": f"child exited {p.returncode} without a result; log tail:\n{tail}"}
    return result, text


def session(model, logid, config=None, optimize=True, provider=EP):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 0
    so.log_verbosity_level = 0
    so.logid = logid
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    for k, v in (config or {}).items():
        so.add_session_config_entry(k, v)
    s = ort.InferenceSession(model, so, providers=[provider])
    if provider not in s.get_providers():
        raise RuntimeError(f"{provider} not active: {s.get_providers()}")
    return s


def quiet_run(s, feeds):
    import onnxruntime as ort
    ro = ort.RunOptions()
    ro.log_severity_level = 3
    return s.run(None, feeds, ro)


def child_package(pkg, fixture, dtype, int64, provider=EP):
    """Prefill, decode and short prefill of one package; prints max abs diffs as JSON."""
    import onnxruntime as ort
    ort.set_default_logger_severity(0)
    ref = read_safetensors(Path(fixture) / "reference.safetensors")
    s = session(str(Path(pkg) / "model.onnx"), "package", INT64_CONFIG if int64 else None, provider=provider)
    names = [i.name for i in s.get_inputs()]
    if "last_hidden_state" in ref:
        # An encoder: the reference's batch (padded rows included) in one run.
        outs = dict(zip([o.name for o in s.get_outputs()], quiet_run(s, {n: ref[n].astype(np.int64) for n in names})))
        got = outs["last_hidden_state"].astype(np.float32)
        print(json.dumps({"hidden": float(np.max(np.abs(got - ref["last_hidden_state"].astype(np.float32))))}))
        return
    past = [i for i in s.get_inputs() if i.name.startswith("past_key_values.")]
    outs = [o.name for o in s.get_outputs()]
    fdt = NP[dtype]

    def feeds(ids, pos, cache):
        f = {"input_ids": ids, "attention_mask": np.ones((1, pos[0, -1] + 1), np.int64)}
        if "position_ids" in names:
            f["position_ids"] = pos
        for p in past:
            kv, hd = p.shape[1], p.shape[3]
            f[p.name] = cache[p.name.replace("past_key_values", "present")] if cache else np.zeros((1, kv, 0, hd), fdt)
        return f

    def diff(got, want):
        return float(np.max(np.abs(got.astype(np.float32) - want.astype(np.float32))))

    ids = ref["input_ids"]
    seq = ids.shape[1]
    prefill = dict(zip(outs, quiet_run(s, feeds(ids, np.arange(seq, dtype=np.int64)[None], None))))
    result = {"prefill": diff(prefill["logits"], ref["logits"])}
    result["present"] = max(diff(prefill[k][:, :, -ref[k].shape[2]:], ref[k]) for k in ref if k.startswith("present."))
    decode = dict(zip(outs, quiet_run(s, feeds(ref["decode_input_ids"], np.array([[seq]], np.int64), prefill))))
    result["decode"] = diff(decode["logits"], ref["decode_logits"])
    short = ref["short_input_ids"]
    out = dict(zip(outs, quiet_run(s, feeds(short, np.arange(short.shape[1], dtype=np.int64)[None], None))))
    result["short"] = diff(out["logits"], ref["short_logits"])
    print(json.dumps(result))


# ---------------------------------------------------------------------------------------------
# Probes: one-node models. Each probe names its type constraints, the element types to try for
# each (others stay at their first candidate), and a function building (inputs, outputs, attrs)
# with input values that make the node valid to run.

FLOATS = ["f32", "f16"]
NUMBERS = ["f32", "f16", "i32", "u32", "i64"]
ALL = ["f32", "f16", "i32", "u32", "i64", "bool"]


def _rand(elem, shape, rng):
    if elem == "bool":
        return rng.random(shape) > 0.5
    if elem in ("i32", "u32", "i64", "u8"):
        return rng.integers(1, 4, size=shape).astype(NP[elem])
    return (rng.random(shape) + 0.5).astype(NP[elem])


def _ints(elem, values):
    return np.array(values, dtype=NP[elem])


def _unary(t):
    x = ("x", t["T"], [2, 4], None)
    return [x], [("y", t["T"], [2, 4])], {}


def _binary(t):
    return [("a", t["T"], [2, 4], None), ("b", t["T"], [2, 4], None)], [("c", t["T"], [2, 4])], {}


def _compare(t):
    return [("a", t["T"], [2, 4], None), ("b", t["T"], [2, 4], None)], [("c", "bool", [2, 4])], {}


def _reduce(t):
    return [("x", t["T"], [2, 4], None), ("axes", "i64", [1], _ints("i64", [1]))], [("y", t["T"], [2, 1])], {}


def _attention_4d(t):
    q = [1, 2, 3, 8]
    return ([("q", t["T1"], q, None), ("k", t["T1"], q, None), ("v", t["T1"], q, None)],
            [("y", t["T1"], q)], {})


PROBES = {  # (domain, op): (constraints {name: candidates}, builder)
    ("", "Add"): ({"T": NUMBERS}, _binary),
    ("", "Sub"): ({"T": NUMBERS}, _binary),
    ("", "Mul"): ({"T": NUMBERS}, _binary),
    ("", "Div"): ({"T": NUMBERS}, _binary),
    ("", "Pow"): ({"T": NUMBERS, "T1": NUMBERS}, lambda t: (
        [("a", t["T"], [2, 4], None), ("b", t["T1"], [2, 4], None)], [("c", t["T"], [2, 4])], {})),
    ("", "Neg"): ({"T": NUMBERS}, _unary),
    ("", "Sqrt"): ({"T": FLOATS}, _unary),
    ("", "Erf"): ({"T": FLOATS}, _unary),
    ("", "Sigmoid"): ({"T": FLOATS}, _unary),
    ("", "Tanh"): ({"T": FLOATS}, _unary),
    ("", "Sin"): ({"T": FLOATS}, _unary),
    ("", "Cos"): ({"T": FLOATS}, _unary),
    ("", "Not"): ({"T": ["bool"]}, _unary),
    ("", "Gelu"): ({"T": FLOATS}, _unary),
    ("", "Cast"): ({"T1": ALL, "T2": ALL}, lambda t: (
        [("x", t["T1"], [2, 4], None)], [("y", t["T2"], [2, 4])], {"to": ELEM[t["T2"]]})),
    ("", "Equal"): ({"T": ALL, "T1": ["bool"]}, _compare),
    ("", "Greater"): ({"T": NUMBERS, "T1": ["bool"]}, _compare),
    ("", "GreaterOrEqual"): ({"T": NUMBERS, "T1": ["bool"]}, _compare),
    ("", "Less"): ({"T": NUMBERS, "T1": ["bool"]}, _compare),
    ("", "LessOrEqual"): ({"T": NUMBERS, "T1": ["bool"]}, _compare),
    ("", "And"): ({"T": ["bool"]}, _binary),
    ("", "Or"): ({"T": ["bool"]}, _binary),
    ("", "ReduceMax"): ({"T": NUMBERS}, _reduce),
    ("", "ReduceMean"): ({"T": NUMBERS}, _reduce),
    ("", "ReduceSum"): ({"T": NUMBERS}, _reduce),
    ("", "Shape"): ({"T": ALL, "T1": ["i64"]}, lambda t: (
        [("x", t["T"], [2, 4], None)], [("y", "i64", [2])], {})),
    ("", "Reshape"): ({"T": ALL}, lambda t: (
        [("x", t["T"], [2, 4], None), ("shape", "i64", [2], _ints("i64", [4, 2]))], [("y", t["T"], ["a", "b"])], {})),
    ("", "Squeeze"): ({"T": ALL}, lambda t: (
        [("x", t["T"], [1, 4], None), ("axes", "i64", [1], _ints("i64", [0]))], [("y", t["T"], [4])], {})),
    ("", "Unsqueeze"): ({"T": ALL}, lambda t: (
        [("x", t["T"], [4], None), ("axes", "i64", [1], _ints("i64", [0]))], [("y", t["T"], [1, 4])], {})),
    ("", "Where"): ({"T": ALL, "B": ["bool"]}, lambda t: (
        [("c", "bool", [2, 4], None), ("a", t["T"], [2, 4], None), ("b", t["T"], [2, 4], None)],
        [("y", t["T"], [2, 4])], {})),
    ("", "Transpose"): ({"T": ALL}, lambda t: (
        [("x", t["T"], [2, 4], None)], [("y", t["T"], [4, 2])], {"perm": [1, 0]})),
    ("", "MatMul"): ({"T": NUMBERS}, lambda t: (
        [("a", t["T"], [2, 3], None), ("b", t["T"], [3, 4], None)], [("c", t["T"], [2, 4])], {})),
    ("", "Softmax"): ({"T": FLOATS}, lambda t: (
        [("x", t["T"], [2, 4], None)], [("y", t["T"], [2, 4])], {"axis": -1})),
    ("", "Concat"): ({"T": ALL}, lambda t: (
        [("a", t["T"], [2, 4], None), ("b", t["T"], [2, 4], None)], [("c", t["T"], [4, 4])], {"axis": 0})),
    ("", "Split"): ({"T": ALL}, lambda t: (
        [("x", t["T"], [4, 4], None), ("split", "i64", [2], _ints("i64", [2, 2]))],
        [("y0", t["T"], [2, 4]), ("y1", t["T"], [2, 4])], {"axis": 0})),
    ("", "Expand"): ({"T": ALL}, lambda t: (
        [("x", t["T"], [1, 4], None), ("shape", "i64", [2], _ints("i64", [3, 4]))], [("y", t["T"], ["a", "b"])], {})),
    ("", "Gather"): ({"T": ALL, "Tind": ["i32", "i64"]}, lambda t: (
        [("x", t["T"], [4, 3], None), ("i", t["Tind"], [2], _ints(t["Tind"], [3, 0]))], [("y", t["T"], [2, 3])],
        {"axis": 0})),
    ("", "Slice"): ({"T": ALL, "Tind": ["i32", "i64"]}, lambda t: (
        [("x", t["T"], [4, 3], None), ("starts", t["Tind"], [1], _ints(t["Tind"], [1])),
         ("ends", t["Tind"], [1], _ints(t["Tind"], [3])), ("axes", t["Tind"], [1], _ints(t["Tind"], [0]))],
        [("y", t["T"], ["a", 3])], {})),
    ("", "LayerNormalization"): ({"T": FLOATS}, lambda t: (
        [("x", t["T"], [2, 4], None), ("scale", t["T"], [4], None), ("bias", t["T"], [4], None)],
        [("y", t["T"], [2, 4])], {})),
    ("", "Range"): ({"T": ["f32", "i32", "i64"]}, lambda t: (
        [("start", t["T"], [], _ints(t["T"], 0)), ("limit", t["T"], [], _ints(t["T"], 5)),
         ("delta", t["T"], [], _ints(t["T"], 1))], [("y", t["T"], ["n"])], {})),
    ("", "ScatterND"): ({"T": ALL}, lambda t: (
        [("x", t["T"], [4, 3], None), ("i", "i64", [1, 1], _ints("i64", [[2]])), ("u", t["T"], [1, 3], None)],
        [("y", t["T"], [4, 3])], {})),
    ("", "ConstantOfShape"): ({"T1": ["i64"]}, lambda t: (
        [("shape", "i64", [2], _ints("i64", [2, 3]))], [("y", "f32", ["a", "b"])], {})),
    ("", "SimplifiedLayerNormalization"): ({"T": FLOATS}, lambda t: (
        [("x", t["T"], [2, 4], None), ("scale", t["T"], [4], None)], [("y", t["T"], [2, 4])], {"axis": -1})),
    ("", "RMSNormalization"): ({"T": FLOATS}, lambda t: (
        [("x", t["T"], [2, 4], None), ("scale", t["T"], [4], None)], [("y", t["T"], [2, 4])], {})),
    ("", "RotaryEmbedding"): ({"T": FLOATS}, lambda t: (
        [("x", t["T"], [1, 2, 3, 8], None), ("cos", t["T"], [16, 4], None), ("sin", t["T"], [16, 4], None),
         ("pos", "i64", [1, 3], _ints("i64", [[0, 1, 2]]))], [("y", t["T"], [1, 2, 3, 8])], {})),
    ("", "Attention"): ({"T1": FLOATS}, _attention_4d),
    ("com.microsoft", "GroupQueryAttention"): ({"T": FLOATS, "M": ["i32"]}, lambda t: (
        [("q", t["T"], [1, 3, 32], None), ("k", t["T"], [1, 3, 16], None), ("v", t["T"], [1, 3, 16], None),
         ("pk", t["T"], [1, 2, "p", 8], np.zeros((1, 2, 0, 8), NP[t["T"]])),
         ("pv", t["T"], [1, 2, "p", 8], np.zeros((1, 2, 0, 8), NP[t["T"]])),
         ("seqlens_k", "i32", [1], _ints("i32", [2])), ("total", "i32", [], _ints("i32", 3))],
        [("y", t["T"], [1, 3, 32]), ("present_k", t["T"], [1, 2, "t", 8]), ("present_v", t["T"], [1, 2, "t", 8])],
        {"num_heads": 4, "kv_num_heads": 2})),
    ("com.microsoft", "RotaryEmbedding"): ({"T": FLOATS, "M": ["i64"]}, lambda t: (
        [("x", t["T"], [1, 3, 16], None), ("pos", "i64", [1, 3], _ints("i64", [[0, 1, 2]])),
         ("cos", t["T"], [16, 4], None), ("sin", t["T"], [16, 4], None)], [("y", t["T"], [1, 3, 16])], {})),
    ("com.microsoft", "SkipSimplifiedLayerNormalization"): ({"T": FLOATS}, lambda t: (
        [("x", t["T"], [1, 2, 4], None), ("skip", t["T"], [1, 2, 4], None), ("gamma", t["T"], [4], None)],
        [("y", t["T"], [1, 2, 4])], {})),
    ("com.microsoft", "SkipLayerNormalization"): ({"T": FLOATS}, lambda t: (
        [("x", t["T"], [1, 2, 4], None), ("skip", t["T"], [1, 2, 4], None), ("gamma", t["T"], [4], None),
         ("beta", t["T"], [4], None)], [("y", t["T"], [1, 2, 4])], {})),
    ("com.microsoft", "FastGelu"): ({"T": FLOATS}, _unary),
    ("com.microsoft", "BiasGelu"): ({"T": FLOATS}, lambda t: (
        [("a", t["T"], [2, 4], None), ("b", t["T"], [4], None)], [("c", t["T"], [2, 4])], {})),
    ("com.microsoft", "Gelu"): ({"T": FLOATS}, _unary),
    ("com.microsoft", "QuickGelu"): ({"T": FLOATS}, _unary),
    ("com.microsoft", "MatMulNBits"): ({"T1": FLOATS, "T2": ["u8"]}, lambda t: (
        [("a", t["T1"], [1, 32], None), ("b", "u8", [8, 1, 16], None), ("scales", t["T1"], [8], None)],
        [("y", t["T1"], [1, 8])], {"K": 32, "N": 8, "bits": 4, "block_size": 32})),
    # 8-bit uint8 rows, one scale per 16 values along the last axis, as the quantize step
    # writes an embedding table (docs/quantization.md); the values are not checked here.
    ("com.microsoft", "GatherBlockQuantized"): ({"T1": ["u8"], "T2": FLOATS, "Tind": ["i32", "i64"]}, lambda t: (
        [("data", "u8", [8, 32], None), ("ids", t["Tind"], [1, 3], _ints(t["Tind"], [[0, 3, 7]])),
         ("scales", t["T2"], [8, 2], None)],
        [("y", t["T2"], [1, 3, 32])], {"bits": 8, "block_size": 16, "gather_axis": 0, "quantize_axis": 1})),
    ("com.microsoft", "MultiHeadAttention"): ({"T": FLOATS}, lambda t: (
        [("q", t["T"], [1, 3, 16], None), ("k", t["T"], [1, 3, 16], None), ("v", t["T"], [1, 3, 16], None)],
        [("y", t["T"], [1, 3, 16])], {"num_heads": 2})),
}
NOT_PROBED = {("", "If"): "needs subgraphs; lower.if_to_where removes every If from webgpu builds"}


def _tag(domain, op, binding, opset):
    return "|".join([f"probe@{opset}", domain, op] + [f"{c}={e}" for c, e in sorted(binding.items())])


def range_opsets():
    """-> {(domain, op): [opset]}: for every default-domain claim, its `since`, its `until` and the
    opset after `until` (a kernel range ends where ORT's next registration starts), probed with
    each constraint's first candidate; contrib ops have one version and are skipped."""
    out = defaultdict(set)
    for (domain, op), entries in table_claims().items():
        if domain or (domain, op) not in PROBES:
            continue
        for e in entries:
            out[(domain, op)].add(e["since"])
            if "until" in e:
                out[(domain, op)] |= {e["until"], e["until"] + 1}
    # Below opset 7 the EP declines the whole model (ORT's layout transformer needs 7+), so a
    # range starting lower is probed from 7.
    return {k: sorted({max(o, 7) for o in v} - {24}) for k, v in out.items()}


def probe_cases():
    """-> [(tag, domain, op, binding, opset)]: at opset 24 each constraint's candidates with the
    others at their first; then the table's range ends (range_opsets) with first candidates."""
    cases, ranges = [], range_opsets()
    for (domain, op), (constraints, _) in PROBES.items():
        seen = set()
        for name, candidates in constraints.items():
            for elem in candidates:
                binding = {c: (elem if c == name else cs[0]) for c, cs in constraints.items()}
                key = tuple(sorted(binding.items()))
                if key in seen:
                    continue
                seen.add(key)
                cases.append((_tag(domain, op, binding, 24), domain, op, binding, 24))
        first = {c: cs[0] for c, cs in constraints.items()}
        for opset in ranges.get((domain, op), []):
            cases.append((_tag(domain, op, first, opset), domain, op, first, opset))
    return cases


def child_probes(int64):
    """Opens every probe model and runs it (placement is read by the parent from the log)."""
    import onnxruntime as ort
    ort.set_default_logger_severity(0)
    rng = np.random.default_rng(0)
    results = {}
    for tag, domain, op, binding, opset in probe_cases():
        inputs, outputs, attrs = PROBES[(domain, op)][1](binding)
        model = onnx_model(domain, op, [i[:3] for i in inputs], outputs, attrs, opset)
        try:
            s = session(model, tag, INT64_CONFIG if int64 else None, optimize=False)
        except Exception as e:  # noqa: BLE001
            msg = str(e).splitlines()[0]
            results[tag] = "invalid: " + msg if "Type Error" in msg else "load error: " + msg
            continue
        feeds = {name: (value if value is not None else _rand(elem, shape, rng))
                 for name, elem, shape, value in inputs if name}
        try:
            quiet_run(s, feeds)
            results[tag] = "ran"
        except Exception as e:  # noqa: BLE001
            results[tag] = "run error: " + str(e).splitlines()[0]
    print(json.dumps(results))


# ---------------------------------------------------------------------------------------------
# Parent: fixtures.

def package_fixtures():
    """Decoders (a reference with decode logits) and encoders (one with last_hidden_state)."""
    out = []
    for d in sorted(FIXTURES.iterdir()):
        ref = d / "reference.safetensors"
        if ref.exists() and {"decode_logits", "last_hidden_state"} & set(read_safetensors(ref)):
            out.append(d)
    return out


def check_fixtures(args, work):
    rows = []
    for fixture in package_fixtures():
        for dtype in args.dtypes:
            pkg = work / f"{fixture.name}-{dtype}"
            # A pre-quantized checkpoint's reference is its dequantized model: compared at
            # accuracy level 0 (float activations), not the default level 4 (int8 activations).
            prequant = "quantization_config" in json.loads((fixture / "config.json").read_text())
            build = subprocess.run([args.tailor, "build", "--model", str(fixture), "--ep", "webgpu",
                                    "--dtype", dtype, "--output", str(pkg), "--force",
                                    *(["--accuracy-level", "0"] if prequant else [])],
                                   capture_output=True, text=True)
            row = {"fixture": fixture.name, "dtype": dtype, "int64": args.int64}
            if build.returncode != 0:
                # The first reason the build gives (a refused required fusion says why first).
                lines = build.stderr.strip().splitlines()
                reasons = [l.strip() for l in lines if l.startswith("  - ")] or lines[-1:]
                row["error"] = "build failed: " + reasons[0]
                rows.append(row)
                print(format_row(row), flush=True)
                continue
            child = ["--child-package", str(pkg), str(fixture), dtype] + (["--int64"] if args.int64 else [])
            result, log = run_child(child, work / f"{fixture.name}-{dtype}.log")
            row.update(result)
            s = merged(parse_log(log))
            if s["placed"]:
                cpu = s["placed"].get("CPUExecutionProvider", [])
                row["cpu_nodes"] = [[op, name, "no webgpu kernel" if name in s["no_kernel"] else
                                     "ORT put it on CPU" if name in s["forced_cpu"] else "?"] for op, name in cpu]
                row["memcpy"] = sum(1 for op, _ in s["placed"].get(EP, []) if op.startswith("Memcpy"))
                row["ort_fusions"] = dict(s["transformers"])
            if args.baseline:
                base, _ = run_child(child + ["--cpu"], work / f"{fixture.name}-{dtype}-cpu.log")
                row["cpu_ep"] = base
            atol = ATOL[dtype]
            compared = [k for k in DIFFS if k in row]
            row["pass"] = "error" not in row and bool(compared) and all(row[k] <= atol for k in compared)
            rows.append(row)
            print(format_row(row), flush=True)
    return rows


# What a package's run is compared on: a decoder's logits and cache, an encoder's hidden states.
DIFFS = ("prefill", "decode", "short", "present", "hidden")


def format_row(row):
    head = f"{row['fixture']:<20} {row['dtype']:<4}"
    if "error" in row:
        return f"{head} ERROR {row['error']}"
    by_op = Counter(f"{op}({why})" for op, _, why in row.get("cpu_nodes", []))
    cpu = ", ".join(f"{k} x{v}" for k, v in sorted(by_op.items())) or "none"
    nums = " ".join(f"{k} {row[k]:.2e}" for k in DIFFS if k in row)
    line = f"{head} cpu: {cpu} | memcpy {row.get('memcpy', '?')} | {nums} | {'PASS' if row['pass'] else 'FAIL'}"
    base = row.get("cpu_ep")
    if base:
        line += " | same package on CPU EP: " + (base["error"] if "error" in base else
                                                 " ".join(f"{k} {base[k]:.2e}" for k in DIFFS if k in base))
    return line


# ---------------------------------------------------------------------------------------------
# Parent: probes against the table.

def table_claims():
    """-> {(domain, op): [claim dict]} from webgpu.toml."""
    table = tomllib.loads(TABLE.read_text())
    claims = defaultdict(list)
    for domain, ops in table.get("ops", {}).items():
        for op, entries in ops.items():
            claims[("" if domain == "ai.onnx" else domain, op)].extend(entries)
    return claims


def is_fallback(entry):
    """A CPU-fallback entry of webgpu.toml: `host = true` (the EP has no kernel)."""
    return bool(entry.get("host", False))


def accepts(entry, binding, opset):
    """ORT's kernel matching as ep-sets' claims() does it: the opset in range, and every
    constraint the entry lists contains the bound type (unlisted constraints are not checked)."""
    if not entry["since"] <= opset <= entry.get("until", 10**9):
        return False
    return all(t in entry[c] for c, t in binding.items() if c in entry)


def check_probes(work):
    """-> (report lines, the contradicted claims, {(tag, int64): state})."""
    cases = probe_cases()
    observed = {}
    for int64 in (False, True):
        result, log = run_child(["--child-probes"] + (["--int64"] if int64 else []),
                                work / f"probes{'-int64' if int64 else ''}.log")
        if "error" in result and len(result) == 1:
            sys.exit(f"probe child failed: {result['error']}")
        sessions = parse_log(log)
        for tag, *_ in cases:
            outcome = result.get(tag, "missing")
            s = sessions.get(tag)
            ep = placement_of(s, "probe") if s else None
            if outcome.startswith("invalid"):
                state = "invalid"  # not a valid ONNX model for these types (schema)
            elif ep == EP:
                state = "webgpu" if outcome == "ran" else f"webgpu but {outcome}"
            elif s and "probe" in s["no_kernel"]:
                state = "no kernel"
            elif s and s.get("declined"):
                state = "EP declined the model"
            elif ep:
                state = f"placed on {ep}"
            else:
                state = outcome
            observed[(tag, int64)] = state
    claims = table_claims()
    lines, contradicted = [], []

    def judge(entries, binding, opset, state, what):
        webgpu = any(accepts(e, binding, opset) for e in entries if not is_fallback(e))
        cpu = any(accepts(e, binding, opset) for e in entries if is_fallback(e))
        if webgpu and state != "webgpu":
            contradicted.append(what)
            return " CONTRADICTS TABLE"
        if cpu and not webgpu:
            if state == "webgpu":
                contradicted.append(what + " (CPU-fallback entry)")
                return " CONTRADICTS TABLE (its CPU-fallback entry)"
            return " (CPU fallback, as the table says)"
        if state == "webgpu" and not webgpu:
            return " (not claimed)"
        return ""

    for (domain, op), (constraints, _) in PROBES.items():
        entries = claims.get((domain, op), [])
        name = f"{domain + ':' if domain else ''}{op}"
        if not entries:
            name += " (not in table)"
        for c, candidates in constraints.items():
            per_type = []
            for elem in candidates:
                binding = {k: (elem if k == c else cs[0]) for k, cs in constraints.items()}
                tag = _tag(domain, op, binding, 24)
                d, i = observed[(tag, False)], observed[(tag, True)]
                if d == "invalid":
                    continue
                mark = judge(entries, binding, 24, d, f"{name} {c}={elem} @24")
                extra = f" [enableInt64: {i}]" if i != d else ""
                per_type.append(f"{elem} {d}{extra}{mark}")
            if per_type:
                lines.append(f"{name:<45} {c:<5} " + "; ".join(per_type))
        first = {k: cs[0] for k, cs in constraints.items()}
        for opset in range_opsets().get((domain, op), []):
            d = observed[(_tag(domain, op, first, opset), False)]
            mark = judge(entries, first, opset, d, f"{name} @{opset}")
            lines.append(f"{name:<45} opset {opset}: {d}{mark}")
    for (domain, op), why in NOT_PROBED.items():
        lines.append(f"{domain + ':' if domain else ''}{op:<45} not probed: {why}")
    return lines, contradicted, observed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tailor", default=str(REPO / "target" / "release" / "tailor"))
    ap.add_argument("--workdir", default="/tmp/tailor-webgpu-check")
    ap.add_argument("--dtypes", nargs="+", default=["f32", "f16"])
    ap.add_argument("--int64", action="store_true", help="set ep.webgpuexecutionprovider.enableInt64=1")
    ap.add_argument("--probe", action="store_true", help="also probe every [[ops]] claim with one-node models")
    ap.add_argument("--no-fixtures", action="store_true")
    ap.add_argument("--baseline", action="store_true",
                    help="also run each package on this wheel's CPUExecutionProvider (same graph, CPU kernels)")
    ap.add_argument("--cpu", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", help="write every result to this file")
    ap.add_argument("--child-package", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--child-probes", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_package:
        return child_package(*args.child_package, args.int64, "CPUExecutionProvider" if args.cpu else EP)
    if args.child_probes:
        return child_probes(args.int64)

    import onnxruntime as ort
    print(f"onnxruntime {ort.__version__}, providers {ort.get_available_providers()}")
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    report, failed = {"onnxruntime": ort.__version__}, False
    if not args.no_fixtures:
        if not Path(args.tailor).exists():
            sys.exit(f"no tailor binary at {args.tailor}: cargo build --release -p builder, or --tailor PATH")
        rows = check_fixtures(args, work)
        report["fixtures"] = rows
        failed |= not all(r.get("pass") for r in rows)
    if args.probe:
        lines, contradicted, observed = check_probes(work)
        print("\nprobes (one-node models at opset 24 unless stated; default provider options, "
              "[enableInt64: ...] where that option changes the outcome):")
        print("\n".join(lines))
        print(f"{len(contradicted)} claim(s) contradicted" + (": " + ", ".join(contradicted) if contradicted else ""))
        report["probes"] = {f"{tag}{' enableInt64' if i else ''}": v for (tag, i), v in observed.items()}
        failed |= bool(contradicted)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
