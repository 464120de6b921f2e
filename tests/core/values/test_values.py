"""Value objects validate themselves and name the bad field."""

from __future__ import annotations

import dataclasses
import math

import pytest

from rooflab.core.errors import SpecError
from rooflab.core.predict.roofline import balance
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.quant import bytes_per_value, kv_bytes_per_value, tensor_bytes
from rooflab.core.values.workload import Workload


@pytest.mark.parametrize("field, value", [("prompt", 0), ("batch", 0), ("context", -1), ("answer", 1.5),
                                          ("kv_type", "f8"), ("acceptance", 1.5), ("offload_fraction", -0.1),
                                          # the wrong JSON type, as a hand-edited settings file holds it
                                          # (issue 15: kv_type 5 reached .lower() and raised AttributeError)
                                          ("kv_type", 5), ("kv_type", None), ("kv_type", ["f16"]),
                                          ("compute_dtype", 16), ("compute_dtype", "fp8\x1b[2J"),
                                          ("acceptance", True), ("draft_cost", "0.5")])
def test_workload_rejects(field, value):
    with pytest.raises(SpecError, match=field) as caught:
        Workload(**{field: value})
    assert "\x1b" not in str(caught.value)          # the value is quoted, never printed raw


@pytest.mark.parametrize("field, value", [("name", 5), ("kind", None), ("default_dtype", 16), ("notes", ["x"])])
def test_machine_rejects_text_fields_of_another_type(field, value):
    base = dict(name="m", bandwidth=1e9, peak_flops={"fp16": 1e12}, memory=1e9)
    with pytest.raises(SpecError, match=field):
        MachineProfile(**{**base, field: value})


@pytest.mark.parametrize("field, value", [("bandwidth", 0.0), ("bandwidth", math.nan), ("memory", -1.0)])
def test_machine_rejects(field, value):
    base = dict(name="m", bandwidth=1e9, peak_flops={"fp16": 1e12}, memory=1e9)
    with pytest.raises(SpecError, match=field):
        MachineProfile(**{**base, field: value})


def test_machine_rejects_missing_default_dtype():
    with pytest.raises(SpecError, match="default_dtype"):
        MachineProfile(name="m", bandwidth=1e9, peak_flops={"fp32": 1e12}, memory=1e9)


def test_machine_round_trip_and_immutability():
    m = MachineProfile(name="m", bandwidth=1e9, peak_flops={"fp16": 1e12, "fp32": 5e11}, memory=2e9,
                       offload_bandwidth=1e8, offload_memory=1e10, efficiency=Efficiency(bandwidth=0.8))
    again = MachineProfile.from_dict(m.to_dict())
    assert again == m
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.bandwidth = 2.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        m.peak_flops["fp16"] = 0  # type: ignore[index]
    assert balance(m) == 1000.0


@pytest.mark.parametrize("data", [{}, {"name": "x", "bandwidth": "fast", "peak_flops": {}, "memory": 1},
                                  {"name": "x", "bandwidth": 1, "peak_flops": [], "memory": 1}])
def test_machine_from_bad_dict(data):
    with pytest.raises(SpecError):
        MachineProfile.from_dict(data)


def test_efficiency_bounds():
    with pytest.raises(SpecError):
        Efficiency(bandwidth=0)
    with pytest.raises(SpecError):
        Efficiency(step_overhead=-1)
    with pytest.raises(SpecError, match="host_expert_compute"):
        Efficiency(host_expert_compute=0.0)


def test_a_bands_host_expert_factors_survive_a_saved_profile():
    # a replicate's own experts' arithmetic (offload_terms.spread_host) is kept by to_dict / from_dict
    e = Efficiency(bandwidth=0.7, host_compute=0.9, host_expert_bandwidth=0.5, host_expert_compute=0.2,
                   host_link_share=0.41)
    assert Efficiency.from_dict(e.to_dict()) == e
    assert not e.is_identity and not Efficiency(host_expert_compute=1.0).is_identity
    assert not Efficiency(host_link_share=1.0).is_identity


def test_quant_sizes():
    assert bytes_per_value("Q4_K") == 0.5625 and bytes_per_value("Q8_0") == 34 / 32
    assert tensor_bytes("Q6_K", 256) == 210 and tensor_bytes("MXFP4", 64) == 34
    assert kv_bytes_per_value("q8_0") == 34 / 32 and kv_bytes_per_value("f16") == 2
    with pytest.raises(SpecError):
        tensor_bytes("Q4_K", 100)
    with pytest.raises(SpecError):
        tensor_bytes("Q9_9", 256)
