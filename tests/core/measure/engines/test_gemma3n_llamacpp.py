"""llama.cpp runs the Gemma 3n GGUF rooflab writes: its per-layer embedding, AltUp and LAuReL
tensors have the shapes llama.cpp's loader asks for, and a prompt gives finite logits."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.factories.llm_configs import gemma3n_config, spec_of
from tests.factories.synthetic import write_synthetic_gguf_blocking

HAS_LLAMA_CPP = importlib.util.find_spec("llama_cpp") is not None

# 10 layers, the last 5 reading an earlier layer's cache (LAuReL rank 64 and 4 AltUp streams:
# llama.cpp's fixed values for gemma3n)
SMALL = gemma3n_config(layers=10, hidden=256, ffn=512, shared=5, heads=4, head_dim=64, vocab=1000, window=64,
                       name="tiny-gemma3n")


@pytest.mark.skipif(not HAS_LLAMA_CPP, reason="llama-cpp-python is not installed")
def test_llama_cpp_loads_and_runs_a_gemma3n_gguf(tmp_path: Path, llama_cpp_decodes) -> None:
    spec = spec_of(SMALL, "q4_k_m", name="tiny-gemma3n")
    path = write_synthetic_gguf_blocking(spec, tmp_path / "tiny-gemma3n.gguf")
    llama_cpp_decodes(spec, path)
