"""Tensor parallel is vLLM's: its expected figure never takes llama.cpp's published factors. With no
vLLM calibration kept for the machine it is the ceiling (with the link's all-reduces), saying so."""

from __future__ import annotations

import json

import pytest

from rooflab.core.app.resolve import engine_for
from rooflab.core.calibration.expectations import NO_VLLM_CALIBRATION, VLLM, expected_on
from rooflab.core.cli.main import main
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.choice import PlacementChoice
from rooflab.core.predict.parallel import Parallel, engine_of, parallel_estimate
from rooflab.core.report.expected import expected_request, expected_text
from rooflab.core.values.workload import Workload

W = Workload(prompt=512, answer=64)


def test_without_a_vllm_calibration_the_expected_figure_is_the_ceiling(qwen8b):
    m = load_machine("rtx-4090")
    ex = expected_on(qwen8b, m, engine=engine_of("tensor"))
    assert engine_of("tensor") == VLLM and ex is not None
    assert ex.machine.efficiency.is_identity and ex.replicas == ()
    assert ex.calibration.source == "none" and ex.calibration.engine_label == "vLLM"
    assert NO_VLLM_CALIBRATION in ex.notes
    two = Parallel.on(m, 2, "tensor")
    r = expected_request(qwen8b, ex, W, two)
    ceiling = parallel_estimate(qwen8b, m, W, two)
    assert r["expected_tpot_seconds"] == pytest.approx(ceiling.tpot, rel=1e-12)
    assert r["expected_tpot_seconds_low"] == r["expected_tpot_seconds_high"] == r["expected_tpot_seconds"]
    text = expected_text(qwen8b, ex, W, two)
    assert "expected with vLLM (no calibration: the ceiling)" in text and "no calibration for vLLM" in text


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


def test_predict_prices_tensor_parallel_as_vllm(capsys):
    # gpt-oss-120b on 2 and 4 A100 PCIe: the expected TPOT is the ceiling's (the all-reduces
    # included), not llama.cpp CUDA's factors (which gave 2.59 and 2.56 ms before)
    for devices in (2, 4):
        d = _predict(capsys, "--devices", str(devices), "--parallel", "tensor")
        r = d["request"]
        assert d["calibration"]["engine"] == "vLLM" and d["calibration"]["source"] == "none"
        assert NO_VLLM_CALIBRATION in d["calibration"]["notes"]
        assert r["expected_tpot_seconds"] == pytest.approx(r["tpot_seconds"], rel=1e-12)
        assert d["parallel"]["link_kind"] == ("nvlink" if devices == 2 else "pcie")
    layer = _predict(capsys, "--devices", "2", "--parallel", "layer")
    assert layer["calibration"]["engine"] == "llama.cpp CUDA"
    assert layer["request"]["expected_tpot_seconds"] > layer["request"]["tpot_seconds"]
