"""Argument types the commands share: one clear line for a bad value, never a traceback."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from rooflab.core.values.machine import BANDWIDTH_RANGE, FLOPS_RANGE
from rooflab.core.values.workload import DTYPE_NAME

GB = 1e9


def int_list(low: int, high: int) -> Callable[[str], tuple[int, ...]]:
    """A parser of comma-separated whole numbers in [low, high] ("1e3" is 1000; "2.5" is refused)."""

    def parse(text: str) -> tuple[int, ...]:
        try:
            numbers = [float(x) for x in text.replace(" ", "").split(",") if x]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
        if not numbers:
            raise argparse.ArgumentTypeError("expected at least one value, got none")
        if not all(n.is_integer() and low <= n <= high for n in numbers):
            raise argparse.ArgumentTypeError(f"values must be integers in [{low:,}, {high:,}], got {text!r}")
        return tuple(int(n) for n in numbers)

    return parse


def int_in(low: int, high: int) -> Callable[[str], int]:
    """A parser of one whole number in [low, high] ("1e3" is 1000): a count far past what a
    machine has (99999999999999999999 threads, repeats) would abort the engine or never end."""

    def parse(text: str) -> int:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text[:40]!r}") from None
        if not (value.is_integer() and low <= value <= high):       # inf and NaN fail too
            raise argparse.ArgumentTypeError(f"must be a whole number in [{low:,}, {high:,}], got {text[:40]!r}")
        return int(value)

    return parse


def number_in(low: float, high: float, unit: str = "") -> Callable[[str], float]:
    """A parser of one number in [low, high] (``unit`` names it in the message): a value
    outside would overflow or underflow the predictions (1e-308 GB/s makes every time inf)."""
    shown = f" {unit}" if unit else ""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not low <= value <= high:            # NaN fails both
            raise argparse.ArgumentTypeError(f"must be between {low:,.10g} and {high:,.10g}{shown}, got {text!r}")
        return value

    return parse



def folder_name(text: str) -> str:
    """A folder the command writes to (``--out``): any path without a control character, which
    would reach the terminal raw when the files written there are listed."""
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text):
        raise argparse.ArgumentTypeError(f"{text[:60]!r} holds a control character; give a folder without one")
    return text


def dtype_name(text: str) -> str:
    """A compute dtype's name ("fp16", "BF16" -> "bf16"): letters, digits and underscores only,
    so what the user typed can be echoed in a message without reaching the terminal raw."""
    name = text.strip().lower()
    if not DTYPE_NAME.fullmatch(name):
        raise argparse.ArgumentTypeError(f"expected a dtype name such as fp32, fp16 or bf16, got {text[:40]!r}")
    return name


def add_engine_options(p: argparse.ArgumentParser) -> None:
    """llama.cpp's run settings that change a prediction, spelled as llama-bench spells them:
    -ub, -fa and -t (``predict``, ``compare`` and ``fit`` alike)."""
    p.add_argument("--ubatch", "-ub", type=int, default=None, metavar="N",
                   help="llama.cpp's -ub: tokens per pass of a prompt, the rows of each multiply (routed experts "
                        "get N x used / count each); host-resident weights stream to the GPU once per pass "
                        "(default 512)")
    p.add_argument("--flash-attention", "-fa", choices=("on", "off"), default=None,
                   help="llama.cpp's -fa: off, the compute buffer holds the attention scores (more memory) and a "
                        "prompt's attention takes the other kernel's fitted rate where a calibration timed both; a "
                        "quantized KV cache needs it on, as llama.cpp does (default on, as llama.cpp's auto does "
                        "where it runs)")
    p.add_argument("--threads", "-t", type=int, default=None, metavar="N",
                   help="llama.cpp's -t on a CPU: compute scales with min(N, cores) / cores (default: the "
                        "physical cores, llama.cpp's own default)")


def add_host_options(p: argparse.ArgumentParser) -> None:
    """The host behind a GPU, which computes the layers and experts kept in its memory: a GPU
    preset states none of its CPU, so the lessons' 8-core desktop prices it until these say."""
    p.add_argument("--host-tflops", type=number_in(FLOPS_RANGE[0] / 1e12, FLOPS_RANGE[1] / 1e12, "TFLOP/s"),
                   metavar="T", help="peak TFLOP/s of the host CPU behind the GPU, which computes what is "
                                     "offloaded: cores x GHz x 32 / 1000 with AVX2 FMA (a 16-core at 5.7 GHz "
                                     "is 2.9; default: an 8-core desktop, 1.02); its quantized multiplies run "
                                     "on int8 dot products at 4x that")
    p.add_argument("--host-bandwidth", type=number_in(BANDWIDTH_RANGE[0] / GB, BANDWIDTH_RANGE[1] / GB, "GB/s"),
                   metavar="GB/s", help="the host memory's bandwidth behind the GPU (default: the preset's, "
                                        "e.g. two channels of DDR5-5600, 89.6)")
