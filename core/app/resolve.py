"""From what the user named to value objects: the machine (a preset, its overrides and, when
asked, the model's own calibration), the workload, the placement choice (llama.cpp's flags and
the devices) and the engine whose calibration prices it. The command line's flags and the
window's report command (``rooflab report``) both come through here."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any

from rooflab.core.calibration.expectations import Missing, expected_on, missing_expected
from rooflab.core.errors import SpecError
from rooflab.core.predict.choice import AUTO, PlacementChoice
from rooflab.core.predict.expected import Expected
from rooflab.core.predict.parallel import engine_of
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload, runnable

GB = 1e9
SMALLER_WEIGHTS: tuple[str, ...] = ("q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0")
_ALTERNATIVES: dict[tuple[str, str, int], dict[str, ModelSpec]] = {}      # a window's edits ask again and again


def resolve_machine(args: argparse.Namespace, spec: ModelSpec | None = None) -> MachineProfile:
    """The machine named by --machine, with --bandwidth/--peak-tflops/--memory-gb applied and,
    with --calibrated, the efficiency fitted from ``spec``'s measurements on that machine."""
    from rooflab.core.io.presets import load_machine

    machine = load_machine(args.machine)
    dtype = getattr(args, "compute_dtype", None)
    if dtype and dtype not in machine.peak_flops and not getattr(args, "peak_tflops", None):
        # the machine's default peak would apply silently: FP32 asked, fp16 computed
        raise SpecError(f"{machine.name} lists no {dtype} peak (it has {', '.join(machine.peak_flops)}); "
                        f"give one with --peak-tflops")
    changes: dict[str, Any] = {}
    if getattr(args, "bandwidth", None):
        changes["bandwidth"] = args.bandwidth * GB
    if getattr(args, "peak_tflops", None):
        dtype = getattr(args, "compute_dtype", None) or machine.default_dtype
        changes["peak_flops"] = machine.peaks_with(dtype, args.peak_tflops * 1e12)
        if dtype not in machine.peak_flops:
            changes["default_dtype"] = dtype
    if getattr(args, "memory_gb", None):
        changes["memory"] = args.memory_gb * GB
    changes.update(host_changes(args, machine))
    eff = {name: value for name, value in (
        ("bandwidth", getattr(args, "bandwidth_efficiency", None)),
        ("compute", getattr(args, "compute_efficiency", None)),
        ("step_overhead", None if getattr(args, "step_overhead_ms", None) is None else args.step_overhead_ms / 1e3),
    ) if value is not None}
    if eff:
        changes["efficiency"] = dataclasses.replace(machine.efficiency, **eff)
    if getattr(args, "calibrated", False):
        from rooflab.core.calibration import store

        mkey = store.machine_key(machine)
        peak = machine.flops(getattr(args, "compute_dtype", None))
        fitted = None if spec is None else (store.load_calibration(store.model_key(spec), mkey, peak)
                                            or store.load_calibration(spec.source, mkey, peak))
        if fitted is None:
            raise SpecError(f"no calibration for this model on {machine.name}: run 'rooflab measure model' first")
        changes["efficiency"] = fitted
    return dataclasses.replace(machine, **changes) if changes else machine


def host_changes(args: argparse.Namespace, machine: MachineProfile) -> dict[str, Any]:
    """--host-tflops and --host-bandwidth as changes to ``machine``'s second tier (the CPU and
    memory behind a GPU); SpecError where the machine has none."""
    changes = {field: value for field, value in (
        ("offload_flops", None if getattr(args, "host_tflops", None) is None else args.host_tflops * 1e12),
        ("offload_bandwidth", None if getattr(args, "host_bandwidth", None) is None else args.host_bandwidth * GB),
    ) if value is not None}
    if changes and (machine.kind != "gpu" or not machine.has_offload):
        given = "--host-tflops" if "offload_flops" in changes else "--host-bandwidth"
        raise SpecError(f"{given}: {machine.name} is not a GPU with a host behind it (its own processor and "
                        f"memory are set with --peak-tflops and --bandwidth)")
    return changes


def with_host(args: argparse.Namespace, machine: MachineProfile) -> MachineProfile:
    """``machine`` with the host options applied (``rooflab fit``, which takes no other override)."""
    changes = host_changes(args, machine)
    return dataclasses.replace(machine, **changes) if changes else machine


def with_engine_options(args: argparse.Namespace, workload: Workload) -> Workload:
    """``workload`` with llama.cpp's run settings given (-ub, -fa, -t; its own values where not
    given)."""
    flash = getattr(args, "flash_attention", None)
    ubatch, threads = getattr(args, "ubatch", None), getattr(args, "threads", None)
    return runnable(dataclasses.replace(workload, ubatch=workload.ubatch if ubatch is None else ubatch,
                                        flash_attention=workload.flash_attention if flash is None else flash == "on",
                                        threads=workload.threads if threads is None else threads))


#: the option that sets each workload field: a flag's range error names what the user typed
OPTION_NAMES = {"prompt": "--prompt", "answer": "--answer", "context": "--context", "batch": "--batch",
                "kv_type": "--kv-type", "compute_dtype": "--dtype", "draft_tokens": "--draft-tokens",
                "acceptance": "--acceptance", "offload_fraction": "--offload", "ubatch": "--ubatch",
                "flash_attention": "--flash-attention", "threads": "--threads"}


def as_typed(exc: SpecError) -> SpecError:
    """``exc`` (a ``Workload`` field's range error, "workload.ubatch must be ...") naming the
    option instead ("--ubatch must be ..."); any other error as it is."""
    text = str(exc)
    for name, option in OPTION_NAMES.items():
        if text.startswith(f"workload.{name} "):
            return SpecError(option + text[len("workload.") + len(name):])
    return exc


def resolve_workload(args: argparse.Namespace) -> Workload:
    """The workload the flags give (``DEFAULT_WORKLOAD``'s values where not given); a value out
    of range is a SpecError naming its option (``as_typed``)."""
    from rooflab.core.values.defaults import DEFAULT_WORKLOAD as d

    try:
        return with_engine_options(args, Workload(
            prompt=args.prompt if args.prompt is not None else d.prompt,
            answer=args.answer if args.answer is not None else d.answer,
            context=args.context if args.context is not None else d.context,
            batch=args.batch if args.batch is not None else d.batch,
            kv_type=args.kv_type.lower(), compute_dtype=getattr(args, "compute_dtype", None),
            draft_tokens=args.draft_tokens, acceptance=args.acceptance, offload_fraction=args.offload,
        ))
    except SpecError as exc:
        raise as_typed(exc) from None


def choice_from(args: argparse.Namespace) -> PlacementChoice:
    """The placement the flags ask for (SpecError for llama.cpp's placement flags with
    --devices in tensor parallel, where every layer is on the devices)."""
    if args.devices > 1 and args.parallel == "tensor" and (
            args.gpu_layers is not None or args.cpu_moe is not None or args.no_kv_offload):
        raise SpecError("--gpu-layers, --cpu-moe and --no-kv-offload are llama.cpp's; with --parallel tensor "
                        "every layer is on the devices (a layer split, --parallel layer, takes them)")
    link = None if args.interconnect is None else args.interconnect * GB
    return PlacementChoice(gpu_layers=args.gpu_layers, cpu_moe=args.cpu_moe,
                           kv_on_device=not args.no_kv_offload, devices=args.devices, parallel=args.parallel,
                           link_bandwidth=link)


def engine_for(choice: PlacementChoice) -> str | None:
    """The engine whose calibration prices ``choice``: "vllm" for tensor parallel over several
    devices (``parallel.engine_of``), else None (whatever applies to the machine: llama.cpp's).
    The one home of this rule: ``rooflab predict``, the window and reports all ask here."""
    engine = engine_of(choice.parallel) if choice.devices > 1 else None
    return engine if engine != "llama.cpp" else None


def expected_for_choice(spec: ModelSpec, machine: MachineProfile, choice: PlacementChoice,
                 dtype: str | None = None) -> Expected | None:
    """What the calibration that applies to ``machine`` (timed here, or published for its back
    end) expects of ``spec`` run as ``choice`` asks (its engine: ``engine_for``); None without
    one."""
    return expected_on(spec, machine, dtype=dtype, engine=engine_for(choice), devices=choice.devices)


def missing_for_choice(spec: ModelSpec, machine: MachineProfile, choice: PlacementChoice,
                       dtype: str | None = None) -> Missing | None:
    """Why ``expected_for_choice`` finds nothing for ``spec`` on ``machine`` run as ``choice``
    asks at ``dtype`` (None where it finds a figure, or where nothing calibrates the machine)."""
    return missing_expected(spec, machine, engine_for(choice), devices=choice.devices, dtype=dtype)


def expected_machine(spec: ModelSpec, machine: MachineProfile, choice: PlacementChoice = AUTO) -> MachineProfile | None:
    """The hook ``report.compare`` asks for expected figures: ``machine`` as the calibration that
    applies to it (timed here, or published for its back end) expects it to run ``spec`` placed
    as ``choice`` asks (its engine: ``engine_for``; a pinned row in tensor parallel is vLLM's)."""
    found = expected_for_choice(spec, machine, choice)
    return None if found is None else found.machine


def alternatives(spec: ModelSpec, weights: Sequence[str] = SMALLER_WEIGHTS) -> dict[str, ModelSpec]:
    """The same catalogue model at each of ``weights`` that is smaller than ``spec`` (none for a
    model file, whose weights are what they are): what the suggestions to fit offer."""
    if not spec.source.startswith("catalogue:"):
        return {}
    key = (spec.source, spec.weights_format, spec.weight_bytes)
    if weights == SMALLER_WEIGHTS and key in _ALTERNATIVES:
        return dict(_ALTERNATIVES[key])
    from rooflab.core.io import load_model

    name = spec.source.split(":", 1)[1]
    out = {}
    for fmt in weights:
        other = load_model(name, weights=fmt)
        if other.weight_bytes < spec.weight_bytes:
            out[fmt] = other
    if weights == SMALLER_WEIGHTS:
        if len(_ALTERNATIVES) > 64:
            _ALTERNATIVES.clear()
        _ALTERNATIVES[key] = dict(out)
    return out
