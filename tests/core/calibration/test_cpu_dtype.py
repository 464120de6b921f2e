"""A CPU's published llama.cpp factors are of its int8 path: asked for another dtype, there is
no expected figure and one line says why, rather than those factors put on a peak 4x lower; a
new FP32 peak carries the int8 path with it."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rooflab.core.app.figures import figures
from rooflab.core.app.resolve import expected_for_choice, missing_for_choice
from rooflab.core.cli.main import main
from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.choice import AUTO
from rooflab.core.predict.clocks import prefill_pass
from rooflab.core.report.chart_types import Scenario
from rooflab.core.values.workload import Workload


@pytest.fixture(scope="module")
def qwen_q4():
    return load_model("qwen3-8b-q4_k_m")


def test_an_fp32_cpu_has_no_expected_figure_and_says_why(qwen_q4):
    cpu = load_machine("epyc-9654")
    assert cpu.default_dtype == "int8"
    assert expected_for_choice(qwen_q4, cpu, AUTO) is not None and missing_for_choice(qwen_q4, cpu, AUTO) is None
    assert expected_for_choice(qwen_q4, cpu, AUTO, "int8") is not None
    assert expected_for_choice(qwen_q4, cpu, AUTO, "fp32") is None
    why = missing_for_choice(qwen_q4, cpu, AUTO, "fp32")
    assert why is not None and "int8 path" in why.line and "fp32" in why.reason
    # the numbers panel says it too, once, in the row it would have filled
    sc = Scenario(model=qwen_q4, machine=cpu, workload=Workload(compute_dtype="fp32"), placement=AUTO)
    rows = [line for line in figures(sc, missing=why).lines() if line.key == "expected"]
    assert len(rows) == 1 and rows[0].value == "none" and "int8 path" in rows[0].sentence
    # a float model's factors are of the FP32 rate its multiplies run at: fp32 prices it, as the int8 default does
    f16 = load_model("qwen3-8b-q4_k_m", weights="f16")
    at_fp32, at_int8 = expected_for_choice(f16, cpu, AUTO, "fp32"), expected_for_choice(f16, cpu, AUTO)
    assert at_fp32 is not None and at_int8 is not None and missing_for_choice(f16, cpu, AUTO, "fp32") is None
    w = Workload(prompt=512, compute_dtype="fp32")
    seconds = [prefill_pass(f16, ex.machine, dataclasses.replace(w, compute_dtype=d)).seconds
               for ex, d in ((at_fp32, "fp32"), (at_int8, None))]
    assert seconds[0] == pytest.approx(seconds[1], rel=1e-6)
    # a dtype the CPU lists no peak for prices at its default, the int8 path: its float share and its
    # published figure are the int8 path's too (one rule, MachineProfile.applied_dtype)
    assert cpu.applied_dtype("fp8") == "int8" and cpu.flops("fp8") == cpu.flops()
    assert cpu.float_share("fp8") == cpu.float_share() < 1.0
    assert expected_for_choice(qwen_q4, cpu, AUTO, "fp8") is not None
    # a GPU's dtype choice keeps its figure
    gpu = load_machine("rtx-4090")
    assert expected_for_choice(qwen_q4, gpu, AUTO, "fp16") is not None
    assert missing_for_choice(qwen_q4, gpu, AUTO, "fp16") is None


def test_predict_says_why_an_fp32_cpu_has_no_expected_figure(capsys):
    argv = ["predict", "--model", "qwen3-8b-q4_k_m", "--machine", "epyc-9654", "--contexts", "0", "--batches", "1",
            "--prompts", "512"]
    assert main([*argv, "--dtype", "fp32"]) == 0
    out = capsys.readouterr().out
    assert "expected: none (llama.cpp's published CPU factors are of the int8 path" in out
    assert "expected with llama.cpp" not in out
    assert main(argv) == 0
    assert "expected with llama.cpp CPU" in capsys.readouterr().out
    # scripts read it too: --json names why there is no expected figure, and only then
    assert main([*argv, "--dtype", "fp32", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["expected_missing"].startswith("llama.cpp's published CPU factors") and "calibration" not in d
    assert main([*argv, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert "expected_missing" not in d and "calibration" in d


def test_a_new_fp32_peak_carries_the_int8_path(capsys):
    cpu = load_machine("epyc-9654")
    ratio = cpu.peak_flops["int8"] / cpu.peak_flops["fp32"]
    peaks = cpu.peaks_with("fp32", 2e12)
    assert peaks["fp32"] == 2e12 and peaks["int8"] == pytest.approx(2e12 * ratio)
    assert cpu.peaks_with("int8", 9e12) == {**cpu.peak_flops, "int8": 9e12}      # the path itself: as given
    gpu = load_machine("rtx-4090")
    assert gpu.peaks_with("fp32", 1e12)["fp16"] == gpu.peak_flops["fp16"]        # a GPU's peaks stand apart
    # the command line takes the same rule: --peak-tflops at fp32 moves the int8 path with it
    assert main(["predict", "--model", "qwen3-8b-q4_k_m", "--machine", "epyc-9654", "--dtype", "fp32",
                 "--peak-tflops", "2", "--json", "--contexts", "0", "--batches", "1", "--prompts", "512"]) == 0
    peaks = json.loads(capsys.readouterr().out)["machine"]["peak_tflops_by_dtype"]
    assert peaks["fp32"] == pytest.approx(2.0) and peaks["int8"] == pytest.approx(2.0 * ratio)
