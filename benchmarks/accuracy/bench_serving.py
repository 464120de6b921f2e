"""A real llama.cpp server on this machine against rooflab's serving prediction: llama-cpp-python's
OpenAI-compatible server (one slot: it runs one request at a time) serving a random-weight GGUF,
loaded at concurrency 1-8 and at request rates up to and past saturation, measured by
``rooflab.core.measure.loadtest.run`` (what ``rooflab measure server`` runs), beside the simulation
of the same plan (``rooflab.core.predict.serving``) on this machine's profile calibrated by
timing the same GGUF in llama.cpp in process (what ``rooflab measure model`` does).

Prints, per level, predicted and measured TTFT p50 and p90, TPOT p50 and total output tokens/s
with their error, then the saturation rate both ways: once for the engine alone, once with the
server's own time per step and per request (its Python loop, HTTP, streaming) taken from one
client sending requests of other lengths before each pass (prompts of half and one and a half
times the sweep's, half its answer: the server's time per request grows with the prompt, so the
two probes bracket the sweep's), the mean of those probes
(``ServingPlan.step_overhead``, ``request_overhead``); the load levels are predicted, never
fitted. The issue's target: within 20 % at every level below saturation, the saturation rate
within 25 %. The load average before and after is
printed: read the figures against it.

The sweep runs ``--passes`` times, in turn forward and backward (a machine that slows through the
run then weighs on the first levels and the last alike), and each level's measured figure is
the mean over the passes, printed with the passes' spread ((highest - lowest) / mean): on this
shared machine one level's TTFT moved 30-60 % between minutes, and a queue magnifies a small
change of speed, so one pass's figure at a busy level is partly the minute it ran in.

    python benchmarks/accuracy/bench_serving.py [--threads 1] [--prompt 256] [--answer 64] \
        [--requests 16] [--passes 2] [--quick] [--json FILE]
    python benchmarks/accuracy/bench_serving.py --from-record FILE

``--json FILE`` writes the run's record (the machine as calibrated, the probes, every level's
measured figures); the run prints by rendering it, the predictions made again from the kept
machine (the simulation is seeded), and ``--from-record`` prints a kept record the same way
(docs/runs/ holds the records the docs quote; tests/test_docs.py prints them and compares).

Needs llama-cpp-python==0.3.36 with its server extra and aiohttp (pip install -e '.[llamacpp,test]');
takes a few minutes. The GGUF (about 70 MB) goes to a temporary folder, removed afterwards."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for tests.factories
sys.path.insert(0, str(Path(__file__).resolve().parent))

from entry import recorded  # noqa: E402

from rooflab.core.io.hf import spec_from_config  # noqa: E402
from rooflab.core.io.presets import load_measured_machine  # noqa: E402
from rooflab.core.jobs import run_job  # noqa: E402
from rooflab.core.measure.engines.engine import measure_in_llamacpp  # noqa: E402
from rooflab.core.measure.engines.gguf_synth import write_synthetic_gguf  # noqa: E402
from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan  # noqa: E402
from rooflab.core.measure.loadtest.plan import ServerMeasurement, ServerPlan  # noqa: E402
from rooflab.core.measure.loadtest.run import measure_server_blocking  # noqa: E402
from rooflab.core.measure.workflow import after_engine_run  # noqa: E402
from rooflab.core.predict.serving import Lengths, Load, Serving, ServingPlan, serve  # noqa: E402
from rooflab.core.predict.serving_stats import ServingLevel, saturation_rate  # noqa: E402
from rooflab.core.values.machine import MachineProfile  # noqa: E402
from rooflab.core.values.model import ModelSpec  # noqa: E402
from rooflab.core.values.workload import Workload  # noqa: E402
from tests.factories.llama_server import ORDINARY_ONLY, llama_server  # noqa: E402

NAME = "bench llama 768x8 Q8_0"
CONFIG = dict(model_type="llama", hidden_size=768, num_hidden_layers=8, num_attention_heads=12,
              num_key_value_heads=4, head_dim=64, intermediate_size=2048, vocab_size=8000,
              max_position_embeddings=4096, tie_word_embeddings=False)
N_BATCH = 512                  # the server's --n_batch: its prompt chunk, the simulation's step budget
RATE_SHARES = (0.25, 0.5, 0.75, 0.9, 1.25)     # of the predicted saturation rate


def machine_profile(threads: int) -> MachineProfile:
    stored = load_measured_machine()
    if stored is not None:
        return stored
    from rooflab.core.measure.machine.benchmark import MachinePlan, measure_machine_blocking

    print("no measured machine kept: measuring bandwidth and matmul peaks first", file=sys.stderr)
    run = measure_machine_blocking(MachinePlan(threads=threads, repeats=3, experiments=("bandwidth", "matmul")))
    return run.profile(fallback=None)


def calibrated(spec: ModelSpec, path: Path, machine: MachineProfile, threads: int) -> tuple[MachineProfile, str]:
    """``machine`` with the efficiency fitted to this GGUF timed in llama.cpp in process, at the
    server's settings (threads, batch, no flash attention): ``rooflab measure model``'s fit; and
    the line that says what was fitted."""
    plan = LlamaCppPlan(threads=threads, flash_attention=False, batch_size=N_BATCH, ubatch_size=N_BATCH,
                        prompts=(64, 256, 512), depths=(0, 256, 512), gen_tokens=16, batches=(1, 2),
                        contexts=(256,), repeats=3)
    run = run_job(measure_in_llamacpp(spec, path, plan))
    # every point, those the load disturbed too: the server runs under the same load
    done = after_engine_run(run, machine, source=str(path), keep=False, include_disturbed=True)
    eff = done.calibration.efficiency
    line = (f"calibration ({len(done.calibration.points)} points): bandwidth x{eff.bandwidth:.2f}, compute "
            f"x{eff.compute:.2f}, decode compute x{eff.decode_compute_factor:.2f}, overhead "
            f"{eff.step_overhead * 1e3:.2f} ms per pass, cache read x{eff.kv_read_factor:.2f}")
    print(line, file=sys.stderr)
    return dataclasses.replace(machine, efficiency=eff), line


def error(predicted: float, measured: float) -> str:
    if not (math.isfinite(predicted) and math.isfinite(measured)) or measured <= 0:
        return "    -"
    return f"{(predicted - measured) / measured:+5.0%}"


FIGURES = ("TTFT p50", "TTFT p90", "TPOT p50", "tok/s")


def figures(level: ServingLevel) -> tuple[float, float, float, float]:
    """(TTFT p50, TTFT p90, TPOT p50 in seconds, output tokens/s) of a level."""
    return level.ttft.p50, level.ttft.p90, level.tpot.p50, level.output_tokens_per_second


def mean_and_spread(values: list[float]) -> tuple[float, float]:
    """(mean, (highest - lowest) / mean) of the passes' figures that are finite."""
    v = [x for x in values if math.isfinite(x)]
    if not v:
        return math.nan, math.nan
    mean = sum(v) / len(v)
    return mean, (max(v) - min(v)) / mean if mean > 0 else math.nan


def row(label: str, p: ServingLevel, passes: list[ServingLevel], below: bool) -> tuple[str, list[float]]:
    """The level's line (each figure predicted, measured as the passes' mean, the error; the
    passes' widest spread among the figures) and its errors."""
    cells, errors, spread = [], [], 0.0
    by_figure = list(zip(*(figures(m) for m in passes), strict=True))          # each figure over the passes
    for k, (predicted, values) in enumerate(zip(figures(p), by_figure, strict=True)):
        measured, wide = mean_and_spread(list(values))
        scale = 1.0 if k == len(FIGURES) - 1 else 1e3             # latencies in ms, tokens/s as they are
        cells.append(f"{predicted * scale:8.1f} {measured * scale:8.1f} {error(predicted, measured)}")
        if measured > 0 and math.isfinite(predicted) and math.isfinite(measured):
            errors.append(abs(predicted - measured) / measured)
        if math.isfinite(wide):
            spread = max(spread, wide)
    done = sum(m.completed for m in passes)
    return f"  {label:>8} {done:>4}  {' '.join(cells)}  {spread:6.0%}  {'below' if below else 'at/above'}", errors


@dataclasses.dataclass(frozen=True)
class KeptLevel:
    """One level of one pass as a record keeps it: its figures and the errors that ended requests."""

    stats: ServingLevel
    said: tuple[tuple[str, int], ...] = ()

    def problems(self) -> list[tuple[str, int]]:
        return list(self.said)


@dataclasses.dataclass(frozen=True)
class KeptPass:
    """One pass over the levels as a record keeps it, in the plan's order."""

    levels: tuple[KeptLevel, ...]

    @property
    def saturation_rate(self) -> float:
        return saturation_rate([lv.stats for lv in self.levels])


def kept(run: ServerMeasurement) -> dict[str, Any]:
    """A pass as the record keeps it: each level's figures and the errors that ended its requests."""
    return {"levels": [{"stats": lv.stats.to_dict(), "problems": [[e, n] for e, n in lv.problems()]}
                       for lv in run.levels]}


def pass_of(data: dict[str, Any]) -> KeptPass:
    return KeptPass(levels=tuple(KeptLevel(stats=ServingLevel.from_dict(lv["stats"]),
                                           said=tuple((str(e), int(n)) for e, n in lv["problems"]))
                                 for lv in data["levels"]))


def table(title: str, predicted: Serving, measured: Sequence[KeptPass]) -> list[str]:
    """Predicted against the mean of the passes at each level (``measured``: one pass each, its
    levels in the plan's order)."""
    lines = ["", title]
    heads = " ".join(f"{name:>8} {'meas':>8} {'err':>5}" for name in FIGURES)
    lines.append(f"  {'level':>8} {'done':>4}  {heads}  {'spread':>6}  load")
    saturation, _ = mean_and_spread([m.saturation_rate for m in measured])
    worst_below = 0.0
    for i, p in enumerate(predicted.levels):
        passes = [m.levels[i] for m in measured if i < len(m.levels)]
        if not passes:
            continue
        below = p.level <= 1 if p.mode == "concurrency" else p.level < saturation
        label = f"c={p.level:g}" if p.mode == "concurrency" else f"{p.level:g}/s"
        line, errors = row(label, p, [m.stats for m in passes], below)
        lines.append(line)
        if below and errors:
            worst_below = max(worst_below, max(errors))
        for m in passes:
            for said, count in m.problems():
                lines.append(f"           {count} x {said}")
    sat_err = (predicted.saturation_rate - saturation) / saturation
    each = ", ".join(f"{m.saturation_rate:.3f}" for m in measured)
    lines.append(f"  saturation: predicted {predicted.saturation_rate:.3f} requests/s, measured {saturation:.3f} "
                 f"(passes: {each}; error {sat_err:+.0%}; target within 25 %)")
    lines.append(f"  worst error below saturation: {worst_below:.0%} (target within 20 %)")
    return lines


def in_order(loads: tuple[Load, ...], run: ServerMeasurement) -> ServerMeasurement:
    """``run`` with its levels in the order of ``loads`` (a backward pass ran them reversed)."""
    by_load = {(lv.load.mode, lv.load.level): lv for lv in run.levels}
    return dataclasses.replace(run, levels=tuple(by_load[(ld.mode, ld.level)] for ld in loads
                                                 if (ld.mode, ld.level) in by_load))


def probe_overheads(spec: ModelSpec, tuned: MachineProfile, url: str, prompt: int, answer: int,
                    ) -> tuple[float, float]:
    """(per step, per request) seconds the server adds to the engine for one client sending
    ``prompt``-token prompts and ``answer``-token answers: measured TPOT and TTFT less the engine's."""
    probe = ServingPlan(prompt=Lengths(mean=prompt), answer=Lengths(mean=answer), slots=1, step_tokens=N_BATCH,
                        requests=6)
    one = (Load(mode="concurrency", level=1),)
    engine = serve(spec, tuned, Workload(prompt=prompt, answer=answer), probe, one).levels[0]
    plan = ServerPlan(url=url, model="bench", loads=one, prompt=probe.prompt, answer=probe.answer, requests=6,
                      force_length=False, extra_body=ORDINARY_ONLY)
    server = measure_server_blocking(plan).levels[0].stats
    per_step = max(0.0, server.tpot.p50 - engine.tpot.p50)
    per_request = max(0.0, server.ttft.p50 - engine.ttft.p50)
    print(f"server overhead from one client (prompt {prompt}, answer {answer}): TPOT {server.tpot.p50 * 1e3:.2f} ms "
          f"measured, {engine.tpot.p50 * 1e3:.2f} ms engine -> {per_step * 1e3:.2f} ms per step; TTFT "
          f"{server.ttft.p50 * 1e3:.1f} ms measured, {engine.ttft.p50 * 1e3:.1f} ms engine -> "
          f"{per_request * 1e3:.1f} ms per request", file=sys.stderr)
    return per_step, per_request


def server_overheads(spec: ModelSpec, tuned: MachineProfile, url: str, args: argparse.Namespace,
                     ) -> tuple[float, float]:
    """(per step, per request) seconds the server adds to the engine at the sweep's lengths,
    from two probes of other lengths on either side of them: half the sweep's answer, and
    prompts of half and one and a half times its prompt. The server's own time per request
    grows with the prompt (llama-cpp-python's server computes the output head for every prompt
    token by default: on the 2026-12-02 runs about 0 ms at 128 tokens and 100 ms at 384), so one
    probe with shorter prompts misses part of it; the sweep's prompt lies halfway between the
    two, where the straight line through them is their mean."""
    short, long = max(16, args.prompt // 2), max(16, args.prompt // 2) + args.prompt
    answer = max(8, args.answer // 2)
    both = [probe_overheads(spec, tuned, url, prompt, answer) for prompt in (short, long)]
    return (both[0][0] + both[1][0]) / 2, (both[0][1] + both[1][1]) / 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads, server and calibration alike")
    parser.add_argument("--prompt", type=int, default=256)
    parser.add_argument("--answer", type=int, default=64)
    parser.add_argument("--requests", type=int, default=16, help="requests per level and pass")
    parser.add_argument("--passes", type=int, default=2,
                        help="sweeps over the levels, in turn forward and backward; a level's figure is their mean")
    parser.add_argument("--quick", action="store_true", help="concurrency 1, 2, 4 and two rates")
    parser.add_argument("--json", metavar="FILE", help="also write the run's record here")
    parser.add_argument("--from-record", metavar="FILE", help="measure nothing: print a --json run's record as the "
                        "run printed it (docs/runs/ holds the records the docs quote)")
    return parser


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """The run: the server loaded level by level, beside the engine's calibration; its record."""
    load0, began = _load(), time.perf_counter()
    began_at = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    machine = machine_profile(args.threads)
    spec = spec_from_config(CONFIG, weights="q8_0", name=NAME)
    workload = Workload(prompt=args.prompt, answer=args.answer)
    print(f"load average before: {load0}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="rooflab-bench-serving-") as folder:
        path = run_job(write_synthetic_gguf(spec, Path(folder) / "bench-q8_0.gguf"))
        tuned, fitted = calibrated(spec, path, machine, args.threads)
        sim_plan = ServingPlan(prompt=Lengths(mean=args.prompt), answer=Lengths(mean=args.answer), slots=1,
                               step_tokens=N_BATCH, requests=args.requests)
        with llama_server(path, Path(folder) / "server.log", threads=args.threads, n_batch=N_BATCH,
                          n_ctx=2 * (args.prompt + args.answer) + 64, alias="bench") as url:
            probes = [server_overheads(spec, tuned, url, args)]       # the first one places the rate levels
            first = dataclasses.replace(sim_plan, step_overhead=probes[0][0], request_overhead=probes[0][1])
            saturation = serve(spec, tuned, workload, first, ()).saturation_rate
            concurrency = (1, 2, 4) if args.quick else (1, 2, 4, 8)
            shares = (0.5, 1.25) if args.quick else RATE_SHARES
            loads = tuple(Load(mode="concurrency", level=c) for c in concurrency) + \
                tuple(Load(mode="rate", level=round(s * saturation, 3)) for s in shares)
            plan = ServerPlan(url=url, model="bench", loads=loads, prompt=sim_plan.prompt, answer=sim_plan.answer,
                              requests=args.requests, force_length=False, extra_body=ORDINARY_ONLY)
            measured = []
            for k in range(max(1, args.passes)):
                if k:
                    probes.append(server_overheads(spec, tuned, url, args))
                order = loads if k % 2 == 0 else loads[::-1]
                print(f"pass {k + 1} of {args.passes}: {'forward' if k % 2 == 0 else 'backward'}", file=sys.stderr,
                      flush=True)
                measured.append(in_order(loads, measure_server_blocking(dataclasses.replace(plan, loads=order))))
    return {"date": began_at, "argv": sys.argv[1:], "load_before": load0, "load_after": _load(),
            "seconds": round(time.perf_counter() - began), "machine": tuned.to_dict(), "calibration": fitted,
            "prompt": args.prompt, "answer": args.answer, "requests": args.requests, "threads": args.threads,
            "loads": [[ld.mode, ld.level] for ld in loads], "probes": [list(p) for p in probes],
            "prompt_method": measured[0].prompt_method, "passes": [kept(m) for m in measured]}


def render(run: dict[str, Any]) -> list[str]:
    """A run's record as text, what the run printed once measured: the predictions are made
    again from the calibrated machine it kept (the simulation is seeded), the measurements read back."""
    tuned = MachineProfile.from_dict(run["machine"])
    spec = spec_from_config(CONFIG, weights="q8_0", name=NAME)
    workload = Workload(prompt=run["prompt"], answer=run["answer"])
    loads = tuple(Load(mode=mode, level=level) for mode, level in run["loads"])
    measured = [pass_of(p) for p in run["passes"]]
    sim_plan = ServingPlan(prompt=Lengths(mean=run["prompt"]), answer=Lengths(mean=run["answer"]), slots=1,
                           step_tokens=N_BATCH, requests=run["requests"])
    lines = [f"run {run['date']}: bench_serving.py {' '.join(run['argv'])}",
             f"machine: {tuned.name}: {tuned.bandwidth / 1e9:.1f} GB/s, {tuned.flops() / 1e9:.0f} GFLOP/s; "
             f"load average before: {run['load_before']}",
             f"model: {spec.name}, {spec.weight_bytes / 1e6:.0f} MB of weights, random; prompt {run['prompt']} "
             f"tokens, answer {run['answer']}, {run['requests']} requests per level, {run['threads']} thread(s)",
             run["calibration"],
             *(f"server overhead, pair {i + 1} of one-client probes: {step * 1e3:.2f} ms per step, "
               f"{request * 1e3:.1f} ms per request" for i, (step, request) in enumerate(run["probes"])),
             "",
             f"llama-cpp-python server, 1 slot, --n_batch {N_BATCH}; prompts counted by {run['prompt_method']}; "
             f"ms (tok/s: output tokens/s); measured: the mean of {len(measured)} pass(es); spread: the passes' widest "
             "(highest - lowest) / mean among the level's four figures; error = (predicted - measured) / measured"]
    lines += table("predicted: the engine as calibrated in process", serve(spec, tuned, workload, sim_plan, loads),
                   measured)
    per_step, per_request = (sum(p[i] for p in run["probes"]) / len(run["probes"]) for i in (0, 1))
    with_server = dataclasses.replace(sim_plan, step_overhead=per_step, request_overhead=per_request)
    lines += table(f"predicted: the engine + the server's overhead, the mean of {len(run['probes'])} pair(s) of "
                   f"one-client probes ({per_step * 1e3:.2f} ms per step, {per_request * 1e3:.1f} ms per request)",
                   serve(spec, tuned, workload, with_server, loads), measured)
    lines += ["", f"load average after: {run['load_after']}; {run['seconds']} s in all"]
    return lines


def main() -> int:
    args = _parser().parse_args()
    print("\n".join(render(recorded(args, measure))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
