"""What can I run here? Every catalogue model, in its own weight format and in the common GGUF
ones, on one machine, ranked so the list answers the question: the most capable models that
fit in memory and decode at a usable speed first (``USABLE_TPS`` tokens/s per sequence, or the
floor asked for), then those that fit but run slower, then those that would page their weights
from disk, then those that do not fit. Capability is stated as total parameters (the proxy:
no quality score is assumed). ``--sort speed`` ranks each group by speed instead (the old
order: fit, then tokens/s), ``--sort context`` by the longest conversation that fits.

Each row's figures are ``report.compare``'s row for that model on that machine (placed by
auto-fit, the placement ``rooflab predict`` shows): ``rooflab fit``, the window's "What fits"
view and ``rooflab compare`` print the same numbers because they are the same rows. This
module only chooses the entries and orders the rows."""

from __future__ import annotations

import dataclasses
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
#: in the second memory (``CompareRow.offload``), whole layers there, more than both memories hold
#: (its weights paged from disk through mmap), not at all
FIT_ORDER: tuple[str, ...] = ("device", "experts", "layers", "disk", "does_not_fit")
USABLE_TPS = 10.0               # tokens/s per sequence: below it a chat reads slower than people do
SORTS: tuple[str, ...] = ("capability", "speed", "context")


@dataclass(frozen=True, slots=True, kw_only=True)
class FitEntry:
    """A catalogue model at one weight format: ``weights`` None is the entry's own format
    (its exact file), else the format it is opened with (``load_model(key, weights=...)``).
    A named entry is a model the user named (a file, an ``hf:`` name, a GGUF link; ``key`` is
    what it was opened by), ranked among the catalogue's at its own format."""

    key: str
    weights: str | None
    spec: ModelSpec = field(repr=False)
    named: bool = False              # not a catalogue entry

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
    def capability(self) -> int:
        """Total parameters, the stated proxy for how capable a model is."""
        return self.entry.spec.params_total

    @property
    def runs(self) -> bool:
        """Fits in the machine's memories (device and second memory), not paged from disk."""
        return self.fit in ("device", "experts", "layers")

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


def fit_kind(row: CompareRow, machine: MachineProfile) -> str:
    """How ``row`` fits ``machine`` (one of ``FIT_ORDER``): weights and cache more than the device
    and the second memory hold together are paged from disk ("disk"), however they are placed."""
    if not row.fits:
        return "does_not_fit"
    if row.weight_bytes + row.kv_bytes > machine.memory + (machine.offload_memory if machine.has_offload else 0.0):
        return "disk"
    return row.offload or "device"


def group(row: FitRow) -> int:
    """The group a row is ranked in, best first: runs at the floor or faster (0), runs slower
    (1), paged from disk (2), does not fit (3)."""
    if row.runs:
        return 0 if row.fast_enough else 1
    return 2 if row.fit == "disk" else 3


def ranked(entries: Sequence[FitEntry], rows: Sequence[CompareRow], min_tps: float = USABLE_TPS,
           sort: str = "capability", machine: MachineProfile | None = None) -> list[FitRow]:
    """``rows`` (one per entry, in order) ranked in ``group``s, and within each by ``sort``:
    "capability" (most parameters first, then the better fit, then the faster), "speed" (the
    better fit, then the faster) or "context" (the longest conversation that fits first); ties
    by name. ``min_tps`` 0: no floor. ``machine`` tells paging from disk (without it, none is)."""
    if sort not in SORTS:
        raise SpecError(f"--sort must be one of {', '.join(SORTS)}, got {sort!r}")
    unranked = []
    for entry, row in zip(entries, rows, strict=True):
        rate = speed(row)
        fit = fit_kind(row, machine) if machine is not None else ((row.offload or "device") if row.fits
                                                                  else "does_not_fit")
        unranked.append(FitRow(rank=0, entry=entry, row=row, fit=fit,
                               fast_enough=not min_tps or (rate is not None and rate >= min_tps)))

    def key(f: FitRow) -> tuple[object, ...]:
        fit, fast = FIT_ORDER.index(f.fit), -(f.speed or 0.0)
        within = {"capability": (-f.capability, fit, fast), "speed": (fit, fast),
                  "context": (-f.row.largest_context, -f.capability, fast)}[sort]
        return (group(f), *within, f.row.model, f.row.weights)

    unranked.sort(key=key)
    return [dataclasses.replace(f, rank=i + 1) for i, f in enumerate(unranked)]


def fit_table_job(machine: MachineProfile, workload: Workload, *, entries: Sequence[FitEntry] | None = None,
                  formats: Sequence[str] = FORMATS, min_tps: float = USABLE_TPS, sort: str = "capability",
                  expected: ExpectedHook | None = None, depths: Sequence[int] = DEPTHS,
                  named: Sequence[FitEntry] = ()) -> Generator[Progress, None, list[FitRow]]:
    """The ranked table for ``machine`` at ``workload``: ``entries`` (read from the catalogue
    when None) and the ``named`` ones, each row ``report.compare``'s, ranked by ``ranked``. A
    job: a Progress per model read and per row worked out, so the window runs it off the GUI thread."""
    if entries is None:
        entries = yield from fit_entries_job(formats)
    entries = [*entries, *named]
    rows = yield from compare_rows_job([(e.spec, machine, e.label) for e in entries], workload, depths=depths,
                                       expected=expected)
    return ranked(entries, rows, min_tps, sort, machine)


def fit_words(row: FitRow, machine: MachineProfile, min_tps: float = USABLE_TPS) -> str:
    """Why a row stands where it does, in a few words: how it fits ("all on the GPU", "experts
    on the CPU", "part on the CPU"; "in memory" and the second memory's name off a GPU; "paged
    from disk"; "does NOT fit" and what it needs of what there is) and the tokens/s it was ranked
    by, "below X" when under the floor."""
    gpu = machine.kind == "gpu"
    second = "the CPU" if gpu else (machine.offload_name or "the second memory")
    words = {"device": "all on the GPU" if gpu else "all in memory", "experts": f"experts on {second}",
             "layers": f"part on {second}", "disk": "paged from disk", "does_not_fit": "does NOT fit"}[row.fit]
    said = row.row.placement
    if row.fit == "does_not_fit" and said.startswith(words):
        return said                  # and by how much: "does NOT fit: needs 1.1 TB of 25.8 GB on ..."
    rate = row.speed
    if row.fit == "does_not_fit" or rate is None:
        return words
    words = f"{words}, {rate:,.0f} tok/s" if rate >= 10 else f"{words}, {rate:.1f} tok/s"
    return words if row.fast_enough else f"{words}, below {min_tps:g}"
