"""Measure a model in the window and render it: the picture of measured points on the
predicted curves (with the calibrated prediction dotted) that the README shows, and how long
the Measure tab took to produce it.

Times a random-weight Qwen3-0.6B-shaped model (fp32, one thread) through the Measure tab's own
controls, against this machine measured first, then saves one PNG per plot tab named
OUT-<chart>.png and prints the seconds each step took.

    QT_QPA_PLATFORM=offscreen python benchmarks/accuracy/bench_measure_screenshot.py OUT [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

SHAPE = {"model_type": "qwen3", "_name_or_path": "Qwen3-0.6B-shaped", "hidden_size": 1024, "num_hidden_layers": 28,
         "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 3072,
         "vocab_size": 151936, "tie_word_embeddings": True, "max_position_embeddings": 40960,
         "torch_dtype": "float32"}


def _wait(app, measure, timeout: float) -> None:
    deadline = time.perf_counter() + timeout
    while measure.jobs.busy and time.perf_counter() < deadline:
        app.processEvents()
        time.sleep(0.02)
    app.processEvents()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="path prefix of the PNGs")
    parser.add_argument("--quick", action="store_true", help="prompts up to 256, batches up to 8")
    args = parser.parse_args(argv)

    from PySide6.QtWidgets import QApplication

    from rooflab.core.io import load_model
    from rooflab.core.io.presets import load_machine
    from rooflab.core.values.defaults import DEFAULT_WORKLOAD
    from rooflab.gui.shell.main_window import MainWindow
    from rooflab.gui.state.app_state import AppState
    from rooflab.gui.state.settings import Settings

    app = QApplication.instance() or QApplication(sys.argv)
    folder = Path(tempfile.mkdtemp(prefix="rooflab-shot-"))
    config = folder / "Qwen3-0.6B-shaped" / "config.json"
    config.parent.mkdir()
    config.write_text(json.dumps(SHAPE))
    spec = load_model(config, weights="fp32")
    state = AppState(spec, load_machine("reference-cpu"), DEFAULT_WORKLOAD, model_ref=str(config))
    window = MainWindow(state, Settings(), persist=False)
    window.resize(1480, 940)
    window.show()
    panel, measure = window.measure_panel, window.measure
    panel.threads.setValue(1)
    panel.repeats.setValue(2)
    if args.quick:
        panel.prompts.setText("1, 16, 64, 256")
        panel.batches.setText("1, 2, 4, 8")

    timings = []
    start = time.perf_counter()
    panel.use_roofline.setChecked(True)
    panel.machine_button.click()
    _wait(app, measure, 300)
    timings.append(("measure this machine", time.perf_counter() - start))
    start = time.perf_counter()
    panel.model_button.click()
    _wait(app, measure, 900)
    timings.append(("time the model", time.perf_counter() - start))
    if measure.calibration is None:
        print(f"no calibration: {panel.error.text()}", file=sys.stderr)
        return 1
    window.left_tabs.setCurrentWidget(window.left_tabs.widget(3))
    for key, plot in window.plots.items():
        window.plot_tabs.setCurrentWidget(plot)
        app.processEvents()
        shot = window.save_screenshot(f"{args.out}-{key}.png")
        print(f"wrote {shot}")
    for what, seconds in timings:
        print(f"{what:<24} {seconds:6.1f} s")
    after = measure.calibration.after
    print("calibrated median |error|: " + ", ".join(f"{k} {v.median:.1%}" for k, v in after.items()))
    window.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
