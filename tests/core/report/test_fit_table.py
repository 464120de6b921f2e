"""What can I run here: the catalogue ranked on one machine, each row ``report.compare``'s."""

from __future__ import annotations

import dataclasses

import pytest

from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.jobs import run_job
from rooflab.core.report.compare import compare_row
from rooflab.core.report.fit_table import (
    FIT_ORDER,
    fit_entries_job,
    fit_table_job,
    fit_words,
    formats_for,
    ranked,
    speed,
)
from rooflab.core.values.defaults import DEFAULT_WORKLOAD

W = DEFAULT_WORKLOAD


@pytest.fixture(scope="module")
def entries():
    return run_job(fit_entries_job())


def _rows(machine_key, entries, **kw):
    return run_job(fit_table_job(load_machine(machine_key), W, entries=entries, **kw))


def _find(rows, key, weights=None):
    return next(r for r in rows if r.entry.key == key and r.entry.weights == weights)


def test_formats_own_first_then_the_common_ones():
    assert formats_for("q4_k_m") == [None, "q8_0", "bf16"]
    assert formats_for("bf16") == [None, "q4_k_m", "q8_0"]
    assert formats_for("fp16") == [None, "q4_k_m", "q8_0"]            # one 16-bit row per model
    assert formats_for("mxfp4") == [None]                              # gpt-oss ships quantised
    assert formats_for("q4_k_m", ["Q6_K", "q6_k"]) == [None, "q6_k"]


def test_every_catalogue_model_is_a_row_in_each_format(entries):
    from rooflab.core.io.catalogue import list_catalogue

    catalogue = list_catalogue()
    assert {e.key for e in entries} == {c.key for c in catalogue}
    assert len(entries) == sum(len(formats_for(c.default_weights)) for c in catalogue)
    own = next(e for e in entries if e.key == "qwen3-8b-q4_k_m" and e.weights is None)
    assert own.spec == load_model("qwen3-8b-q4_k_m") and own.label == "Q4_K_M"


def test_rows_are_the_compare_rows(entries):
    machine = load_machine("rtx-4090")
    rows = _rows("rtx-4090", entries)
    assert len(rows) == len(entries) and [r.rank for r in rows] == list(range(1, len(rows) + 1))
    for r in rows[:: max(1, len(rows) // 8)]:                          # a spread of rows, every fit
        assert r.row == compare_row(r.entry.spec, machine, W, weights=r.entry.label)


def test_gpt_oss_120b_on_a_4090_fits_only_with_experts_on_the_cpu(entries):
    rows = _rows("rtx-4090", entries)
    gpt = _find(rows, "gpt-oss-120b-mxfp4")
    assert gpt.fit == "experts" and gpt.row.flags.startswith("-ngl 37 --n-cpu-moe 23")
    assert fit_words(gpt, load_machine("rtx-4090")) == "experts on the CPU"
    # below every model the card holds whole, above every model that sheds whole layers
    assert all(r.rank < gpt.rank for r in rows if r.fit == "device")
    assert all(r.rank > gpt.rank for r in rows if r.fit in ("layers", "does_not_fit"))
    # without its host memory it does not fit at all
    alone = dataclasses.replace(load_machine("rtx-4090"), offload_memory=0.0)
    assert not compare_row(gpt.entry.spec, alone, W).fits


def test_a_70b_q4_on_a_3060_runs_only_offloaded(entries):
    rows = _rows("rtx-3060-12gb", entries)
    llama = _find(rows, "llama-3.3-70b-q4_k_m")
    assert llama.fit == "layers" and llama.row.fits
    assert llama.row.device_used <= llama.row.device_capacity < llama.row.weight_bytes
    assert fit_words(llama, load_machine("rtx-3060-12gb")) == "part on the CPU"
    assert all(r.rank < llama.rank for r in rows if r.fit in ("device", "experts"))
    assert _find(rows, "qwen3-8b-q4_k_m").fit == "device"


def test_ranked_by_fit_then_speed(entries):
    rows = _rows("rtx-4090", entries)
    order = [FIT_ORDER.index(r.fit) for r in rows]
    assert order == sorted(order)
    for fit in FIT_ORDER[:-1]:
        rates = [r.speed for r in rows if r.fit == fit]
        assert rates == sorted(rates, reverse=True)
    assert all(r.speed is None and not r.row.fits for r in rows if r.fit == "does_not_fit")


def test_expected_speed_ranks_where_a_calibration_applies(entries):
    slower = dataclasses.replace(load_machine("rtx-4090"), key="")
    rows = _rows("rtx-4090", entries[:6], expected=lambda spec, machine: slower)
    assert all(r.speed == r.row.expected_per_sequence for r in rows if r.row.fits)
    plain = _rows("rtx-4090", entries[:6])
    assert all(r.speed == r.row.per_sequence for r in plain if r.row.fits)
    assert speed(plain[0].row) == plain[0].speed


def test_min_tps_ranks_slow_models_last(entries):
    machine = load_machine("rtx-4090")
    rows = _rows("rtx-4090", entries, min_tps=100.0)
    fast = [r for r in rows if r.fast_enough]
    slow = [r for r in rows if not r.fast_enough]
    assert fast and slow and max(r.rank for r in fast) < min(r.rank for r in slow)
    assert all(r.speed is not None and r.speed >= 100 for r in fast)
    slow_fit = next(r for r in slow if r.row.fits)
    assert fit_words(slow_fit, machine, 100.0).startswith("below 100 tok/s (")


def test_a_cpu_machine_names_its_own_memories(entries):
    machine = load_machine("desktop-ddr5")
    rows = _rows("desktop-ddr5", entries[:4])
    assert fit_words(rows[0], machine) == "all in memory"


def test_the_job_reports_progress_and_an_unknown_format_is_one_line():
    from rooflab.core.errors import SpecError

    steps = []
    job = fit_entries_job(keys=["qwen3-0.6b"])
    try:
        while True:
            steps.append(next(job))
    except StopIteration as done:
        got = done.value
    assert [e.weights for e in got] == [None, "q4_k_m", "q8_0"] and steps[-1].fraction == 1.0
    with pytest.raises(SpecError, match="q9_z"):
        run_job(fit_entries_job(["q9_z"]))
    with pytest.raises(SpecError, match="no-such-model"):
        run_job(fit_entries_job(keys=["no-such-model"]))


def test_ranked_keeps_one_row_per_entry(entries):
    machine = load_machine("h100-sxm")
    few = entries[:3]
    rows = [compare_row(e.spec, machine, W, weights=e.label) for e in few]
    out = ranked(few, rows)
    assert sorted(id(r.entry) for r in out) == sorted(id(e) for e in few)
