"""A measurement whose points were timed once has no spread, so it is not fitted: ``measure
model --repeats 1`` printed a fit ("bandwidth 0.5 of 89.6 GB/s", a batch of 2 "81 % faster than
the calibrated roof", a spread of 0.0 %). Now it prints each point beside its ceiling, says why
nothing was fitted, keeps the points (unless --no-save) and keeps no calibration; two repeats
fit as before (tests/core/cli/test_measure_cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

from rooflab.core.calibration import store
from rooflab.core.cli.main import main
from rooflab.core.io import load_model
from rooflab.core.measure.workflow import unrepeated
from rooflab.core.values.measured import MeasuredPoint
from tests.core.cli.test_measure_cli import _tiny_gguf
from tests.factories import needs

# llama.cpp times each prompt and each generation once per repeat (torch repeats a short point
# until it has taken a while, so its points have a spread at --repeats 1 too)
SWEEP = ["--engine", "llamacpp", "--prompts", "8", "--depths", "0", "--contexts", "16", "--batches", "1",
         "--steps", "2", "--threads", "1", "--machine", "reference-cpu", "--include-disturbed"]


def test_one_repeat_is_kept_and_not_fitted(tmp_path: Path, capsys, monkeypatch, steady_timings):
    needs.llama_cpp()
    monkeypatch.setenv("ROOFLAB_DATA_DIR", str(tmp_path / "data"))
    config = _tiny_gguf(tmp_path)
    assert main(["measure", "model", str(config), *SWEEP, "--repeats", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["calibration"] is None and "timed once" in out["not_fitted"]
    points = out["measurement"]["points"]
    assert len(out["ceiling_seconds"]) == len(points) and all(c > 0 for c in out["ceiling_seconds"])
    key = store.model_key(load_model(config))
    assert store.load_calibration(key, "reference-cpu") is None                    # nothing fitted is kept
    assert len(store.load_measurements(key, "reference-cpu")[0]["points"]) == len(points)   # the points are
    assert main(["measure", "model", str(config), *SWEEP, "--repeats", "1", "--no-save"]) == 0
    text = capsys.readouterr().out
    assert "not fitted:" in text and "no spread" in text and "  fitted (" not in text and "points are kept" not in text


def test_the_rule():
    def point(repeats: int) -> MeasuredPoint:
        return MeasuredPoint(kind="decode", prompt=1, context=8, batch=1, seconds=0.01, repeats=repeats)

    assert unrepeated([point(3), point(2)]) == ""
    assert unrepeated([point(1), point(1)]).startswith("every point was timed once")
    assert unrepeated([point(1), point(4)]).startswith("1 of 2 points were timed once")
