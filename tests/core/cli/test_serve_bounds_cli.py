"""The serving simulation's size bounds (issue 34, K): ``predict --serve`` and ``compare --serve``
at their option extremes end in one line and exit status 2, before simulating, instead of
running for minutes; a size just inside the bound still runs. The bound itself is a count of
simulated requests and of scheduler steps (``serving.MAX_SIMULATED``, ``MAX_LOOPS``), never a
clock, so the tests do not depend on the machine's speed."""

from __future__ import annotations

import json
import time

import pytest

from rooflab.core.cli.main import main
from rooflab.core.errors import SpecError
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.serving import (
    MAX_LOOPS,
    MAX_SIMULATED,
    Lengths,
    Load,
    ServingPlan,
    clock_for,
    serve,
    simulate,
    simulated_requests,
)
from rooflab.core.values.workload import Workload
from tests.conftest import build_spec

MODEL = ("--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", "--ceiling-only")
LEVELS = ",".join(str(c) for c in range(1, 65))          # 64 levels, the most an option takes
BOUND = 60.0             # seconds; 64 levels x 100,000 requests ran 143 s before any bound


def run(capsys, *argv):
    began = time.perf_counter()
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err and time.perf_counter() - began < BOUND
    return code, out, err


def one_line(code, err, says):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("rooflab: error:") and says in lines[0], err


def test_predict_serve_levels_times_requests(capsys):
    code, out, err = run(capsys, "predict", *MODEL, "--serve", "--concurrency", LEVELS, "--requests", "100000")
    one_line(code, err, f"would simulate 6,500,000 requests (levels x requests, and the saturating level); at most "
                        f"{MAX_SIMULATED:,}")
    assert out == ""


def test_predict_serve_long_prompts_at_one_token_a_step(capsys):
    code, out, err = run(capsys, "predict", "--model", "llama-3.2-1b-q4_k_m", "--machine", "rtx-4090",
                         "--ceiling-only", "--prompt", "100000", "--serve", "--concurrency", "1", "--slots", "1",
                         "--step-tokens", "1", "--requests", "16")
    one_line(code, err, "the serving simulation needs over")
    assert "--step-tokens" in err


def test_compare_serve_is_bounded_by_its_rows(capsys):
    code, out, err = run(capsys, "compare", "--ceiling-only", "--models", "qwen3-8b-q4_k_m,llama-3.2-1b-q4_k_m",
                         "--machines", "rtx-4090,m4-max", "--serve", "--concurrency", "1,2", "--requests", "100000")
    one_line(code, err, "compare --serve (4 rows) would simulate")


def test_a_size_inside_the_bound_runs(capsys):
    code, out, _ = run(capsys, "predict", *MODEL, "--serve", "--concurrency", "1,2", "--requests", "2000")
    assert code == 0 and "c=2" in out


def test_steps_past_the_budget_stop_the_simulation():
    """Spread prompts can pass the step bound the mean passed: the loop itself stops."""
    spec, machine = build_spec(), load_machine("rtx-4090")
    workload = Workload(prompt=64, answer=4)
    plan = ServingPlan(prompt=Lengths(mean=64), answer=Lengths(mean=4), slots=4, step_tokens=4, requests=64)
    clock = clock_for(spec, machine, workload, plan)
    with pytest.raises(SpecError, match="passed"):
        simulate(clock, plan, Load(mode="concurrency", level=4), max_loops=100)
    full = simulate(clock, plan, Load(mode="concurrency", level=4))
    assert 100 < full.iterations < MAX_LOOPS
    assert simulated_requests(plan, (Load(mode="rate", level=1.0),)) == 64 + 64
    assert serve(spec, machine, workload, plan, (Load(mode="rate", level=1.0),)).levels[0].completed == 64


def test_a_large_grid_is_written_compact_and_whole(capsys):
    # predict --json priced its expected rows per row over whole grids (quadratic) and indented
    # them in pure Python: 100,000 rows ran past 200 s. Past a megabyte the JSON is compact; the
    # speed itself is benchmarks/speed/bench_predict_grid.py's to print
    contexts = ",".join(str(64 * i) for i in range(60))
    batches = ",".join(str(b) for b in range(1, 51))
    assert main(["predict", "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", "--contexts", contexts,
                 "--batches", batches, "--json"]) == 0
    out = capsys.readouterr().out
    document = json.loads(out)
    assert len(document["decode"]) == 3000 and out.count("\n") == 1          # one line: compact
    first, last = document["decode"][0], document["decode"][-1]
    assert (first["context"], first["batch"], last["context"], last["batch"]) == (0, 1, 64 * 59, 50)
    assert last["expected_seconds_low"] <= last["expected_seconds"] <= last["expected_seconds_high"]
    assert main(["predict", "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", "--json"]) == 0
    assert capsys.readouterr().out.startswith("{\n  ")                         # a small one stays indented
