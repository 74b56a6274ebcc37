"""Built packages load in onnxruntime-genai and generate transformers' greedy tokens, and pass
the ONNX checker with full_check."""
import onnx
import onnxruntime_genai as og
import pytest
from safetensors.numpy import load_file

from conftest import FIXTURES

# (fixture, ep) pairs whose packages must generate the reference tokens.
GENERATION_CASES = [("tiny-llama", "default")]


@pytest.mark.parametrize("fixture,ep", GENERATION_CASES)
def test_generates_reference_greedy_tokens(build_package, fixture, ep):
    pkg = build_package(fixture, ep)
    ref = load_file(str(FIXTURES / fixture / "reference.safetensors"))
    prompt = ref["input_ids"]
    expected = ref["greedy_tokens"][0].tolist()
    model = og.Model(str(pkg))
    params = og.GeneratorParams(model)
    total = prompt.shape[1] + len(expected)
    params.set_search_options(max_length=total, min_length=total, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt)
    while not generator.is_done():
        generator.generate_next_token()
    produced = [int(t) for t in generator.get_sequence(0)[prompt.shape[1]:]]
    assert produced == expected


@pytest.mark.parametrize("fixture,ep", GENERATION_CASES)
def test_passes_the_onnx_checker(build_package, fixture, ep):
    pkg = build_package(fixture, ep)
    onnx.checker.check_model(str(pkg / "model.onnx"), full_check=True)
    model = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
    domains = {n.domain for n in model.graph.node}
    if ep == "default":
        assert domains <= {"", "ai.onnx"}, f"default packages are standard ONNX only, found {domains}"
