"""Run one-node models on ORT's CPUExecutionProvider to confirm the cpu/default claims that
matter. usage: python verify_cpu.py   (prints one line per case, exits 1 on a failure)"""
import sys
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP, helper as h

F = {"f32": (TP.FLOAT, np.float32), "f16": (TP.FLOAT16, np.float16)}


def run(name, op, domain, opset, inputs, attrs, n_out=1):
    ins = [h.make_tensor_value_info(f"i{k}", t, s) for k, (t, s, _) in enumerate(inputs)]
    outs = [onnx.ValueInfoProto(name=f"o{k}") for k in range(n_out)]
    node = h.make_node(op, [f"i{k}" for k in range(len(inputs))], [o.name for o in outs], domain=domain, **attrs)
    imports = [h.make_opsetid("", opset if domain == "" else 24)]
    if domain:
        imports.append(h.make_opsetid(domain, opset))
    m = h.make_model(h.make_graph([node], name, ins, outs), opset_imports=imports, ir_version=10)
    try:
        s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        s.run(None, {f"i{k}": v for k, (_, _, v) in enumerate(inputs)})
        print(f"ok   {name}")
        return True
    except Exception as e:  # noqa: BLE001
        print(f"FAIL {name}: {str(e).splitlines()[0][:160]}")
        return False


def t(d, shape):
    return (F[d][0], shape, np.random.rand(*shape).astype(F[d][1]))


ok = True
for d in ["f32", "f16"]:
    ok &= run(f"RMSNormalization-23 {d}", "RMSNormalization", "", 23, [t(d, [1, 2, 8]), t(d, [8])], {})
    ok &= run(f"RotaryEmbedding-23 {d}", "RotaryEmbedding", "", 23,
              [t(d, [1, 2, 8]), t(d, [4, 2]), t(d, [4, 2]), (TP.INT64, [1, 2], np.array([[0, 1]], np.int64))],
              {"num_heads": 2})
    ok &= run(f"Attention-24 {d}", "Attention", "", 24, [t(d, [1, 2, 8]), t(d, [1, 2, 8]), t(d, [1, 2, 8])],
              {"q_num_heads": 2, "kv_num_heads": 2})
ok &= run("GroupQueryAttention f32", "GroupQueryAttention", "com.microsoft", 1,
          [t("f32", [1, 2, 16]), t("f32", [1, 2, 16]), t("f32", [1, 2, 16]), t("f32", [1, 2, 0, 8]), t("f32", [1, 2, 0, 8]),
           (TP.INT32, [1], np.array([1], np.int32)), (TP.INT32, [], np.array(2, np.int32))],
          {"num_heads": 2, "kv_num_heads": 2}, n_out=3)
ok &= run("SkipSimplifiedLayerNormalization f32", "SkipSimplifiedLayerNormalization", "com.microsoft", 1,
          [t("f32", [1, 2, 8]), t("f32", [1, 2, 8]), t("f32", [8])], {})
ok &= run("FastGelu f32", "FastGelu", "com.microsoft", 1, [t("f32", [1, 2, 8])], {})
ok &= not run("MatMul f16 (expected to fail: no kernel)", "MatMul", "", 24, [t("f16", [2, 2]), t("f16", [2, 2])], {})
print("ORT", ort.__version__)
sys.exit(0 if ok else 1)
