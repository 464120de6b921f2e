"""A CPU's published rows: the cores each ran on, the serial share of its arithmetic (Amdahl),
rows at -ngl 0 on a machine with no GPU, and rows that ran past their machine's stated peak."""

from __future__ import annotations

import dataclasses

import pytest

from rooflab.core.calibration import public, public_fit
from rooflab.core.errors import SpecError
from rooflab.core.io.catalogue import get_entry, load_entry
from rooflab.core.io.public_bench import PublicBenchmarks, PublicMachine, PublicModel, PublicRow, RowSource, parse_test
from rooflab.core.predict.clocks import prefill_pass
from rooflab.core.values.calibration import Rates
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload

CPU_TERMS = public_fit.Factors(bandwidth=0.7, cache=0.7, dense=0.8, experts=None, attention=None,
                               flash_attention=None, decode=0.8, pass_seconds=0.0, layer_seconds=2e-4,
                               overlap=1.0, serial_share=0.015)
# (cores, bandwidth, peak): a laptop, a desktop, a workstation, a server
CPUS = {"four": (4, 50e9, 0.3e12), "sixteen": (16, 80e9, 2.3e12), "thirty-two": (32, 200e9, 3.7e12),
        "sixty-four": (64, 200e9, 4.1e12)}


def _cpu(key: str, cores: int, bandwidth: float, peak: float) -> PublicMachine:
    return PublicMachine(key=key, name=key, backend="cpu", bandwidth=bandwidth, peak_fp16=peak,
                         sources=(("bandwidth", "test"), ("peak_fp16", "test")), cores=cores, kind="cpu")


def _cpu_rows(terms: public_fit.Factors, threads: tuple[int | None, ...] = (None,),
              ngl: int | None = None) -> PublicBenchmarks:
    """Rows made by pricing pp512 and tg128 of two models with ``terms`` on ``CPUS``, each at
    every -t of ``threads`` (None: llama-bench's default, all the cores)."""
    machines = tuple(_cpu(k, *v) for k, v in CPUS.items())
    rows = tuple(PublicRow(machine=m.key, model=model, weights=w, test=parse_test(test), tokens_per_second=1.0,
                           source=RowSource(url=f"https://example.org/{m.key}", threads=t, ngl=ngl))
                 for m in machines for t in threads for model, w in (("llama-2-7b", "q4_0"), ("llama-3.1-8b", "q8_0"))
                 for test in ("pp512", "tg128"))
    draft = PublicBenchmarks(path="synthetic", sources=(), machines=machines, rows=rows,
                             models=tuple(PublicModel(key=k, catalogue=k, name=k)
                                          for k in ("llama-2-7b", "llama-3.1-8b")))
    rates = terms.rates(1.0)
    return dataclasses.replace(draft, rows=tuple(
        dataclasses.replace(r, tokens_per_second=public.predict_row(draft, r, rates)) for r in rows))


def test_the_fit_finds_the_serial_share_rows_on_few_and_many_cores_were_made_with():
    """Prompts made with 1.5 % of every pass serial: 64 cores reach 1 / (1 + 0.015 x 63) = 51 %
    of 64 times a core's rate, four cores 96 % of four. The grid finds that share and the rows
    come back; rows made without one give none (the grid's first value)."""
    data = _cpu_rows(CPU_TERMS)
    fit = public.fit_groups(data)["cpu"]
    assert fit.serial_share == pytest.approx(0.015)
    assert fit.dense == pytest.approx(CPU_TERMS.dense, rel=0.02)
    for row in data.rows:
        assert public.predict_row(data, row, public.group_rates(public.fit_groups(data), "cpu")) == pytest.approx(
            row.tokens_per_second, rel=0.02), row
    flat = _cpu_rows(dataclasses.replace(CPU_TERMS, serial_share=0.0))
    assert public.fit_groups(flat)["cpu"].serial_share == 0.0


def test_a_rows_threads_set_the_cores_it_is_priced_on():
    """-t 8 on a 64-core chip: 8 cores' share of its peak, and Amdahl over 8, not 64; -t above
    the cores (hardware threads) counts the cores."""
    m = _cpu("sixty-four", *CPUS["sixty-four"])
    row = PublicRow(machine=m.key, model="llama-2-7b", weights="q4_0", test=parse_test("pp512"),
                    tokens_per_second=1.0, source=RowSource(url="https://example.org/", threads=8))
    assert public_fit.row_threads(m, row) == (8, 0.125)
    assert public_fit.row_threads(m, dataclasses.replace(row, source=RowSource(url="u", threads=128))) == (64, 1.0)
    assert public_fit.row_threads(m, dataclasses.replace(row, source=RowSource(url="u"))) == (64, 1.0)
    gpu = dataclasses.replace(m, backend="cuda", kind="gpu")
    assert public_fit.row_threads(gpu, row) == (1, 1.0)
    data = _cpu_rows(CPU_TERMS, threads=(8, None))
    rates = CPU_TERMS.rates(1.0)
    by_threads = {r.source.threads: public.predict_row(data, r, rates) for r in data.rows
                  if r.machine == "sixty-four" and r.test.name == "pp512" and r.model == "llama-2-7b"}
    # 8 cores at 1 / (1 + 0.015 x 7), 64 at 1 / (1 + 0.015 x 63)
    assert by_threads[None] / by_threads[8] == pytest.approx(8.0 * (1 + 0.015 * 7) / (1 + 0.015 * 63), rel=0.03)


def test_n_threads_reach_n_over_one_plus_s_n_minus_one_of_a_cores_rate_and_never_the_ceilings_more():
    eff = Efficiency(serial_share=0.02)
    cpu = MachineProfile(name="server", bandwidth=400e9, peak_flops={"fp32": 8e12}, memory=512e9,
                         default_dtype="fp32", kind="cpu", cores=64, efficiency=eff)
    assert cpu.compute_share(None) == pytest.approx(1 / (1 + 0.02 * 63))
    assert cpu.compute_share(8) == pytest.approx(8 / 64 / (1 + 0.02 * 7))
    assert cpu.compute_share(1) == pytest.approx(1 / 64)
    assert dataclasses.replace(cpu, efficiency=Efficiency()).compute_share(8) == pytest.approx(8 / 64)
    gpu = dataclasses.replace(cpu, kind="gpu")
    assert gpu.compute_share(8) == 1.0
    # a prompt on all 64 cores takes 1 + 0.02 x 63 times the ceiling's compute clock, never less
    entry = get_entry("llama-3.1-8b")
    assert entry is not None
    spec = load_entry(entry, "q4_0")
    w = Workload(prompt=2048)
    ceiling = prefill_pass(spec, dataclasses.replace(cpu, efficiency=Efficiency()), w, prompt=2048, context=0)
    slowed = prefill_pass(spec, cpu, w, prompt=2048, context=0)
    assert float(ceiling.compute_seconds) > float(ceiling.memory_seconds)
    assert float(slowed.seconds) == pytest.approx(float(ceiling.seconds) * (1 + 0.02 * 63), rel=1e-6)


def test_the_serial_share_is_kept_with_the_rates_and_a_bad_one_is_refused():
    rates = CPU_TERMS.rates(1.0)
    assert rates.serial_share == 0.015
    assert Rates.from_dict(rates.to_dict()).serial_share == 0.015
    assert public_fit.scaled(rates, 1.2, 0.8).serial_share == 0.015
    assert Efficiency.from_dict(Efficiency(serial_share=0.01).to_dict()).serial_share == 0.01
    assert not Efficiency(serial_share=0.01).is_identity
    with pytest.raises(SpecError, match="serial_share"):
        Rates.from_dict({**rates.to_dict(), "serial_share": 1.5})
    with pytest.raises(SpecError, match="serial_share"):
        Efficiency.from_dict({"serial_share": -0.1})


def test_a_cpus_rows_at_ngl_0_are_fitted_but_a_decode_on_few_of_its_cores_is_not():
    """-ngl 0 offloads nothing on a machine with no GPU; a decode step on one of 16 cores is
    bound by what that core streams, which no term describes yet (the 7950X's f16 generation
    read 0.40 of its memory's peak on one thread)."""
    m = _cpu("sixteen", *CPUS["sixteen"])
    pp = PublicRow(machine=m.key, model="llama-2-7b", weights="q4_0", test=parse_test("pp512"), tokens_per_second=1.0,
                   source=RowSource(url="u", ngl=0, threads=1))
    tg = dataclasses.replace(pp, test=parse_test("tg128"))
    assert public_fit.fittable(pp, 32, m)
    assert not public_fit.fittable(tg, 32, m)
    assert public_fit.fittable(dataclasses.replace(tg, source=RowSource(url="u", ngl=0, threads=8)), 32, m)
    gpu = dataclasses.replace(m, backend="cuda", kind="gpu")
    assert not public_fit.fittable(pp, 32, gpu)      # on a GPU, -ngl 0 leaves every layer in host memory


def test_a_row_faster_than_its_ceiling_is_listed_and_not_fitted():
    data = _cpu_rows(CPU_TERMS, ngl=0)
    fast = next(i for i, r in enumerate(data.rows) if r.test.name == "pp512")
    row = data.rows[fast]
    rows = list(data.rows)
    rows[fast] = dataclasses.replace(row, tokens_per_second=2.0 * public.tokens_per_second(data, row))
    data = dataclasses.replace(data, rows=tuple(rows))
    assert public.past_ceiling(data) == (fast,)
    assert fast not in public.group_rows(data)["cpu"]
    assert len(public.group_rows(data)["cpu"]) == len(data.rows) - 1


def test_the_numbers_panel_says_what_a_cpus_threads_reach():
    """The expected TTFT's sentence names the serial share where it applies (the shipped CPU fit
    has one): 96 cores reach 1 / (1 + s x 95) of 96 cores' arithmetic; -t 8, 1 / (1 + 7 s); a GPU
    says nothing of it."""
    from rooflab.core.calibration.expectations import expected_on
    from rooflab.core.io import load_model
    from rooflab.core.io.presets import load_machine
    from rooflab.core.report.chart_types import Scenario
    from rooflab.core.report.expected_lines import expected_lines

    spec = load_model("qwen3-8b-q4_k_m")
    cpu = load_machine("epyc-9654")
    ex = expected_on(spec, cpu)
    s = ex.machine.efficiency.serial_share
    assert s > 0 and ex.machine.cores == 96
    for threads, used in ((None, 96), (8, 8)):
        sc = Scenario(model=spec, machine=cpu, workload=Workload(prompt=2048, threads=threads))
        ttft = next(line for line in expected_lines(sc, ex) if line.key == "expected_ttft")
        assert f"Its {used} cores reach {1 / (1 + s * (used - 1)):.0%} of {used} cores' arithmetic" in ttft.sentence
    gpu = load_machine("rtx-4090")
    sc = Scenario(model=spec, machine=gpu, workload=Workload(prompt=2048))
    assert not any("serial" in line.sentence for line in expected_lines(sc, expected_on(spec, gpu)))


def test_a_cpu_is_priced_on_its_int8_path():
    """A CPU's quantized multiplies run on int8 dot products, INT8_PATH x its FP32 FMA rate (8x on
    Neoverse cores with i8mm, ``peak_int8``): the published rows are priced there, the fit's
    factors are of that path, and no published row beats its ceiling (eleven CPU prompts did at
    FP32: Graviton3, Grace and M2 Max quantized prompts ran up to 1.8x the FP32 peak, and the CPU
    fit, held at a factor of 1, wanted more)."""
    from rooflab.core.values.machine import INT8_MATRIX_PATH, INT8_PATH

    data = public.load_public()
    cpus = {m.key: m for m in data.machines if m.backend == "cpu"}
    assert cpus["graviton3"].compute_peak == INT8_MATRIX_PATH * cpus["graviton3"].peak_fp16
    assert cpus["ryzen-9-7950x"].compute_peak == INT8_PATH * cpus["ryzen-9-7950x"].peak_fp16
    profile = public.machine_profile(cpus["ryzen-9-7950x"])
    assert profile.default_dtype == "int8" and profile.flops() == cpus["ryzen-9-7950x"].compute_peak
    assert public.machine_profile(data.machine("rtx-4090")).flops() == data.machine("rtx-4090").peak_fp16
    assert public.past_ceiling(data) == ()
    fit = public.whole_fit(data, "cpu")
    assert 0 < fit.dense < public_fit.MAX_FACTOR                 # a share of the path, no longer held at the bound
    # a file may state peak_int8 only for a CPU, and only with its source
    from rooflab.core.io.public_bench import _machine
    entry = {"key": "x", "name": "x", "backend": "cpu", "bandwidth": 1e11, "peak_fp16": 1e12, "peak_int8": 8e12,
             "sources": {"bandwidth": "a", "peak_fp16": "b"}}
    with pytest.raises(ValueError, match="no source for peak_int8"):
        _machine(entry)
    with pytest.raises(ValueError, match="peak_int8 is a CPU's"):
        _machine({**entry, "backend": "cuda", "sources": {**entry["sources"], "peak_int8": "c"}})
    assert _machine({**entry, "sources": {**entry["sources"], "peak_int8": "c"}}).compute_peak == 8e12


def test_a_cpu_profile_without_an_int8_peak_takes_the_path():
    """A CPU profile saved before the int8 path, written by hand or given new peaks (the Machine
    tab, ``dataclasses.replace``) takes INT8_PATH x its FP32 peak as its default; one that states
    its int8 path keeps it; a GPU is left as it is."""
    from rooflab.core.values.machine import INT8_PATH

    old = MachineProfile.from_dict({"name": "old", "kind": "cpu", "bandwidth": 5e10, "memory": 1e10,
                                    "peak_flops": {"fp32": 1e12}, "default_dtype": "fp32"})
    assert old.default_dtype == "int8" and old.flops() == INT8_PATH * 1e12 and old.flops("fp32") == 1e12
    assert MachineProfile.from_dict(old.to_dict()) == old
    edited = dataclasses.replace(old, peak_flops={"fp32": 2e12})
    assert edited.flops() == INT8_PATH * 2e12
    stated = dataclasses.replace(old, peak_flops={"fp32": 1e12, "int8": 8e12}, default_dtype="int8")
    assert stated.flops() == 8e12
    gpu = MachineProfile(name="g", bandwidth=1e12, peak_flops={"fp16": 1e14}, memory=1e10)
    assert dict(gpu.peak_flops) == {"fp16": 1e14} and gpu.default_dtype == "fp16"


def test_a_saved_cpu_profile_and_a_kept_fit_keep_their_rates_on_the_int8_path(tmp_path, monkeypatch):
    """A CPU profile saved before the int8 path, with an efficiency fitted on its FP32 peak,
    prices every pass as it did: its factors are divided by INT8_PATH as the peak is multiplied.
    A model's kept calibration is rescaled the same way from the peak it kept."""
    from rooflab.core.calibration import store
    from rooflab.core.calibration.calibrate import Calibration
    from rooflab.core.io import load_model
    from rooflab.core.predict.clocks import decode_pass
    from rooflab.core.values.machine import INT8_PATH

    eff = Efficiency(bandwidth=0.8, compute=0.9, decode_compute=0.7, attention_compute=0.5)
    saved = {"name": "old", "kind": "cpu", "bandwidth": 5e10, "memory": 1e11, "peak_flops": {"fp32": 1e12},
             "default_dtype": "fp32", "efficiency": eff.to_dict()}
    old = MachineProfile.from_dict(saved)
    assert old.efficiency.compute == pytest.approx(0.9 / INT8_PATH) and old.efficiency.bandwidth == 0.8
    assert old.efficiency.attention_compute == pytest.approx(0.5 / INT8_PATH)
    spec, w = load_model("qwen3-0.6b"), Workload(prompt=512)
    at_fp32 = MachineProfile(name="then", kind="cpu", bandwidth=5e10, memory=1e11,
                             peak_flops={"fp32": 1e12, "int8": 1e12}, default_dtype="fp32", efficiency=eff)
    for a, b in ((prefill_pass(spec, old, w, prompt=512), prefill_pass(spec, at_fp32, w, prompt=512)),
                 (decode_pass(spec, old, w, batch=4), decode_pass(spec, at_fp32, w, batch=4))):
        assert float(a.seconds) == pytest.approx(float(b.seconds), rel=1e-9)
    # a stated int8 path is the profile's own: nothing to rescale
    assert MachineProfile.from_dict({**saved, "peak_flops": {"fp32": 1e12, "int8": 4e12}}).efficiency == eff
    monkeypatch.setenv("ROOFLAB_DATA_DIR", str(tmp_path))
    kept = Calibration(efficiency=eff, prior=Efficiency(), fitted=("compute",), bandwidth=5e10, peak_flops=1e12,
                       dtype="fp32", kv_type="f16", points=(), predicted_before=(), predicted_after=())
    store.save_calibration("m", "old", kept)
    assert store.load_calibration("m", "old") == eff
    assert store.load_calibration("m", "old", old.flops()).compute == pytest.approx(0.9 / INT8_PATH)
