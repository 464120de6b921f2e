"""One answer for one set-up (issue 39): the numbers panel, a pinned row of the Compare table, the
report's summary.csv and ``rooflab predict --json`` give the same TTFT, TPOT, fit and largest
batch, and the pinned series' charts draw the same TPOT, for placements of every kind: auto-fit
all on the card, auto-fit sending layers to the host (a reserve and a large batch), by hand, one
that does not fit, a Mac's reserve sending experts to the SSD, and several devices.

Before, the panel and the charts stood on the model in the card's memory alone: Qwen3-8B
Q4_K_M on an RTX 4090, prompt 5,600, batch 23 read TPOT 23.9 ms in the panel and 44.1 ms pinned,
in the report and from ``predict``, whose placement keeps 35 of 37 layers on the GPU."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rooflab.core.app.resolve import choice_from, resolve_machine, resolve_workload
from rooflab.core.cli.parser import build_parser
from rooflab.core.io import load_model
from rooflab.core.report import units
from rooflab.gui.main import main
from tests.factories.waits import WAIT_MS

CASES = {
    "auto, all on the card": ["--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090"],
    "auto, a reserve and 23 x 5,600 tokens": ["--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090",
                                              "--prompt", "5600", "--batch", "23"],
    "auto, a large batch": ["--model", "qwen3-30b-a3b-q4_k_m", "--machine", "rtx-4090", "--batch", "256"],
    "by hand": ["--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--gpu-layers", "37", "--cpu-moe", "30"],
    "does not fit": ["--model", "llama-3.3-70b-q4_k_m", "--machine", "rtx-4090", "--gpu-layers", "81"],
    "a Mac's reserve": ["--model", "glm-4.5-air-q4_k_m", "--weights", "q8_0", "--machine", "m3-max"],
    "two devices, tensor parallel": ["--model", "llama-3.3-70b-q4_k_m", "--machine", "h100-sxm", "--devices", "2",
                                     "--parallel", "tensor"],
    "two devices and host memory": ["--model", "llama-3.3-70b-q4_k_m", "--machine", "rtx-4090", "--devices", "2",
                                    "--gpu-layers", "60"],
}


def _summary_csv(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    return {row["quantity"]: row["value"] for row in csv.DictReader(lines)}


@pytest.mark.parametrize("case", list(CASES))
def test_panel_pin_report_and_predict_agree(qtbot, window, capsys, tmp_path, case):
    argv = CASES[case]
    assert main(["predict", *argv, "--json", "--contexts", "0", "--batches", "1", "--prompts", "512"]) == 0
    predicted = json.loads(capsys.readouterr().out)
    assert main(["report", *argv, "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    reported = _summary_csv(tmp_path / "summary.csv")

    args = build_parser().parse_args(["predict", *argv])
    spec = load_model(args.model, weights=args.weights)
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS) as drawn:
        window.state.set_model(spec, ref=args.model)
        window.state.set_machine(resolve_machine(args, spec))
        window.state.set_workload(resolve_workload(args))
        window.state.set_placement(choice_from(args))
    frame = drawn.args[0]
    s, numbers = frame.summary, window.numbers

    compare = window.compare_view.controller
    compare.set_active(True)
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS) as pinned_frame:
        window.state.pin_current()
    (row,) = compare.rows
    pinned_charts = pinned_frame.args[0].pinned[0][1]

    fits = predicted["fits"]
    assert s.placed.fits is fits is row.fits
    assert reported["placement_fits"] == ("yes" if fits else "no")
    largest = predicted["placement"]["max_batch_that_fits"]
    assert s.headline_max_batch == largest == int(reported["placed_max_batch_that_fits"])
    if not fits:
        # nothing to show as if it ran, anywhere
        assert numbers.value_text("placement") == "does NOT fit"
        assert "ttft" not in [line.key for line in numbers.lines]
        assert row.ttft is None and row.tpot is None
        assert all(not panel.curves for panel in pinned_charts["decode"].panels)
        return
    request = predicted["request"]
    for key in ("ttft", "tpot"):
        value = request[f"{key}_seconds"]
        assert getattr(s.estimate, key) == value, key                       # the window's summary
        assert float(reported[key]) == pytest.approx(value, rel=1e-9), key   # the report
        assert getattr(row, key) == pytest.approx(value, rel=1e-9), key     # the pinned row
        assert numbers.value_text(key) == units.fmt(value, "s"), key        # the panel
    # the expected figure: the calibration for the engine that runs it (tensor parallel is vLLM's,
    # which no preset has: none anywhere), on the placement
    expected = request.get("expected_tpot_seconds")
    shown = [line.value for line in numbers.lines if line.key == "expected_tpot"]
    if expected is None:
        assert shown == [] and row.expected_tpot is None
    else:
        assert shown == [units.fmt(expected, "s")] and row.expected_tpot == pytest.approx(expected, rel=1e-9)
    # the charts of the series on screen and of its pin draw the same step
    for charts in (frame.charts, pinned_charts):
        assert charts["decode"].panel("step").curve("tpot").y[0] == pytest.approx(request["tpot_seconds"])
    # the panel's memory row reads the placement's bill (its fullest device's), as predict's does
    fullest = max(device["used_bytes"] for device in predicted["placement"]["devices"])
    assert numbers.value_text("memory").startswith(units.fmt(fullest, "B"))
