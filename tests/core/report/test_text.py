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
