"""``rooflab measure host-experts`` refuses a layout it does not know in one line, and once this
machine's host-expert calibration is kept, ``rooflab predict``'s expected figures of a GPU with
experts on the host take it (the note says so, the experts on the CPU take longer) while its
ceiling stays as it was."""

from __future__ import annotations

import re

import pytest

from rooflab.core.calibration.host_experts import HostExpertCalibration, LayoutRate, save_host_experts
from rooflab.core.cli.main import main
from rooflab.core.values.machine import MEASURED_KEY

ARGS = ["predict", "--model", "qwen3-30b-a3b-q4_k_m", "--machine", "rtx-4090", "--cpu-moe", "30",
        "--contexts", "0", "--batches", "1", "--prompts", "512"]


def test_an_unknown_layout_is_one_line(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["measure", "host-experts", "--layouts", "qwen3-moe,llama"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "llama: not one of qwen3-moe, gpt-oss" in err[0]


def _experts_ms(out: str) -> float:
    found = re.search(r"Token, part by part .*?([\d.]+) ms (?:arithmetic of the )?experts on the CPU", out)
    assert found, out
    return float(found.group(1))


def test_predict_takes_this_machines_host_expert_calibration(capsys):
    assert main(ARGS) == 0
    before = capsys.readouterr().out
    ceiling = re.search(r"TPOT ([\d.]+ ms)", before).group(1)
    # a host that read its experts at 0.1 of its bandwidth: slower than the fitted shares price the
    # preset's host (its arithmetic, at 0.2 of the CPU back end's compute factor, bounds it there)
    save_host_experts(HostExpertCalibration(
        machine_key=MEASURED_KEY, machine_name="This machine, measured (test)", date="2026-12-06T23:00:00+00:00",
        engine="llama.cpp test cpu, 1 thread", bandwidth=8e9,
        layouts=(LayoutRate(layout="qwen3-moe", format_class="k-quant", extra_bytes=8e6, extra_seconds=(0.01,)),)))
    assert main(ARGS) == 0
    after = capsys.readouterr().out
    assert "note: the host reads routed experts at 0.10 of its bandwidth, as this machine's CPU back end did " \
           "on 2026-12-06 (rooflab measure host-experts: qwen3-moe)" in after
    assert _experts_ms(after) > _experts_ms(before)
    assert re.search(r"TPOT ([\d.]+ ms)", after).group(1) == ceiling           # the ceiling is not an engine's
