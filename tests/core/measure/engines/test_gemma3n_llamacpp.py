"""llama.cpp runs the Gemma 3n GGUF rooflab writes: its per-layer embedding, AltUp and LAuReL
tensors have the shapes llama.cpp's loader asks for, and a prompt gives finite logits."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tests.factories.llm_configs import gemma3n_config, spec_of
from tests.factories.synthetic import write_synthetic_gguf_blocking

HAS_LLAMA_CPP = importlib.util.find_spec("llama_cpp") is not None

# 10 layers, the last 5 reading an earlier layer's cache (LAuReL rank 64 and 4 AltUp streams:
# llama.cpp's fixed values for gemma3n)
SMALL = gemma3n_config(layers=10, hidden=256, ffn=512, shared=5, heads=4, head_dim=64, vocab=1000, window=64,
                       name="tiny-gemma3n")


@pytest.mark.skipif(not HAS_LLAMA_CPP, reason="llama-cpp-python is not installed")
def test_llama_cpp_loads_and_runs_a_gemma3n_gguf(tmp_path: Path, llama_cpp_survives_on) -> None:
    import llama_cpp

    from rooflab.core.measure.engines.llamacpp.binding import Engine, open_handles

    spec = spec_of(SMALL, "q4_k_m", name="tiny-gemma3n")
    path = write_synthetic_gguf_blocking(spec, tmp_path / "tiny-gemma3n.gguf")
    llama_cpp_survives_on(path)
    with Engine(llama_cpp) as engine:
        engine.load(str(path), 0)
        assert engine.n_vocab == spec.vocab
        engine.new_context(n_ctx=256, n_seq_max=1, n_batch=64, n_ubatch=64, threads=1, flash_attention=None,
                           type_k="f16", type_v="f16", capacity=64)
        engine.decode(np.arange(32, dtype=np.int32) * 7, np.arange(32, dtype=np.int32))
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(engine.ctx, -1), shape=(spec.vocab,))
        assert np.isfinite(logits).all()
    assert open_handles() == 0
