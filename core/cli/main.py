"""rooflab's command line: inspect, predict, models, machines (here), and gui, report, measure
(dispatched to handlers the upper layers register, so core never imports Qt or torch).

Every RooflabError becomes one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from rooflab.core import __version__
from rooflab.core.cli.args import add_engine_options, dtype_name, int_list, number_in, with_engine_options
from rooflab.core.errors import RooflabError, SpecError
from rooflab.core.values.machine import (
    BANDWIDTH_RANGE,
    FACTOR_RANGE,
    FLOPS_RANGE,
    MEMORY_RANGE,
    MachineProfile,
)
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import MAX_BATCH, MAX_TOKENS, Workload

Handler = Callable[[argparse.Namespace], int]
GB = 1e9
MAX_GRID = 100_000          # decode rows (contexts x batches) and prefill rows one predict prints


class _Parser(argparse.ArgumentParser):
    """A bad argument is one line, like every other error (the usage is one --help away).
    Sub-commands' parsers are made of this class too (argparse's default)."""

    def error(self, message: str) -> NoReturn:
        from rooflab.core.io.textfile import printable

        # "unrecognized arguments: ..." quotes what was typed as it was typed
        self.exit(2, f"{printable(f'{self.prog}: error: {message}', 4000)} (see {self.prog} --help)\n")


def add_model_options(p: argparse.ArgumentParser, *, positional: bool = False, required: bool = True) -> None:
    if positional:
        p.add_argument("model", metavar="MODEL", help="a .gguf file, config.json, model folder or catalogue key")
    else:
        p.add_argument("--model", required=required, metavar="MODEL",
                       help="a .gguf file, config.json, model folder or catalogue key")
    p.add_argument("--weights", metavar="FORMAT",
                   help="weight format for config-defined models: fp32, bf16, fp16, q8_0, q6_k, q5_k_m, "
                        "q4_k_m, q4_k_s, q4_0, mxfp4")


def add_machine_options(p: argparse.ArgumentParser, *, required: bool = True) -> None:
    p.add_argument("--machine", required=required, metavar="MACHINE",
                   help="a preset key, a saved profile, 'measured', or a profile .json path")
    p.add_argument("--bandwidth", type=number_in(BANDWIDTH_RANGE[0] / GB, BANDWIDTH_RANGE[1] / GB, "GB/s"),
                   metavar="GB/s", help="override memory bandwidth")
    p.add_argument("--peak-tflops", type=number_in(FLOPS_RANGE[0] / 1e12, FLOPS_RANGE[1] / 1e12, "TFLOP/s"),
                   metavar="T", help="override peak TFLOP/s (compute dtype)")
    p.add_argument("--memory-gb", type=number_in(MEMORY_RANGE[0] / GB, MEMORY_RANGE[1] / GB, "GB"), metavar="G",
                   help="override memory size (10^9 bytes)")
    p.add_argument("--dtype", dest="compute_dtype", metavar="DTYPE", type=dtype_name,
                   help="compute dtype whose peak applies (fp32, fp16, bf16, ...); default: the machine's")
    p.add_argument("--bandwidth-efficiency", type=number_in(*FACTOR_RANGE), metavar="F",
                   help="share of the bandwidth an engine reaches (predictions are ceilings at 1.0)")
    p.add_argument("--compute-efficiency", type=number_in(*FACTOR_RANGE), metavar="F",
                   help="share of the peak FLOP/s an engine reaches")
    p.add_argument("--step-overhead-ms", type=number_in(0, 59_999, "ms"), metavar="MS",
                   help="fixed time added to every forward pass")
    p.add_argument("--calibrated", action="store_true",
                   help="apply efficiency factors fitted from this model's own measurements on this machine")
    p.add_argument("--ceiling-only", action="store_true",
                   help="leave out the expected figures a calibration of the machine gives")


def add_workload_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prompt", type=int, default=None, help="prompt tokens (default 2048)")
    p.add_argument("--answer", type=int, default=None, help="answer tokens (default 256)")
    p.add_argument("--context", type=int, default=None, help="tokens already in the cache (default 0)")
    p.add_argument("--batch", type=int, default=None, help="sequences decoded together (default 1)")
    p.add_argument("--kv-type", default="f16", help="KV-cache type: f32, f16, bf16, q8_0, q4_0, ... (default f16)")
    p.add_argument("--draft-tokens", type=int, default=0, help="speculative decoding: drafts per verify")
    p.add_argument("--acceptance", type=float, default=0.7, help="speculative decoding: acceptance rate")
    p.add_argument("--offload", type=float, default=0.0, metavar="FRACTION",
                   help="share of the weights on the machine's second, slower memory (as whole layers)")
    add_engine_options(p)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rooflab", description="Predict how fast a language model runs on a machine; then measure it.")
    parser.add_argument("--version", action="version", version=f"rooflab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("inspect", help="tensor table, bytes read per token and KV cache of a model")
    add_model_options(p, positional=True)
    p.add_argument("--kv-type", default="f16", help="KV-cache type for kv_bytes_per_token (default f16)")
    p.add_argument("--json", action="store_true", help="machine-readable output (stable keys)")
    p.add_argument("--tensors", action="store_true", help="list every tensor (text output)")

    p = sub.add_parser("predict", help="prefill, decode, batching and memory predictions")
    add_model_options(p)
    add_machine_options(p)
    add_workload_options(p)
    p.add_argument("--contexts", type=int_list(0, MAX_TOKENS),
                   help="contexts for the decode table (default 0,4096,32768)")
    p.add_argument("--batches", type=int_list(1, MAX_BATCH),
                   help="batch sizes for the decode table (default 1,4,16,64)")
    p.add_argument("--prompts", type=int_list(1, MAX_TOKENS), help="prompt lengths for the prefill table")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="machine-readable output (stable keys)")
    out.add_argument("--csv", action="store_true", help="decode and prefill rows as CSV")
    from rooflab.core.cli.placement import add_placement_options

    add_placement_options(p)
    from rooflab.core.cli.serve import add_serve_options

    add_serve_options(p)
    from rooflab.core.cli.compare import add_compare_parser
    from rooflab.core.cli.fit import add_fit_parser

    add_compare_parser(sub)
    add_fit_parser(sub)

    p = sub.add_parser("models", help="the built-in model catalogue")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("machines", help="machine presets and saved profiles")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("gui", help="open the desktop application")
    p.add_argument("model", nargs="?", metavar="MODEL", help="model to open (default: the catalogue default)")
    p.add_argument("--weights", metavar="FORMAT", help="weight format for config-defined models")
    p.add_argument("--machine", metavar="MACHINE", help="machine to select")
    p.add_argument("--screenshot", metavar="FILE.png", help="render the window to FILE.png and exit")

    p = sub.add_parser("report", help="write the plots (PNG) and series (CSV) without a window")
    add_model_options(p)
    add_machine_options(p)
    add_workload_options(p)
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the report files")
    add_placement_options(p)

    try:
        from rooflab.core.cli.measure import add_measure_parser
    except ImportError:  # pragma: no cover - measurement package absent in a stripped build
        pass
    else:
        add_measure_parser(sub)
    return parser


# --- shared resolution ------------------------------------------------------------------------

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
        flops = dict(machine.peak_flops)
        flops[dtype] = args.peak_tflops * 1e12
        changes["peak_flops"] = flops
        if dtype not in machine.peak_flops:
            changes["default_dtype"] = dtype
    if getattr(args, "memory_gb", None):
        changes["memory"] = args.memory_gb * GB
    eff = {name: value for name, value in (
        ("bandwidth", getattr(args, "bandwidth_efficiency", None)),
        ("compute", getattr(args, "compute_efficiency", None)),
        ("step_overhead", None if getattr(args, "step_overhead_ms", None) is None else args.step_overhead_ms / 1e3),
    ) if value is not None}
    if eff:
        changes["efficiency"] = dataclasses.replace(machine.efficiency, **eff)
    if getattr(args, "calibrated", False):
        from rooflab.core.measure import store

        mkey = store.machine_key(machine)
        fitted = None if spec is None else (store.load_calibration(store.model_key(spec), mkey)
                                            or store.load_calibration(spec.source, mkey))
        if fitted is None:
            raise SpecError(f"no calibration for this model on {machine.name}: run 'rooflab measure model' first")
        changes["efficiency"] = fitted
    return dataclasses.replace(machine, **changes) if changes else machine


def resolve_workload(args: argparse.Namespace) -> Workload:
    from rooflab.core.values.defaults import DEFAULT_WORKLOAD as d

    return with_engine_options(args, Workload(
        prompt=args.prompt if args.prompt is not None else d.prompt,
        answer=args.answer if args.answer is not None else d.answer,
        context=args.context if args.context is not None else d.context,
        batch=args.batch if args.batch is not None else d.batch,
        kv_type=args.kv_type.lower(), compute_dtype=getattr(args, "compute_dtype", None),
        draft_tokens=args.draft_tokens, acceptance=args.acceptance, offload_fraction=args.offload,
    ))


# --- commands ---------------------------------------------------------------------------------

def _cmd_inspect(args: argparse.Namespace) -> int:
    from rooflab.core.cli.output import inspect_dict, inspect_text, print_json
    from rooflab.core.io import load_model
    from rooflab.core.values.quant import kv_bytes_per_value

    kv_bytes_per_value(args.kv_type)  # validates the name before the model is read
    spec = load_model(args.model, weights=args.weights)
    if args.json:
        print_json(inspect_dict(spec, args.kv_type))
    else:
        print(inspect_text(spec, args.kv_type, tensors=args.tensors))
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    from rooflab.core.cli.output import predict_csv, predict_dict, predict_text, print_json
    from rooflab.core.cli.placement import choice_from, engine_from, resolve_placed, with_placement
    from rooflab.core.io import load_model
    from rooflab.core.measure.expectations import expected_on
    from rooflab.core.report.chart_types import Scenario
    from rooflab.core.report.expected import expected_text, with_expected
    from rooflab.core.report.explain import why_text
    from rooflab.core.values.defaults import DEFAULT_BATCHES, DEFAULT_CONTEXTS, DEFAULT_PROMPTS

    workload = resolve_workload(args)
    spec = load_model(args.model, weights=args.weights)
    machine = resolve_machine(args, spec)
    contexts = args.contexts or DEFAULT_CONTEXTS
    batches = args.batches or DEFAULT_BATCHES
    prompts = args.prompts or DEFAULT_PROMPTS
    check_grid(contexts, batches, prompts)
    expected = None if args.calibrated or args.ceiling_only else expected_on(
        spec, machine, dtype=workload.compute_dtype, engine=engine_from(args))
    placed = resolve_placed(args, spec, machine, workload)     # auto-fit unless placement flags
    if args.serve or args.concurrency or args.request_rate:     # serving under load: cli/serve.py
        from rooflab.core.cli.serve import run_serve

        return run_serve(args, spec, machine, workload, expected, placed)
    # the expected request sits where the headline's does: its placement, or its devices
    on = placed.stands_on
    if args.json:
        d = with_placement(predict_dict(spec, machine, workload, contexts, batches, prompts), spec, machine,
                           workload, placed, contexts, batches, prompts)
        print_json(with_expected(d, spec, expected, workload, contexts, batches, prompts, on, runs=placed.fits,
                                 rows_on=placed.priced_on) if expected else d)
    elif args.csv:
        sys.stdout.write(predict_csv(spec, machine, workload, contexts, batches, prompts))
    else:
        print(predict_text(spec, machine, workload, contexts, batches, prompts, placed=placed))
        print(why_text(Scenario(model=spec, machine=machine, workload=workload, placement=choice_from(args))))
        if expected is not None and placed.fits:
            print(expected_text(spec, expected, workload, on))
        elif expected is not None:
            print(f"expected with {expected.calibration.engine_label}: none, the model does NOT fit here")
    return 0


def check_grid(contexts: Sequence[int], batches: Sequence[int], prompts: Sequence[int]) -> None:
    """SpecError when the tables asked for are too large to compute and print (12,000 contexts
    x 12,000 batches is 144 million rows and several GB)."""
    rows = len(contexts) * len(batches)
    if rows > MAX_GRID:
        raise SpecError(f"--contexts x --batches makes {len(contexts):,} x {len(batches):,} = {rows:,} decode rows; "
                        f"at most {MAX_GRID:,} (give fewer values)")
    if len(prompts) > MAX_GRID:
        raise SpecError(f"--prompts has {len(prompts):,} values; at most {MAX_GRID:,}")


def _cmd_models(args: argparse.Namespace) -> int:
    from rooflab.core.cli.output import print_json
    from rooflab.core.io.catalogue import list_catalogue

    entries = list_catalogue()
    if args.json:
        print_json([{"key": e.key, "name": e.name, "weights": e.default_weights,
                     "description": e.description, "sources": e.sources} for e in entries])
    else:
        width = max(len(e.key) for e in entries)
        for e in entries:
            print(f"{e.key:<{width}}  {e.default_weights:<7} {e.description}")
    return 0


def _cmd_machines(args: argparse.Namespace) -> int:
    from rooflab.core.cli.output import machine_dict, print_json
    from rooflab.core.io.presets import (
        broken_user_profiles,
        list_presets,
        list_user_profiles,
        load_measured_machine,
    )
    from rooflab.core.predict.roofline import balance

    presets, users = list_presets(), list_user_profiles()
    measured = load_measured_machine()
    extra = [measured] if measured is not None else []
    if args.json:
        print_json([{**machine_dict(m), "key": m.key, "user": m in users, "measured": m is measured}
                    for m in presets + users + extra])
        return 0
    print(f"{'key':<20} {'GB/s':>7} {'TFLOP/s':>8} {'memory GB':>9} {'balance':>8}  name")
    for m in presets + users + extra:
        tag = " (measured)" if m is measured else " (saved profile)" if m in users else ""
        print(f"{m.key:<20} {m.bandwidth / GB:>7.1f} {m.flops() / 1e12:>8.2f} {m.memory / GB:>9.1f} "
              f"{balance(m):>8.1f}  {m.name}{tag}")
    for line in broken_user_profiles():
        print(f"warning: {line}", file=sys.stderr)
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from rooflab.core.cli.compare import run_compare

    return run_compare(args)


def _cmd_fit(args: argparse.Namespace) -> int:
    from rooflab.core.cli.fit import run_fit

    return run_fit(args)


_COMMANDS: dict[str, Handler] = {
    "inspect": _cmd_inspect, "predict": _cmd_predict, "models": _cmd_models, "machines": _cmd_machines,
    "compare": _cmd_compare, "fit": _cmd_fit,
}


def main(argv: Sequence[str] | None = None, handlers: dict[str, Handler] | None = None) -> int:
    """Run one command; returns the exit status (0 ok, 2 bad input)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    table = dict(_COMMANDS)
    try:
        from rooflab.core.cli.measure import run_measure
    except ImportError:  # pragma: no cover
        pass
    else:
        table["measure"] = run_measure
    table.update(handlers or {})
    if args.command is None:
        parser.print_help()
        return 0
    handler = table.get(args.command)
    if handler is None:
        print(f"rooflab: error: '{args.command}' needs the desktop package (rooflab.gui)", file=sys.stderr)
        return 2
    try:
        code = handler(args)
        sys.stdout.flush()          # a full disk or a closed pipe shows here, not at exit
        return code
    except RooflabError as exc:
        _error_line(f"rooflab: error: {exc}")
        return 2
    except BrokenPipeError:  # `rooflab predict ... | head`
        _discard_stdout()
        return 0
    except OSError as exc:   # `rooflab predict ... > /dev/full`, a disk gone, a store that cannot be written
        _discard_stdout()
        where = f" ({exc.filename})" if exc.filename else ""
        _error_line(f"rooflab: error: {exc.strerror or exc}{where}")
        return 2
    except KeyboardInterrupt:
        print("rooflab: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("rooflab: error: out of memory", file=sys.stderr)
        return 2


def _discard_stdout() -> None:
    """Point stdout at the null device, so what is left in its buffer is not written again (and
    fails again) as the interpreter exits."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _error_line(line: str) -> None:
    """One line on stderr, control characters removed (a message can quote a file's text);
    silently nothing when stderr itself cannot be written."""
    from rooflab.core.io.textfile import printable

    try:
        print(printable(line, 4000), file=sys.stderr)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
