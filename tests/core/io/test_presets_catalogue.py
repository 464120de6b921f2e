"""Presets, user profiles and the catalogue: data files with a source for every figure, and
profiles written atomically and read back unchanged."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from pathlib import Path

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


# --- hostile profile files (issue 11) -------------------------------------------------------------

PROFILE = {"name": "My box", "bandwidth": 100e9, "peak_flops": {"fp16": 1e13}, "memory": 32e9}


def _profile_error(ref: str, *words: str) -> str:
    with pytest.raises(ResourceError) as info:
        load_machine(ref)
    message = str(info.value)
    assert "\n" not in message and len(message) < 500, message
    for word in words:
        assert word in message, message
    return message


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX special files")
def test_special_files_as_a_profile_are_refused_by_kind(tmp_path):
    (tmp_path / "dir.json").mkdir()
    _profile_error(str(tmp_path / "dir.json"), "is a folder")
    _profile_error(str(tmp_path) + "/", "is a folder")
    os.symlink(tmp_path / "b.json", tmp_path / "a.json")
    os.symlink(tmp_path / "a.json", tmp_path / "b.json")
    _profile_error(str(tmp_path / "a.json"), "loop")
    os.mkfifo(tmp_path / "pipe.json")
    _profile_error(str(tmp_path / "pipe.json"), "named pipe")
    _profile_error(str(tmp_path / "missing.json"), "no such file")


@pytest.mark.skipif(not Path("/dev/stdin").exists(), reason="no /dev/stdin")
def test_dev_stdin_as_a_profile_says_what_it_is():
    if stat.S_ISREG(os.fstat(0).st_mode):
        pytest.skip("stdin is a regular file here")
    from rooflab.core.files.capped import file_kind

    _profile_error("/dev/stdin", file_kind(os.fstat(0).st_mode))        # said "no such machine profile file"


@pytest.mark.parametrize(("text", "word"), [
    ("[" * 100_000, "deeper"),
    ('{"name": "x", "bandwidth": ' + "1" * 5000 + "}", "5,000 digits"),
    ('{"name": "x", "bandwidth": NaN, "peak_flops": {"fp16": 1e13}, "memory": 1e9}', "NaN"),
    (json.dumps({**PROFILE, "bandwidth": 1e-300}), "bandwidth"),
    (json.dumps({**PROFILE, "peak_flops": {"fp16": 1e308}}), "peak_flops"),
    (json.dumps({**PROFILE, "memory": [1]}), "memory"),
])
def test_hostile_profile_files_are_one_line(tmp_path, monkeypatch, text, word):
    path = tmp_path / "p.json"
    path.write_text(text)
    _profile_error(str(path), word)
    monkeypatch.setenv("ROOFLAB_CONFIG_DIR", str(tmp_path / "config"))
    (tmp_path / "config" / "machines").mkdir(parents=True)
    (tmp_path / "config" / "machines" / "bad.json").write_text(text)
    assert list_user_profiles() == [] and word in broken_user_profiles()[0]


def test_terminal_escapes_in_a_profile_are_stripped(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({**PROFILE, "name": "evil\x1b]0;pwned\x07\x1b[2J box", "key": "\x1b[2J",
                                "notes": "a\nb\x1b[31m"}))
    machine = load_machine(str(path))
    for text in (machine.name, machine.key, machine.notes):
        assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in text), repr(text)
