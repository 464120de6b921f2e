"""The Serving chart's levels as a table: per level, predicted (at the ceiling and as the
calibration expects, with the band of its TTFT and TPOT p50) and measured, the latency
percentiles (TTFT, TPOT, ITL, end to end: mean, p50, p90, p99, seconds), requests/s and output
tokens/s. A report writes it as serving.csv; ``rooflab compare --serve`` prints its rows."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from rooflab.core.predict.serving_stats import ServingLevel
from rooflab.core.report.csv_files import number
from rooflab.core.report.serving_chart import ServingFigures
from rooflab.core.values.calibration import band

LATENCY_NAMES = ("ttft", "tpot", "itl", "e2e")
STATISTICS = ("mean", "p50", "p90", "p99")
SERVING_COLUMNS: tuple[str, ...] = (
    "series", "label", "mode", "level", "completed", "requests_per_second", "output_tokens_per_second",
    "tokens_per_second_per_sequence", *(f"{n}_{s}_seconds" for n in LATENCY_NAMES for s in STATISTICS),
    "goodput_requests_per_second", "ttft_p50_low_seconds", "ttft_p50_high_seconds", "tpot_p50_low_seconds",
    "tpot_p50_high_seconds")


def level_cells(lv: ServingLevel) -> list[str]:
    """A level's figures in ``SERVING_COLUMNS`` order, from "mode" to the goodput."""
    cells = [lv.mode, number(lv.level), str(lv.completed), number(lv.requests_per_second),
             number(lv.output_tokens_per_second), number(lv.tokens_per_second_per_sequence)]
    cells += [number(getattr(getattr(lv, n), s)) for n in LATENCY_NAMES for s in STATISTICS]
    cells.append("" if lv.goodput is None else number(lv.goodput))
    return cells


def _band_cells(f: ServingFigures, i: int) -> list[str]:
    """The expected level ``i``'s TTFT and TPOT p50 band over the replicates."""
    if f.expected is None or not f.spread:
        return ["", "", "", ""]
    out = []
    for name in ("ttft", "tpot"):
        central = getattr(f.expected.levels[i], name).p50
        low, high = band(central, [getattr(s.levels[i], name).p50 for s in f.spread])
        out += [number(float(low)), number(float(high))]
    return out


def serving_csv(figures: Sequence[ServingFigures], header: Sequence[str]) -> str:
    """serving.csv: a ``#`` header, then one row per level of each axis in ``figures``, the
    ceiling's, the expected ones (with their band) and the measured ones."""
    buf = io.StringIO()
    for line in header:
        buf.write(f"# {line}\n")
    buf.write("# series: ceiling (the machine's peaks), expected (the calibrated engine; band: 16th-84th "
              "percentile over the calibration's resampled fits), measured (a server, as kept)\n")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(SERVING_COLUMNS)
    for f in figures:
        for lv in f.ceiling.levels:
            writer.writerow(["ceiling", "ceiling", *level_cells(lv), "", "", "", ""])
        if f.expected is not None:
            for i, lv in enumerate(f.expected.levels):
                writer.writerow(["expected", f.expected_label, *level_cells(lv), *_band_cells(f, i)])
        for lv in f.measured:
            writer.writerow(["measured", f.measured_label, *level_cells(lv), "", "", "", ""])
    return buf.getvalue()
