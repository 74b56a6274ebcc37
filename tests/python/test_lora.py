"""LoRA adapters (docs/adapters.md): a base package built with `--lora`, its `.onnx_adapter`
files read back by ONNX Runtime's own reader, run through RunOptions as onnxruntime-genai binds
them, and generated with og.Adapters, against the transformers + peft references of
tests/fixtures/tiny-llama-lora."""
import json
import shutil
import subprocess

import numpy as np
import onnxruntime as ort
import onnxruntime_genai as og
import pytest
from safetensors.numpy import load_file, save_file

from conftest import FIXTURES, REGISTRY, build_with, tailor_bin

LORA_FIXTURES = [f["name"] for f in REGISTRY["fixture"] if f["kind"] == "lora"]
FIXTURE = "tiny-llama-lora"
LORA = FIXTURES / FIXTURE
META = json.loads((LORA / "lora.json").read_text())
BASE = META["base_fixture"].removeprefix("../")
ADAPTERS = sorted(META["adapters"])


def lora_flags(names=ADAPTERS):
    return [x for n in names for x in ("--lora", f"{n}={LORA / n}")]


@pytest.fixture(scope="module")
def package(module_tmp):
    """tiny-llama with both adapters, default EP, f32."""
    return build_with(module_tmp("lora") / "pkg", BASE, "default", lora_flags())


@pytest.fixture(scope="module")
def plain(module_tmp):
    return build_with(module_tmp("plain") / "pkg", BASE, "default", [])


def read_adapter(path):
    """{name: array} through ONNX Runtime's reader; copied before the reader goes away (its
    values are views into it)."""
    r = ort.AdapterFormat.read_adapter(str(path))
    out = {k: np.array(v.numpy(), copy=True) for k, v in r.get_parameters().items()}
    return r.get_format_version(), out


def expected_params(name):
    """What the adapter file must hold, from the PEFT folder: A^T, and B^T times the scaling."""
    cfg = json.loads((LORA / name / "adapter_config.json").read_text())
    r, alpha = cfg["r"], cfg["lora_alpha"]
    scaling = alpha / np.sqrt(r) if cfg.get("use_rslora") else alpha / r
    out = {}
    for k, v in load_file(LORA / name / "adapter_model.safetensors").items():
        key = k.removeprefix("base_model.model.")
        out[key] = v.T * (scaling if ".lora_B." in key else 1.0)
    return out


def test_the_fixture_is_registered_as_lora():
    assert FIXTURE in LORA_FIXTURES


@pytest.mark.parametrize("name", ADAPTERS)
def test_adapter_files_read_back_with_onnx_runtimes_reader(package, name):
    version, params = read_adapter(package / "adapters" / f"{name}.onnx_adapter")
    assert version == 1
    want = expected_params(name)
    assert sorted(params) == sorted(want)
    assert len(params) == META["adapters"][name]["tensors"]
    for k, v in want.items():
        assert params[k].dtype == np.float32 and params[k].shape == v.shape, k
        np.testing.assert_allclose(params[k], v, rtol=1e-6, atol=1e-7, err_msg=k)


def test_slots_are_graph_inputs_with_their_own_rank_and_an_empty_default(package):
    s = ort.InferenceSession(str(package / "model.onnx"), providers=["CPUExecutionProvider"])
    required = {i.name for i in s.get_inputs()}
    overridable = {i.name: i for i in s.get_overridable_initializers()}
    slots = sorted(n for n in overridable if ".lora_" in n)
    # a2 targets all seven projections of both layers: 14 slots, 28 inputs.
    assert len(slots) == 28 and not any(".lora_" in n for n in required)
    ranks = {i.shape[1] for n, i in overridable.items() if n.endswith(".lora_A.weight")}
    assert len(ranks) == 14 and all(isinstance(r, str) for r in ranks)
    report = json.loads((package / "build_report.json").read_text())
    assert {a["name"]: (a["rank"], a["scaling"], a["tensors"]) for a in report["lora"]["adapters"]} == {
        n: (META["adapters"][n]["r"], META["adapters"][n]["scaling"], META["adapters"][n]["tensors"]) for n in ADAPTERS
    }
    assert len(report["lora"]["slots"]) == 14
    assert all(f"adapters/{n}.onnx_adapter" in report["files"] for n in ADAPTERS)


def run_reference_steps(model_path, adapter, ref, n_layers):
    """Prefill then one decode step on ORT CPU with `adapter` (a file, or None) bound through
    RunOptions; returns (prefill logits, decode logits)."""
    s = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    ro = ort.RunOptions()
    if adapter is not None:
        la = ort.LoraAdapter()
        la.Load(str(adapter))
        ro.add_active_adapter(la)
    feeds = {"input_ids": ref["input_ids"], "attention_mask": ref["attention_mask"], "position_ids": ref["position_ids"]}
    for i in range(n_layers):
        for kv in ("key", "value"):
            feeds[f"past_key_values.{i}.{kv}"] = np.zeros((1, 2, 0, 16), np.float32)
    names = [o.name for o in s.get_outputs()]
    out = dict(zip(names, s.run(None, feeds, ro)))
    feeds = {"input_ids": ref["decode_input_ids"], "attention_mask": np.ones((1, 8), np.int64), "position_ids": np.array([[7]], np.int64)}
    for i in range(n_layers):
        for kv in ("key", "value"):
            feeds[f"past_key_values.{i}.{kv}"] = out[f"present.{i}.{kv}"]
    step = dict(zip(names, s.run(None, feeds, ro)))
    return out["logits"], step["logits"]


@pytest.mark.parametrize("ep", ["default", "cpu"])
@pytest.mark.parametrize("name", [None, *ADAPTERS])
def test_ort_logits_match_the_reference_with_each_adapter_bound(package, tmp_path, ep, name):
    pkg = package if ep == "default" else build_with(tmp_path / "pkg", BASE, ep, lora_flags())
    ref = load_file((LORA / name if name else FIXTURES / BASE) / "reference.safetensors")
    adapter = pkg / "adapters" / f"{name}.onnx_adapter" if name else None
    logits, decode = run_reference_steps(pkg / "model.onnx", adapter, ref, 2)
    assert np.abs(logits - ref["logits"]).max() < 1e-3
    assert np.abs(decode - ref["decode_logits"]).max() < 1e-3


def generate(model, prompt, n, adapters=None, name=None):
    params = og.GeneratorParams(model)
    total = prompt.shape[1] + n
    params.set_search_options(max_length=total, min_length=total, do_sample=False)
    g = og.Generator(model, params)
    if name is not None:
        g.set_active_adapter(adapters, name)
    g.append_tokens(prompt)
    while not g.is_done():
        g.generate_next_token()
    return [int(t) for t in g.get_sequence(0)[prompt.shape[1]:]]


def genai_ready(pkg, expected_all):
    """The eos id moved to a token no reference generates (min_length = max_length makes genai
    suppress eos, as tests/python/test_genai.py explains)."""
    config = json.loads((pkg / "genai_config.json").read_text())
    config["model"]["eos_token_id"] = min(set(range(config["model"]["vocab_size"])) - expected_all)
    (pkg / "genai_config.json").write_text(json.dumps(config))


def test_genai_generates_each_adapters_reference_switching_in_one_process(package):
    refs = {n: load_file(LORA / n / "reference.safetensors")["greedy_tokens"][0].tolist() for n in ADAPTERS}
    base = load_file(FIXTURES / BASE / "reference.safetensors")
    refs[None] = base["greedy_tokens"][0].tolist()
    genai_ready(package, {t for r in refs.values() for t in r})
    model = og.Model(str(package))
    adapters = og.Adapters(model)
    for n in ADAPTERS:
        adapters.load(str(package / "adapters" / f"{n}.onnx_adapter"), n)
    order = [None, *ADAPTERS, *reversed(ADAPTERS), None]
    for name in order:
        got = generate(model, base["input_ids"], 16, adapters, name)
        assert got == refs[name], f"adapter {name}"


def test_an_int4_base_with_float_adapters_generates(tmp_path):
    pkg = build_with(tmp_path / "pkg", BASE, "cpu", ["--quant", "int4", *lora_flags()])
    import onnx
    m = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
    ops = [n.op_type for n in m.graph.node]
    assert "MatMulNBits" in ops
    # Every LoRA MatMul reads a float32 slot input, never a quantized one.
    lora = [n for n in m.graph.node if "/lora/" in n.name and n.op_type != "Add"]
    assert lora and all(n.op_type == "MatMul" for n in lora)
    report = json.loads((pkg / "build_report.json").read_text())
    quantized = {t["weight"] for t in report["parts"][0]["quantization"]["tensors"]}
    assert not any(".lora_" in w for w in quantized)
    base = load_file(FIXTURES / BASE / "reference.safetensors")
    plain_logits, _ = run_reference_steps(pkg / "model.onnx", None, base, 2)
    # int4 blocks of 32 on a 64-wide random model move the logits by about 2 (the base's own
    # error here); with an adapter bound the error stays of that order, and the adapter moves
    # the int4 logits as much as it moves the float ones.
    base_error = np.abs(plain_logits - base["logits"]).max()
    for name in ADAPTERS:
        ref = load_file(LORA / name / "reference.safetensors")
        logits, _ = run_reference_steps(pkg / "model.onnx", pkg / "adapters" / f"{name}.onnx_adapter", ref, 2)
        assert np.abs(logits - ref["logits"]).max() < 1.5 * base_error, name
        assert np.abs(logits - plain_logits).max() > 0.3 * META_MOVE[name], name
    genai_ready(pkg, set(range(64)))
    model = og.Model(str(pkg))
    adapters = og.Adapters(model)
    adapters.load(str(pkg / "adapters" / f"{ADAPTERS[0]}.onnx_adapter"), ADAPTERS[0])
    plain = generate(model, base["input_ids"], 16)
    tuned = generate(model, base["input_ids"], 16, adapters, ADAPTERS[0])
    assert len(tuned) == 16 and tuned != plain


META_MOVE = {n: json.loads((LORA / n / "reference.json").read_text())["checks"]["max_abs_logits_vs_base"] for n in ADAPTERS}


def run_adapter_cmd(peft, pkg, name, *extra):
    return subprocess.run([str(tailor_bin()), "adapter", str(peft), "--package", str(pkg), "--name", name, *extra], capture_output=True, text=True)


def snapshot(pkg):
    return {p.relative_to(pkg): p.read_bytes() for p in sorted(pkg.rglob("*")) if p.is_file()}


def test_tailor_adapter_converts_one_more_adapter_for_a_package(tmp_path):
    pkg = build_with(tmp_path / "pkg", BASE, "default", lora_flags(["a2"]))
    done = run_adapter_cmd(LORA / "a1", pkg, "later")
    assert done.returncode == 0, done.stderr
    _, params = read_adapter(pkg / "adapters" / "later.onnx_adapter")
    want = expected_params("a1")
    assert sorted(params) == sorted(want)
    report = json.loads((pkg / "build_report.json").read_text())
    assert "adapters/later.onnx_adapter" in report["files"]
    assert [a["name"] for a in report["lora"]["adapters"]] == ["a2", "later"]
    # The package still replaces cleanly with --force (the adapters folder is its own).
    build_with(pkg, BASE, "default", ["--force", *lora_flags(["a2"])])
    assert not (pkg / "adapters" / "later.onnx_adapter").exists()


def test_an_adapter_the_slots_do_not_take_is_refused_and_nothing_is_written(tmp_path):
    pkg = build_with(tmp_path / "pkg", BASE, "default", lora_flags(["a1"]))
    before = snapshot(pkg)
    # a2 targets k_proj and the MLP, which a1's package has no slots for.
    done = run_adapter_cmd(LORA / "a2", pkg, "x")
    assert done.returncode != 0 and "mlp.down_proj.lora_A.weight" in done.stderr, done.stderr
    # Ranks of A and B disagree.
    bad = tmp_path / "bad"
    shutil.copytree(LORA / "a1", bad)
    t = load_file(bad / "adapter_model.safetensors")
    key = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"
    t[key] = np.ascontiguousarray(t[key][:, :3])
    save_file(t, bad / "adapter_model.safetensors")
    done = run_adapter_cmd(bad, pkg, "bad")
    assert done.returncode != 0 and "ranks of A and B disagree" in done.stderr and key in done.stderr, done.stderr
    # Other widths than the base's.
    wide = tmp_path / "wide"
    shutil.copytree(LORA / "a1", wide)
    t = load_file(wide / "adapter_model.safetensors")
    key = "base_model.model.model.layers.1.self_attn.v_proj.lora_A.weight"
    t[key] = np.zeros((4, 65), np.float32)
    save_file(t, wide / "adapter_model.safetensors")
    done = run_adapter_cmd(wide, pkg, "wide")
    assert done.returncode != 0 and key in done.stderr, done.stderr
    assert snapshot(pkg) == before
    # The same malformed adapter given to a build leaves no package.
    out = tmp_path / "never"
    done = subprocess.run([str(tailor_bin()), "build", "--model", str(FIXTURES / BASE), "--output", str(out), "--lora", f"bad={bad}"], capture_output=True, text=True)
    assert done.returncode != 0 and "ranks of A and B disagree" in done.stderr and not out.exists()


@pytest.mark.parametrize("key,value,word", [
    ("use_dora", True, "DoRA"),
    ("rank_pattern", {"q_proj": 8}, "`rank_pattern` entry `q_proj` gives 8"),   # the tensors are rank 4
    ("alpha_pattern", {"(?<=self_attn\\.)q_proj": 8}, "not a regular expression this tool reads"),
    ("bias", "all", "bias"),
    ("target_modules", ["q_proj"], "not in target_modules"),
    ("kasa_config", {"beta": 1e-4}, "KaSA"),
    # Trained against a base with the initial product removed, which PEFT restores on load.
    ("init_lora_weights", "pissa_niter_4", "pissa_niter_4"),
    ("init_lora_weights", "olora", "path_initial_model_for_weight_conversion"),
])
def test_adapter_options_a_slot_cannot_compute_are_refused_by_key(tmp_path, key, value, word):
    d = tmp_path / "a"
    shutil.copytree(LORA / "a1", d)
    cfg = json.loads((d / "adapter_config.json").read_text())
    cfg[key] = value
    (d / "adapter_config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    done = subprocess.run([str(tailor_bin()), "build", "--model", str(FIXTURES / BASE), "--output", str(out), "--lora", f"a={d}"], capture_output=True, text=True)
    assert done.returncode != 0 and word in done.stderr and not out.exists(), done.stderr


def test_rslora_and_some_layers_only(tmp_path):
    """rsLoRA scales by alpha/sqrt(r); layers_to_transform gives tensors for some layers only:
    the file holds those, and only that layer has slots."""
    d = tmp_path / "rs"
    d.mkdir()
    cfg = json.loads((LORA / "a2" / "adapter_config.json").read_text())
    cfg.update(use_rslora=True, layers_to_transform=[1])
    (d / "adapter_config.json").write_text(json.dumps(cfg))
    t = {k: v for k, v in load_file(LORA / "a2" / "adapter_model.safetensors").items() if ".layers.1." in k}
    save_file(t, d / "adapter_model.safetensors")
    pkg = build_with(tmp_path / "pkg", BASE, "default", ["--lora", f"rs={d}"])
    _, params = read_adapter(pkg / "adapters" / "rs.onnx_adapter")
    scaling = cfg["lora_alpha"] / np.sqrt(cfg["r"])
    assert len(params) == 14
    for k, v in t.items():
        key = k.removeprefix("base_model.model.")
        want = v.T * (scaling if ".lora_B." in key else 1.0)
        np.testing.assert_allclose(params[key], want, rtol=1e-6, atol=1e-7)
    # Equivalent to merging: the slot's output equals (x W + x A^T B^T s) on ORT.
    ref = load_file(FIXTURES / BASE / "reference.safetensors")
    with_a, _ = run_reference_steps(pkg / "model.onnx", pkg / "adapters" / "rs.onnx_adapter", ref, 2)
    without, _ = run_reference_steps(pkg / "model.onnx", None, ref, 2)
    assert np.abs(without - ref["logits"]).max() < 1e-3 and np.abs(with_a - without).max() > 1e-2


def test_targets_the_base_graph_does_not_build_are_refused_naming_the_tensor(tmp_path):
    """Phi-3 fuses q/k/v into qkv_proj: a Llama adapter's q_proj has no projection there (an
    adapter on qkv_proj itself is read: test_an_adapter_bound_equals_the_merged_model)."""
    out = tmp_path / "out"
    done = subprocess.run([str(tailor_bin()), "build", "--model", str(FIXTURES / "tiny-phi3"), "--output", str(out), "--lora", f"a1={LORA / 'a1'}"], capture_output=True, text=True)
    assert done.returncode != 0 and "self_attn.q_proj.lora_A.weight" in done.stderr and "no LoRA slot" in done.stderr and not out.exists(), done.stderr


def test_gpu_tables_refuse_lora_saying_why(tmp_path):
    out = tmp_path / "out"
    for ep in ("cuda", "dml", "webgpu", "trt-rtx"):
        done = subprocess.run([str(tailor_bin()), "build", "--model", str(FIXTURES / BASE), "--output", str(out), "--ep", ep, "--lora", f"a1={LORA / 'a1'}"], capture_output=True, text=True)
        assert done.returncode != 0 and f"{ep}.toml [lora]" in done.stderr and "K = 0" in done.stderr and not out.exists(), done.stderr


def test_inspect_lists_slots_and_adapters(package):
    done = subprocess.run([str(tailor_bin()), "inspect", str(package), "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lora = json.loads(done.stdout)["lora"]
    assert len(lora["slots"]) == 14
    got = {a["name"]: (a["tensors"], a["rank"], a["scaling"], len(a["targets"]), a["names_without_input"]) for a in lora["adapters"]}
    assert got == {n: (META["adapters"][n]["tensors"], META["adapters"][n]["r"], META["adapters"][n]["scaling"], META["adapters"][n]["tensors"] // 2, []) for n in ADAPTERS}
    text = subprocess.run([str(tailor_bin()), "inspect", str(package)], capture_output=True, text=True).stdout
    assert "LoRA slots: 14" in text and "adapter a1: adapters/a1.onnx_adapter, 8 tensors, rank 4, scaling 2.0" in text


def conv1d(ckpt):
    """GPT-2 stores its projections as Conv1D, `[in, out]` (PEFT sets fan_in_fan_out for them)."""
    return json.loads((ckpt / "config.json").read_text())["model_type"] == "gpt2"


def random_adapter(ckpt, out, modules, r, alpha, rslora=False, seed=0):
    """A random PEFT adapter on `modules` (leaf names) of every layer of the checkpoint; returns
    its tensors by PEFT key. A is `[r, in]` and B `[out, r]` for Linear and Conv1D alike."""
    rng = np.random.default_rng(seed)
    weights = load_file(ckpt / "model.safetensors")
    tensors = {}
    for key, w in weights.items():
        module = key.removesuffix(".weight")
        if key.endswith(".weight") and module.rsplit(".", 1)[-1] in modules and w.ndim == 2:
            k, n = w.shape if conv1d(ckpt) else w.shape[::-1]
            tensors[f"base_model.model.{module}.lora_A.weight"] = (rng.standard_normal((r, k)) * 0.3).astype(np.float32)
            tensors[f"base_model.model.{module}.lora_B.weight"] = (rng.standard_normal((n, r)) * 0.3).astype(np.float32)
    out.mkdir(parents=True)
    save_file(tensors, out / "adapter_model.safetensors")
    cfg = {"peft_type": "LORA", "r": r, "lora_alpha": alpha, "use_rslora": rslora, "target_modules": sorted(modules), "bias": "none",
           "fan_in_fan_out": conv1d(ckpt)}
    (out / "adapter_config.json").write_text(json.dumps(cfg))
    return tensors


def merged_checkpoint(ckpt, out, tensors, scaling):
    """The checkpoint with each adapter pair merged into its weight: W + scaling * B A (its
    transpose for Conv1D weights)."""
    shutil.copytree(ckpt, out, ignore=shutil.ignore_patterns("reference.*"))
    weights = load_file(ckpt / "model.safetensors")
    for key in [k for k in tensors if k.endswith(".lora_A.weight")]:
        module = key.removeprefix("base_model.model.").removesuffix(".lora_A.weight")
        a, b = tensors[key], tensors[key.replace("lora_A", "lora_B")]
        w = weights[f"{module}.weight"]
        delta = b.astype(np.float64) @ a.astype(np.float64)
        weights[f"{module}.weight"] = (w.astype(np.float64) + scaling * (delta.T if conv1d(ckpt) else delta)).astype(w.dtype)
    save_file(weights, out / "model.safetensors")


@pytest.mark.parametrize("fixture,ep,modules", [
    ("tiny-qwen2", "cpu", {"q_proj", "k_proj", "v_proj", "o_proj"}),       # biased q/k/v: fuse.pack_qkv.bias.lora
    ("tiny-qwen2", "default", {"q_proj", "v_proj", "down_proj"}),
    ("tiny-mistral", "cpu", {"k_proj", "gate_proj", "up_proj"}),           # head_dim != hidden / heads
    ("tiny-qwen3", "cpu", {"q_proj", "k_proj", "v_proj", "down_proj"}),    # per-head q/k norms
    # Fused projections: the adapter's B split by rows over the parts' slots.
    ("tiny-phi3", "cpu", {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}),
    ("tiny-phi3-partial", "default", {"qkv_proj", "gate_up_proj"}),
    ("tiny-gpt2", "cpu", {"c_attn", "c_proj", "c_fc"}),                    # Conv1D, fan_in_fan_out
    ("tiny-glm4", "cpu", {"q_proj", "gate_up_proj", "down_proj"}),         # GLM's fused MLP (gate first)
    # GraniteMoeShared's shared MLP: one gate/up projection beside the experts (the 3-D expert
    # stacks of the same name take no adapter).
    ("tiny-granitemoeshared", "cpu", {"q_proj", "input_linear", "output_linear"}),
    # OPT-350m: post-norm blocks, and the embedding projections as adapter slots too.
    ("tiny-opt-350m", "cpu", {"q_proj", "v_proj", "fc1", "project_in", "project_out"}),
])
def test_an_adapter_bound_equals_the_merged_model(tmp_path, fixture, ep, modules):
    """For families and adapters the fixtures do not cover (other widths, rsLoRA, biases):
    the package with an adapter bound computes what the checkpoint with that adapter merged into
    its weights computes."""
    ckpt = FIXTURES / fixture
    r, alpha = 6, 12
    tensors = random_adapter(ckpt, tmp_path / "peft", modules, r, alpha, rslora=True)
    merged_checkpoint(ckpt, tmp_path / "merged", tensors, alpha / np.sqrt(r))
    pkg = build_with(tmp_path / "pkg", fixture, ep, ["--lora", f"x={tmp_path / 'peft'}"])
    plain = subprocess.run([str(tailor_bin()), "build", "--model", str(tmp_path / "merged"), "--output", str(tmp_path / "m"), "--ep", ep], capture_output=True, text=True)
    assert plain.returncode == 0, plain.stderr
    def fired(path):
        report = json.loads((path / "build_report.json").read_text())
        return {r["rule"]: r["fired"] for r in report["parts"][0]["pipeline"]["diagnostics"]["rules"]}
    # Where the plain build packs Q/K/V (cpu, except qwen3's q/k norms, GPT-2's and OPT's
    # unrotated attention and GLM-4's partial rotary), the build with slots packs them too, LoRA
    # branches and all.
    packed, with_slots = fired(tmp_path / "m"), fired(pkg)
    plain_packs = packed.get("fuse.pack_qkv", 0) + packed.get("fuse.pack_qkv.bias", 0) > 0
    assert plain_packs == (ep == "cpu" and fixture not in ("tiny-qwen3", "tiny-gpt2", "tiny-glm4", "tiny-opt-350m")), packed
    if plain_packs:
        assert with_slots.get("fuse.pack_qkv.lora", 0) + with_slots.get("fuse.pack_qkv.bias.lora", 0) > 0, with_slots
    ref = load_file(ckpt / "reference.safetensors")
    cfg = json.loads((ckpt / "config.json").read_text())
    heads = cfg.get("num_attention_heads", cfg.get("n_head"))
    kv_heads = cfg.get("num_key_value_heads", heads)
    head_dim = cfg.get("head_dim") or cfg.get("hidden_size", cfg.get("n_embd")) // heads
    layers = cfg.get("num_hidden_layers", cfg.get("n_layer"))
    got = run_steps(pkg / "model.onnx", pkg / "adapters" / "x.onnx_adapter", ref, layers, kv_heads, head_dim)
    want = run_steps(tmp_path / "m" / "model.onnx", None, ref, layers, kv_heads, head_dim)
    none = run_steps(pkg / "model.onnx", None, ref, layers, kv_heads, head_dim)
    for g, w, n in zip(got, want, none):
        assert np.abs(g - w).max() < 1e-3 and np.abs(g - n).max() > 1e-2


def test_rank_and_alpha_patterns_give_each_module_its_own_scaling(tmp_path):
    """PEFT's rank_pattern / alpha_pattern: each module's rank and alpha from the first key that
    matches the end of its path (a leaf name matches every layer, a full path one module);
    the adapter bound equals the checkpoint with each pair merged at its own scaling."""
    ckpt = FIXTURES / "tiny-qwen2"
    ranks = {"q_proj": 3, "model.layers.1.mlp.down_proj": 5}
    alphas = {"model\\.layers\\.0\\..*_proj": 7.0, "down_proj": 2.0}
    rng = np.random.default_rng(3)
    weights = load_file(ckpt / "model.safetensors")
    tensors, scalings = {}, {}
    for key, w in weights.items():
        module = key.removesuffix(".weight")
        leaf = module.rsplit(".", 1)[-1]
        if not (key.endswith(".weight") and leaf in {"q_proj", "v_proj", "down_proj"}):
            continue
        r = 5 if module == "model.layers.1.mlp.down_proj" else 3 if leaf == "q_proj" else 4
        alpha = 7.0 if module.startswith("model.layers.0.") else 2.0 if leaf == "down_proj" else 16.0
        scalings[module] = alpha / r
        n, k = w.shape
        tensors[f"base_model.model.{module}.lora_A.weight"] = (rng.standard_normal((r, k)) * 0.3).astype(np.float32)
        tensors[f"base_model.model.{module}.lora_B.weight"] = (rng.standard_normal((n, r)) * 0.3).astype(np.float32)
    peft = tmp_path / "peft"
    peft.mkdir()
    save_file(tensors, peft / "adapter_model.safetensors")
    cfg = {"peft_type": "LORA", "r": 4, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj", "down_proj"], "bias": "none",
           "rank_pattern": ranks, "alpha_pattern": alphas}
    (peft / "adapter_config.json").write_text(json.dumps(cfg))
    # The merged reference, each module at its own scaling.
    shutil.copytree(ckpt, tmp_path / "merged", ignore=shutil.ignore_patterns("reference.*"))
    for module, scaling in scalings.items():
        a, b = tensors[f"base_model.model.{module}.lora_A.weight"], tensors[f"base_model.model.{module}.lora_B.weight"]
        weights[f"{module}.weight"] = (weights[f"{module}.weight"].astype(np.float64) + scaling * (b.astype(np.float64) @ a.astype(np.float64))).astype(np.float32)
    save_file(weights, tmp_path / "merged" / "model.safetensors")
    pkg = build_with(tmp_path / "pkg", "tiny-qwen2", "default", ["--lora", f"x={peft}"])
    done = subprocess.run([str(tailor_bin()), "build", "--model", str(tmp_path / "merged"), "--output", str(tmp_path / "m"), "--ep", "default"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = json.loads((pkg / "build_report.json").read_text())["lora"]["adapters"][0]
    assert report["scaling"] == 4.0
    assert report["module_scaling"] == {m: s for m, s in scalings.items() if s != 4.0}
    ref = load_file(ckpt / "reference.safetensors")
    cfg = json.loads((ckpt / "config.json").read_text())
    dims = (cfg["num_hidden_layers"], cfg["num_key_value_heads"], cfg["hidden_size"] // cfg["num_attention_heads"])
    got = run_steps(pkg / "model.onnx", pkg / "adapters" / "x.onnx_adapter", ref, *dims)
    want = run_steps(tmp_path / "m" / "model.onnx", None, ref, *dims)
    for g, w in zip(got, want):
        assert np.abs(g - w).max() < 1e-3
    # A rank the pattern does not give is refused naming the entry.
    (peft / "adapter_config.json").write_text(json.dumps({**json.loads((peft / "adapter_config.json").read_text()), "rank_pattern": {"q_proj": 2}}))
    done = subprocess.run([str(tailor_bin()), "build", "--model", str(ckpt), "--output", str(tmp_path / "no"), "--lora", f"x={peft}"], capture_output=True, text=True)
    assert done.returncode != 0 and "`rank_pattern` entry `q_proj` gives 2" in done.stderr and not (tmp_path / "no").exists(), done.stderr


def run_steps(model_path, adapter, ref, n_layers, kv_heads, head_dim):
    s = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    ro = ort.RunOptions()
    if adapter is not None:
        la = ort.LoraAdapter()
        la.Load(str(adapter))
        ro.add_active_adapter(la)
    names = [o.name for o in s.get_outputs()]
    inputs = {i.name for i in s.get_inputs()}
    feeds = {"input_ids": ref["input_ids"], "attention_mask": ref["attention_mask"], "position_ids": ref["position_ids"]}
    for i in range(n_layers):
        for kv in ("key", "value"):
            feeds[f"past_key_values.{i}.{kv}"] = np.zeros((1, kv_heads, 0, head_dim), np.float32)
    out = dict(zip(names, s.run(None, {k: v for k, v in feeds.items() if k in inputs}, ro)))
    n = ref["input_ids"].shape[1]
    feeds = {"input_ids": ref["decode_input_ids"], "attention_mask": np.ones((1, n + 1), np.int64), "position_ids": np.array([[n]], np.int64)}
    for i in range(n_layers):
        for kv in ("key", "value"):
            feeds[f"past_key_values.{i}.{kv}"] = out[f"present.{i}.{kv}"]
    step = dict(zip(names, s.run(None, {k: v for k, v in feeds.items() if k in inputs}, ro)))
    return out["logits"], step["logits"]


def test_vision_language_adapters_under_any_transformers_module_path(tmp_path):
    """A LoRA for a vision-language model's text decoder names its modules as the transformers
    version it trained under built them: `model.layers` (Qwen2.5-VL before 4.52),
    `model.language_model.layers` (4.52 on) or `language_model.model.layers` (Gemma 3 under
    4.x). All three are the same slots: the adapter files are byte-identical. A target in the
    vision tower has no slot and is refused by name."""
    cfg = json.loads((LORA / "a1" / "adapter_config.json").read_text())
    cfg.update(base_model_name_or_path="tiny-qwen2_5_vl", auto_mapping=None, target_modules=["q_proj", "v_proj"])
    vl = json.loads((FIXTURES / "tiny-qwen2_5_vl" / "config.json").read_text())["text_config"]
    hidden, kv = vl["hidden_size"], vl["num_key_value_heads"] * vl["hidden_size"] // vl["num_attention_heads"]
    rng = np.random.default_rng(0)
    factors = {}
    for layer in range(vl["num_hidden_layers"]):
        for module, out in (("q_proj", hidden), ("v_proj", kv)):
            factors[f"{layer}.self_attn.{module}"] = (rng.standard_normal((cfg["r"], hidden)).astype(np.float32), rng.standard_normal((out, cfg["r"])).astype(np.float32))
    files = {}
    for spelling in ("model.layers", "model.language_model.layers", "language_model.model.layers"):
        d = tmp_path / spelling
        d.mkdir()
        (d / "adapter_config.json").write_text(json.dumps(cfg))
        tensors = {}
        for module, (a, b) in factors.items():
            tensors[f"base_model.model.{spelling}.{module}.lora_A.weight"] = a
            tensors[f"base_model.model.{spelling}.{module}.lora_B.weight"] = b
        save_file(tensors, d / "adapter_model.safetensors")
        out = tmp_path / f"pkg-{spelling}"
        done = subprocess.run([str(tailor_bin()), "build", "--model", str(FIXTURES / "tiny-qwen2_5_vl"), "--output", str(out), "--lora", f"a={d}"], capture_output=True, text=True)
        assert done.returncode == 0, f"{spelling}: {done.stderr}"
        files[spelling] = (out / "adapters" / "a.onnx_adapter").read_bytes()
    assert len(set(files.values())) == 1, "the three spellings give different adapter files"
    # The vision tower's projections have no slot.
    d = tmp_path / "visual"
    d.mkdir()
    cfg.update(target_modules=["qkv"])
    (d / "adapter_config.json").write_text(json.dumps(cfg))
    key = "base_model.model.model.visual.blocks.0.attn.qkv"
    save_file({f"{key}.lora_A.weight": np.zeros((cfg["r"], 32), np.float32), f"{key}.lora_B.weight": np.zeros((96, cfg["r"]), np.float32)}, d / "adapter_model.safetensors")
    out = tmp_path / "never"
    done = subprocess.run([str(tailor_bin()), "build", "--model", str(FIXTURES / "tiny-qwen2_5_vl"), "--output", str(out), "--lora", f"a={d}"], capture_output=True, text=True)
    assert done.returncode != 0 and f"{key}.lora_A.weight" in done.stderr and "no LoRA slot" in done.stderr and not out.exists(), done.stderr
