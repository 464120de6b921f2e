"""The JobController contract: progress/result in order, failed(str), done exactly once and
last, cancel between yields (the generator's finally runs), superseded runs dropped."""

from __future__ import annotations

import threading
import time

import pytest

from rooflab.core.errors import ModelFileError
from rooflab.gui.jobs import JobController, Progress


@pytest.fixture
def jobs(qtbot):
    controller = JobController()
    yield controller
    controller.shutdown()


def _record(controller: JobController) -> list[tuple[str, object]]:
    events: list[tuple[str, object]] = []
    controller.progress.connect(lambda p: events.append(("progress", p.message)))
    controller.result.connect(lambda r: events.append(("result", r)))
    controller.failed.connect(lambda m: events.append(("failed", m)))
    controller.done.connect(lambda: events.append(("done", None)))
    return events


def test_progress_results_and_return_value_then_done(qtbot, jobs):
    def job():
        yield Progress("step 1", 0.5)
        yield 41
        return 42

    events = _record(jobs)
    with qtbot.waitSignal(jobs.done, timeout=5000):
        jobs.start(job())
    assert events == [("progress", "step 1"), ("result", 41), ("result", 42), ("done", None)]
    assert not jobs.busy


def test_rooflab_error_is_one_line_and_done_still_comes(qtbot, jobs):
    def job():
        yield Progress("reading")
        raise ModelFileError("bad.gguf", "wrong magic")

    events = _record(jobs)
    with qtbot.waitSignal(jobs.done, timeout=5000):
        jobs.start(job())
    assert events[-2:] == [("failed", "bad.gguf: wrong magic"), ("done", None)]
    assert jobs.last_error == "bad.gguf: wrong magic"


def test_unexpected_error_names_its_type(qtbot, jobs, caplog):
    def job():
        raise ZeroDivisionError("boom")
        yield  # pragma: no cover

    events = _record(jobs)
    with qtbot.waitSignal(jobs.done, timeout=5000):
        jobs.start(job())
    assert ("failed", "Unexpected error: ZeroDivisionError: boom") in events
    assert "job failed" in caplog.text


def test_cancel_stops_between_yields_and_runs_finally(qtbot, jobs):
    closed = threading.Event()
    yielded = []

    def job(cancel: threading.Event):
        try:
            for i in range(1000):
                yielded.append(i)
                yield Progress(f"{i}")
                time.sleep(0.005)
        finally:
            closed.set()

    events = _record(jobs)
    with qtbot.waitSignal(jobs.done, timeout=5000):
        jobs.start(job)
        qtbot.waitUntil(lambda: len(yielded) > 3, timeout=5000)
        started = time.perf_counter()
        jobs.cancel()
    assert time.perf_counter() - started < 1.0
    assert closed.is_set()
    assert len(yielded) < 1000
    assert not any(kind == "failed" for kind, _ in events)
    assert [kind for kind, _ in events].count("done") == 1


def test_starting_again_supersedes_the_running_job(qtbot, jobs):
    gate = threading.Event()

    def slow():
        gate.wait(5)
        yield "stale"

    def fast():
        yield "fresh"

    events = _record(jobs)
    jobs.start(slow())
    gate.set()
    jobs.start(fast())          # cancels and waits for the slow one: its done comes first
    qtbot.waitUntil(lambda: [kind for kind, _ in events].count("done") == 2, timeout=5000)
    results = [value for kind, value in events if kind == "result"]
    assert results == ["fresh"]
    assert [kind for kind, _ in events].count("done") == 2
