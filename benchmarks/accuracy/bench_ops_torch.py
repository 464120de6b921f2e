"""The torch engine timed operation by operation against the same passes timed the usual way.

For each prompt: the prefill and the decode step after it, timed plainly (best of --repeats)
and by operation with torch's profiler (the run whose operations sum least). Prints each pass's
plain time, the sum of its operations and the difference (the profiler's own cost plus the
spread between runs; target: within 10 %), then each operation's measured time beside its
ceiling, slowest first, with the share of its bound it reached.

    python benchmarks/accuracy/bench_ops_torch.py [--model qwen3-0.6b] [--prompts 256] [--repeats 3]
                                         [--threads N] [--machine KEY]

The model is built with random weights from its config (a catalogue key, a config.json or a
model folder); --machine is the profile the ceilings use (default: the measured one, else
reference-cpu).
"""

from __future__ import annotations

import argparse
import sys

from entry import finish  # benchmarks/accuracy/entry.py: one line and status 2 for bad input

from rooflab.core.cli.measure_ops import compared_rows
from rooflab.core.io.presets import load_machine, load_measured_machine
from rooflab.core.jobs import run_job
from rooflab.core.measure.engines.op_times import beaten_ceiling
from rooflab.core.measure.engines.torch.ops import OpsPlan, measure_ops
from rooflab.core.report.text import count
from rooflab.core.report.units import fmt

TARGET = 0.10          # the sum of a pass's operations within 10 % of the pass timed plainly


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen3-0.6b")
    parser.add_argument("--prompts", default="256", help="comma-separated prompt lengths")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--machine", default=None)
    parser.add_argument("--top", type=int, default=12, help="operations listed per pass, slowest first")
    args = parser.parse_args()
    prompts = tuple(int(p) for p in args.prompts.split(",") if p.strip())
    machine = load_machine(args.machine) if args.machine else (load_measured_machine() or load_machine("reference-cpu"))
    plan = OpsPlan(prompts=prompts, repeats=args.repeats, threads=args.threads, random_weights=True)
    m = run_job(measure_ops(args.model, plan))
    print(f"{m.label}: torch {m.device} {m.dtype}, {count(m.threads, 'thread')}, {m.attention} attention; "
          f"ceilings on {machine.name}")
    met = True
    for p in m.passes:
        ok = abs(p.overhead) <= TARGET
        met = met and ok
        print(f"  {p.phase:<8} prompt {p.prompt:>6,}: timed {fmt(p.seconds, 's'):>9}, summed by operation "
              f"{fmt(p.seconds_ops, 's'):>9} ({p.overhead:+.1%}) {'met' if ok else 'NOT met'}")
    rows = [r for r in compared_rows(m, machine) if r["seconds_measured"] is not None]
    for p in m.passes:
        mine = sorted((r for r in rows if (r["phase"], r["prompt"]) == (p.phase, p.prompt)),
                      key=lambda r: -r["seconds_measured"])[:args.top]
        print(f"  {p.phase} of prompt {p.prompt:,}, slowest operations:")
        for r in mine:
            ceiling = "-" if r["seconds_ceiling"] is None else fmt(r["seconds_ceiling"], "s")
            share = "-" if r["share_of_bound"] is None else f"{r['share_of_bound']:.0%}"
            print(f"    {r['layer_kind']:<12} {r['name']:<18} measured {fmt(r['seconds_measured'], 's'):>9}  "
                  f"ceiling {ceiling:>9}  of its bound {share:>5}")
    beaten = beaten_ceiling(rows, machine)
    if beaten:
        print(f"warning: {beaten}")
    print(f"target (every pass's operations within {TARGET:.0%} of the pass): {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(finish(main))
