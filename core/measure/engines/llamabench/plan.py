"""The user's own llama.cpp benchmark tools, and what rooflab asks of them: finding the
executables, reading which flags a build knows, typed sweep plans, and the exact command lines.

Flags, as llama.cpp spells them (tools/llama-bench/README.md and llama-bench.cpp; common/arg.cpp
and tools/batched-bench/batched-bench.cpp):

- llama-bench: ``-m -p -n -d -t -ngl -ncmoe -fa 0|1 -ctk -ctv -b -ub -r -o jsonl``. ``-fa``
  took ``0|1`` until Aug 2025 and takes ``on|off|auto`` (with 1/0 still accepted) since.
- llama-batched-bench: ``-m -c -npp -ntg -npl -pps -t -ngl -ncmoe -fa -ctk -ctv -b -ub
  --output-format jsonl``. Its ``-fa`` was a bare switch until Aug 2025 and takes
  ``on|off|auto`` since; which one a build wants is read from its ``--help``.
- Only in newer builds: ``-d`` (llama-bench, April 2025), ``-ncmoe`` (Aug 2025),
  ``--output-format jsonl`` (llama-batched-bench, autumn 2024). They are passed only when the
  plan needs them, and refused with one clear line when the build's ``--help`` lacks them."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rooflab.core.errors import MeasurementError, SpecError
from rooflab.core.jobs import CancelFlag
from rooflab.core.measure.engines.child_process import ChildProcess
from rooflab.core.values.workload import needs_flash_attention

TOOLS: tuple[str, ...] = ("llama-bench", "llama-batched-bench")
# cache types each tool parses (llama-bench's ggml_type_from_name; common/arg.cpp adds f32)
LLAMA_BENCH_KV: tuple[str, ...] = ("f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl")
BATCHED_KV: tuple[str, ...] = ("f32", *LLAMA_BENCH_KV)
_VERSION = re.compile(r"(?:version|build)\s*:\s*(\d+)\s*\(([0-9a-fA-F]+)\)")
_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def version_in(text: str) -> str:
    """"b5163 (8cf427ff)" from llama.cpp's "version: 5163 (8cf427ff)" or its log's "build: ..."
    line; "" when ``text`` names no build."""
    match = _VERSION.search(text)
    return f"b{match.group(1)} ({match.group(2)})" if match else ""


# --- the binaries -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class BenchBinary:
    """A llama.cpp benchmark executable. ``tool``: one of ``TOOLS``; ``version``: "b5163
    (8cf427ff)", "" until known; ``help``: its ``--help`` text, "" when it gave none (then every
    flag is taken to exist)."""

    path: str
    tool: str
    version: str = ""
    help: str = ""

    def __post_init__(self) -> None:
        if self.tool not in TOOLS:
            raise SpecError(f"binary.tool must be one of {', '.join(TOOLS)}, got {self.tool!r}")

    def supports(self, flag: str) -> bool:
        """Whether its --help lists ``flag`` (True when the help is unknown)."""
        return not self.help or flag in set(_FLAG.findall(self.help))


def find_binary(tool: str = "llama-bench", path: str | os.PathLike[str] | None = None) -> Path:
    """The executable of ``tool``: ``path`` when given (the file, or a folder holding it such as
    llama.cpp's build/bin), else the one on PATH. MeasurementError when absent or not executable."""
    if tool not in TOOLS:
        raise SpecError(f"tool must be one of {', '.join(TOOLS)}, got {tool!r}")
    if path is None or not os.fspath(path):
        found = shutil.which(tool)
        if found is None:
            raise MeasurementError(f"{tool} is not on PATH: build llama.cpp and give the path of its {tool}")
        return Path(found)
    candidate = Path(path).expanduser()
    if candidate.is_dir():
        inside = shutil.which(tool, path=str(candidate))
        if inside is None:
            raise MeasurementError(f"{candidate}: this folder holds no executable {tool}")
        candidate = Path(inside)
    if not candidate.exists():
        raise MeasurementError(f"{candidate}: no such file (expected llama.cpp's {tool})")
    if not candidate.is_file() or not os.access(candidate, os.X_OK):
        raise MeasurementError(f"{candidate}: not an executable file (expected llama.cpp's {tool})")
    return candidate


def probe_binary(path: str | os.PathLike[str], tool: str | None = None, cancel: CancelFlag = None,
                 timeout: float = 30.0) -> BenchBinary:
    """Ask the executable for its ``--help`` (the flags it knows) and, for llama-batched-bench,
    its ``--version`` (llama-bench has none: its rows carry build_number and build_commit)."""
    tool = tool or ("llama-batched-bench" if "batched" in Path(path).name.lower() else "llama-bench")
    help_text, code = _capture([os.fspath(path), "--help"], timeout, cancel)
    version = ""
    if tool == "llama-batched-bench":
        version = version_in(_capture([os.fspath(path), "--version"], timeout, cancel)[0])
    return BenchBinary(path=os.fspath(path), tool=tool, version=version, help=help_text if code == 0 else "")


def _capture(argv: list[str], timeout: float, cancel: CancelFlag) -> tuple[str, int | None]:
    """Both streams of a short command (at most 4000 lines) and its status; None on timeout."""
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    with ChildProcess(argv) as child:
        for line in child.lines(cancel, deadline):
            if len(lines) < 4000:
                lines.append(line.text)
        left = max(0.0, deadline - time.monotonic())
        code = None if child.timed_out else child.finish(timeout=left, cancel=cancel)
    return "\n".join(lines), code


# --- plans --------------------------------------------------------------------------------------

def _whole(name: str, value: Any, low: int, high: int = 10_000_000) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise SpecError(f"{name} must be a whole number in [{low}, {high}], got {value!r}")


def _sweep(owner: object, name: str, low: int, *, empty_ok: bool = False) -> None:
    try:
        values = tuple(getattr(owner, name))
    except TypeError:
        raise SpecError(f"plan.{name} must be a sequence of whole numbers, got {getattr(owner, name)!r}") from None
    object.__setattr__(owner, name, values)     # a list becomes a tuple: the plan stays a value
    if not values and not empty_ok:
        raise SpecError(f"plan.{name} must not be empty")
    if len(values) > 64:
        raise SpecError(f"plan.{name} has {len(values)} values; at most 64")
    for value in values:
        _whole(f"plan.{name} values", value, low)


def tools_flash_attention(flash: bool | None, kv_type: str) -> bool:
    """``-fa`` for llama.cpp's tools, which take 1 or 0: ``flash`` as asked, and for "auto"
    (None) on where llama.cpp needs it (a quantized V cache, ``needs_flash_attention``), as its
    own auto turns it on where the device has the kernel (read as off, a q8_0 cache was refused)."""
    return needs_flash_attention(kv_type) if flash is None else flash


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineOptions:
    """How llama.cpp runs the model; None leaves a setting at the build's default.

    ``threads``: ``-t``; ``gpu_layers``: ``-ngl`` (999: every layer); ``cpu_moe``: ``-ncmoe``,
    layers whose experts stay on the CPU; ``flash_attention``: ``-fa``; ``cache_type_k`` /
    ``cache_type_v``: ``-ctk`` / ``-ctv``; ``batch_size`` / ``ubatch_size``: ``-b`` / ``-ub``,
    the logical and physical batch in tokens."""

    threads: int | None = None
    gpu_layers: int | None = None
    cpu_moe: int = 0
    flash_attention: bool = False
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    batch_size: int | None = None
    ubatch_size: int | None = None

    def __post_init__(self) -> None:
        for name, low in (("threads", 1), ("gpu_layers", 0), ("batch_size", 1), ("ubatch_size", 1)):
            if getattr(self, name) is not None:
                _whole(f"options.{name}", getattr(self, name), low)
        _whole("options.cpu_moe", self.cpu_moe, 0)
        for name in ("cache_type_k", "cache_type_v"):
            if getattr(self, name) not in BATCHED_KV:
                raise SpecError(f"options.{name} must be one of {', '.join(BATCHED_KV)}, got {getattr(self, name)!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class LlamaBenchPlan:
    """A llama-bench sweep. ``model``: the GGUF file; ``prompts``: ``-p``, prompt lengths in
    tokens (one prefill point each, per depth); ``gen``: ``-n``, tokens generated (one decode
    point per depth; 0 for none); ``depths``: ``-d``, tokens already cached before each test;
    ``repetitions``: ``-r``."""

    model: str
    prompts: tuple[int, ...] = (512,)
    gen: int = 128
    depths: tuple[int, ...] = (0,)
    repetitions: int = 5
    options: EngineOptions = field(default_factory=EngineOptions)

    def __post_init__(self) -> None:
        if not str(self.model):
            raise SpecError("plan.model must name a GGUF file")
        _sweep(self, "prompts", 1, empty_ok=True)
        _sweep(self, "depths", 0)
        _whole("plan.gen", self.gen, 0)
        _whole("plan.repetitions", self.repetitions, 1, 1000)
        if not self.prompts and not self.gen:
            raise SpecError("plan needs prompts or gen: nothing to measure")
        for name in ("cache_type_k", "cache_type_v"):
            if getattr(self.options, name) not in LLAMA_BENCH_KV:
                raise SpecError(f"options.{name}: llama-bench takes {', '.join(LLAMA_BENCH_KV)}")

    @property
    def expected_rows(self) -> int:
        return (len(self.prompts) + (1 if self.gen else 0)) * len(self.depths)


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchedBenchPlan:
    """A llama-batched-bench sweep: every combination of ``prompts`` (``-npp``, tokens each
    sequence holds before decoding), ``gen`` (``-ntg``, steps timed together) and ``batches``
    (``-npl``, sequences decoding together). ``shared_prompt``: ``-pps``, one prompt copied to
    all sequences; ``context``: ``-c``, the cache size in tokens (None: what the sweep needs;
    the tool silently skips a combination that does not fit)."""

    model: str
    prompts: tuple[int, ...] = (512,)
    gen: tuple[int, ...] = (32,)
    batches: tuple[int, ...] = (1, 2, 4, 8)
    shared_prompt: bool = False
    context: int | None = None
    options: EngineOptions = field(default_factory=EngineOptions)

    def __post_init__(self) -> None:
        if not str(self.model):
            raise SpecError("plan.model must name a GGUF file")
        for name in ("prompts", "gen", "batches"):
            _sweep(self, name, 1)
        if self.context is not None:
            _whole("plan.context", self.context, 1)
            if self.context < self.needed_context:
                raise SpecError(f"plan.context {self.context} is below the {self.needed_context} tokens "
                                "the sweep needs (llama-batched-bench would skip those points silently)")

    @property
    def needed_context(self) -> int:
        """Cache tokens of the largest combination: pp + b*tg shared, b*(pp + tg) otherwise."""
        return max((pp + b * tg) if self.shared_prompt else b * (pp + tg)
                   for pp in self.prompts for tg in self.gen for b in self.batches)

    @property
    def expected_rows(self) -> int:
        return len(self.prompts) * len(self.gen) * len(self.batches)


# --- argv ---------------------------------------------------------------------------------------

def _require(binary: BenchBinary, flag: str, what: str) -> None:
    if not binary.supports(flag):
        build = binary.version or "this build"
        raise MeasurementError(f"{binary.path}: {binary.tool} {build} has no {flag} ({what}); "
                               "update llama.cpp to use it")


def _csv(values: Iterable[int]) -> str:
    return ",".join(str(v) for v in values)


def _option_args(binary: BenchBinary, options: EngineOptions, flash: list[str]) -> list[str]:
    args: list[str] = []
    for flag, value in (("-t", options.threads), ("-ngl", options.gpu_layers)):
        if value is not None:
            args += [flag, str(value)]
    if options.cpu_moe:
        _require(binary, "--n-cpu-moe", "experts kept on the CPU")
        args += ["-ncmoe", str(options.cpu_moe)]
    args += flash + ["-ctk", options.cache_type_k, "-ctv", options.cache_type_v]
    for flag, value in (("-b", options.batch_size), ("-ub", options.ubatch_size)):
        if value is not None:
            args += [flag, str(value)]
    return args


def llama_bench_argv(binary: BenchBinary, plan: LlamaBenchPlan) -> list[str]:
    """The command line that runs ``plan`` with ``binary`` (a llama-bench)."""
    if binary.help and "jsonl" not in binary.help:
        _require(binary, "jsonl", "JSONL output, -o jsonl")
    argv = [binary.path, "-m", plan.model, "-p", _csv(plan.prompts) or "0", "-n", str(plan.gen)]
    if plan.depths != (0,):
        _require(binary, "--n-depth", "a depth sweep, -d")
        argv += ["-d", _csv(plan.depths)]
    # "1"/"0": the old <0|1> and the newer on|off|auto parser both take them
    argv += _option_args(binary, plan.options, ["-fa", "1" if plan.options.flash_attention else "0"])
    return argv + ["-r", str(plan.repetitions), "-o", "jsonl"]


def _flash_takes_value(binary: BenchBinary) -> bool:
    """Whether this llama-batched-bench wants ``-fa on|off`` (Aug 2025 on) or a bare ``-fa``."""
    lines = [line for line in binary.help.splitlines() if "--flash-attn" in line]
    return not lines or any("auto" in line or "on|off" in line for line in lines)


def batched_bench_argv(binary: BenchBinary, plan: BatchedBenchPlan) -> list[str]:
    """The command line that runs ``plan`` with ``binary`` (a llama-batched-bench)."""
    _require(binary, "--output-format", "JSONL output")
    on = plan.options.flash_attention
    flash = (["-fa", "on" if on else "off"] if _flash_takes_value(binary) else (["-fa"] if on else []))
    argv = [binary.path, "-m", plan.model, "-c", str(plan.context or plan.needed_context),
            "-npp", _csv(plan.prompts), "-ntg", _csv(plan.gen), "-npl", _csv(plan.batches)]
    argv += ["-pps"] if plan.shared_prompt else []
    return argv + _option_args(binary, plan.options, flash) + ["--output-format", "jsonl"]


# --- one mapping from a sweep to the two tools' plans, for the window and the command line ------

#: Tokens llama-bench generates at each depth (-n) when the sweep does not say.
DEFAULT_GEN = 32


def sweep_plans(*, model: str, experiments: Sequence[str], prompts: Sequence[int] = (512,),
                depths: Sequence[int] = (0,), gen: int = DEFAULT_GEN, contexts: Sequence[int] = (512,),
                batches: Sequence[int] = (1, 2, 4, 8), repetitions: int = 5,
                options: EngineOptions | None = None) -> tuple[LlamaBenchPlan | None, BatchedBenchPlan | None]:
    """(llama-bench plan, llama-batched-bench plan) for a sweep: prompts for "prefill" (-p),
    ``gen`` tokens at each depth for "decode" (-n, -d), and ``batches`` sequences at each of
    ``contexts`` for "batch" (-npp, -npl). None where the sweep asks nothing of a tool."""
    options = options or EngineOptions()
    bench = None
    if "prefill" in experiments or "decode" in experiments:
        bench = LlamaBenchPlan(model=model, prompts=tuple(prompts) if "prefill" in experiments else (),
                               gen=gen if "decode" in experiments else 0, depths=tuple(depths),
                               repetitions=repetitions, options=options)
    batched = None
    if "batch" in experiments:
        batched = BatchedBenchPlan(model=model, prompts=tuple(contexts), batches=tuple(batches), options=options)
    return bench, batched


def find_tools(path: str | os.PathLike[str] | None = None, *, batched: bool = True) -> tuple[Path, Path | None, str]:
    """(llama-bench, llama-batched-bench beside it or None, a warning): MeasurementError when
    there is no llama-bench (``path``: the binary, its folder, or None for PATH); without a
    llama-batched-bench the batched sweep is left out, and the warning says so."""
    binary = find_binary("llama-bench", path)
    if not batched:
        return binary, None, ""
    try:
        return binary, find_binary("llama-batched-bench", binary.parent), ""
    except MeasurementError as exc:
        return binary, None, f"batched decode not measured: {exc}"
