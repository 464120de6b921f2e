"""The Measure tab's jobs that core does not already provide as one (measuring the machine and
timing a model in llama.cpp or torch are core jobs as they are), and the parsing of its number
lists. No Qt here."""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

from rooflab.core.errors import MeasurementError, RooflabError
from rooflab.core.io.llamabench import BenchImport
from rooflab.core.jobs import CancelToken, Progress
from rooflab.core.values.model import ModelSpec


def import_job(path: str, cancel: CancelToken) -> Generator[Progress, None, BenchImport]:
    """Read llama.cpp benchmark output off the GUI thread; returns what it holds."""
    from rooflab.core.io.llamabench import read_benchmark

    yield Progress(step="import", message=f"reading {Path(path).name}")
    return read_benchmark(path)


def llamabench_job(spec: ModelSpec, ref: object, bench: Any, batched: Any, *, bench_path: str,
                   synthetic: bool) -> tuple[Callable[[CancelToken], Generator[Progress, None, Any]], list[str]]:
    """(job, warnings): the job runs ``measure_in_llamabench`` with the user's llama-bench
    (``bench_path``, its folder, or "" for the one on PATH) and the llama-batched-bench beside
    it. MeasurementError, before anything starts, when there is no llama-bench; without a
    llama-batched-bench the batched sweep is left out, with a warning."""
    from rooflab.core.measure.engines.engine import measure_in_llamabench
    from rooflab.core.measure.engines.llamabench.plan import find_tools

    if bench is None:
        raise MeasurementError("llama-bench times prompts and generation: tick the prompt sweep or the "
                               "generation at each depth too (batched decode runs after them)")
    binary, batched_binary, warning = find_tools(bench_path or None, batched=batched is not None)
    warnings = [warning[0].upper() + warning[1:]] if warning else []
    if batched_binary is None:
        batched = None

    def job(cancel: CancelToken) -> Generator[Progress, None, Any]:
        return measure_in_llamabench(spec, ref, bench, batched, binary=str(binary),
                                     batched_binary=str(batched_binary) if batched_binary else None,
                                     synthetic=synthetic, cancel=cancel)

    return job, warnings


def engine_job(engine: str, spec: ModelSpec, ref: object, view: Any, *, synthetic: bool,
               available: float | None) -> tuple[Any, list[str]]:
    """(job, warnings) timing ``spec`` (on screen from ``ref``) in llama.cpp or the user's
    llama-bench with the plan ``view`` (the Measure panel) reads from its controls."""
    from rooflab.core.measure.engines.engine import measure_in_llamacpp

    if engine == "llamacpp":
        return functools.partial(measure_in_llamacpp, spec, ref, view.llamacpp_plan(), synthetic=synthetic,
                                 available=available), []
    # the plans name the GGUF; the job puts the file it runs (the user's or one written) in its place
    bench, batched = view.llamabench_plans(ref if isinstance(ref, str) else spec.source or spec.name)
    return llamabench_job(spec, ref, bench, batched, bench_path=view.bench_path_text(), synthetic=synthetic)


def synthetic_size(spec: ModelSpec) -> float | None:
    """Bytes of the random-weight GGUF that would be written for ``spec`` (None: it cannot be)."""
    from rooflab.core.measure.engines.gguf_synth import synthetic_gguf_bytes

    try:
        return float(synthetic_gguf_bytes(spec))
    except RooflabError:
        return None


def llamacpp_estimate(spec: ModelSpec, view: Any, *, written: float | None, available: float | None) -> str:
    """What a llama.cpp run of ``spec`` with the plan on ``view`` needs, against the free memory
    (``available``; None: ask the system), and the GGUF it writes first (``written`` bytes, None
    for none); "" while a field is bad (the click says which)."""
    from rooflab.core.measure.engines.llamacpp.plan import llamacpp_memory
    from rooflab.core.measure.machine.sysinfo import system_memory_available
    from rooflab.gui.controllers.measure_text import estimate_text

    try:
        estimate = llamacpp_memory(spec, view.llamacpp_plan())
    except RooflabError:
        return ""
    return estimate_text(estimate, system_memory_available() if available is None else available, written)


def torch_estimate(spec: ModelSpec, view: Any) -> str:
    """How long a torch run of ``spec`` with the plan on ``view`` should take, said before it
    starts; "" while a field is bad (the click says which)."""
    from rooflab.core.measure.engines.torch.timing import estimate_seconds
    from rooflab.gui.controllers.measure_text import duration_text

    try:
        plan = view.model_plan()
    except RooflabError:
        return ""
    return duration_text(estimate_seconds(spec, plan), plan.device)


def stored_machine_samples(current: list[Any]) -> tuple[list[Any], str]:
    """(the kept machine measurement's roofline samples, the measured machine's name): what
    was measured of this machine, drawn beside its own roof. ``current`` when none is kept."""
    from rooflab.core.io import presets
    from rooflab.core.values.machine_run import MachineMeasurement

    raw = presets.load_machine_measurement()
    measured = presets.load_measured_machine()
    samples = current
    if raw:
        try:
            samples = list(MachineMeasurement.from_dict(raw).roofline)
        except RooflabError:
            samples = []
    return samples, measured.name if measured is not None else ""


def bench_status(path: str) -> tuple[str, bool]:
    """(what the Measure tab says about the llama-bench that would run, whether there is one)."""
    from rooflab.core.measure.engines.llamabench.plan import find_binary

    try:
        return f"Runs {find_binary('llama-bench', path or None)}", True
    except RooflabError as exc:
        return str(exc), False
