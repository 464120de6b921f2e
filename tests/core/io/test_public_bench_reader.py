"""The public llama-bench file: the shipped one parses with a source for every row and figure,
and a malformed one is refused with one line naming the file and the problem."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from rooflab.core.errors import ResourceError
from rooflab.core.io.public_bench import (
    BACKENDS,
    default_path,
    default_paths,
    parse_test,
    read_public_benchmark_files,
    read_public_benchmarks,
)


def _shipped() -> dict[str, Any]:
    return json.loads(default_path().read_text(encoding="utf-8"))


def test_shipped_file_parses_with_sources_everywhere():
    data = read_public_benchmarks(default_path())
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


# --- the shipped files read together ------------------------------------------------------------

_MOE = {"qwen3-30b-a3b-q4_k_m", "qwen3-235b-a22b-q4_k_m", "glm-4.5-air-q4_k_m", "gpt-oss-20b-mxfp4",
        "gpt-oss-120b-mxfp4", "mixtral-8x7b-q4_k_m", "deepseek-v2-lite-q4_k_m", "deepseek-v3-q4_k_m"}


def test_all_shipped_files_merge():
    paths = default_paths()
    assert default_path() in paths and len(paths) >= 2
    data = read_public_benchmarks()
    first = read_public_benchmarks(default_path())
    assert len(data.rows) >= len(first.rows) + 600
    assert {m.backend for m in data.machines} == set(BACKENDS)
    for row in data.rows:
        assert row.source.url.startswith("https://"), row
        assert row.source.depth >= 0 and (row.source.devices is None or row.source.devices >= 1)
    for source in data.sources:
        # read while the project collected them: a real date, from the first collection to today
        assert source.url.startswith("https://"), source
        assert datetime.date(2026, 11, 30) <= datetime.date.fromisoformat(source.accessed) <= datetime.date.today()
    hash(data)


def test_merged_data_is_broad():
    data = read_public_benchmarks()
    families = {data.model(r.model).catalogue for r in data.rows}
    assert len(families) >= 8, families
    assert len(families & _MOE) >= 3, families
    assert len({r.weights for r in data.rows}) >= 5
    vulkan = {data.machine(r.machine).vendor for r in data.rows if data.machine(r.machine).backend == "vulkan"}
    assert len(vulkan - {None}) >= 2, vulkan
    assert any((r.source.devices or 1) > 1 for r in data.rows)


def test_new_row_fields_are_read():
    data = read_public_benchmarks()
    row = next(r for r in data.rows if r.source.ubatch is not None and r.source.type_k is not None)
    assert row.source.ubatch >= 1 and row.source.type_k in ("f16", "q8_0", "q4_0", "bf16", "f32")
    assert row.source.split_mode in (None, "none", "layer", "row")


def _broad() -> dict[str, Any]:
    broad = [p for p in default_paths() if p != default_path()][0]
    return json.loads(broad.read_text(encoding="utf-8"))


@pytest.mark.parametrize("field, value", [("ub", -1), ("b", "512"), ("n_cpu_moe", 2.5), ("devices", 0),
                                          ("split_mode", "diagonal"), ("type_k", "q3_k"), ("depth", -4096),
                                          ("host_bandwidth", -1.0), ("stddev", "wide")])
def test_bad_new_field_is_one_resource_error_naming_the_file(tmp_path, field, value):
    data = _broad()
    data["rows"][0]["source"][field] = value
    path = _write(tmp_path, data)
    with pytest.raises(ResourceError) as err:
        read_public_benchmark_files([default_path(), path])
    message = str(err.value)
    assert message.startswith(str(path)) and field in message and "\n" not in message


def test_bad_vendor_is_refused(tmp_path):
    data = _broad()
    data["machines"][0]["vendor"] = "NVIDIA Corp."
    path = _write(tmp_path, data)
    with pytest.raises(ResourceError, match="vendor"):
        read_public_benchmark_files([default_path(), path])


@pytest.mark.parametrize("kind", ["integrated", "cpu", 1])
def test_bad_machine_kind_is_refused(tmp_path, kind):
    data = _broad()
    gpu = next(m for m in data["machines"] if m["backend"] != "cpu")
    gpu["kind"] = kind
    path = _write(tmp_path, data)
    with pytest.raises(ResourceError) as err:
        read_public_benchmark_files([default_path(), path])
    message = str(err.value)
    assert message.startswith(str(path)) and "kind must be one of" in message and "\n" not in message


def test_machine_kind_is_stated_or_follows_the_back_end():
    data = read_public_benchmark_files(default_paths())
    kinds = {m.key: m.kind for m in data.machines}
    assert kinds["ryzen-ai-max-395-rocm"] == kinds["radeon-890m-vulkan"] == "unified"      # stated: AMD APUs
    assert kinds["m1-max-32c"] == "unified" and kinds["epyc-7702"] == "cpu" and kinds["rtx-4090"] == "gpu"


def test_colliding_keys_between_files_are_refused(tmp_path):
    data = _shipped()
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ResourceError) as err:
        read_public_benchmark_files([default_path(), other])
    message = str(err.value)
    assert str(other) in message and str(default_path()) in message and "\n" not in message


def test_rows_may_use_what_another_file_defines(tmp_path):
    row = dict(_shipped()["rows"][0])
    extra = {"sources": [], "models": [], "machines": [], "rows": [row]}
    path = _write(tmp_path, extra)
    merged = read_public_benchmark_files([default_path(), path])
    assert len(merged.rows) == len(read_public_benchmarks(default_path()).rows) + 1
    with pytest.raises(ResourceError, match="unknown machine"):
        read_public_benchmark_files([path])


def _heldout_file() -> Path | None:
    repo = Path(__file__).resolve().parents[3]
    for candidate in (repo.parent / "shared" / "heldout-sources.txt", repo / "shared" / "heldout-sources.txt"):
        if candidate.is_file():
            return candidate
    return None


def test_no_held_out_source_in_resource_files():
    listed = _heldout_file()
    if listed is None:
        pytest.skip("no held-out source list next to this checkout")
    patterns = [line.strip().lower() for line in listed.read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith("#")]
    for path in default_paths():
        text = path.read_text(encoding="utf-8").lower()
        assert not [p for p in patterns if p in text], path
