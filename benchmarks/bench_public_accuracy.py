"""How well do per-back-end efficiency factors, fitted to public llama-bench results, predict
machines and models the fit did not see?

Reads resources/benchmarks/llamacpp-public.json (public scoreboards and tables, each row with its
source), fits each back end's bandwidth factor (generation, tg rows) and compute factor (prompt
processing, pp rows) as the median of per-machine medians, and prints per back end: rows,
machines, the factors with their 16th-84th percentile band, and the out-of-sample median and
worst relative error of predicted tokens/s, leaving one machine out and leaving one model
(model and weight format) out. Targets, out of sample only: generation median <= 15 %,
prompt processing median <= 20 %. Runs in about a second; no measurement, no GPU.

    python benchmarks/bench_public_accuracy.py
"""

from __future__ import annotations

import math
import time

from rooflab.core.measure.public import ErrorSummary, backend_efficiency, backends, load_public, validate

TARGETS = {"tg": 0.15, "pp": 0.20}


def _pct(x: float) -> str:
    return "   n/a" if math.isnan(x) else f"{100 * x:5.1f}%"


def _err(s: ErrorSummary) -> str:
    return f"{_pct(s.median)} {_pct(s.worst)}"


def _met(s: ErrorSummary, kind: str) -> str:
    return "n/a" if math.isnan(s.median) else ("yes" if s.median <= TARGETS[kind] else "NO")


def main() -> None:
    start = time.perf_counter()
    data = load_public()
    results = {v.backend: v for v in validate(data)}
    print(f"public llama-bench results: {len(data.rows)} rows, {len(data.machines)} machines, "
          f"{len(data.sources)} sources ({data.path})")
    print("factors: median of per-machine medians [16th-84th percentile]; errors: |pred - meas| / meas, "
          "median and worst, out of sample\n")
    print(f"{'backend':8} {'rows':>4} {'mach':>4}  {'bandwidth factor':>20}  {'compute factor':>20}  "
          f"{'LOMO tg med/worst':>17} {'LOMO pp med/worst':>17}  {'LOMdl tg med/worst':>18} "
          f"{'LOMdl pp med/worst':>18}  targets tg/pp (machine, model)")
    for b in backends(data):
        e, v = backend_efficiency(b, data), results[b]
        targets = (f"{_met(v.machine_out_tg, 'tg')}/{_met(v.machine_out_pp, 'pp')}, "
                   f"{_met(v.model_out_tg, 'tg')}/{_met(v.model_out_pp, 'pp')}")
        print(f"{b:8} {e.rows:4d} {e.machines:4d}  "
              f"{e.bandwidth:5.3f} [{e.bandwidth_low:5.3f}-{e.bandwidth_high:5.3f}]  "
              f"{e.compute:5.3f} [{e.compute_low:5.3f}-{e.compute_high:5.3f}]  "
              f"{_err(v.machine_out_tg):>17} {_err(v.machine_out_pp):>17}  "
              f"{_err(v.model_out_tg):>18} {_err(v.model_out_pp):>18}  {targets}")
    print("\nLOMO: leave one machine out; LOMdl: leave one model (and weight format) out; n/a: the back end "
          "has one model, so nothing is left to fit on.")
    print(f"targets (out of sample, median): generation <= {TARGETS['tg']:.0%}, "
          f"prompt processing <= {TARGETS['pp']:.0%}")
    print(f"took {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
