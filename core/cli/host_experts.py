"""``rooflab measure host-experts``: time this machine's CPU back end reading routed experts one
token at a time (``measure.host_experts``) and keep it as this machine's host-expert calibration,
which the expected figures of a GPU with experts on the host then take
(``calibration.host_experts``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from rooflab.core.cli.args import int_in
from rooflab.core.jobs import CancelToken, Progress
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import MAX_THREADS


def add_host_experts_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``measure host-experts`` to the ``measure`` subcommands ``sub``."""
    p = sub.add_parser("host-experts", help="the CPU's routed-expert decode rate, the host half of an offload")
    p.add_argument("--rounds", type=int_in(1, 16), default=3,
                   help="rounds of the two timings per layout, alternating (default 3)")
    p.add_argument("--layers", type=int_in(1, 8), default=2, help="layers of each layout (default 2)")
    p.add_argument("--layouts", type=_layouts, default=None,
                   help="which layouts: qwen3-moe, gpt-oss, or both, comma-separated (default both)")
    p.add_argument("--threads", type=int_in(1, MAX_THREADS), default=None,
                   help="CPU threads (default: the physical cores, as llama.cpp)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-save", action="store_true", help="do not keep it as this machine's calibration")
    return p


def _layouts(text: str) -> tuple[str, ...]:
    """--layouts: known layout names, comma-separated (argparse says what is wrong in one line)."""
    from rooflab.core.measure.host_experts import LAYOUTS

    wanted = tuple(w.strip() for w in text.split(",") if w.strip())
    known = [layout.name for layout in LAYOUTS]
    unknown = [w for w in wanted if w not in known]
    if unknown or not wanted:
        raise argparse.ArgumentTypeError(f"{', '.join(unknown) or 'none given'}: not one of {', '.join(known)}")
    return wanted


def run_host_experts(args: argparse.Namespace, machine: MachineProfile, cancel: CancelToken,
                     on_progress: Callable[[Progress], None] | None = None) -> int:
    """Measure, print and (unless --no-save) keep; ``machine``: this machine as measured."""
    from rooflab.core.calibration.host_experts import describe_host_experts, save_host_experts
    from rooflab.core.errors import SpecError
    from rooflab.core.jobs import run_job
    from rooflab.core.measure.host_experts import LAYOUTS, measure_host_experts

    known = {layout.name: layout for layout in LAYOUTS}
    wanted = args.layouts or tuple(known)
    if machine.kind != "cpu":
        raise SpecError(f"{machine.name}: the host half of an offload is timed on this machine's CPU; "
                        "measure it with 'rooflab measure machine' (--device cpu) first")
    cal = run_job(measure_host_experts(machine, rounds=args.rounds, threads=args.threads, layers=args.layers,
                                       layouts=[known[w] for w in wanted], cancel=cancel), on_progress)
    kept = None if args.no_save else save_host_experts(cal)
    if args.json:
        print(json.dumps({**cal.to_dict(), "factors": {r.layout: cal.factor(r) for r in cal.layouts},
                          "rates": {r.layout: r.rate for r in cal.layouts}, "kept": str(kept) if kept else None},
                         indent=2))
        return 0
    for line in describe_host_experts(cal):
        print(line)
    print(f"kept as this machine's host-expert calibration: {kept}" if kept else "not kept (--no-save)",
          file=sys.stdout)
    return 0
