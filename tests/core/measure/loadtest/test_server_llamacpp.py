"""A real OpenAI-compatible server: llama-cpp-python's (the binding's ``[server]`` extra) on
127.0.0.1, serving a small random-weight GGUF written by rooflab's own generator, measured at 1,
2 and 4 concurrent requests. The accounting is asserted (token counts, ordered timestamps,
statistics recomputed from the raw times), never a speed.

That server runs one request at a time, and its stream is exact in tokens only for ordinary
tokens (``tests.factories.llama_server``): the requests bias the rest away instead of asking for
``min_tokens``, so every answer is its full length and every chunk one token."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

# looked for, not imported: the server runs in its own process (and importing llama_cpp here
# would leave its /dev/null handle to the interpreter's exit)
_MISSING = [m for m in ("aiohttp", "llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context",
                        "pydantic_settings") if importlib.util.find_spec(m) is None]
if _MISSING:
    pytest.skip(f"needs llama-cpp-python[server] and aiohttp (missing {', '.join(_MISSING)}; "
                "pip install -e '.[test]')", allow_module_level=True)

from rooflab.core.measure.loadtest.plan import ServerPlan  # noqa: E402
from rooflab.core.measure.loadtest.run import measure_server_blocking  # noqa: E402
from rooflab.core.predict.serving import Lengths, Load  # noqa: E402
from tests.factories.llama_server import ORDINARY_ONLY, llama_server  # noqa: E402
from tests.factories.llm_configs import llama_config, random_gguf  # noqa: E402

TINY = llama_config(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                    intermediate_size=512, vocab_size=1000)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("served")
    model = random_gguf(folder / "tiny-q8_0.gguf", TINY, "q8_0")
    with llama_server(model, folder / "server.log") as url:
        yield url


def test_concurrency_1_2_4_accounting(server):
    loads = tuple(Load(mode="concurrency", level=c) for c in (1, 2, 4))
    plan = ServerPlan(url=server, model="tiny", loads=loads, prompt=Lengths(mean=64), answer=Lengths(mean=16),
                      requests=8, request_timeout=60, stall_timeout=30, force_length=False,
                      extra_body=ORDINARY_ONLY)
    result = measure_server_blocking(plan)
    assert result.prompt_method == "the server's tokenize endpoint" and not result.cancelled
    assert result.server_models == ("tiny",) and not result.warnings
    for level in result.levels:
        assert level.count("ok") == 8 and not level.problems() and not level.warnings
        records = level.records
        for r in records:
            assert r.prompt_tokens == 64 and r.asked_tokens == 16
            assert r.answer_tokens == 16 == len(r.token_times) and r.counted_by == "stream"
            times = np.array([r.sent, *r.token_times])
            assert np.all(np.diff(times) >= 0) and r.sent < r.token_times[0] and r.end == r.token_times[-1]
        s = level.stats
        ttft = np.array([r.token_times[0] - r.sent for r in records])
        tpot = np.array([(r.token_times[-1] - r.token_times[0]) / 15 for r in records])
        e2e = np.array([r.token_times[-1] - r.sent for r in records])
        itl = np.concatenate([np.diff(r.token_times) for r in records])
        assert itl.size == 8 * 15
        for got, raw in ((s.ttft, ttft), (s.tpot, tpot), (s.e2e, e2e), (s.itl, itl)):
            assert got.mean == pytest.approx(raw.mean())
            for q in (50, 90, 99):
                assert getattr(got, f"p{q}") == pytest.approx(np.percentile(raw, q))
        span = max(r.end for r in records) - min(r.sent for r in records)
        assert s.requests_per_second == pytest.approx(8 / span)
        assert s.output_tokens_per_second == pytest.approx(8 * 16 / span)
        assert s.mean_prompt_tokens == 64 and s.mean_answer_tokens == 16
        # one request at a time: the answers' token streams never interleave
        spans = sorted((r.token_times[0], r.token_times[-1]) for r in records)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))
    alone, four = result.levels[0].stats, result.levels[2].stats
    assert four.ttft.p90 > 2 * alone.ttft.p90           # three answers ahead of the last one sent
