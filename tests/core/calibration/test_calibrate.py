"""Calibration recovers known efficiency factors from synthetic measurements.

The synthetic points are the engine's own predictions with a known Efficiency, so a correct
fit must return those factors: exact on clean points (1e-6), within 3 % when every point
carries deterministic +-2 % noise, and unmoved by one point slowed 3x by "other load"."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from rooflab.core.calibration.calibrate import (
    Calibration,
    calibrate,
    error_summaries,
    predict_points,
)
from rooflab.core.errors import SpecError
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import MeasuredPoint
from rooflab.core.values.model import AttentionLayout, ModelSpec, Role, Tensor

TRUE = Efficiency(bandwidth=0.45, compute=0.7, step_overhead=0.004, kv_read_factor=2.0)


def cpu() -> MachineProfile:
    """A spec-free CPU profile: 40 GB/s, 200 GFLOP/s fp32."""
    return MachineProfile(name="test cpu", bandwidth=40e9, peak_flops={"fp32": 200e9}, memory=32e9,
                          default_dtype="fp32", kind="cpu", key="test-cpu")


def _points() -> list[MeasuredPoint]:
    pts = [MeasuredPoint(kind="prefill", prompt=n, context=0, batch=1, seconds=1.0) for n in (1, 16, 64, 256, 1024)]
    pts += [MeasuredPoint(kind="decode", prompt=1, context=t, batch=1, seconds=1.0) for t in (4, 67, 259, 1027, 4099)]
    pts += [MeasuredPoint(kind="batch", prompt=1, context=t, batch=b, seconds=1.0)
            for t in (2, 256) for b in (1, 2, 4)]
    return pts


def synthetic(spec, noise: float = 0.0) -> list[MeasuredPoint]:
    machine = dataclasses.replace(cpu(), efficiency=TRUE)
    pts = _points()
    seconds = predict_points(spec, machine, pts, kv_type="f32", dtype="fp32")
    wobble = noise * np.sin(np.arange(len(pts)) * 2.3)          # deterministic, +-noise
    return [dataclasses.replace(p, seconds=float(s * (1 + w))) for p, s, w in zip(pts, seconds, wobble, strict=True)]


def dense_f32(layers: int = 8, hidden: int = 512, ffn: int = 1536, heads: int = 8, kv_heads: int = 4,
              head_dim: int = 64, vocab: int = 8192) -> ModelSpec:
    """A dense F32 model straight from a tensor table (llama.cpp names, ggml shapes)."""
    def t(name: str, shape: tuple[int, ...], role: Role, layer: int | None = None) -> Tensor:
        return Tensor(name=name, shape=shape, type_name="F32", nbytes=4 * math.prod(shape), role=role, layer=layer)

    tensors = [t("token_embd.weight", (hidden, vocab), Role.EMBEDDING)]
    for i in range(layers):
        tensors += [t(f"blk.{i}.attn_norm.weight", (hidden,), Role.NORMS, i),
                    t(f"blk.{i}.attn_q.weight", (hidden, heads * head_dim), Role.ATTENTION, i),
                    t(f"blk.{i}.attn_k.weight", (hidden, kv_heads * head_dim), Role.ATTENTION, i),
                    t(f"blk.{i}.attn_v.weight", (hidden, kv_heads * head_dim), Role.ATTENTION, i),
                    t(f"blk.{i}.attn_output.weight", (heads * head_dim, hidden), Role.ATTENTION, i),
                    t(f"blk.{i}.ffn_norm.weight", (hidden,), Role.NORMS, i),
                    t(f"blk.{i}.ffn_up.weight", (hidden, ffn), Role.FEED_FORWARD, i),
                    t(f"blk.{i}.ffn_gate.weight", (hidden, ffn), Role.FEED_FORWARD, i),
                    t(f"blk.{i}.ffn_down.weight", (ffn, hidden), Role.FEED_FORWARD, i)]
    tensors.append(t("output_norm.weight", (hidden,), Role.NORMS))
    layout = AttentionLayout(heads=(heads,) * layers, kv_heads=(kv_heads,) * layers, head_dim_k=head_dim,
                             head_dim_v=head_dim)
    return ModelSpec(name="calibration", architecture="llama", source="test", tensors=tuple(tensors),
                     attention=layout, hidden=hidden, vocab=vocab, file_bytes=sum(x.nbytes for x in tensors))


@pytest.fixture
def spec() -> ModelSpec:
    return dense_f32()


def test_recovers_known_factors_exactly(spec):
    cal = calibrate(spec, cpu(), synthetic(spec), kv_type="f32", dtype="fp32", overhead=TRUE.step_overhead)
    eff = cal.efficiency
    assert eff.bandwidth == pytest.approx(TRUE.bandwidth, rel=1e-6)
    assert eff.kv_read_factor == pytest.approx(TRUE.kv_read_factor, rel=1e-6)
    assert eff.compute == pytest.approx(TRUE.compute, rel=1e-4)
    assert eff.step_overhead == TRUE.step_overhead
    assert set(cal.fitted) == {"bandwidth", "kv_read_factor", "compute", "step_overhead"}
    assert cal.after["all"].median < 1e-4
    assert cal.before["all"].median > 0.3          # the ceiling is far off before


def test_noisy_points_within_three_percent(spec):
    cal = calibrate(spec, cpu(), synthetic(spec, noise=0.02), kv_type="f32", dtype="fp32",
                    overhead=TRUE.step_overhead)
    assert cal.efficiency.bandwidth == pytest.approx(TRUE.bandwidth, rel=0.03)
    assert cal.efficiency.compute == pytest.approx(TRUE.compute, rel=0.03)
    assert cal.efficiency.kv_read_factor == pytest.approx(TRUE.kv_read_factor, rel=0.1)
    assert cal.after["decode"].median <= 0.02


def test_one_slowed_point_does_not_move_the_fit(spec):
    points = synthetic(spec)
    points[6] = dataclasses.replace(points[6], seconds=points[6].seconds * 3)   # a decode step hit by other load
    cal = calibrate(spec, cpu(), points, kv_type="f32", dtype="fp32", overhead=TRUE.step_overhead)
    assert cal.efficiency.bandwidth == pytest.approx(TRUE.bandwidth, rel=0.01)
    assert cal.efficiency.kv_read_factor == pytest.approx(TRUE.kv_read_factor, rel=0.05)
    assert cal.after["decode"].worst > 0.5          # the slowed point stays visible as an error


def test_without_probe_overhead_folds_into_bandwidth(spec):
    cal = calibrate(spec, cpu(), synthetic(spec), kv_type="f32", dtype="fp32")
    assert cal.efficiency.step_overhead == 0.0
    assert "step_overhead" not in cal.fitted
    assert cal.efficiency.bandwidth < TRUE.bandwidth        # the fixed cost made bytes look slower
    assert cal.after["decode"].median < 0.05


def test_factors_without_evidence_keep_the_prior(spec):
    decode_only = [p for p in synthetic(spec) if p.kind == "decode" and p.context < 100]
    prior = Efficiency(compute=0.5)
    cal = calibrate(spec, dataclasses.replace(cpu(), efficiency=prior), decode_only, kv_type="f32", dtype="fp32")
    assert cal.efficiency.compute == 0.5
    assert cal.efficiency.kv_read_factor == 1.0     # two contexts 60 tokens apart: no cache evidence
    assert "compute" not in cal.fitted
    assert any("compute factor not fitted" in n for n in cal.notes)


def test_round_trip_and_apply(spec):
    cal = calibrate(spec, cpu(), synthetic(spec), kv_type="f32", dtype="fp32", overhead=0.004)
    again = Calibration.from_dict(cal.to_dict())
    assert again.efficiency == cal.efficiency
    assert again.points == cal.points
    assert again.after["all"] == cal.after["all"]
    assert cal.apply(cpu()).efficiency == cal.efficiency


def test_summaries_per_kind(spec):
    pts = synthetic(spec)
    errors = error_summaries(pts, np.array([p.seconds * 1.1 for p in pts]))
    assert set(errors) == {"prefill", "decode", "batch", "all"}
    assert errors["all"].median == pytest.approx(0.1)
    assert errors["batch"].count == 6


@pytest.mark.parametrize("bad", [dict(kind="train"), dict(prompt=0), dict(batch=0), dict(context=-1),
                                 dict(seconds=0.0), dict(seconds=float("nan"))])
def test_point_validation(bad):
    fields = dict(kind="decode", prompt=1, context=0, batch=1, seconds=0.1) | bad
    with pytest.raises(SpecError):
        MeasuredPoint(**fields)


def test_point_from_bad_dict():
    with pytest.raises(SpecError):
        MeasuredPoint.from_dict({"kind": "decode"})
    with pytest.raises(SpecError):
        calibrate(None, cpu(), [])  # type: ignore[arg-type]
