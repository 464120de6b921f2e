"""Numbers as text, shared by the command line and the window."""

from __future__ import annotations

import math

import pytest

from rooflab.core.report.text import long_duration, significant


@pytest.mark.parametrize(("seconds", "text"), [
    (3599.0, None), (3600.0, "1 h"), (32_141.0, "8.93 h"), (2 * 86400 - 1, "48 h"),
    (2 * 86400, "2 days"), (7_679_075.0, "88.9 days"), (8_051_521.4, "93.2 days"), (math.inf, None),
])
def test_long_duration_reads_in_hours_then_days(seconds, text):
    assert long_duration(seconds) == text


def test_significant():
    assert significant(12345.6) == "12,346"
    assert significant(0.0123) == "0.0123"
    assert significant(2.50) == "2.5"
    assert significant(math.inf) == "∞" and significant(math.nan) == "n/a"


def test_a_shortfall_reads_its_amounts_as_every_figure_does():
    """Issue 39: placing a model that cannot fit said "needs ... 4,914.8 GB of 64.0 GB on host"
    beside the memory row's "4.91 TB": predict's sentence scaled bytes its own way. Every layer
    reads an amount through ``values.readable.byte_text``, the text ``report.units.fmt`` gives."""
    from rooflab.core.io import load_model
    from rooflab.core.io.presets import load_machine
    from rooflab.core.predict.autofit import fit_placement, shortfall
    from rooflab.core.report.units import fmt
    from rooflab.core.values.readable import byte_text
    from rooflab.core.values.workload import Workload

    spec, machine = load_model("qwen3-8b-q4_k_m"), load_machine("rtx-4090")
    fit = fit_placement(spec, machine, Workload(prompt=32000, answer=256, context=0, batch=1024, kv_type="f16"))
    host = fit.memory.host
    assert not fit.fits and host.used > 1e12                    # terabytes of cache on a 64 GB host
    text = shortfall(fit.memory)
    assert f"{fmt(host.used, 'B')} of {fmt(host.capacity, 'B')} on {host.name}" in text, text
    assert fmt(host.used, "B").endswith(" TB") and "," not in text, text
    for nbytes in (1.024e14, 5.02e9, 64e9, 999.6e9, 0.0):
        assert byte_text(nbytes) == fmt(nbytes, "B")
