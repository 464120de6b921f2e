"""A report holds what the window shows (issue 20): the fit of the measured points and its
curves, the gap between them and the ceiling explained, the points a measurement distrusts,
each measured series' file named in full, and one file mode for every file, compare.* too."""

from __future__ import annotations

import csv
import stat

from rooflab.core.calibration.calibrate import calibrate
from rooflab.core.report.gaps import explain_gaps
from rooflab.core.values.measured import EngineSettings, MeasuredPoint
from rooflab.gui.controllers.measure_text import results_html
from rooflab.gui.export.report import FIT_FILE, plain_text

SETTINGS = EngineSettings(engine="llama.cpp", device="cuda", threads=8, gpu_layers=99, flash_attention=True,
                          kv_type="f16", batch_size=2048, ubatch_size=512)


def _points() -> list[MeasuredPoint]:
    prefill = [MeasuredPoint(kind="prefill", prompt=n, context=0, batch=1, seconds=n / 8000 + 0.01, settings=SETTINGS,
                             test=f"pp{n}", disturbed="the load average rose" if n == 512 else "")
               for n in (128, 512, 2048)]
    decode = [MeasuredPoint(kind="decode", prompt=1, context=c, batch=1, seconds=0.0025 + c * 1e-8, settings=SETTINGS,
                            test=f"tg128 @ d{c}") for c in (0, 4096, 16384)]
    return prefill + decode


def _rows(path) -> list[dict[str, str]]:
    return list(csv.DictReader(line for line in path.read_text(encoding="utf-8").splitlines()
                               if not line.startswith("#")))


def test_a_report_holds_the_fit_the_gaps_and_the_distrusted_points(qtbot, window, tmp_path):
    state, display = window.state, window.measure.display
    points = _points()
    cal = calibrate(state.model, state.machine, points)
    html = results_html(cal, explain_gaps(state.model, cal), (), SETTINGS.label)
    display.keep(points)
    display.set_calibration(cal, html=html)
    window.state.pin_current()                      # so compare.* are written too
    with qtbot.waitSignal(window.report_saved, timeout=20_000):
        files = window.save_report(tmp_path / "report")
    folder = files.folder
    names = {p.name for p in folder.iterdir()}
    # the fit's curves beside the measured points
    assert "decode-step-calibrated-llama.cpp-fit.csv" in names
    # a measured series named in full (it was cut at 60 characters: "...-fa-k.csv")
    measured = folder / "prefill-ttft-measured-llama.cpp-cuda-t8-ngl99-fa-kv-f16.csv"
    assert measured.is_file()
    rows = _rows(measured)
    assert {row["x"]: row["disturbed"] for row in rows} == {"128": "0", "512": "1", "2048": "0"}
    # the Measure tab's read-out: the fit and the gap explained, as shown
    fit = (folder / FIT_FILE).read_text(encoding="utf-8")
    assert fit == plain_text(window.measure_panel.results.text())
    assert "Between the ceiling and the measurement" in fit and "disturbed point" in fit
    # one file mode for every file, the comparison's included (written 0600 before)
    assert {"compare.csv", "compare.png"} <= names
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}
    assert len(set(modes.values())) == 1, modes
