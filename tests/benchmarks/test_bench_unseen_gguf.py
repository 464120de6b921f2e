"""``benchmarks/accuracy/bench_unseen_gguf.py``'s pure parts on a tiny generated GGUF: a llama-bench test
priced from a calibration through the expected path, and the table. No llama-bench, no timing:
nothing here depends on the machine's speed or load."""

from __future__ import annotations

import dataclasses
from types import ModuleType

import pytest

from rooflab.core.calibration.models import calibration_models
from rooflab.core.io.gguf import read_gguf
from rooflab.core.io.hf import spec_from_config
from rooflab.core.measure.engines.llamacpp.plan import BenchTest
from rooflab.core.predict.expected import expected_for
from rooflab.core.values.calibration import EngineCalibration, Rates
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import MeasuredPoint
from tests.factories.calibration_points import calibration_plan
from tests.factories.llm_configs import llama_config
from tests.factories.scripts import load_script
from tests.factories.synthetic import write_synthetic_gguf_blocking

MACHINE = MachineProfile(name="box", bandwidth=100e9, peak_flops={"fp32": 1e12}, memory=64e9, default_dtype="fp32",
                         kind="cpu", cores=2, key="box")


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench_unseen_gguf")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny llama in Q8_0, written as a random-weight GGUF and read back as a user opens it."""
    config = llama_config(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                          intermediate_size=256, vocab_size=512)
    spec = spec_from_config(config, weights="q8_0", name="tiny")
    return read_gguf(write_synthetic_gguf_blocking(spec, tmp_path_factory.mktemp("gguf") / "tiny.gguf"))


def _rates(scale: float = 1.0, pass_seconds: float = 0.0) -> Rates:
    b, c = MACHINE.bandwidth * scale, MACHINE.flops() * scale
    classes = ("q8", "float")
    return Rates(bandwidth=dict.fromkeys(classes, b), prefill_flops=dict.fromkeys(classes, c),
                 decode_flops=dict.fromkeys(classes, c), cache_bandwidth=b, pass_seconds=pass_seconds)


def _cal(central: Rates, replicates: tuple[Rates, ...] = ()) -> EngineCalibration:
    return EngineCalibration(machine_key="box", machine_name="box", engine_key="llama.cpp-cpu-t2-kv-f16",
                             engine_label="llama.cpp, cpu, 2 threads", settings={}, date="2026-12-01T00:00:00",
                             models=("a", "b"), machine_bandwidth=MACHINE.bandwidth, machine_flops=MACHINE.flops(),
                             central=central, replicates=replicates)


TESTS = (BenchTest(n_prompt=512), BenchTest(n_gen=128), BenchTest(n_prompt=2048),
         BenchTest(n_gen=128, n_depth=2048))


def test_the_built_in_models_are_real_sizes_the_calibration_never_saw(bench):
    seen = [m.spec() for m in calibration_models("llamacpp", thorough=True)]
    for key in bench.REAL_SHAPES:
        spec = bench.unseen_spec(key, "q4_k_m")
        assert spec.vocab >= 128_000 and spec.params_total > 0.2e9
        assert bench.seen_shape(spec, seen) == ""
    # a calibration model's own shape is refused as "unseen"
    qwen = next(m for m in calibration_models("llamacpp", thorough=True) if m.key.startswith("qwen3-0.6b"))
    assert bench.seen_shape(qwen.spec(), seen) == qwen.spec().name


def test_a_fixed_cost_per_pass_bounds_generation(bench, tiny):
    """Rates at the machine's peaks and 10 ms a pass: a tiny model's step is the 10 ms plus
    microseconds of streaming (0.5 MB at 100 GB/s), so tg128 runs at 100 tokens/s."""
    expected = expected_for(tiny, MACHINE, _cal(_rates(pass_seconds=0.01)))
    central, low, high = bench.expected_rate(expected, tiny, BenchTest(n_gen=128), threads=2)
    assert central == pytest.approx(100.0, rel=2e-3) and low == high == central      # no replicates: no band


def test_half_the_rates_halve_every_test_and_the_band_holds_the_centre(bench, tiny):
    """Every rate halved (no fixed cost, the clocks' max): every pass takes twice as long."""
    full = expected_for(tiny, MACHINE, _cal(_rates()))
    half = expected_for(tiny, MACHINE, _cal(_rates(0.5), replicates=(_rates(0.4), _rates(0.6))))
    for test in TESTS:
        rate = bench.expected_rate(full, tiny, test)[0]
        central, low, high = bench.expected_rate(half, tiny, test)
        assert central == pytest.approx(rate / 2, rel=1e-9)
        assert low < central < high
    # physics: a deeper cache and a longer prompt cost more per token
    assert bench.bench_rate(tiny, full.machine, TESTS[3]) < bench.bench_rate(tiny, full.machine, TESTS[1])


def test_rows_and_table(bench, tiny):
    expected = expected_for(tiny, MACHINE, _cal(_rates(pass_seconds=0.01)))
    # llama-bench's tg128: 128 tokens in 1.25 s on average (102.4 t/s), sd 0.05 s = 4.096 t/s
    point = MeasuredPoint(kind="decode", prompt=1, context=63, batch=1, seconds=1.25 / 128, stdev=0.05 / 128,
                          repeats=5, test="tg128")
    row = bench.row_for(expected, tiny, BenchTest(n_gen=128), point, threads=2)
    assert row.measured == pytest.approx(102.4) and row.stdev == pytest.approx(4.096)
    assert row.error == pytest.approx(row.expected / 102.4 - 1) and row.met and row.target == 0.10
    slow = bench.Row(test=BenchTest(n_prompt=512), expected=80.0, low=70.0, high=90.0, measured=100.0, stdev=2.0)
    assert not slow.met and slow.target == 0.15
    lines = bench.table([row, slow])
    assert lines[0].split() == ["test", "expected", "t/s", "[band]", "llama-bench", "t/s", "error", "target", "result"]
    assert lines[1].startswith("tg128 ") and lines[1].endswith("10%  met") and "102.40 ±   4.10" in lines[1]
    assert lines[2].split() == ["pp512", "80.00", "[", "70.00", "..", "90.00]", "100.00", "±", "2.00", "-20.0%",
                                "15%", "NOT", "met"]
    assert "512-entry vocabulary" in bench.model_line(tiny) and "B parameters" in bench.model_line(tiny)


def test_a_test_run_before_and_after_the_calibration_is_met_halfway(bench, tiny):
    """llama-bench's pp512 at 0.1 s before the calibration and 0.3 s after: the figure is the
    mean time, 0.2 s (2,560 t/s, not the 3,413 of the mean rate), with the two runs' standard
    deviation as its spread and their repetitions counted; nothing before leaves the run after
    as it is; the line says how far the figure moved."""
    before = MeasuredPoint(kind="prefill", prompt=512, context=0, batch=1, seconds=0.1, stdev=0.002, repeats=5,
                           test="pp512", source="llama-bench")
    after = MeasuredPoint(kind="prefill", prompt=512, context=0, batch=1, seconds=0.3, stdev=0.004, repeats=5,
                          test="pp512", source="llama-bench")
    both = bench.bracketed(before, after)
    assert both.seconds == pytest.approx(0.2) and both.rate == pytest.approx(2560.0)
    assert both.stdev == pytest.approx(2 ** 0.5 / 10)          # the standard deviation of 0.1 and 0.3
    assert both.repeats == 10 and both.best == pytest.approx(0.1)
    assert bench.bracketed(None, after) is after
    row = bench.row_for(expected_for(tiny, MACHINE, _cal(_rates())), tiny, BenchTest(n_prompt=512), both)
    assert row.measured == pytest.approx(2560.0) and row.stdev == pytest.approx(2560.0 * 0.1414213 / 0.2)
    line = bench.drift_line(BenchTest(n_prompt=512), before.rate, after.rate)
    assert line.split() == ["pp512", "5120.00", "before,", "1706.67", "after", "the", "calibration", "(-66.7%)"]
    with pytest.raises(Exception, match="different tests"):
        bench.bracketed(before, dataclasses.replace(after, prompt=2048, test="pp2048"))


def test_the_control_is_a_calibration_model_of_the_unseen_ones_kind(bench):
    """The control (llama-bench on a model the fit saw) is the dense one mostly in the unseen
    model's format class nearest it in bytes: for Llama-3.2-1B in Q4_K_M (0.73 GB), Qwen3-1.7B
    (1.02 GB), not Gemma 3 1B (0.97 GB), whose "Q4_K_M" file is mostly Q8_0 (widths not
    multiples of 256), nor the 2 B mixture of experts."""
    seen = [m.spec() for m in calibration_models("llamacpp", thorough=True)]
    llama = bench.unseen_spec("llama-3.2-1b", "q4_k_m")
    assert "qwen3-1.7b" in bench.control_spec(llama, seen, None).name
    assert "wide-q4_k_m" in bench.control_spec(llama, seen[:4], None).name       # the quick set
    assert "gemma3" in bench.control_spec(llama, seen, "gemma3").name
    assert bench.control_spec(llama, seen, "no-such-model") is None
    unseen = [bench.Row(test=BenchTest(n_gen=128), expected=30.0, low=30.0, high=30.0, measured=40.0, stdev=1.0)]
    control = [bench.Row(test=BenchTest(n_gen=128), expected=24.0, low=24.0, high=24.0, measured=30.0, stdev=1.0)]
    assert bench.relative(unseen, control) == "tg128 -6.2%"          # 0.75 / 0.8 - 1


def test_a_refit_prices_a_kept_run_again(bench, tmp_path, capsys):
    """``--refit FILE`` fits the points a ``--json`` run kept and prices its tests again. Points
    made by known rates through the app's own path (the four quick models) and llama-bench rows
    equal to what those rates give Llama-3.2-1B: the refit finds the rates again, so every test
    comes out within a few percent and meets its target (within 5 %: the fit's form does not hold
    the path's exactly, and these points fit it to 15 % in sample)."""
    import json

    from rooflab.core.calibration.engine_calibration import ModelPoints, predicted_seconds
    from rooflab.core.values.measured import EngineSettings

    settings = EngineSettings(engine="llama.cpp", version="test", threads=2, flash_attention=True,
                              batch_size=2048, ubatch_size=512)
    truth = Rates(bandwidth={"k-quant": 30e9, "q8": 36e9}, prefill_flops={"k-quant": 220e9, "q8": 190e9},
                  decode_flops={"k-quant": 150e9, "q8": 140e9}, cache_bandwidth=6e9, pass_seconds=4e-4,
                  overlap=1.0, batch_flops={"k-quant": 120e9, "q8": 110e9})
    machine = MachineProfile(name="box", bandwidth=40e9, peak_flops={"fp32": 200e9, "bf16": 400e9}, memory=64e9,
                             default_dtype="fp32", kind="cpu", cores=2, key="measured")
    plan = calibration_plan(settings)
    points = {}
    for m in calibration_models("llamacpp"):
        model = ModelPoints(key=m.key, spec=m.spec(), points=tuple(plan))
        seconds = predicted_seconds(model, machine, truth)
        points[m.spec().name] = [dataclasses.replace(p, seconds=float(s)).to_dict()
                                 for p, s in zip(plan, seconds, strict=True)]
    llama = bench.unseen_spec("llama-3.2-1b", "q4_k_m")
    made = expected_for(llama, machine, _cal(truth))
    rows = [{"test": t.label, "measured": bench.expected_rate(made, llama, t, 2)[0], "stdev": 1.0}
            for t in TESTS]
    run = {"machine": machine.to_dict(), "points": points, "model": "llama-3.2-1b", "weights": "q4_k_m",
           "threads": 2, "rows": rows,
           "calibration": {"engine_label": "llama.cpp, test", "settings": settings.to_dict()}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    assert bench.refit(str(path)) == 0
    out = capsys.readouterr().out
    assert "targets missed: none" in out
    for t in TESTS:
        line = next(x for x in out.splitlines() if x.startswith(t.label + " "))
        assert abs(float(line.split()[-3].rstrip("%"))) < 5.0, line


def test_the_cache_a_deep_step_reads_is_told_per_query_head_and_per_byte(bench):
    """tg128 @ d2048 at 10 t/s beside tg128 at 20: the cache adds 50 ms a step. Llama-3.2-1B's
    cache holds 32 KiB a token (16 layers x 8 heads x 2 x 64 values x 2 bytes) read by 512 query
    heads, so 2,048 more cached tokens are 64 MiB and 1,048,576 pairs: 47.7 ns a pair, 1.3 GB/s."""
    llama = bench.unseen_spec("llama-3.2-1b", "q4_k_m")
    rows = [bench.Row(test=BenchTest(n_gen=128), expected=20.0, low=20.0, high=20.0, measured=20.0, stdev=0.0),
            bench.Row(test=BenchTest(n_gen=128, n_depth=2048), expected=12.5, low=12.5, high=12.5, measured=10.0,
                      stdev=0.0)]
    assert bench.depth_cost(llama, rows) == ("tg128 @ d2048 beyond tg128, a step: llama-bench 50.0 ms "
                                             "(48 ns a pair, 1.3 GB/s), expected 30.0 ms (29 ns a pair, 2.2 GB/s)")
    assert bench.depth_cost(llama, rows[:1]) == ""


def test_the_calibration_models_deep_steps_are_told_per_pair_beside_the_unseen_ones(bench):
    """A model stepping 20 ms at 3 cached tokens and 70 ms at 2,051 (Llama-3.2-1B's shape: 2,048
    more tokens walked by 512 query heads, 1,048,576 pairs) spent 50 ms beyond, 48 ns a pair; a
    batched or disturbed step is not a single sequence's walk, and a model with one step says nothing."""
    llama = bench.unseen_spec("llama-3.2-1b", "q4_k_m")

    def step(context: int, seconds: float, **more) -> MeasuredPoint:
        return MeasuredPoint(kind="decode", prompt=1, context=context, batch=more.pop("batch", 1), seconds=seconds,
                             **more)

    points = [step(3, 0.020), step(2051, 0.070), step(4096, 0.5, batch=4), step(4096, 0.9, disturbed=True)]
    assert bench.model_walks([("llama", llama, points), ("one step", llama, points[:1])]) == [
        "llama (head width 64): 50.0 ms at 2,051 cached tokens beyond 3, 48 ns a pair"]


def _record(rows: list[dict]) -> dict:
    """A run's record as ``--json`` writes it (no points: the tests priced are not at depth)."""
    return {"date": "2026-12-07 05:05 UTC", "argv": ["--model", "gemma-3-270m", "--after-only"],
            "load_before": "8.62 6.99 4.76", "load_after": "2.10 2.00 1.90", "seconds": 2400,
            "calibration_seconds": 2300,
            "llama_bench": {"threads": 2, "repetitions": 2, "batch": 2048, "ubatch": 512, "when": "after"},
            "model": "gemma-3-270m", "weights": "q4_k_m", "model_line": "Gemma-3-270M (Q4_K_M): 0.27 B parameters",
            "calibration_models": [{"name": "a", "vocab": 16000}, {"name": "b", "vocab": 151936}],
            "machine": MACHINE.to_dict(), "calibration": _cal(_rates()).to_dict(), "points": {}, "threads": 2,
            "rows": rows, "control_model": "", "control_line": "", "control": [], "notes": ["a note"]}


def test_a_record_prints_as_its_run_printed_it(bench, tmp_path, capsys, monkeypatch):
    """``--from-record FILE`` prints a run's record, the way the run printed it once measured:
    its settings, load and time, the machine and the calibration (fitted terms, its own
    out-of-sample scores), the rows and the targets missed; with llama-bench run before and
    after the calibration, how far each test moved. The docs print the committed records so."""
    import json

    rows = [{"test": "pp512", "expected": 80.0, "low": 70.0, "high": 90.0, "measured": 100.0, "stdev": 2.0,
             "before": None, "after": 100.0},
            {"test": "tg128", "expected": 20.0, "low": 19.0, "high": 21.0, "measured": 20.5, "stdev": 0.5,
             "before": None, "after": 20.5}]
    lines = bench.render(_record(rows))
    assert lines[0] == "run 2026-12-07 05:05 UTC: bench_unseen_gguf.py --model gemma-3-270m --after-only"
    assert "load average before: 8.62 6.99 4.76; after: 2.10 2.00 1.90; 2400 s in all" in lines[1]
    assert "2 repetitions, after the calibration" in lines[2]
    assert lines[3] == "machine box: 100.0 GB/s, 4000 GFLOP/s int8"      # a CPU: its int8 path, 4 x its FP32
    assert "  fitted terms (16th-84th percentile over resampled fits):" in lines
    assert "    accuracy, leave one model out:" in lines          # the calibration's own scores
    assert "  calibration models: a (16,000), b (151,936)" in lines
    assert lines.index("unseen model Gemma-3-270M (Q4_K_M): 0.27 B parameters") > 3
    assert next(x for x in lines if x.startswith("pp512 ")).split()[-3:] == ["15%", "NOT", "met"]
    assert next(x for x in lines if x.startswith("tg128 ")).endswith("met")
    assert lines[-2:] == ["note: a note", "targets missed: pp512"]
    assert not any("before the calibration and its run after" in line for line in lines)
    both = [dict(r, before=r["after"] * 0.9) for r in rows]
    moved = bench.render(_record(both))
    assert "llama-bench's figure is the mean of its run before the calibration and its run after; ± is their " \
           "spread" in moved
    assert any(line.split()[:2] == ["pp512", "90.00"] and line.endswith("(+11.1%)") for line in moved)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_record(rows)))
    monkeypatch.setattr("sys.argv", ["bench_unseen_gguf.py", "--from-record", str(path)])
    assert bench.main() == 0
    assert capsys.readouterr().out.splitlines() == lines
