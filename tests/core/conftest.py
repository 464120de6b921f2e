from __future__ import annotations

import pytest

from rooflab.core.io import load_model
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec


@pytest.fixture(scope="session")
def qwen8b() -> ModelSpec:
    return load_model("qwen3-8b-q4_k_m")


@pytest.fixture(scope="session")
def qwen30b() -> ModelSpec:
    return load_model("qwen3-30b-a3b-q4_k_m")


@pytest.fixture(scope="session")
def gptoss() -> ModelSpec:
    return load_model("gpt-oss-120b-mxfp4")


@pytest.fixture(scope="session")
def qwen06_fp32() -> ModelSpec:
    return load_model("qwen3-0.6b", weights="fp32")


def machine(bandwidth_gb: float, peak_tflops: float = 1000.0, memory_gb: float = 1000.0,
            offload_gb_s: float = 0.0) -> MachineProfile:
    """A machine whose compute is ample unless stated: the lessons' 'compute ignored' tables."""
    return MachineProfile(name=f"{bandwidth_gb} GB/s", bandwidth=bandwidth_gb * 1e9,
                          peak_flops={"fp16": peak_tflops * 1e12}, memory=memory_gb * 1e9,
                          offload_bandwidth=offload_gb_s * 1e9, offload_memory=1e12 if offload_gb_s else 0.0)
