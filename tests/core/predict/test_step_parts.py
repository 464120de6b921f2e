"""Where a placed pass's time goes (``step_parts``): its named parts sum to the seconds the app
prints for that pass, on every kind of placement (auto-fit, --n-cpu-moe, -ngl below all, a
partial layer with the cache on the host, two devices in a layer split or tensor parallel),
in a ceiling and in an expected figure, and the round trips are crossings x passes x the cost
of one."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooflab.core.app.figures import figures
from rooflab.core.calibration.expectations import expected_on
from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict import offload_terms as terms
from rooflab.core.predict.choice import AUTO, PlacementChoice
from rooflab.core.predict.offload import placed_decode, placed_prefill
from rooflab.core.predict.parallel import Parallel
from rooflab.core.predict.placement import Placement
from rooflab.core.predict.step_parts import decode_parts, prefill_parts
from rooflab.core.report.chart_types import Scenario
from rooflab.core.values.workload import Workload

RTX = load_machine("rtx-4090")
MOE = load_model("qwen3-30b-a3b-q4_k_m")           # 48 layers, 128 experts
DENSE = load_model("qwen3-32b-q4_k_m")             # 64 layers
PLACEMENTS = {
    "--n-cpu-moe": (MOE, Placement(gpu_layers=49, cpu_moe=30)),
    "-ngl below all": (DENSE, Placement(gpu_layers=40)),
    "by hand, partial layer, cache on the host": (MOE, Placement(gpu_layers=45, cpu_moe=12, partial="up",
                                                                 kv_on_device=False)),
    "two devices with host layers": (DENSE, Placement(gpu_layers=50, devices=2)),
    "two devices, every layer (a pipelined prompt)": (DENSE, Placement(gpu_layers=65, devices=2)),
    "everything on the host": (DENSE, Placement(gpu_layers=0)),
}


def _machines():
    ex = expected_on(MOE, RTX)
    assert ex is not None                     # the CUDA back end's published fit
    return {"ceiling": RTX, "expected": ex.machine}


MACHINES = _machines()


def _sums(parts, seconds):
    assert all(p.seconds > 0 for p in parts.parts)
    assert sum(p.seconds for p in parts.parts) == pytest.approx(seconds, rel=1e-9)
    assert parts.seconds == pytest.approx(seconds, rel=1e-12)
    assert sum(parts.share(p) for p in parts.parts) == pytest.approx(1.0)


@settings(max_examples=30, deadline=None)
@given(case=st.sampled_from(sorted(PLACEMENTS)), priced=st.sampled_from(sorted(MACHINES)),
       prompt=st.integers(1, 20_000), context=st.integers(0, 30_000), batch=st.integers(1, 64),
       ubatch=st.sampled_from([64, 256, 512, 2048]))
def test_parts_sum_to_the_placed_pass(case, priced, prompt, context, batch, ubatch):
    spec, placement = PLACEMENTS[case]
    m = MACHINES[priced]
    w = Workload(prompt=prompt, answer=16, context=context, batch=batch, ubatch=ubatch)
    decode = decode_parts(spec, m, w, placement, context=context + prompt)
    _sums(decode, float(placed_decode(spec, m, w, placement, context=context + prompt).seconds))
    prefill = prefill_parts(spec, m, w, placement)
    _sums(prefill, float(placed_prefill(spec, m, w, placement).seconds))
    # the round trips are the crossings' (offload_terms), and an engine's only
    trips = decode.seconds_of("round_trips")
    if priced == "ceiling" or case in ("everything on the host", "two devices, every layer (a pipelined prompt)"):
        assert trips == 0.0
    else:
        assert decode.crossings == terms.crossings(spec, placement)
        # one graph pass a decode step, whatever its batch; a prompt one a ubatch
        assert trips == pytest.approx(decode.crossings * terms.CROSSING_SECONDS)
        assert prefill.seconds_of("round_trips") == pytest.approx(
            decode.crossings * -(-prompt * batch // ubatch) * terms.CROSSING_SECONDS)


@pytest.mark.parametrize("choice", [AUTO, PlacementChoice(cpu_moe=30), PlacementChoice(gpu_layers=30),
                                    PlacementChoice(devices=2, parallel="layer"),
                                    PlacementChoice(devices=2, parallel="tensor")],
                         ids=["auto-fit", "--n-cpu-moe", "-ngl below all", "layer split", "tensor parallel"])
def test_the_answer_splits_the_figures_it_prints(choice):
    """The app's one answer: the ceiling's parts sum to the placed pass its why prints, and the
    expected prompt's to the expected TTFT it prints."""
    spec = load_model("gpt-oss-120b-mxfp4") if choice == AUTO else MOE
    w = Workload(prompt=2048, answer=64)
    sc = Scenario(model=spec, machine=RTX, workload=w, placement=choice)
    answer = figures(sc)
    prefill, decode, origin = answer.parts
    assert origin == "the ceiling"
    s = answer.summary
    if s.placed_decode is not None:                  # one device with host memory: the why's parts
        _sums(decode, s.placed_decode.seconds)
        _sums(prefill, s.placed_prefill.seconds)
    else:                                            # several devices sharing every layer
        assert isinstance(answer.stands_on, Parallel)
        assert prefill.seconds == pytest.approx(s.estimate.ttft)
        assert decode.seconds_of("link") > 0
    ex = expected_on(spec, RTX)
    expected = figures(sc, expected=ex)
    prefill, decode, origin = expected.parts
    assert origin == "expected with llama.cpp CUDA"
    from rooflab.core.report.expected import expected_request

    r = expected_request(spec, ex, w, expected.stands_on)
    assert prefill.seconds == pytest.approx(r["expected_ttft_seconds"], rel=1e-9)
    # the fixed cost per step, the routed-expert layers' part named apart (a MoE model on CUDA)
    eff = ex.machine.efficiency
    assert 0 < eff.expert_overhead < eff.step_overhead
    assert decode.seconds_of("expert_overhead") == pytest.approx(eff.expert_overhead)
    assert decode.seconds_of("overhead") == pytest.approx(eff.step_overhead - eff.expert_overhead)


def test_wholly_on_the_device_has_no_parts_row():
    w = Workload(prompt=512, answer=64)
    answer = figures(Scenario(model=load_model("qwen3-8b-q4_k_m"), machine=RTX, workload=w, placement=AUTO))
    assert answer.parts is None
    assert not any(line.key.endswith("_parts") for line in answer.lines())


def test_a_host_side_bound_by_its_arithmetic_is_one_part():
    # a large batch on the host's layers: their arithmetic, not their bytes, sets the time
    w = Workload(prompt=512, answer=16, batch=4096, ubatch=16)
    m = dataclasses.replace(RTX, offload_flops=1e11)
    parts = decode_parts(DENSE, m, w, Placement(gpu_layers=40), context=512)
    keys = [p.key for p in parts.parts]
    assert "host_arithmetic" in keys and "host_weights" not in keys
