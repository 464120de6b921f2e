"""The gap explanation: on points made with known factors, each contributor gets the share of
the reference step the decomposition says, and the evidence quotes the numbers."""

from __future__ import annotations

import dataclasses

import pytest

from rooflab.core.calibration.calibrate import calibrate, predict_points
from rooflab.core.io import load_model
from rooflab.core.report.gaps import explain_gaps
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import MeasuredPoint

TRUE = Efficiency(bandwidth=0.5, compute=0.6, step_overhead=0.012, kv_read_factor=2.0)


@pytest.fixture(scope="module")
def calibration():
    spec = load_model("qwen3-0.6b", weights="fp32")
    machine = MachineProfile(name="cpu", bandwidth=40e9, peak_flops={"fp32": 2e11}, memory=16e9, default_dtype="fp32")
    pts = [MeasuredPoint(kind="prefill", prompt=n, context=0, batch=1, seconds=1.0) for n in (1, 64, 512)]
    pts += [MeasuredPoint(kind="decode", prompt=1, context=t, batch=1, seconds=1.0, median=1.02)
            for t in (4, 512, 2048)]
    pts += [MeasuredPoint(kind="batch", prompt=1, context=256, batch=b, seconds=1.0) for b in (1, 4)]
    seconds = predict_points(spec, dataclasses.replace(machine, efficiency=TRUE), pts, kv_type="f32", dtype="fp32")
    pts = [dataclasses.replace(p, seconds=float(s), median=float(s) * 1.02) for p, s in zip(pts, seconds, strict=True)]
    return spec, calibrate(spec, machine, pts, kv_type="f32", dtype="fp32", overhead=TRUE.step_overhead)


def test_decomposition_adds_up(calibration):
    spec, cal = calibration
    gaps = {g.contributor: g for g in explain_gaps(spec, cal)}
    bandwidth = gaps["Bandwidth below the profile's figure"]
    cache = gaps["Engine moves more cache bytes than attention reads"]
    overhead = gaps["Fixed cost per pass (per-layer overhead)"]
    rest = gaps["Other load on the machine, noise"]
    assert bandwidth.applies and cache.applies and overhead.applies
    total = bandwidth.share + cache.share + overhead.share + rest.share
    assert total == pytest.approx(1.0, abs=1e-6)
    assert abs(rest.seconds) < 1e-6 and not rest.applies
    assert bandwidth.share > overhead.share > 0
    assert "50%" in bandwidth.evidence and "kv_read_factor 2.00" in cache.evidence
    assert overhead.seconds == pytest.approx(0.012)


def test_compute_side_contributors(calibration):
    spec, cal = calibration
    gaps = {g.contributor: g for g in explain_gaps(spec, cal)}
    kernels = gaps["Kernels and dequantisation"]
    assert kernels.applies and "60%" in kernels.evidence
    assert not gaps["Weights split across two memories"].applies
    ordered = explain_gaps(spec, cal)
    assert [g.applies for g in ordered] == sorted((g.applies for g in ordered), reverse=True)


def test_a_step_at_its_ceiling_shares_out_no_gap():
    """Measured at (or faster than) the ceiling: no contributor gets a share of a gap of ~0 s
    (it used to read '673464560 % of the step's gap'), and a step that got shorter at a longer
    context says it shrank, with llama.cpp's meaning of the cache factor, not torch's."""
    from rooflab.core.values.measured import EngineSettings

    spec = load_model("qwen3-0.6b")
    machine = MachineProfile(name="cpu", bandwidth=40e9, peak_flops={"fp32": 2e11}, memory=16e9, default_dtype="fp32")
    llama = EngineSettings(engine="llama.cpp", threads=2)
    pts = [MeasuredPoint(kind="decode", prompt=1, context=t, batch=1, seconds=1.0, settings=llama) for t in (8, 1024)]
    ceiling = predict_points(spec, machine, pts)
    pts = [dataclasses.replace(pts[0], seconds=float(ceiling[0]) * 0.99),
           dataclasses.replace(pts[1], seconds=float(ceiling[0]) * 0.98)]
    gaps = {g.contributor: g for g in explain_gaps(spec, calibrate(spec, machine, pts))}
    assert all(abs(g.share) <= 1.0 for g in gaps.values())
    cache = gaps["Engine moves more cache bytes than attention reads"].evidence
    assert "shrank by" in cache and "torch.cat" not in cache


def _measured_at(efficiency: Efficiency, *, quantised: bool = False, kinds: tuple[str, ...] = ("prefill", "decode")):
    spec = load_model("qwen3-0.6b", weights="q4_k_m" if quantised else "fp32")
    machine = MachineProfile(name="cpu", bandwidth=40e9, peak_flops={"fp32": 2e11}, memory=16e9, default_dtype="fp32")
    pts = [MeasuredPoint(kind="prefill", prompt=n, context=0, batch=1, seconds=1.0) for n in (64, 512)]
    pts += [MeasuredPoint(kind="decode", prompt=1, context=t, batch=1, seconds=1.0) for t in (4, 512, 2048)]
    pts = [p for p in pts if p.kind in kinds]
    seconds = predict_points(spec, dataclasses.replace(machine, efficiency=efficiency), pts, kv_type="f16",
                             dtype="fp32")
    pts = [dataclasses.replace(p, seconds=float(s)) for p, s in zip(pts, seconds, strict=True)]
    return spec, calibrate(spec, machine, pts, kv_type="f16", dtype="fp32")


def test_points_that_beat_the_ceiling_say_the_machine_profile_is_wrong():
    """Issue 18: measured points 8-16x above the 'ceiling' were explained as dequantisation at a
    1487 % efficiency. Points faster than the ceiling by more than the band put the profile first,
    and nothing blames the kernels for running faster than the machine allows."""
    spec, cal = _measured_at(Efficiency(bandwidth=8.0, compute=14.87), quantised=True)
    gaps = explain_gaps(spec, cal)
    assert gaps[0].contributor == "The machine profile is wrong" and gaps[0].applies
    assert "5 of 5 points ran faster than the ceiling" in gaps[0].evidence
    kernels = next(g for g in gaps if g.contributor == "Kernels and dequantisation")
    assert "unpacked" not in kernels.evidence and not kernels.applies
    assert cal.refusal.startswith("5 of 5 points beat the ceiling") and "machine profile is wrong" in cal.refusal


def test_points_within_the_band_of_the_ceiling_are_not_a_wrong_profile():
    spec, cal = _measured_at(Efficiency(bandwidth=1.05, compute=1.05))
    assert cal.beating_ceiling() == [] and cal.refusal == ""
    assert all(g.contributor != "The machine profile is wrong" for g in explain_gaps(spec, cal))


def test_a_fit_on_fewer_points_than_its_unknowns_is_not_offered():
    """7 of 8 points disturbed left a fit resting on one point, still offered as the machine's
    efficiency. One decode point fits only itself."""
    spec, cal = _measured_at(Efficiency(bandwidth=0.5, compute=0.6), kinds=("decode",))
    assert cal.refusal == ""                                      # three decode points, one unknown
    one = calibrate(spec, MachineProfile(name="cpu", bandwidth=40e9, peak_flops={"fp32": 2e11}, memory=16e9,
                                         default_dtype="fp32"),
                    cal.points[:1])
    assert one.refusal == "it rests on 1 point for 1 unknown"
