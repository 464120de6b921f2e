"""What can I run here? Every catalogue model, in its own weight format and in the common GGUF
ones, on one machine, ranked the way llmfit and LM Studio users read such a list: first by how
it fits (all of it on the device; the routed experts of some layers in the second memory;
whole layers there; not at all), then by its expected decode speed.

Each row's figures are ``report.compare``'s row for that model on that machine (placed by
auto-fit, the placement ``rooflab predict`` shows): ``rooflab fit``, the window's "What fits"
view and ``rooflab compare`` print the same numbers because they are the same rows. This
module only chooses the entries and orders the rows."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field

from rooflab.core.errors import SpecError
from rooflab.core.io.catalogue import CatalogueEntry, get_entry, list_catalogue, load_entry
from rooflab.core.jobs import Progress
from rooflab.core.report.compare import DEPTHS, CompareRow, ExpectedHook, compare_rows_job
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.quant import recipe
from rooflab.core.values.workload import Workload

#: the weight formats tried besides each model's own: what GGUF repositories commonly offer
FORMATS: tuple[str, ...] = ("q4_k_m", "q8_0", "bf16")
SIXTEEN_BIT = frozenset({"bf16", "fp16", "f16"})         # one 16-bit row per model is enough
NATIVE_ONLY = frozenset({"mxfp4"})          # shipped quantised (gpt-oss): its own format is the model
#: how a model fits, best first: all of it in the device's memory, the routed experts of some layers
#: in the second memory (``CompareRow.offload``), whole layers there, not at all
FIT_ORDER: tuple[str, ...] = ("device", "experts", "layers", "does_not_fit")


@dataclass(frozen=True, slots=True, kw_only=True)
class FitEntry:
    """A catalogue model at one weight format: ``weights`` None is the entry's own format
    (its exact file), else the format it is opened with (``load_model(key, weights=...)``)."""

    key: str
    weights: str | None
    spec: ModelSpec = field(repr=False)

    @property
    def label(self) -> str:
        """The weight format as a table shows it ("Q4_K_M"): ``rooflab compare``'s label."""
        return (self.weights or self.spec.weights_format).upper()


@dataclass(frozen=True, slots=True, kw_only=True)
class FitRow:
    """One ranked row: the entry, ``report.compare``'s row for it, and its place."""

    rank: int                   # 1 = best
    entry: FitEntry
    row: CompareRow
    fit: str                    # one of FIT_ORDER
    fast_enough: bool           # at or above the --min-tps asked for (True when none was)

    @property
    def speed(self) -> float | None:
        """Tokens/s per sequence the ranking reads: the expected rate where a calibration gives
        one, else the ceiling; None when the model does not fit."""
        return speed(self.row)


def speed(row: CompareRow) -> float | None:
    """The expected decode rate per sequence (tokens/s), or the ceiling without a calibration."""
    return row.expected_per_sequence if row.expected_per_sequence is not None else row.per_sequence


def formats_for(own: str, formats: Sequence[str] = FORMATS) -> list[str | None]:
    """The formats one catalogue model is ranked in: its own (None) and each of ``formats``
    that differs from it; a model shipped quantised (MXFP4) only in its own, and only one
    16-bit format per model."""
    own = own.lower()
    if own in NATIVE_ONLY:
        return [None]
    out: list[str | None] = [None]
    for f in dict.fromkeys(x.lower() for x in formats):
        if f != own and not (f in SIXTEEN_BIT and own in SIXTEEN_BIT):
            out.append(f)
    return out


def fit_entries_job(formats: Sequence[str] = FORMATS, keys: Sequence[str] | None = None,
                    ) -> Generator[Progress, None, list[FitEntry]]:
    """Every catalogue model (or those of ``keys``) in each of its formats, read from the
    catalogue: a Progress per model (a model at four formats is read four times, a few ms)."""
    for f in formats:
        recipe(f)                        # an unknown format is one line naming it, before anything is read
    catalogue = list_catalogue() if keys is None else [_catalogue_entry(k) for k in keys]
    out: list[FitEntry] = []
    for i, entry in enumerate(catalogue):
        for fmt in formats_for(entry.default_weights, formats):
            out.append(FitEntry(key=entry.key, weights=fmt, spec=load_entry(entry, fmt)))
        yield Progress(step="catalogue", message=f"read {i + 1} of {len(catalogue)} models",
                       fraction=(i + 1) / max(len(catalogue), 1))
    return out


def _catalogue_entry(key: str) -> CatalogueEntry:
    entry = get_entry(key)
    if entry is None:
        raise SpecError(f"unknown catalogue model {key!r} (rooflab models lists them)")
    return entry


def ranked(entries: Sequence[FitEntry], rows: Sequence[CompareRow], min_tps: float = 0.0) -> list[FitRow]:
    """``rows`` (one per entry, in order) ranked: those at or above ``min_tps`` tokens/s first,
    then by how they fit (``FIT_ORDER``), then fastest first; ties by name."""
    unranked = []
    for entry, row in zip(entries, rows, strict=True):
        rate = speed(row)
        unranked.append((entry, row, (row.offload or "device") if row.fits else "does_not_fit",
                         not min_tps or (rate is not None and rate >= min_tps)))
    unranked.sort(key=lambda t: (not t[3], FIT_ORDER.index(t[2]), -(speed(t[1]) or 0.0), t[1].model, t[1].weights))
    return [FitRow(rank=i + 1, entry=e, row=r, fit=f, fast_enough=ok) for i, (e, r, f, ok) in enumerate(unranked)]


def fit_table_job(machine: MachineProfile, workload: Workload, *, entries: Sequence[FitEntry] | None = None,
                  formats: Sequence[str] = FORMATS, min_tps: float = 0.0, expected: ExpectedHook | None = None,
                  depths: Sequence[int] = DEPTHS) -> Generator[Progress, None, list[FitRow]]:
    """The ranked table for ``machine`` at ``workload``: ``entries`` (read from the catalogue
    when None), each row ``report.compare``'s, ranked by ``ranked``. A job: a Progress per
    model read and per row worked out, so the window runs it off the GUI thread."""
    if entries is None:
        entries = yield from fit_entries_job(formats)
    rows = yield from compare_rows_job([(e.spec, machine, e.label) for e in entries], workload, depths=depths,
                                       expected=expected)
    return ranked(entries, rows, min_tps)


def fit_words(row: FitRow, machine: MachineProfile, min_tps: float = 0.0) -> str:
    """How a row fits, in a few words: "all on the GPU", "experts on the CPU", "part on the
    CPU" (on a GPU; "in memory" and the second memory's name elsewhere), "does NOT fit"; a row
    below ``min_tps`` says so first."""
    gpu = machine.kind == "gpu"
    second = "the CPU" if gpu else (machine.offload_name or "the second memory")
    words = {"device": "all on the GPU" if gpu else "all in memory", "experts": f"experts on {second}",
             "layers": f"part on {second}", "does_not_fit": "does NOT fit"}[row.fit]
    if row.fit != "does_not_fit" and not row.fast_enough:
        return f"below {min_tps:g} tok/s ({words})"
    return words
