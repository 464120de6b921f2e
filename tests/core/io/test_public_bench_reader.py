"""The public llama-bench file: the shipped one parses with a source for every row and figure,
and a malformed one is refused with one line naming the file and the problem."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rooflab.core.errors import ResourceError
from rooflab.core.io.public_bench import BACKENDS, default_path, parse_test, read_public_benchmarks


def _shipped() -> dict[str, Any]:
    return json.loads(default_path().read_text(encoding="utf-8"))


def test_shipped_file_parses_with_sources_everywhere():
    data = read_public_benchmarks()
    assert len(data.rows) >= 200 and len(data.machines) >= 25
    assert {m.backend for m in data.machines} == set(BACKENDS)
    for row in data.rows:
        assert row.source.url.startswith("https://"), row
        assert row.machine in {m.key for m in data.machines}
        assert row.tokens_per_second > 0
    for machine in data.machines:
        figures = dict(machine.sources)
        assert figures["bandwidth"] and figures["peak_fp16"], machine.key
        assert 1e9 < machine.bandwidth < 1e13 and 1e11 < machine.peak_fp16 < 1e16, machine.key
    for source in data.sources:
        assert source.url.startswith("https://") and source.accessed == "2026-11-30"
    hash(data)          # frozen all the way down: results computed from it can be cached


def test_each_backend_has_generation_and_prompt_rows():
    data = read_public_benchmarks()
    for backend in BACKENDS:
        kinds = {r.test.kind for r in data.rows if data.machine(r.machine).backend == backend}
        assert kinds == {"prefill", "decode"}, backend


def test_parse_test():
    assert parse_test("pp512").kind == "prefill" and parse_test("pp512").tokens == 512
    assert parse_test("tg128").kind == "decode" and parse_test("tg128").tokens == 128
    for bad in ("pg128", "tg0", "tg", "pp512@d1024", " tg128"):
        with pytest.raises(ValueError):
            parse_test(bad)


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "bench.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def _broken(change: str) -> Any:
    data = _shipped()
    row, machine = data["rows"][0], data["machines"][0]
    if change == "unknown machine":
        row["machine"] = "no-such-gpu"
    elif change == "negative speed":
        row["tokens_per_second"] = -3.0
    elif change == "bad test":
        row["test"] = "pg128"
    elif change == "no url":
        row["source"]["url"] = "see the forum"
    elif change == "bad backend":
        machine["backend"] = "opencl"
    elif change == "no figure source":
        machine["sources"].pop("peak_fp16")
    elif change == "text speed":
        row["tokens_per_second"] = "fast"
    elif change == "duplicate machine":
        data["machines"].append(machine)
    elif change == "no rows":
        data["rows"] = []
    elif change == "rows not a list":
        data["rows"] = {"a": 1}
    return data


@pytest.mark.parametrize("change", ["unknown machine", "negative speed", "bad test", "no url", "bad backend",
                                    "no figure source", "text speed", "duplicate machine", "no rows",
                                    "rows not a list"])
def test_malformed_file_is_one_resource_error(tmp_path, change):
    path = _write(tmp_path, _broken(change))
    with pytest.raises(ResourceError) as err:
        read_public_benchmarks(path)
    message = str(err.value)
    assert message.startswith(str(path)) and "\n" not in message


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", "", '{"rows": NaN}'])
def test_not_json_or_wrong_shape_is_one_resource_error(tmp_path, text):
    path = _write(tmp_path, text)
    with pytest.raises(ResourceError) as err:
        read_public_benchmarks(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_missing_file_is_resource_error(tmp_path):
    with pytest.raises(ResourceError, match="no such file"):
        read_public_benchmarks(tmp_path / "absent.json")
