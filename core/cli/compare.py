"""``rooflab compare --models A,B --machines X,Y [--weights q4_k_m,q8_0] [--json|--csv] [--out DIR]``:
models x machines x weight formats in one table (``report.compare``), each row placed as
auto-fit places it. A bad name is one line and exit status 2, like every command.

With ``--out`` the table is saved as compare.csv, and as compare.png when the desktop
package hands ``run_compare`` a PNG writer (``rooflab.gui.main`` does)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rooflab.core.app.compare import compare_text, entries
from rooflab.core.app.resolve import as_typed, expected_machine, with_engine_options
from rooflab.core.cli.args import add_engine_options, folder_name, int_list
from rooflab.core.cli.serve import add_serve_options, compare_serving, compare_serving_text
from rooflab.core.errors import ReportError, SpecError
from rooflab.core.jobs import Progress
from rooflab.core.report.compare import CompareRow
from rooflab.core.values.workload import MAX_BATCH, MAX_TOKENS, Workload

PngWriter = Callable[[Path, Sequence[CompareRow], Sequence[str]], Path]     # (path, rows, heading) -> path written


def names(text: str) -> tuple[str, ...]:
    """Comma-separated names, blanks dropped."""
    out = tuple(x.strip() for x in text.split(",") if x.strip())
    if not out:
        raise argparse.ArgumentTypeError("expected at least one name")
    return out


def add_compare_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("compare", help="models x machines x weight formats in one table (auto-fit placement)")
    p.add_argument("--models", required=True, type=names, metavar="A,B",
                   help="catalogue keys, .gguf files, config.json files or model folders")
    p.add_argument("--machines", required=True, type=names, metavar="X,Y",
                   help="preset keys, saved profiles or profile .json paths")
    p.add_argument("--weights", type=names, metavar="F,G",
                   help="weight formats for config-defined models, e.g. q4_k_m,q8_0 (default: each model's own)")
    p.add_argument("--prompt", type=int, default=None, help="prompt tokens (default 2048)")
    p.add_argument("--answer", type=int, default=None, help="answer tokens (default 256)")
    p.add_argument("--context", type=int, default=None, help="tokens already in the cache (default 0)")
    p.add_argument("--batch", type=int, default=None, help="sequences decoded together (default 1)")
    p.add_argument("--kv-type", default="f16", help="KV-cache type (default f16)")
    add_engine_options(p)
    p.add_argument("--depths", type=int_list(0, MAX_TOKENS), help="contexts of the decode-rate columns "
                   "(default 0,4096,32768)")
    p.add_argument("--ceiling-only", action="store_true", help="leave the expected columns empty")
    p.add_argument("--out", metavar="DIR", type=folder_name, help="also save compare.csv (and compare.png) in DIR")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="machine-readable output (stable keys)")
    out.add_argument("--csv", action="store_true", help="the table as CSV")
    add_serve_options(p)          # --serve: each row's serving prediction (core/cli/serve.py)


def compare_workload(args: argparse.Namespace) -> Workload:
    """The workload the table is priced at (the defaults of ``rooflab predict``)."""
    from rooflab.core.values.defaults import DEFAULT_WORKLOAD as d

    batch = args.batch if args.batch is not None else d.batch
    if not 1 <= batch <= MAX_BATCH:
        raise SpecError(f"--batch must be in [1, {MAX_BATCH:,}], got {batch}")
    try:
        return with_engine_options(args, Workload(prompt=args.prompt if args.prompt is not None else d.prompt,
                                                  answer=args.answer if args.answer is not None else d.answer,
                                                  context=args.context if args.context is not None else d.context,
                                                  batch=batch, kv_type=args.kv_type.lower()))
    except SpecError as exc:
        raise as_typed(exc) from None


class RowProgress:
    """Progress of a long table on stderr: nothing for a run that ends within ``quiet_s``, then
    a line at most every ``every_s`` (one line rewritten in place on a terminal). ``clock``:
    seconds, monotonic (a test passes its own)."""

    def __init__(self, *, quiet_s: float = 2.0, every_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, command: str = "rooflab compare") -> None:
        self._command = command
        self._clock = clock
        self._start = clock()
        self._quiet, self._every = quiet_s, every_s
        self._last: float | None = None
        self._tty = sys.stderr.isatty()

    def __call__(self, progress: Progress) -> None:
        now = self._clock()
        if now - self._start < self._quiet or (self._last is not None and now - self._last < self._every):
            return
        self._last = now
        line = f"{self._command}: {progress.message}"
        print(f"\r{line:<60}" if self._tty else line, end="" if self._tty else "\n", file=sys.stderr, flush=True)

    def done(self) -> None:
        if self._tty and self._last is not None:
            print(file=sys.stderr)


def run_compare(args: argparse.Namespace, *, png: PngWriter | None = None) -> int:
    """Build, print and (with --out) save the table; ``png`` draws compare.png when given."""
    from rooflab.core.cli.output import print_json, warn_past_training
    from rooflab.core.files.atomic import write_atomic
    from rooflab.core.jobs import run_job
    from rooflab.core.report.compare import DEPTHS, compare_columns, compare_csv, compare_rows_job, row_dict

    workload = compare_workload(args)
    depths = tuple(dict.fromkeys(args.depths or DEPTHS))
    hook = None if args.ceiling_only else expected_machine
    combos = entries(args.models, args.machines, args.weights)
    for spec in {id(c[0]): c[0] for c in combos}.values():        # each model once, before any row
        warn_past_training(spec, workload, depths if args.depths else (), contexts_flag="--depths")
    status = RowProgress()
    rows = run_job(compare_rows_job(combos, workload, depths=depths, expected=hook), status)
    status.done()
    served = compare_serving(combos, workload, args, expected=not args.ceiling_only) if args.serve else None
    header = [f"rooflab compare: prompt {workload.prompt}, answer {workload.answer}, context {workload.context}, "
              f"batch {workload.batch}, {workload.kv_type} cache; SI units; ceilings unless expected_*",
              "placement: chosen by auto-fit (llama.cpp's -ngl / --n-cpu-moe); empty cells: does not fit"]
    if args.json:
        print_json({"workload": {"prompt": workload.prompt, "answer": workload.answer, "context": workload.context,
                                 "batch": workload.batch, "kv_type": workload.kv_type},
                    "depths": list(depths), "columns": [{"key": k, "unit": u} for k, u in compare_columns(depths)],
                    "rows": [row_dict(r) for r in rows],
                    **({"serving": [r.to_dict() for r in served]} if served is not None else {})})
    elif args.csv:
        sys.stdout.write(compare_csv(rows, header, depths))
    else:
        print(compare_text(rows, depths))
        if served is not None:
            print("\n" + compare_serving_text(served))
    if args.out:
        folder = Path(args.out).expanduser()
        try:
            written = [write_atomic(folder / "compare.csv", compare_csv(rows, header, depths))]
            if png is not None:
                written.append(png(folder / "compare.png", rows, header))
        except OSError as exc:
            raise ReportError(f"{folder}: cannot write the comparison there ({exc.strerror or exc})") from exc
        for path in written:
            print(f"saved {path}", file=sys.stderr)
        if png is None:
            print("compare.png needs the desktop package (rooflab.gui)", file=sys.stderr)
    return 0
