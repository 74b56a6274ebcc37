"""Vision-language packages through onnxruntime-genai 0.18, end to end: the package's own
processor_config.json turns the fixture's image into exactly transformers' pixel values and
token ids, and the package generates transformers' 8 greedy tokens with the image and for the
text-only prompt; an int4 build loads and generates with the image."""
import json

import numpy as np
import onnxruntime_genai as og
import pytest
from safetensors.numpy import load_file

from conftest import FIXTURES, REGISTRY, build_with

# A `text_only` fixture's vision parts are not built (tests/python/test_text_only.py).
VL_FIXTURES = [f["name"] for f in REGISTRY["fixture"] if f["kind"] == "vlm" and "text_only" not in f.get("traits", [])]
REGISTRY_TYPES = {f["name"]: f["model_type"] for f in REGISTRY["fixture"] if f["kind"] == "vlm"}
# Gemma 3's package decoder is causal (docs/models.md): its greedy tokens are the causal ones
# (on tiny-gemma3-vl they equal the bidirectional ones too).
GREEDY = {"tiny-gemma3-vl": "greedy_tokens_causal"}


def reference(fixture):
    return load_file(str(FIXTURES / fixture / "reference.safetensors")), json.loads((FIXTURES / fixture / "reference.json").read_text())


def generate(model, inputs, steps):
    params = og.GeneratorParams(model)
    prompt = inputs["input_ids"].as_numpy().shape[-1]
    params.set_search_options(do_sample=False, max_length=prompt + steps, batch_size=1)
    generator = og.Generator(model, params)
    generator.set_inputs(inputs)
    produced = []
    while len(produced) < steps and not generator.is_done():
        generator.generate_next_token()
        produced.append(int(generator.get_next_tokens()[0]))
    return produced


@pytest.mark.parametrize("ep", ["default", "cpu"])
@pytest.mark.parametrize("fixture", VL_FIXTURES)
def test_image_prompt_matches_transformers(fixture, ep, tmp_path):
    pkg = build_with(tmp_path / "pkg", fixture, ep, [])
    for part in ["vision.onnx", "embedding.onnx", "model.onnx", "processor_config.json", "genai_config.json"]:
        assert (pkg / part).is_file(), part
    ref, meta = reference(fixture)
    model = og.Model(str(pkg))
    processor = model.create_multimodal_processor()
    images = og.Images.open(str(FIXTURES / fixture / meta["image"]))
    inputs = processor(meta["prompt"], images=images)
    pixels = inputs["pixel_values"].as_numpy()
    np.testing.assert_array_equal(inputs["input_ids"].as_numpy().reshape(-1), ref["input_ids"].reshape(-1))
    assert pixels.shape[-1] == ref["pixel_values"].shape[-1]
    assert np.abs(pixels.reshape(ref["pixel_values"].shape) - ref["pixel_values"]).max() <= 1e-5
    want = ref[GREEDY.get(fixture, "greedy_tokens")].reshape(-1).tolist()
    assert generate(model, inputs, len(want)) == want


@pytest.mark.parametrize("fixture", VL_FIXTURES)
def test_text_only_prompt_matches_transformers(fixture, tmp_path):
    pkg = build_with(tmp_path / "pkg", fixture, "cpu", [])
    ref, meta = reference(fixture)
    model = og.Model(str(pkg))
    inputs = model.create_multimodal_processor()(meta["text_prompt"])
    np.testing.assert_array_equal(inputs["input_ids"].as_numpy().reshape(-1), ref["text_input_ids"].reshape(-1))
    want = ref["text_greedy_tokens"].reshape(-1).tolist()
    assert generate(model, inputs, len(want)) == want


@pytest.mark.parametrize("fixture", VL_FIXTURES)
def test_int4_package_generates_with_an_image(fixture, tmp_path):
    pkg = build_with(tmp_path / "pkg", fixture, "cpu", ["--quant", "int4"])
    report = json.loads((pkg / "build_report.json").read_text())
    assert report["model_type"] == REGISTRY_TYPES[fixture], "the checkpoint's own model_type, not its text model's"
    quantized = {p["role"]: p["quantization"] is not None for p in report["parts"]}
    assert quantized == {"vision": False, "embedding": False, "decoder": True}, quantized
    _, meta = reference(fixture)
    model = og.Model(str(pkg))
    processor = model.create_multimodal_processor()
    inputs = processor(meta["prompt"], images=og.Images.open(str(FIXTURES / fixture / meta["image"])))
    assert len(generate(model, inputs, 8)) == 8
