"""Measured points as plot curves: which panel each kind lands on, and the hover ratio, which is
exactly 1 for points that are the machine's own prediction; one series per engine and settings
(the newest run of each, never merged), with a legend text short enough for a plot's legend."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rooflab.core.calibration.calibrate import predict_points
from rooflab.core.io import load_model
from rooflab.core.report.overlays import (
    RATIO,
    SPREAD,
    calibrated_curves,
    calibrated_label,
    measured_curves,
    roofline_samples_curve,
    series_by_engine,
    series_label,
)
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.machine_run import RooflineSample
from rooflab.core.values.measured import EngineSettings, MeasuredPoint
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


# --- one series per engine and settings -----------------------------------------------------------

LLAMA = EngineSettings(engine="llama.cpp", version="0.3.36", threads=2, flash_attention=True, kv_type="f16",
                       batch_size=2048, ubatch_size=512)
TORCH = EngineSettings(engine="torch", version="2.13", threads=1, kv_type="f32", dtype="fp32")


def _point(kind: str, n: int, settings: EngineSettings | None, seconds: float = 1e-3, **more) -> MeasuredPoint:
    if kind == "prefill":
        return MeasuredPoint(kind=kind, prompt=n, context=0, batch=1, seconds=seconds, settings=settings, **more)
    return MeasuredPoint(kind=kind, prompt=1, context=n, batch=1, seconds=seconds, settings=settings, **more)


def test_series_label_is_short_and_names_what_sets_points_apart():
    assert series_label(LLAMA) == "llama.cpp, 2 threads, FA, kv f16"          # no version, no "cpu"
    assert series_label(TORCH) == "torch, 1 thread, kv f32, fp32"
    gpu = dataclasses.replace(LLAMA, engine="llama-bench", device="cuda", gpu_layers=999, kv_type="q8_0")
    assert series_label(gpu) == "llama-bench, cuda, FA, kv q8_0"             # every layer offloaded
    partial = dataclasses.replace(gpu, gpu_layers=20, cpu_moe=4)
    assert series_label(partial) == "llama-bench, cuda, 2 threads, ngl 20, cpu-moe 4, FA, kv q8_0"
    assert series_label(None) == "measured"
    # settings the key tells apart are told apart by the label too
    variants = [LLAMA, dataclasses.replace(LLAMA, threads=1), dataclasses.replace(LLAMA, flash_attention=False),
                dataclasses.replace(LLAMA, kv_type="q8_0"), dataclasses.replace(LLAMA, gpu_layers=8, device="cuda"),
                TORCH, dataclasses.replace(TORCH, dtype="bf16")]
    assert len({s.key for s in variants}) == len({series_label(s) for s in variants}) == len(variants)


def test_series_by_engine_keeps_engines_apart_and_the_newest_run_of_each():
    old_llama = [_point("prefill", n, LLAMA, 2e-3) for n in (16, 64)]
    torch_run = [_point("prefill", n, TORCH) for n in (1, 16)] + [_point("decode", 4, TORCH)]
    new_llama = [_point("prefill", 256, LLAMA)]
    legacy = [_point("decode", 8, None)]
    series = series_by_engine([legacy, old_llama, torch_run, new_llama])
    assert [s.key for s in series] == [LLAMA.key, TORCH.key, ""]             # newest first
    llama, torch, unnamed = series
    assert llama.points == tuple(new_llama)              # the newest run of a key, never merged with older
    assert torch.points == tuple(torch_run) and unnamed.points == tuple(legacy)
    assert (llama.label, llama.engine, llama.kv_type, llama.dtype) == (series_label(LLAMA), "llama.cpp", "f16", None)
    assert (torch.kv_type, torch.dtype) == ("f32", "fp32") and (unnamed.kv_type, unnamed.label) == (None, "measured")
    # one run holding two settings (llama-bench, then llama-batched-bench) gives two series
    batched = dataclasses.replace(LLAMA, engine="llama-bench", threads=4)
    mixed = series_by_engine([[_point("prefill", 16, dataclasses.replace(batched, threads=8)),
                               _point("decode", 4, batched)]])
    assert len(mixed) == 2 and all(len(s.points) == 1 for s in mixed)
    assert series_by_engine([]) == [] and series_by_engine([[]]) == []


def test_measured_curves_carry_spread_and_name_a_lone_series_once(setting):
    spec, machine, _, workload = setting
    pts = [_point("prefill", n, TORCH, 1e-2, median=1.1e-2) for n in (1, 64)] + [_point("decode", 4, TORCH, 1e-2)]
    overlay = measured_curves(pts, spec, machine, workload, label="torch, 1 thread, kv f32, fp32")
    ttft = overlay[("prefill", "ttft")][0]
    np.testing.assert_allclose(ttft.extras[SPREAD], [10.0, 10.0])           # (median - best) / best, in %
    np.testing.assert_allclose(overlay[("decode", "step")][0].extras[SPREAD], [0.0])      # median unknown
    assert {c.label for curves in overlay.values() for c in curves} == {"torch, 1 thread, kv f32, fp32"}
    # the ratio is against the points' own cache type and dtype unless told otherwise
    own = measured_curves(pts, spec, machine, dataclasses.replace(workload, kv_type="q8_0", compute_dtype="bf16"))
    told = measured_curves(pts, spec, machine, workload, kv_type="f32", dtype="fp32")
    np.testing.assert_allclose(own[("decode", "step")][0].extras[RATIO], told[("decode", "step")][0].extras[RATIO])
    assert own[("prefill", "ttft")][0].label == "TTFT"                       # no series label: what it is


def test_calibrated_labels_fit_a_legend(setting):
    spec, machine, _, workload = setting
    overlay = calibrated_curves(spec, dataclasses.replace(machine, efficiency=Efficiency(bandwidth=0.5)), workload)
    labels = {c.key: c.label for curves in overlay.values() for c in curves}
    assert labels["calibrated_ttft"] == "TTFT" and labels["calibrated_step"] == "time per token"
    assert labels["calibrated_effective_roof"] == "roof"
    one = series_by_engine([[_point("prefill", 16, LLAMA)]])[0]
    assert calibrated_label(one) == "llama.cpp fit" and calibrated_label(None) == "calibrated"
    assert max(len(f"llama-bench fit: {label}") for label in labels.values()) <= 44      # the legend's width
