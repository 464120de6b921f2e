"""rooflab's command line: inspect, predict, models, machines (here), and gui, report, measure
(dispatched to handlers the upper layers register, so core never imports Qt or torch). The
commands and their options: ``cli.parser``.

Every RooflabError becomes one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from rooflab.core.app.resolve import resolve_machine, resolve_workload
from rooflab.core.cli.parser import GB, build_parser
from rooflab.core.errors import RooflabError, SpecError

Handler = Callable[[argparse.Namespace], int]
MAX_GRID = 100_000          # decode rows (contexts x batches) and prefill rows one predict prints


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
    from rooflab.core.app.figures import figures
    from rooflab.core.app.resolve import choice_from, expected_for_choice, missing_for_choice
    from rooflab.core.app.tables import tables
    from rooflab.core.cli.output import predict_csv, predict_dict, predict_text, print_json, warn_past_training
    from rooflab.core.io import load_model
    from rooflab.core.report.chart_types import Scenario
    from rooflab.core.report.expected import expected_text, with_expected
    from rooflab.core.values.defaults import DEFAULT_BATCHES, DEFAULT_CONTEXTS, DEFAULT_PROMPTS

    workload = resolve_workload(args)
    spec = load_model(args.model, weights=args.weights)
    machine = resolve_machine(args, spec)
    choice = choice_from(args)
    contexts = args.contexts or DEFAULT_CONTEXTS
    batches = args.batches or DEFAULT_BATCHES
    prompts = args.prompts or DEFAULT_PROMPTS
    check_grid(contexts, batches, prompts)
    warn_past_training(spec, workload, args.contexts or (), args.prompts or ())
    expected = None if args.calibrated or args.ceiling_only else expected_for_choice(
        spec, machine, choice, workload.compute_dtype)
    missing = None if expected is not None or args.calibrated or args.ceiling_only else missing_for_choice(
        spec, machine, choice, workload.compute_dtype)
    if args.ops:                # the operation view: every operation of the two passes (report.ops_table)
        from rooflab.core.report.ops_table import ops_output

        sys.stdout.write(ops_output(spec, machine, workload, expected, "json" if args.json else
                                    "csv" if args.csv else "text"))
        return 0
    # the one answer: placed once (auto-fit unless placement flags), summarised once
    answer = figures(Scenario(model=spec, machine=machine, workload=workload, placement=choice), expected=expected,
                     missing=missing)
    placed = answer.placed
    if args.serve or args.concurrency or args.request_rate:     # serving under load: cli/serve.py
        from rooflab.core.cli.serve import run_serve

        return run_serve(args, spec, machine, workload, expected, placed)
    grid = tables(answer, contexts, batches, prompts)
    # the expected request sits where the headline's does: its placement, or its devices
    on = answer.stands_on
    if args.json:
        d = predict_dict(answer, grid)
        if missing is not None:             # none, and why: what the text and the numbers panel say
            d["expected_missing"] = missing.line
        print_json(with_expected(d, spec, expected, workload, contexts, batches, prompts, on, runs=placed.fits,
                                 rows_on=placed.priced_on) if expected else d)
    elif args.csv:
        sys.stdout.write(predict_csv(grid))
    else:
        print(predict_text(answer, grid))
        print(answer.why_text())
        if expected is not None and placed.fits:
            print(expected_text(spec, expected, workload, on))
        elif expected is not None:
            print(f"expected with {expected.calibration.engine_label}: none, the model does NOT fit here")
        elif missing is not None:           # none: say why when it is not the usual
            print(f"expected: none ({missing.line})")
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
    from rooflab.core.io.catalogue import list_catalogue, load_entry, search_catalogue

    entries = search_catalogue(args.search) if args.search else list_catalogue()
    if not entries and not args.json:
        raise SpecError(f"no catalogue model matches {args.search!r} (rooflab models lists them all)")
    sizes = {e.key: load_entry(e).file_bytes for e in entries}      # bytes at the entry's own format
    if args.json:
        print_json([{"key": e.key, "name": e.name, "weights": e.default_weights, "file_bytes": sizes[e.key],
                     "files": e.files, "description": e.description, "sources": e.sources} for e in entries])
    else:
        width = max(len(e.key) for e in entries)
        print(f"{'key':<{width}}  {'weights':<7}    GB  description")
        for e in entries:
            print(f"{e.key:<{width}}  {e.default_weights:<7} {sizes[e.key] / 1e9:6.2f}  {e.description}")
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
