"""llama.cpp run in a child process (``child_job``, ``llamacpp.in_child``), as the window and the
command line run it: the points stream back as they are measured and equal the run's own; the
child's errors come back as the same one line; llama.cpp killed mid-run (a real signal, sent by
the child to itself through ``ROOFLAB_CHILD_CRASH``) leaves this process standing with one line
naming the signal and the points measured before; Cancel ends the child."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests.factories import needs

needs.llama_cpp(module_level=True)

from rooflab.core.errors import Cancelled, MeasurementError  # noqa: E402
from rooflab.core.io.gguf import read_gguf  # noqa: E402
from rooflab.core.jobs import Progress, run_job  # noqa: E402
from rooflab.core.measure.engines.child_job import CRASH_ENV, EngineCrashed, crash_after  # noqa: E402
from rooflab.core.measure.engines.engine import measure_in_llamacpp  # noqa: E402
from rooflab.core.measure.engines.llamacpp.in_child import (  # noqa: E402
    measure_llamacpp_in_child,
    plan_from_record,
    plan_record,
    planned_points,
)
from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan  # noqa: E402
from tests.factories.gguf_files import tiny_llama  # noqa: E402
from tests.factories.llm_configs import llama_config, random_gguf  # noqa: E402
from tests.factories.processes import children  # noqa: E402

# six points (two prompts, two depths, two batches) of a second or so on one thread
PLAN = LlamaCppPlan(threads=1, prompts=(8, 32), depths=(0, 32), gen_tokens=2, contexts=(16,), batches=(1, 2),
                    batch_steps=2, repeats=1, flash_attention=False, cache_type_k="q8_0", cache_type_v="f16")


@pytest.fixture(scope="module")
def dense(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return random_gguf(tmp_path_factory.mktemp("dense") / "dense-q8_0.gguf", llama_config(), "q8_0")


def test_the_plan_crosses_to_the_child_unchanged() -> None:
    assert plan_from_record(plan_record(PLAN)) == PLAN
    assert plan_from_record(plan_record(LlamaCppPlan())) == LlamaCppPlan()
    assert planned_points(PLAN) == 6
    assert planned_points(LlamaCppPlan(experiments=("prefill", "decode"))) == 3 + 3
    with pytest.raises(MeasurementError, match="malformed"):
        plan_from_record({"threads": 1, "speculate": True})


def test_points_stream_from_the_child_as_measured(dense: Path) -> None:
    seen: list[Progress] = []
    result = run_job(measure_llamacpp_in_child(dense, PLAN), seen.append)
    samples = [p.sample for p in seen if p.sample is not None]
    assert samples == list(result.points) and len(samples) == 6
    assert [p.kind for p in result.points] == ["prefill"] * 2 + ["decode"] * 2 + ["batch"] * 2
    # the child ran llama.cpp with the plan's settings, and says so in each point
    settings = result.settings
    assert (settings.engine, settings.threads, settings.flash_attention, settings.kv_type) == (
        "llama.cpp", 1, False, "q8_0/f16")
    assert all(p.settings == settings and p.source.startswith("llama.cpp ") for p in result.points)
    assert result.spec == read_gguf(dense) and result.path == str(dense)
    assert result.record()["points"] == [p.to_dict() for p in result.points]
    fractions = [p.fraction for p in seen if p.fraction is not None]
    assert fractions == sorted(fractions) and fractions[-1] == pytest.approx(1.0)
    assert not children()


def test_the_childs_errors_are_the_same_one_line(dense: Path, tmp_path: Path) -> None:
    with pytest.raises(MeasurementError, match="not enough memory for llama.cpp") as caught:
        run_job(measure_llamacpp_in_child(dense, PLAN, available=50e6))
    assert not isinstance(caught.value, EngineCrashed) and "\n" not in str(caught.value)
    novocab = tiny_llama(tmp_path / "novocab.gguf")          # rooflab reads it, llama.cpp refuses it
    with pytest.raises(MeasurementError, match="could not load") as caught:
        run_job(measure_llamacpp_in_child(novocab, PLAN))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("crash", "name", "kept"), [("SIGSEGV:3", "SIGSEGV", 3), ("SIGABRT:1", "SIGABRT", 1),
                                                     ("SIGILL:0", "SIGILL", 0)])
def test_llama_cpp_killed_mid_run_is_one_line_and_keeps_its_points(dense: Path, monkeypatch, crash, name,
                                                                    kept) -> None:
    monkeypatch.setenv(CRASH_ENV, crash)
    spec = read_gguf(dense)
    seen: list[Progress] = []
    with pytest.raises(EngineCrashed) as caught:
        run_job(measure_in_llamacpp(spec, dense, PLAN), seen.append)
    text = str(caught.value)
    assert text.startswith(f"llama.cpp was killed by {name}") and f"after {kept} of 6 points" in text
    assert "\n" not in text and caught.value.signal_name == name
    live = [p.sample for p in seen if p.sample is not None]
    assert len(live) == kept and list(caught.value.points) == live
    run = caught.value.run
    if kept:
        assert text.endswith(f"the {kept} are kept" if kept > 1 else "that one is kept")
        # the unfinished run holds the points as they were shown (judged), for the caller to keep
        assert run.points == tuple(live) and run.spec is spec and run.engine == "llamacpp"
        assert run.settings == live[0].settings and run.notes == (text,)
    else:
        assert run is None
    assert not children()


def test_cancel_mid_run_ends_the_child(dense: Path) -> None:
    """20 runs up 30 depths to 15,360 tokens: minutes were it not cancelled at the first point."""
    plan = LlamaCppPlan(threads=1, prompts=(16,), depths=tuple(512 * i for i in range(30)), repeats=20,
                        experiments=("prefill", "decode"))
    cancel = threading.Event()
    running: set[int] = set()
    job = measure_llamacpp_in_child(dense, plan, cancel)
    with pytest.raises(Cancelled):
        for progress in job:
            if progress.sample is not None:
                running = children()
                cancel.set()
    assert len(running) == os.path.isdir("/proc/self")   # the child was measuring
    assert not children()              # and is gone (its group ended, the child reaped)


def test_the_crash_setting_is_read_strictly() -> None:
    assert crash_after(None) is None and crash_after("") is None
    assert crash_after("sigsegv:3") == (crash_after("SIGSEGV:3") or (None,))[:2]
    with pytest.raises(MeasurementError, match="SIGSEGV:3"):
        crash_after("segfault please")


def test_a_long_request_reaches_the_child_through_a_file(dense: Path, monkeypatch) -> None:
    """A request past what one argument may hold (a large config.json, say) goes through a file,
    removed once the child is done."""
    import tempfile

    from rooflab.core.measure.engines import child_job

    made: list[str] = []

    class Recorded(tempfile.TemporaryDirectory):  # type: ignore[type-arg]
        def __enter__(self) -> str:
            made.append(super().__enter__())
            return made[-1]

    monkeypatch.setattr(child_job, "MAX_ARGUMENT", 16)
    monkeypatch.setattr(child_job.tempfile, "TemporaryDirectory", Recorded)
    plan = LlamaCppPlan(threads=1, prompts=(8,), depths=(0,), gen_tokens=1, repeats=1, experiments=("prefill",))
    assert [p.test for p in run_job(measure_llamacpp_in_child(dense, plan)).points] == ["pp8"]
    assert len(made) == 1 and not Path(made[0]).exists()
