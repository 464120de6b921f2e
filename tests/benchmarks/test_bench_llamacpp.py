"""bench_llamacpp.py's record: a run kept as JSON prints again as the run printed it, each
point beside the ceiling rooflab predicts for it on the kept machine. Nothing is timed here."""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from rooflab.core.calibration.calibrate import predict_points
from rooflab.core.io.hf import spec_from_config
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import MeasuredPoint
from tests.factories.scripts import load_script

MACHINE = MachineProfile(name="box", bandwidth=20e9, peak_flops={"fp32": 100e9}, memory=64e9, default_dtype="fp32",
                         kind="cpu", cores=2, key="box")


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench_llamacpp")


def test_a_record_prints_each_point_beside_its_ceiling(bench, tmp_path, capsys, monkeypatch):
    """A point timed at exactly half its ceiling's time runs at 200.0 % of it; a disturbed one says so."""
    shape = "dense (llama)"
    spec = spec_from_config(bench.SHAPES[shape], weights="q4_k_m", name=f"{shape} Q4_K_M")
    plan = [MeasuredPoint(kind="prefill", prompt=64, context=0, batch=1, seconds=1.0, stdev=0.01, repeats=3),
            MeasuredPoint(kind="decode", prompt=1, context=7, batch=1, seconds=1.0, stdev=0.3, repeats=3,
                          disturbed="spread 30%")]
    ceiling = predict_points(spec, MACHINE, plan, kv_type="f16")
    points = [MeasuredPoint.from_dict({**p.to_dict(), "seconds": float(c) / 2}) for p, c in zip(plan, ceiling,
                                                                                                strict=True)]
    run = {"date": "2026-12-07 05:58 UTC", "argv": ["--quick"], "load_before": "1.70 2.46 3.64",
           "load_after": "4.06 3.02 3.73", "seconds": 94, "threads": 2, "machine": MACHINE.to_dict(),
           "models": [{"shape": shape, "weights": "q4_k_m", "settings": "llama.cpp, 2 threads", "kv_type": "f16",
                       "points": [p.to_dict() for p in points]}]}
    lines = bench.render(run)
    assert lines[:3] == ["run 2026-12-07 05:58 UTC: bench_llamacpp.py --quick",
                         "machine: box: 20.0 GB/s, 400 GFLOP/s int8 (the ceiling's figures)",
                         "llama.cpp threads 2; load average before: 1.70 2.46 3.64"]
    rows = [x for x in lines if x.startswith(("  prefill", "  decode"))]
    assert [r.split()[0] for r in rows] == ["prefill", "decode"]
    assert all(r.split()[7] == "200.0%" for r in rows), rows
    assert rows[1].endswith("  disturbed") and not rows[0].endswith("disturbed")
    assert lines[-1] == "load average after: 4.06 3.02 3.73; 94 s in all"
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    monkeypatch.setattr("sys.argv", ["bench_llamacpp.py", "--from-record", str(path)])
    assert bench.main() == 0
    assert capsys.readouterr().out.splitlines() == lines
