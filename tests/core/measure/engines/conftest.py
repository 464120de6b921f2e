"""A guard for the tests that run llama.cpp in the pytest process itself (the binding's own
tests: handles, callbacks, contexts): llama.cpp dying there (SIGILL on a processor its build
does not fit, a SIGSEGV) would take the pytest worker down with every test it held. Such a
test first runs llama.cpp on its kind of model in a child process, the way the window does
(``llamacpp.in_child``); when llama.cpp dies there, the test fails with the engine's signal in
one line instead of crashing the worker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.factories import needs


@pytest.fixture(scope="session")
def llama_cpp_survives_on() -> Callable[[Path], None]:
    """A check to call with a GGUF before running llama.cpp on it in this process: fails the
    test (one line naming the signal) when llama.cpp dies on that file in a child process.
    Each file is tried once a session."""
    needs.llama_cpp()
    from rooflab.core.jobs import run_job
    from rooflab.core.measure.engines.child_job import EngineCrashed
    from rooflab.core.measure.engines.llamacpp.in_child import measure_llamacpp_in_child
    from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan

    # a prompt long enough to take llama.cpp's matrix kernels (a 64-token ubatch), a token generated
    probe = LlamaCppPlan(threads=1, prompts=(64,), depths=(0,), gen_tokens=1, experiments=("prefill", "decode"),
                         repeats=1, warmup=False)
    verdicts: dict[str, str] = {}

    def check(path: Path) -> None:
        if str(path) not in verdicts:
            try:
                run_job(measure_llamacpp_in_child(path, probe))
                verdicts[str(path)] = ""
            except EngineCrashed as exc:
                verdicts[str(path)] = str(exc)
        if verdicts[str(path)]:
            pytest.fail(f"not run in this process: on {path.name}, {verdicts[str(path)]}", pytrace=False)

    return check


@pytest.fixture(scope="module")
def guarded_models(llama_cpp_survives_on: Callable[[Path], None],
                   tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A dense Q8_0 and a mixture-of-experts Q4_K_M random-weight GGUF, each checked to run."""
    from tests.factories.llm_configs import llama_config, qwen3_moe_config, random_gguf

    models = {"dense": random_gguf(tmp_path_factory.mktemp("dense") / "dense-q8_0.gguf", llama_config(), "q8_0"),
              "moe": random_gguf(tmp_path_factory.mktemp("moe") / "moe-q4_k_m.gguf", qwen3_moe_config(), "q4_k_m")}
    for path in models.values():
        llama_cpp_survives_on(path)
    return models


@pytest.fixture(scope="session")
def llama_cpp_decodes(llama_cpp_survives_on: Callable[[Path], None]) -> Callable[[Any, Path], None]:
    """A check that llama.cpp loads the GGUF at ``path`` (written from ``spec``) in this process,
    once it has survived it in a child, and that a 32-token prompt gives finite logits."""
    import llama_cpp
    import numpy as np

    from rooflab.core.measure.engines.llamacpp.binding import Engine, open_handles

    def check(spec: Any, path: Path) -> None:
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

    return check
