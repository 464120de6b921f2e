"""Where the time goes: a pass as one bar, cut into its operations, each as long as its time
(``predict.ops_clocks``). The Roofline tab's operation view draws a bar for the prefill and one
for the decode step of the current series and of each pinned one, so two series compare
operation by operation; the hover reads a segment's row.

A segment's time is the operation's as expected where a calibration gives one, else at its
ceiling: the basis of ``TimedOperation.share``, so a segment's share of its bar is the share
``rooflab predict --ops --json`` prints for that operation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rooflab.core.predict.ops import DECODE, PREFILL
from rooflab.core.predict.ops_clocks import TimedOperation
from rooflab.core.report.ops_chart import op_label
from rooflab.core.report.units import fmt

PHASE_TITLES = {PREFILL: "prefill", DECODE: "decode step"}


@dataclass(frozen=True, slots=True, kw_only=True)
class BarSegment:
    """One operation's stretch of a bar: it starts ``start`` seconds into the pass and lasts
    ``seconds``; ``share`` of the bar."""

    name: str
    layer_kind: str
    label: str             # "decode · dense × 36 · q_proj"
    start: float
    seconds: float
    share: float
    bound: str
    intensity: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeBar:
    """One pass of one series as a bar: ``seconds`` in all, ``how`` they are priced ("as
    expected" or "at the ceiling"), its segments in the pass's order."""

    series: str
    phase: str
    seconds: float
    how: str
    segments: tuple[BarSegment, ...]

    def segment_at(self, seconds: float) -> BarSegment | None:
        """The segment under a point ``seconds`` into the bar (None: past its end, or before it)."""
        for s in self.segments:
            if s.start <= seconds < s.start + s.seconds:
                return s
        return None

    def describe(self, s: BarSegment) -> str:
        """A segment's row in words, for the hover: what it is, its time and share, its bound."""
        intensity = "fused (moves no bytes)" if s.intensity == float("inf") else f"{s.intensity:,.3g} FLOP/byte"
        return (f"{self.series} — {s.label}: {fmt(s.seconds, 's')} {self.how}, {s.share:.1%} of the "
                f"{PHASE_TITLES.get(self.phase, self.phase)} ({fmt(self.seconds, 's')}); {s.bound}-bound, "
                f"{intensity}")


def _seconds(t: TimedOperation) -> float:
    return t.seconds_ceiling if t.seconds_expected is None else t.seconds_expected


def time_bars(timed: Sequence[TimedOperation], series: str = "current") -> tuple[TimeBar, ...]:
    """The prefill's bar and the decode step's of one series (``timed``: its operations on their
    clocks), segments in the pass's order; an operation that takes no time has no segment."""
    out = []
    for phase in (PREFILL, DECODE):
        rows = [t for t in timed if t.op.phase == phase]
        how = "as expected" if rows and all(t.seconds_expected is not None for t in rows) else "at the ceiling"
        start, segments = 0.0, []
        for t in rows:
            seconds = _seconds(t)
            if seconds <= 0:
                continue
            segments.append(BarSegment(name=t.op.name, layer_kind=t.op.layer_kind, label=op_label(t), start=start,
                                       seconds=seconds, share=t.share, bound=t.bound, intensity=t.op.intensity))
            start += seconds
        out.append(TimeBar(series=series, phase=phase, seconds=start, how=how, segments=tuple(segments)))
    return tuple(out)
