"""Report files named once: the expected curves' CSV files doubled their layer's name
("decode-step-expected-expected-llama.cpp-published.csv")."""

from __future__ import annotations

from rooflab.core.io.presets import load_machine
from tests.gui.conftest import catalogue_spec


def test_expected_csv_files_name_their_layer_once(qtbot, window, tmp_path):
    window.state.set_machine(load_machine("rtx-4090"))        # a published calibration: expected curves
    files = window.save_report(tmp_path / "alone")
    names = {p.name for p in files.csvs}
    assert "decode-step-expected-llama.cpp-published.csv" in names, sorted(names)
    assert not [n for n in names if "expected-expected" in n]
    assert "decode-step-current.csv" in names and "summary.csv" in names
    # beside a pinned series the expectation is the current one's, and its files say whose
    window.state.pin_current()
    window.state.set_model(catalogue_spec("qwen3-32b-q4_k_m"), ref="qwen3-32b-q4_k_m")
    files = window.save_report(tmp_path / "pinned")
    names = {p.name for p in files.csvs}
    # whose: the current series' (its own files are "...-current.csv"), as the legend says it
    assert "decode-step-expected-for-the-current-series-llama.cpp-published.csv" in names, sorted(names)
    assert "decode-step-pin-1-qwen3-8b-q4-k-m-nvidia-geforce-rtx-4090-auto-placement.csv" in names
