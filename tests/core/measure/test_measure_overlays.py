"""Measured points as plot curves: which panel each kind lands on, and the hover ratio, which is
exactly 1 for points that are the machine's own prediction."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rooflab.core.io import load_model
from rooflab.core.measure.calibrate import predict_points
from rooflab.core.measure.machine_result import RooflineSample
from rooflab.core.measure.overlays import RATIO, calibrated_curves, measured_curves, roofline_samples_curve
from rooflab.core.values.machine import Efficiency, MachineProfile
from rooflab.core.values.measured import MeasuredPoint
from rooflab.core.values.workload import Workload


@pytest.fixture(scope="module")
def setting():
    spec = load_model("qwen3-0.6b", weights="fp32")
    machine = MachineProfile(name="cpu", bandwidth=40e9, peak_flops={"fp32": 2e11}, memory=16e9, default_dtype="fp32")
    pts = [MeasuredPoint(kind="prefill", prompt=n, context=0, batch=1, seconds=1.0) for n in (1, 64)]
    pts += [MeasuredPoint(kind="decode", prompt=1, context=t, batch=1, seconds=1.0) for t in (4, 1000)]
    pts += [MeasuredPoint(kind="batch", prompt=1, context=t, batch=b, seconds=1.0) for t in (2, 256) for b in (1, 8)]
    seconds = predict_points(spec, machine, pts, kv_type="f32", dtype="fp32")
    pts = [dataclasses.replace(p, seconds=float(s)) for p, s in zip(pts, seconds, strict=True)]
    return spec, machine, pts, Workload(kv_type="f32", compute_dtype="fp32")


def test_each_kind_lands_on_its_panels(setting):
    spec, machine, points, workload = setting
    overlay = measured_curves(points, spec, machine, workload)
    assert set(overlay) == {("prefill", "ttft"), ("prefill", "rate"), ("decode", "step"), ("decode", "rate"),
                            ("batching", "rate"), ("roofline", "roofline")}
    step = overlay[("decode", "step")][0]
    assert list(step.x) == [4, 1000, 2, 256]             # decode steps and batch-1 batched steps
    assert step.role == "measured" and step.kind == "points"
    batching = overlay[("batching", "rate")]
    assert [c.key for c in batching] == ["measured_per_sequence_2", "measured_total_2",
                                         "measured_per_sequence_256", "measured_total_256"]
    assert batching[1].y[1] == pytest.approx(8 * batching[0].y[1])          # total = b x per sequence
    for curves in overlay.values():
        for c in curves:
            np.testing.assert_allclose(c.extras[RATIO], 1.0, rtol=1e-12)


def test_calibrated_curves_and_roofline_samples(setting):
    spec, machine, _, workload = setting
    calibrated = dataclasses.replace(machine, efficiency=Efficiency(bandwidth=0.5))
    overlay = calibrated_curves(spec, calibrated, workload)
    assert {c.role for curves in overlay.values() for c in curves} == {"calibrated"}
    assert ("roofline", "roofline") in overlay and ("decode", "step") in overlay
    sample = RooflineSample(dtype="fp32", device="cpu", m=1, k=8, n=8, seconds=1e-6, flops=128.0, bytes=288.0,
                            intensity=128 / 288, achieved=1.28e8)
    (curve,) = roofline_samples_curve([sample])[("roofline", "roofline")]
    assert list(curve.extras["rows m"]) == [1.0] and curve.y[0] == 1.28e8
    assert roofline_samples_curve([]) == {}
