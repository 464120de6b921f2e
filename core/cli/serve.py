"""``rooflab predict ... --serve [--concurrency 1,2,4 | --request-rate 0.5,1,2] [--json]``: the
serving simulation (``predict.serving``) for the model as ``predict`` places it, at the ceiling
and, where the machine has a calibration, at the expected efficiency beside it. The table
printer is shared with ``rooflab measure server``, so a prediction and a measurement read alike."""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rooflab.core.cli.args import int_in, int_list
from rooflab.core.errors import SpecError
from rooflab.core.predict.expected import Expected
from rooflab.core.predict.placed import PlacedSummary
from rooflab.core.predict.serving import (
    MAX_RATE,
    MAX_REQUESTS,
    MAX_SLOTS,
    Lengths,
    Load,
    Serving,
    ServingPlan,
    check_size,
    serve,
    simulated_requests,
)
from rooflab.core.predict.serving_stats import Bounds, ServingLevel
from rooflab.core.report.units import fmt
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import MAX_BATCH, MAX_TOKENS, Workload

DEFAULT_CONCURRENCY = (1, 2, 4, 8, 16)
DEFAULT_SLOTS_CAP = 256        # vLLM's max_num_seqs; llama-server users give their --parallel
MAX_LEVELS = 64


def float_list(low: float, high: float) -> Callable[[str], tuple[float, ...]]:
    """A parser of comma-separated numbers in (low, high]."""

    def parse(text: str) -> tuple[float, ...]:
        try:
            numbers = [float(x) for x in text.replace(" ", "").split(",") if x]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
        if not numbers or len(numbers) > MAX_LEVELS:
            raise argparse.ArgumentTypeError(f"expected 1 to {MAX_LEVELS} values, got {text!r}")
        if not all(low < n <= high for n in numbers):         # NaN fails too
            raise argparse.ArgumentTypeError(f"values must be in ({low:g}, {high:g}], got {text!r}")
        return tuple(numbers)

    return parse


def spread(text: str) -> float:
    """--prompt-spread / --answer-spread: a share in [0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text!r}")
    return value


def milliseconds(text: str) -> float:
    """A latency bound in ms, returned in seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected milliseconds, got {text!r}") from None
    if not 0.0 < value < 1e9:
        raise argparse.ArgumentTypeError(f"must be a positive number of ms, got {text!r}")
    return value / 1e3


def add_load_options(p: argparse.ArgumentParser | Any, concurrency: Sequence[int] = DEFAULT_CONCURRENCY) -> None:
    """--concurrency, --request-rate, --requests, --seed, the length spreads and the bounds:
    the options a prediction and a measurement of a server share (``concurrency``: the levels
    without --concurrency or --request-rate)."""
    p.add_argument("--concurrency", type=int_list(1, MAX_BATCH), metavar="C,C",
                   help=f"concurrent requests, each client sending its next when one ends "
                        f"(default {','.join(map(str, concurrency))} without --request-rate)")
    p.add_argument("--request-rate", type=float_list(0.0, MAX_RATE), metavar="R,R",
                   help="requests per second, arriving at random (Poisson)")
    p.add_argument("--requests", type=int_in(1, MAX_REQUESTS), metavar="N",
                   help="requests per level (default: 4 per client or 20 seconds of arrivals, 16 to 1,000)")
    p.add_argument("--prompt-spread", type=spread, default=0.0, metavar="F",
                   help="prompt lengths uniform in prompt x (1 +- F) (default 0: all alike)")
    p.add_argument("--answer-spread", type=spread, default=0.0, metavar="F",
                   help="answer lengths uniform in answer x (1 +- F) (default 0)")
    p.add_argument("--seed", type=int_in(0, 2**62), default=0, metavar="N",
                   help="seed of every random draw (default 0)")
    p.add_argument("--ttft-slo-ms", type=milliseconds, metavar="MS", help="goodput: TTFT bound")
    p.add_argument("--tpot-slo-ms", type=milliseconds, metavar="MS", help="goodput: TPOT bound")


def add_serve_options(p: argparse.ArgumentParser) -> None:
    """``predict``'s serving options."""
    g = p.add_argument_group("serving under load (--serve)")
    g.add_argument("--serve", action="store_true",
                   help="simulate a continuous-batching server (llama-server, vLLM) at each load level")
    add_load_options(g)
    g.add_argument("--slots", type=int_in(1, MAX_SLOTS), metavar="N",
                   help="sequences served at once: llama-server's --parallel, vLLM's --max-num-seqs "
                        f"(default: as many as fit, at most {DEFAULT_SLOTS_CAP})")
    g.add_argument("--step-tokens", type=int_in(1, MAX_TOKENS), metavar="N",
                   help="tokens per step, decode and prefill chunks together: llama-server's --batch-size, "
                        "vLLM's --max-num-batched-tokens (default 2048)")


def loads_from(args: argparse.Namespace) -> tuple[Load, ...]:
    """The levels asked for: --concurrency, then --request-rate (default: concurrency 1-16)."""
    concurrency = args.concurrency or (() if args.request_rate else DEFAULT_CONCURRENCY)
    loads = [Load(mode="concurrency", level=c) for c in concurrency]
    loads += [Load(mode="rate", level=r) for r in args.request_rate or ()]
    if len(loads) > MAX_LEVELS:
        raise SpecError(f"{len(loads)} load levels; at most {MAX_LEVELS}")
    return tuple(loads)


def plan_from(args: argparse.Namespace, workload: Workload, slots: int) -> ServingPlan:
    """The serving plan the options describe, ``slots`` unless --slots gives them."""
    slots = getattr(args, "slots", None) or slots
    step = getattr(args, "step_tokens", None) or max(2048, slots)
    return ServingPlan(prompt=Lengths(mean=workload.prompt, spread=args.prompt_spread),
                       answer=Lengths(mean=workload.answer, spread=args.answer_spread), slots=slots,
                       step_tokens=step, requests=args.requests, seed=args.seed,
                       bounds=Bounds(ttft=args.ttft_slo_ms, tpot=args.tpot_slo_ms))


def run_serve(args: argparse.Namespace, spec: ModelSpec, machine: MachineProfile, workload: Workload,
              expected: Expected | None, placed: PlacedSummary) -> int:
    """Print the serving prediction ``predict --serve`` asks for (text or --json)."""
    from rooflab.core.cli.output import print_json
    from rooflab.core.cli.placement import placed_largest_batch

    if getattr(args, "csv", False):
        raise SpecError("--serve prints text or --json, not --csv")
    if not placed.fits:
        raise SpecError(f"{spec.name} does not fit on {machine.name} as placed: nothing to serve "
                        "(see rooflab predict without --serve)")
    fit = placed_largest_batch(spec, machine, workload, placed)
    plan = plan_from(args, workload, max(1, min(fit, DEFAULT_SLOTS_CAP)))
    loads = loads_from(args)
    check_size((2 if expected is not None else 1) * simulated_requests(plan, loads), "predict --serve")
    on = placed.stands_on
    ceiling = serve(spec, machine, workload, plan, loads, on)
    central = serve(spec, expected.machine, workload, plan, loads, on) if expected is not None else None
    if args.json:
        from rooflab.core.report.expected import calibration_dict

        out: dict[str, Any] = {"model": spec.name, "machine": machine.name,
                               "placement": placed.headline(spec, machine), "plan": plan_dict(plan),
                               "sequences_that_fit": fit, "ceiling": serving_dict(ceiling),
                               "expected": serving_dict(central) if central is not None else None,
                               "calibration": calibration_dict(expected.calibration, expected.notes)
                               if expected is not None else None}
        print_json({"serving": out})
        return 0
    print(f"serving {spec.name} on {machine.name}: {placed.headline(spec, machine)}")
    print(f"  {plan_text(plan)}; {fit:,} sequence{'s' if fit != 1 else ''} of the workload's length fit")
    print("ceiling (the machine's peaks):")
    print(levels_text(ceiling.levels, plan.bounds.given))
    print(f"  saturation: {ceiling.saturation_rate:.3g} requests/s (every slot busy); "
          f"simulated in {ceiling.seconds:.2f} s")
    if central is not None and expected is not None:
        print(f"expected with {expected.calibration.engine_label}:")
        print(levels_text(central.levels, plan.bounds.given))
        print(f"  saturation: {central.saturation_rate:.3g} requests/s")
    return 0


def plan_text(plan: ServingPlan) -> str:
    def lengths(name: str, x: Lengths) -> str:
        return f"{name} {x.mean:,} tokens" + (f" (+-{x.spread:.0%})" if x.spread else "")

    slots = f"{plan.slots} slot{'s' if plan.slots != 1 else ''}"
    return (f"{slots}, {plan.step_tokens:,} tokens per step, {lengths('prompt', plan.prompt)}, "
            f"{lengths('answer', plan.answer)}, seed {plan.seed}")


def plan_dict(plan: ServingPlan) -> dict[str, Any]:
    return {"slots": plan.slots, "step_tokens": plan.step_tokens, "prompt_tokens": plan.prompt.mean,
            "prompt_spread": plan.prompt.spread, "answer_tokens": plan.answer.mean,
            "answer_spread": plan.answer.spread, "requests": plan.requests, "seed": plan.seed,
            "ttft_bound_seconds": plan.bounds.ttft, "tpot_bound_seconds": plan.bounds.tpot}


def serving_dict(s: Serving) -> dict[str, Any]:
    return {"levels": [lv.to_dict() for lv in s.levels],
            "saturation_requests_per_second": s.saturation_rate, "simulation_seconds": s.seconds}


def _ms(x: float) -> str:
    """A latency in its unit, 3 significant figures ("55.7 ms", "29 s"): in ms alone a 29 s
    TTFT read "28994.1"."""
    return f"{fmt(x, 's'):>8}" if math.isfinite(x) else f"{'-':>8}"


HEADER = (f"  {'level':>9} {'done':>5} {'req/s':>7} {'tok/s':>8} {'tok/s/seq':>9} | {'TTFT p50':>8} {'p90':>8} "
          f"{'p99':>8} | {'TPOT p50':>8} {'p90':>8} | {'ITL p99':>8} | {'E2E p50':>8} {'p90':>8}")


def level_label(lv: ServingLevel) -> str:
    return f"c={lv.level:g}" if lv.mode == "concurrency" else f"{lv.level:g}/s"


def levels_text(levels: Sequence[ServingLevel], goodput: bool = False,
                extra: Sequence[str] | None = None) -> str:
    """One row per level, latencies with their units (``extra``: a note after each row, such as
    errors)."""
    lines = [HEADER + ("  goodput" if goodput else "")]
    for i, lv in enumerate(levels):
        row = (f"  {level_label(lv):>9} {lv.completed:>5} {lv.requests_per_second:>7.3g} "
               f"{lv.output_tokens_per_second:>8.1f} {lv.tokens_per_second_per_sequence:>9.1f} | "
               f"{_ms(lv.ttft.p50)} {_ms(lv.ttft.p90)} {_ms(lv.ttft.p99)} | {_ms(lv.tpot.p50)} {_ms(lv.tpot.p90)} | "
               f"{_ms(lv.itl.p99)} | {_ms(lv.e2e.p50)} {_ms(lv.e2e.p90)}")
        if goodput and lv.goodput is not None:
            row += f"  {lv.goodput:.3g}/s ({(lv.goodput_share or 0):.0%})"
        if extra and extra[i]:
            row += f"  {extra[i]}"
        lines.append(row)
    lines.append("  (tok/s: output tokens per second, all sequences; tok/s/seq: 1 / TPOT)")
    return "\n".join(lines)



@dataclass(frozen=True, slots=True, kw_only=True)
class ServedRow:
    """One compared row served: its model, machine and weight format, and (None when it does
    not fit) the plan and the levels at the ceiling and as its calibration expects."""

    model: str
    machine: str
    weights: str
    plan: ServingPlan | None = None
    ceiling: Serving | None = None
    expected: Serving | None = None
    expected_with: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "machine": self.machine, "weights": self.weights,
                "plan": plan_dict(self.plan) if self.plan is not None else None,
                "ceiling": serving_dict(self.ceiling) if self.ceiling is not None else None,
                "expected": serving_dict(self.expected) if self.expected is not None else None,
                "expected_with": self.expected_with or None}


def compare_serving(combos: Sequence[tuple[ModelSpec, MachineProfile, str]], workload: Workload,
                    args: argparse.Namespace, *, expected: bool = True) -> list[ServedRow]:
    """``rooflab compare --serve``: per compared row (model, machine, weight format), the
    serving simulation at the levels asked for, placed as auto-fit places the row, at the
    ceiling and (``expected``) as the machine's calibration expects."""
    from rooflab.core.calibration.expectations import expected_on
    from rooflab.core.cli.placement import placed_largest_batch
    from rooflab.core.predict.choice import PlacementChoice
    from rooflab.core.predict.placed import placed_as_chosen

    if getattr(args, "csv", False):
        raise SpecError("--serve prints text or --json, not --csv")
    loads = loads_from(args)
    # the command's size, bounded before any row runs: each row at most the slots cap
    most = plan_from(args, workload, DEFAULT_SLOTS_CAP)
    check_size(len(combos) * (2 if expected else 1) * simulated_requests(most, loads),
               f"compare --serve ({len(combos)} row{'s' if len(combos) != 1 else ''})")
    rows = []
    for spec, machine, weights in combos:
        row = ServedRow(model=spec.name, machine=machine.key or machine.name, weights=weights)
        placed = placed_as_chosen(spec, machine, workload, PlacementChoice(), suggest=False)
        if not placed.fits:
            rows.append(row)
            continue
        fit = placed_largest_batch(spec, machine, workload, placed)
        plan = plan_from(args, workload, max(1, min(fit, DEFAULT_SLOTS_CAP)))
        on = placed.stands_on
        found = expected_on(spec, machine) if expected else None
        rows.append(dataclasses.replace(
            row, plan=plan, ceiling=serve(spec, machine, workload, plan, loads, on),
            expected=serve(spec, found.machine, workload, plan, loads, on) if found else None,
            expected_with=found.calibration.engine_label if found else ""))
    return rows


def compare_serving_text(rows: Sequence[ServedRow]) -> str:
    """``compare_serving``'s rows as text: one block per compared row, its levels at the ceiling
    and expected (the table ``predict --serve`` prints)."""
    out = []
    for row in rows:
        out.append(f"serving {row.model} on {row.machine} ({row.weights}):")
        if row.plan is None or row.ceiling is None:
            out.append("  does not fit: nothing to serve")
            continue
        out.append(f"  {plan_text(row.plan)}")
        for name, run in (("ceiling (the machine's peaks)", row.ceiling), (f"expected with {row.expected_with}",
                                                                          row.expected)):
            if run is not None:
                out += [f"  {name}:", levels_text(run.levels, row.plan.bounds.given),
                        f"  saturation: {run.saturation_rate:.3g} requests/s"]
    return "\n".join(out)
