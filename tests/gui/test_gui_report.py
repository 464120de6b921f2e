"""Reports: PNG per plot + composed sheet + CSV of every series drawn with a header block, from
the window (Ctrl+S's code path) and from ``rooflab report`` without a window; --screenshot."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

from PySide6.QtGui import QImage

from rooflab.core import __version__
from rooflab.core.io.presets import load_machine
from rooflab.core.report import CURVE_COLUMNS, SUMMARY_COLUMNS
from rooflab.core.report.chart_types import Curve
from rooflab.core.report.charts import CHART_KEYS
from rooflab.gui.main import main
from tests.factories.waits import WAIT_MS


def _columns(path: Path) -> list[str]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    return next(csv.reader(lines[:1]))


def _header(path: Path) -> str:
    return "\n".join(line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#"))


def test_save_report_writes_pngs_sheet_and_csvs(qtbot, window, tmp_path):
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.pin_current()
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.set_machine(load_machine("m4-max"))
    measured = Curve(key="step", label="measured", x=[1000, 4000], y=[0.02, 0.025], kind="points", role="measured",
                     x_name="context", x_unit="tokens", y_name="seconds", y_unit="s")
    window.plots["decode"].set_measured("step", [measured])
    with qtbot.waitSignal(window.report_saved, timeout=10000):
        files = window.save_report(tmp_path / "report")
    names = {p.name for p in files.all}
    for key in CHART_KEYS:
        assert f"{key}.png" in names
        image = QImage(str(tmp_path / "report" / f"{key}.png"))
        assert image.width() == 1200 and image.height() == 800
    sheet = QImage(str(files.sheet))
    assert sheet.width() > 2400 and sheet.height() > 2400
    assert "decode-step-current.csv" in names
    assert any(n.startswith("decode-step-pin-") for n in names)          # the pinned series too
    assert "decode-step-measured.csv" in names                           # and the measured one
    for path in files.csvs:
        assert path.stat().st_size > 0
    current = tmp_path / "report" / "prefill-ttft-current.csv"
    assert _columns(current) == list(CURVE_COLUMNS)
    header = _header(current)
    assert f"rooflab {__version__}" in header and "M4 Max" in header and "workload: prompt 2048" in header
    pinned = next(p for p in files.csvs if p.name.startswith("prefill-ttft-pin-"))
    assert "RTX 4090" in _header(pinned)                                  # its own machine
    assert _columns(tmp_path / "report" / "summary.csv") == list(SUMMARY_COLUMNS)


def test_report_command_writes_the_same_files_without_a_window(qapp, tmp_path, capsys):
    out = tmp_path / "cli-report"
    status = main(["report", "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", "--prompt", "4096",
                   "--batch", "4", "--out", str(out)])
    assert status == 0
    written = {Path(line).name for line in capsys.readouterr().out.split()}
    assert {f"{k}.png" for k in CHART_KEYS} | {"sheet.png", "summary.csv", "tensors.csv",
                                                "prefill-ttft-current.csv"} <= written
    header = _header(out / "batching-rate-current.csv")
    assert "batch 4" in header and "prompt 4096" in header
    assert not QApplication_top_level_windows_visible()
    # the RTX 4090's expected figures (its back end's published efficiency) beside the ceiling
    assert "expected.csv" in written
    assert any(n.startswith("decode-step-expected-") for n in written)
    expected = (out / "expected.csv").read_text()
    assert "expected with llama.cpp CUDA" in expected and "machines the calibration did not see" in expected
    assert "figure,expected,low,high,unit" in expected and "\ntpot," in expected


def QApplication_top_level_windows_visible() -> bool:  # noqa: N802 - reads as a question
    from PySide6.QtWidgets import QApplication

    return any(w.isVisible() for w in QApplication.topLevelWidgets())


def test_report_command_bad_model_is_one_line(qapp, tmp_path, capsys):
    status = main(["report", "--model", str(tmp_path / "missing.gguf"), "--machine", "rtx-4090",
                   "--out", str(tmp_path / "x")])
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rooflab: error:") and "missing.gguf" in err and "\n" not in err


def test_report_into_a_folder_that_cannot_be_made_is_one_line(qapp, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    status = main(["report", "--model", "qwen3-0.6b", "--machine", "rtx-4090", "--out", str(blocker / "report")])
    err = capsys.readouterr().err.strip()
    assert status == 2 and err.startswith("rooflab: error:") and "\n" not in err
    assert str(blocker / "report") in err and "cannot write the report" in err


def test_save_report_failure_shows_in_the_window_and_keeps_everything(qtbot, window, tmp_path, monkeypatch):
    from rooflab.gui.shell import menus
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    monkeypatch.setattr(menus, "choose_report_folder", lambda *a, **k: blocker / "report")
    before = (window.state.model, window.state.machine, window.state.workload)
    window.save_action.trigger()
    assert window.messages.level == "error" and "cannot write the report" in window.messages.text()
    assert (window.state.model, window.state.machine, window.state.workload) == before
    assert blocker.read_text(encoding="utf-8") == "not a folder"


def _run_rooflab(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", ROOFLAB_CONFIG_DIR=str(tmp_path / "cfg"),
               ROOFLAB_DATA_DIR=str(tmp_path / "data"))
    return subprocess.run([sys.executable, "-c", "import sys; from rooflab.gui.main import main; "
                           "sys.exit(main(sys.argv[1:]))", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def test_screenshot_flag_renders_the_window_and_exits(tmp_path, tiny_config):
    shot = tmp_path / "shot.png"
    result = _run_rooflab("gui", str(tiny_config), "--machine", "m4-pro", "--screenshot", str(shot),
                          tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    image = QImage(str(shot))
    assert image.width() >= 1000 and image.height() >= 600
    assert not (tmp_path / "cfg" / "settings.json").exists()        # a screenshot run saves nothing


def test_screenshot_to_a_path_that_cannot_be_written_is_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    result = _run_rooflab("gui", "--screenshot", str(blocker / "shot.png"), tmp_path=tmp_path)
    errors = [line for line in result.stderr.splitlines() if "propagateSizeHints" not in line]
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(errors) == 1
    assert errors[0].startswith(f"rooflab: error: {blocker / 'shot.png'}: cannot write the screenshot (")


def test_screenshot_with_a_bad_model_fails_cleanly(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + bytes(8))
    result = _run_rooflab("gui", str(bad), "--screenshot", str(tmp_path / "x.png"), tmp_path=tmp_path)
    assert result.returncode == 2
    assert "bad.gguf" in result.stderr and "Traceback" not in result.stderr


def test_the_sheet_keeps_every_number_however_many_there_are(qtbot, window, tmp_path):
    # a placed model with expected figures has 13 rows; the sheet's numbers cell used to stop at
    # its cell's bottom and drop the last ones (the Memory row): the sheet now grows to hold them
    from rooflab.core.io import load_model
    from rooflab.gui.export import report
    window.state.set_machine(load_machine("rtx-4090"))
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.set_model(load_model("gpt-oss-120b-mxfp4"), "gpt-oss-120b-mxfp4")
    window.recompute.add_band()
    files = window.save_report(tmp_path / "report")
    sheet = QImage(str(files.sheet))
    frame = window.recompute.frame
    lines = report._numbers_lines(frame)
    assert [line.key for line in lines][-1] == "memory" and len(lines) >= 12
    cell = QImage(str(files.pngs[0])).size()
    plots = len(files.pngs)
    top = 150 + (plots // report.SHEET_COLUMNS) * (cell.height() + 40)
    needed = report._numbers_height(lines, cell.width())
    assert needed > cell.height()                          # more than one cell's height of text ...
    assert sheet.height() >= top + needed                   # ... and the sheet holds it all
    # ink reaches below where the cell ended: the last rows were drawn
    x0 = 40 + (plots % report.SHEET_COLUMNS) * (cell.width() + 40)
    background = sheet.pixelColor(x0 + 5, sheet.height() - 5)
    inked = [y for y in range(top + cell.height(), sheet.height(), 2)
             if any(sheet.pixelColor(x, y) != background for x in range(x0, x0 + cell.width(), 7))]
    assert inked
