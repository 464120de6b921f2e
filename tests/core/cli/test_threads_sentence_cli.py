"""The prefill sentence names the rate its time was worked out at: with -t 4 on the 8-core DDR5
preset the prompt takes twice as long, and the sentence said "27.6 TFLOP: 53.9 s at 1.02
TFLOP/s" (that is 27 s), the whole CPU's rate beside half of it's time."""

from __future__ import annotations

import json
import re

import pytest

from rooflab.core.cli.main import main
from rooflab.core.io.presets import load_machine


def _why(capsys, *extra):
    assert main(["predict", "--model", "qwen3-8b-q4_k_m", "--machine", "desktop-ddr5", *extra]) == 0
    out = capsys.readouterr().out
    return next(line for line in out.splitlines() if "Time to first token (" in line)


def _seconds(capsys, *extra) -> float:
    assert main(["predict", "--model", "qwen3-8b-q4_k_m", "--machine", "desktop-ddr5", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)["request"]["ttft_seconds"]


def test_the_sentence_names_the_rate_it_used(capsys):
    cores = load_machine("desktop-ddr5").cores
    assert cores == 8
    for threads in (None, 4, 2):
        extra = () if threads is None else ("-t", str(threads))
        line = _why(capsys, *extra)
        flop, unit_f, secs, unit_s, rate, unit_r = re.search(
            r"needs ([\d.]+) (TFLOP|GFLOP): ([\d.]+) (s|ms) at ([\d.]+) (TFLOP/s|GFLOP/s)", line).groups()
        scale = {"TFLOP": 1e12, "GFLOP": 1e9, "TFLOP/s": 1e12, "GFLOP/s": 1e9, "s": 1.0, "ms": 1e-3}
        # the seconds the sentence states are its FLOP at its rate (3 significant figures each)
        assert float(flop) * scale[unit_f] / (float(rate) * scale[unit_r]) == pytest.approx(
            float(secs) * scale[unit_s], rel=0.01), line
        assert (f"-t {threads}" in line) is (threads is not None), line
    assert _seconds(capsys, "-t", "4") == pytest.approx(2 * _seconds(capsys), rel=0.05)
