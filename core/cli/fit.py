"""``rooflab fit --machine M [--min-tps X] [--sort capability|speed|context] [--json]``: what
can I run here? Every catalogue model in its own weight format and the common GGUF ones
(``report.fit_table``), placed by auto-fit as ``rooflab predict`` places it: the most capable
models that fit and decode at X tokens/s or more first, then slower ones, then those paged from
disk or that do not fit. Each row is ``rooflab compare``'s row for that model on that machine:
the figures are the same numbers."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from rooflab.core.app.compare import rate_text, time_text
from rooflab.core.app.resolve import expected_machine, with_host
from rooflab.core.cli.args import add_engine_options, add_host_options
from rooflab.core.cli.compare import RowProgress, compare_workload, names
from rooflab.core.errors import SpecError
from rooflab.core.predict.host_part import host_flops, host_fp32_flops
from rooflab.core.report.compare import row_dict
from rooflab.core.report.fit_table import FORMATS, SORTS, USABLE_TPS, FitEntry, FitRow, fit_words
from rooflab.core.report.text import capacity_text
from rooflab.core.report.units import fmt
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload

GB = 1e9
_SORT_WORDS = {"capability": "most parameters first", "speed": "the better fit, then the faster first",
               "context": "the longest conversation that fits first"}


def add_fit_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("fit", help="what can I run here? the most capable catalogue models that run at a usable "
                                   "speed on a machine first")
    p.add_argument("--machine", required=True, metavar="MACHINE",
                   help="a preset key, a saved profile, 'measured', or a profile .json path")
    add_host_options(p)
    p.add_argument("--min-tps", type=float, default=USABLE_TPS, metavar="X",
                   help=f"usable speed: models slower than X tokens/s per sequence (expected, else the ceiling) "
                        f"rank after those that reach it (default {USABLE_TPS:g}; 0: no floor)")
    p.add_argument("--sort", choices=SORTS, default="capability",
                   help="within each group: most parameters first (capability, the default), fastest first "
                        "(speed), or longest context first (context)")
    p.add_argument("--model", action="append", metavar="MODEL",
                   help="also rank this model among the catalogue's, at its own format: a .gguf, a config.json or "
                        "folder, an hf: name or a GGUF link (repeat for more); marked * in the table")
    p.add_argument("--context", type=int, default=None, metavar="N",
                   help="tokens already in the conversation (the cache): each model must hold N + prompt + "
                        "answer, and decodes at that depth (default 0)")
    p.add_argument("--prompt", type=int, default=None, help="prompt tokens (default 2048)")
    p.add_argument("--answer", type=int, default=None, help="answer tokens (default 256)")
    p.add_argument("--batch", type=int, default=None, help="sequences decoded together (default 1)")
    p.add_argument("--kv-type", default="f16", help="KV-cache type (default f16)")
    add_engine_options(p)
    p.add_argument("--weights", type=names, metavar="F,G",
                   help=f"weight formats tried besides each model's own (default {','.join(FORMATS)})")
    p.add_argument("--ceiling-only", action="store_true", help="rank by the ceilings; no expected figures")
    p.add_argument("--json", action="store_true", help="machine-readable output (stable keys)")


def _host_cpu(machine: MachineProfile) -> str:
    """The host CPU that prices what a GPU leaves on it, and whether the profile states it."""
    if machine.kind != "gpu":
        return ""
    stated = "" if machine.offload_flops > 0 else " (an 8-core desktop assumed: --host-tflops states yours)"
    return (f", CPU {fmt(host_fp32_flops(machine), 'FLOP/s')} FP32 (int8 path {fmt(host_flops(machine), 'OP/s')})"
            f"{stated}")


def fit_text(rows: Sequence[FitRow], machine: MachineProfile, workload: Workload, min_tps: float,
             sort: str = "capability") -> str:
    """The ranked table, aligned (GB = 10^9 bytes, ms, tokens/s), under three lines that say
    what it is for and how it is ranked."""
    per = " per sequence" if workload.batch > 1 else ""
    second = f"; {machine.offload_name or 'second memory'}: {capacity_text(machine.offload_memory)} at " \
             f"{fmt(machine.offload_bandwidth, 'B/s')}{_host_cpu(machine)}" if machine.has_offload else ""
    lines = [f"What can I run on {machine.name}? {capacity_text(machine.memory)} at "
             f"{fmt(machine.bandwidth, 'B/s')}{second}",
             f"prompt {workload.prompt:,}, answer {workload.answer:,}, context {workload.context:,}, "
             f"batch {workload.batch:,}, {workload.kv_type} cache; placed by auto-fit",
             f"first what fits{f' at {min_tps:g} tokens/s{per} or more' if min_tps else ''}, then slower, then paged "
             f"from disk, then not at all; within each, {_SORT_WORDS[sort]} (tokens/s: expected, else the ceiling)"]
    table = [["rank", "model", "weights", "params B", "fit", "expected tok/s", "ceiling tok/s", "expected TTFT", "TTFT",
              "memory GB", "max context", "flags"]]
    for f in rows:
        r = f.row
        name = f"{r.model} *" if f.entry.named else r.model
        table.append([str(f.rank), name, r.weights, f"{f.capability / 1e9:,.1f}", fit_words(f, machine, min_tps),
                      rate_text(r.expected_per_sequence),
                      rate_text(r.per_sequence), time_text(r.expected_ttft), time_text(r.ttft),
                      f"{r.device_used / GB:,.1f} of {r.device_capacity / GB:,.1f}" if r.fits else "",
                      f"{r.largest_context:,}" if r.fits else "", r.flags])
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    left = (1, 2, 4, len(widths) - 1)
    lines += [("  ".join(c.ljust(w) if i in left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths, strict=True)))).rstrip() for row in table]
    if any(f.entry.named for f in rows):
        lines.append("* named with --model, ranked among the catalogue's")
    return "\n".join(lines)


def fit_dict(rows: Sequence[FitRow], machine: MachineProfile, workload: Workload, min_tps: float,
             formats: Sequence[str], sort: str = "capability") -> dict[str, object]:
    """The JSON object: what was ranked and how, and per row its rank, catalogue key (for a
    model named with --model: what named it, and ``named``), the format it opens in (null: its
    own), its parameters, how it fits and why it stands there, and ``rooflab compare``'s row."""
    return {"machine": {"key": machine.key, "name": machine.name}, "workload": {
        "prompt": workload.prompt, "answer": workload.answer, "context": workload.context,
        "batch": workload.batch, "kv_type": workload.kv_type}, "min_tokens_per_second": min_tps or None,
        "formats": list(formats), "sort": sort,
        "rows": [{"rank": f.rank, "catalogue_key": f.entry.key, "named": f.entry.named,
                  "weights_format": f.entry.weights,
                  "params_total": f.capability, "fit": f.fit, "fast_enough": f.fast_enough,
                  "tokens_per_second": f.speed, "why": fit_words(f, machine, min_tps), **row_dict(f.row)}
                 for f in rows]}


def run_fit(args: argparse.Namespace) -> int:
    """Rank the catalogue on ``--machine`` and print the table (or its JSON)."""
    from rooflab.core.cli.output import print_json
    from rooflab.core.io import load_model
    from rooflab.core.io.presets import load_machine
    from rooflab.core.jobs import run_job
    from rooflab.core.report.fit_table import fit_table_job

    if not args.min_tps >= 0:
        raise SpecError(f"--min-tps must be 0 or more tokens/s, got {args.min_tps:g}")
    workload = compare_workload(args)
    machine = with_host(args, load_machine(args.machine))
    formats = tuple(f.lower() for f in args.weights) if args.weights else FORMATS
    named = [FitEntry(key=ref, weights=None, spec=load_model(ref), named=True) for ref in args.model or ()]
    status = RowProgress(command="rooflab fit")
    rows = run_job(fit_table_job(machine, workload, formats=formats, min_tps=args.min_tps, sort=args.sort,
                                 expected=None if args.ceiling_only else expected_machine, named=named), status)
    status.done()
    if args.json:
        print_json(fit_dict(rows, machine, workload, args.min_tps, formats, args.sort))
    else:
        print(fit_text(rows, machine, workload, args.min_tps, args.sort))
    return 0
