"""Many models on many machines: the rows named (``entries``) and the comparison table as
aligned text, which ``rooflab compare``, ``rooflab fit`` and the window's compare.png print."""

from __future__ import annotations

from collections.abc import Sequence

from rooflab.core.errors import SpecError
from rooflab.core.report.compare import CompareRow, row_depths
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec

GB = 1e9
MAX_ROWS = 1000


def entries(models: Sequence[str], machines: Sequence[str],
            weights: Sequence[str] | None) -> list[tuple[ModelSpec, MachineProfile, str]]:
    """(model, machine, weight format) for every distinct combination, in the order named: a
    name given twice, or two names for the same model or machine, make one row. Models are
    read once per format. Raises a RooflabError naming the first bad model, machine or format."""
    from rooflab.core.io import load_model, takes_weights
    from rooflab.core.io.presets import load_machine

    models, machines = tuple(dict.fromkeys(models)), tuple(dict.fromkeys(machines))
    weights = tuple(dict.fromkeys(w.lower() for w in weights)) if weights else None
    rows = len(models) * len(machines) * max(1, len(weights or ()))
    if rows > MAX_ROWS:
        raise SpecError(f"{rows:,} rows asked for; at most {MAX_ROWS:,}")
    hardware = list({repr(m): m for m in (load_machine(m) for m in machines)}.values())     # equal: one
    specs: dict[tuple[str, str, str], tuple[ModelSpec, str]] = {}
    for ref in models:
        formats: Sequence[str | None] = list(weights) if weights and takes_weights(ref) else [None]
        for fmt in formats:
            spec = load_model(ref, weights=fmt)
            label = (fmt or spec.weights_format).upper()
            specs.setdefault((spec.source, spec.name, label), (spec, label))
    return [(spec, machine, fmt) for spec, fmt in specs.values() for machine in hardware]


def time_text(x: float | None) -> str:
    """Milliseconds under a second, then seconds; empty when the row has no figure."""
    if x is None:
        return ""
    return f"{x * 1e3:,.1f} ms" if x < 1 else f"{x:,.2f} s"


def rate_text(x: float | None) -> str:
    """tokens/s to one decimal; empty when the row has no figure."""
    return "" if x is None else f"{x:,.1f}"


def compare_text(rows: Sequence[CompareRow], depths: Sequence[int] | None = None) -> str:
    """An aligned table (GB = 10^9 bytes, ms, tokens/s), the placement last, in words; the
    decode-rate columns at ``depths`` (default: those the rows were worked out at)."""
    depths = row_depths(rows) if depths is None else depths
    table: list[list[str]] = [["model", "machine", "weights", "weights GB", "KV GB", "fits", "TTFT",
                               "TPOT", "expected TTFT", "expected TPOT", "expected tok/s/seq",
                               *[f"tok/s @{d:,}" for d in depths],
                               "max context", "tok/s/seq", "tok/s total", "expected tok/s total", "placement"]]
    for r in rows:
        table.append([r.model, r.machine_key or r.machine, r.weights, f"{r.weight_bytes / GB:,.1f}",
                      f"{r.kv_bytes / GB:,.2f}", "yes" if r.fits else "NO", time_text(r.ttft), time_text(r.tpot),
                      time_text(r.expected_ttft), time_text(r.expected_tpot), rate_text(r.expected_per_sequence),
                      *[rate_text(v) for _, v in r.decode_rates],
                      f"{r.largest_context:,}" if r.fits else "", rate_text(r.per_sequence), rate_text(r.total),
                      rate_text(r.expected_total), r.placement + (f" ({r.flags})" if r.flags else "")])
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    text = [("  ".join(c.ljust(w) if i in (0, 1, 2, 5, len(widths) - 1) else c.rjust(w)
                       for i, (c, w) in enumerate(zip(row, widths, strict=True)))).rstrip() for row in table]
    return "\n".join(text)
