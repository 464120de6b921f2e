"""``benchmarks/bench_unseen_gguf.py``'s pure parts on a tiny generated GGUF: a llama-bench test
priced from a calibration through the expected path, and the table. No llama-bench, no timing:
nothing here depends on the machine's speed or load."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from rooflab.core.io.gguf import read_gguf
from rooflab.core.io.hf import spec_from_config
from rooflab.core.measure.calibration_models import calibration_models
from rooflab.core.measure.llamacpp.plan import BenchTest
from rooflab.core.predict.expected import expected_for
from rooflab.core.values.calibration import EngineCalibration, Rates
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import MeasuredPoint
from tests.factories.llm_configs import llama_config
from tests.factories.synthetic import write_synthetic_gguf_blocking

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_unseen_gguf.py"
MACHINE = MachineProfile(name="box", bandwidth=100e9, peak_flops={"fp32": 1e12}, memory=64e9, default_dtype="fp32",
                         kind="cpu", cores=2, key="box")


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_unseen_gguf", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


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
