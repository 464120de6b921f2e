"""Which calibration gives a machine its expected figures, found once for the window, the
command line and reports:

1. a calibration timed on this machine (``rooflab measure calibrate``), kept for the machine's
   key: the engine the user runs, at the settings they ran it with;
2. else, for a preset with a known back end, the back end's efficiency fitted to published
   llama-bench results (``measure.public``);
3. else none: only the ceiling is shown."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
from typing import Any

from rooflab.core.errors import ResourceError, RooflabError
from rooflab.core.files.paths import cache_dir
from rooflab.core.files.records import load_record, write_record
from rooflab.core.measure import store
from rooflab.core.predict.expected import Expected, expected_for
from rooflab.core.values.calibration import Accuracy, EngineCalibration, Rates
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec

log = logging.getLogger(__name__)


def calibration_for(machine: MachineProfile, engine: str | None = None) -> EngineCalibration | None:
    """The calibration that applies to ``machine`` (``engine``: an engine settings key to
    insist on), None when there is none."""
    found = store.load_engine_calibration(store.machine_key(machine), engine)
    if found is not None or engine is not None:
        return found
    return public_calibration(machine)


def public_calibration(machine: MachineProfile) -> EngineCalibration | None:
    """The published-benchmark calibration of ``machine``'s back end, None without one."""
    backend = getattr(machine, "backend", "") or ("cpu" if machine.kind == "cpu" else "")
    if not backend:
        return None
    try:
        return _public(backend, machine.key, machine.flops("fp16") if "fp16" in machine.peak_flops else 0.0)
    except RooflabError as exc:
        log.warning("published benchmarks unusable for %s: %s", backend, exc)
        return None


ANY = "any format"
PUBLIC_CACHE_FORMAT = 1       # bump when what ``_fitted_backend`` computes changes


@functools.lru_cache(maxsize=64)
def _public(backend: str, key: str, fp16: float) -> EngineCalibration | None:
    """The back end's calibration for one machine: when ``key`` is itself among the published
    machines, compute factors are rescaled to the preset's own FP16 peak (the tables count
    GeForce FP16 at FP16 accumulate, presets at FP32)."""
    kept = _backend(backend)
    if kept is None:
        return None
    cal, peaks = kept
    scale = peaks[key] / fp16 if key in peaks and fp16 > 0 else 1.0
    if scale == 1.0:
        return cal

    def rescaled(r: Rates) -> Rates:
        return dataclasses.replace(r, prefill_flops={k: min(100.0, v * scale) for k, v in r.prefill_flops.items()},
                                   decode_flops={k: min(100.0, v * scale) for k, v in r.decode_flops.items()})

    return dataclasses.replace(cal, central=rescaled(cal.central), replicates=tuple(map(rescaled, cal.replicates)))


@functools.lru_cache(maxsize=8)
def _backend(backend: str) -> tuple[EngineCalibration, dict[str, float]] | None:
    """(the back end's calibration, each published machine's FP16 peak), fitted once per
    version of the shipped file and kept in the cache folder: fitting and scoring it leave one
    out takes a few tenths of a second that a window's start should not pay every time."""
    from rooflab.core.io.public_bench import default_path

    try:
        digest = hashlib.sha1(default_path().read_bytes()).hexdigest()[:16]
    except OSError as exc:
        raise ResourceError(f"{default_path()}: cannot read the published benchmarks ({exc})") from exc
    path = cache_dir() / "published" / f"{backend}-{digest}-{PUBLIC_CACHE_FORMAT}.json"
    kept = load_record(path, _cached)
    if kept is not None:
        return kept
    fitted = _fitted_backend(backend)
    if fitted is not None:
        try:
            write_record(path, {"calibration": fitted[0].to_dict(), "peaks": fitted[1]})
        except OSError as exc:          # a cache that cannot be written costs time, not the figure
            log.info("cannot keep %s: %s", path, exc)
    return fitted


def _cached(data: dict[str, Any]) -> tuple[EngineCalibration, dict[str, float]]:
    peaks = data["peaks"]
    if not isinstance(peaks, dict):
        raise TypeError("peaks must be an object")
    return EngineCalibration.from_dict(data["calibration"]), {str(k): float(v) for k, v in peaks.items()}


def _fitted_backend(backend: str) -> tuple[EngineCalibration, dict[str, float]] | None:
    """The back end's factors as relative rates: each machine's vote a replicate (the band is
    the spread of machines), accuracy from leaving a machine (and a model) out."""
    from rooflab.core.measure import public

    data = public.load_public()
    if backend not in public.backends(data):
        return None
    eff = public.backend_efficiency(backend, data)
    rows = [i for i, r in enumerate(data.rows) if data.machine(r.machine).backend == backend]
    tg, pp = public.machine_votes(data, rows, "tg"), public.machine_votes(data, rows, "pp")

    def rates(bandwidth: float, compute: float) -> Rates:
        compute = min(100.0, compute)
        return Rates(bandwidth={ANY: bandwidth}, prefill_flops={ANY: compute}, decode_flops={ANY: compute},
                     cache_bandwidth=bandwidth)

    replicates = tuple(rates(tg.get(m, eff.bandwidth), pp.get(m, eff.compute)) for m in sorted({*tg, *pp}))
    check = next(v for v in public.validate(data) if v.backend == backend)
    accuracy: dict[str, dict[str, Accuracy]] = {}
    for protocol, tg_err, pp_err in (("leave_one_machine_out", check.machine_out_tg, check.machine_out_pp),
                                     ("leave_one_model_out", check.model_out_tg, check.model_out_pp)):
        table = {phase: Accuracy(median=e.median, worst=e.worst, count=e.rows)
                 for phase, e in (("prefill", pp_err), ("decode", tg_err)) if e.rows}
        if table:
            accuracy[protocol] = table
    cal = EngineCalibration(
        machine_key="", machine_name=f"{backend} machines", engine_key=f"llama.cpp-{backend}-published",
        engine_label=f"llama.cpp {BACKEND_NAMES.get(backend, backend)}", settings={"backend": backend},
        date=max((s.accessed for s in data.sources), default=""), models=("published llama-bench results",),
        machine_bandwidth=1.0, machine_flops=1.0, central=rates(eff.bandwidth, eff.compute), replicates=replicates,
        accuracy=accuracy, source="public", points=eff.rows,
        notes=(f"llama.cpp on {backend}: {eff.machines} machines, {eff.rows} published results",))
    return cal, {m.key: m.peak_fp16 for m in data.machines}


BACKEND_NAMES = {"cuda": "CUDA", "metal": "Metal", "rocm": "ROCm", "vulkan": "Vulkan", "cpu": "CPU"}


def expected_on(spec: ModelSpec, machine: MachineProfile, *, dtype: str | None = None,
                engine: str | None = None) -> Expected | None:
    """What the calibration of ``machine`` expects of ``spec``, None when nothing is calibrated."""
    cal = calibration_for(machine, engine)
    return None if cal is None else expected_for(spec, machine, cal, dtype=dtype)
