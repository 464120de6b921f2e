"""Why the measurement came in below the ceiling: the lessons' list of contributors, each with
the evidence for it taken from the numbers of one calibration.

At the reference decode step (the shortest context measured) the gap between the measured time
and the spec-free prediction splits exactly into the fitted terms:

    measured - ceiling = bandwidth below the profile's figure   (W + K)(1/(B eb) - 1/B)
                       + cache bytes moved beyond attention's   (kv - 1) K / (B eb)
                       + fixed cost per pass                    o
                       + what the fit leaves (other load, noise) measured - fitted

Compute-side contributors (kernels, dequantisation, small multiplies) are read off the longest
prefill and the largest batch instead. No torch here."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rooflab.core.calibration.calibrate import Calibration
from rooflab.core.predict import work
from rooflab.core.report.text import count
from rooflab.core.values.machine_run import MachineMeasurement
from rooflab.core.values.measured import MeasuredPoint
from rooflab.core.values.model import ModelSpec

GB = 1e9


@dataclass(frozen=True, slots=True, kw_only=True)
class Gap:
    """One contributor: how many seconds of the reference step it explains (0 when it is not a
    decode-step term), that as a share of the gap, whether the numbers point to it, and why."""

    contributor: str
    seconds: float
    share: float
    applies: bool
    evidence: str

    @property
    def share_text(self) -> str:
        """"83% of the reference step's gap", "offsets 19% of ..." for a term that shortens the
        step, "" when it has no share (not a decode-step term, or one that rounds to 0%)."""
        if not self.seconds or not math.isfinite(self.share) or round(abs(self.share) * 100) == 0:
            return ""
        if self.share < 0:
            return f"offsets {-self.share:.0%} of the reference step's gap"
        return f"{self.share:.0%} of the reference step's gap"


#: A decode step within this share of its ceiling has no gap worth sharing out among contributors.
MIN_GAP = 0.02


def _reference(points: Sequence[MeasuredPoint]) -> int | None:
    """Index of the decode step at the shortest context (batch 1 preferred)."""
    best = None
    for i, p in enumerate(points):
        if not p.is_decode:
            continue
        key = (p.batch, p.context)
        if best is None or key < best[0]:
            best = (key, i)
    return best[1] if best else None


def explain_gaps(spec: ModelSpec, cal: Calibration, machine_run: MachineMeasurement | None = None) -> list[Gap]:
    """The contributors, largest explained share first; those without evidence last."""
    eff = cal.efficiency
    b = cal.bandwidth
    gaps: list[Gap] = []
    ref = _reference(cal.points)
    if ref is not None:
        p = cal.points[ref]
        w, k = (float(x) for x in work.decode_bytes(spec, p.context, p.batch, cal.kv_type, 1.0))
        ceiling = cal.predicted_before[ref]
        # a step at (or under) its ceiling leaves nothing to share out: shares would divide by ~0
        gap = p.seconds - ceiling if p.seconds - ceiling > MIN_GAP * p.seconds else math.inf
        bandwidth_s = (w + k) * (1.0 / (b * eff.bandwidth) - 1.0 / b)
        cache_s = (eff.kv_read_factor - 1.0) * k / (b * eff.bandwidth)
        rest = p.seconds - cal.predicted_after[ref]
        gaps += [
            Gap(contributor="Bandwidth below the profile's figure", seconds=bandwidth_s, share=bandwidth_s / gap,
                applies=eff.bandwidth < 0.9, evidence=_bandwidth_evidence(cal, machine_run)),
            _cache_gap(spec, cal, cache_s, gap),
            Gap(contributor="Fixed cost per pass (per-layer overhead)", seconds=eff.step_overhead,
                share=eff.step_overhead / gap, applies=eff.step_overhead > 0.05 * p.seconds,
                evidence=_overhead_evidence(spec, cal, p)),
            _load_gap(cal, rest, gap),
        ]
    gaps += [_kernel_gap(spec, cal, machine_run), _small_multiply_gap(cal, machine_run),
             Gap(contributor="Weights split across two memories", seconds=0.0, share=0.0, applies=False,
                 evidence="Not in play: every weight was read from one memory in these runs.")]
    ordered = sorted(gaps, key=lambda g: (not g.applies, -g.share))
    wrong = _profile_gap(cal)
    return [wrong, *ordered] if wrong is not None else ordered


PROFILE_WRONG = "The machine profile is wrong"


def _profile_gap(cal: Calibration) -> Gap | None:
    """Points faster than the ceiling (beyond the band): no engine beats what the machine allows,
    so the profile's bandwidth or peak is too low; none of the other contributors explains it."""
    beaten = cal.beating_ceiling()
    if not beaten:
        return None
    p, by = beaten[0]
    what = f"{count(p.prompt, 'token')} of prefill" if p.kind == "prefill" else (
        f"a step of {count(p.batch, 'sequence')} at context {p.context:,}")
    evidence = (f"{len(beaten)} of {len(cal.points)} points ran faster than the ceiling; {what} took "
                f"{p.seconds * 1e3:.2f} ms against a ceiling of {p.seconds * (1 + by) * 1e3:.2f} ms ({by:.0%} faster). "
                f"A ceiling cannot be beaten: this machine's {cal.bandwidth / GB:.1f} GB/s or "
                f"{cal.peak_flops / 1e9:.0f} GFLOP/s ({cal.dtype}) is too low. Measure the machine again "
                "on a quiet machine; the fit is not offered until then.")
    return Gap(contributor=PROFILE_WRONG, seconds=0.0, share=0.0, applies=True, evidence=evidence)


def _bandwidth_evidence(cal: Calibration, machine_run: MachineMeasurement | None) -> str:
    eff = cal.effective_bandwidth
    text = (f"Decode steps streamed their bytes at {eff / GB:.1f} GB/s: {cal.efficiency.bandwidth:.0%} of the "
            f"profile's {cal.bandwidth / GB:.1f} GB/s.")
    if machine_run is not None:
        streams = ", ".join(f"{r.kernel} {r.best / GB:.1f}" for r in machine_run.bandwidth)
        if streams:
            text += f" Streaming kernels reached {streams} GB/s."
        single = [s for s in machine_run.roofline if s.m == 1]
        if single:
            text += (f" A one-row multiply (m = 1) streamed its matrix at "
                     f"{single[0].bytes / single[0].seconds / GB:.1f} GB/s.")
    return text


def _cache_gap(spec: ModelSpec, cal: Calibration, cache_s: float, gap: float) -> Gap:
    decode = [(p, a) for p, a in zip(cal.points, cal.predicted_after, strict=True) if p.is_decode and p.batch == 1]
    kv = cal.efficiency.kv_read_factor
    if len({p.context for p, _ in decode}) < 2:
        return Gap(contributor="Engine moves more cache bytes than attention reads", seconds=cache_s,
                   share=cache_s / gap, applies=False, evidence="Needs decode steps at two or more contexts.")
    lo = min(decode, key=lambda x: x[0].context)[0]
    hi = max(decode, key=lambda x: x[0].context)[0]
    attention = float(work.kv_bytes(spec, hi.context, cal.kv_type) - work.kv_bytes(spec, lo.context, cal.kv_type))
    expected = attention / cal.effective_bandwidth
    measured = hi.seconds - lo.seconds
    change = f"grew by {measured * 1e3:.2f} ms" if measured >= 0 else f"shrank by {-measured * 1e3:.2f} ms (noise)"
    torch = any(p.settings is None or p.settings.engine == "torch" for p, _ in decode)
    meaning = ("2 would be a cache copied every step, as torch.cat in transformers' dynamic cache does" if torch
               else "1 is each cached byte read once per step; more is attention's own work per cached token")
    evidence = (f"From context {lo.context:,} to {hi.context:,}, a step {change}. Reading the extra "
                f"{attention / 1e6:.0f} MB of cache once would take {expected * 1e3:.2f} ms. Fitted "
                f"kv_read_factor {kv:.2f} ({meaning}).")
    return Gap(contributor="Engine moves more cache bytes than attention reads", seconds=cache_s,
               share=cache_s / gap, applies=kv > 1.2, evidence=evidence)


def _overhead_evidence(spec: ModelSpec, cal: Calibration, p: MeasuredPoint) -> str:
    o = cal.efficiency.step_overhead
    if "step_overhead" not in cal.fitted:
        return "Not measured (no overhead probe): any fixed cost per pass is folded into the bandwidth factor."
    per_layer = o / max(spec.layers, 1)
    return (f"A same-depth model with tiny widths takes {o * 1e3:.2f} ms a step: {per_layer * 1e6:.0f} µs per "
            f"layer. That is {o / p.seconds:.0%} of the {p.seconds * 1e3:.1f} ms step at context {p.context:,}.")


def _load_gap(cal: Calibration, rest: float, gap: float) -> Gap:
    spreads = np.array([p.spread for p in cal.points])
    median = float(np.median(spreads)) if spreads.size else 0.0
    worst = float(spreads.max()) if spreads.size else 0.0
    if abs(rest) < 5e-5:
        left = "The fit explains the reference step in full."
    elif rest > 0:
        left = f"The fit leaves {rest * 1e3:.1f} ms of the reference step unexplained."
    else:
        left = f"The fit overshoots the reference step by {-rest * 1e3:.1f} ms."
    evidence = f"Repeats of one pass differed by a median {median:.0%} (worst {worst:.0%}). {left}"
    return Gap(contributor="Other load on the machine, noise", seconds=rest, share=rest / gap,
               applies=median > 0.05 or abs(rest) > 0.1 * gap, evidence=evidence)


def _kernel_gap(spec: ModelSpec, cal: Calibration, machine_run: MachineMeasurement | None) -> Gap:
    prefill = [p for p in cal.points if p.kind == "prefill"]
    ec = cal.efficiency.compute
    quantised = any(t.type_name.upper().startswith(("Q", "IQ", "MXFP", "TQ")) for t in spec.tensors)
    if "compute" not in cal.fitted or not prefill:
        text = "No compute-bound pass was measured, so the arithmetic rate was not fitted."
        return Gap(contributor="Kernels and dequantisation", seconds=0.0, share=0.0, applies=False, evidence=text)
    longest = max(prefill, key=lambda p: p.prompt * p.batch)
    flops = float(work.prefill_flops(spec, longest.prompt, longest.context, longest.batch))
    extra = flops / cal.effective_flops - flops / cal.peak_flops
    text = (f"The prefill of {count(longest.prompt, 'token')} ran at {flops / longest.seconds / 1e9:.0f} GFLOP/s. "
            f"The fit puts prefill arithmetic at {cal.effective_flops / 1e9:.0f} GFLOP/s: {ec:.0%} of the "
            f"{cal.peak_flops / 1e9:.0f} GFLOP/s a large {cal.dtype} multiply reached ({extra:.2f} s of that prefill).")
    if quantised and ec < 0.8:        # above the peak nothing is lost to unpacking: see PROFILE_WRONG
        text += " Quantised weights are unpacked inside every multiply, which costs arithmetic and bandwidth."
    return Gap(contributor="Kernels and dequantisation", seconds=0.0, share=0.0, applies=ec < 0.8, evidence=text)


def _small_multiply_gap(cal: Calibration, machine_run: MachineMeasurement | None) -> Gap:
    batch = [(p, a) for p, a in zip(cal.points, cal.predicted_after, strict=True) if p.kind == "batch" and p.batch > 1]
    if not batch:
        return Gap(contributor="Small multiplies reach little of the peak", seconds=0.0, share=0.0, applies=False,
                   evidence="No batched steps were measured.")
    worst_p, worst_a = max(batch, key=lambda x: x[0].seconds / x[1])
    excess = worst_p.seconds / worst_a - 1.0
    if round(abs(excess) * 100) == 0:
        against = "as the calibrated roof predicts"
    else:
        against = f"{abs(excess):.0%} {'slower' if excess > 0 else 'faster'} than the calibrated roof predicts"
    text = (f"A step for {count(worst_p.batch, 'sequence')} at context {worst_p.context:,} took "
            f"{worst_p.seconds * 1e3:.1f} ms, {against}.")
    if machine_run is not None:
        near = [s for s in machine_run.roofline if s.m <= worst_p.batch]
        if near and machine_run.matmul:
            s = max(near, key=lambda s: s.m)
            peak = max(r.best for r in machine_run.matmul if r.dtype == s.dtype) if any(
                r.dtype == s.dtype for r in machine_run.matmul) else max(r.best for r in machine_run.matmul)
            text += (f" A {s.m}-row multiply reached {s.achieved / 1e9:.0f} GFLOP/s, "
                     f"{s.achieved / peak:.0%} of the peak.")
    return Gap(contributor="Small multiplies reach little of the peak", seconds=0.0, share=0.0,
               applies=excess > 0.15, evidence=text)
