"""The published-benchmark fit (``public``, ``public_fit``, ``public_score``): ceilings from
rooflab's own clocks, factors that are physically possible, a fit that recovers the terms it is
built from, and held-out predictions that really leave their fold out: the synthetic cases
below are made from known terms, so a fit that saw the held-out row would be caught."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import numpy as np
import pytest

from rooflab.core.calibration import public, public_fit, public_score
from rooflab.core.calibration.public import load_public, tokens_per_second
from rooflab.core.io.public_bench import (
    PublicBenchmarks,
    PublicMachine,
    PublicModel,
    PublicRow,
    RowSource,
    parse_test,
)
from rooflab.core.values.calibration import FORMAT_CLASSES, Rates


def test_every_group_gets_physically_possible_factors():
    """No fitted share of a peak above 1 (a rate above the memory or unit it ran on), fixed
    costs in seconds that a step can pay, one group per back end and Vulkan vendor."""
    data = load_public()
    fits = public.fit_groups(data)
    assert {"cuda", "metal", "rocm", "cpu"} <= set(fits)
    assert {"vulkan-nvidia", "vulkan-intel"} <= set(fits)       # Vulkan split by vendor
    for group, f in fits.items():
        for share in (f.bandwidth, f.dense, f.decode, f.experts or 1.0):
            assert 0 < share <= 1.0, (group, f)
        assert 0 <= f.pass_seconds < 0.1 and 0 <= f.layer_seconds < 0.01 and 0 <= f.overlap <= 1, (group, f)


def test_tg128_ceiling_matches_hand_derivation():
    """Llama-2-7B Q4_0, tg128 on the RTX 5090 row (1,792 GB/s), batch 1, F16 cache.

    Weights one token reads (Q4_0: 18 bytes per 32 weights):
      matrices 32 x (4 x 4096^2 + 3 x 4096 x 11008) + 32000 x 4096 (head) = 6,607,077,376
               x 18/32                                                     = 3,716,481,024
      F32 norms (32 x 2 + 1) x 4096 x 4                                    =     1,064,960
      one embedding row 4096 / 32 x 18                                     =         2,304
      W                                                                    = 3,717,548,288
    Cache read at context t: 2 x 32 layers x 32 heads x 128 x 2 bytes = 524,288 x t.
    128 steps at t = 0..127: 128 W + 524,288 x 8,128 = 480,107,593,728 bytes
    / 1.792e12 bytes/s = 0.267917 s  ->  128 / 0.267917 = 477.76 tokens/s."""
    data = load_public()
    row = next(r for r in data.rows if r.machine == "rtx-5090" and r.test.name == "tg128")
    assert row.model == "llama-2-7b" and row.weights == "q4_0"
    assert data.machine("rtx-5090").bandwidth == 1792e9
    expected = 128 / ((128 * 3_717_548_288 + 524_288 * 8_128) / 1.792e12)
    assert expected == pytest.approx(477.7596, rel=1e-6)
    assert tokens_per_second(data, row) == pytest.approx(expected, rel=1e-9)



# --- known terms in, the same terms out -----------------------------------------------------

TERMS = public_fit.Factors(bandwidth=0.8, cache=0.8, dense=0.45, experts=None, attention=None, flash_attention=None,
                           decode=0.45, pass_seconds=0.002, layer_seconds=2e-5, overlap=1.0)


def _machine(key: str, backend: str = "cuda", bandwidth: float = 500e9, peak: float = 100e12,
             kind: str = "gpu") -> PublicMachine:
    return PublicMachine(key=key, name=key, backend=backend, bandwidth=bandwidth, peak_fp16=peak,
                         sources=(("bandwidth", "test"), ("peak_fp16", "test")), kind=kind)


def _synthetic(machines: dict[str, tuple[float, float, float]], tests: tuple[str, ...] = ("tg128", "pp512"),
               models: tuple[tuple[str, str], ...] = (("llama-2-7b", "q4_0"), ("llama-3.1-8b", "q8_0")),
               terms: public_fit.Factors = TERMS, sources: tuple[RowSource, ...] = ()) -> PublicBenchmarks:
    """Rows made by pricing each test with ``terms`` on machines {key: (bandwidth, peak, slow)}:
    every row's tokens/s divided by that machine's ``slow`` (1: exactly the terms); each test
    once per source in ``sources`` (their URLs get the machine's key appended; default one page
    a machine)."""
    ms = tuple(_machine(k, bandwidth=b, peak=c) for k, (b, c, _) in machines.items())
    pages = sources or (RowSource(url="https://example.org/"),)
    rows = tuple(PublicRow(machine=m, model=model, weights=w, test=parse_test(test), tokens_per_second=1.0,
                           source=dataclasses.replace(page, url=page.url + m))
                 for m in machines for page in pages for model, w in models for test in tests)
    draft = PublicBenchmarks(path="synthetic", sources=(), machines=ms, rows=rows,
                             models=tuple(PublicModel(key=k, catalogue=k, name=k) for k in dict.fromkeys(
                                 model for model, _ in models)))
    rates = terms.rates(1.0)
    return dataclasses.replace(draft, rows=tuple(
        dataclasses.replace(r, tokens_per_second=public.predict_row(draft, r, rates) / machines[r.machine][2])
        for r in rows))


MACHINES = {"a": (400e9, 60e12, 1.0), "b": (900e9, 150e12, 1.0), "c": (1800e9, 400e12, 1.0),
            "d": (250e9, 30e12, 1.0)}


def test_the_fit_recovers_the_terms_the_rows_were_made_from():
    data = _synthetic(MACHINES)
    f = public.fit_groups(data)["cuda"]
    assert f.bandwidth == pytest.approx(TERMS.bandwidth, rel=0.05)
    assert f.dense == pytest.approx(TERMS.dense, rel=0.05)
    for row in data.rows:                    # and so every row, at its machine's own B and C
        predicted = public.predict_row(data, row, f.rates(1.0))
        assert predicted == pytest.approx(row.tokens_per_second, rel=0.03), row


def test_grid_values_the_rows_cannot_tell_apart_go_to_the_first():
    """With one prompt length every r0 fits exactly (r0 only rescales the dense rate), and the
    fits' scores differ in their last bits, which move with the numpy build: the choice is the
    grid's first value, r0 = 0, whatever those bits say; a score better by more than rounding
    still wins."""
    from rooflab.core.calibration.solver import first_best

    assert public.fit_groups(_synthetic(MACHINES))["cuda"].rows_half == 0.0
    assert first_best([("a", 4.2e-15), ("b", 3.5e-15), ("c", 1e-10)], lambda x: x[1])[0] == "a"
    assert first_best([("a", 2.0), ("b", 2.0 - 1e-12), ("c", 1.9)], lambda x: x[1])[0] == "c"
    assert first_best([("a", 0.5), ("b", 0.1)], lambda x: x[1])[0] == "b"


def test_the_fit_finds_the_rows_per_multiply_and_each_attention_kernels_rate():
    """Rows made with r0 = 32 (a multiply of r rows at r / (r + 32) of its rate), prompts of
    64 to 8,192 tokens in ubatches of 64 and 512, and attention at 0.1 of the peak without flash
    attention and 0.3 with it: the fit picks r0 = 32 off its grid and both attention rates."""
    terms = dataclasses.replace(TERMS, rows_half=32.0, attention=0.1, flash_attention=0.3)
    pages = tuple(RowSource(url=f"https://example.org/ub{ub}-fa{int(fa)}/", ubatch=ub, flash_attention=fa)
                  for ub in (64, 512) for fa in (False, True))
    data = _synthetic(MACHINES, tests=("tg128", "pp64", "pp512", "pp8192"), terms=terms, sources=pages)
    f = public.fit_groups(data)["cuda"]
    assert f.rows_half == 32.0
    assert f.dense == pytest.approx(TERMS.dense, rel=0.05)
    assert f.attention == pytest.approx(0.1, rel=0.1) and f.flash_attention == pytest.approx(0.3, rel=0.1)
    pp64 = next(r for r in data.rows if r.test.name == "pp64")
    assert public.workload_of(pp64).ubatch in (64, 512)
    small, large = (public.predict_row(data, dataclasses.replace(pp64, source=dataclasses.replace(
        pp64.source, ubatch=ub)), f.rates(1.0)) for ub in (16, 512))
    assert small < large          # a ubatch of 16 gives every multiply 16 rows: slower per token


def test_a_machines_own_offset_carries_to_a_page_the_fit_did_not_see():
    """Machine "s" runs 1.6x slower than the terms on both of its pages. Left out one page at a
    time, the other page's rows give s its offset, shrunk halfway by one page against
    ``SHRINK`` (1.6 ** 0.5 of the way), so the left-out page is predicted 1.26x too fast; left
    out as a machine it has none, and is predicted 1.6x too fast."""
    pages = (RowSource(url="https://example.org/p1/"), RowSource(url="https://example.org/p2/"))
    data = _synthetic({**MACHINES, "s": (500e9, 80e12, 1.6)}, sources=pages)
    by_source = [p for p in public_score.held_out(data, "source") if data.rows[p.row].machine == "s"]
    by_machine = [p for p in public_score.held_out(data, "machine") if data.rows[p.row].machine == "s"]
    assert public.SHRINK == 1.0
    assert by_source and all(p.error == pytest.approx(1.6 ** 0.5 - 1, rel=0.05) for p in by_source)
    assert all(p.error == pytest.approx(0.6, rel=0.05) for p in by_machine)


def _with_unified(data: PublicBenchmarks, unified: dict[str, float]) -> PublicBenchmarks:
    """``data`` with the machines of ``unified`` {key: prompt slowness} made unified GPUs whose
    prompts run that many times slower than the terms (their generation as the terms)."""
    machines = tuple(dataclasses.replace(m, kind="unified") if m.key in unified else m for m in data.machines)
    rows = tuple(dataclasses.replace(r, tokens_per_second=r.tokens_per_second / unified[r.machine])
                 if r.machine in unified and r.test.kind == "prefill" else r for r in data.rows)
    return dataclasses.replace(data, machines=machines, rows=rows)


def test_a_unified_gpus_prompts_are_its_own_share_not_its_back_ends():
    """Three unified GPUs whose prompts run 3x slower than four discrete GPUs' terms. Their
    prompt rows stay out of the back end's fit, so the discrete GPUs keep the terms' dense
    share; the unified ones get the share they showed (1/3), and left out one at a time, each
    is predicted from the other two: right, where pricing it as a discrete GPU is 3x too fast.
    A discrete GPU left out is not touched by the share."""
    slow = {"u1": 3.0, "u2": 2.7, "u3": 3.3}
    data = _with_unified(_synthetic({**MACHINES, "u1": (250e9, 40e12, 1.0), "u2": (120e9, 24e12, 1.0),
                                     "u3": (256e9, 60e12, 1.0)}), slow)
    fits = public.fit_groups(data)
    assert fits["cuda"].dense == pytest.approx(TERMS.dense, rel=0.05)
    assert public.unified_share(data, fits) == pytest.approx(1 / 3.0, rel=0.05)
    preds = public_score.held_out(data, "machine")
    for p in preds:
        row = data.rows[p.row]
        assert p.error < (0.2 if row.machine in slow else 0.05), (row, p)     # u3: 3.3 / sqrt(3 x 2.7)
    pp = [p for p in preds if data.rows[p.row].machine == "u1" and data.rows[p.row].test.kind == "prefill"]
    as_discrete = public.predict_row(data, data.rows[pp[0].row], public.group_rates(fits, "cuda"))
    assert as_discrete / pp[0].measured == pytest.approx(3.0, rel=0.05)


def test_a_term_only_unified_gpus_show_is_taken_from_them_at_their_level():
    """No discrete GPU has a MoE prompt row; three unified ones do, at a third of the discrete
    speed. Their prompts stay out of the back end's level, but its routed experts' rate, which
    only they show, comes from them at their own level: the experts / dense ratio the same rows
    give when those machines are discrete GPUs at the discrete speed, not a borrowed one (without
    the unified rows the fit has no experts' rate at all)."""
    models = (("llama-2-7b", "q4_0"), ("qwen3-30b-a3b-q4_k_m", "q4_k_m"))
    terms = dataclasses.replace(TERMS, rows_half=32.0, experts=0.15)
    made = _synthetic({**MACHINES, "u1": (250e9, 40e12, 1.0), "u2": (120e9, 24e12, 1.0),
                       "u3": (256e9, 60e12, 1.0)}, models=models, terms=terms)
    slow = {"u1": 3.0, "u2": 3.0, "u3": 3.0}
    kept = dataclasses.replace(made, rows=tuple(
        r for r in made.rows if r.machine in slow or r.model == "llama-2-7b" or r.test.kind == "decode"))
    data = _with_unified(kept, slow)
    control = public.fit_groups(kept)["cuda"]          # the same rows, every machine discrete and at speed
    alone = public.fit_groups(data, lambda r: r.machine in slow)["cuda"]
    assert alone.experts is None
    f = public.fit_groups(data)["cuda"]
    assert f.dense == pytest.approx(alone.dense, rel=1e-9)          # the level is the discrete GPUs' own
    assert f.experts is not None and 0 < f.experts <= 1.0
    assert control.experts is not None
    assert f.experts / f.dense == pytest.approx(control.experts / control.dense, rel=0.05)


def test_a_unified_gpus_own_rows_move_it_from_the_share():
    """A unified GPU with rows of its own keeps an offset shrunk toward the share, not toward 1:
    one page a machine, halfway in log from the share to what it showed."""
    slow = {"u1": 3.0, "u2": 3.0, "u3": 1.5}
    data = _with_unified(_synthetic({**MACHINES, "u1": (250e9, 40e12, 1.0), "u2": (120e9, 24e12, 1.0),
                                     "u3": (256e9, 60e12, 1.0)}), slow)
    fits = public.fit_groups(data)
    share = public.unified_share(data, fits)
    assert share == pytest.approx(1 / 3.0, rel=0.05)
    offsets = public.machine_offsets(data, fits, ["u3", "a"], share=share)
    assert offsets["u3"][1] == pytest.approx(share * ((1 / 1.5) / share) ** 0.5, rel=0.05)
    assert offsets["a"][1] == pytest.approx(1.0, rel=0.05)


def test_a_machines_own_moe_prompts_get_their_own_factor():
    """Machines "x" and "y" run like the others but for their MoE prompts: x's at half their
    speed (another expert kernel path on that chip), y's at 1.5x. Each one's prompt offset is
    read off its dense rows, and its routed experts get a factor of their own on top: x's MoE
    prompts keep only the share of their gap its two pages leave (1 / 3 in log, as every
    offset's), where the prompt offset alone left all of it; dense prompts and generation do not
    move. y's cannot be helped here: the fit's routed experts already run at the whole peak, and
    a factor that would pass it is clipped (``scaled``), so it stays where it moves nothing."""
    pages = (RowSource(url="https://example.org/p1/"), RowSource(url="https://example.org/p2/"))
    models = (("llama-2-7b", "q4_0"), ("qwen3-30b-a3b-q4_k_m", "q4_k_m"))
    speed = {"x": 0.5, "y": 1.5}
    data = _synthetic({**MACHINES, "x": (500e9, 80e12, 1.0), "y": (500e9, 80e12, 1.0)}, models=models,
                      sources=pages)
    data = dataclasses.replace(data, rows=tuple(
        dataclasses.replace(r, tokens_per_second=r.tokens_per_second * speed[r.machine])
        if r.machine in speed and r.model == "qwen3-30b-a3b-q4_k_m" and r.test.kind == "prefill" else r
        for r in data.rows))
    fits = public.fit_groups(data, lambda r: r.machine in speed)      # the terms, without x and y
    offsets = public.machine_offsets(data, fits, ["x", "y"])
    rates = public.group_rates(fits, "cuda")
    assert rates.prefill_flops[public.EXPERTS] == 1.0         # these rows' MoE prompts put the experts at the peak
    kept = public.SHRINK / (2 + public.SHRINK)

    def off(machine: str, offset: public.Offset) -> dict[str, float]:
        return {f"{r.model} {r.test.name}": public.predict_row(data, r, rates, offset) / r.tokens_per_second
                for r in data.rows if r.machine == machine}

    for m in speed:
        tg, pp, experts = offsets[m]
        assert tg == pytest.approx(1.0, rel=0.02) and pp == pytest.approx(1.0, rel=0.02), m
        without, mine = off(m, (tg, pp, 1.0)), off(m, offsets[m])
        for k, ratio in mine.items():
            if k.endswith("pp512") and "qwen3" in k and m == "x":
                assert math.log(ratio) == pytest.approx(kept * math.log(without[k]), abs=0.01)
                assert experts < 0.7 and without[k] > 1.5
            else:
                assert ratio == pytest.approx(without[k], rel=1e-6), (m, k)
    assert offsets["y"][2] * offsets["y"][1] <= 1.0 + 1e-9          # no factor past the clip


def test_a_slow_machine_moves_only_its_own_error_when_it_is_left_out():
    """Machine "d" runs everything 3x slower than the terms: left out, its rows are predicted
    from a, b and c alone (the terms: error 2.0, i.e. 3x too fast); a fit that saw d would be
    pulled towards it. The others, predicted without themselves, hardly notice d (the L1 fit
    gives one machine in four little pull)."""
    data = _synthetic({**MACHINES, "d": (250e9, 30e12, 3.0)})
    preds = public_score.held_out(data, "machine")
    own = [p for p in preds if data.rows[p.row].machine == "d"]
    assert own and all(p.error == pytest.approx(2.0, rel=0.05) for p in own)
    others = [p for p in preds if data.rows[p.row].machine != "d"]
    assert np.median([p.error for p in others]) < 0.15


def test_a_band_from_the_other_folds_holds_rows_alike():
    """Four machines whose rows scatter by known factors: each fold's band is the other folds'
    residual quantiles, so a machine like the others lands inside and a far one does not."""
    data = _synthetic({"a": (400e9, 60e12, 0.9), "b": (900e9, 150e12, 1.1), "c": (1800e9, 400e12, 1.0),
                       "d": (250e9, 30e12, 1.05), "e": (600e9, 80e12, 0.95), "f": (700e9, 90e12, 4.0)})
    preds = public_score.banded(data, public_score.held_out(data, "machine"), "machine")
    assert all(not p.inside for p in preds if data.rows[p.row].machine == "f")
    near = [p.inside for p in preds if data.rows[p.row].machine in "abcde"]
    assert np.mean(near) >= 0.5


def test_vulkan_is_fitted_per_gpu_vendor():
    m = public_fit.group_of
    assert m(dataclasses.replace(_machine("x", "vulkan"), vendor="nvidia")) == "vulkan-nvidia"
    assert m(dataclasses.replace(_machine("y", "vulkan"), vendor="intel")) == "vulkan-intel"
    assert m(_machine("z", "cuda")) == "cuda"


def test_factors_become_the_calibration_form():
    f = dataclasses.replace(TERMS, experts=0.05)
    rates = f.rates(0.2)
    assert isinstance(rates, Rates)
    assert set(FORMAT_CLASSES) <= set(rates.bandwidth) and rates.prefill_flops["routed experts"] == 0.05
    assert dataclasses.replace(TERMS, experts=None).rates(0.2).prefill_flops["routed experts"] == pytest.approx(
        TERMS.dense * 0.2)
    up = public_fit.scaled(rates, 1.2, 2.0)        # a faster decode and prefill, never past the peak
    assert up.bandwidth["legacy"] == pytest.approx(0.96) and up.prefill_flops["legacy"] == pytest.approx(0.9)
    assert public_fit.scaled(rates, 2.0, 3.0).bandwidth["legacy"] == 1.0
    assert up.pass_seconds == pytest.approx(0.002 / 1.2)


# --- cheap to import, cached once loaded ------------------------------------------------------

def test_import_reads_nothing_and_loading_is_cached():
    code = ("import rooflab.core.calibration.public as p; "
            "assert p.load_public.cache_info().currsize == 0; "
            "assert p.load_public() is p.load_public(); print('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_the_band_weighs_each_machine_as_one():
    """A machine swept 100 ways 2x slower than predicted, three machines of one row each as
    predicted: the band's median is the three machines' (1x), not the sweep's."""
    rows = [public_score.Prediction(row=i, measured=1.0, predicted=2.0) for i in range(100)]
    values = np.array([np.log(p.measured / p.predicted) for p in rows] + [0.0, 0.0, 0.0])
    weights = np.array([1 / 100] * 100 + [1.0, 1.0, 1.0])
    low, mid, high = public_score.weighted_quantiles(values, weights, np.array([0.16, 0.5, 0.84]))
    assert mid == pytest.approx(0.0) and high == pytest.approx(0.0) and low < -0.3
    same = np.array([0.0, 1.0, 2.0, 3.0])
    assert public_score.weighted_quantiles(same, np.ones(4), np.array([0.5]))[0] == pytest.approx(1.5)


def test_each_weight_format_streams_at_its_own_share_where_rows_show_it():
    """Q4_0 rows made at 0.9 of the bandwidth and Q8_0 rows at 0.6 on four machines: the fit
    gives each format its own share. Left out one machine at a time, three machines still show
    each format, so the held-out rows are predicted at their own format's share."""
    terms = dataclasses.replace(TERMS, class_bandwidth={"legacy": 0.9, "q8": 0.6})
    data = _synthetic(MACHINES, tests=("tg128", "tg256", "tg512", "pp512"), terms=terms)
    f = public.fit_groups(data)["cuda"]
    assert f.class_bandwidth["legacy"] == pytest.approx(0.9, rel=0.05)
    assert f.class_bandwidth["q8"] == pytest.approx(0.6, rel=0.05)
    tg = [p for p in public_score.held_out(data, "machine") if data.rows[p.row].test.kind == "decode"]
    assert tg and np.median([p.error for p in tg]) < 0.05
    # two machines are too few to show a format's own share: one share for both, and the rows of
    # each format are then predicted by it (the L1 fit settles near one format's share)
    two = _synthetic({k: MACHINES[k] for k in "ab"}, tests=("tg128", "tg256", "tg512", "pp512"), terms=terms)
    g = public.fit_groups(two)["cuda"]
    assert len(g.class_bandwidth) == 1 and 0.5 < g.bandwidth < 0.95


# --- a routed-expert layer's fixed cost ---------------------------------------------------------

MOE_MODELS = (("llama-2-7b", "q4_0"), ("llama-3.1-8b", "q8_0"), ("llama-3.2-1b-q4_k_m", "q4_0"),
              ("qwen2.5-32b-q4_k_m", "q4_0"), ("qwen3-30b-a3b-q4_k_m", "q4_0"))


def test_a_routed_expert_layers_fixed_cost_is_fitted_after_the_shared_terms():
    """Rows made with 300 us per routed-expert layer in every pass (Qwen3-30B-A3B: 48 of them,
    14 ms a token beside its bytes; dense models of 16 to 64 layers beside it): the shared
    terms, fitted to every row, take part of it (the per-layer cost rises), and the MoE decode
    rows' remainder is the layer's cost, a lower bound of the 300 us (about 220 us here; made
    with 60 us, the shared terms take nearly all of it) that brings the MoE rows far closer than
    none. Without MoE decode rows there is nothing to fit it from (None), and a group takes
    what the others showed."""
    terms = dataclasses.replace(TERMS, expert_layer_seconds=300e-6)
    data = _synthetic(MACHINES, tests=("tg128", "tg512", "pp512"), models=MOE_MODELS, terms=terms)
    f = public.fit_groups(data)["cuda"]
    assert f.expert_layer_seconds is not None and 150e-6 < f.expert_layer_seconds <= 315e-6
    moe_tg = [r for r in data.rows if r.model.startswith("qwen3") and r.test.kind == "decode"]
    with_cost = public.group_rates({"cuda": f}, "cuda")
    without = dataclasses.replace(with_cost, expert_layer_seconds=0.0)

    def worst(rates: Rates) -> float:
        return max(abs(public.predict_row(data, r, rates) / r.tokens_per_second - 1) for r in moe_tg)

    assert worst(with_cost) < 0.5 * worst(without) and worst(with_cost) < 0.05
    dense = public.fit_groups(_synthetic(MACHINES))["cuda"]
    assert dense.expert_layer_seconds is None
    whole = f.layer_seconds + f.expert_layer_seconds       # what a routed-expert layer costs in all
    assert public.expert_layer_seconds({"cuda": dense, "rocm": f}, "cuda") == pytest.approx(
        whole - dense.layer_seconds)
    assert public.group_rates({"cuda": dense, "rocm": f}, "cuda").expert_layer_seconds == pytest.approx(
        whole - dense.layer_seconds)


def test_a_group_without_moe_decode_rows_pays_the_others_whole_expert_layer():
    """ROCm's MoE rows made its per-layer cost (100 us) and left its expert layer's own a
    remainder (10 us); Metal's 150 + 40 us, Vulkan's 60 + 30. A group without MoE decode rows
    adds the median whole expert layer (100 + 10 = 110 us) less its own per-layer cost (CUDA's
    30 us: 80 us), never below 0 (a CPU's 200 us a layer: 0). The median of the added parts
    alone (30 us) is what the fallback was, and what made CUDA's MoE decode too fast."""
    rocm, metal, vulkan = (dataclasses.replace(TERMS, layer_seconds=a, expert_layer_seconds=b)
                           for a, b in ((100e-6, 10e-6), (150e-6, 40e-6), (60e-6, 30e-6)))
    cuda, cpu = (dataclasses.replace(TERMS, layer_seconds=a) for a in (30e-6, 200e-6))
    fits = {"cuda": cuda, "metal": metal, "rocm": rocm, "vulkan-amd": vulkan, "cpu": cpu}
    assert public.expert_layer_total(fits) == pytest.approx(110e-6)
    assert public.group_rates(fits, "cuda").expert_layer_seconds == pytest.approx(80e-6)
    assert public.group_rates(fits, "cpu").expert_layer_seconds == 0.0
    assert public.group_rates(fits, "rocm").expert_layer_seconds == pytest.approx(10e-6)     # its own
    assert public.expert_layer_total({"cuda": cuda}) == 0.0 and public.expert_layer_seconds({"cuda": cuda}, "cuda") == 0
    # a bound, never a lift: every row is priced below its ceiling, a MoE decode step 80 us a layer slower
    data = _synthetic({"a": MACHINES["a"]}, tests=("tg128", "pp512"), models=MOE_MODELS)
    for r in data.rows:
        priced = public.predict_row(data, r, public.group_rates(fits, "cuda"))
        assert priced < public.tokens_per_second(data, r)
        if r.model.startswith("qwen3") and r.test.kind == "decode":
            assert 1 / priced - 1 / public.predict_row(data, r, cuda.rates(1.0)) == pytest.approx(48 * 80e-6, rel=1e-6)


def test_the_expert_layers_cost_is_in_every_pass_of_a_moe_model_only():
    """The clocks' fixed cost of a pass grows by expert_layer_seconds x the layers that hold
    routed experts (Qwen3-30B-A3B: 48 of 48), and not at all for a dense model; it is kept in a
    stored calibration and scaled with the decode offset like the other fixed costs."""
    from rooflab.core.predict.expected import efficiency_for, expert_layers

    moe = public.model_spec("qwen3-30b-a3b-q4_k_m", "q4_k_m")
    dense = public.model_spec("llama-2-7b", "q4_0")
    assert expert_layers(moe) == 48 and expert_layers(dense) == 0
    machine = public.machine_profile(_machine("m"))
    base, extra = TERMS.rates(1.0), dataclasses.replace(TERMS, expert_layer_seconds=1e-4).rates(1.0)
    for spec, added in ((moe, 48 * 1e-4), (dense, 0.0)):
        step = [efficiency_for(spec, machine, r, dtype="fp16", relative=True).step_overhead for r in (base, extra)]
        assert step[1] - step[0] == pytest.approx(added)
    assert Rates.from_dict(extra.to_dict()).expert_layer_seconds == 1e-4
    assert "expert_layer_seconds" not in base.to_dict()
    assert public_fit.scaled(extra, 2.0, 1.0).expert_layer_seconds == pytest.approx(5e-5)


def test_a_gpu_group_without_deep_rows_prices_attention_as_the_others_showed():
    """A group whose rows never spent enough on attention to show its rate took the dense
    multiplies' rate for it; now a GPU group takes the attention / dense ratio the GPU groups
    with such rows showed (a CPU keeps its dense rate), so a prompt at 32k depth on it is
    priced slower, a short one nearly alike."""
    seen = dataclasses.replace(TERMS, attention=0.09, dense=0.45)          # ratio 0.2
    blind = dataclasses.replace(TERMS, dense=0.3)
    fits = {"rocm": seen, "vulkan-intel": blind, "cpu": blind}
    assert public.attention_ratio(fits) == pytest.approx(0.2)
    assert public.group_rates(fits, "vulkan-intel").attention_flops == pytest.approx(0.06)
    assert public.group_rates(fits, "cpu").attention_flops is None
    assert public.group_rates(fits, "rocm").attention_flops == pytest.approx(0.09)
    data = _synthetic({"a": MACHINES["a"]}, tests=("pp512",))
    row = next(r for r in data.rows if r.model == "llama-3.1-8b")
    deep = dataclasses.replace(row, source=dataclasses.replace(row.source, depth=32768))
    for r, slower in ((deep, 2.0), (row, 1.0)):
        before = public.predict_row(data, r, blind.rates(1.0))
        after = public.predict_row(data, r, public.group_rates(fits, "vulkan-intel"))
        assert before / after > slower if slower > 1 else before / after == pytest.approx(1.0, rel=0.15)


def test_prompts_at_depth_fit_the_attention_rate_and_are_predicted_out_of_sample():
    """pp512 at 0, 4k, 8k and 16k of depth made with the prompt's attention at 0.02 of the peak
    (a back end that walks the scores through memory: a 16k-deep prompt several times slower
    than a fresh one) beside dense multiplies at 0.45: the fit sees the attention rate from the
    deep rows (within 10 %), keeps the dense one, and each machine left out has its deep prompts
    predicted within 5 %; priced at the dense rate instead they would run 3x too fast."""
    terms = dataclasses.replace(TERMS, attention=0.02)
    pages = tuple(RowSource(url=f"https://example.org/d{d}/", depth=d) for d in (0, 4096, 8192, 16384))
    data = _synthetic(MACHINES, tests=("tg128", "pp512"), terms=terms, sources=pages)
    f = public.fit_groups(data)["cuda"]
    assert f.attention == pytest.approx(0.02, rel=0.1) and f.dense == pytest.approx(0.45, rel=0.05)
    deep = [p for p in public_score.held_out(data, "machine")
            if data.rows[p.row].test.kind == "prefill" and data.rows[p.row].source.depth == 16384]
    assert deep and max(p.error for p in deep) < 0.05
    blind = dataclasses.replace(f, attention=None).rates(1.0)
    assert all(public.predict_row(data, data.rows[p.row], blind) > 3 * p.measured for p in deep)
