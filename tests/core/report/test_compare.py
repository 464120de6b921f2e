"""The comparison table's data: one placed row per model x machine x weights."""

from __future__ import annotations

import csv
import dataclasses
import io

import pytest

from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.autofit import fit_placement
from rooflab.core.predict.offload import placed_request
from rooflab.core.predict.placed import placed_summary
from rooflab.core.report.compare import (
    DEPTHS,
    compare_columns,
    compare_csv,
    compare_row,
    compare_rows,
    row_dict,
    row_labels,
)
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.workload import Workload

W = Workload(prompt=2048, answer=256)


def test_row_is_the_placed_headline(gptoss):
    m = load_machine("rtx-4090")
    row = compare_row(gptoss, m, W)
    fit = fit_placement(gptoss, m, W)
    est = placed_request(gptoss, m, W, fit.placement)
    assert row.fits and row.flags == "-ngl 37 --n-cpu-moe 23 -ot blk.23.ffn_down=CPU"
    assert row.ttft == est.ttft and row.tpot == est.tpot and row.per_sequence == est.decode_rate
    assert row.weight_bytes == pytest.approx(gptoss.weight_bytes)
    assert [d for d, _ in row.decode_rates] == list(DEPTHS)
    rates = [r for _, r in row.decode_rates]
    assert all(r is not None for r in rates) and rates == sorted(rates, reverse=True)   # deeper is slower
    assert row.expected_tpot is None and row.largest_context >= W.context + W.prompt + W.answer


def test_a_row_that_does_not_fit_has_no_figures(gptoss):
    small = dataclasses.replace(load_machine("rtx-4090"), offload_memory=2e9)      # below the host's reserve
    row = compare_row(gptoss, small, W)
    assert not row.fits and row.placement.startswith("does NOT fit")
    assert row.ttft is row.tpot is row.per_sequence is None and row.flags == ""
    assert all(r is None for _, r in row.decode_rates)


def test_expected_hook_prices_the_same_placement(qwen8b):
    m = load_machine("rtx-4090")
    slower = dataclasses.replace(m, efficiency=Efficiency(bandwidth=0.5))
    row = compare_row(qwen8b, m, W, expected=lambda spec, machine: slower)
    assert row.expected_tpot is not None and row.tpot is not None
    assert row.expected_tpot == pytest.approx(2 * row.tpot, rel=0.02)     # bandwidth-bound decode
    assert compare_row(qwen8b, m, W, expected=lambda spec, machine: None).expected_tpot is None


def test_three_models_on_four_machines_as_csv():
    models = [load_model(k) for k in ("gpt-oss-120b-mxfp4", "qwen3-8b-q4_k_m", "llama-3.3-70b-q4_k_m")]
    machines = [load_machine(k) for k in ("rtx-4090", "h100-sxm", "m4-max", "desktop-ddr5")]
    rows = compare_rows([(s, m, "") for s in models for m in machines], W)
    assert len(rows) == 12
    text = compare_csv(rows, ["a header line"])
    assert text.startswith("# a header line\n")
    table = list(csv.DictReader(io.StringIO(text.split("\n", 1)[1])))
    assert list(table[0]) == [k for k, _ in compare_columns()]
    assert table[0]["weight_bytes"].isdigit() and table[0]["expected_tpot_seconds"] == ""
    assert {r["fits"] for r in table} <= {"yes", "no"}
    assert set(row_dict(rows[0])) == {k for k, _ in compare_columns()}


def test_labels_name_model_machine_and_placement(qwen8b):
    """Issue 20: a legend dropped the machine and numbered look-alikes "(2)"."""
    a, b = load_machine("rtx-4090"), load_machine("h100-sxm")
    rows = [compare_row(qwen8b, a, W), compare_row(qwen8b, b, W)]
    assert row_labels(rows) == ["Qwen3-8B Q4_K_M · rtx-4090 · auto placement",
                                           "Qwen3-8B Q4_K_M · h100-sxm · auto placement"]
    q8 = load_model("qwen3-8b-q4_k_m", weights="q8_0")
    rows = [compare_row(qwen8b, a, W), compare_row(q8, a, W, weights="Q8_0")]
    assert row_labels(rows) == ["Qwen3-8B Q4_K_M · rtx-4090 · auto placement",
                                           "Qwen3-8B Q8_0 · rtx-4090 · auto placement"]     # not "(Q8_0) Q8_0"
    assert row_labels(rows[:1] * 2)[1] == "Qwen3-8B Q4_K_M · rtx-4090 · auto placement (same as above)"


def test_placed_summary_marks_who_chose(qwen8b):
    m = load_machine("rtx-4090")
    assert placed_summary(qwen8b, m, W).how == "auto"
    assert placed_summary(qwen8b, m, dataclasses.replace(W, offload_fraction=0.5)).how == "offload"
