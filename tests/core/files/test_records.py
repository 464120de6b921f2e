"""Record files and atomic writes: a file that cannot be used (corrupt, the wrong shape, a
folder or a pipe where the file belongs) is set aside under a name that never collides; a newer
rooflab's record is kept and ignored; temporary files a killed write left are cleaned up."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import pytest

from rooflab.core.files import atomic
from rooflab.core.files.records import FORMAT, load_record, read_record, set_aside, write_record


def _backups(path: Path, tag: str = "corrupt") -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.{tag}-*"))


def test_round_trip_and_format_number(tmp_path):
    path = write_record(tmp_path / "r.json", {"a": 1})
    assert json.loads(path.read_text())["format"] == FORMAT
    assert read_record(path) == {"format": FORMAT, "a": 1}


def test_non_finite_numbers_are_written_as_null(tmp_path):
    path = write_record(tmp_path / "r.json", {"worst": float("inf"), "median": float("nan")})
    assert "Infinity" not in path.read_text() and "NaN" not in path.read_text()
    assert read_record(path) == {"format": FORMAT, "worst": None, "median": None}


def test_well_formed_json_of_the_wrong_shape_is_set_aside(tmp_path, caplog):
    path = write_record(tmp_path / "r.json", {"runs": [1]})

    def build(data: dict) -> list:
        return [run["points"] for run in data["runs"]]      # TypeError: 'int' is not subscriptable

    with caplog.at_level(logging.WARNING):
        assert load_record(path, build) is None
    assert not path.exists() and len(_backups(path)) == 1
    assert "wrong shape" in caplog.text


@pytest.mark.parametrize("content", ['{"format": 1, "x": NaN}', "[" * 100_000, '{"format": 1, "n": ' + "1" * 5000 + "}",
                                     '{"format": "1"}', '{"format": true}', '{"format": 0}', "[1]"])
def test_unusable_json_is_set_aside(tmp_path, content):
    path = tmp_path / "r.json"
    path.write_text(content)
    assert read_record(path) is None
    assert not path.exists() and len(_backups(path)) == 1


def test_a_newer_rooflabs_record_is_kept_and_ignored(tmp_path, caplog):
    path = tmp_path / "r.json"
    path.write_text('{"format": 2, "runs": "a shape this rooflab does not know"}')
    with caplog.at_level(logging.WARNING):
        assert read_record(path) is None
        assert load_record(path, lambda data: data["runs"][0]["points"]) is None
    assert path.exists() and not _backups(path)
    assert "newer rooflab" in caplog.text
    # writing in its place keeps it beside, under a name that says why
    write_record(path, {"a": 1})
    assert read_record(path) == {"format": FORMAT, "a": 1}
    (kept,) = _backups(path, "newer")
    assert json.loads(kept.read_text())["format"] == 2


def test_a_folder_where_the_record_belongs_is_set_aside(tmp_path):
    path = tmp_path / "r.json"
    (path / "inside").mkdir(parents=True)
    assert read_record(path) is None
    assert not path.exists() and _backups(path)[0].is_dir()
    write_record(path, {"a": 1})
    assert read_record(path) == {"format": FORMAT, "a": 1}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_pipe_where_the_record_belongs_is_set_aside_without_blocking(tmp_path):
    path = tmp_path / "r.json"
    os.mkfifo(path)
    assert read_record(path) is None
    assert not os.path.lexists(path)


def test_set_aside_names_never_collide(tmp_path):
    path = tmp_path / "r.json"
    for i in range(3):                   # three in the same second
        path.write_text(f"broken {i}")
        assert set_aside(path, "test") is not None
    backups = _backups(path)
    assert len(backups) == 3
    assert sorted(p.read_text() for p in backups) == ["broken 0", "broken 1", "broken 2"]


def test_orphaned_temporary_files_are_cleaned_up(tmp_path):
    target = tmp_path / "r.json"
    old = tmp_path / ".r.json.abcd1234.tmp"          # as tempfile.mkstemp names them in write_atomic
    young = tmp_path / ".r.json.efgh5678.tmp"
    other = tmp_path / ".other.json.ijkl9012.tmp"
    for p in (old, young, other):
        p.write_text("half a write")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    os.utime(other, (two_hours_ago, two_hours_ago))
    atomic.write_atomic(target, "new")
    assert not old.exists()               # a killed write's leftover
    assert young.exists()                 # may be a write in progress elsewhere
    assert other.exists()                 # another file's: cleaned when that file is written
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".tmp") == sorted([young.name, other.name])
