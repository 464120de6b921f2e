"""Presets, user profiles and the catalogue: data files with a source for every figure, and
profiles written atomically and read back unchanged."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rooflab.core.errors import ResourceError
from rooflab.core.files.atomic import write_atomic
from rooflab.core.files.paths import profiles_dir
from rooflab.core.io import load_model
from rooflab.core.io.catalogue import list_catalogue
from rooflab.core.io.presets import (
    broken_user_profiles,
    delete_user_profile,
    list_presets,
    list_user_profiles,
    load_machine,
    profile_key,
    save_user_profile,
    user_profile_exists,
)
from rooflab.core.predict.work import weight_bytes_read_per_token


def test_every_preset_has_sources_and_an_offload_tier():
    presets = list_presets()
    assert len(presets) >= 9
    for m in presets:
        assert {"bandwidth", "peak_flops", "memory"} <= set(m.sources), m.key
        assert m.has_offload, m.key


def test_every_catalogue_entry_loads_with_sources():
    for entry in list_catalogue():
        assert entry.sources.get("config"), entry.key
        spec = load_model(entry.key)
        assert weight_bytes_read_per_token(spec) <= spec.file_bytes
        assert spec.source == f"catalogue:{entry.key}"


def test_weights_override_on_catalogue_entry():
    q4 = load_model("qwen3-0.6b", weights="q4_k_m")
    bf16 = load_model("qwen3-0.6b")
    assert q4.weight_bytes < bf16.weight_bytes / 3
    assert "Q4_K_M" in q4.name


def test_user_profile_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLAB_CONFIG_DIR", str(tmp_path))
    mine = dataclasses.replace(load_machine("rtx-4090"), name="My 4090", bandwidth=950e9, key="")
    path = save_user_profile(mine)
    assert path.parent == profiles_dir() and path.name == "my-4090.json"
    again = load_machine("my-4090")
    assert again.bandwidth == 950e9 and again.name == "My 4090"
    assert load_machine(str(path)).bandwidth == 950e9
    assert [m.name for m in list_user_profiles()] == ["My 4090"]
    assert not list(path.parent.glob("*.tmp"))
    delete_user_profile("my-4090")
    assert list_user_profiles() == []
    with pytest.raises(ResourceError):
        delete_user_profile("my-4090")


def test_profile_keys_never_hide_behind_a_preset(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLAB_CONFIG_DIR", str(tmp_path))
    assert profile_key("My 4090") == "my-4090"
    assert profile_key("RTX 4090") == "my-rtx-4090" and profile_key("Measured") == "my-measured"
    path = save_user_profile(load_machine("rtx-4090"))        # keeps the preset's key: saved beside it
    assert path.stem == "my-rtx-4090" and user_profile_exists("rtx-4090")
    assert load_machine("rtx-4090").key == "rtx-4090" and load_machine("my-rtx-4090").bandwidth == 1008e9


def test_broken_profile_is_reported_not_fatal(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLAB_CONFIG_DIR", str(tmp_path))
    (tmp_path / "machines").mkdir()
    (tmp_path / "machines" / "bad.json").write_text("{oops")
    assert list_user_profiles() == []
    assert "bad.json" in broken_user_profiles()[0]
    with pytest.raises(ResourceError, match="not valid JSON"):
        load_machine("bad")


def test_write_atomic_keeps_old_file_on_failure(tmp_path):
    target = tmp_path / "profile.json"
    write_atomic(target, json.dumps({"a": 1}))

    with pytest.raises(TypeError):
        write_atomic(target, 12345)  # type: ignore[arg-type]
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["profile.json"]


def test_unknown_machine_lists_presets():
    with pytest.raises(ResourceError, match="dgx-spark"):
        load_machine("cray-1")
