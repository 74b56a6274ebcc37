"""Config switches that change which weights a family reads, shown on copies of its fixture:
HyperCLOVA X's `use_post_norm` false has no norms after attention and after the MLP
(`nn.Identity` in transformers), so the checkpoint holds none and the graph reads none; a
checkpoint that still holds them under the switch off fails by name (nothing would read them).
GraniteMoeShared's `shared_intermediate_size` 0 has no shared MLP. A.X K1 as released: no
correction bias, a norm stored on dense layers that only the sparse ones apply."""
import json
import shutil

import numpy as np
import onnx
from safetensors.numpy import load_file, save_file

from conftest import FIXTURES, assert_reference_logits, build_folder, prefill_logits


def rms_norms(pkg):
    graph = onnx.load(str(pkg / "model.onnx"), load_external_data=False).graph
    return sum(n.op_type == "RMSNormalization" for n in graph.node)


def copy_with(tmp_path, fixture, config_keys, drop=()):
    dst = tmp_path / fixture
    shutil.copytree(FIXTURES / fixture, dst)
    config = json.loads((dst / "config.json").read_text())
    config.update(config_keys)
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    tensors = load_file(str(dst / "model.safetensors"))
    kept = {k: v for k, v in tensors.items() if not any(d in k for d in drop)}
    save_file(kept, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst, len(tensors) - len(kept)


def test_hyperclovax_use_post_norm_off_reads_no_after_norms(tmp_path):
    on = build_folder(FIXTURES / "tiny-hyperclovax", tmp_path / "on")
    assert on.returncode == 0, on.stderr
    layers = json.loads((FIXTURES / "tiny-hyperclovax" / "config.json").read_text())["num_hidden_layers"]
    model, dropped = copy_with(tmp_path / "off", "tiny-hyperclovax", {"use_post_norm": False}, drop=(".post_norm1.", ".post_norm2."))
    assert dropped == 2 * layers
    off = build_folder(model, tmp_path / "pkg")
    assert off.returncode == 0, off.stderr
    assert rms_norms(tmp_path / "on") - rms_norms(tmp_path / "pkg") == 2 * layers
    # The switch off with the norms still stored: nothing reads them, and the build says which.
    model, _ = copy_with(tmp_path / "stale", "tiny-hyperclovax", {"use_post_norm": False})
    stale = build_folder(model, tmp_path / "stale-pkg")
    assert stale.returncode != 0
    assert "post_norm1" in stale.stderr, stale.stderr


def test_granitemoeshared_without_a_shared_width_has_no_shared_mlp(tmp_path):
    # `shared_intermediate_size` 0 (GraniteMoeSharedConfig's default): `shared_mlp` is None, so
    # the checkpoint holds none and the block is GraniteMoE's.
    def matmuls(pkg):
        graph = onnx.load(str(pkg / "model.onnx"), load_external_data=False).graph
        return sum(n.op_type == "MatMul" for n in graph.node)

    with_shared = build_folder(FIXTURES / "tiny-granitemoeshared", tmp_path / "with")
    assert with_shared.returncode == 0, with_shared.stderr
    layers = json.loads((FIXTURES / "tiny-granitemoeshared" / "config.json").read_text())["num_hidden_layers"]
    model, dropped = copy_with(tmp_path / "none", "tiny-granitemoeshared", {"shared_intermediate_size": 0}, drop=(".shared_mlp.",))
    assert dropped == 2 * layers
    without = build_folder(model, tmp_path / "pkg")
    assert without.returncode == 0, without.stderr
    # The fused gate/up and the down projection of every layer are gone.
    assert matmuls(tmp_path / "with") - matmuls(tmp_path / "pkg") == 3 * layers


def test_axk1_as_released_no_correction_bias_and_a_dense_layers_moe_norm(tmp_path):
    # A.X K1's released checkpoints route without `e_score_correction_bias` (read as zero, the
    # fixture's value) and store `post_mlp_layernorm` on the dense layers too (unused there): the
    # package is the fixture's model.
    model, dropped = copy_with(tmp_path, "tiny-axk1", {}, drop=(".e_score_correction_bias",))
    assert dropped >= 1
    tensors = load_file(str(model / "model.safetensors"))
    tensors["model.layers.0.post_mlp_layernorm.weight"] = tensors["model.layers.1.post_mlp_layernorm.weight"] * 3
    save_file(tensors, str(model / "model.safetensors"), metadata={"format": "pt"})
    done = build_folder(model, tmp_path / "pkg")
    assert done.returncode == 0, done.stderr
    assert_reference_logits(tmp_path / "pkg", "tiny-axk1")
    graph = onnx.load(str(tmp_path / "pkg" / "model.onnx"), load_external_data=False).graph
    assert not [i.name for i in graph.initializer if i.name.startswith("model.layers.0.post_mlp_layernorm")]


def test_nanochat_keys_a_published_config_leaves_out_take_nanochatconfigs_defaults(tmp_path):
    # NanoChatConfig: bos 0, eos 1, pad 1, 2048 positions; genai_config.json reads them. Without
    # generation_config.json (the fixture's is tiny-llama's, whose ids would win, as they do in
    # transformers' generate).
    dst = tmp_path / "tiny-nanochat"
    shutil.copytree(FIXTURES / "tiny-nanochat", dst)
    (dst / "generation_config.json").unlink()
    config = json.loads((dst / "config.json").read_text())
    for key in ("bos_token_id", "eos_token_id", "pad_token_id", "max_position_embeddings"):
        del config[key]
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    done = build_folder(dst, tmp_path / "pkg")
    assert done.returncode == 0, done.stderr
    model = json.loads((tmp_path / "pkg" / "genai_config.json").read_text())["model"]
    assert (model["bos_token_id"], model["eos_token_id"], model["pad_token_id"]) == (0, 1, 1), model
    assert model["context_length"] == 2048, model


def bare_model_copy(fixture, prefix, dst, extra=None, head_outside=False):
    """A copy of `fixture` at `dst` saved as the bare model saves it: every tensor without
    `prefix` (all start with it, but for an untied `lm_head` when `head_outside`), plus `extra`
    tensors; returns the fixture's own tensors."""
    shutil.copytree(FIXTURES / fixture, dst)
    tensors = load_file(str(dst / "model.safetensors"))
    assert all(k.startswith(prefix) or (head_outside and k.startswith("lm_head.")) for k in tensors), sorted(tensors)
    bare = {k.removeprefix(prefix): v for k, v in tensors.items()} | (extra or {})
    save_file(bare, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return tensors


def test_opt_saved_from_the_bare_model_reads_without_its_prefix(tmp_path):
    # facebook/opt-* checkpoints saved from OPTModel name their tensors `decoder.*`, without
    # the causal LM's `model.`: the same model.
    dst = tmp_path / "tiny-opt"
    bare_model_copy("tiny-opt", "model.", dst)
    done = build_folder(dst, tmp_path / "pkg")
    assert done.returncode == 0, done.stderr
    assert_reference_logits(tmp_path / "pkg", "tiny-opt")


def test_gpt_neo_saved_from_the_bare_model_with_its_mask_buffers(tmp_path):
    # EleutherAI's GPT-Neo checkpoints carry each layer's causal-mask buffers
    # (`attn.attention.bias`, `attn.attention.masked_bias`), and a checkpoint saved from
    # GPTNeoModel has no `transformer.` prefix: both read as the same model (the buffers
    # recorded as unused, not an error).
    dst = tmp_path / "tiny-gpt_neo"
    buffers = {}
    for i in range(3):
        buffers[f"h.{i}.attn.attention.bias"] = np.tril(np.ones((1, 1, 8, 8), dtype=bool))
        buffers[f"h.{i}.attn.attention.masked_bias"] = np.array(-1e9, dtype=np.float32)
    bare_model_copy("tiny-gpt_neo", "transformer.", dst, buffers)
    done = build_folder(dst, tmp_path / "pkg")
    assert done.returncode == 0, done.stderr
    assert_reference_logits(tmp_path / "pkg", "tiny-gpt_neo")


def test_biogpt_saved_from_the_bare_model_with_its_own_head(tmp_path):
    # A checkpoint saved from BioGptModel names its tensors without `biogpt.`: the fixture's
    # model. One whose head is stored untied (`output_projection.weight`, `tie_word_embeddings:
    # false`) reads that tensor: twice the embeddings there doubles every logit.
    bare = tmp_path / "bare"
    tensors = bare_model_copy("tiny-biogpt", "biogpt.", bare)
    done = build_folder(bare, tmp_path / "pkg-bare")
    assert done.returncode == 0, done.stderr
    assert_reference_logits(tmp_path / "pkg-bare", "tiny-biogpt")

    untied = tmp_path / "untied"
    shutil.copytree(FIXTURES / "tiny-biogpt", untied)
    tensors["output_projection.weight"] = tensors["biogpt.embed_tokens.weight"] * 2
    save_file(tensors, str(untied / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((untied / "config.json").read_text())
    config["tie_word_embeddings"] = False
    (untied / "config.json").write_text(json.dumps(config, indent=2))
    done = build_folder(untied, tmp_path / "pkg-untied")
    assert done.returncode == 0, done.stderr
    ref = load_file(str(FIXTURES / "tiny-biogpt" / "reference.safetensors"))
    np.testing.assert_allclose(prefill_logits(tmp_path / "pkg-untied", ref["input_ids"]), 2 * ref["logits"], atol=2e-4)


def test_codegen_reads_its_mask_buffers_and_heads_across_its_shards(tmp_path):
    # Salesforce's CodeGen checkpoints carry each layer's `attn.causal_mask` buffer and may be
    # saved from CodeGenModel (no `transformer.`): the same model. Its fused q/k/v is split in 4
    # shards by width, so 2 heads (each straddling two shards) build as transformers runs them.
    bare = tmp_path / "bare"
    bare_model_copy("tiny-codegen", "transformer.", bare, {f"h.{i}.attn.causal_mask": np.tril(np.ones((1, 1, 8, 8), dtype=bool)) for i in range(2)}, head_outside=True)
    done = build_folder(bare, tmp_path / "pkg")
    assert done.returncode == 0, done.stderr
    assert_reference_logits(tmp_path / "pkg", "tiny-codegen")

    config = json.loads((bare / "config.json").read_text())
    config["n_head"] = 2
    (bare / "config.json").write_text(json.dumps(config, indent=2))
    done = build_folder(bare, tmp_path / "two-heads")
    assert done.returncode == 0, done.stderr


def test_cohere2_moe_shared_expert_combination_is_read(tmp_path):
    # The fixture averages its shared expert with the routed ones (`average`, the class's
    # default): `sum` is another model, an unknown strategy is refused by its key (and read
    # only where there is a shared expert, as transformers reads it).
    ref = load_file(str(FIXTURES / "tiny-cohere2_moe" / "reference.safetensors"))
    for strategy, ok in (("sum", True), ("max", False)):
        dst = tmp_path / strategy
        shutil.copytree(FIXTURES / "tiny-cohere2_moe", dst)
        config = json.loads((dst / "config.json").read_text())
        config["shared_expert_combination_strategy"] = strategy
        (dst / "config.json").write_text(json.dumps(config, indent=2))
        done = build_folder(dst, tmp_path / f"pkg-{strategy}")
        if not ok:
            assert done.returncode != 0 and "shared_expert_combination_strategy" in done.stderr, done.stderr
            continue
        assert done.returncode == 0, done.stderr
        diff = np.abs(prefill_logits(tmp_path / f"pkg-{strategy}", ref["input_ids"]) - ref["logits"]).max()
        assert diff > 1e-2, f"summing the shared expert changes the logits (max diff {diff})"
    dst = tmp_path / "no-shared"
    shutil.copytree(FIXTURES / "tiny-cohere2_moe", dst)
    config = json.loads((dst / "config.json").read_text())
    config |= {"shared_expert_combination_strategy": "max", "num_shared_experts": 0}
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    tensors = load_file(str(dst / "model.safetensors"))
    save_file({k: v for k, v in tensors.items() if ".shared_experts." not in k}, str(dst / "model.safetensors"), metadata={"format": "pt"})
    done = build_folder(dst, tmp_path / "pkg-no-shared")
    assert done.returncode == 0, done.stderr


def test_persimmon_without_qk_layernorm_reads_no_qk_norms(tmp_path):
    # `qk_layernorm` (PersimmonConfig's default true, not written in the fixture) switches the
    # per-head q/k LayerNorms: off, a checkpoint without them builds another model, and the
    # fixture's own norms left in place are refused as unread rather than ignored.
    dst = tmp_path / "off"
    shutil.copytree(FIXTURES / "tiny-persimmon", dst)
    config = json.loads((dst / "config.json").read_text())
    config["qk_layernorm"] = False
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    done = build_folder(dst, tmp_path / "kept")
    assert done.returncode != 0 and "q_layernorm" in done.stderr, done.stderr
    tensors = load_file(str(dst / "model.safetensors"))
    save_file({k: v for k, v in tensors.items() if "_layernorm." not in k or "self_attn" not in k}, str(dst / "model.safetensors"), metadata={"format": "pt"})
    done = build_folder(dst, tmp_path / "pkg")
    assert done.returncode == 0, done.stderr
    ref = load_file(str(FIXTURES / "tiny-persimmon" / "reference.safetensors"))
    diff = np.abs(prefill_logits(tmp_path / "pkg", ref["input_ids"]) - ref["logits"]).max()
    assert diff > 1e-2, f"the q/k norms matter (max diff {diff})"
