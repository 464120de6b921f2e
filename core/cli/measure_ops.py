"""``rooflab measure model MODEL --engine torch|llamacpp --ops``: the engine's passes timed
operation by operation (torch's profiler, ``measure.engines.torch.ops``; llama.cpp's graph
node by node, ``measure.engines.llamacpp.ops``), each beside its prediction
(``predict.ops_clocks``): text, or JSON with an ``ops`` list whose rows carry
``seconds_measured`` beside the predicted keys."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rooflab.core.errors import MeasurementError
from rooflab.core.files.safe_json import dumps_json
from rooflab.core.jobs import CancelToken, run_job
from rooflab.core.measure.engines.op_times import OpsMeasurement, beaten_ceiling, compared_rows
from rooflab.core.measure.engines.torch.ops import OpsPlan
from rooflab.core.measure.engines.torch.ops_in_child import measure_ops_in_child
from rooflab.core.report.text import count
from rooflab.core.report.units import fmt
from rooflab.core.values.machine import MachineProfile

DEFAULT_PROMPT = 256
#: what timing by operation costs, by engine (the difference between a pass's sum and its plain time)
COSTS = {"torch": "the profiler's ranges", "llama.cpp": "the callbacks between nodes"}


def _passes(m: OpsMeasurement) -> list[dict[str, Any]]:
    return [{"phase": p.phase, "prompt": p.prompt, "seconds": p.seconds, "seconds_ops": p.seconds_ops,
             "overhead": p.overhead} for p in m.passes]


def _text(m: OpsMeasurement, machine: MachineProfile, rows: list[dict[str, Any]]) -> str:
    lines = [f"{m.label}: {m.engine} {m.device} {m.dtype}, {count(m.threads, 'thread')}, "
             f"{m.attention or 'default'} attention; predicted on {machine.name}"]
    cost = COSTS.get(m.engine, "the timing's own cost")
    for p in m.passes:
        lines.append(f"  {p.phase} of prompt {p.prompt:,}: {fmt(p.seconds, 's')} timed plainly, "
                     f"{fmt(p.seconds_ops, 's')} summed by operation ({p.overhead:+.1%}: {cost} "
                     f"and the run-to-run spread)")
    lines.append(f"  {'phase':<8} {'layer kind':<13} {'operation':<18} {'FLOP/byte':>9} {'bound':<7} "
                 f"{'ceiling':>10} {'measured':>10} {'of bound':>8}")
    for r in rows:
        intensity = "-" if r["intensity"] is None else f"{r['intensity']:,.2f}"
        ceiling = "-" if r["seconds_ceiling"] is None else fmt(r["seconds_ceiling"], "s")
        measured = "-" if r["seconds_measured"] is None else fmt(r["seconds_measured"], "s")
        share = "-" if r["share_of_bound"] is None else f"{r['share_of_bound']:.0%}"
        lines.append(f"  {r['phase']:<8} {r['layer_kind']:<13} {r['name']:<18} {intensity:>9} {r['bound'] or '-':<7} "
                     f"{ceiling:>10} {measured:>10} {share:>8}")
    beaten = beaten_ceiling(rows, machine)
    lines += [f"  note: {note}" for note in m.notes] + ([f"  warning: {beaten}"] if beaten else [])
    return "\n".join(lines)


def run_measure_ops(args: argparse.Namespace, engine: str, source: Any, machine: MachineProfile,
                    cancel: CancelToken, on_progress: Any = None) -> int:
    """Time ``source`` by operation and print it beside the prediction; returns the exit status."""
    prompts = tuple(args.prompts or (DEFAULT_PROMPT,))
    if engine == "torch":
        plan = OpsPlan(prompts=prompts, repeats=args.repeats, dtype=args.dtype, device=args.device,
                       threads=args.threads, random_weights=args.random_weights)
        m = run_job(measure_ops_in_child(source, plan, cancel), on_progress)
    elif engine == "llamacpp":
        from rooflab.core.measure.engines.llamacpp.ops import NodePlan, measure_nodes_of

        if args.gpu_layers:
            raise MeasurementError("--ops times llama.cpp's graph node by node on the CPU back end: "
                                   "leave out --gpu-layers")
        nodes = NodePlan(prompts=prompts, repeats=args.repeats, threads=args.threads,
                         flash_attention=args.flash_attention == "on", kv_type=args.kv_type)
        m = run_job(measure_nodes_of(source, args.model, nodes, cancel), on_progress)
    else:
        raise MeasurementError(f"--ops times operations with the torch or llamacpp engine (asked: {engine}); "
                               "add --engine torch or --engine llamacpp")
    rows = compared_rows(m, machine)
    if args.json:
        sys.stdout.write(dumps_json({"model": m.label, "engine": m.engine, "device": m.device, "dtype": m.dtype,
                                     "threads": m.threads, "attention": m.attention, "machine": machine.name,
                                     "passes": _passes(m), "ops": rows, "notes": list(m.notes)},
                                    indent=2) + "\n")
    else:
        print(_text(m, machine, rows))
    return 0
