from __future__ import annotations

import pytest

from rooflab.core.io import load_model
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
