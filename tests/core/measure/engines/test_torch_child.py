"""torch run in a child process (``torch.in_child``), as the window and the command line run it:
the points stream back as measured and the measurement is the one the child made (the model as
it ran); the child's errors are the same one line; the child killed mid-run (a real signal,
``ROOFLAB_CHILD_CRASH``) leaves this process standing with one line naming it; Cancel ends it."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rooflab.core.errors import Cancelled, MeasurementError  # noqa: E402
from rooflab.core.jobs import Progress, run_job  # noqa: E402
from rooflab.core.measure.engines.child_job import CRASH_ENV, EngineCrashed  # noqa: E402
from rooflab.core.measure.engines.engine import measure_in_torch  # noqa: E402
from rooflab.core.measure.engines.torch.in_child import measure_model_in_child, planned_points  # noqa: E402
from rooflab.core.measure.engines.torch.models import resolve_source  # noqa: E402
from rooflab.core.measure.engines.torch.timing import ModelPlan  # noqa: E402

TINY_QWEN3 = {"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512,
              "tie_word_embeddings": True}
# four prompt points, two decode points, two batch points
PLAN = ModelPlan(threads=1, prompts=(1, 16), decode_steps=2, repeats=1, max_repeats=1, contexts=(4,), batches=(1, 2),
                 batch_steps=1, overhead_probe=False)


def test_points_stream_from_the_child_and_the_model_as_it_ran_comes_back() -> None:
    assert planned_points(PLAN) == 6
    seen: list[Progress] = []
    run = run_job(measure_model_in_child(TINY_QWEN3, PLAN), seen.append)
    samples = [p.sample for p in seen if p.sample is not None]
    assert samples == list(run.points) and [p.kind for p in run.points] == ["prefill", "decode"] * 2 + ["batch"] * 2
    assert run.threads == 1 and run.dtype == "fp32" and run.label == resolve_source(TINY_QWEN3).label
    assert run.spec.layers == 2 and run.spec.hidden == 64
    assert run.record()["points"] == [p.to_dict() for p in run.points]


def test_the_childs_errors_are_the_same_one_line() -> None:
    with pytest.raises(MeasurementError, match="not enough") as caught:
        run_job(measure_model_in_child(TINY_QWEN3, PLAN, available=1e3))
    assert not isinstance(caught.value, EngineCrashed) and "\n" not in str(caught.value)


def test_torch_killed_mid_run_is_one_line(monkeypatch) -> None:
    monkeypatch.setenv(CRASH_ENV, "SIGKILL:2")
    seen: list[Progress] = []
    with pytest.raises(EngineCrashed) as caught:
        run_job(measure_in_torch(TINY_QWEN3, PLAN), seen.append)
    # the model as it ran is the child's: its points are not kept, and the line does not say so
    assert str(caught.value) == ("torch was killed by SIGKILL (the system's out-of-memory killer ends a process "
                                 "this way) after 2 of 6 points")
    assert caught.value.run is None and len([p for p in seen if p.sample is not None]) == 2


def test_cancel_ends_the_child() -> None:
    cancel = threading.Event()
    plan = ModelPlan(threads=1, prompts=(1, 1024, 2048, 4096), decode_steps=8, repeats=50, max_repeats=50,
                     overhead_probe=False, experiments=("prefill", "decode"))
    with pytest.raises(Cancelled):
        for progress in measure_model_in_child(TINY_QWEN3, plan, cancel):
            if progress.sample is not None:
                cancel.set()
