"""Where the text of limit lines and markers goes: beside its line or point, inside the plot
box, off the curves and off each other.

Pure geometry in pixels (y down, as on screen), no Qt: a panel hands over the box, each
label's size and anchor line or point, and the curves as polylines; ``place`` returns the
top-left corner of each label. Labels are placed in the order given (the current series first),
each at the candidate position that crosses the fewest curves and no label placed before it,
nearest its preferred spot among equals."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Rect = tuple[float, float, float, float]        # left, top, width, height, px
AnchorKind = Literal["hline", "vline", "point"]

GAP = 3.0            # px between a label and its line or point
_STEPS = 24          # candidate positions along a line
# what a crossing costs; a label outside the box is worse than any overlap
_OUTSIDE, _LABEL, _CURVE, _LINE = 1e7, 1e5, 100.0, 10.0


@dataclass(frozen=True, slots=True)
class LabelSpec:
    """One label: its size, what it belongs to, and where along its line it would rather sit
    (``prefer``: 0 = the left or top end, 1 = the right or bottom end)."""

    width: float
    height: float
    kind: AnchorKind
    x: float = 0.0           # a vline's or a point's x, px
    y: float = 0.0           # an hline's or a point's y, px
    prefer: float = 0.0


def label_spots(box: Rect, labels: Sequence[LabelSpec], curves: Sequence[np.ndarray],
          lines: Sequence[LabelSpec] = ()) -> list[tuple[float, float] | None]:
    """The top-left corner of each label in ``box``, None for a label that fits nowhere
    without covering one placed before it or leaving the box. ``curves``: polylines as (n, 2)
    arrays of pixel positions (non-finite points break a line); ``lines``: reference lines a
    label should rather not cross (each label's own line is never crossed: labels sit beside it).

    Placed greedily in the order given; when some find no room, once more with those first
    (a long label boxed in by short ones that could have gone elsewhere), keeping the better."""
    grid = _Occupancy(box, segments(curves))
    # what does not depend on the other labels' places, once per label: the candidates, their
    # distance from the preferred one, leaving the box, and the curves and lines they cross
    fixed = []
    for spec in labels:
        candidates = _candidates(box, spec)
        rects = [rect for rect, _ in candidates]
        others = [ln for ln in lines if (ln.kind, ln.x, ln.y) != (spec.kind, spec.x, spec.y)]
        base = np.array([distance + (0.0 if _inside(rect, box) else _OUTSIDE)
                         + _LINE * sum(_crosses_line(rect, ln) for ln in others) for rect, distance in candidates])
        fixed.append((rects, base + _CURVE * grid.counts(np.array(rects))))
    order = list(range(len(labels)))
    best = _place_in(order, fixed)
    failed = [i for i in order if best[i] is None]
    if failed:
        again = _place_in(failed + [i for i in order if i not in failed], fixed)
        if sum(spot is None for spot in again) < len(failed):
            best = again
    return best


def _place_in(order: Sequence[int], fixed: Sequence[tuple[list[Rect], np.ndarray]]) -> list[tuple[float, float] | None]:
    """Each label in ``order`` at its cheapest candidate, counting the labels placed before it."""
    taken: list[Rect] = []
    out: list[tuple[float, float] | None] = [None] * len(fixed)
    for index in order:
        rects, base = fixed[index]
        cost = base + _LABEL * np.array([sum(_overlap(rect, t) for t in taken) for rect in rects])
        pick = int(np.argmin(cost))
        if cost[pick] < _LABEL:
            taken.append(rects[pick])
            out[index] = (rects[pick][0], rects[pick][1])
    return out


def wrap_text(text: str, room: float, measure: Callable[[str], float]) -> list[str]:
    """``text`` on lines no wider than ``room`` (as ``measure`` reckons: pixels, characters),
    broken between its " · " parts where it can, else between words, else after a word's
    hyphens ("Qwen3-30B-" over "A3B" under a narrow memory bar); only a piece still wider than a
    line is cut with "…". A label's parts are what tells series apart, so a long one is wrapped
    rather than cut."""
    lines: list[str] = []
    for part in text.split(" · "):
        if lines and measure(f"{lines[-1]} · {part}") <= room:
            lines[-1] += f" · {part}"
            continue
        line = ""
        for word in part.split(" "):
            if line and measure(f"{line} {word}") <= room:
                line += f" {word}"
                continue
            if line:
                lines.append(line)
            *whole, line = _hyphenated(word, room, measure)
            lines += whole
        lines.append(line)
    return lines


def _hyphenated(word: str, room: float, measure: Callable[[str], float]) -> list[str]:
    """``word`` on as few lines no wider than ``room`` as breaking after its hyphens allows, a
    piece with no hyphen left that is still too wide cut with "…"."""
    if measure(word) <= room:
        return [word]
    pieces = [piece + "-" for piece in word.split("-")]
    pieces[-1] = pieces[-1][:-1]
    lines = [""]
    for piece in pieces:
        if lines[-1] and measure(lines[-1] + piece) > room:
            lines.append("")
        lines[-1] += piece
    return [line if measure(line) <= room else _cut(line, room, measure) for line in lines]


def _cut(word: str, room: float, measure: Callable[[str], float]) -> str:
    for end in range(len(word) - 1, 0, -1):
        if measure(word[:end] + "…") <= room:
            return word[:end] + "…"
    return word[:1] + "…"


def _candidates(box: Rect, s: LabelSpec) -> list[tuple[Rect, float]]:
    """Rectangles a label may take, each with its distance from the preferred one (0 to 1)."""
    left, top, width, height = box
    out: list[tuple[Rect, float]] = []
    if s.kind == "point":
        for i, (dx, dy) in enumerate(((GAP * 2, -s.height - GAP), (GAP * 2, GAP), (-s.width - GAP * 2, -s.height - GAP),
                                      (-s.width - GAP * 2, GAP), (-s.width / 2, -s.height - GAP * 3),
                                      (-s.width / 2, GAP * 3))):
            out.append(((s.x + dx, s.y + dy, s.width, s.height), 0.1 * i))
        return out
    along = width - s.width - 2 * GAP if s.kind == "hline" else height - s.height - 2 * GAP
    for step in range(_STEPS + 1):
        f = step / _STEPS
        offset = GAP + f * max(along, 0.0)
        distance = abs(f - s.prefer)
        if s.kind == "hline":
            x = left + offset
            # above the line first (ties go to it), then below
            out.append(((x, s.y - s.height - 1, s.width, s.height), distance))
            out.append(((x, s.y + 1, s.width, s.height), distance + 0.01))
        else:
            y = top + offset
            out.append(((s.x + GAP, y, s.width, s.height), distance))
            out.append(((s.x - GAP - s.width, y, s.width, s.height), distance + 0.01))
    return out


def _inside(rect: Rect, box: Rect) -> bool:
    x, y, w, h = rect
    bx, by, bw, bh = box
    return x >= bx - 0.5 and y >= by - 0.5 and x + w <= bx + bw + 0.5 and y + h <= by + bh + 0.5


#: px two labels' boxes may share: a box holds a pixel of margin and the line gap
_TOUCH = 2.0


def _overlap(a: Rect, b: Rect) -> bool:
    t = _TOUCH
    return (a[0] + t < b[0] + b[2] and b[0] + t < a[0] + a[2]
            and a[1] + t < b[1] + b[3] and b[1] + t < a[1] + a[3])


def _crosses_line(rect: Rect, line: LabelSpec) -> bool:
    x, y, w, h = rect
    if line.kind == "hline":
        return y < line.y < y + h
    if line.kind == "vline":
        return x < line.x < x + w
    return False


def segments(curves: Sequence[np.ndarray]) -> np.ndarray:
    """Every finite segment of the polylines as rows (x0, y0, x1, y1, which polyline)."""
    parts = []
    for i, pts in enumerate(curves):
        pts = np.asarray(pts, dtype=np.float64).reshape(-1, 2)
        if len(pts) < 2:
            continue
        seg = np.hstack([pts[:-1], pts[1:], np.full((len(pts) - 1, 1), float(i))])
        parts.append(seg[np.all(np.isfinite(seg), axis=1)])
    return np.vstack(parts) if parts else np.empty((0, 5))


def curve_counts(rects: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """For each rectangle (rows left, top, width, height), how many polylines pass through
    it: Liang-Barsky clipping of every segment against every rectangle at once, a curve
    counted once however many of its segments cross."""
    counts = np.zeros(len(rects))
    if seg.size == 0 or rects.size == 0:
        return counts
    left, top = rects[:, 0].min(), rects[:, 1].min()
    right, bottom = (rects[:, 0] + rects[:, 2]).max(), (rects[:, 1] + rects[:, 3]).max()
    near = ((np.maximum(seg[:, 0], seg[:, 2]) >= left) & (np.minimum(seg[:, 0], seg[:, 2]) <= right)
            & (np.maximum(seg[:, 1], seg[:, 3]) >= top) & (np.minimum(seg[:, 1], seg[:, 3]) <= bottom))
    seg = seg[near]                        # only segments near some candidate: most are not
    if seg.size == 0:
        return counts
    x, y, w, h = (rects[:, i:i + 1] for i in range(4))
    x0, y0 = seg[None, :, 0], seg[None, :, 1]
    dx, dy = seg[None, :, 2] - x0, seg[None, :, 3] - y0
    shape = (len(rects), len(seg))
    enter, leave, ok = np.zeros(shape), np.ones(shape), np.ones(shape, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        for p, q in ((-dx, x0 - x), (dx, x + w - x0), (-dy, y0 - y), (dy, y + h - y0)):
            p = np.broadcast_to(p, shape)
            parallel = p == 0
            ok &= ~(parallel & (q < 0))
            t = np.where(parallel, 0.0, q / np.where(parallel, 1.0, p))
            enter = np.where(~parallel & (p < 0), np.maximum(enter, t), enter)
            leave = np.where(~parallel & (p > 0), np.minimum(leave, t), leave)
    hit = ok & (enter <= leave)
    ids = seg[:, 4]
    for curve in np.unique(ids):
        counts += hit[:, ids == curve].any(axis=1)
    return counts


class _Occupancy:
    """Which cells of a grid over the box each curve passes through. How many curves a
    rectangle meets is read off the band of rows (or columns) it spans: candidates along one
    line share that band. Cells count when the rectangle only touches them: a spot it clears
    is clear."""

    CELL = 2.0          # px

    def __init__(self, box: Rect, seg: np.ndarray) -> None:
        left, top, width, height = box
        self.left, self.top = left, top
        self.cols, self.rows = max(1, math.ceil(width / self.CELL)), max(1, math.ceil(height / self.CELL))
        ids = np.unique(seg[:, 4]) if seg.size else np.empty(0)
        self.grid = np.zeros((len(ids), self.rows, self.cols), dtype=bool)
        inside = _clip(seg, box)
        for k, curve in enumerate(ids):
            part = inside[inside[:, 4] == curve]
            if part.size == 0:
                continue
            length = np.hypot(part[:, 2] - part[:, 0], part[:, 3] - part[:, 1])
            steps = np.ceil(length / (self.CELL / 2)).astype(int) + 1      # samples half a cell apart
            at = np.repeat(np.arange(len(part)), steps)
            first = np.repeat(np.cumsum(steps) - steps, steps)           # each sample's segment start
            f = (np.arange(at.size) - first) / np.repeat(np.maximum(steps - 1, 1), steps)
            x = part[at, 0] + f * (part[at, 2] - part[at, 0])
            y = part[at, 1] + f * (part[at, 3] - part[at, 1])
            col = np.clip(((x - left) / self.CELL).astype(int), 0, self.cols - 1)
            row = np.clip(((y - top) / self.CELL).astype(int), 0, self.rows - 1)
            self.grid[k, row, col] = True

    def counts(self, rects: np.ndarray) -> np.ndarray:
        """How many curves meet each rectangle (rows left, top, width, height)."""
        out = np.zeros(len(rects))
        if self.grid.shape[0] == 0 or rects.size == 0:
            return out
        c0 = np.clip(np.floor((rects[:, 0] - self.left) / self.CELL).astype(int), 0, self.cols)
        r0 = np.clip(np.floor((rects[:, 1] - self.top) / self.CELL).astype(int), 0, self.rows)
        c1 = np.clip(np.ceil((rects[:, 0] + rects[:, 2] - self.left) / self.CELL).astype(int), 0, self.cols)
        r1 = np.clip(np.ceil((rects[:, 1] + rects[:, 3] - self.top) / self.CELL).astype(int), 0, self.rows)
        row_bands, col_bands = set(zip(r0, r1, strict=True)), set(zip(c0, c1, strict=True))
        across = len(row_bands) <= len(col_bands)        # candidates along a horizontal line
        for lo, hi in row_bands if across else col_bands:
            chosen = ((r0 == lo) & (r1 == hi)) if across else ((c0 == lo) & (c1 == hi))
            band = self.grid[:, lo:hi, :].any(axis=1) if across else self.grid[:, :, lo:hi].any(axis=2)
            prefix = np.zeros((band.shape[0], band.shape[1] + 1), dtype=np.int32)
            prefix[:, 1:] = band.cumsum(axis=1)
            start, end = (c0, c1) if across else (r0, r1)
            hits = prefix[:, end[chosen]] - prefix[:, start[chosen]]
            out[chosen] = (hits > 0).sum(axis=0)
        return out


def _clip(seg: np.ndarray, box: Rect) -> np.ndarray:
    """The parts of segments inside ``box`` (Liang-Barsky), same columns; those outside go."""
    if seg.size == 0:
        return seg
    x, y, w, h = box
    x0, y0 = seg[:, 0], seg[:, 1]
    dx, dy = seg[:, 2] - x0, seg[:, 3] - y0
    enter, leave = np.zeros(len(seg)), np.ones(len(seg))
    ok = np.ones(len(seg), dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        for p, q in ((-dx, x0 - x), (dx, x + w - x0), (-dy, y0 - y), (dy, y + h - y0)):
            parallel = p == 0
            ok &= ~(parallel & (q < 0))
            t = np.where(parallel, 0.0, q / np.where(parallel, 1.0, p))
            enter = np.where(~parallel & (p < 0), np.maximum(enter, t), enter)
            leave = np.where(~parallel & (p > 0), np.minimum(leave, t), leave)
    keep = ok & (enter <= leave)
    e, lv = enter[keep], leave[keep]
    part = seg[keep]
    return np.column_stack([part[:, 0] + e * dx[keep], part[:, 1] + e * dy[keep],
                            part[:, 0] + lv * dx[keep], part[:, 1] + lv * dy[keep], part[:, 4]])
