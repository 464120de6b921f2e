"""``rooflab measure``: measure this machine, time a model and calibrate, import llama.cpp
benchmark output. The lead's CLI registers ``add_measure_parser`` and dispatches to
``run_measure``; RooflabErrors propagate to its one-line handler."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TYPE_CHECKING, Any

from rooflab.core.cli.args import int_in, int_list
from rooflab.core.cli.calibrate import add_calibrate_parser, run_calibrate
from rooflab.core.cli.host_experts import add_host_experts_parser, run_host_experts
from rooflab.core.errors import Cancelled, MeasurementError
from rooflab.core.io import presets
from rooflab.core.jobs import CancelToken, Progress
from rooflab.core.values.measured import ALL_LAYERS, MAX_PLAN_REPEATS, MAX_PLAN_STEPS, MAX_THREADS
from rooflab.core.values.workload import MAX_BATCH, MAX_TOKENS, Workload, runnable

if TYPE_CHECKING:
    from rooflab.core.measure.workflow import Calibrated

GB = 1e9


def add_measure_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``measure machine``, ``measure model`` and ``measure import`` to ``subparsers``."""
    measure = subparsers.add_parser("measure", help="measure this machine or time a model, then calibrate")
    sub = measure.add_subparsers(dest="measure_command", metavar="{machine,model,calibrate,import,server,host-experts}")
    sub.required = True

    p = sub.add_parser("machine", help="memory bandwidth, matmul peaks and an empirical roofline")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps (default cpu)")
    p.add_argument("--threads", type=int_in(1, MAX_THREADS), default=None, help="CPU threads (default: torch's choice)")
    p.add_argument("--quick", action="store_true", help="fewer repeats, no roofline")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--no-save", action="store_true", help="do not keep the result as the 'measured' machine")
    p.add_argument("--replace", action="store_true",
                   help="keep the result even when it falls far short of the run kept before (this machine "
                        "is slower now for good: fewer cores, another power setting)")

    p = sub.add_parser("model", help="time prefill, decode and batched decode; fit the efficiency")
    p.add_argument("model", metavar="MODEL", help="a .gguf file, model folder, config.json or catalogue key")
    p.add_argument("--engine", choices=("llamacpp", "llama-bench", "torch"), default=None,
                   help="what runs the model (default: llamacpp for a GGUF or catalogue entry, torch for "
                        "a Hugging Face folder or config.json)")
    p.add_argument("--weights", metavar="FORMAT", default=None,
                   help="weight format of a config-defined model for llama.cpp (q4_k_m, q8_0, ...)")
    p.add_argument("--synthetic", action="store_true",
                   help="llama.cpp: time a random-weight GGUF of the tensor table even for a GGUF file")
    p.add_argument("--threads", type=int_in(1, MAX_THREADS), default=None,
                   help="CPU threads (default: the engine's choice)")
    p.add_argument("--prompts", type=int_list(1, MAX_TOKENS), default=None,
                   help="prompt lengths (default: llamacpp 64,256,512; llama-bench 512; torch 1,16,64,256,1024)")
    p.add_argument("--depths", type=int_list(0, MAX_TOKENS), default=None,
                   help="llama.cpp: tokens already cached before timing generation (default 0,512,2048)")
    p.add_argument("--contexts", type=int_list(0, MAX_TOKENS), default=None,
                   help="contexts of the batched sweep (default: llamacpp 512, torch 2,256)")
    p.add_argument("--batches", type=int_list(1, MAX_BATCH), default=None,
                   help="batch sizes of the batched sweep (default: llamacpp 1,2,4,8; torch 1,2,4,8,16)")
    p.add_argument("--repeats", type=int_in(1, MAX_PLAN_REPEATS), default=3,
                   help="runs of each point, best and median kept (default 3)")
    p.add_argument("--steps", type=int_in(1, MAX_PLAN_STEPS), default=None,
                   help="decode steps timed at each depth or after each prompt (default: llamacpp 16, torch 8)")
    p.add_argument("--experiments", default="prefill,decode,batch",
                   help="any of prefill,decode,batch (default: all three)")
    p.add_argument("--kv-type", default="f16", help="llama.cpp: KV cache type, f16, q8_0, q4_0, ... (default f16)")
    p.add_argument("--flash-attention", choices=("on", "off", "auto"), default="auto",
                   help="llama.cpp: flash attention, -fa (default auto)")
    p.add_argument("--gpu-layers", type=int_in(0, ALL_LAYERS), default=0,
                   help=f"llama.cpp: layers on the GPU, -ngl ({ALL_LAYERS}: all; default 0)")
    p.add_argument("--cpu-moe", type=int_in(0, ALL_LAYERS), default=0, metavar="N",
                   help="llama-bench: keep the experts of the first N layers on the CPU, -ncmoe (default 0)")
    p.add_argument("--llama-bench", metavar="PATH", default=None,
                   help="llama-bench: the binary or its folder (default: found on PATH)")
    p.add_argument("--dtype", choices=("fp32", "bf16", "fp16"), default="fp32",
                   help="torch: compute dtype (default fp32)")
    p.add_argument("--device", default="cpu", help="torch: cpu, cuda, cuda:N or mps (default cpu)")
    p.add_argument("--random-weights", action="store_true",
                   help="torch: build random weights from the config even when the folder has weights")
    p.add_argument("--include-disturbed", action="store_true",
                   help="fit points whose repeats disagreed or during which the load rose, too")
    p.add_argument("--machine", default=None,
                   help="profile to predict with (default: the measured one, measured now if missing)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-save", action="store_true", help="keep neither points nor fit")
    p.add_argument("--ops", action="store_true",
                   help="torch, llamacpp: time the prefill of each prompt and the step after it operation by "
                        "operation (torch's profiler; llama.cpp's graph node by node on the CPU, flash attention "
                        "off unless --flash-attention on), beside the prediction of each (nothing is kept)")

    add_calibrate_parser(sub)
    add_host_experts_parser(sub)
    from rooflab.core.cli.server import add_server_parser

    add_server_parser(sub)

    p = sub.add_parser("import", help="read llama-bench / llama-batched-bench output")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--model", default=None, help="the model it ran, to predict and calibrate against")
    p.add_argument("--machine", default=None, help="profile to predict with (default: the measured one)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-save", action="store_true")
    return measure


def run_measure(args: argparse.Namespace) -> int:
    """Run the ``measure`` subcommand in ``args``; returns the exit status."""
    command = getattr(args, "measure_command", None)
    handler = {"machine": _machine, "model": _model, "import": _import, "calibrate": _calibrate,
               "server": _server, "host-experts": _host_experts}.get(command or "")
    if handler is None:
        raise MeasurementError("measure needs a subcommand: machine, model, calibrate, import, server or host-experts")
    cancel = CancelToken()
    try:
        return handler(args, cancel)
    except (KeyboardInterrupt, Cancelled):
        cancel.cancel()
        print("rooflab: measurement cancelled", file=sys.stderr)
        return 130


class _Status:
    """One updating status line on stderr (a plain line per step when not a terminal)."""

    def __init__(self, quiet: bool = False) -> None:
        self.tty = sys.stderr.isatty()
        self.quiet = quiet
        self.last = ""

    def __call__(self, progress: Progress) -> None:
        if self.quiet:
            return
        eta = progress.eta_seconds
        line = f"[{progress.fraction or 0.0:4.0%}] {progress.message}" + (f"  (~{eta:.0f} s left)" if eta else "")
        if self.tty:
            print(f"\r{line[:78]:<78}", end="", file=sys.stderr, flush=True)
        elif progress.step != self.last:
            print(line, file=sys.stderr)
        self.last = progress.step

    def done(self) -> None:
        if self.tty and not self.quiet:
            print(file=sys.stderr)


def _machine(args: argparse.Namespace, cancel: CancelToken) -> int:
    from rooflab.core.measure.machine.benchmark import MachinePlan, measure_machine_blocking
    from rooflab.core.measure.workflow import keep_machine_run

    plan = MachinePlan(device=args.device, threads=args.threads, repeats=3 if args.quick else 5,
                       experiments=("bandwidth", "matmul") if args.quick else ("bandwidth", "matmul", "roofline"))
    status = _Status()
    run = measure_machine_blocking(plan, cancel, on_progress=status)
    status.done()
    if not args.json:
        _print_machine_run(run)
    profile = keep_machine_run(run, keep=not args.no_save, replace=args.replace)     # disturbed: one line
    if args.json:
        _print_json({"profile": profile.to_dict(), "measurement": run.to_dict()})
        return 0
    print(f"  profile: B {profile.bandwidth / GB:.1f} GB/s, default dtype {profile.default_dtype}"
          + ("" if args.no_save else " (saved as machine 'measured')"))
    return 0


def _print_machine_run(run: Any) -> None:
    """Each figure as the median of its runs, with the fastest and the spread beside it."""
    print(f"This machine, measured ({run.device_name}): {run.threads} threads, torch {run.torch_version}, "
          f"{run.seconds:.0f} s")
    for r in run.bandwidth:
        print(f"  bandwidth {r.kernel:<6} median {r.median / GB:7.1f} GB/s  best {r.best / GB:7.1f} GB/s  "
              f"spread {r.spread:4.0%} ({r.repeats} runs, {r.buffer_bytes >> 20} MiB buffers)")
    for m in run.matmul:
        print(f"  matmul {m.dtype:<5} median {m.median / 1e9:8.1f} GFLOP/s  best {m.best / 1e9:8.1f} GFLOP/s  "
              f"spread {m.spread:4.0%} ({m.repeats} runs, {m.size}x{m.size})")
    if run.roofline:
        print(f"  roofline ({run.roofline[0].dtype}, k = n = {run.roofline[0].k}): m, FLOP/byte, GFLOP/s")
        for s in run.roofline:
            print(f"    {s.m:>5} {s.intensity:9.2f} {s.achieved / 1e9:9.1f}")
    if run.unsteady:
        print(f"  unsteady: {run.unsteady}")


def _calibrate(args: argparse.Namespace, cancel: CancelToken) -> int:
    return run_calibrate(args, cancel, _Status())


def _server(args: argparse.Namespace, cancel: CancelToken) -> int:
    from rooflab.core.cli.server import run_server

    return run_server(args, cancel)


def _reference_machine(name: str | None, device: str, cancel: CancelToken) -> Any:
    """The profile predictions are compared with: --machine, else the stored measured one,
    else a quick measurement of this machine now (kept for next time)."""
    from rooflab.core.io.presets import load_machine
    from rooflab.core.measure.machine.benchmark import MachinePlan, measure_machine_blocking
    from rooflab.core.measure.workflow import keep_machine_run

    if name:
        return load_machine(name)
    stored = presets.load_measured_machine()
    if stored is not None:
        return stored
    print("no measured machine yet: measuring this one first (bandwidth and matmul peaks)", file=sys.stderr)
    status = _Status()
    run = measure_machine_blocking(MachinePlan(device=device, repeats=3, experiments=("bandwidth", "matmul")),
                                   cancel, on_progress=status)
    status.done()
    return keep_machine_run(run)


def _machine_or_why(name: str | None, device: str, cancel: CancelToken) -> tuple[Any, str]:
    """(``_reference_machine``, "") or, when this machine's measurement was judged disturbed and
    set aside, (None, why): the model is timed all the same, without a ceiling or a fit (it exited
    2 having timed nothing)."""
    try:
        return _reference_machine(name, device, cancel), ""
    except MeasurementError as exc:
        if name or "disturbed" not in str(exc):
            raise
        return None, str(exc)


def _host_experts(args: argparse.Namespace, cancel: CancelToken) -> int:
    """``measure host-experts`` against this machine as measured (measured first if it is not)."""
    status = _Status()
    try:
        return run_host_experts(args, _reference_machine(None, "cpu", cancel), cancel, on_progress=status)
    finally:
        status.done()


def _model(args: argparse.Namespace, cancel: CancelToken) -> int:
    from rooflab.core.jobs import run_job
    from rooflab.core.measure.engines.child_job import EngineCrashed
    from rooflab.core.measure.engines.engine import default_engine
    from rooflab.core.measure.workflow import after_engine_run, keep_unfinished, unrepeated

    engine = args.engine or default_engine(args.model)
    if engine != "torch" and args.flash_attention == "off":
        runnable(Workload(kv_type=args.kv_type, flash_attention=False))   # what llama.cpp would refuse, said first
    model = _model_to_time(engine, args)          # a file that is not there is said before any timing
    machine, unmeasured = _machine_or_why(args.machine, args.device, cancel)
    if unmeasured:
        if args.ops:
            raise MeasurementError(unmeasured)
        print(f"rooflab: warning: {unmeasured}; timing the model all the same, without a ceiling or a fit",
              file=sys.stderr)
    status = _Status()
    if args.ops:                # operation by operation (cli.measure_ops)
        from rooflab.core.cli.measure_ops import run_measure_ops

        code = run_measure_ops(args, engine, model, machine, cancel, status)
        status.done()
        return code
    try:
        run = run_job(_engine_job(engine, args, model, cancel), status)
    except EngineCrashed as exc:
        # the engine died in its own process: one line (exit 2), its points kept unfitted
        status.done()
        if exc.points and args.no_save:
            raise MeasurementError(f"{exc.head}; with --no-save none is kept") from exc
        if exc.run is not None:
            reason = keep_unfinished(exc.run, machine, source=str(args.model))
            if reason:
                print(f"rooflab: warning: could not keep the points measured before: {reason}", file=sys.stderr)
        raise
    status.done()
    if machine is None:         # no trusted profile of this machine: the times alone
        return _print_unfitted(run, None, args, NO_PROFILE)
    reason = unrepeated(run.points)
    if reason:                  # timed once: kept and shown, not fitted
        return _print_unfitted(run, machine, args, reason)
    done = after_engine_run(run, machine, source=str(args.model), keep=not args.no_save,
                            include_disturbed=args.include_disturbed)
    _warn_not_kept(done)
    cal = done.calibration
    if args.json:
        _print_json({"model": run.label, "model_key": done.model_key, "engine": run.engine,
                     "settings": run.settings.to_dict(), "machine": machine.name, "machine_key": done.machine_key,
                     "measurement": run.record(), "calibration": cal.to_dict(),
                     "accuracy_out_of_sample": {k: a.to_dict() for k, a in done.accuracy.items()},
                     "engine_calibration": done.engine_calibration.describe() if done.engine_calibration else None,
                     "gaps": [dataclasses.asdict(g) for g in done.gaps]})
        return 0
    print(f"{run.label}: {run.settings.label} (key {done.model_key})")
    _print_points(cal)
    for p in run.points:
        if p.disturbed and p not in cal.points:
            print(f"  ! {p.kind} prompt {p.prompt} context {p.context} batch {p.batch}: "
                  f"{p.seconds * 1e3:.2f} ms, left out ({p.disturbed})")
    _print_fit(cal, machine)
    print("  what sits between the ceiling and the measurement:")
    for g in done.gaps:
        mark = "*" if g.applies else "-"
        share = f" ({g.share_text})" if g.share_text else ""
        print(f"   {mark} {g.contributor}{share}. {g.evidence}")
    _print_accuracy(done)
    for note in done.notes + cal.notes:
        print(f"  note: {note}")
    return 0


NO_PROFILE = ("this machine has no trusted profile, so there is no ceiling to set the times against and "
              "nothing to fit them to; measure it when it is quieter ('rooflab measure machine'), then time the "
              "model again, or compare with a preset's ceiling (--machine)")


def _print_unfitted(run: Any, machine: Any, args: argparse.Namespace, reason: str) -> int:
    """A run with nothing to fit (``workflow.unrepeated``; ``machine`` None: no profile of this
    machine to fit to): its points, kept unless --no-save (with a machine to keep them for), each
    beside its ceiling where there is one, and why nothing was fitted."""
    from rooflab.core.calibration.calibrate import predict_points
    from rooflab.core.measure.workflow import keep_unfinished

    kept = "" if args.no_save or machine is None else keep_unfinished(run, machine, source=str(args.model))
    if kept:
        print(f"rooflab: warning: could not keep the measurement: {kept}", file=sys.stderr)
    ceiling = (None if machine is None else
               [float(c) for c in predict_points(run.spec, machine, run.points, kv_type=run.kv_type, dtype=run.dtype)])
    if args.json:
        _print_json({"model": run.label, "engine": run.engine, "settings": run.settings.to_dict(),
                     "machine": None if machine is None else machine.name, "measurement": run.record(),
                     "calibration": None, "not_fitted": reason, "ceiling_seconds": ceiling})
        return 0
    print(f"{run.label}: {run.settings.label}")
    print(f"  {'pass':<8} {'prompt':>6} {'context':>7} {'batch':>5} {'measured ms':>11}"
          + ("" if ceiling is None else f" {'ceiling ms':>10}"))
    for i, p in enumerate(run.points):
        print(f"  {p.kind:<8} {p.prompt:>6} {p.context:>7} {p.batch:>5} {p.seconds * 1e3:>11.2f}"
              + ("" if ceiling is None else f" {ceiling[i] * 1e3:>10.2f}"))
    kept_text = "" if args.no_save or kept or machine is None else "; the points are kept"
    print(f"  not fitted: {reason}{kept_text}")
    return 0


def _print_accuracy(done: Calibrated) -> None:
    """The machine's engine calibration against these points (accuracy: it never saw them)."""
    found = done.engine_calibration
    if found is None:
        print("  accuracy: no calibration of this machine for these settings yet ('rooflab measure calibrate')")
    elif not done.accuracy:
        print(f"  accuracy: not scored (this model was one of the calibration's: {found.describe()})")
    else:
        print(f"  accuracy of {found.describe()}, which never saw this model:")
        for phase, acc in done.accuracy.items():
            print(f"    {phase:<8} median {acc.median:6.1%}   worst {acc.worst:6.1%}   ({acc.count} points)")


def _model_to_time(engine: str, args: argparse.Namespace) -> Any:
    """What ``engine`` times, read now: torch's source (a folder, a config.json or a model's
    shapes), else the ModelSpec of the file or catalogue entry."""
    if engine == "torch":
        from rooflab.core.measure.engines.torch.models import resolve_source

        return resolve_source(args.model, random_weights=args.random_weights)
    from rooflab.core.io import load_model

    return load_model(args.model, weights=args.weights)


def _engine_job(engine: str, args: argparse.Namespace, model: Any, cancel: CancelToken) -> Any:
    """The measurement generator for ``engine`` with the command line's sweep and settings;
    ``model``: what ``_model_to_time`` read."""
    from rooflab.core.measure.engines import engine as engines

    experiments = tuple(e.strip() for e in args.experiments.split(",") if e.strip())
    if engine == "torch":
        from rooflab.core.measure.engines.torch.timing import ModelPlan

        plan = ModelPlan(dtype=args.dtype, device=args.device, threads=args.threads, repeats=args.repeats,
                         experiments=experiments, random_weights=args.random_weights,
                         **_given(args, prompts="prompts", contexts="contexts", batches="batches",
                                  decode_steps="steps"))
        return engines.measure_in_torch(model, plan, cancel)
    spec = model
    flash = {"on": True, "off": False, "auto": None}[args.flash_attention]
    if engine == "llamacpp":
        from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan

        if args.cpu_moe:
            # llama-cpp-python 0.3.36 leaves llama.cpp's tensor buffer overrides unexposed
            raise MeasurementError("--cpu-moe needs llama.cpp's own tools here: use --engine llama-bench")
        lplan = LlamaCppPlan(threads=args.threads, gpu_layers=args.gpu_layers, flash_attention=flash,
                             cache_type_k=args.kv_type, cache_type_v=args.kv_type, repeats=args.repeats,
                             experiments=experiments,
                             **_given(args, prompts="prompts", depths="depths", contexts="contexts",
                                      batches="batches", gen_tokens="steps"))
        return engines.measure_in_llamacpp(spec, args.model, lplan, cancel, synthetic=args.synthetic)
    from rooflab.core.measure.engines.llamabench.plan import (
        EngineOptions,
        find_tools,
        sweep_plans,
        tools_flash_attention,
    )

    options = EngineOptions(threads=args.threads, gpu_layers=args.gpu_layers, cpu_moe=args.cpu_moe,
                            flash_attention=tools_flash_attention(flash, args.kv_type),
                            cache_type_k=args.kv_type, cache_type_v=args.kv_type)
    bench, batched = sweep_plans(model=str(args.model), experiments=experiments, repetitions=args.repeats,
                                 options=options, **_given(args, prompts="prompts", depths="depths", gen="steps",
                                                           contexts="contexts", batches="batches"))
    if bench is None:
        raise MeasurementError("llama-bench times prompts and generation: add prefill or decode to --experiments")
    binary, batched_binary, warning = find_tools(args.llama_bench, batched=batched is not None)
    if warning:
        print(f"rooflab: warning: {warning}", file=sys.stderr)
    return engines.measure_in_llamabench(spec, args.model, bench, batched if batched_binary else None,
                                         binary=str(binary), batched_binary=str(batched_binary or ""),
                                         synthetic=args.synthetic, cancel=cancel)


def _given(args: argparse.Namespace, **fields: str) -> dict[str, Any]:
    """Plan fields for the options the user gave (the rest keep each plan's own defaults)."""
    return {field: getattr(args, option) for field, option in fields.items() if getattr(args, option) is not None}


def _warn_not_kept(done: Calibrated) -> None:
    if done.keep_error:
        print(f"rooflab: warning: could not keep the measurement: {done.keep_error}", file=sys.stderr)


def _print_points(cal: Any) -> None:
    print(f"  {'pass':<8} {'prompt':>6} {'context':>7} {'batch':>5} {'measured ms':>11} {'spread':>7} "
          f"{'ceiling ms':>10} {'calibrated':>10} {'fit error':>9}")
    for p, before, after in zip(cal.points, cal.predicted_before, cal.predicted_after, strict=True):
        print(f"  {p.kind:<8} {p.prompt:>6} {p.context:>7} {p.batch:>5} {p.seconds * 1e3:>11.2f} "
              f"{p.spread:>7.1%} {before * 1e3:>10.2f} {after * 1e3:>10.2f} "
              f"{abs(after - p.seconds) / p.seconds:>9.1%}")


def _print_fit(cal: Any, machine: Any) -> None:
    eff = cal.efficiency
    print(f"  fitted ({', '.join(cal.fitted) or 'nothing'}): bandwidth {cal.effective_bandwidth / GB:.1f} of "
          f"{machine.bandwidth / GB:.1f} GB/s (x{eff.bandwidth:.2f}), compute {cal.effective_flops / 1e9:.0f} of "
          f"{cal.peak_flops / 1e9:.0f} GFLOP/s (x{eff.compute:.2f}), overhead {eff.step_overhead * 1e3:.2f} ms, "
          f"kv_read_factor {eff.kv_read_factor:.2f}")
    print("  |error| against the ceiling -> fit quality of this model's own fit (in sample, not accuracy):")
    for kind in ("prefill", "decode", "batch", "all"):
        if kind in cal.before:
            b, a = cal.before[kind], cal.after[kind]
            print(f"    {kind:<8} median {b.median:6.1%} -> {a.median:6.1%}   worst {b.worst:6.1%} -> {a.worst:6.1%}")


def _import(args: argparse.Namespace, cancel: CancelToken) -> int:
    from rooflab.core.io.llamabench import read_benchmark
    from rooflab.core.measure.workflow import after_import

    bench = read_benchmark(args.file)
    for warning in bench.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    out: dict[str, Any] = {"file": bench.path, "tool": bench.tool, "models": list(bench.models),
                           "series": {k: [p.to_dict() for p in v] for k, v in bench.series.items()}}
    if args.model:
        from rooflab.core.io import load_model
        from rooflab.core.io.presets import load_machine

        spec = load_model(args.model)
        machine = load_machine(args.machine) if args.machine else presets.load_measured_machine()
        if machine is None:
            raise MeasurementError("no machine to predict with: pass --machine or run 'rooflab measure machine'")
        done = after_import(bench, spec, machine, source=str(args.model), keep=not args.no_save)
        _warn_not_kept(done)
        cal = done.calibration
        out["calibration"] = cal.to_dict()
        if not args.json:
            print(f"{bench.tool}: {len(bench.points)} points for {spec.name} on {machine.name}")
            _print_points(cal)
            _print_fit(cal, machine)
    if args.json:
        _print_json(out)
    elif not args.model:
        print(f"{bench.tool}: {len(bench.points)} points ({', '.join(bench.models) or 'model not named'})")
        for label, points in bench.series.items():
            print(f"  {label}")
            for p in points:
                print(f"    {p.kind:<8} prompt {p.prompt:>6} context {p.context:>7} batch {p.batch:>4} "
                      f"{p.seconds * 1e3:10.2f} ms  {p.rate:10.1f} tok/s")
    return 0


def _print_json(obj: Any) -> None:
    from rooflab.core.cli.output import print_json

    print_json(obj)
