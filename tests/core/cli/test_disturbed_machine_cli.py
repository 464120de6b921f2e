"""On a fresh data folder ``measure model`` measures the machine first; when that measurement is
judged disturbed (bandwidth runs 44 % apart on a shared VM), the model is timed all the same and
the output says what the missing profile leaves out (the ceiling, the fit): it exited 2 having
timed nothing. And ``--machine measured`` after such a run names it and what to do (it said "no
measured machine yet", as if none had run). Which run is disturbed comes from a given judge, not
from this machine's load."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from rooflab.core.calibration import store
from rooflab.core.cli.main import main
from rooflab.core.io import load_model, presets
from rooflab.core.measure import workflow
from rooflab.core.measure.machine import benchmark
from tests.core.cli.test_measure_cli import TINY

REASON = "triad bandwidth runs differ by 44 % (limit 25 %)"


def _disturbed(run, references=()):
    return dataclasses.replace(run, disturbed=REASON)


def test_the_model_is_timed_without_a_profile_and_fit_says_why(tmp_path: Path, capsys, monkeypatch, steady_timings):
    monkeypatch.setenv("ROOFLAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(workflow, "judge_machine", _disturbed)
    plan = benchmark.MachinePlan            # a small machine measurement: this test is about what follows it
    monkeypatch.setattr(benchmark, "MachinePlan", lambda **kw: plan(**{**kw, "threads": 1, "buffer_bytes": 4 << 20,
                                                                         "repeats": 1, "dtypes": ("fp32",),
                                                                         "matmul_max": 256}))
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    argv = ["measure", "model", str(config), "--engine", "torch", "--prompts", "1,8", "--contexts", "4",
            "--batches", "1", "--repeats", "2", "--steps", "2", "--threads", "1"]
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert REASON in captured.err and "timing the model all the same" in captured.err
    assert out["machine"] is None and out["calibration"] is None and out["ceiling_seconds"] is None
    assert "no trusted profile" in out["not_fitted"] and out["measurement"]["points"]
    assert presets.load_measured_machine() is None and presets.disturbed_machine_path().is_file()
    assert store.load_calibration(store.model_key(load_model(config)), "measured") is None
    # the machine's name leads to the run set aside, and to what to do
    assert main(["fit", "--machine", "measured"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "set aside as disturbed" in line and REASON in line and "rooflab measure machine" in line
    assert str(presets.disturbed_machine_path()) in line
