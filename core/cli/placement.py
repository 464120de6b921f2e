"""``rooflab predict``'s placement: the llama.cpp-style flags (--gpu-layers, --cpu-moe,
--no-kv-offload) and the devices (--devices, --parallel, --interconnect), the stable JSON it
adds (``placement``, ``fits``, ``communication_seconds_per_step``/``_per_token``) and the
lines it adds to the text. Without placement flags rooflab chooses (auto-fit) and says so."""

from __future__ import annotations

import argparse
import math
from typing import Any

from rooflab.core.app.figures import Figures
from rooflab.core.cli.args import int_in
from rooflab.core.predict.autofit import largest_batch
from rooflab.core.predict.footprint import MemoryUse
from rooflab.core.predict.layer_split import device_parts
from rooflab.core.predict.parallel import (
    MODES,
    Parallel,
    ParallelEstimate,
    Scaling,
    parallel_largest_batch,
)
from rooflab.core.predict.placed import PlacedSummary
from rooflab.core.predict.placement import MAX_DEVICES, MAX_LAYERS, experts_kept_on_host, input_on_host
from rooflab.core.predict.step_parts import StepParts
from rooflab.core.report.text import capacity_text
from rooflab.core.values.machine import BANDWIDTH_RANGE, MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import MAX_BATCH, Workload

GB = 1e9


def gb_per_s(text: str) -> float:
    """--interconnect: GB/s in the machine profile's range."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of GB/s, got {text!r}") from None
    if not BANDWIDTH_RANGE[0] / GB <= value <= BANDWIDTH_RANGE[1] / GB:
        raise argparse.ArgumentTypeError(f"must be between {BANDWIDTH_RANGE[0] / GB:g} and "
                                         f"{BANDWIDTH_RANGE[1] / GB:g} GB/s, got {text!r}")
    return value


def add_placement_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("placement (llama.cpp's terms; rooflab chooses what is not given)")
    g.add_argument("--gpu-layers", type=int_in(0, MAX_LAYERS), metavar="N",
                   help="layers on the GPU, llama.cpp's -ngl (layers + 1 puts the output layer there too); "
                        "given, the placement is by hand and is not fitted; without it rooflab fits -ngl "
                        "around the other flags")
    g.add_argument("--cpu-moe", type=int_in(0, MAX_LAYERS), metavar="N",
                   help="keep the routed experts of the first N layers in host memory (--n-cpu-moe); "
                        "exactly N: auto-fit then moves no more experts, only fewer GPU layers")
    g.add_argument("--no-kv-offload", action="store_true",
                   help="keep the KV cache in host memory (-nkvo); auto-fit places the rest around it")
    g.add_argument("--devices", type=int_in(1, MAX_DEVICES), default=1, metavar="N",
                   help="identical devices sharing the model (default 1)")
    g.add_argument("--parallel", choices=MODES, default="layer",
                   help="how they share it: layer split (llama.cpp's default) or tensor parallel (vLLM)")
    g.add_argument("--interconnect", type=gb_per_s, metavar="GB/s",
                   help="link bandwidth per direction between devices (default: the preset's)")


def _use(use: MemoryUse) -> dict[str, Any]:
    return {"name": use.name, "bytes_placed": use.weights, "kv_bytes": use.kv,
            "compute_buffer_bytes": use.compute_buffer, "reserve_bytes": use.reserve, "used_bytes": use.used,
            "capacity_bytes": use.capacity, "fits": use.fits}


def placement_dict(figures: Figures) -> dict[str, Any]:
    """The JSON keys the placement adds: ``placement`` (per device and host: bytes placed, GPU
    layers, experts on the CPU, KV location, compute buffer, reserve; the largest batch and the
    crossovers as placed, from the summary), ``fits`` and, with more than one device,
    ``communication_seconds_per_step`` / ``_per_token``."""
    sc, summary = figures.scenario, figures.summary
    spec, machine, placed = sc.model, sc.machine, figures.placed
    fit, p = placed.fit, placed.placement
    s = fit.memory.split
    device = {**_use(fit.memory.device), "count": 1, "gpu_layers": p.gpu_layers,
              "layers_computed": s.device.layers, "output_layer": s.device.output,
              "experts_on_cpu_layers": experts_kept_on_host(spec, p)}
    out: dict[str, Any] = {"placement": {
        "chosen_by": placed.how, "description": fit.describe(spec, machine), "flags": p.flags(),
        "gpu_layers": p.gpu_layers, "cpu_moe": p.cpu_moe, "partial": p.partial or None,
        "kv_on_device": p.kv_on_device,
        "kv_location": fit.memory.kv_location, "layers_total": spec.layers + 1,
        "devices": [device], "host": {**_use(fit.memory.host), "layers_computed": s.host.layers,
                                      "expert_layers_computed": s.host.expert_layers},
        "suggestions": list(placed.suggestions), "max_batch_that_fits": summary.placed_max_batch,
        # JSON has no infinity or NaN (print_json writes null): a crossover never reached, and
        # both where the headline runs nowhere (a placement that does not fit)
        "prefill_crossover_tokens": summary.placed_prefill_crossover,
        "batch_crossover": summary.placed_batch_crossover},
        "fits": placed.fits, "time_parts": time_parts_dict(figures)}
    if p.devices > 1:          # a layer split with host memory: each device's bill and layers
        parts = device_parts(spec, p, embedding_on_host=input_on_host(machine))
        out["placement"]["devices"] = [
            {**_use(use), "count": 1, "gpu_layers": p.gpu_layers, "layers_computed": part.layers,
             "output_layer": part.output, "experts_on_cpu_layers": part.layers - part.expert_layers if spec.is_moe
             else 0} for use, part in zip(fit.memory.device_bills, parts, strict=True)]
    if placed.parallel is not None:
        par = placed.parallel
        if p.devices == 1:
            out["placement"]["devices"] = [{**_use(par.memory), "count": par.devices,
                                            "gpu_layers": p.gpu_layers, "layers_computed": spec.layers,
                                            "output_layer": True, "experts_on_cpu_layers": 0}]
        out["placement"]["description"] = placed.headline(spec, machine)
        out["communication_seconds_per_step"] = par.communication_seconds_per_step
        out["communication_seconds_per_token"] = par.communication_seconds_per_token
        if placed.scaling is not None:
            out["parallel"] = _parallel_dict(par, placed.scaling)
    return out


def time_parts_dict(figures: Figures) -> dict[str, Any] | None:
    """``time_parts``: where the prompt's and the first answer token's time go off one device
    (``Figures.parts``: each part's key, label, seconds and share, the crossings per graph
    pass and the graph passes the round trips pay), whose figures they split; None when the
    model runs wholly on one device or does not run."""
    found = figures.parts
    if found is None:
        return None
    prefill, decode, origin = found

    def one(parts: StepParts) -> dict[str, Any]:
        return {"seconds": parts.seconds, "crossings": parts.crossings, "graph_passes": parts.passes,
                "parts": [{"key": x.key, "label": x.label, "seconds": x.seconds, "share": parts.share(x)}
                          for x in parts.parts]}

    w = figures.scenario.workload
    return {"figures": origin, "decode_context": w.context + w.prompt, "prefill": one(prefill), "decode": one(decode)}


def _parallel_dict(par: ParallelEstimate, grow: Scaling) -> dict[str, Any]:
    link = par.parallel
    return {"devices": par.devices, "mode": link.mode, "interconnect": link.link_name,
            "interconnect_bytes_per_second": link.link_bandwidth, "link_kind": link.link.kind,
            "link_latency_seconds": link.link_latency,
            "allreduce_latency_seconds": link.link.allreduce_latency(link.devices) if link.mode == "tensor" else 0.0,
            "prefill_communication_seconds": par.prefill_communication_seconds,
            "best_devices": grow.best_devices, "crossover_devices": grow.crossover_devices,
            "scaling": [{"devices": e.devices, "ttft_seconds": e.ttft, "tpot_seconds": e.tpot,
                         "tokens_per_second_total": e.total_rate,
                         "communication_seconds_per_step": e.communication_seconds_per_step,
                         "communication_seconds_per_token": e.communication_seconds_per_token,
                         "memory_bytes_per_device": e.memory.used, "fits": e.fits} for e in grow.estimates]}


def _over(use: MemoryUse) -> str:
    """"  OVERFLOWS" past what the memory holds; "  TIGHT: ..." where the bill is over it but a
    lighter back-end context than the one billed leaves room (``MemoryUse.slack``)."""
    if not use.fits:
        return "  OVERFLOWS"
    if use.short > 0:
        return (f"  TIGHT: runs if its back end's context takes {use.short / GB:.2f} GB less than the "
                f"{use.reserve / GB:.2f} billed")
    return ""


def placement_lines(figures: Figures) -> list[str]:
    """The text headline's placement: how the model sits, each memory's bill, the largest batch
    and the crossovers as placed (the summary's), and what to change."""
    sc, s = figures.scenario, figures.summary
    spec, machine, workload, placed = sc.model, sc.machine, sc.workload, figures.placed
    lines = [f"placement: {placed.headline(spec, machine)}"]
    largest = s.placed_max_batch
    length = workload.context + workload.prompt + workload.answer
    if placed.parallel is None:
        words = ("GPU", "host") if machine.kind == "gpu" else ("memory", "2nd tier")
        for word, use in zip(words, (placed.fit.memory.device, placed.fit.memory.host), strict=True):
            if use.used > 0:
                lines.append(f"  {word:<8} {use.used / GB:8.2f} GB of {capacity_text(use.capacity)}: weights "
                             f"{use.weights / GB:.2f}, KV {use.kv / GB:.2f}, compute buffer "
                             f"{use.compute_buffer / GB:.2f}, reserve {use.reserve / GB:.2f}"
                             + _over(use))
    else:
        par = placed.parallel
        lines.append(f"  communication {par.communication_seconds_per_step * 1e3:.3f} ms per decode step "
                     f"({par.communication_seconds_per_token * 1e3:.3f} ms per token), "
                     f"{par.prefill_communication_seconds * 1e3:.1f} ms of the prefill")
        if placed.scaling is not None:
            grow = placed.scaling
            lines.append("  devices " + ", ".join(
                f"{e.devices}: TPOT {e.tpot * 1e3:.2f} ms (link {e.communication_seconds_per_step * 1e3:.2f})"
                + ("" if e.fits else " does not fit") for e in grow.estimates))
            cross = (f"communication reaches the compute time at {grow.crossover_devices} devices"
                     if grow.crossover_devices else "communication stays below the compute time up to 64 devices")
            lines.append(f"  lowest TPOT at {grow.best_devices} devices; {cross}")
    lines.append(f"  as placed, {largest:,} sequence{'s' if largest != 1 else ''} of {length:,} tokens fit")
    if placed.runs_on is not None:       # the crossovers of a placement that runs (``placed_crossovers``)
        n_star, b_star = s.placed_prefill_crossover, s.placed_batch_crossover
        lines.append("  as placed, prefill turns compute-bound at " + (
            f"n* = {n_star:,.1f} tokens" if math.isfinite(n_star) else "no prompt length") + ", decode " + (
            f"at batch {b_star:,.1f}" if math.isfinite(b_star) else "at no batch") + f" (below {MAX_BATCH:,})")
    for advice in placed.suggestions:
        lines.append(f"  to fit: {advice}")
    return lines


def placed_largest_batch(spec: ModelSpec, machine: MachineProfile, workload: Workload,
                         placed: PlacedSummary) -> int:
    """Most sequences of the workload's length the placement (or each of the devices) holds."""
    on = placed.priced_on
    if isinstance(on, Parallel):
        return parallel_largest_batch(spec, machine, workload, on)
    return largest_batch(spec, machine, workload, on)
