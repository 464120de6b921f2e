"""Display units: the only place SI numbers are scaled for people."""

from __future__ import annotations

import math

import pytest

from rooflab.core.report import units


@pytest.mark.parametrize(("value", "unit", "text"), [
    (4.67e9, "B", "4.67 GB"),
    (0.0123, "s", "12.3 ms"),
    (2.5, "s", "2.5 s"),
    (3e-7, "s", "300 ns"),
    (2048, "tokens", "2,048 tokens"),
    (165.2e12, "FLOP/s", "165 TFLOP/s"),
    (1.008e12, "B/s", "1.01 TB/s"),
    (12345.6, "tokens/s", "12,346 tokens/s"),
    (0.375, "1", "37.5 %"),
    (8.19e9, "params", "8.19 billion"),
    (math.inf, "tokens", "never"),
    (3599.0, "s", "3,599 s"),
    (32_141.0, "s", "8.93 h"),                 # was "32,141 s"
    (7_679_075.0, "s", "88.9 days"),           # was "7,679,075 s"
    (1, "tokens", "1 token"),                  # was "1 tokens" ("prompt of 1 tokens")
    (1, "requests", "1 request"), (4, "requests", "4 requests"),   # the Serving marker read "at 1 requests"
    (1, "sequences", "1 sequence"),
    (1, "experts", "1 expert"),
    (0, "tokens", "0 tokens"),
])
def test_fmt(value, unit, text):
    assert units.fmt(value, unit) == text


@pytest.mark.parametrize(("value", "unit", "text"), [
    (1e13, "FLOP/s", "10 T"), (1e-3, "s", "1 ms"), (1e4, "s", "10,000 s"), (1e9, "B", "1 GB"),
    (10_000, "tokens", "10k"), (0.1, "FLOP/byte", "0.1"),
])
def test_tick(value, unit, text):
    assert units.tick(value, unit) == text


@pytest.mark.parametrize("seconds", [3600.0, 32_141.0, 7_679_075.0])
def test_hours_and_days_read_as_the_command_line_prints_them(seconds):
    from rooflab.core.report.text import long_duration

    assert units.fmt(seconds, "s") == long_duration(seconds)


def test_axis_label_and_gigabytes_round_trip():
    assert units.axis_label("Memory", "B", "GB") == "Memory (GB)"
    assert units.axis_label("KV share", "1") == "KV share"
    assert units.from_gigabytes(units.gigabytes(24e9)) == pytest.approx(24e9)
