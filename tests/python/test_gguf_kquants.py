"""The ggml types of llama.cpp's Q2_K, Q3_K_M, Q5_K_M, Q5_1, IQ4_NL and IQ4_XS files, and a table with a min
(issue #29): tests/python/data/gguf_kquants.gguf (scripts/make_gguf_kquants.py: two llama
layers of random Q3_K, Q5_K, Q2_K, Q5_1, IQ4_NL and IQ4_XS blocks, a tied Q4_K token table)
built for cpu.

The reference is independent of the import: gguf-py (`gguf.dequantize`, the gguf package's own
decoding of every block type) dequantizes the file, the q/k rows are put back in Hugging Face's
order, and `tailor` builds that float checkpoint; the import must give the same logits (up to
the f32 rounding of the zero points) with every projection a MatMulNBits of the type's form
(ir::ggml), no float projection and the tied table gathered from the head's quantized parts.
A requantized weight (RTN int4 of the same values) is off by far more than the bound.

tests/python/data/gguf_kquants_untied.gguf (the same script) has the same layer types, an
untied Q5_K table (8-bit codes with a min) and a Q4_0 head: both keep their integers on cpu and
on `default`, with the same logits."""
import json
import subprocess
from pathlib import Path

import gguf
import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from safetensors.numpy import save_file

from conftest import prefill_logits, tailor_bin

DATA = Path(__file__).parent / "data"
FILE = DATA / "gguf_kquants.gguf"
UNTIED = DATA / "gguf_kquants_untied.gguf"
FIXTURES = Path(__file__).parent.parent / "fixtures"
# MatMulNBits form of each ggml type (ir::ggml): bits, block, float zero points (offsets).
FORMS = {"Q2_K": (4, 16, True), "Q3_K": (4, 16, False), "Q4_K": (4, 32, True), "Q5_K": (8, 32, True), "Q5_1": (8, 32, True),
         "IQ4_NL": (8, 32, False), "IQ4_XS": (8, 32, False)}
HF = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}


def run(cmd):
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{done.stderr}"
    return done


def field(reader, key):
    f = reader.fields[key]
    return f.parts[f.data[0]].tolist()[0]


def float_checkpoint(out: Path, file: Path = FILE) -> dict:
    """The file as a Hugging Face llama checkpoint of gguf-py's dequantized values; returns the
    ggml type of each family weight."""
    reader = gguf.GGUFReader(str(file))
    k = lambda name: field(reader, f"llama.{name}")  # noqa: E731
    heads, kv_heads = k("attention.head_count"), k("attention.head_count_kv")
    tensors, types = {}, {}
    for t in reader.tensors:
        # gguf-py's shape is ne (fastest first); the family's is reversed.
        shape = [int(d) for d in reversed(t.shape.tolist())]
        values = gguf.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        if t.name == "token_embd.weight":
            name = "model.embed_tokens.weight"
        elif t.name == "output_norm.weight":
            name = "model.norm.weight"
        elif t.name == "output.weight":
            name = "lm_head.weight"
        else:
            _, layer, kind, _ = t.name.split(".")
            name = f"model.layers.{layer}.{HF[kind]}.weight"
            h = {"attn_q": heads, "attn_k": kv_heads}.get(kind)
            if h:
                # llama.cpp's rows [heads, hd/2, 2] back to [heads, 2, hd/2].
                values = values.reshape(h, -1, 2, shape[1]).swapaxes(1, 2).reshape(shape)
        tensors[name] = np.ascontiguousarray(values)
        types[name] = t.tensor_type.name
    out.mkdir(parents=True)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": k("embedding_length"),
        "intermediate_size": k("feed_forward_length"), "num_hidden_layers": k("block_count"), "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "head_dim": k("rope.dimension_count"), "rms_norm_eps": float(np.float32(k("attention.layer_norm_rms_epsilon"))),
        "rope_theta": k("rope.freq_base"), "max_position_embeddings": k("context_length"), "vocab_size": k("vocab_size"),
        "tie_word_embeddings": "lm_head.weight" not in tensors, "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
        "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32",
    }
    (out / "config.json").write_text(json.dumps(config))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (out / f).write_bytes((FIXTURES / "tiny-llama" / f).read_bytes())
    return types


@pytest.fixture(scope="module")
def packages(module_tmp):
    root = module_tmp("kquants")
    checkpoint = root / "checkpoint"
    types = float_checkpoint(checkpoint)
    out = {"types": types}
    for name, model, flags in [("import", FILE, ["--accuracy-level", "1"]), ("float", checkpoint, []),
                               ("rtn", checkpoint, ["--quant", "int4", "--accuracy-level", "1"]),
                               ("portable", FILE, [])]:
        out[name] = root / name
        ep = "default" if name == "portable" else "cpu"
        run([tailor_bin(), "build", "--model", model, "--output", out[name], "--ep", ep, *flags])
    return out


def test_logits_equal_the_float_build_of_gguf_pys_values(packages):
    ids = np.array([[1, 37, 5, 211, 90, 402, 17, 3, 300, 64, 128, 255]], dtype=np.int64)
    want = prefill_logits(packages["float"], ids)
    got = prefill_logits(packages["import"], ids)
    diff = np.abs(got - want).max()
    scale = np.abs(want).max()
    assert diff <= 1e-4 * max(1.0, scale), f"max |logit difference| {diff} (logits up to {scale})"
    # The bound tells a requantized model apart: RTN int4 of the same values.
    rtn = np.abs(prefill_logits(packages["rtn"], ids) - want).max()
    assert rtn > 100 * max(diff, 1e-6), f"RTN int4 differs by {rtn}, the import by {diff}"


def test_every_projection_keeps_its_form_and_the_table_is_gathered(packages):
    model = onnx.load(str(packages["import"] / "model.onnx"))
    inits = {i.name: i for i in model.graph.initializer}
    types = packages["types"]
    nodes = {}
    for n in model.graph.node:
        if n.op_type == "MatMulNBits":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            nodes[n.input[1].removesuffix("/quant/data")] = (attrs["bits"], attrs["block_size"], len(n.input) > 3 and bool(n.input[3]))
    for layer in range(2):
        for proj in ("self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
            name = f"model.layers.{layer}.{proj}.weight"
            # gate/up may be packed into one weight when alike.
            key = name if name in nodes else f"model.layers.{layer}.mlp.gate_proj.weight/packed_weight"
            bits, block, offsets = FORMS[types[name]]
            assert nodes.get(key, (None,))[:2] == (bits, block), f"{name} ({types[name]}): {nodes.get(key)}"
            assert (f"{key}/quant/offsets" in inits) == offsets, f"{name}: offsets"
            # Float zero points are never MatMulNBits' zero_points input (ORT 1.32's CPU kernel
            # has no fast path for them): they are offsets.
            assert not nodes[key][2], f"{name}: zero_points input"
        # q/k/v are alike in both layers: one packed MatMulNBits.
        qkv = f"model.layers.{layer}.self_attn.q_proj.weight/packed_weight"
        bits, block, _ = FORMS[types[f"model.layers.{layer}.self_attn.q_proj.weight"]]
        assert nodes.get(qkv, (None,))[:2] == (bits, block), f"layer {layer} q/k/v: {nodes}"
    # The tied head: Q4_K, 4 bits, block 32, offsets; the table's rows gathered from its codes
    # by GatherBlockQuantized (symmetric), the rows' offsets added after it.
    head = "model.embed_tokens.weight"
    assert nodes.get(head, (None,))[:2] == (4, 32), nodes
    big_float = [i.name for i in model.graph.initializer if i.data_type == onnx.TensorProto.FLOAT and "/quant/" not in i.name and np.prod(i.dims) >= 128 * 256]
    assert not big_float, big_float
    gathers = [n for n in model.graph.node if n.op_type == "GatherBlockQuantized" and n.input[0] == f"{head}/quant/data"]
    assert len(gathers) == 1, "the embedding gathers the head's codes"
    offsets = [n for n in model.graph.node if n.op_type == "Gather" and n.input[0] == f"{head}/quant/offsets"]
    assert len(offsets) == 1, "and the rows' offsets"
    report = json.loads((packages["import"] / "build_report.json").read_text())
    q = report["parts"][0]["quantization"]
    assert not report["warnings"], report["warnings"]
    assert all("dequantization" not in k["why"] for k in q["kept_float"]), q["kept_float"]
    sources = {t["weight"]: t["source"] for t in q["tensors"]}
    assert sources[head] == "gguf:Q4_K", sources
    assert sources["model.layers.0.mlp.down_proj.weight"] == "gguf:Q5_1", sources
    assert sources["model.layers.1.mlp.down_proj.weight"] == "gguf:IQ4_XS", sources


def test_codes_are_the_files(packages):
    """Q3_K's codes: the file's 3-bit values q (-4..3) plus 8, decoded here from the block
    layout (llama.cpp's dequantize_row_q3_K) independently of the import, for layer 1's
    o_proj (not permuted, not packed)."""
    reader = gguf.GGUFReader(str(FILE))
    t = next(t for t in reader.tensors if t.name == "blk.1.attn_output.weight")
    raw = np.asarray(t.data, dtype=np.uint8).reshape(-1, 110)
    hmask, qs = raw[:, 0:32], raw[:, 32:96]
    q = np.zeros((raw.shape[0], 256), np.int32)
    for h in range(2):
        for g in range(4):
            low = (qs[:, 32 * h:32 * h + 32] >> (2 * g)) & 3
            high = (hmask >> (4 * h + g)) & 1
            q[:, 128 * h + 32 * g:128 * h + 32 * g + 32] = low.astype(np.int32) - 4 * (1 - high.astype(np.int32))
    rows = int(np.prod(t.shape)) // 256
    want = q.reshape(rows, -1) + 8
    model = onnx.load(str(packages["import"] / "model.onnx"))
    b = next(numpy_helper.to_array(i) for i in model.graph.initializer if i.name == "model.layers.1.self_attn.o_proj.weight/quant/data")
    data = b.reshape(b.shape[0], -1)
    codes = np.stack([data & 15, data >> 4], axis=-1).reshape(b.shape[0], -1)
    assert np.array_equal(codes.astype(np.int32), want)


def test_the_portable_package_keeps_the_integers_in_standard_onnx(packages):
    """`--ep default`: every projection is a blocked DequantizeLinear + MatMul of the file's
    codes; the types with a min (Q2_K, Q4_K, Q5_K, Q5_1) read them against the mid point and add
    their per-block float offsets after the MatMul (ReduceSum of the activation's blocks,
    MatMul, Add: the offset form in standard ops). The tied Q4_K table keeps its integers too:
    ONNX Gather cannot read 4 bits, so its rows are gathered as bytes of a uint8 view of the
    head's int4 data (one copy) and decoded with standard ops, offsets added; nothing is kept
    float. Logits equal the float build's with ONNX Runtime's fused DequantizeLinear + MatMul
    at accuracy level 0."""
    pkg = packages["portable"]
    model = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
    assert not [n.op_type for n in model.graph.node if n.domain not in ("", "ai.onnx")]
    inits = {i.name for i in model.graph.initializer}
    types = packages["types"]
    for layer in range(2):
        for proj in ("self_attn.o_proj", "mlp.down_proj"):
            name = f"model.layers.{layer}.{proj}.weight"
            assert f"{name}/quant/data" in inits, name
            assert (f"{name}/quant/offsets" in inits) == FORMS[types[name]][2], f"{name} ({types[name]}): offsets"
    head = "model.embed_tokens.weight"
    table = [n for n in model.graph.node if n.op_type == "Gather" and n.input[0] == f"{head}/quant/data/bytes"]
    assert len(table) == 1, [n.input for n in model.graph.node if n.op_type == "Gather"]
    assert {f"{head}/quant/offsets/flat", f"{head}/quant/data"} <= inits, sorted(i for i in inits if i.startswith(head))
    big_float = [i.name for i in model.graph.initializer if i.data_type == onnx.TensorProto.FLOAT and "/quant/" not in i.name and np.prod(i.dims) >= 128 * 256]
    assert not big_float, big_float
    report = json.loads((pkg / "build_report.json").read_text())
    q = report["parts"][0]["quantization"]
    assert not q["kept_float"] and not report["warnings"], (q["kept_float"], report["warnings"])
    assert {t["weight"]: t["source"] for t in q["tensors"]}[head] == "gguf:Q4_K"
    ids = np.array([[1, 37, 5, 211, 90, 402, 17, 3, 300, 64, 128, 255]], dtype=np.int64)
    got = prefill_logits(pkg, ids, {"session.qdq_matmulnbits_accuracy_level": "0"})
    want = prefill_logits(packages["float"], ids)
    diff, scale = np.abs(got - want).max(), np.abs(want).max()
    assert diff <= 1e-4 * max(1.0, scale), f"max |logit difference| {diff} (logits up to {scale})"


def test_an_untied_table_with_a_min_and_a_q4_0_head_keep_their_integers(tmp_path):
    """The untied file: a Q5_K table (8-bit codes, float offsets) and a Q4_0 head. On cpu the
    table is gathered from its MatMulNBits parts with its offsets; on `default` its rows are
    read from the DequantizeLinear parts (8-bit codes through a flat Gather and a Cast, plus
    the gathered offsets) and the head is a 4-bit DequantizeLinear + MatMul. Nothing is float
    and both give the logits of the float build of gguf-py's values."""
    checkpoint = tmp_path / "checkpoint"
    types = float_checkpoint(checkpoint, UNTIED)
    assert (types["model.embed_tokens.weight"], types["lm_head.weight"]) == ("Q5_K", "Q4_0"), types
    ids = np.array([[1, 37, 5, 211, 90, 402, 17, 3, 300, 64, 128, 255]], dtype=np.int64)
    float_pkg = tmp_path / "float"
    run([tailor_bin(), "build", "--model", checkpoint, "--output", float_pkg, "--ep", "cpu"])
    want = prefill_logits(float_pkg, ids)
    table = "model.embed_tokens.weight"
    for ep, flags, config in [("cpu", ["--accuracy-level", "1"], None), ("default", [], {"session.qdq_matmulnbits_accuracy_level": "0"})]:
        pkg = tmp_path / ep
        run([tailor_bin(), "build", "--model", UNTIED, "--output", pkg, "--ep", ep, *flags])
        report = json.loads((pkg / "build_report.json").read_text())
        q = report["parts"][0]["quantization"]
        assert not q["kept_float"] and not report["warnings"], (ep, q["kept_float"], report["warnings"])
        sources = {t["weight"]: t["source"] for t in q["tensors"]}
        assert (sources[table], sources["lm_head.weight"]) == ("gguf:Q5_K", "gguf:Q4_0"), sources
        model = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
        big_float = [i.name for i in model.graph.initializer if i.data_type == onnx.TensorProto.FLOAT and "/quant/" not in i.name and np.prod(i.dims) >= 128 * 256]
        assert not big_float, (ep, big_float)
        if ep == "default":
            assert not [n.op_type for n in model.graph.node if n.domain not in ("", "ai.onnx")]
            gathers = {n.input[0] for n in model.graph.node if n.op_type == "Gather"}
            assert {f"{table}/quant/data/flat", f"{table}/quant/scales/flat", f"{table}/quant/offsets/flat"} <= gathers, sorted(gathers)
        got = prefill_logits(pkg, ids, config)
        diff, scale = np.abs(got - want).max(), np.abs(want).max()
        assert diff <= 1e-4 * max(1.0, scale), f"{ep}: max |logit difference| {diff} (logits up to {scale})"
