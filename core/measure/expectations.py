"""Which calibration gives a machine its expected figures, found once for the window, the
command line and reports:

1. a calibration timed on this machine (``rooflab measure calibrate``), kept for the machine's
   key: the engine the user runs, at the settings they ran it with;
2. else, for a preset with a known back end, the back end's efficiency fitted to published
   llama-bench results (``measure.public``);
3. else none: only the ceiling is shown."""

from __future__ import annotations

import functools
import logging
from typing import Any

from rooflab.core.errors import RooflabError
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


@functools.lru_cache(maxsize=64)
def _public(backend: str, key: str, fp16: float) -> EngineCalibration | None:
    """The back end's factors as relative rates: each machine's vote a replicate (the band is
    the spread of machines), accuracy from leaving a machine (and a model) out. When ``key``
    is itself among the published machines, compute factors are rescaled to the preset's own
    FP16 peak (the tables count GeForce FP16 at FP16 accumulate, presets at FP32)."""
    from rooflab.core.measure import public

    data = public.load_public()
    if backend not in public.backends(data):
        return None
    eff = public.backend_efficiency(backend, data)
    rows = [i for i, r in enumerate(data.rows) if data.machine(r.machine).backend == backend]
    tg, pp = public.machine_votes(data, rows, "tg"), public.machine_votes(data, rows, "pp")
    listed = {m.key: m for m in data.machines}
    scale = listed[key].peak_fp16 / fp16 if key in listed and fp16 > 0 else 1.0

    def rates(bandwidth: float, compute: float) -> Rates:
        c = min(100.0, compute * scale)
        return Rates(bandwidth={ANY: bandwidth}, prefill_flops={ANY: c}, decode_flops={ANY: c},
                     cache_bandwidth=bandwidth)

    replicates = tuple(rates(tg.get(m, eff.bandwidth), pp.get(m, eff.compute)) for m in sorted({*tg, *pp}))
    check = next(v for v in _validation() if v.backend == backend)
    accuracy: dict[str, dict[str, Accuracy]] = {}
    for protocol, tg_err, pp_err in (("leave_one_machine_out", check.machine_out_tg, check.machine_out_pp),
                                     ("leave_one_model_out", check.model_out_tg, check.model_out_pp)):
        table = {phase: Accuracy(median=e.median, worst=e.worst, count=e.rows)
                 for phase, e in (("prefill", pp_err), ("decode", tg_err)) if e.rows}
        if table:
            accuracy[protocol] = table
    return EngineCalibration(
        machine_key="", machine_name=f"{backend} machines", engine_key=f"llama.cpp-{backend}-published",
        engine_label=f"llama.cpp {BACKEND_NAMES.get(backend, backend)}", settings={"backend": backend},
        date=max((s.accessed for s in data.sources), default=""), models=("published llama-bench results",),
        machine_bandwidth=1.0, machine_flops=1.0, central=rates(eff.bandwidth, eff.compute), replicates=replicates,
        accuracy=accuracy, source="public", points=eff.rows,
        notes=(f"llama.cpp on {backend}: {eff.machines} machines, {eff.rows} published results",))


@functools.lru_cache(maxsize=1)
def _validation() -> tuple[Any, ...]:
    from rooflab.core.measure import public

    return public.validate()


BACKEND_NAMES = {"cuda": "CUDA", "metal": "Metal", "rocm": "ROCm", "vulkan": "Vulkan", "cpu": "CPU"}


def expected_on(spec: ModelSpec, machine: MachineProfile, *, dtype: str | None = None,
                engine: str | None = None) -> Expected | None:
    """What the calibration of ``machine`` expects of ``spec``, None when nothing is calibrated."""
    cal = calibration_for(machine, engine)
    return None if cal is None else expected_for(spec, machine, cal, dtype=dtype)
