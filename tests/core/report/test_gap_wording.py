"""The gap explanation as a reader meets it: short sentences, a change that went down says so,
no "-0%" or "+0%", counts of one in the singular, shares worded for both signs."""

from __future__ import annotations

import dataclasses
import re

import pytest

from rooflab.core.calibration.calibrate import calibrate, predict_points
from rooflab.core.io import load_model
from rooflab.core.report.gaps import Gap, explain_gaps
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import MeasuredPoint

MACHINE = MachineProfile(name="cpu", bandwidth=40e9, peak_flops={"fp32": 2e11}, memory=16e9, default_dtype="fp32")


@pytest.fixture(scope="module")
def spec():
    return load_model("qwen3-0.6b", weights="fp32")


def _gaps(spec, efficiency: Efficiency, prompts=(1, 64, 512), tweak=None) -> list[Gap]:
    pts = [MeasuredPoint(kind="prefill", prompt=n, context=0, batch=1, seconds=1.0) for n in prompts]
    pts += [MeasuredPoint(kind="decode", prompt=1, context=t, batch=1, seconds=1.0) for t in (4, 512, 2048)]
    pts += [MeasuredPoint(kind="batch", prompt=1, context=256, batch=b, seconds=1.0) for b in (1, 4)]
    seconds = predict_points(spec, dataclasses.replace(MACHINE, efficiency=efficiency), pts, kv_type="f32",
                             dtype="fp32")
    pts = [dataclasses.replace(p, seconds=float(s), median=float(s) * 1.02) for p, s in zip(pts, seconds, strict=True)]
    if tweak:
        pts = [tweak(p) for p in pts]
    return explain_gaps(spec, calibrate(spec, MACHINE, pts, kv_type="f32", dtype="fp32",
                                   overhead=efficiency.step_overhead or None))


def _all_text(gaps: list[Gap]) -> str:
    return " ".join(f"{g.share_text} {g.evidence}" for g in gaps)


def test_no_signed_zero_and_no_negative_change(spec):
    """"a step grew by -37.1 ms", "-0% of the reference step's gap", "+0% against the roof"."""
    faster_later = _gaps(spec, Efficiency(bandwidth=0.6, compute=0.6),
                         tweak=lambda p: dataclasses.replace(p, seconds=p.seconds * 0.7)
                         if p.is_decode and p.context > 100 else p)
    exact = _gaps(spec, Efficiency(bandwidth=0.5, compute=0.6, step_overhead=0.012, kv_read_factor=2.0))
    for gaps in (faster_later, exact):
        text = _all_text(gaps)
        assert not re.search(r"[-+]0%|-0\.0 ms|\+0\.0 ms|by -|grew by -", text), text
    cache = next(g for g in faster_later if g.contributor.startswith("Engine moves")).evidence
    assert "shrank by" in cache and "grew" not in cache
    small = next(g for g in exact if g.contributor.startswith("Small multiplies")).evidence
    assert "as the calibrated roof predicts" in small


def test_shares_read_for_both_signs():
    up = Gap(contributor="a", seconds=0.01, share=0.83, applies=True, evidence="")
    down = Gap(contributor="b", seconds=-0.002, share=-0.19, applies=True, evidence="")
    tiny = Gap(contributor="c", seconds=1e-9, share=-0.001, applies=False, evidence="")
    assert up.share_text == "83% of the reference step's gap"
    assert down.share_text == "offsets 19% of the reference step's gap"
    assert tiny.share_text == ""


def test_evidence_comes_in_short_sentences_with_singulars(spec):
    gaps = _gaps(spec, Efficiency(bandwidth=0.5, compute=0.6, step_overhead=0.012, kv_read_factor=2.0))
    for g in gaps:
        sentences = [s for s in re.split(r"(?<=[.:])\s+(?=[A-Z])", g.evidence) if s]
        assert g.evidence.endswith("."), g.evidence
        assert max(len(s) for s in sentences) <= 160, g.evidence
    kernels = next(g for g in gaps if g.contributor == "Kernels and dequantisation").evidence
    assert kernels.startswith("The prefill of 512 tokens ran at "), kernels
