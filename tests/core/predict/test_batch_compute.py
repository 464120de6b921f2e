"""A decode step's added sequences priced after the overlap (``Efficiency.batch_compute``), the
same in every path that prices a decode step: one device, a placement across device and host,
several devices."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rooflab.core.predict import work
from rooflab.core.predict.clocks import combined_seconds, decode_pass
from rooflab.core.predict.expected import efficiency_for
from rooflab.core.predict.parallel import Parallel, parallel_decode
from rooflab.core.values.calibration import Rates
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload

CPU = MachineProfile(name="cpu", bandwidth=40e9, peak_flops={"fp32": 200e9}, memory=64e9, default_dtype="fp32",
                     kind="cpu")
C = CPU.flops()             # the int8 path its quantized multiplies run on: 4 x its FP32 peak
WORK = Workload(prompt=128, context=256, batch=1)


def _on(machine: MachineProfile, **eff: float) -> MachineProfile:
    return dataclasses.replace(machine, efficiency=Efficiency(**eff))


def test_one_sequence_is_priced_as_before_and_each_added_one_adds_its_arithmetic(dense_spec):
    spec = dense_spec
    plain, split = _on(CPU, overlap=1.0, decode_compute=0.5), _on(CPU, overlap=1.0, decode_compute=0.5,
                                                                  batch_compute=0.25)
    one = decode_pass(spec, split, WORK, batch=1)
    assert float(one.seconds) == pytest.approx(float(decode_pass(spec, plain, WORK, batch=1).seconds))
    b = np.array([1.0, 2.0, 8.0])
    step = decode_pass(spec, split, WORK, batch=b)
    f1 = float(work.decode_flops(spec, WORK.context, 1))
    first = f1 / (C * 0.5)
    memory = np.asarray(step.memory_seconds)
    expected = combined_seconds(memory, first, 1.0) + (b - 1) * f1 / (C * 0.25)
    assert np.asarray(step.seconds) == pytest.approx(expected)
    assert np.asarray(step.compute_seconds) == pytest.approx(first + (b - 1) * f1 / (C * 0.25))
    # the roofline (no batch_compute): b sequences' arithmetic in the one clock
    roof = decode_pass(spec, plain, WORK, batch=b)
    assert np.asarray(roof.seconds) == pytest.approx(np.maximum(memory, b * first))


def test_several_devices_price_added_sequences_alike(dense_spec):
    spec = dense_spec
    machine = dataclasses.replace(_on(CPU, overlap=1.0, batch_compute=0.25), interconnect_bandwidth=50e9)
    p = Parallel.on(machine, 2, "tensor")
    b = np.array([1.0, 8.0])
    step = parallel_decode(spec, machine, WORK, p, batch=b)
    f1 = float(work.decode_flops(spec, WORK.context, 1)) / 2
    added = np.asarray(step.device.seconds) - combined_seconds(np.asarray(step.device.memory_seconds),
                                                               f1 / C, 1.0)
    assert added == pytest.approx((b - 1) * f1 / (C * 0.25))


def test_a_calibration_with_an_added_sequence_rate_sets_the_factor(dense_spec):
    spec = dense_spec
    rates = Rates(bandwidth={"float": 30e9}, prefill_flops={"float": 150e9}, decode_flops={"float": 100e9},
                  cache_bandwidth=8e9, batch_flops={"float": 50e9})
    assert efficiency_for(spec, CPU, rates).batch_compute == pytest.approx(50e9 / C)
    assert efficiency_for(spec, CPU, dataclasses.replace(rates, batch_flops={})).batch_compute is None
    eff = Efficiency(batch_compute=0.3, overlap=0.5)
    assert Efficiency.from_dict(eff.to_dict()) == eff and not eff.is_identity


def test_a_short_prompt_is_never_slower_than_its_tokens_decoded_one_by_one():
    """r0 stretches a prefill's multiplies by 1 + r0 / rows, fitted on prompts of 128 tokens or
    more; a multiply over r rows is never slower than r one-row multiplies that each read the
    weights once, so a one-token prompt costs what a decode step does, and past a few dozen rows
    the stretch is the fit's own."""
    from rooflab.core.calibration.expectations import expected_on
    from rooflab.core.io import load_model
    from rooflab.core.io.presets import load_machine
    from rooflab.core.predict.clocks import compute_clock, memory_seconds, prefill_pass

    spec = load_model("qwen3-8b-q4_k_m")
    m = expected_on(spec, load_machine("epyc-9654")).machine
    assert m.efficiency.rows_half > 0                        # the shipped CPU fit stretches short prompts
    w = Workload(prompt=2048)
    one = float(prefill_pass(spec, m, w, prompt=1).seconds)
    assert one == pytest.approx(float(decode_pass(spec, m, w, context=0, batch=1).seconds), rel=0.05)
    n = np.array([1.0, 4.0, 16.0, 512.0, 2048.0])
    p = prefill_pass(spec, m, w, prompt=n)
    flops = np.asarray(work.prefill_flops(spec, n)) - np.asarray(work.attention_flops(spec, n, 0))
    reads = memory_seconds(m, n * work.weight_bytes_read(spec, 1.0))
    stretched = compute_clock(m, w, flops, rows=np.minimum(n, w.ubatch))
    plain = compute_clock(m, w, flops)
    bounded = compute_clock(m, w, flops, rows=np.minimum(n, w.ubatch), row_reads=reads)
    assert np.all(bounded <= stretched) and np.all(bounded >= plain * (1 - 1e-12))
    assert bounded[-1] == pytest.approx(stretched[-1])       # a long prompt: the fit's stretch
    assert bounded[0] == pytest.approx(max(plain[0], reads[0]))
    assert np.all(np.diff(np.asarray(p.seconds)) > 0)
