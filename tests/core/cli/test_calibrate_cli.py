"""``rooflab measure calibrate`` in llama.cpp on tiny generated models, then a model it never
ran predicted on this machine: expected figures beside the ceiling in ``predict --json``."""

from __future__ import annotations

import json

import pytest

from rooflab.core.calibration import store
from rooflab.core.calibration.models import CalibrationModel
from rooflab.core.cli.main import main
from rooflab.core.io import presets
from rooflab.core.measure import calibration_run
from rooflab.core.values.machine import MachineProfile
from tests.factories import needs
from tests.factories.llm_configs import llama_config

needs.llama_cpp(module_level=True)

TINY = (
    CalibrationModel(key="tiny-q4", description="", weights="q4_k_m",
                     config=llama_config(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                         num_key_value_heads=2, intermediate_size=512, vocab_size=1000)),
    CalibrationModel(key="tiny-deep-q4", description="", weights="q4_k_m",
                     config=llama_config(hidden_size=192, num_hidden_layers=6, num_attention_heads=3,
                                         num_key_value_heads=1, intermediate_size=384, vocab_size=1000)),
    CalibrationModel(key="tiny-q8", description="", weights="q8_0",
                     config=llama_config(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                         num_key_value_heads=2, intermediate_size=512, vocab_size=1000)),
    CalibrationModel(key="tiny-deep-q8", description="", weights="q8_0",
                     config=llama_config(hidden_size=192, num_hidden_layers=6, num_attention_heads=3,
                                         num_key_value_heads=1, intermediate_size=384, vocab_size=1000)),
)
HERE = MachineProfile(name="this machine (measured)", bandwidth=30e9, peak_flops={"fp32": 150e9}, memory=16e9,
                      default_dtype="fp32", kind="cpu", key="measured")


@pytest.fixture
def calibrated(monkeypatch, capsys):
    """A calibration of llama.cpp at 1 thread on this machine, from the tiny set, quick sweeps."""
    monkeypatch.setattr(calibration_run, "calibration_models", lambda engine: TINY)
    presets.save_measured_machine(HERE)
    code = main(["measure", "calibrate", "--threads", "1", "--repeats", "1", "--quick", "--keep-machine", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_calibrate_fits_scores_out_of_sample_and_keeps(calibrated):
    cal = calibrated["calibration"]
    assert cal["machine_key"] == "measured" and cal["engine_key"].startswith("llama.cpp cpu t1")
    assert cal["models"] == [m.key for m in TINY]
    assert set(cal["accuracy"]) == {"in_sample", "leave_one_model_out", "extrapolation"}
    for phase in ("prefill", "decode", "batch"):
        assert cal["accuracy"]["leave_one_model_out"][phase]["count"] > 0
    assert cal["central"]["bandwidth"].keys() >= {"k-quant", "q8"}
    assert all(f["low"] <= f["value"] <= f["high"] for f in calibrated["factors"])
    kept = store.load_engine_calibration("measured")
    assert kept is not None and kept.engine_key == cal["engine_key"]


def test_a_model_never_measured_gets_expected_figures_beside_the_ceiling(calibrated, capsys):
    code = main(["predict", "--model", "qwen3-0.6b", "--weights", "q4_k_m", "--machine", "measured", "--json",
                 "--contexts", "0,2048", "--batches", "1,8", "--prompts", "64,512"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0
    for row in d["decode"]:
        for name in ("expected_seconds", "expected_tokens_per_second_per_sequence", "expected_tokens_per_second_total"):
            assert row[f"{name}_low"] <= row[name] <= row[f"{name}_high"]
        assert row["expected_tokens_per_second_total"] == pytest.approx(row["batch"] / row["expected_seconds"])
    for row in d["prefill"]:
        assert row["expected_seconds_low"] <= row["expected_seconds"] <= row["expected_seconds_high"]
        assert row["expected_tokens_per_second"] == pytest.approx(row["prompt"] / row["expected_seconds"])
    r = d["request"]
    assert r["expected_tpot_seconds_low"] <= r["expected_tpot_seconds"] <= r["expected_tpot_seconds_high"]
    assert d["calibration"]["models"] == [m.key for m in TINY]
    assert "in_sample" not in d["calibration"]["accuracy"]       # fit quality is labelled apart
    assert d["calibration"]["fit_quality_in_sample"]
    code = main(["predict", "--model", "qwen3-0.6b", "--machine", "measured", "--json", "--ceiling-only"])
    assert "calibration" not in json.loads(capsys.readouterr().out)
    code = main(["predict", "--model", "qwen3-0.6b", "--machine", "measured"])
    text = capsys.readouterr().out
    assert "expected with llama.cpp" in text and "did not see" in text


def test_a_preset_shows_its_back_ends_published_efficiency(capsys):
    assert main(["predict", "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["calibration"]["source"] == "public" and "CUDA" in d["calibration"]["engine"]
    assert d["request"]["expected_tpot_seconds"] > d["request"]["tpot_seconds"]
    assert "leave_one_machine_out" in d["calibration"]["accuracy"]


def test_calibrate_refuses_bad_options_in_one_line(capsys):
    with pytest.raises(SystemExit) as stop:             # the argument's own check, before anything runs
        main(["measure", "calibrate", "--threads", "0"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "threads" in err


def test_a_model_timed_after_calibration_reports_the_calibrations_accuracy_on_it(calibrated, capsys, tmp_path):
    """The gap report's accuracy is the machine's calibration predicting a model it never saw;
    the model's own fit is reported as fit quality."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(llama_config(hidden_size=320, num_hidden_layers=5, num_attention_heads=5,
                                              num_key_value_heads=1, intermediate_size=640, vocab_size=1000)))
    argv = ["measure", "model", str(config), "--engine", "llamacpp", "--weights", "q4_k_m", "--threads", "1",
            "--repeats", "2", "--prompts", "16,64", "--depths", "0,256", "--contexts", "64", "--batches", "1,2",
            "--steps", "4"]
    assert main([*argv, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["engine_calibration"].startswith("llama.cpp")
    # every phase whose points were not marked disturbed (a busy test machine marks some)
    assert d["accuracy_out_of_sample"] and set(d["accuracy_out_of_sample"]) <= {"prefill", "decode", "batch"}
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "which never saw this model" in text and "fit quality of this model's own fit (in sample" in text


def test_the_expected_request_sits_on_the_placement_the_headline_uses(capsys):
    """gpt-oss-120b on an RTX 4090 with 64 GB of host memory: experts on the CPU, and the
    expected TPOT is that placement's (the back end's factors on its clocks), not the 3.65 ms of
    a model that would have had to fit on the card."""
    assert main(["predict", "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["fits"] and d["placement"]["cpu_moe"] > 0
    r = d["request"]
    # the host's part is bound by its arithmetic in the expected figure (the preset names no host
    # CPU: an 8-core desktop, at offload_terms.HOST_EXPERT_DECODE_COMPUTE), about 4.5x the ceiling
    assert r["tpot_seconds"] < r["expected_tpot_seconds"] < 6 * r["tpot_seconds"]
    assert r["expected_tpot_seconds_low"] <= r["expected_tpot_seconds"] <= r["expected_tpot_seconds_high"]
    assert r["expected_tpot_seconds"] > 0.01           # far from the all-on-card 3.65 ms
