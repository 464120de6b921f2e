"""vLLM's published calibration: a run's fitted clocks are the tensor-parallel clocks every
figure uses, the fit finds terms that made its runs, its band holds what it did not see, bad rows
are named, and the calibration is applied only where its runs were (NVIDIA GPUs, several over
NVLink)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from rooflab.core.calibration import vllm_public as v
from rooflab.core.calibration.expectations import VLLM, expected_on, missing_expected, vllm_calibration_for
from rooflab.core.errors import ResourceError
from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.expected import efficiency_for
from rooflab.core.predict.parallel import Parallel, parallel_decode, parallel_prefill
from rooflab.core.values.calibration import band
from rooflab.core.values.workload import Workload

TERMS = v.Terms(bandwidth=0.8, compute=0.4, layer_seconds=30e-6, expert_seconds=100e-6)


@pytest.mark.parametrize(("model", "gpu", "devices", "batch"), [
    ("mixtral-8x7b-q4_k_m", "h100-sxm", 4, 8),       # a mixture of experts, all-reduces over NVLink
    ("llama-3.1-8b", "a100-sxm-80gb", 1, 1),          # dense, one device
])
def test_a_runs_parts_are_the_tensor_parallel_clocks(model, gpu, devices, batch):
    # the fit's decomposition, max(W / (B beta), F / (C phi)) + link + fixed terms per pass, is the
    # very pass priced by parallel_prefill / parallel_decode on the machine the calibration makes
    spec, machine = load_model(model, weights="bf16"), load_machine(gpu)
    parts = v.parts_of(spec, machine, devices, "latency", batch, 512, 33)
    eff = efficiency_for(spec, machine, TERMS.rates(), relative=True)
    m = dataclasses.replace(machine, efficiency=eff)
    p = Parallel.on(m, devices, "tensor") if devices > 1 else Parallel(devices=1)
    w = Workload(prompt=512, answer=33, context=0, batch=batch, kv_type="f16")
    steps = parallel_decode(spec, m, w, p, context=np.linspace(512, 544, v.DECODE_POINTS), batch=batch).seconds
    full = float(parallel_prefill(spec, m, w, p, prompt=512, batch=batch, context=0).seconds) \
        + 32 * float(np.mean(steps))
    assert parts.seconds(TERMS) == pytest.approx(full, rel=1e-9)
    assert parts.ceiling < parts.seconds(TERMS)          # the terms only ever slow a run down


def _runs_made_by(terms: v.Terms) -> list[v.Run]:
    # each GPU has a dense and a mixture-of-experts run, one device and several, one request and a
    # batch, so leaving any one GPU out still pins every term down
    cases = [("llama-3.1-8b", "a100-sxm-80gb", 1, "tg", 1, 1000, 200),
             ("mixtral-8x7b-q4_k_m", "a100-sxm-80gb", 2, "latency", 16, 1000, 50),
             ("llama-3.1-8b", "h200", 1, "latency", 8, 32, 128), ("mixtral-8x7b-q4_k_m", "h200", 2, "tg", 1, 500, 100),
             ("mixtral-8x7b-q4_k_m", "h100-sxm", 2, "latency", 1, 1000, 50),
             ("mixtral-8x7b-q4_k_m", "h100-sxm", 8, "latency", 64, 1000, 50),
             ("llama-3.1-70b-q4_k_m", "h100-sxm", 4, "latency", 32, 512, 128)]
    runs = []
    for model, gpu, devices, test, batch, prompt, answer in cases:
        parts = v.parts_of(load_model(model, weights="bf16"), load_machine(gpu), devices, test, batch, prompt, answer)
        runs.append(v.Run(source="s", machine=gpu, backend="cuda", devices=devices, link="nvlink", test=test,
                          label=model, measured=parts.seconds(terms), parts=parts))
    return runs


def test_the_fit_finds_the_terms_that_made_its_runs():
    made = v.Terms(bandwidth=0.70, compute=0.45, layer_seconds=48e-6, expert_seconds=150e-6)
    found = v.fit(_runs_made_by(made))
    assert found == made
    # a grid point one step off prices those runs worse: the optimum is the point, not a tie
    runs = _runs_made_by(made)
    off = dataclasses.replace(made, bandwidth=0.72)
    assert max(abs(r.parts.seconds(off) / r.measured - 1) for r in runs) > 1e-3


def test_held_out_runs_come_from_fits_without_them():
    made = v.Terms(bandwidth=0.70, compute=0.45, layer_seconds=48e-6, expert_seconds=150e-6)
    runs = _runs_made_by(made)
    predicted, fits = v.held_out_seconds(runs, lambda r: r.machine)
    assert set(fits) == {"a100-sxm-80gb", "h200", "h100-sxm"}
    # every fold still sees runs the same terms made, so each recovers them and predicts exactly
    assert predicted == pytest.approx([r.measured for r in runs], rel=1e-6)
    for (lo, hi), p in zip(v.held_out_bands(runs, lambda r: r.machine), predicted, strict=True):
        assert lo <= p * (1 + 1e-9) and hi >= p * (1 - 1e-9)


def test_weighted_percentiles_give_each_group_one_vote():
    # group a has three rows at 0, group b one at 1: each row of a weighs 1/3, b's 1, so the
    # cumulative midpoints are 1/12, 3/12, 5/12 (the zeros) and 9/12 (the one): the median lies a
    # quarter of the way from 5/12 to 9/12, 0.25; with every row its own vote it is 0
    values = [0.0, 0.0, 0.0, 1.0]
    assert v.weighted_percentiles(values, ["a", "a", "a", "b"], [50.0, 84.0]) == pytest.approx([0.25, 1.0])
    assert v.weighted_percentiles(values, ["a", "b", "c", "d"], [50.0])[0] == pytest.approx(0.0)


def test_half_width_is_the_conformal_rank_over_groups():
    # four groups, one size each: level 68 x 5/4 = 85 %; the cumulative midpoints are 1/8, 3/8,
    # 5/8, 7/8, so 85 % lies 0.9 of the way from 5/8 (0.3) to 7/8 (0.4): 0.39
    assert v.half_width([0.1, 0.2, 0.3, 0.4], ["a", "b", "c", "d"]) == pytest.approx(0.39)
    # two groups: 68 x 3/2 passes 100, so the largest, however many rows the other has
    assert v.half_width([0.0, 0.0, 0.0, 1.0], ["a", "a", "a", "b"]) == pytest.approx(1.0)
    assert v.half_width([], []) == 0.0


def test_a_runs_term_scale_is_the_factor_its_terms_were_off_by():
    made = v.Terms(bandwidth=0.35, compute=0.2, layer_seconds=48e-6, expert_seconds=150e-6)
    run = _runs_made_by(made)[3]
    assert v.term_scale(run, made) == pytest.approx(0.0, abs=1e-9)
    slower = v.Terms(bandwidth=0.7, compute=0.4, layer_seconds=24e-6, expert_seconds=75e-6)   # made.scaled(2)
    assert v.term_scale(run, slower) == pytest.approx(-np.log(2.0), rel=1e-6)
    # a run faster than its ceiling allows is as far as the scale goes, never a figure past it
    fast = dataclasses.replace(run, measured=run.parts.ceiling / 2)
    assert v.term_scale(fast, made) == v.MAX_LOG_SCALE


def test_replicates_make_a_band_of_exactly_h():
    # the 16th-84th percentiles of the replicates, as every figure's band takes them
    logs = v.replicate_logs(0.5)
    assert len(logs) == v.REPLICATES
    assert band(0.0, logs) == pytest.approx((-0.5, 0.5))


@pytest.mark.parametrize("fold", [lambda r: r.machine, lambda r: r.source], ids=["machine", "source"])
def test_the_held_out_band_holds_half_to_four_fifths_of_what_it_did_not_see(fold):
    # each run scored against a band built without it, its fold, or any fit that saw them; the
    # band of each machine's one vote over residuals with direction (before) held 39 % leaving one
    # machine out and 46 % one source out; the 16-84 % band is meant to hold about 68 %
    runs = [r for r in v.load_runs() if r.fitted]
    bands = v.held_out_bands(runs, fold)
    held = np.mean([lo <= r.measured <= hi for r, (lo, hi) in zip(runs, bands, strict=True)])
    assert 0.5 <= held <= 0.8
    # and its fast end is never past the ceiling, however wide
    assert all(lo >= r.parts.ceiling * (1 - 1e-9) for r, (lo, _) in zip(runs, bands, strict=True))


def test_tensor_parallel_has_its_own_wider_band():
    one, several = v.vllm_calibration(1), v.vllm_calibration(4)
    assert one is not None and several is not None and one.central == several.central

    def h(cal):     # the band's half-width, read off the replicates' fixed seconds (never capped)
        logs = [np.log(cal.central.layer_seconds / r.layer_seconds) for r in cal.replicates]
        low, high = band(0.0, logs)
        assert low == pytest.approx(-high)
        return float(high)

    # what machines the fit left out ran: one device within 30 %, several over 2x either way
    assert 0.1 < h(one) < np.log(1.5) < np.log(2.0) < h(several)


def _write(tmp_path: Path, row: dict) -> str:
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps({"sources": [{"id": "s", "url": "https://example.org"}], "rows": [row]}))
    return str(path)


ROW = {"source": "s", "gpu": "h100-sxm", "devices": 2, "model": "llama-3.1-8b", "weights": "bf16", "test": "tg",
       "batch": 1, "prompt": 100, "answer": 100, "tokens_per_second": 150.0}


@pytest.mark.parametrize(("change", "said"), [({"source": "elsewhere"}, "source 'elsewhere'"),
                                              ({"gpu": "no-such-gpu"}, "no-such-gpu"),
                                              ({"tokens_per_second": -3}, "must be > 0"),
                                              ({"test": "pp512"}, "test 'pp512'")])
def test_a_bad_row_is_named(tmp_path, change, said):
    with pytest.raises(ResourceError, match=r"vllm\.json: row 1: .*" + said):
        v.load_runs(_write(tmp_path, ROW | change))
    good = v.load_runs(_write(tmp_path, ROW))
    assert len(good) == 1 and good[0].link == "nvlink" and good[0].measured == pytest.approx(1 / 150.0)


def test_the_published_file_prices_every_row_within_its_ceiling():
    runs = v.load_runs()
    assert len(runs) >= 25 and len({r.machine for r in runs if r.fitted}) >= 3
    assert all(r.measured >= r.parts.ceiling for r in runs)
    assert all(r.link in ("", "nvlink") for r in runs)


def test_the_calibration_applies_only_where_its_runs_were(qwen8b):
    # NVIDIA over NVLink: an expected figure, vLLM's, never faster than the ceiling's terms allow
    h100 = load_machine("h100-sxm")
    ex = expected_on(qwen8b, h100, engine=VLLM, devices=8)
    assert ex is not None and ex.calibration.engine_key == "vllm-published"
    assert missing_expected(qwen8b, h100, VLLM, 8) is None
    eff = ex.machine.efficiency
    assert 0 < eff.bandwidth <= 1 and 0 < eff.compute <= 1 and eff.step_overhead > 0
    # a two-card NVLink bridge: two devices yes, four (over PCIe) no, and why
    a100 = load_machine("a100-pcie-80gb")
    assert vllm_calibration_for(a100, 2) is not None and vllm_calibration_for(a100, 4) is None
    pcie = missing_expected(qwen8b, a100, VLLM, 4)
    assert pcie is not None and "over PCIe" in pcie.reason and "no expected figure" in pcie.line
    # no NVLink at all, an AMD GPU, a Mac: none
    assert expected_on(qwen8b, load_machine("rtx-4090"), engine=VLLM) is None
    assert "MI300X decode rate" in str(missing_expected(qwen8b, load_machine("mi300x"), VLLM, 2))
    assert "NVIDIA GPUs'" in str(missing_expected(qwen8b, load_machine("m3-max"), VLLM, 2))
