"""Tensor parallel is vLLM's: its expected figure never takes llama.cpp's published factors. With no
vLLM calibration kept for the machine there is none, and the output says why: a ceiling is never
labelled expected."""

from __future__ import annotations

import json

from rooflab.core.app.resolve import engine_for
from rooflab.core.calibration.expectations import NO_VLLM_CALIBRATION, VLLM, expected_on, missing_expected
from rooflab.core.cli.main import main
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.choice import PlacementChoice
from rooflab.core.predict.parallel import engine_of


def test_without_a_vllm_calibration_there_is_no_expected_figure(qwen8b):
    m = load_machine("rtx-4090")
    assert engine_of("tensor") == VLLM
    assert expected_on(qwen8b, m, engine=engine_of("tensor")) is None
    assert missing_expected(m, VLLM) == NO_VLLM_CALIBRATION and "no expected figure" in NO_VLLM_CALIBRATION
    # the usual engine has its published figure and nothing to explain
    assert expected_on(qwen8b, m) is not None and missing_expected(m, None) == ""


def test_the_one_device_and_layer_split_figures_keep_llama_cpps_factors(qwen8b):
    m = load_machine("rtx-4090")
    ex = expected_on(qwen8b, m)
    assert ex is not None and ex.calibration.source == "public" and not ex.machine.efficiency.is_identity
    assert engine_for(PlacementChoice(devices=2, parallel="layer")) is None   # whatever applies: llama.cpp's
    assert engine_for(PlacementChoice(devices=2, parallel="tensor")) == VLLM
    assert engine_for(PlacementChoice(devices=1, parallel="tensor")) is None      # one device: llama.cpp


def _predict(capsys, *argv):
    code = main(["predict", "--model", "gpt-oss-120b-mxfp4", "--machine", "a100-pcie-80gb", "--contexts", "0",
                 "--batches", "1", "--prompts", "512", "--json", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_predict_shows_no_expected_figure_for_tensor_parallel(capsys):
    # gpt-oss-120b on 2 and 4 A100 PCIe under vLLM's tensor parallel: no expected TPOT (it was the
    # ceiling, 2-11x above what users measured), the ceiling with its all-reduces, and why
    for devices in (2, 4):
        d = _predict(capsys, "--devices", str(devices), "--parallel", "tensor")
        assert "calibration" not in d and "expected_tpot_seconds" not in d["request"]
        assert d["request"]["tpot_seconds"] > 0
        assert d["parallel"]["link_kind"] == ("nvlink" if devices == 2 else "pcie")
    code = main(["predict", "--model", "gpt-oss-120b-mxfp4", "--machine", "a100-pcie-80gb", "--contexts", "0",
                 "--batches", "1", "--prompts", "512", "--devices", "2", "--parallel", "tensor"])
    out = capsys.readouterr().out
    assert code == 0 and f"expected: none ({NO_VLLM_CALIBRATION})" in out and "expected with vLLM" not in out
    layer = _predict(capsys, "--devices", "2", "--parallel", "layer")
    assert layer["calibration"]["engine"] == "llama.cpp CUDA"
    assert layer["request"]["expected_tpot_seconds"] > layer["request"]["tpot_seconds"]
