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
