"""The cache llama.cpp allocates for a sliding-window model, as rooflab's binding makes the
context: sliding-window layers hold their window only (``swa_full = False``, as llama-bench),
so the cache is the size rooflab predicts (``work.kv_bytes_held``), not a full-length cache in
every layer (the binding's default, ``swa_full = True``).

The sizes are read from llama.cpp's own report of each cache it creates ("llama_kv_cache: size
= 2.00 MiB (4096 cells, 1 layers, 1/1 seqs), ..."), which reaches rooflab's log callback. One
context of a 4 MB random-weight gemma3-shaped model: a fraction of a second, whatever the load."""

from __future__ import annotations

import re
from collections import deque
from pathlib import Path

import pytest

from tests.factories import needs

needs.llama_cpp(module_level=True)

import llama_cpp  # noqa: E402

from rooflab.core.measure.engines.llamacpp.binding import Engine, open_handles  # noqa: E402
from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan, kv_cache_bytes  # noqa: E402
from rooflab.core.predict import work  # noqa: E402
from tests.factories.llm_configs import random_gguf, small_configs, spec_of  # noqa: E402

MIB = 1 << 20
CONTEXT = 4096
# llama_kv_cache: size =    2.00 MiB (  4096 cells,   1 layers,  1/1 seqs), K (f16): ...
_CACHE = re.compile(r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers")


@pytest.fixture(scope="module")
def gemma3(tmp_path_factory: pytest.TempPathFactory, llama_cpp_survives_on) -> Path:
    """Six layers, five of them sliding (window 64) and the sixth full, as gemma3 lays them out;
    checked to run in a child process first (conftest.py: llama.cpp runs in this one here)."""
    path = random_gguf(tmp_path_factory.mktemp("swa") / "gemma3-q8_0.gguf", small_configs()["gemma3"], "q8_0")
    llama_cpp_survives_on(path)
    return path


def _caches(engine: Engine, plan: LlamaCppPlan, monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, int, int]]:
    """(MiB, cells, layers) of each cache llama.cpp creates for a context of ``CONTEXT`` tokens
    made the way a measurement makes it (``Engine.new_context``). The log ring keeps the last
    few hundred lines and a context's graph reservation writes more than that after the
    caches, so the ring is unbounded for this one context."""
    monkeypatch.setattr(engine.log, "lines", deque())
    engine.new_context(n_ctx=CONTEXT, n_seq_max=1, n_batch=plan.batch_size, n_ubatch=plan.ubatch, threads=1,
                       flash_attention=plan.flash_attention, type_k=plan.cache_type_k, type_v=plan.cache_type_v,
                       capacity=plan.batch_size)
    found = [_CACHE.search(text) for _, _, text in engine.log.lines]
    return [(float(m.group(1)), int(m.group(2)), int(m.group(3))) for m in found if m]


def test_sliding_window_layers_cache_their_window_only(gemma3: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = spec_of(small_configs()["gemma3"], "q8_0")
    sliding = sum(spec.attention.sliding)
    assert spec.attention.sliding_window == 64 and 0 < sliding < spec.layers
    plan = LlamaCppPlan(threads=1)
    full_cells, window_cells = (int(x) for x in work.kv_cells_held(spec, CONTEXT, plan.ubatch))
    assert (full_cells, window_cells) == (4096, 768)          # pad(64 + 512, 256): far below the context

    with Engine(llama_cpp) as engine:
        engine.load(str(gemma3), 0)
        caches = _caches(engine, plan, monkeypatch)
    assert open_handles() == 0

    # one cache for the full layers, one for the sliding ones; a full-size sliding cache
    # (swa_full) would hold 4096 cells in those five layers too, three times the whole
    assert sorted((cells, layers) for _, cells, layers in caches) == sorted(
        [(full_cells, spec.layers - sliding), (window_cells, sliding)])
    predicted = float(work.kv_bytes_held(spec, CONTEXT, plan.cache_type_k, plan.ubatch))
    assert predicted == kv_cache_bytes(spec, plan, CONTEXT, 1)     # the run's memory check counts the same
    allocated = sum(mib for mib, _, _ in caches) * MIB
    assert allocated == pytest.approx(predicted, abs=0.005 * MIB * len(caches))   # llama.cpp prints 2 decimals
