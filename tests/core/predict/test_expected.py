"""Expected figures: a calibration's rates by weight format turned into one model's Efficiency,
priced by the same clocks as the ceiling."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rooflab.core.errors import SpecError
from rooflab.core.io import load_model
from rooflab.core.predict import work
from rooflab.core.predict.clocks import combined_seconds, decode_pass, prefill_pass
from rooflab.core.predict.expected import EXPERTS, byte_shares, efficiency_for, expected_for, flop_shares
from rooflab.core.values.calibration import EngineCalibration, Rates, format_class
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload

MACHINE = MachineProfile(name="box", bandwidth=100e9, peak_flops={"fp16": 1e12}, memory=64e9, key="box")


def _cal(central: Rates, replicates: tuple[Rates, ...] = (), source: str = "measured") -> EngineCalibration:
    return EngineCalibration(machine_key="box", machine_name="box", engine_key="llama.cpp-cpu-t2-kv-f16",
                             engine_label="llama.cpp, cpu, 2 threads", settings={}, date="2026-11-30T00:00:00",
                             models=("a", "b"), machine_bandwidth=100e9, machine_flops=1e12, central=central,
                             replicates=replicates, source=source)


def test_shares_follow_the_tensor_table():
    """Q4_K_M keeps Q6_K for attn_v, ffn_down on some layers and the head: both are K-quants, so
    the bytes a token reads are one class (norms in F32 a sliver); MoE FLOPs split off experts."""
    dense = load_model("qwen3-8b-q4_k_m")
    shares = byte_shares(dense)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares["k-quant"] > 0.99 and shares["float"] < 0.01
    assert sum(v * work.weight_bytes_read_per_token(dense) for v in shares.values()) == \
        pytest.approx(work.weight_bytes_read_per_token(dense))
    moe = flop_shares(load_model("qwen3-30b-a3b-q4_k_m"))
    # 30B-A3B per token: experts 48 layers x 8 used x 3 x 2048 x 768 = 1.812 B; attention
    # 48 x (2 x 2048 x 4096 + 2 x 2048 x 512) = 0.906 B; head 151,936 x 2048 = 0.311 B; the
    # router and norms a sliver: experts 1.812 / 3.03 = 0.598
    assert moe[EXPERTS] == pytest.approx(0.598, abs=0.004)
    assert format_class("Q4_K") == "k-quant" and format_class("q8_0") == "q8" and format_class("BF16") == "float"


def test_rates_at_the_machines_peaks_give_the_ceiling():
    """Rates equal to B and C with no fixed cost and full overlap: the Efficiency is the
    identity, so the expected figure is the ceiling itself."""
    spec = load_model("qwen3-8b-q4_k_m")
    rates = Rates(bandwidth={"k-quant": 100e9, "float": 100e9}, prefill_flops={"k-quant": 1e12, "float": 1e12},
                  decode_flops={"k-quant": 1e12, "float": 1e12}, cache_bandwidth=100e9)
    eff = efficiency_for(spec, MACHINE, rates)
    assert eff.bandwidth == pytest.approx(1.0) and eff.compute == pytest.approx(1.0)
    assert eff.kv_read_factor == pytest.approx(1.0) and eff.step_overhead == 0 and eff.overlap == 1.0


def test_a_mix_of_formats_streams_at_the_harmonic_rate():
    """Half the bytes at 50 GB/s and half at 25 GB/s: 1 / (0.5/50 + 0.5/25) = 33.3 GB/s."""
    spec = load_model("qwen3-0.6b", weights="q8_0")
    shares = byte_shares(spec)
    rates = Rates(bandwidth={k: 50e9 if i % 2 == 0 else 25e9 for i, k in enumerate(shares)},
                  prefill_flops={"q8": 1e12}, decode_flops={"q8": 1e12}, cache_bandwidth=10e9,
                  pass_seconds=1e-3, layer_seconds=1e-5)
    expected = 1 / sum(s / rates.bandwidth[k] for k, s in shares.items())
    eff = efficiency_for(spec, MACHINE, rates)
    assert eff.bandwidth * MACHINE.bandwidth == pytest.approx(expected)
    # the cache is read at its own rate whatever the weights' mix: K / cache_bandwidth
    step = decode_pass(spec, dataclasses.replace(MACHINE, efficiency=eff), Workload(), context=4096)
    plain = decode_pass(spec, MACHINE, Workload(), context=4096)
    assert float(step.memory_seconds) == pytest.approx(float(plain.weight_bytes) / expected
                                                       + float(plain.cache_bytes) / 10e9, rel=1e-9)
    assert eff.step_overhead == pytest.approx(1e-3 + 1e-5 * spec.layers)


def test_a_format_the_calibration_never_saw_is_priced_at_the_pooled_rate_and_said():
    spec = load_model("qwen3-0.6b", weights="q8_0")
    rates = Rates(bandwidth={"k-quant": 40e9, "float": 10e9}, prefill_flops={"k-quant": 1e11, "float": 1e11},
                  decode_flops={"k-quant": 1e11, "float": 1e11}, cache_bandwidth=10e9)
    ex = expected_for(spec, MACHINE, _cal(rates))
    assert ex.machine.efficiency.bandwidth * 100e9 == pytest.approx(20e9, rel=0.01)   # sqrt(40 x 10)
    assert any("q8" in n for n in ex.notes)


def test_band_spans_the_replicates_and_holds_the_central_value():
    spec = load_model("qwen3-0.6b", weights="q8_0")

    def rates(bw: float) -> Rates:
        return Rates(bandwidth={"q8": bw}, prefill_flops={"q8": 1e11}, decode_flops={"q8": 1e11},
                     cache_bandwidth=bw)

    ex = expected_for(spec, MACHINE, _cal(rates(40e9), tuple(rates(b * 1e9) for b in range(30, 51))))
    central, low, high = ex.band(lambda m: float(decode_pass(spec, m, Workload()).seconds))
    assert low < central < high
    slow = float(decode_pass(spec, dataclasses.replace(MACHINE, efficiency=efficiency_for(spec, MACHINE, rates(30e9))),
                             Workload()).seconds)
    assert high < slow          # the 84th percentile, not the slowest replicate


def test_published_factors_scale_with_the_machine():
    """A back end's rates are factors of the machine's own B and C."""
    spec = load_model("qwen3-0.6b", weights="q8_0")
    factors = Rates(bandwidth={"any format": 0.7}, prefill_flops={"any format": 0.4},
                    decode_flops={"any format": 0.4}, cache_bandwidth=0.7)
    ex = expected_for(spec, MACHINE, _cal(factors, source="public"))
    assert ex.machine.efficiency.bandwidth == pytest.approx(0.7)
    assert ex.machine.efficiency.compute == pytest.approx(0.4)
    assert ex.notes == ()


def test_overlap_and_decode_compute_reach_the_clocks():
    spec = load_model("qwen3-0.6b")
    base = decode_pass(spec, MACHINE, Workload(), context=512, batch=8)
    eff = Efficiency(overlap=0.0, decode_compute=0.5)
    step = decode_pass(spec, dataclasses.replace(MACHINE, efficiency=eff), Workload(), context=512, batch=8)
    assert float(step.compute_seconds) == pytest.approx(2 * float(base.compute_seconds))
    assert float(step.seconds) == pytest.approx(float(step.memory_seconds + step.compute_seconds))
    pre = prefill_pass(spec, dataclasses.replace(MACHINE, efficiency=eff), Workload(), prompt=512)
    assert float(pre.compute_seconds) == pytest.approx(float(prefill_pass(spec, MACHINE, Workload(),
                                                                          prompt=512).compute_seconds))
    assert combined_seconds(np.array([1.0]), np.array([3.0]), 0.25)[0] == pytest.approx(3.75)


@pytest.mark.parametrize("field, value", [("overlap", 1.5), ("overlap", -0.1), ("decode_compute", 0.0)])
def test_efficiency_refuses_out_of_range_new_fields(field, value):
    with pytest.raises(SpecError, match=field):
        Efficiency(**{field: value})


def test_efficiency_round_trips_through_a_profile():
    eff = Efficiency(bandwidth=0.5, decode_compute=0.3, overlap=0.25)
    again = MachineProfile.from_dict(dataclasses.replace(MACHINE, efficiency=eff).to_dict())
    assert again.efficiency == eff


def test_a_minor_format_rides_with_the_models_main_one_as_the_fit_counted_it():
    """Qwen3-30B-A3B Q4_K_M reads about 3 % of its bytes as F32 (routers, norms): with rates
    for K-quants only it is priced wholly at the K-quant rate and nothing is noted."""
    spec = load_model("qwen3-30b-a3b-q4_k_m")
    assert 0.02 < byte_shares(spec)["float"] < 0.05
    rates = Rates(bandwidth={"k-quant": 40e9}, prefill_flops={"k-quant": 1e11, EXPERTS: 5e10},
                  decode_flops={"k-quant": 1e11, EXPERTS: 5e10}, cache_bandwidth=10e9)
    ex = expected_for(spec, MACHINE, _cal(rates))
    assert ex.notes == ()
    assert ex.machine.efficiency.bandwidth * MACHINE.bandwidth == pytest.approx(40e9)
