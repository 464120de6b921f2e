"""The catalogue people shop from: a hundred models and more, in twenty families and more, each
with the Hugging Face repository its config comes from; the parameter counts rooflab computes
from each config against the sizes their makers state; ``rooflab models --search``.

Counts come from the tensor table ``spec_from_config`` builds, never from the entry itself
(see test_catalogue_sizes.py for the older entries)."""

from __future__ import annotations

import re

import pytest

from rooflab.core.cli.main import main
from rooflab.core.io import load_model
from rooflab.core.io.catalogue import list_catalogue, search_catalogue

B = 1e9

# key: (stated total, tolerance, stated active or None, tolerance, source)
STATED: dict[str, tuple[float, float, float | None, float, str]] = {
    "qwen3-coder-480b-a35b-q4_k_m": (480 * B, 0.01, 35 * B, 0.03, "Qwen3-Coder model card: 480B total, 35B activated"),
    "kimi-k2-q4_k_m": (1.04e12, 0.02, 32 * B, 0.03, "Kimi K2 model card: 1T total (1.04T), 32B activated"),
    "minimax-m2-q4_k_m": (230 * B, 0.01, 10 * B, 0.05, "MiniMax-M2 model card: 230B total, 10B active"),
    "glm-4.5-q4_k_m": (355 * B, 0.01, 32 * B, 0.05, "GLM-4.5 model card: 355B total, 32B active (with its 3B "
                                                     "NextN block, which llama.cpp never reads)"),
    "llama-4-maverick-q4_k_m": (400 * B, 0.01, 17 * B, 0.06, "Llama 4 model card: Maverick 400B total, 17B active"),
    "llama-4-scout-q4_k_m": (109 * B, 0.015, 17 * B, 0.06, "Llama 4 model card: Scout 109B total (with its "
                                                            "vision encoder), 17B active"),
    "mixtral-8x22b-q4_k_m": (141 * B, 0.005, 39 * B, 0.005, "Mistral AI: Mixtral 8x22B, 141B total, 39B active"),
    "phi-3.5-moe-q4_k_m": (41.9 * B, 0.005, 6.6 * B, 0.02, "Phi-3.5-MoE model card: 42B total, 6.6B active"),
    "olmoe-1b-7b-q4_k_m": (6.9 * B, 0.01, 1.3 * B, 0.1, "OLMoE paper: 6.9B total, 1.3B active"),
    "deepseek-v2.5-q4_k_m": (236 * B, 0.005, 21 * B, 0.02, "DeepSeek-V2 paper: 236B total, 21B activated"),
    "llama-3.1-405b-q4_k_m": (405 * B, 0.005, None, 0.0, "Llama 3.1 model card: 405B"),
    "mistral-large-2-q4_k_m": (123 * B, 0.005, None, 0.0, "Mistral Large 2 model card: 123B"),
    "gemma-2-27b-q4_k_m": (27.2 * B, 0.005, None, 0.0, "Gemma 2 report: 27.2B parameters"),
    "gemma-3-270m-q4_k_m": (268 * 1e6, 0.02, None, 0.0, "Gemma 3 270M model card: 170M embedding + 100M blocks"),
    "qwen2.5-72b-q4_k_m": (72.7 * B, 0.002, None, 0.0, "Qwen2.5-72B model card: 72.7B parameters"),
    "qwen3-14b-q4_k_m": (14.8 * B, 0.005, None, 0.0, "Qwen3-14B model card: 14.8B parameters"),
    "falcon3-10b-q4_k_m": (10.3 * B, 0.005, None, 0.0, "Falcon3-10B model card: 10.3B"),
    "smollm3-3b-q4_k_m": (3.08 * B, 0.01, None, 0.0, "SmolLM3 model card: 3B (3.08B)"),
    "granite-3.3-8b-q4_k_m": (8.17 * B, 0.01, None, 0.0, "Granite 3.3 8B: 8.17B parameters"),
    "olmo-2-32b-q4_k_m": (32.2 * B, 0.01, None, 0.0, "OLMo 2 32B: 32.2B parameters"),
}


def family(key: str) -> str:
    """A model's family: its key's first word ("qwen2.5", "llama", "gpt"): a lower bound, as
    Qwen2.5 and Qwen3 count twice but Llama 2, 3 and 4 once."""
    return key.split("-")[0]


def test_a_hundred_models_in_twenty_families_each_with_its_repository():
    entries = list_catalogue()
    assert len(entries) >= 100
    assert len({family(e.key) for e in entries}) >= 20
    for e in entries:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", e.repository), e.key
        assert e.sources["config"].startswith(e.repository), e.key


@pytest.mark.parametrize("key", sorted(STATED))
def test_computed_parameters_match_the_stated_size(key):
    total, rel_total, active, rel_active, source = STATED[key]
    spec = load_model(key)
    rope_freqs = sum(t.params for t in spec.tensors if t.name == "rope_freqs.weight")
    assert spec.params_total - rope_freqs == pytest.approx(total, rel=rel_total), source
    if active is not None:
        assert spec.params_per_token == pytest.approx(active, rel=rel_active), source
        assert spec.params_per_token < spec.params_total / 3          # Mixtral 8x22B reads 28 %


def test_llama4_has_a_shared_expert_and_maverick_alternates_dense_layers():
    scout, maverick = load_model("llama-4-scout-q4_k_m"), load_model("llama-4-maverick-q4_k_m")
    names = {t.name for t in maverick.tensors}
    assert {"blk.0.ffn_up.weight", "blk.1.ffn_up_exps.weight", "blk.1.ffn_up_shexp.weight"} <= names
    assert "blk.0.ffn_up_exps.weight" not in names                      # interleave_moe_layer_step 2
    assert maverick.experts == 128 and maverick.experts_used == 1 and scout.experts == 16
    dense_up = next(t for t in maverick.tensors if t.name == "blk.0.ffn_up.weight")
    assert dense_up.shape == (5120, 16384)                              # intermediate_size_mlp
    assert all(f"blk.{i}.ffn_up_shexp.weight" in {t.name for t in scout.tensors} for i in range(48))


def test_search_keeps_entries_with_every_word(capsys):
    coders = search_catalogue("qwen3 CODER")
    assert {e.key for e in coders} == {"qwen3-coder-30b-a3b-q4_k_m", "qwen3-coder-480b-a35b-q4_k_m"}
    assert {e.key for e in search_catalogue("meta-llama/Llama-4")} == {"llama-4-scout-q4_k_m",
                                                                      "llama-4-maverick-q4_k_m"}
    assert main(["models", "--search", "qwen3 coder"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["key", "weights", "GB"]
    assert [line.split()[0] for line in lines] == sorted(e.key for e in coders)
    assert main(["models", "--search", "no such model"]) == 2
    assert capsys.readouterr().err == "rooflab: error: no catalogue model matches 'no such model' " \
                                      "(rooflab models lists them all)\n"
