"""Multi-token prediction layers stored after a decoder's layers (Hy3's `model.layers.{L}`, Mellum's `mtp.*`,
DeepSeek-V3's and GLM-4.5's): transformers does not load them and generation does not run them,
so a build records them as unused and the package is the decoder's; a layer beyond the count
the config gives (`num_nextn_predict_layers`, the family's default when absent) is not one of
them and fails the build by name, as any tensor the graph does not account for."""
import json
import shutil

import numpy as np
import onnx
from safetensors.numpy import load_file, save_file

from conftest import FIXTURES, assert_reference_logits, build_folder


def with_extra_layers(tmp_path, fixture, extra, config_keys=None):
    """A copy of `fixture` whose checkpoint holds `extra` more layers after its last one (its
    last layer's tensors, perturbed), config.json updated with `config_keys`."""
    src = FIXTURES / fixture
    dst = tmp_path / fixture
    shutil.copytree(src, dst)
    config = json.loads((src / "config.json").read_text())
    layers = config["num_hidden_layers"]
    tensors = load_file(str(src / "model.safetensors"))
    last = f"model.layers.{layers - 1}."
    rng = np.random.default_rng(7)
    for k in range(extra):
        for name, value in list(tensors.items()):
            if name.startswith(last):
                moved = f"model.layers.{layers + k}." + name[len(last):]
                tensors[moved] = (value + rng.standard_normal(value.shape).astype(value.dtype) * 0.1).astype(value.dtype)
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    config.update(config_keys or {})
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    return dst, layers


def test_hy_v3_prediction_layer_is_left_out(tmp_path):
    model, layers = with_extra_layers(tmp_path, "tiny-hy_v3", 1)
    done = build_folder(model, tmp_path / "pkg")
    assert done.returncode == 0, done.stderr
    # The fixture's logits: the extra layer is not run.
    assert_reference_logits(tmp_path / "pkg", "tiny-hy_v3")
    graph = onnx.load(str(tmp_path / "pkg" / "model.onnx"), load_external_data=False).graph
    assert not [i.name for i in graph.initializer if i.name.startswith(f"model.layers.{layers}.")]

def test_a_layer_beyond_the_prediction_count_fails_by_name(tmp_path):
    # Two layers after the decoder's: the first is the one prediction layer Hy3 has by default,
    # the second nothing the family knows.
    model, layers = with_extra_layers(tmp_path, "tiny-hy_v3", 2)
    done = build_folder(model, tmp_path / "pkg")
    assert done.returncode != 0
    assert f"model.layers.{layers + 1}." in done.stderr, done.stderr
    assert not (tmp_path / "pkg").exists()
    # Saying there are two makes both prediction layers.
    done = build_folder(with_extra_layers(tmp_path / "two", "tiny-hy_v3", 2, {"num_nextn_predict_layers": 2})[0], tmp_path / "pkg2")
    assert done.returncode == 0, done.stderr


def test_mellum_mtp_module_is_left_out(tmp_path):
    # Mellum keeps its prediction layer under `mtp.` (transformers ignores `^mtp\.` on load).
    dst = tmp_path / "tiny-mellum"
    shutil.copytree(FIXTURES / "tiny-mellum", dst)
    tensors = load_file(str(dst / "model.safetensors"))
    tensors["mtp.layers.0.input_layernorm.weight"] = tensors["model.norm.weight"] + 1
    tensors["mtp.layers.0.self_attn.q_proj.weight"] = tensors["model.layers.0.self_attn.q_proj.weight"] * 2
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    done = build_folder(dst, tmp_path / "pkg")
    assert done.returncode == 0, done.stderr
    assert_reference_logits(tmp_path / "pkg", "tiny-mellum")
