"""One edit's cost: building every chart and the summary for the default scenario (the
recompute), recompute + redraw of what is on screen (the plot tab shown and the numbers; the
other tabs redraw when shown), and the same with all five plots redrawn. Target: well under
one 60 Hz frame (16.7 ms) for the recompute and the on-screen redraw together.

    python benchmarks/speed/bench_gui_recompute.py [--repeats 50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

FRAME_MS = 1000 / 60


def _time(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1e3)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()

    from PySide6.QtWidgets import QApplication

    import rooflab.gui  # noqa: F401  (Qt binding, PySide6 work-around; before any Qt call)
    from rooflab.core.app.figures import summarise
    from rooflab.core.calibration.expectations import expected_on
    from rooflab.core.io import load_model
    from rooflab.core.io.presets import load_machine
    from rooflab.core.report.chart_types import Scenario
    from rooflab.core.report.expected import expected_request
    from rooflab.core.report.overlays import expected_curves
    from rooflab.core.report.summary import headline_charts
    from rooflab.core.values.defaults import DEFAULT_MACHINE, DEFAULT_MODEL, DEFAULT_WORKLOAD
    from rooflab.gui.shell.main_window import MainWindow
    from rooflab.gui.state.app_state import AppState
    from rooflab.gui.state.settings import Settings

    app = QApplication.instance() or QApplication([])
    spec, machine = load_model(DEFAULT_MODEL), load_machine(DEFAULT_MACHINE)
    sc = Scenario(model=spec, machine=machine, workload=DEFAULT_WORKLOAD)
    def recompute() -> None:                  # what RecomputeController does
        summary = summarise(sc)
        headline_charts(sc, summary)
        expected = expected_on(spec, machine)      # the preset's published back-end efficiency
        if expected is not None:
            expected_curves(spec, expected, DEFAULT_WORKLOAD, replicas=0, n_star=summary.prefill_crossover)
            expected_request(spec, expected, DEFAULT_WORKLOAD)

    compute = _time(recompute, args.repeats)

    state = AppState(spec, machine, DEFAULT_WORKLOAD)
    window = MainWindow(state, Settings(), persist=False)
    window.resize(1480, 940)
    window.show()
    app.processEvents()
    prompts = iter(range(1000, 10**9, 7))

    def edit() -> None:
        state.update_workload(prompt=next(prompts))
        window.recompute.recompute_now()

    def edit_all() -> None:
        edit()
        window.flush_plots()

    redraw = _time(edit, args.repeats)
    redraw_all = _time(edit_all, args.repeats)
    state.pin_current()
    state.update_workload(batch=8)
    pinned = _time(edit, args.repeats)
    window.close()
    window.deleteLater()
    app.processEvents()
    for name, values in (("recompute (charts + summary)", compute), ("recompute + on-screen redraw", redraw),
                         ("… with one pinned series", pinned), ("recompute + all five plots", redraw_all)):
        print(f"{name:32s} median {statistics.median(values):6.2f} ms   p90 "
              f"{sorted(values)[int(0.9 * len(values))]:6.2f} ms")
    print(f"one 60 Hz frame: {FRAME_MS:.1f} ms")
    return 0 if statistics.median(redraw) < FRAME_MS else 1


if __name__ == "__main__":
    raise SystemExit(main())
