"""torch plumbing shared by the measurements: import on demand, devices, dtypes, timing that
waits for the device, and the thread count. torch is imported inside functions only."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from rooflab.core.errors import MeasurementError

#: rooflab dtype names -> torch attribute names, and bytes per element.
DTYPES: dict[str, tuple[str, int]] = {"fp32": ("float32", 4), "bf16": ("bfloat16", 2), "fp16": ("float16", 2)}
KV_TYPE_OF: dict[str, str] = {"fp32": "f32", "bf16": "bf16", "fp16": "f16"}


def require_torch() -> Any:
    """The torch module, or MeasurementError saying how to get it."""
    try:
        import torch
    except ImportError as exc:
        # what a wheel user can run: packaging/dev.sh exists only in a checkout
        # a pinned CPU build: an unpinned "pip install torch" resolves a multi-GB CUDA build on Linux
        raise MeasurementError("measuring in torch needs PyTorch: pip install torch==2.13.0 transformers "
                               "--extra-index-url https://download.pytorch.org/whl/cpu") from exc
    return torch


def torch_dtype(name: str) -> Any:
    """The torch dtype for "fp32", "bf16" or "fp16"."""
    if name not in DTYPES:
        raise MeasurementError(f"dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    return getattr(require_torch(), DTYPES[name][0])


def dtype_bytes(name: str) -> int:
    if name not in DTYPES:
        raise MeasurementError(f"dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    return DTYPES[name][1]


def available_devices() -> list[str]:
    """Devices this torch build can run on, CPU first."""
    torch = require_torch()
    out = ["cpu"]
    if torch.cuda.is_available():
        out.append("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        out.append("mps")
    return out


def resolve_device(name: str | None) -> str:
    """A validated device string; None or "auto" picks the best one present."""
    devices = available_devices()
    if not name or name == "auto":
        return devices[-1] if len(devices) > 1 else "cpu"
    base = name.split(":")[0]
    if base not in ("cpu", "cuda", "mps"):
        raise MeasurementError(f"device must be cpu, cuda or mps, got {name!r}")
    if base not in devices:
        raise MeasurementError(f"device {name!r} is not available here (available: {', '.join(devices)})")
    return name


def synchronize(device: str) -> None:
    """Wait until ``device`` has finished queued work (a no-op on the CPU)."""
    if device.startswith("cuda"):
        require_torch().cuda.synchronize(device)
    elif device.startswith("mps"):
        require_torch().mps.synchronize()


def timed(device: str, fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call, the device synchronised before and after."""
    synchronize(device)
    start = time.perf_counter()
    result = fn()
    synchronize(device)
    return time.perf_counter() - start, result


def device_name(device: str) -> str:
    """A human name for the device: the GPU's name, or the CPU's."""
    from rooflab.core.measure.machine.sysinfo import cpu_name

    torch = require_torch()
    if device.startswith("cuda"):
        return str(torch.cuda.get_device_name(torch.device(device)))
    if device.startswith("mps"):
        return f"Apple GPU (MPS) on {cpu_name()}"
    return cpu_name()


def dtype_supported(device: str, name: str) -> bool:
    """Whether a small matmul in ``name`` runs on ``device`` at all."""
    torch = require_torch()
    try:
        a = torch.ones((8, 8), dtype=torch_dtype(name), device=device)
        (a @ a).sum().item()
    except (RuntimeError, TypeError):
        return False
    return True


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """Run with ``threads`` intra-op threads (None: torch's default); yields the count in use
    and restores the previous count afterwards."""
    torch = require_torch()
    before = torch.get_num_threads()
    if threads is not None:
        if threads < 1:
            raise MeasurementError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def torch_version() -> str:
    return str(require_torch().__version__)
