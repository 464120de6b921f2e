"""The measurement store: round trips, atomic files, corrupt files set aside (never a crash),
ROOFLAB_DATA_DIR respected, and the keys the CLI's --machine measured / --calibrated use."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rooflab.core.calibration import store
from rooflab.core.calibration.calibrate import calibrate
from rooflab.core.io import load_model, presets
from rooflab.core.io.presets import load_machine
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import MeasuredPoint


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROOFLAB_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def profile() -> MachineProfile:
    return MachineProfile(name="This machine, measured (test)", bandwidth=40e9, peak_flops={"fp32": 2e11},
                          memory=16e9, default_dtype="fp32", kind="cpu", key="measured",
                          sources={"bandwidth": "test"})


POINTS = [MeasuredPoint(kind="prefill", prompt=16, context=0, batch=1, seconds=0.2),
          MeasuredPoint(kind="decode", prompt=1, context=20, batch=1, seconds=0.1, median=0.11, repeats=8)]


def test_measured_machine_round_trip(data):
    assert presets.load_measured_machine() is None
    path = presets.save_measured_machine(profile(), {"device": "cpu"})
    assert path.is_relative_to(data)
    loaded = presets.load_measured_machine()
    assert loaded is not None and loaded.key == "measured" and loaded.bandwidth == 40e9
    assert presets.load_machine_measurement() == {"device": "cpu"}
    assert load_machine("measured").bandwidth == 40e9        # what `predict --machine measured` reads


def test_measurements_append_runs(data):
    store.save_measurement("m-1", "measured", POINTS, {"dtype": "fp32"}, label="tiny", source="/x/config.json")
    store.save_measurement("m-1", "measured", POINTS[:1], {"dtype": "bf16"})
    runs = store.load_measurements("m-1", "measured")
    assert [r["meta"]["dtype"] for r in runs] == ["fp32", "bf16"]
    assert runs[0]["points"] == POINTS
    raw = json.loads((data / "measurements" / "m-1" / "measured.json").read_text())
    assert raw["label"] == "tiny" and raw["format"] == 1


def test_calibration_by_key_and_by_source(data, tmp_path):
    spec = load_model("qwen3-0.6b", weights="fp32")
    points = [MeasuredPoint(kind="decode", prompt=1, context=t, batch=1, seconds=0.12 + t * 1e-5) for t in (4, 1000)]
    cal = calibrate(spec, profile(), points, kv_type="f32", dtype="fp32")
    key = store.model_key(spec)
    store.save_calibration(key, "measured", cal, source="qwen3-0.6b")
    assert store.load_calibration(key, "measured") == cal.efficiency
    assert store.load_calibration("qwen3-0.6b", "measured") == cal.efficiency   # by the path the CLI knows
    assert store.load_calibration(key, "other-machine") is None
    assert store.load_calibration_record(key, "measured").points == tuple(points)
    assert isinstance(cal.efficiency, Efficiency)


def test_model_key_is_structural():
    fp32 = load_model("qwen3-0.6b", weights="fp32")
    again = load_model("qwen3-0.6b", weights="fp32")
    bf16 = load_model("qwen3-0.6b", weights="bf16")
    assert store.model_key(fp32) == store.model_key(again)
    assert store.model_key(fp32) != store.model_key(bf16)
    assert store.model_key(fp32).startswith("qwen3-")


@pytest.mark.parametrize("content", ["{not json", "[]", '{"format": 0}', '{"format": "2"}', "\xff"])
def test_corrupt_files_are_set_aside(data, content):
    path = data / "machines" / "measured.json"
    path.parent.mkdir(parents=True)
    path.write_text(content, encoding="latin-1")
    assert presets.load_measured_machine() is None
    assert not path.exists()
    backups = list(path.parent.glob("measured.json.corrupt-*"))
    assert len(backups) == 1
    presets.save_measured_machine(profile())          # a fresh file replaces it
    assert presets.load_measured_machine() is not None


def test_bad_profile_inside_a_good_file(data):
    path = data / "machines" / "measured.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"format": 1, "profile": {"name": "x", "bandwidth": -1}}))
    assert presets.load_measured_machine() is None
    assert list(path.parent.glob("measured.json.corrupt-*"))


def test_writes_are_atomic(data, monkeypatch):
    presets.save_measured_machine(profile())
    import rooflab.core.files.atomic as atomic

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "replace", fail)
    with pytest.raises(OSError):
        presets.save_measured_machine(profile(), {"device": "changed"})
    assert presets.load_machine_measurement() is None           # the old file, intact
    assert presets.load_measured_machine() is not None
    assert not [p for p in (data / "machines").iterdir() if p.suffix == ".tmp"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG folders are Linux's")
def test_default_folder_is_the_platform_data_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("ROOFLAB_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    presets.save_measured_machine(profile())
    assert (tmp_path / "xdg" / "rooflab" / "machines" / "measured.json").is_file()


@pytest.mark.parametrize("name", ["gemma3", "qwen3_moe", "gpt_oss", "mistral"])
def test_a_config_and_the_gguf_written_from_it_share_a_model_key(tmp_path, name):
    """gemma3_text is gemma3 in a GGUF and mistral is llama: the key follows llama.cpp's name,
    so points measured on a generated GGUF land on the config's curves."""
    from rooflab.core.io.gguf import read_gguf
    from tests.factories.llm_configs import random_gguf, small_configs, spec_of, weights_for

    configs = small_configs()
    config = configs.get(name) or dict(configs["llama"], model_type="mistral")
    weights = weights_for(name)
    gguf = read_gguf(random_gguf(tmp_path / f"{name}.gguf", config, weights))
    assert store.model_key(gguf) == store.model_key(spec_of(config, weights))


# --- hostile stored files (issue 11) --------------------------------------------------------------

def _file(data: Path, relative: str, content: str) -> Path:
    path = data / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


def _set_aside(path: Path) -> bool:
    return not path.exists() and bool(list(path.parent.glob(f"{path.name}.corrupt-*")))


MEASUREMENT = "measurements/m-1/measured.json"
CALIBRATION = "calibrations/m-1/measured.json"


@pytest.mark.parametrize("runs", ["[1]", "5", '[{"points": 5}]', '[{"points": [1]}]', '[{"meta": [1], "points": []}]',
                                  '[{"points": [{"kind": "decode", "prompt": 1e300, "context": 0, "batch": 1, '
                                  '"seconds": 0.1}]}]'])
def test_measurement_records_of_the_wrong_shape_are_set_aside(data, runs):
    """runs: [1] once crashed the window at start-up and runs: 5 the next save."""
    path = _file(data, MEASUREMENT, f'{{"format": 1, "runs": {runs}}}')
    assert store.load_measurements("m-1", "measured") == []
    assert _set_aside(path)
    path = _file(data, MEASUREMENT, f'{{"format": 1, "runs": {runs}}}')
    store.save_measurement("m-1", "measured", POINTS)
    assert [r["points"] for r in store.load_measurements("m-1", "measured")] == [POINTS]


def test_a_stored_point_with_an_infinite_prompt_sets_the_file_aside(data):
    path = _file(data, MEASUREMENT, '{"format": 1, "runs": [{"points": [{"kind": "decode", "prompt": Infinity, '
                                     '"context": 0, "batch": 1, "seconds": 0.1}]}]}')
    assert store.load_measurements("m-1", "measured") == []
    assert _set_aside(path)


def _calibration_record() -> dict:
    spec = load_model("qwen3-0.6b", weights="fp32")
    points = [MeasuredPoint(kind="decode", prompt=1, context=t, batch=1, seconds=0.12 + t * 1e-5) for t in (4, 1000)]
    cal = calibrate(spec, profile(), points, kv_type="f32", dtype="fp32")
    return {"format": 1, "model": "m-1", "machine": "measured", "source": "/x/model.gguf",
            "calibration": cal.to_dict()}


@pytest.mark.parametrize("change", [{"before": [1]}, {"after": {"all": 5}}, {"points": 5}, {"efficiency": [1.0]},
                                    {"predicted_before": [{"a": 1}]}, {"notes": 3}])
def test_calibration_records_of_the_wrong_shape_are_set_aside(data, change):
    record = _calibration_record()
    record["calibration"].update(change)
    path = _file(data, CALIBRATION, json.dumps(record))
    assert store.load_calibration_record("m-1", "measured") is None
    assert _set_aside(path)
    _file(data, CALIBRATION, json.dumps({**record, "source": 5}))
    assert store.load_calibration("/x/model.gguf", "measured") is None        # by source: the same


def test_a_folder_where_a_store_file_belongs_is_set_aside(data):
    (data / MEASUREMENT).mkdir(parents=True)
    (data / CALIBRATION).mkdir(parents=True)
    (data / "machines" / "measured.json").mkdir(parents=True)
    assert store.load_measurements("m-1", "measured") == []
    assert store.load_calibration_record("m-1", "measured") is None
    assert presets.load_measured_machine() is None
    for relative in (MEASUREMENT, CALIBRATION, "machines/measured.json"):
        assert _set_aside(data / relative), relative
    store.save_measurement("m-1", "measured", POINTS)
    assert store.load_measurements("m-1", "measured")[0]["points"] == POINTS


def test_a_record_from_a_newer_rooflab_is_kept_and_ignored(data):
    path = _file(data, MEASUREMENT, '{"format": 2, "runs": {"a": "shape this rooflab does not know"}}')
    assert store.load_measurements("m-1", "measured") == []
    assert path.exists() and not list(path.parent.glob("*.corrupt-*"))
    store.save_measurement("m-1", "measured", POINTS)         # kept beside, not overwritten
    assert len(store.load_measurements("m-1", "measured")) == 1
    (kept,) = path.parent.glob("measured.json.newer-*")
    assert json.loads(kept.read_text())["format"] == 2


def test_measured_machine_of_the_wrong_shape_is_set_aside(data):
    path = _file(data, "machines/measured.json", '{"format": 1, "profile": [1]}')
    assert presets.load_measured_machine() is None and _set_aside(path)
    path = _file(data, "machines/measured.json", '{"format": 1, "profile": {"name": "x", "bandwidth": 1e-300, '
                                                 '"peak_flops": {"fp32": 1e12}, "memory": 1e9, '
                                                 '"default_dtype": "fp32"}}')
    assert presets.load_measured_machine() is None and _set_aside(path)


def test_fuzz_stored_files_never_raise(tmp_path):
    from tests.factories.fuzz import run_surface, store_surface

    tally = run_surface(store_surface(tmp_path / "seeds"), 200, tmp_path / "cases", seed=20250101)
    assert not tally.crashes, "\n".join(tally.crashes[:5])
    assert not tally.hangs, tally.hangs[:5]
    assert tally.peak < 64 << 20 and tally.slowest < 10.0
    assert tally.accepted > 20 and tally.errors > 5       # errors: load_machine refusing a mutated profile


EVIL = "\x1b]0;pwned\x07\x1b[2J\x9b31m"


def _evil_calibration(machine: str = "measured"):
    from rooflab.core.values.calibration import Accuracy, EngineCalibration, Rates

    rates = Rates(bandwidth={f"q8{EVIL}": 20e9}, prefill_flops={"q8": 100e9}, decode_flops={"q8": 80e9},
                  cache_bandwidth=5e9, pass_seconds=1e-3)
    return EngineCalibration(machine_key=machine, machine_name=f"box{EVIL}", replicates=(rates,),
                             accuracy={f"in_sample{EVIL}": {"decode": Accuracy(median=0.1, worst=0.2, count=3)}},
                             engine_key=f"llama.cpp{EVIL}",
                             engine_label=f"llama.cpp{EVIL}", settings={"backend": f"cpu{EVIL}", "threads": 2},
                             date=f"2026-01-01{EVIL}", models=(f"a{EVIL}",), machine_bandwidth=30e9,
                             machine_flops=150e9, central=rates, notes=(f"note\n{EVIL}",), model_keys=(f"k{EVIL}",))


def _text_of(cal) -> str:
    return json.dumps(cal.to_dict(), ensure_ascii=False)


def test_a_kept_engine_calibration_comes_back_printable(data):
    """Its labels, names and notes are printed in "expected with ..." lines (issue 15)."""
    store.save_engine_calibration(_evil_calibration())
    (found,) = store.engine_calibrations("measured")
    assert not any(c in _text_of(found) for c in "\x1b\x07\x9b\n")
    assert found.engine_label == "llama.cpp]0;pwned[2J31m" and found.settings["threads"] == 2
    assert store.load_engine_calibration("measured") == found


def test_a_cached_published_calibration_comes_back_printable():
    from rooflab.core.calibration import expectations

    cal, peaks, offsets, share = expectations._cached({"calibration": _evil_calibration("").to_dict(),
                                                       "peaks": {"x": 1e12}})
    assert not any(c in _text_of(cal) for c in "\x1b\x07\x9b\n") and peaks == {"x": 1e12} and share is None


def _import_of(rows: int) -> list[MeasuredPoint]:
    """The points of a llama-bench file of ``rows`` rows, as ``rooflab measure import`` keeps them."""
    from rooflab.core.values.measured import EngineSettings

    settings = EngineSettings(engine="llama-bench", version="b5163 (8cf427ff)", device="cuda", threads=8,
                              gpu_layers=999, flash_attention=True, batch_size=2048, ubatch_size=512)
    return [MeasuredPoint(kind="prefill", prompt=1 + i, context=0, batch=1, seconds=0.07 + i * 1e-6, median=0.071,
                          repeats=5, settings=settings, source="llama-bench b5163") for i in range(rows)]


def test_the_history_stays_under_the_size_it_is_read_back_at(data, monkeypatch):
    """Issue 15: runs were capped by count only, so the 20th import of a 4,000-row file made the
    history larger than the 16 MiB rooflab reads back, and the next read set it all aside. Now
    the oldest runs go first, and the history always loads. Scaled down 16 times (250 rows
    against 1 MiB: the same share of the cap per import), since each save of a 12 MB history
    reads and writes it whole, seconds apiece."""
    from rooflab.core.files import records

    monkeypatch.setattr(records, "MAX_RECORD_BYTES", 1 << 20)
    points = _import_of(250)
    path = data / MEASUREMENT
    for n in range(1, 23):
        store.save_measurement("m-1", "measured", points, {"import": n})
        assert path.stat().st_size <= store.HISTORY_SHARE * records.MAX_RECORD_BYTES
    runs = store.load_measurements("m-1", "measured")
    assert len(runs) >= 3 and [r["meta"]["import"] for r in runs] == list(range(23 - len(runs), 23))
    assert runs[-1]["points"] == points and not _set_aside(path)


def test_a_run_too_large_for_any_history_is_refused_and_the_history_kept(data, monkeypatch):
    from rooflab.core.errors import ResourceError
    from rooflab.core.files import records

    store.save_measurement("m-1", "measured", POINTS)
    monkeypatch.setattr(records, "MAX_RECORD_BYTES", 200_000)      # about 500 imported points
    with pytest.raises(ResourceError, match="1,000 points are .* MB .* not kept"):
        store.save_measurement("m-1", "measured", _import_of(1000))
    assert store.load_measurements("m-1", "measured")[0]["points"] == POINTS
