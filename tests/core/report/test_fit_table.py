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
    USABLE_TPS,
    fit_entries_job,
    fit_table_job,
    fit_words,
    formats_for,
    group,
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
    rows = _rows("rtx-4090", entries, sort="speed")
    gpt = _find(rows, "gpt-oss-120b-mxfp4")
    assert gpt.fit == "experts" and gpt.row.flags.startswith("-ngl 37 --n-cpu-moe 23")
    assert fit_words(gpt, load_machine("rtx-4090")) == f"experts on the CPU, {gpt.speed:,.0f} tok/s"
    # by speed: below every usable model the card holds whole, above every model that sheds whole layers
    assert all(r.rank < gpt.rank for r in rows if r.fit == "device" and r.fast_enough)
    assert all(r.rank > gpt.rank for r in rows if r.fit in ("layers", "disk", "does_not_fit"))
    # without its host memory it does not fit at all
    alone = dataclasses.replace(load_machine("rtx-4090"), offload_memory=0.0)
    assert not compare_row(gpt.entry.spec, alone, W).fits


def test_a_70b_q4_on_a_3060_runs_only_offloaded(entries):
    rows = _rows("rtx-3060-12gb", entries, min_tps=0.0, sort="speed")
    llama = _find(rows, "llama-3.3-70b-q4_k_m")
    assert llama.fit == "layers" and llama.row.fits
    assert llama.row.device_used <= llama.row.device_capacity < llama.row.weight_bytes
    assert fit_words(llama, load_machine("rtx-3060-12gb")).startswith("part on the CPU, ")
    assert all(r.rank < llama.rank for r in rows if r.fit in ("device", "experts"))
    assert _find(rows, "qwen3-8b-q4_k_m").fit == "device"


def test_sorted_by_speed_ranks_by_fit_then_speed(entries):
    rows = _rows("rtx-4090", entries, min_tps=0.0, sort="speed")
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
    fast = [r for r in rows if r.fast_enough and r.runs]
    slow = [r for r in rows if not r.fast_enough]
    assert fast and slow and max(r.rank for r in fast) < min(r.rank for r in slow)
    assert all(r.speed is not None and r.speed >= 100 for r in fast)
    slow_fit = next(r for r in slow if r.row.fits)
    assert fit_words(slow_fit, machine, 100.0).endswith(" tok/s, below 100")


def test_a_row_that_does_not_fit_says_by_how_much(entries):
    """Issue 39: What fits said "does NOT fit" and nothing else: how much it needs of how much
    there is, in the amounts every other figure reads in."""
    import re

    machine = dataclasses.replace(load_machine("rtx-3060-12gb"), offload_memory=8e9, key="")
    rows = run_job(fit_table_job(machine, dataclasses.replace(W, batch=64), entries=entries[:8]))
    out = [r for r in rows if r.fit == "does_not_fit"]
    assert out, [r.fit for r in rows]
    for r in out:
        words = fit_words(r, machine)
        assert re.match(r"does NOT fit: needs [\d.]+ [GT]B of [\d.]+ GB on ", words), words


def test_a_cpu_machine_names_its_own_memories(entries):
    machine = load_machine("desktop-ddr5")
    rows = _rows("desktop-ddr5", entries[:4])
    assert fit_words(rows[0], machine).startswith("all in memory, ")
    assert all(r.row.flags == "" for r in rows)          # no -ngl on a machine without a GPU


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


def test_a_4090_owner_is_offered_the_most_capable_models_that_run_first(entries):
    """The question a user asks: the first rows are the largest models the card runs at a usable
    speed (gpt-oss-120b with its experts on the CPU, then the 100B-class mixtures), a 32B dense
    model whole on the card inside the first twenty, and the small models far below."""
    rows = _rows("rtx-4090", entries)
    top = rows[:20]
    assert top[0].entry.key == "gpt-oss-120b-mxfp4" and top[0].fit == "experts"
    assert all(r.runs and r.fast_enough for r in top)
    assert [r.capability for r in top] == sorted((r.capability for r in top), reverse=True)
    assert any(r.entry.key == "qwen3-32b-q4_k_m" and r.fit == "device" for r in top)
    assert _find(rows, "qwen3-0.6b").rank > 150
    groups = [group(r) for r in rows]
    assert groups == sorted(groups) and set(groups) >= {0, 1}
    for g in set(groups):
        caps = [r.capability for r in rows if group(r) == g]
        assert caps == sorted(caps, reverse=True)


def test_a_model_larger_than_both_memories_is_paged_not_run(entries):
    """A 2 TB model "fits" a 4090 with 64 GB of host memory only by paging its weights from disk
    (mmap): it ranks after every model that runs, whatever its speed, and says so."""
    machine = load_machine("rtx-4090")
    rows = _rows("rtx-4090", entries)
    kimi = _find(rows, "kimi-k2-q4_k_m", "bf16")
    assert kimi.fit == "disk" and kimi.row.fits and not kimi.runs
    assert kimi.row.weight_bytes > machine.memory + machine.offload_memory
    assert fit_words(kimi, machine).startswith("paged from disk")
    assert all(r.rank < kimi.rank for r in rows if r.runs)


def test_sort_by_context_and_an_unknown_sort_is_one_line(entries):
    from rooflab.core.errors import SpecError

    rows = _rows("rtx-4090", entries[:12], sort="context")
    usable = [r.row.largest_context for r in rows if group(r) == 0]
    assert usable == sorted(usable, reverse=True)
    with pytest.raises(SpecError, match="--sort must be one of capability, speed, context"):
        _rows("rtx-4090", entries[:2], sort="size")
    assert USABLE_TPS == 10.0
