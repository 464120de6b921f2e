"""Measured points keep the engine and settings they were timed with, through the store's JSON."""

from __future__ import annotations

import json

import pytest

from rooflab.core.errors import SpecError
from rooflab.core.values.measured import EngineSettings, MeasuredPoint

LLAMA = EngineSettings(engine="llama.cpp", version="0.3.36", threads=2, kv_type="q8_0", batch_size=2048,
                       ubatch_size=512)


def test_settings_round_trip_through_json():
    point = MeasuredPoint(kind="decode", prompt=1, context=512, batch=1, seconds=0.02, median=0.021,
                          repeats=5, source="llama.cpp", settings=LLAMA)
    again = MeasuredPoint.from_dict(json.loads(json.dumps(point.to_dict())))
    assert again == point
    assert again.engine_key == "llama.cpp cpu t2 kv-q8_0"


def test_points_saved_before_settings_existed_still_read():
    old = {"kind": "prefill", "prompt": 64, "context": 0, "batch": 1, "seconds": 0.5}
    point = MeasuredPoint.from_dict(old)
    assert point.settings is None and point.engine_key == ""
    assert "settings" not in point.to_dict()


def test_settings_that_differ_have_different_keys():
    keys = {LLAMA.key,
            EngineSettings(engine="llama.cpp", version="0.3.36", threads=4, kv_type="q8_0").key,
            EngineSettings(engine="llama.cpp", device="cuda", gpu_layers=99, flash_attention=True).key,
            EngineSettings(engine="torch", threads=2, dtype="bf16").key}
    assert len(keys) == 4
    assert EngineSettings(engine="llama.cpp", version="other", threads=2, kv_type="q8_0").key == LLAMA.key


@pytest.mark.parametrize("raw", [
    {"engine": "vllm"},
    {"engine": "llama.cpp", "threads": -1},
    {"engine": "llama.cpp", "threads": 10**400},
    {"engine": "llama.cpp", "threads": "two"},
    {"engine": "llama.cpp", "version": "x" * 5000},
])
def test_bad_settings_are_one_spec_error(raw):
    with pytest.raises(SpecError):
        MeasuredPoint.from_dict({"kind": "prefill", "prompt": 1, "context": 0, "batch": 1, "seconds": 1.0,
                                 "settings": raw})


def test_settings_that_are_not_an_object_are_refused():
    with pytest.raises(SpecError, match="settings must be an object"):
        MeasuredPoint.from_dict({"kind": "prefill", "prompt": 1, "context": 0, "batch": 1, "seconds": 1.0,
                                 "settings": [1, 2]})
