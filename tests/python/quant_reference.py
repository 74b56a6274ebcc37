"""ONNX Runtime's own weight-only quantizer, as the reference for ir::quant
(tests/tests/quant_bytes.rs runs this with the interpreter in TAILOR_PYTHON).

    quant_reference.py quantize DIR
        DIR/cases.json lists cases {name, k, n, bits, block_size, symmetric, dtype ("f32"|"f16")};
        DIR/<name>.weight.bin holds the [K, N] weight (little-endian, of that dtype). For each case
        this builds a one-MatMul model, runs onnxruntime.quantization's MatMulNBitsQuantizer
        (DefaultWeightOnlyQuantConfig, QOperator format) on it and writes the initializers of
        the resulting MatMulNBits node to <name>.ort.B.bin, .ort.scales.bin and (asymmetric)
        .ort.zero_points.bin, and the node's attributes to <name>.ort.json.

    quant_reference.py quantize_qdq DIR
        The same cases (4-bit only) through MatMulNBitsQuantizer in QDQ format
        (quantize_qdq_matmul_4bits): the DequantizeLinear node's initializers as stored, packed
        4-bit values included, to <name>.qdq.x.bin, .qdq.scale.bin and (asymmetric)
        .qdq.zero_point.bin, and {dtype, dims} of each with the node's attributes to
        <name>.qdq.json.

    quant_reference.py run DIR
        DIR/run.json lists models to run on the CPU EP with one f32 input from DIR; each is
        {name, kind: "matmulnbits" | "dequantize_linear" | "gather_block_quantized", ...}.
        Outputs are written to DIR/<name>.out.bin (f32). See quant_bytes.rs for the fields.

Exits non-zero with a message on any failure: the Rust test fails with it, never skips.
"""

import json
import logging
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

NP = {"f32": np.float32, "f16": np.float16}
ONNX_FLOAT = {"f32": TensorProto.FLOAT, "f16": TensorProto.FLOAT16}


def model(nodes, inputs, outputs, inits, opset=21):
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    ops = [helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=ops, ir_version=10)


def one_matmul(weight, dtype):
    k, n = weight.shape
    return model(
        [helper.make_node("MatMul", ["A", "W"], ["Y"], name="mm")],
        [helper.make_tensor_value_info("A", ONNX_FLOAT[dtype], [1, k])],
        [helper.make_tensor_value_info("Y", ONNX_FLOAT[dtype], [1, n])],
        [numpy_helper.from_array(weight, "W")],
    )


def quantize(d: Path):
    logging.disable(logging.WARNING)
    cases = json.loads((d / "cases.json").read_text())
    for c in cases:
        k, n, dtype = c["k"], c["n"], c["dtype"]
        w = np.fromfile(d / f"{c['name']}.weight.bin", dtype=NP[dtype]).reshape(k, n)
        cfg = DefaultWeightOnlyQuantConfig(block_size=c["block_size"], is_symmetric=c["symmetric"], bits=c["bits"])
        q = MatMulNBitsQuantizer(one_matmul(w, dtype), algo_config=cfg)
        q.process()
        m = q.model.model
        nodes = [x for x in m.graph.node if x.op_type == "MatMulNBits"]
        if len(nodes) != 1:
            raise SystemExit(f"{c['name']}: the quantizer made {[x.op_type for x in m.graph.node]}, not one MatMulNBits")
        node = nodes[0]
        inits = {i.name: i for i in m.graph.initializer}
        names = ["B", "scales", "zero_points"]
        for role, name in zip(names, node.input[1:]):
            if name:
                numpy_helper.to_array(inits[name]).tofile(d / f"{c['name']}.ort.{role}.bin")
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        shapes = {role: list(inits[name].dims) for role, name in zip(names, node.input[1:]) if name}
        (d / f"{c['name']}.ort.json").write_text(json.dumps({"attrs": attrs, "shapes": shapes}))
        onnx.save(m, str(d / f"{c['name']}.ort.onnx"))


def quantize_qdq(d: Path):
    from onnxruntime.quantization import QuantFormat

    logging.disable(logging.WARNING)
    cases = json.loads((d / "cases.json").read_text())
    for c in cases:
        k, n, dtype = c["k"], c["n"], c["dtype"]
        w = np.fromfile(d / f"{c['name']}.weight.bin", dtype=NP[dtype]).reshape(k, n)
        cfg = DefaultWeightOnlyQuantConfig(block_size=c["block_size"], is_symmetric=c["symmetric"], bits=c["bits"],
                                           quant_format=QuantFormat.QDQ)
        q = MatMulNBitsQuantizer(one_matmul(w, dtype), algo_config=cfg)
        q.process()
        m = q.model.model
        nodes = [x for x in m.graph.node if x.op_type == "DequantizeLinear"]
        if len(nodes) != 1:
            raise SystemExit(f"{c['name']}: the QDQ quantizer made {[x.op_type for x in m.graph.node]}, not one DequantizeLinear")
        node = nodes[0]
        inits = {i.name: i for i in m.graph.initializer}
        meta = {"attrs": {a.name: helper.get_attribute_value(a) for a in node.attribute}}
        for role, name in zip(["x", "scale", "zero_point"], node.input):
            t = inits[name]
            raw = t.raw_data if t.raw_data else numpy_helper.to_array(t).tobytes()
            (d / f"{c['name']}.qdq.{role}.bin").write_bytes(raw)
            meta[role] = {"dtype": t.data_type, "dims": list(t.dims)}
        (d / f"{c['name']}.qdq.json").write_text(json.dumps(meta))


def tensor(d: Path, spec):
    """An initializer from {name, file, dtype (onnx enum), dims}; 4-bit types are stored packed."""
    raw = (d / spec["file"]).read_bytes()
    return helper.make_tensor(spec["name"], spec["dtype"], spec["dims"], raw, raw=True)


def run(d: Path):
    jobs = json.loads((d / "run.json").read_text())
    for j in jobs:
        x = np.fromfile(d / j["input_file"], dtype=np.float32).reshape(j["input_dims"])
        if j["kind"] == "quantizer_model":
            m = onnx.load(str(d / j["model"]))
        else:
            inits = [tensor(d, t) for t in j["initializers"]]
            if j["kind"] == "matmulnbits":
                attrs = j["attrs"]
                node = helper.make_node("MatMulNBits", ["A"] + j["inputs"], ["Y"], domain="com.microsoft", **attrs)
                inp = helper.make_tensor_value_info("A", TensorProto.FLOAT, j["input_dims"])
            elif j["kind"] == "dequantize_linear":
                # Every input is an initializer; the unused graph input only keeps the run uniform.
                node = helper.make_node("DequantizeLinear", j["inputs"], ["Y"], **j["attrs"])
                inp = helper.make_tensor_value_info("A", TensorProto.FLOAT, j["input_dims"])
            elif j["kind"] == "gather_block_quantized":
                node = helper.make_node("GatherBlockQuantized", j["inputs"][:1] + ["I"] + j["inputs"][1:], ["Y"],
                                        domain="com.microsoft", **j["attrs"])
                inp = helper.make_tensor_value_info("I", TensorProto.INT64, j["input_dims"])
                x = x.astype(np.int64)
            else:
                raise SystemExit(f"unknown job kind {j['kind']}")
            out = helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)
            m = model([node], [inp], [out], inits)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.log_severity_level = 3
        s = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        name = s.get_inputs()[0].name
        feeds = {name: x} if m.graph.input else {}
        y = s.run(None, feeds)[0]
        np.ascontiguousarray(y, dtype=np.float32).tofile(d / f"{j['name']}.out.bin")


def main():
    modes = {"quantize": quantize, "quantize_qdq": quantize_qdq, "run": run}
    if len(sys.argv) != 3 or sys.argv[1] not in modes:
        raise SystemExit(__doc__)
    modes[sys.argv[1]](Path(sys.argv[2]))
    print(f"onnxruntime {ort.__version__}: {sys.argv[1]} done", flush=True)


if __name__ == "__main__":
    main()
