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
