"""``--host-tflops`` and ``--host-bandwidth``: the CPU and memory behind a GPU, which compute and
hold what the GPU leaves there. A GPU preset states no host CPU, so the lessons' 8-core desktop
prices it until the user says; stated, the offloaded figures follow and the text says so."""

from __future__ import annotations

import json

import pytest

from rooflab.core.cli.main import main

OFFLOADED = ["--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--gpu-layers", "37", "--cpu-moe", "24"]


def _predict(capsys, *extra: str) -> dict:
    assert main(["predict", *OFFLOADED, "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _tpot(report: dict) -> float:
    return report["request"]["expected_tpot_seconds"]


def test_a_faster_host_cpu_speeds_the_experts_it_computes(capsys):
    assumed = _predict(capsys)
    slow, fast = _predict(capsys, "--host-tflops", "0.25"), _predict(capsys, "--host-tflops", "4")
    assert fast["machine"]["offload"]["peak_tflops"] == pytest.approx(4)
    assert fast["machine"]["offload"]["int8_path_tops"] == pytest.approx(16)      # its quantized multiplies
    assert fast["machine"]["offload"]["peak_stated"] is True
    # not stated: the lessons' 8-core desktop prices it, and the JSON says so
    assert assumed["machine"]["offload"]["peak_tflops"] == pytest.approx(1.024)
    assert assumed["machine"]["offload"]["peak_stated"] is False
    assert _tpot(slow) > _tpot(assumed) > _tpot(fast)            # the experts' arithmetic is the CPU's
    # the ceiling takes the stated peak whole (a slow enough CPU bounds it too); expected never beats it
    assert slow["request"]["tpot_seconds"] >= fast["request"]["tpot_seconds"]
    assert all(r["request"]["expected_tpot_seconds"] >= r["request"]["tpot_seconds"] for r in (slow, assumed, fast))


def test_a_slower_host_memory_slows_the_offloaded_token(capsys):
    fast, slow = _predict(capsys, "--host-tflops", "2.92"), _predict(capsys, "--host-tflops", "2.92",
                                                                      "--host-bandwidth", "40")
    assert slow["machine"]["offload"]["bandwidth_gb_per_s"] == pytest.approx(40)
    assert slow["request"]["tpot_seconds"] > 1.5 * fast["request"]["tpot_seconds"]
    assert _tpot(slow) > _tpot(fast)


def test_the_why_says_whether_the_host_cpu_was_stated(capsys):
    # a host memory fast enough that the CPU's arithmetic, not its reading, bounds its experts
    assert main(["predict", *OFFLOADED, "--host-bandwidth", "400"]) == 0
    assumed = capsys.readouterr().out
    assert main(["predict", *OFFLOADED, "--host-tflops", "0.25"]) == 0
    stated = capsys.readouterr().out
    # --host-tflops states the host's FP32 peak; its quantized multiplies run on the int8 path, 4x it
    assert "CPU int8 path 4.1 TOP/s (assumed" in assumed
    assert "CPU int8 path 1 TOP/s (stated)" in stated


def test_fit_names_the_host_cpu_it_priced_and_ranks_by_it(capsys):
    assert main(["fit", "--machine", "rtx-4090", "--host-tflops", "2.92"]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith(
        "64 GB at 89.6 GB/s, CPU 2.92 TFLOP/s FP32 (int8 path 11.7 TOP/s)")
    ranked = {}
    for peak in ("0.25", "4"):
        assert main(["fit", "--machine", "rtx-4090", "--host-tflops", peak, "--json"]) == 0
        ranked[peak] = {(r["model"], r["weights"]): r for r in json.loads(capsys.readouterr().out)["rows"]}
    slow, fast = ranked["0.25"], ranked["4"]
    experts = [k for k, r in fast.items() if r["fit"] == "experts" and r["expected_tokens_per_second_per_sequence"]]
    # a faster CPU never slows a row, and speeds the experts it multiplies
    assert experts and all(fast[k]["tokens_per_second"] >= slow[k]["tokens_per_second"] for k in experts)
    gpt = ("gpt-oss-120b MXFP4", "MXFP4")
    assert fast[gpt]["tokens_per_second"] > slow[gpt]["tokens_per_second"]
    on_gpu = [k for k, r in fast.items() if r["fit"] == "device"]
    assert on_gpu and all(fast[k]["tokens_per_second"] == slow[k]["tokens_per_second"] for k in on_gpu)


def test_fit_says_the_host_cpu_is_assumed(capsys):
    assert main(["fit", "--machine", "rtx-3060-12gb", "--ceiling-only", "--model", "qwen3-8b-q4_k_m"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith("CPU 1.02 TFLOP/s FP32 (int8 path 4.1 TOP/s) (an 8-core desktop assumed: "
                          "--host-tflops states yours)")


@pytest.mark.parametrize(("command", "machine", "option"), [
    ("predict", "reference-cpu", "--host-tflops"),           # a CPU: its own peak is --peak-tflops
    ("predict", "m4-max", "--host-bandwidth"),                # unified memory: no host behind a GPU
    ("fit", "epyc-9654", "--host-tflops"),
])
def test_a_machine_with_no_host_behind_a_gpu_refuses_them_in_one_line(capsys, command, machine, option):
    model = ["--model", "qwen3-8b-q4_k_m"] if command == "predict" else []
    code = main([command, *model, "--machine", machine, option, "2"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert f"{option}: " in err and "is not a GPU with a host behind it" in err


@pytest.mark.parametrize("value", ["0", "-1", "nan", "abc"])
def test_an_impossible_host_figure_is_one_line(capsys, value):
    with pytest.raises(SystemExit) as stop:
        main(["predict", *OFFLOADED, "--host-tflops", value])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "--host-tflops" in err and len(err.splitlines()) == 1
