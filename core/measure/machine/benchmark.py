"""Measure this machine's two ceilings: memory bandwidth (streaming read, copy, triad over
buffers far larger than the last-level cache) and matrix-multiply peaks per dtype, plus an
empirical roofline: (m x k)(k x n) multiplies for m from 1 to a few thousand.

Bandwidth and peaks are timed in rounds, every kernel and dtype once a round, so each figure is
the median of runs spread over the whole measurement, its spread kept beside it; the multiplies
are sized from the cache and the core count (``matmul_size``), never from how long a small one
took on a busy machine. The run is then checked (``machine_checks``): a run that fails says why.

Each measurement is a job (``rooflab.core.jobs``): a generator yielding ``Progress``, one per
finished kernel or point carrying that result as its ``sample``, checking ``cancel`` between
calls no longer than ``chunk_seconds``; it returns the summary. ``measure_machine_blocking``
drains it. torch only inside functions."""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from rooflab.core.errors import MeasurementError
from rooflab.core.jobs import CancelFlag, EtaTracker, Progress, check_cancel, run_job
from rooflab.core.measure.engines.torch import backend
from rooflab.core.measure.engines.torch.backend import timed
from rooflab.core.measure.machine.checks import judge_machine
from rooflab.core.measure.machine.sysinfo import (
    cpu_fp32_bound,
    cpu_int8_path,
    free_and_total_memory,
    last_level_cache_bytes,
)
from rooflab.core.measure.machine.trust import load_average
from rooflab.core.values.machine_run import (
    BandwidthResult,
    MachineMeasurement,
    MatmulResult,
    RooflineSample,
)
from rooflab.core.values.measured import MAX_PLAN_REPEATS, MAX_THREADS

MiB = 1 << 20
KERNELS: tuple[str, ...] = ("read", "copy", "triad")
_PASSES = {"read": 1, "copy": 2, "triad": 3}     # buffers each kernel streams per call
ROOFLINE_MS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


@dataclass(frozen=True, slots=True, kw_only=True)
class MachinePlan:
    """What to measure and how hard. Sizes in bytes; None picks a default for the device.

    repeats: rounds, each timing every bandwidth kernel and matmul once (the figures are their
    medians). buffer_bytes: each bandwidth buffer (default max(4 x LLC, 512 MiB), capped at an
    eighth of free memory). dtypes: matmul peaks (default fp32, bf16, fp16, those that run). roofline_k:
    the shared dimension k = n (default: a k x n matrix of twice the LLC on a CPU)."""

    device: str = "cpu"
    threads: int | None = None
    repeats: int = 5
    buffer_bytes: int | None = None
    dtypes: tuple[str, ...] | None = None
    matmul_max: int | None = None     # largest n tried (None: 4096 on a CPU, 16384 on a GPU)
    roofline_dtype: str | None = None
    roofline_k: int | None = None
    roofline_ms: tuple[int, ...] = ROOFLINE_MS
    target_seconds: float = 0.02      # a timed call is repeated until it lasts this long
    chunk_seconds: float = 0.25       # no single uninterruptible call may last longer
    experiments: tuple[str, ...] = ("bandwidth", "matmul", "roofline")

    def __post_init__(self) -> None:
        if not 1 <= self.repeats <= MAX_PLAN_REPEATS:
            raise MeasurementError(f"repeats must be in [1, {MAX_PLAN_REPEATS}], got {self.repeats}")
        if self.threads is not None and not 1 <= self.threads <= MAX_THREADS:
            raise MeasurementError(f"threads must be in [1, {MAX_THREADS}], got {self.threads}")
        unknown = set(self.experiments) - {"bandwidth", "matmul", "roofline"}
        if unknown:
            raise MeasurementError(f"unknown machine experiments: {', '.join(sorted(unknown))}")


def default_buffer_bytes(device: str) -> int:
    """Bytes per bandwidth buffer: max(4 x LLC, 512 MiB) on a CPU (1 GiB on a GPU), capped at
    an eighth of the free memory so three buffers never crowd the machine."""
    base = 1 << 30 if device != "cpu" else max(4 * last_level_cache_bytes(), 512 * MiB)
    free, _ = free_and_total_memory(device)
    if free:
        base = min(base, int(free / 8))
    return max(base // MiB, 1) * MiB


def default_dtype(device: str, dtypes: tuple[str, ...]) -> str:
    """The dtype a model usually runs in on ``device``, among those measured."""
    preferred = ("fp32", "bf16", "fp16") if device == "cpu" else ("bf16", "fp16", "fp32")
    for name in preferred:
        if name in dtypes:
            return name
    return dtypes[0]


def _repeat_count(device: str, once: float, target: float) -> int:
    """Calls per timed sample so that a sample lasts about ``target`` seconds."""
    return max(1, min(10_000, math.ceil(target / max(once, 1e-7))))


def _sample(device: str, fn: Any, inner: int) -> float:
    """Seconds per call, averaged over ``inner`` back-to-back calls."""
    seconds, _ = timed(device, lambda: [fn() for _ in range(inner)])
    return seconds / inner


# --- figures measured in rounds ---------------------------------------------------------------

@dataclass(slots=True)
class _Figure:
    """One bandwidth kernel or matmul dtype: its call, calls per timed sample, and the bytes or
    FLOPs one call moves or does; ``times`` gathers seconds per call, one per round."""

    step: str                 # "bandwidth" or "matmul"
    name: str                 # the kernel or the dtype
    call: Callable[[], Any]
    inner: int
    work: float
    size: int = 0             # buffer bytes, or n of the n x n multiply
    times: list[float] = field(default_factory=list)

    @property
    def runs(self) -> tuple[float, ...]:
        return tuple(self.work / t for t in self.times)


def _rounds(device: str, figures: list[_Figure], repeats: int, cancel: CancelFlag, eta: EtaTracker,
            ) -> Generator[Progress, None, None]:
    """``repeats`` rounds, each timing every figure once: the runs of one figure are spread over
    the whole measurement, so a burst of other load slows one run of several figures, not every
    run of one, and a machine whose load changed shows it as a spread."""
    for rep in range(repeats):
        for fig in figures:
            check_cancel(cancel)
            fig.times.append(_sample(device, fig.call, fig.inner))
            eta.advance()
            yield eta.progress(fig.step, f"{fig.name}: run {rep + 1}/{repeats}")


def _bandwidth_kernel(torch: Any, kernel: str, a: Any, b: Any, c: Any) -> Any:
    if kernel == "read":
        return lambda: torch.sum(a)
    if kernel == "copy":
        return lambda: b.copy_(a)
    return lambda: torch.add(b, c, alpha=3.0, out=a)         # triad: a = b + 3 c


def _bandwidth_figures(torch: Any, plan: MachinePlan, cancel: CancelFlag, eta: EtaTracker,
                       ) -> Generator[Progress, None, list[_Figure]]:
    """Streaming read (sum), copy and triad over three buffers; bytes per call: read streams
    one buffer, copy two (read + write), triad three; write-allocate traffic is not counted,
    as in STREAM. Each kernel's first call is its warm-up."""
    device = plan.device
    size = plan.buffer_bytes or default_buffer_bytes(device)
    n = size // 4
    yield eta.progress("bandwidth", f"allocating 3 x {size / MiB:.0f} MiB on {device}")
    a, b, c = (torch.ones(n, dtype=torch.float32, device=device) for _ in range(3))
    figures = []
    for kernel in KERNELS:
        check_cancel(cancel)
        fn = _bandwidth_kernel(torch, kernel, a, b, c)
        once = _sample(device, fn, 1)
        figures.append(_Figure(step="bandwidth", name=kernel, call=fn, work=float(_PASSES[kernel] * n * 4),
                               inner=_repeat_count(device, once, plan.target_seconds), size=n * 4))
        eta.advance()
        yield eta.progress("bandwidth", f"{kernel}: warmed up")
    return figures


def matmul_size(device: str, dtype: str, threads: int, largest: int) -> int:
    """n of the n x n x n multiply that times a dtype's peak, as a BLAS benchmark sizes it: its
    three operands at least the last-level cache (the blocked kernel reaches its steady state)
    and at least 2 x 768^3 FLOP per thread (every core has whole blocks to do); 1024 at least
    on a CPU, 8192 on a GPU; a multiple of 256, at most ``largest``."""
    if device != "cpu":
        return min(8192, largest)
    from_cache = math.sqrt(last_level_cache_bytes() / (3 * backend.dtype_bytes(dtype)))
    from_cores = 768 * max(threads, 1) ** (1 / 3)
    n = max(1024.0, from_cache, from_cores)
    return int(min(largest, max(256, math.ceil(n / 256) * 256)))


def _matmul_figures(torch: Any, plan: MachinePlan, threads: int, cancel: CancelFlag, eta: EtaTracker,
                    ) -> Generator[Progress, None, list[_Figure]]:
    """One n x n x n multiply (2 n^3 FLOP) per dtype at ``matmul_size``; halved only while one
    call would hold the job past ``4 x chunk_seconds`` (a dtype this machine barely runs, fp16 on
    most CPUs), doubled while a call is shorter than ``5 x target_seconds`` (a GPU)."""
    device = plan.device
    largest = plan.matmul_max or (4096 if device == "cpu" else 16384)
    figures = []
    for name in plan.dtypes or ("fp32",):
        dtype = backend.torch_dtype(name)
        n = matmul_size(device, name, threads, largest)
        call = functools.partial(torch.mm, *_square(torch, n, dtype, device))
        once = _sample(device, call, 1)
        while once > 4 * plan.chunk_seconds and n > 256:
            check_cancel(cancel)
            n //= 2
            call = functools.partial(torch.mm, *_square(torch, n, dtype, device))
            once = _sample(device, call, 1)
            yield eta.progress("matmul", f"{name}: sizing, n = {n}")
        while once < 5 * plan.target_seconds and n * 2 <= largest and once * 8 < plan.chunk_seconds:
            check_cancel(cancel)
            n *= 2
            call = functools.partial(torch.mm, *_square(torch, n, dtype, device))
            once = _sample(device, call, 1)
            yield eta.progress("matmul", f"{name}: sizing, n = {n}")
        figures.append(_Figure(step="matmul", name=name, call=call, work=2.0 * n ** 3, size=n,
                               inner=_repeat_count(device, once, plan.target_seconds)))
        eta.advance()
        yield eta.progress("matmul", f"{name}: {n}x{n}")
    return figures


def _square(torch: Any, n: int, dtype: Any, device: str) -> tuple[Any, Any]:
    x = torch.randn((n, n), device=device).to(dtype)
    y = torch.randn((n, n), device=device).to(dtype)
    return x, y


def _bandwidth_result(fig: _Figure, device: str, threads: int) -> BandwidthResult:
    runs = fig.runs
    return BandwidthResult(kernel=fig.name, device=device, buffer_bytes=fig.size, bytes_per_call=fig.work,
                           best=max(runs), median=statistics.median(runs), repeats=len(runs), threads=threads,
                           runs=runs)


def _matmul_result(fig: _Figure, device: str, threads: int) -> MatmulResult:
    runs = fig.runs
    return MatmulResult(dtype=fig.name, device=device, size=fig.size, best=max(runs),
                        median=statistics.median(runs), repeats=len(runs), threads=threads, runs=runs)


def bandwidth_and_peaks(plan: MachinePlan, cancel: CancelFlag = None, eta: EtaTracker | None = None,
                        ) -> Generator[Progress, None, tuple[tuple[BandwidthResult, ...], tuple[MatmulResult, ...]]]:
    """The bandwidth kernels and the matmul peaks the plan asks for, each the median of
    ``plan.repeats`` runs taken in rounds (``_rounds``); every result rides on a ``Progress``
    once its last run is in."""
    torch = backend.require_torch()
    device = plan.device
    eta = eta or EtaTracker([1.0])
    figures: list[_Figure] = []
    with backend.torch_threads(plan.threads) as threads:
        if "bandwidth" in plan.experiments:
            figures += yield from _bandwidth_figures(torch, plan, cancel, eta)
        if "matmul" in plan.experiments:
            figures += yield from _matmul_figures(torch, plan, threads, cancel, eta)
        yield from _rounds(device, figures, plan.repeats, cancel, eta)
    bw = tuple(_bandwidth_result(f, device, threads) for f in figures if f.step == "bandwidth")
    mm = tuple(_matmul_result(f, device, threads) for f in figures if f.step == "matmul")
    for r in bw:
        yield eta.progress("bandwidth", f"{r.kernel}: {r.median / 1e9:.1f} GB/s (spread {r.spread:.0%})", sample=r)
    for m in mm:
        yield eta.progress("matmul", f"{m.dtype}: {m.median / 1e9:.0f} GFLOP/s (spread {m.spread:.0%})", sample=m)
    return bw, mm


# --- empirical roofline ----------------------------------------------------------------------

def roofline_k(device: str, dtype: str) -> int:
    """k = n for the roofline: the k x n operand twice the LLC on a CPU (so m = 1 streams it
    from memory), 8192 on a GPU; a multiple of 256."""
    if device != "cpu":
        return 8192
    side = math.sqrt(2 * last_level_cache_bytes() / backend.dtype_bytes(dtype))
    return int(min(8192, max(1024, math.ceil(side / 256) * 256)))


def roofline(plan: MachinePlan, cancel: CancelFlag = None, eta: EtaTracker | None = None,
             ) -> Generator[Progress, None, tuple[RooflineSample, ...]]:
    """Achieved FLOP/s and arithmetic intensity of (m x k)(k x n) for each m in the plan.

    intensity = 2 m k n / ((m k + k n + m n) x bytes per element): low m streams the k x n
    operand and is bandwidth-bound; large m reuses it and approaches the matmul peak. Stops
    growing m once one call lasts longer than ``chunk_seconds``."""
    torch = backend.require_torch()
    device = plan.device
    name = plan.roofline_dtype or default_dtype(device, ("fp32", "bf16", "fp16"))
    dtype = backend.torch_dtype(name)
    k = n = plan.roofline_k or roofline_k(device, name)
    elt = backend.dtype_bytes(name)
    eta = eta or EtaTracker([1.0] * len(plan.roofline_ms))
    samples = []
    with backend.torch_threads(plan.threads):
        weights = torch.randn((k, n), device=device).to(dtype)
        for m in plan.roofline_ms:
            check_cancel(cancel)
            call = functools.partial(torch.mm, torch.randn((m, k), device=device).to(dtype), weights)
            once = _sample(device, call, 1)
            inner = _repeat_count(device, once, plan.target_seconds)
            best = min(_sample(device, call, inner) for _ in range(3))
            flops = 2.0 * m * k * n
            nbytes = float((m * k + k * n + m * n) * elt)
            sample = RooflineSample(dtype=name, device=device, m=m, k=k, n=n, seconds=best, flops=flops,
                                    bytes=nbytes, intensity=flops / nbytes, achieved=flops / best)
            samples.append(sample)
            eta.advance()
            yield eta.progress("roofline", f"{name}: m = {m}", sample=sample)
            if once > plan.chunk_seconds / 2:
                break                                   # the next m would run past the chunk limit
    return tuple(samples)


# --- the whole machine -----------------------------------------------------------------------

def measure_machine(plan: MachinePlan | None = None, cancel: CancelFlag = None,
                    ) -> Generator[Progress, None, MachineMeasurement]:
    """Bandwidth, matmul peaks and roofline on ``plan.device``; returns a MachineMeasurement
    whose ``profile()`` is a MachineProfile for "this machine, measured", judged by
    ``machine_checks`` (``disturbed`` says why a run cannot be trusted)."""
    import datetime
    import time

    plan = plan or MachinePlan()
    device = backend.resolve_device(plan.device)
    if device != plan.device:
        plan = _replace(plan, device=device)
    dtypes = plan.dtypes or tuple(d for d in ("fp32", "bf16", "fp16") if backend.dtype_supported(device, d))
    plan = _replace(plan, dtypes=dtypes)
    figures = (len(KERNELS) if "bandwidth" in plan.experiments else 0) \
        + (len(dtypes) if "matmul" in plan.experiments else 0)
    weights = ([2.0] * len(KERNELS) if "bandwidth" in plan.experiments else []) \
        + ([3.0] * len(dtypes) if "matmul" in plan.experiments else []) \
        + [2.0 / plan.repeats] * (figures * plan.repeats) \
        + ([0.4] * len(plan.roofline_ms) if "roofline" in plan.experiments else [])
    eta = EtaTracker(weights)
    start, load_start = time.perf_counter(), load_average()
    yield eta.progress("start", f"measuring {device}")
    bw, mm = yield from bandwidth_and_peaks(plan, cancel, eta)
    rl: tuple[RooflineSample, ...] = ()
    if "roofline" in plan.experiments:
        rl = yield from roofline(plan, cancel, eta)
    with backend.torch_threads(plan.threads) as threads:
        pass
    _, total = free_and_total_memory(device)
    run = MachineMeasurement(
        device=device, device_name=backend.device_name(device), threads=threads,
        torch_version=backend.torch_version(), date=datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"), memory_total=float(total or 0.0), bandwidth=bw, matmul=mm, roofline=rl,
        default_dtype=default_dtype(device, tuple(r.dtype for r in mm) or dtypes),
        seconds=time.perf_counter() - start, load_start=load_start, load_end=load_average(),
        fp32_bound=cpu_fp32_bound(threads) if device == "cpu" else None, int8_path=cpu_int8_path())
    return judge_machine(run)


def _replace(plan: MachinePlan, **changes: Any) -> MachinePlan:
    import dataclasses

    return dataclasses.replace(plan, **changes)


def measure_machine_blocking(plan: MachinePlan | None = None, cancel: CancelFlag = None,
                             on_progress: Callable[[Progress], None] | None = None) -> MachineMeasurement:
    """``measure_machine`` run to its end in this thread, each ``Progress`` to ``on_progress``."""
    return run_job(measure_machine(plan, cancel), on_progress)
