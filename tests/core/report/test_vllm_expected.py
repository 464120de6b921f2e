"""Tensor parallel is vLLM's: its expected figure never takes llama.cpp's published factors. It takes
a vLLM calibration kept for the machine, else vLLM's published one where its runs were (NVIDIA GPUs
over NVLink), else there is none and the output says why: a ceiling is never labelled expected."""

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
    why = missing_expected(qwen8b, m, VLLM)          # two 4090s all-reduce over PCIe: no published vLLM run did
    assert why is not None and why.line.startswith(NO_VLLM_CALIBRATION) and "no expected figure" in why.line
    assert "PCIe" in why.reason and why.reason in why.line
    # the usual engine has its published figure and nothing to explain
    assert expected_on(qwen8b, m) is not None and missing_expected(qwen8b, m, None) is None


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


def test_predict_shows_vllms_figure_over_nvlink_and_none_over_pcie(capsys):
    # gpt-oss-120b on A100 PCIe cards under vLLM's tensor parallel: two joined by their NVLink
    # bridge take vLLM's published calibration (never faster than the ceiling); four all-reduce over
    # PCIe, which no published vLLM run did: no expected TPOT (it was the ceiling, 2-11x above what
    # users measured), the ceiling with its all-reduces, and why
    two = _predict(capsys, "--devices", "2", "--parallel", "tensor")
    assert two["parallel"]["link_kind"] == "nvlink" and two["calibration"]["engine"] == "vLLM"
    assert two["request"]["expected_tpot_seconds"] > two["request"]["tpot_seconds"] > 0
    four = _predict(capsys, "--devices", "4", "--parallel", "tensor")
    assert four["parallel"]["link_kind"] == "pcie"
    assert "calibration" not in four and "expected_tpot_seconds" not in four["request"]
    assert four["expected_missing"].startswith(NO_VLLM_CALIBRATION) and "over PCIe" in four["expected_missing"]
    assert "expected_missing" not in two
    assert four["request"]["tpot_seconds"] > 0
    code = main(["predict", "--model", "gpt-oss-120b-mxfp4", "--machine", "a100-pcie-80gb", "--contexts", "0",
                 "--batches", "1", "--prompts", "512", "--devices", "4", "--parallel", "tensor"])
    out = capsys.readouterr().out
    assert code == 0 and f"expected: none ({NO_VLLM_CALIBRATION}: " in out and "expected with vLLM" not in out
    layer = _predict(capsys, "--devices", "2", "--parallel", "layer")
    assert layer["calibration"]["engine"] == "llama.cpp CUDA"
    assert layer["request"]["expected_tpot_seconds"] > layer["request"]["tpot_seconds"]


def test_vllms_figure_names_its_own_runs_not_llama_cpps_benchmarks(capsys):
    """The text and the window's lines say where vLLM's figure comes from: its published runs,
    never "published benchmarks of the back end" or llama-bench's results."""
    from rooflab.core.app.resolve import expected_for_choice
    from rooflab.core.io import load_model
    from rooflab.core.report.expected_lines import _origin

    args = ["predict", "--model", "gpt-oss-120b-mxfp4", "--machine", "a100-pcie-80gb", "--devices", "2",
            "--parallel", "tensor"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "expected with vLLM (vLLM's published runs):" in out and "benchmarks of the back end" not in out
    ex = expected_for_choice(load_model("gpt-oss-120b-mxfp4"), load_machine("a100-pcie-80gb"),
                             PlacementChoice(devices=2, parallel="tensor"))
    assert ex is not None and _origin(ex) == "vLLM's published runs"
