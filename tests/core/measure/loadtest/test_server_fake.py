"""Measuring a server against a local fake that fails in chosen ways: every request is
accounted for, each failure is a counted error with one clear line (never a raise, never a
hang), Cancel ends it within a second keeping what was measured, and the API key appears in no
record, report or output."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("aiohttp", reason="aiohttp is not installed")

from rooflab.core.calibration import store  # noqa: E402
from rooflab.core.cli.main import main  # noqa: E402
from rooflab.core.errors import MeasurementError  # noqa: E402
from rooflab.core.jobs import CancelToken, Progress  # noqa: E402
from rooflab.core.measure.loadtest.plan import ServerMeasurement, ServerPlan, gaps  # noqa: E402
from rooflab.core.measure.loadtest.run import measure_server_blocking  # noqa: E402
from rooflab.core.predict.serving import Lengths, Load  # noqa: E402
from tests.factories.fake_openai import FakeServer, free_port  # noqa: E402

C12 = (Load(mode="concurrency", level=1), Load(mode="concurrency", level=2))


def plan(url: str, model: str = "ok", **kw) -> ServerPlan:
    base = dict(url=url, model=model, loads=C12, prompt=Lengths(mean=40), answer=Lengths(mean=12), requests=4,
                request_timeout=5.0, stall_timeout=0.5, level_seconds=20.0)
    return ServerPlan(**{**base, **kw})


@pytest.fixture(scope="module")
def fake():
    with FakeServer() as server:
        yield server


def test_accounting(fake):
    loads = (*C12, Load(mode="rate", level=50.0))
    seen: list[Progress] = []
    result = measure_server_blocking(plan(fake.url + "/v1", loads=loads, requests=6), on_progress=seen.append)
    assert result.prompt_method == "the server's tokenize endpoint" and not result.warnings
    assert [lv.load for lv in result.levels] == list(loads)
    assert [p.sample for p in seen if p.sample is not None] == list(result.levels)
    for lv in result.levels:
        assert [r.index for r in lv.records] == list(range(6)) and lv.count("ok") == 6 and not lv.problems()
        for r in lv.records:
            assert r.answer_tokens == r.asked_tokens == 12 == len(r.token_times) and r.counted_by == "usage"
            assert r.prompt_tokens == 40          # one token a word: the search hits it exactly
            times = np.array([r.sent, *r.token_times])
            assert np.all(np.diff(times) >= 0) and r.end == r.token_times[-1]
        s = lv.stats
        ttft = np.array([r.token_times[0] - r.sent for r in lv.records])
        tpot = np.array([(r.token_times[-1] - r.token_times[0]) / 11 for r in lv.records])
        itl = np.concatenate([np.diff(r.token_times) for r in lv.records])
        assert s.completed == 6 and s.ttft.p50 == pytest.approx(np.percentile(ttft, 50))
        assert s.ttft.p99 == pytest.approx(np.percentile(ttft, 99))
        assert s.tpot.p90 == pytest.approx(np.percentile(tpot, 90))
        assert s.itl.p99 == pytest.approx(np.percentile(itl, 99)) and itl.size == gaps(list(lv.records)).size == 66
        span = max(r.end for r in lv.records) - min(r.sent for r in lv.records)
        assert s.output_tokens_per_second == pytest.approx(72 / span)
    bodies = [b for b in fake.bodies if b.get("stream") and b["max_tokens"] == 12]
    assert all(b["min_tokens"] == 12 and b["ignore_eos"] is True and b["stream_options"] for b in bodies)
    tags = {b["prompt"].split(":")[0] for b in bodies}
    assert len(tags) == len(bodies)                  # every prompt unique: no prefix cache helps


@pytest.mark.parametrize("model, line, status", [
    ("http500", "HTTP 500: boom", "error"),
    ("cut", "stream cut after 3 tokens", "error"),
    ("nofinish", "stream cut after 2 tokens: it ended without a finish reason or [DONE]", "error"),
    ("stall", "timed out: no data for 0.5 s after 2 tokens", "timeout"),     # no warm-up: it would end the run
    ("malformed", "malformed event after 1 tokens: 'data: {not json' is not JSON", "error"),
    ("nope", "HTTP 404: model 'nope' not found", "error"),
    ("empty", "the answer ended (length) without a token", "error"),
])
def test_failures_are_counted_errors(fake, model, line, status):
    began = time.perf_counter()
    result = measure_server_blocking(plan(fake.url, model, loads=(Load(mode="concurrency", level=4),),
                                          warmup=0 if model == "stall" else 1))
    assert time.perf_counter() - began < 5
    for lv in result.levels:
        assert len(lv.records) == 4 and lv.count(status) == 4 and lv.stats.completed == 0
        [(said, count)] = lv.problems()
        assert said.startswith(line) and count == 4 and "\n" not in said
    if model == "nope":
        assert any("not 'nope'" in w for w in result.warnings)
    result.to_dict()                                 # NaN statistics still make a record


def test_cli_prints_problems_and_exits_1_when_nothing_completed(fake, capsys):
    code = main(["measure", "server", fake.url, "--model", "http500", "--concurrency", "2", "--requests", "3",
                 "--prompt", "20", "--answer", "4", "--no-save"])
    out, err = capsys.readouterr()
    assert code == 1 and "c=2" in out and "3 errors" in out and "concurrency 2: 3 x HTTP 500: boom" in out


def test_cancel_within_a_second_keeps_what_was_measured(fake):
    cancel = CancelToken()
    box: dict[str, ServerMeasurement] = {}
    slow = plan(fake.url, "slow", answer=Lengths(mean=200), loads=(Load(mode="concurrency", level=2),) * 3)
    worker = threading.Thread(target=lambda: box.setdefault("r", measure_server_blocking(slow, cancel)))
    worker.start()
    time.sleep(1.5)
    asked = time.perf_counter()
    cancel.cancel()
    worker.join(5)
    assert not worker.is_alive() and time.perf_counter() - asked < 1.0
    result = box["r"]
    assert result.cancelled and len(result.levels) == 1
    level = result.levels[0]
    assert level.count("cancelled") == 2 and all(r.token_times for r in level.records)


def test_api_key_is_sent_and_never_written(monkeypatch, capsys):
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("ROOFLAB_TEST_KEY", secret)
    with FakeServer(api_key=secret) as server:
        result = measure_server_blocking(plan(server.url, api_key_env="ROOFLAB_TEST_KEY", loads=C12[:1]))
        assert result.levels[0].count("ok") == 4
        assert all(h["Authorization"] == f"Bearer {secret}" for h in server.headers)
        assert secret not in json.dumps(result.to_dict()) and secret not in json.dumps(result.stored())
        code = main(["measure", "server", server.url, "--model", "ok", "--api-key-env", "ROOFLAB_TEST_KEY",
                     "--concurrency", "1", "--requests", "2", "--prompt", "20", "--answer", "4", "--json",
                     "--machine", "rtx-4090"])
        out, err = capsys.readouterr()
        assert code == 0 and secret not in out + err
        kept = json.loads(out)["kept"]
        assert kept and secret not in Path(kept).read_text(encoding="utf-8")
        assert store.load_server_runs(server.url, "ok", "rtx-4090")[-1]["plan"]["authenticated"] is True
        monkeypatch.setenv("ROOFLAB_TEST_KEY", "wrong-key")
        with pytest.raises(MeasurementError, match="HTTP 401"):
            measure_server_blocking(plan(server.url, api_key_env="ROOFLAB_TEST_KEY", loads=C12[:1]))
        monkeypatch.delenv("ROOFLAB_TEST_KEY")
        with pytest.raises(MeasurementError, match="ROOFLAB_TEST_KEY is not set"):
            measure_server_blocking(plan(server.url, api_key_env="ROOFLAB_TEST_KEY", loads=C12[:1]))


def test_short_answers_and_refused_length_fields_warn():
    with FakeServer(refuse_force=True) as server:
        result = measure_server_blocking(plan(server.url, "short", loads=C12[:1]))
    assert any("refused min_tokens and ignore_eos" in w for w in result.warnings)
    level = result.levels[0]
    assert level.count("ok") == 4 and all(r.answer_tokens == 6 for r in level.records)
    assert any("4 of 4 answers came back short (mean 6 of 12 tokens)" in w for w in level.warnings)


def test_prompts_without_a_tokenize_endpoint():
    with FakeServer(tokenize=False) as server:
        by_usage = measure_server_blocking(plan(server.url, loads=C12[:1], endpoint="chat"))
    assert by_usage.prompt_method == "the prompt_tokens of one-token requests"
    assert all(r.prompt_tokens == 40 for r in by_usage.levels[0].records)       # the template's 5 counted
    with FakeServer(tokenize=False, usage=False) as server:
        estimated = measure_server_blocking(plan(server.url, loads=C12[:1]))
    assert estimated.prompt_method == "an estimate" and any("estimates" in w for w in estimated.warnings)
    assert all(r.counted_by == "stream" and r.answer_tokens == 12 for r in estimated.levels[0].records)


def test_unreachable_server_is_one_line():
    began = time.perf_counter()
    with pytest.raises(MeasurementError, match=r"cannot reach http://127\.0\.0\.1:\d+"):
        measure_server_blocking(plan(f"http://127.0.0.1:{free_port()}"))
    assert time.perf_counter() - began < 5


@pytest.mark.parametrize("url", ["ftp://host", "localhost:8080", "http://", ""])
def test_bad_addresses_are_refused(url):
    with pytest.raises(Exception, match="http://"):
        plan(url)


def test_credentials_in_the_address_are_not_kept():
    p = plan("http://user:pw@example.com:8080/v1?token=abc")
    assert p.describe()["url"] == "http://example.com:8080"
