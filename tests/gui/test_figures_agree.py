"""One figure, one number: ``rooflab predict`` (JSON and text), ``rooflab report``'s summary.csv
and the window (its numbers panel and the markers it draws) show the same n*, TTFT, TPOT,
batch crossover and largest batch that fits, for one scenario at several batches and contexts.

(n* once had two answers: 154.1 tokens from ``predict``, which ignored batch and context, and
49.8 from the report and the window for qwen3-8b-q4_k_m on dgx-spark at batch 4, context 4,096.)"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from rooflab.core.app.resolve import resolve_workload
from rooflab.core.cli.parser import build_parser
from rooflab.core.io.presets import load_machine
from rooflab.core.report import units
from rooflab.gui.main import main
from tests.factories.waits import WAIT_MS
from tests.gui.conftest import catalogue_spec

MODEL, MACHINE = "qwen3-8b-q4_k_m", "dgx-spark"
# (batch, context): the lessons' n* (batch 1, nothing cached), the issue's scenario, a long
# cached context, and a batch past the decode crossover's neighbourhood
SCENARIOS = [(1, 0), (4, 4096), (16, 32768), (64, 512)]


def _summary_csv(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    return {row["quantity"]: row["value"] for row in csv.DictReader(lines)}


def _inf(value: float | None) -> float:
    """JSON writes an unreached crossover as null."""
    return math.inf if value is None else value


@pytest.mark.parametrize("batch, context", SCENARIOS)
def test_predict_report_and_window_show_the_same_figures(qtbot, window, capsys, tmp_path, batch, context):
    args = ["--model", MODEL, "--machine", MACHINE, "--batch", str(batch), "--context", str(context)]

    assert main(["predict", *args, "--json", "--contexts", "0", "--batches", "1", "--prompts", "1"]) == 0
    predicted = json.loads(capsys.readouterr().out)
    assert main(["predict", *args]) == 0
    text = capsys.readouterr().out
    assert main(["report", *args, "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    reported = _summary_csv(tmp_path / "summary.csv")

    workload = resolve_workload(build_parser().parse_args(["predict", *args]))
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS) as drawn:
        window.state.set_model(catalogue_spec(MODEL), ref=MODEL)
        window.state.set_machine(load_machine(MACHINE))
        window.state.set_workload(workload)
    frame = drawn.args[0]
    assert frame.scenario.workload == workload
    shown, numbers = frame.summary, window.numbers

    # the headline is the placement's (auto-fit's: all on this machine's memory), everywhere
    placement = predicted["placement"]
    n_star = placement["prefill_crossover_tokens"]
    assert n_star is not None and 1 < n_star < 1e4
    assert shown.headline_prefill_crossover == n_star
    assert float(reported["placed_prefill_crossover"]) == pytest.approx(n_star, rel=1e-9)
    assert f"prefill turns compute-bound at n* = {n_star:,.1f} tokens" in text
    assert numbers.value_text("n_star") == f"{n_star:,.0f} tokens"
    assert frame.charts["prefill"].panel("ttft").curve("n_star").x[0] == n_star
    # the one-memory n* beside it (the lessons' closed form) is the same crossing, said to be so
    assert predicted["prefill_crossover_tokens"] == shown.prefill_crossover == pytest.approx(n_star, rel=1e-6)

    request = predicted["request"]
    for key, value in (("ttft", request["ttft_seconds"]), ("tpot", request["tpot_seconds"])):
        assert getattr(shown.estimate, key) == value
        assert float(reported[key]) == pytest.approx(value, rel=1e-9)
        assert numbers.value_text(key) == units.fmt(value, "s")

    b_star = _inf(placement["batch_crossover"])
    assert shown.headline_batch_crossover == pytest.approx(b_star)
    if math.isinf(b_star):
        assert reported["placed_batch_crossover"] == "never"       # summary.csv's word for unreached
    else:
        assert float(reported["placed_batch_crossover"]) == pytest.approx(b_star, rel=1e-9)
    fits = placement["max_batch_that_fits"]
    if math.isinf(b_star):
        assert numbers.value_text("batch_crossover") == "none"
    elif b_star > fits:
        assert numbers.value_text("batch_crossover").startswith(f"{b_star:,.0f} sequences (only ")
    else:
        assert numbers.value_text("batch_crossover") == f"{b_star:,.0f} sequences"

    # the largest batch as placed (its compute buffer and reserve counted), not the one-memory count
    assert shown.headline_max_batch == fits == int(reported["placed_max_batch_that_fits"]) <= shown.max_batch
    assert f"as placed, {fits:,} sequences of" in text
    assert f"at most {fits:,} such sequences fit" in next(line.sentence for line in numbers.lines
                                                          if line.key == "memory")
    assert frame.charts["batching"].panel("rate").curve("max_fit").x[0] == fits


def test_a_placement_by_hand_gives_the_same_figures_everywhere(qtbot, window, capsys, tmp_path):
    # -ngl 37 --n-cpu-moe 30 through predict, report and the window's Placement group
    from rooflab.core.predict.choice import PlacementChoice

    args = ["--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--gpu-layers", "37", "--cpu-moe", "30"]
    assert main(["predict", *args, "--json", "--contexts", "0", "--batches", "1", "--prompts", "1"]) == 0
    predicted = json.loads(capsys.readouterr().out)
    assert main(["report", *args, "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    reported = _summary_csv(tmp_path / "summary.csv")
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS) as drawn:
        window.state.set_model(catalogue_spec("gpt-oss-120b-mxfp4"), ref="gpt-oss-120b-mxfp4")
        window.state.set_machine(load_machine("rtx-4090"))
        window.state.set_workload(resolve_workload(build_parser().parse_args(["predict", *args])))
        window.state.set_placement(PlacementChoice(gpu_layers=37, cpu_moe=30))
    s = drawn.args[0].summary
    placement = predicted["placement"]
    assert placement["flags"] == reported["placement"] == s.placed.placement.flags() == "-ngl 37 --n-cpu-moe 30"
    for key in ("ttft", "tpot"):
        value = predicted["request"][f"{key}_seconds"]
        assert getattr(s.estimate, key) == value and float(reported[key]) == pytest.approx(value, rel=1e-9)
    assert placement["prefill_crossover_tokens"] == pytest.approx(s.headline_prefill_crossover)
    assert float(reported["placed_prefill_crossover"]) == pytest.approx(s.headline_prefill_crossover, rel=1e-9)
    assert placement["batch_crossover"] == pytest.approx(s.headline_batch_crossover)
    assert placement["max_batch_that_fits"] == int(reported["placed_max_batch_that_fits"]) == s.headline_max_batch
    assert window.numbers.value_text("n_star") == f"{s.headline_prefill_crossover:,.0f} tokens"
