"""bench_serving.py's record: a run kept as JSON prints again as the run printed it (the docs
print the committed one and compare). Nothing here starts a server or times anything."""

from __future__ import annotations

import dataclasses
import json
from types import ModuleType

import pytest

from rooflab.core.predict.serving import Lengths, Load, ServingPlan, serve
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload
from tests.factories.scripts import load_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench_serving")


def _record(bench: ModuleType, scale: float) -> dict:
    """A record whose passes measured the engine + overhead prediction, its latencies x ``scale``."""
    from rooflab.core.io.hf import spec_from_config

    machine = MachineProfile(name="box", bandwidth=20e9, peak_flops={"fp32": 100e9}, memory=64e9,
                             default_dtype="fp32", kind="cpu", cores=2, key="box",
                             efficiency=Efficiency(bandwidth=0.8, compute=0.5))
    spec = spec_from_config(bench.CONFIG, weights="q8_0", name=bench.NAME)
    loads = (Load(mode="concurrency", level=1), Load(mode="concurrency", level=2), Load(mode="rate", level=0.5))
    plan = ServingPlan(prompt=Lengths(mean=64), answer=Lengths(mean=16), slots=1, step_tokens=bench.N_BATCH,
                       requests=8, step_overhead=1e-3, request_overhead=0.02)
    levels = serve(spec, machine, Workload(prompt=64, answer=16), plan, loads).levels
    measured = [dataclasses.replace(lv, ttft=dataclasses.replace(lv.ttft, p50=lv.ttft.p50 * scale)) for lv in levels]
    one = {"levels": [{"stats": lv.to_dict(), "problems": []} for lv in measured]}
    two = {"levels": [{"stats": lv.to_dict(), "problems": [["timeout after 60 s", 1]] if i == 2 else []}
                      for i, lv in enumerate(measured)]}
    return {"date": "2026-12-07 05:30 UTC", "argv": ["--quick"], "load_before": "1.00 1.00 1.00",
            "load_after": "2.00 2.00 2.00", "seconds": 300, "machine": machine.to_dict(),
            "calibration": "calibration (12 points): bandwidth x0.80", "prompt": 64, "answer": 16, "requests": 8,
            "threads": 1, "loads": [[ld.mode, ld.level] for ld in loads], "probes": [[1e-3, 0.02], [1e-3, 0.02]],
            "prompt_method": "the server's tokenizer", "passes": [one, two]}


def test_a_record_prints_as_its_run_printed_it(bench, tmp_path, capsys, monkeypatch):
    """Measured as the engine + the server's overhead predicts: that table's errors are 0 at
    every level; TTFT measured 25 % longer: -20 % (predicted / measured - 1). A level's error
    lines are printed under it, once per pass that had them."""
    lines = bench.render(_record(bench, 1.0))
    assert lines[0] == "run 2026-12-07 05:30 UTC: bench_serving.py --quick"
    assert "server overhead, pair 2 of one-client probes: 1.00 ms per step, 20.0 ms per request" in lines
    with_server = lines.index(next(x for x in lines if x.startswith("predicted: the engine + the server's")))
    rows = [x for x in lines[with_server:] if x.lstrip().startswith(("c=", "0.5/s"))]
    assert len(rows) == 3 and all(x.count("  +0%") == 4 for x in rows), rows
    assert lines.count("           1 x timeout after 60 s") == 2            # under both tables' rate level
    assert "  worst error below saturation: 0% (target within 20 %)" in lines
    assert lines[-1] == "load average after: 2.00 2.00 2.00; 300 s in all"
    slow = bench.render(_record(bench, 1.25))
    rows = [x for x in slow[slow.index(next(x for x in slow if x.startswith("predicted: the engine + "))):]
            if x.lstrip().startswith("c=1 ")]
    assert rows[0].split()[4] == "-20%" and rows[0].split()[7] == "+0%", rows
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_record(bench, 1.0)))
    monkeypatch.setattr("sys.argv", ["bench_serving.py", "--from-record", str(path)])
    assert bench.main() == 0
    assert capsys.readouterr().out.splitlines() == lines
