"""``rooflab measure server URL --model NAME``: load an OpenAI-compatible server at concurrency
levels or request rates, print the measured latencies and throughput per level (the table of
``rooflab predict --serve``), and, given the model and machine the server runs, the prediction
beside them. The measurement is kept per (server, model, machine); the API key never is.

Exit status: 0 when requests completed, 1 when none did (each failure is in the table's
problems), 130 when cancelled (what was measured is printed and kept), 2 with one line for
anything that stops the measurement: bad options, a machine or store path that would not do
(checked before the first request), a server that cannot be reached or is no OpenAI-compatible
server; and 2 when the measurement was made and printed but could not be kept."""

from __future__ import annotations

import argparse
import math
import signal
import sys
from dataclasses import dataclass
from typing import Any

from rooflab.core.cli.args import int_in
from rooflab.core.cli.serve import (
    add_load_options,
    float_list,
    levels_text,
    loads_from,
    plan_dict,
    serving_dict,
)
from rooflab.core.errors import RooflabError, SpecError
from rooflab.core.io.textfile import shown
from rooflab.core.jobs import CancelToken, Progress
from rooflab.core.predict.serving import MAX_SLOTS, Lengths, Serving
from rooflab.core.predict.serving_stats import Bounds
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import MAX_TOKENS

DEFAULT_CONCURRENCY = (1, 2, 4, 8)


def seconds(text: str) -> float:
    value = float_list(0.0, 86_400.0)(text)
    if len(value) != 1:
        raise argparse.ArgumentTypeError(f"expected one number of seconds, got {text!r}")
    return value[0]


def json_object(text: str) -> dict[str, Any]:
    """--extra-body: a JSON object, by the bounded reader (its depth, NaN and Infinity refused)."""
    from rooflab.core.files.safe_json import JsonError, parse_json

    try:
        value = parse_json(text)
    except JsonError as exc:
        raise argparse.ArgumentTypeError(f"{shown(text, 60)} {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object ({...})")
    return value


def add_server_parser(sub: Any) -> None:
    """``measure server`` on the ``measure`` sub-commands."""
    p = sub.add_parser("server", help="load a running OpenAI-compatible server and time every token")
    p.add_argument("url", metavar="URL", help="the server, e.g. http://127.0.0.1:8080 (a /v1 suffix is fine)")
    p.add_argument("--model", required=True, metavar="NAME", help="the model name the server serves")
    p.add_argument("--endpoint", choices=("completions", "chat"), default="completions",
                   help="/v1/completions or /v1/chat/completions (default completions)")
    p.add_argument("--api-key-env", metavar="VAR",
                   help="the environment variable that holds the API key (the key is never written anywhere)")
    p.add_argument("--prompt", type=int_in(1, MAX_TOKENS), default=512, help="prompt tokens (default 512)")
    p.add_argument("--answer", type=int_in(1, MAX_TOKENS), default=128, help="answer tokens (default 128)")
    add_load_options(p, DEFAULT_CONCURRENCY)
    p.add_argument("--timeout", type=seconds, default=120.0, metavar="S", help="one request at most (default 120)")
    p.add_argument("--stall-timeout", type=seconds, default=30.0, metavar="S",
                   help="seconds without a byte before a request counts as timed out (default 30)")
    p.add_argument("--level-seconds", type=seconds, default=300.0, metavar="S",
                   help="a level sends no new request after this (default 300)")
    p.add_argument("--no-force-length", action="store_true",
                   help="do not ask for exact answer lengths (min_tokens, ignore_eos)")
    p.add_argument("--extra-body", type=json_object, default={}, metavar="JSON",
                   help="more fields for every request, e.g. '{\"temperature\": 0}'")
    p.add_argument("--predict-model", metavar="MODEL",
                   help="the model the server runs (a .gguf, config.json or catalogue key): predict beside")
    p.add_argument("--machine", metavar="MACHINE",
                   help="the machine the server runs on (preset or profile): the prediction's and the store's")
    p.add_argument("--slots", type=int_in(1, MAX_SLOTS), default=None, metavar="N",
                   help="the server's slots (llama-server --parallel, vLLM --max-num-seqs) for the prediction")
    p.add_argument("--step-tokens", type=int_in(1, MAX_TOKENS), default=None, metavar="N",
                   help="the server's tokens per step (llama-server --batch-size) for the prediction")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--no-save", action="store_true", help="do not keep the measurement")


def run_server(args: argparse.Namespace, cancel: CancelToken) -> int:
    from rooflab.core.measure.loadtest.plan import ServerPlan
    from rooflab.core.measure.loadtest.run import measure_server

    if not args.concurrency and not args.request_rate:
        args.concurrency = DEFAULT_CONCURRENCY
    plan = ServerPlan(url=args.url, model=args.model, endpoint=args.endpoint, loads=loads_from(args),
                      prompt=Lengths(mean=args.prompt, spread=args.prompt_spread),
                      answer=Lengths(mean=args.answer, spread=args.answer_spread), requests=args.requests,
                      seed=args.seed, api_key_env=args.api_key_env, request_timeout=args.timeout,
                      stall_timeout=args.stall_timeout, level_seconds=args.level_seconds,
                      force_length=not args.no_force_length, extra_body=args.extra_body,
                      bounds=Bounds(ttft=args.ttft_slo_ms, tpot=args.tpot_slo_ms))
    predicted = _prediction(args, plan) if args.predict_model else None
    from rooflab.core.io.presets import load_machine
    from rooflab.core.jobs import run_job
    from rooflab.core.measure.loadtest.plan import check_keepable, keep_server_run

    # everything that could refuse the result is checked before the first request
    machine = predicted.machine if predicted is not None else load_machine(args.machine) if args.machine else None
    if not args.no_save:
        check_keepable(plan, machine)

    previous = signal.getsignal(signal.SIGINT)

    def interrupted(*_: Any) -> None:      # Ctrl+C: stop within a second, keep what was measured
        cancel.cancel()

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, interrupted)
    try:
        result = run_job(measure_server(plan, cancel), _status(args.json))
    finally:
        signal.signal(signal.SIGINT, previous)
    saved, not_kept = None, ""
    if not args.no_save and result.levels:
        try:                             # with the model, the window draws it over its prediction
            saved = keep_server_run(result, spec=predicted.spec if predicted else None, machine=machine)
        except (RooflabError, OSError) as exc:      # printed all the same: nothing measured is lost
            not_kept = str(exc) if isinstance(exc, RooflabError) else f"{exc.strerror or exc} ({exc.filename})"
    if args.json:
        from rooflab.core.cli.output import print_json

        out = {"measurement": result.to_dict(), "prediction": predicted.json if predicted else None,
               "kept": str(saved) if saved else None}
        print_json(out)
    else:
        _print(result, predicted, saved)
    if not_kept:
        raise SpecError(f"measured and shown, but not kept: {not_kept}")
    if result.cancelled:
        print("rooflab: measurement cancelled; what was measured is shown" + (" and kept" if saved else ""),
              file=sys.stderr)
        return 130
    return 0 if any(lv.stats.completed for lv in result.levels) else 1


def _status(quiet: bool) -> Any:
    def show(progress: Progress) -> None:
        if not quiet and progress.sample is None:
            print(f"[{progress.fraction or 0.0:4.0%}] {progress.message}", file=sys.stderr)
    return show


@dataclass(frozen=True, slots=True)
class Predicted:
    """The prediction printed beside a measurement: the simulation, its JSON, its title line,
    and the model and machine it is for."""

    serving: Serving
    json: dict[str, Any]
    title: str
    spec: ModelSpec
    machine: MachineProfile


def _prediction(args: argparse.Namespace, plan: Any) -> Predicted:
    """The simulation of the same plan for --predict-model on --machine (auto-fit placement;
    the calibrated efficiency where the machine has one), and its JSON."""
    from rooflab.core.calibration.expectations import expected_on
    from rooflab.core.cli.serve import DEFAULT_SLOTS_CAP
    from rooflab.core.io import load_model
    from rooflab.core.io.presets import load_machine, load_measured_machine
    from rooflab.core.predict.autofit import largest_batch
    from rooflab.core.predict.choice import PlacementChoice
    from rooflab.core.predict.placed import placed_as_chosen
    from rooflab.core.predict.serving import ServingPlan, serve
    from rooflab.core.values.workload import Workload

    spec = load_model(args.predict_model)
    machine = load_machine(args.machine) if args.machine else load_measured_machine()
    if machine is None:
        raise SpecError("--predict-model needs --machine (or a measured machine: rooflab measure machine)")
    workload = Workload(prompt=plan.prompt.mean, answer=plan.answer.mean)
    placed = placed_as_chosen(spec, machine, workload, PlacementChoice())
    if not placed.fits:
        raise SpecError(f"{spec.name} does not fit on {machine.name}: nothing to predict")
    slots = args.slots or max(1, min(largest_batch(spec, machine, workload, placed.placement), DEFAULT_SLOTS_CAP))
    sim = ServingPlan(prompt=plan.prompt, answer=plan.answer, slots=slots,
                      step_tokens=args.step_tokens or max(2048, slots), requests=plan.requests, seed=plan.seed,
                      bounds=plan.bounds)
    expected = expected_on(spec, machine)
    label = f"expected with {expected.calibration.engine_label}" if expected else "ceiling"
    result = serve(spec, expected.machine if expected else machine, workload, sim, plan.loads, placed.stands_on)
    out = {"model": spec.name, "machine": machine.name, "figures": label, "plan": plan_dict(sim),
           **serving_dict(result)}
    return Predicted(serving=result, json=out, title=f"predicted for {spec.name} on {machine.name} ({label}, "
                     f"{slots} slot{'s' if slots != 1 else ''})", spec=spec, machine=machine)


def _print(result: Any, predicted: Predicted | None, saved: Any) -> None:
    from rooflab.core.measure.loadtest.plan import public_url

    plan = result.plan
    print(f"server {public_url(plan.url)}, model {plan.model}, /v1/{'chat/' if plan.endpoint == 'chat' else ''}"
          f"completions: prompts {plan.prompt.mean:,} tokens (counted by {result.prompt_method}), "
          f"answers {plan.answer.mean:,} tokens")
    extra = []
    for lv in result.levels:
        bad = [f"{lv.count(s)} {s if s != 'error' else 'errors'}" for s in ("error", "timeout", "cancelled")
               if lv.count(s)]
        extra.append(", ".join(bad))
    print("measured:")
    print(levels_text([lv.stats for lv in result.levels], plan.bounds.given, extra))
    for lv in result.levels:
        for line, count in lv.problems():
            print(f"  {lv.load.mode} {lv.load.level:g}: {count} x {line}")
        for warning in lv.warnings:
            print(f"  {lv.load.mode} {lv.load.level:g}: warning: {warning}")
    if math.isfinite(result.saturation_rate):
        print(f"  saturation: at least {result.saturation_rate:.3g} requests/s (the highest sustained rate "
              "measured)")
    elif any(lv.stats.completed for lv in result.levels):      # a sustained rate needs a level's C + 2 requests
        print("  saturation: not measured (too few requests completed at a level: a sustained rate needs the "
              "concurrency + 2)")
    else:
        print("  saturation: not measured (no request completed)")
    if predicted is not None:
        print(predicted.title + ":")
        print(levels_text(predicted.serving.levels, plan.bounds.given))
        print(f"  saturation: {predicted.serving.saturation_rate:.3g} requests/s")
    for warning in result.warnings:
        print(f"warning: {warning}")
    if saved:
        print(f"kept in {saved}")
