"""A machine's llama.cpp back end and its device-to-device link: validated, named in errors,
and carried through the preset file format."""

from __future__ import annotations

import math

import pytest

from rooflab.core.errors import SpecError
from rooflab.core.values.machine import BACKENDS, MachineProfile

BASE = dict(name="m", bandwidth=1e9, peak_flops={"fp16": 1e12}, memory=1e9)


def test_defaults_say_nothing_and_a_cpu_runs_the_cpu_back_end():
    gpu = MachineProfile(**BASE)
    assert gpu.backend == "" and gpu.interconnect_bandwidth == 0 and not gpu.has_interconnect
    assert MachineProfile(**BASE, kind="cpu").backend == "cpu"
    assert MachineProfile(**BASE, kind="cpu", backend="vulkan").backend == "vulkan"    # iGPU via Vulkan


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_known_back_end_is_accepted_in_any_case(backend):
    assert MachineProfile(**BASE, backend=backend.upper()).backend == backend


@pytest.mark.parametrize(("field", "value"), [
    ("backend", "opencl-ish"), ("backend", 3),
    ("interconnect_bandwidth", -1.0), ("interconnect_bandwidth", math.nan), ("interconnect_bandwidth", math.inf),
    ("interconnect_bandwidth", 1.0), ("interconnect_bandwidth", 1e30), ("interconnect_bandwidth", True),
    ("interconnect_name", "NVLink\x1b[2J"), ("interconnect_name", "x" * 201), ("interconnect_name", 5),
])
def test_bad_values_name_the_field(field, value):
    with pytest.raises(SpecError, match=field):
        MachineProfile(**{**BASE, field: value})


def test_round_trip_through_the_preset_format():
    m = MachineProfile(**BASE, backend="cuda", interconnect_bandwidth=450e9, interconnect_name="NVLink 4")
    data = m.to_dict()
    assert data["backend"] == "cuda"
    assert data["interconnect"] == {"name": "NVLink 4", "bandwidth": 450e9}
    assert MachineProfile.from_dict(data) == m


def test_a_file_without_the_new_fields_still_loads():
    old = {"name": "old", "kind": "cpu", "bandwidth": 1e10, "peak_flops": {"fp32": 1e11}, "memory": 1e9,
           "default_dtype": "fp32"}
    m = MachineProfile.from_dict(old)
    assert m.backend == "cpu" and m.interconnect_bandwidth == 0 and m.interconnect_name == ""


@pytest.mark.parametrize(("data", "word"), [
    ({"interconnect": [1]}, "interconnect"),
    ({"interconnect": {"bandwidth": "fast"}}, "interconnect.bandwidth"),
    ({"interconnect": {"bandwidth": -5}}, "interconnect_bandwidth"),
    ({"backend": "tpu"}, "backend"),
])
def test_bad_preset_fields_name_the_field(data, word):
    with pytest.raises(SpecError, match=word):
        MachineProfile.from_dict({**BASE, **data})
