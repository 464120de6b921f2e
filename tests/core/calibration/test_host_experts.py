"""This machine's host-expert calibration (``calibration.host_experts``): kept and read back, a
bad record set aside, and, where one is kept, the one expected-figure path (``expected_on``)
reads a GPU host's routed experts at its factor of the host's bandwidth instead of the fitted
share, never above the ceiling, and says so."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rooflab.core.calibration.expectations import expected_on
from rooflab.core.calibration.host_experts import (
    HostExpertCalibration,
    LayoutRate,
    describe_host_experts,
    load_host_experts,
    save_host_experts,
    with_host_experts,
)
from rooflab.core.errors import SpecError
from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict import offload_terms as terms
from rooflab.core.predict.offload import placed_decode
from rooflab.core.predict.placement import Placement, split
from rooflab.core.values.machine import MEASURED_KEY
from rooflab.core.values.workload import Workload

RTX = load_machine("rtx-4090")
QWEN = load_model("qwen3-30b-a3b-q4_k_m")          # K-quant experts
PLACED = Placement(gpu_layers=49, cpu_moe=30)
W = Workload(prompt=512, answer=64)


def calibration(rate=4e9, rounds=(0.010, 0.011, 0.009), bandwidth=10e9, klass="k-quant"):
    extra = rate * 0.010                                 # the bytes 10 ms take at ``rate``
    return HostExpertCalibration(machine_key=MEASURED_KEY, machine_name="This machine, measured (test)",
                                 date="2026-12-06T23:00:00+00:00", engine="llama.cpp test cpu, 1 thread",
                                 bandwidth=bandwidth, layouts=(LayoutRate(layout="qwen3-moe", format_class=klass,
                                                                          extra_bytes=extra, extra_seconds=rounds),))


def test_the_rate_is_the_median_round_and_its_share_of_the_measured_bandwidth():
    cal = calibration()
    (layout,) = cal.layouts
    assert layout.rate == pytest.approx(4e9)                    # the 10 ms round
    assert layout.spread == pytest.approx((4e9 / 0.9 - 4e9 / 1.1) / 4e9)
    assert cal.factor(layout) == pytest.approx(0.4)
    # a round whose extra experts took no time is noise, left out; a rate past the ceiling is held at it
    noisy = calibration(rounds=(0.010, -0.002))
    assert noisy.layouts[0].rates == (pytest.approx(4e9),)
    assert "1 of 2 rounds took no extra time, left out" in describe_host_experts(noisy)[1]
    said = describe_host_experts(cal)[1]
    assert said.endswith("0.40 of the ceiling") and "4.0 GB/s median" in said
    assert calibration(bandwidth=2e9).factor(calibration(bandwidth=2e9).layouts[0]) == 1.0
    with pytest.raises(SpecError, match="no layout"):
        calibration(rounds=(-0.001, 0.0))


def test_kept_read_back_and_a_bad_record_set_aside():
    assert load_host_experts() is None
    path = save_host_experts(calibration())
    assert load_host_experts() == calibration()
    path.write_text(json.dumps({"format": 1, "machine_key": "measured", "layouts": "no"}), encoding="utf-8")
    assert load_host_experts() is None
    assert not path.exists()                                    # set aside, not read again


def test_the_expected_host_reads_its_experts_at_the_measured_factor():
    base = expected_on(QWEN, RTX)
    assert base is not None and load_host_experts() is None
    cal = calibration()
    ex = with_host_experts(QWEN, RTX, base, cal)
    eff = ex.machine.efficiency
    assert eff.host_expert_bandwidth == pytest.approx(0.4)
    assert all(m.efficiency.host_expert_bandwidth == pytest.approx(0.4) for m in ex.replicas)
    assert "0.40 of its bandwidth" in ex.notes[-1] and "rooflab measure host-experts" in ex.notes[-1]
    # the host's decode memory clock: its experts' bytes at 0.4 x the host memory's bandwidth
    sub = split(QWEN, PLACED).host.spec
    assert terms.host_decode_share(ex.machine, sub) == pytest.approx(0.4 / eff.host_bandwidth)
    host = placed_decode(QWEN, ex.machine, W, PLACED, context=512).host
    assert float(host.memory_seconds) == pytest.approx(float(host.bytes) / (RTX.offload_bandwidth * 0.4), rel=1e-9)
    # never above the ceiling: the ceiling's host is read at the full bandwidth
    ceiling = placed_decode(QWEN, RTX, W, PLACED, context=512)
    assert float(placed_decode(QWEN, ex.machine, W, PLACED, context=512).seconds) > float(ceiling.seconds)
    # the fitted share where nothing was measured
    assert terms.host_decode_share(base.machine, sub) == terms.HOST_EXPERT_DECODE_SHARE


def test_the_one_expected_path_takes_a_kept_calibration():
    before = expected_on(QWEN, RTX)
    save_host_experts(calibration())
    after = expected_on(QWEN, RTX)
    assert before.machine.efficiency.host_expert_bandwidth is None
    assert after.machine.efficiency.host_expert_bandwidth == pytest.approx(0.4)
    assert dataclasses.replace(after.machine.efficiency, host_expert_bandwidth=None) == before.machine.efficiency
    # not where nothing runs on a host behind a GPU, nor for a dense model
    assert expected_on(load_model("qwen3-8b-q4_k_m"), RTX).machine.efficiency.host_expert_bandwidth is None
    cpu = load_machine("desktop-ddr5")
    found = expected_on(QWEN, cpu)
    assert found is None or found.machine.efficiency.host_expert_bandwidth is None


def test_another_format_class_takes_every_layout_measured_and_says_so():
    cal = calibration(klass="mxfp4")
    factor, rests_on = cal.factor_for(QWEN)
    assert factor == pytest.approx(0.4) and rests_on == "qwen3-moe, not k-quant"


def test_the_efficiency_keeps_the_factor_in_a_profile_file():
    from rooflab.core.values.efficiency import Efficiency

    eff = Efficiency(bandwidth=0.8, host_expert_bandwidth=0.35)
    assert Efficiency.from_dict(eff.to_dict()) == eff
    assert not Efficiency(host_expert_bandwidth=0.35).is_identity
    with pytest.raises(SpecError, match="host_expert_bandwidth"):
        Efficiency(host_expert_bandwidth=0.0)
