"""``rooflab predict``'s placement: auto-fit unless told, the JSON ``placement`` object and
``fits``, a headline that says when nothing fits, and several devices with their link time."""

from __future__ import annotations

import json

import pytest

from rooflab.core.cli.main import main

BASE = ["predict", "--ceiling-only", "--contexts", "0,4096", "--batches", "1,4", "--prompts", "16,2048"]


# gpt-oss-120b on a 4090 as llama.cpp's fit places it (see test_fit): 24 layers' experts on the CPU,
# the last of them in part (its up and gate experts stay on the GPU)
AUTO_FLAGS = "-ngl 37 --n-cpu-moe 23 -ot blk.23.ffn_down=CPU"
AUTO_WORDS = "the experts of 24 of them on the CPU (one of them keeps its up and gate projections on the GPU)"


def run(capsys, *argv):
    code = main([*BASE, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_gpt_oss_on_a_4090_fits_with_experts_on_the_cpu(capsys):
    code, out, _ = run(capsys, "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--json")
    d = json.loads(out)
    p = d["placement"]
    assert code == 0 and d["fits"] is True
    # 24 layers' experts on the CPU, the last of them in part (llama.cpp's fit: see test_fit)
    assert (p["chosen_by"], p["gpu_layers"], p["cpu_moe"], p["kv_location"]) == ("auto", 37, 24, "device")
    assert p["partial"] == "gate" and p["flags"] == AUTO_FLAGS
    gpu, host = p["devices"][0], p["host"]
    assert gpu["experts_on_cpu_layers"] == 24 and host["expert_layers_computed"] == 24
    for use in (gpu, host):
        assert use["used_bytes"] == pytest.approx(use["bytes_placed"] + use["kv_bytes"] + use["compute_buffer_bytes"]
                                                  + use["reserve_bytes"])
        assert use["used_bytes"] <= use["capacity_bytes"] and use["fits"]
    assert gpu["bytes_placed"] + host["bytes_placed"] == d["model"]["weight_bytes"]
    # the headline is the placement's: ~16 ms per token, not the 3.6 ms of a 4090 holding 63 GB
    assert 0.010 < d["request"]["tpot_seconds"] < 0.025
    row = d["decode"][0]
    assert row["fits"] is False and row["placed_fits"] is True      # one-memory keys keep their meaning
    assert row["placed_tokens_per_second_per_sequence"] == pytest.approx(1 / d["request"]["tpot_seconds"], rel=0.05)


def test_text_names_the_placement_and_rooflab_choosing_it(capsys):
    code, out, _ = run(capsys, "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090")
    lines = out.splitlines()
    assert code == 0
    assert lines[2] == (f"placement: fits with all 37 layers on the GPU, {AUTO_WORDS} ({AUTO_FLAGS}); "
                        "placement chosen by rooflab (auto-fit)")
    assert "TPOT 16.23 ms" in out and "as placed" in out


def test_hand_placement_that_does_not_fit_says_so_first(capsys):
    code, out, _ = run(capsys, "--model", "llama-3.3-70b-q4_k_m", "--machine", "rtx-4090", "--gpu-layers", "81")
    lines = out.splitlines()
    assert code == 0 and lines[2].startswith("placement: does NOT fit: needs")
    assert "placement as given" in lines[2]
    assert any(line.startswith("does NOT fit, so none of these figures can be reached") for line in lines)
    # 44: llama.cpp's fit keeps the CUDA context (0.45 GiB) besides its 1 GiB margin, at 4,096 tokens
    assert any("to fit: put 44 of 81 layers on the GPU (-ngl 44)" in line for line in lines)
    d = json.loads(run(capsys, "--model", "llama-3.3-70b-q4_k_m", "--machine", "rtx-4090", "--gpu-layers", "81",
                       "--json")[1])
    assert d["fits"] is False and d["placement"]["chosen_by"] == "manual" and d["placement"]["suggestions"]


def test_cpu_moe_and_kv_flags(capsys):
    # -ngl on auto is fitted around the flags given: here every layer fits, the flags stay as given
    d = json.loads(run(capsys, "--model", "qwen3-30b-a3b-q4_k_m", "--machine", "rtx-4090", "--cpu-moe", "10",
                       "--no-kv-offload", "--json")[1])
    p = d["placement"]
    assert (p["gpu_layers"], p["cpu_moe"], p["kv_on_device"], p["kv_location"]) == (49, 10, False, "host")
    assert p["flags"] == "-ngl 49 --n-cpu-moe 10 --no-kv-offload" and p["chosen_by"] == "auto"


def test_kv_off_the_device_with_auto_layers_is_fitted(capsys):
    # unticking "KV cache on the device" used to put every layer on the GPU: "needs 64.4 GB"
    code, out, _ = run(capsys, "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--no-kv-offload")
    assert code == 0
    line = out.splitlines()[2]
    # auto-fit keeps every layer on the GPU and moves experts out around the flag (the cache's room
    # on the card goes to experts: fewer of them on the CPU than without the flag)
    assert line.startswith("placement: fits with all 37 layers on the GPU, the experts of "), line
    assert "the KV cache in host memory (-ngl 37 --n-cpu-moe " in line and "--no-kv-offload); placement chosen by " \
        "rooflab (auto-fit)" in line, line
    d = json.loads(run(capsys, "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--no-kv-offload",
                       "--json")[1])
    p = d["placement"]
    assert d["fits"] is True and p["chosen_by"] == "auto" and p["kv_location"] == "host"
    assert p["devices"][0]["kv_bytes"] == 0 and p["host"]["kv_bytes"] > 0


def test_cpu_moe_with_auto_layers_keeps_n_and_fits_the_layers(capsys):
    # --cpu-moe 10 used to need 47.5 GB: now exactly 10 layers' experts stay on the CPU and -ngl falls
    # to the most that fits (14; see test_fit), slower than auto-fit's own -ngl 37 --n-cpu-moe 24 (one in part)
    code, out, _ = run(capsys, "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--cpu-moe", "10")
    lines = out.splitlines()
    assert code == 0
    assert lines[2].startswith("placement: fits with 14 of 37 layers on the GPU (-ngl 14 --n-cpu-moe 10); "
                               "placement chosen by rooflab (auto-fit)")
    assert ("  to fit: without --n-cpu-moe 10, auto-fit puts all 37 layers on the GPU, the experts of 24 of "
            "them on the CPU (one of them keeps its up and gate projections on the GPU) "
            "(-ngl 37 --n-cpu-moe 23 -ot blk.23.ffn_down=CPU)") in lines
    d = json.loads(run(capsys, "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--cpu-moe", "10",
                       "--json")[1])
    p = d["placement"]
    assert d["fits"] is True and (p["chosen_by"], p["gpu_layers"], p["cpu_moe"]) == ("auto", 14, 10)
    assert p["devices"][0]["used_bytes"] <= p["devices"][0]["capacity_bytes"]
    # given -ngl too, it is a placement by hand: not fitted, and it does not fit
    d = json.loads(run(capsys, "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--gpu-layers", "37",
                       "--cpu-moe", "10", "--json")[1])
    p = d["placement"]
    assert d["fits"] is False and (p["chosen_by"], p["flags"]) == ("manual", "-ngl 37 --n-cpu-moe 10")
    needs = p["description"].removeprefix("does NOT fit: needs ").split(" GB")[0]
    assert p["description"].startswith("does NOT fit: needs ") and float(needs) > 25.8       # the card's 24 GiB


def test_a_model_too_big_for_the_machine_is_impossible(capsys):
    # its weights alone would page from disk (mmap); 64 caches of 100,000 tokens more fit nowhere
    code, out, _ = run(capsys, "--model", "deepseek-v3-q4_k_m", "--machine", "rtx-4090", "--batch", "64",
                       "--context", "100000")
    assert code == 0 and out.splitlines()[2].startswith("placement: does NOT fit")


@pytest.mark.parametrize("machine, devices", [("h100-sxm", 2), ("h100-sxm", 4), ("rtx-4090", 2), ("rtx-4090", 4)])
def test_tensor_parallel_carries_its_communication(capsys, machine, devices):
    code, out, err = run(capsys, "--model", "llama-3.1-8b", "--machine", machine, "--devices", str(devices),
                         "--parallel", "tensor", "--json")
    d = json.loads(out)
    assert code == 0, err
    assert d["communication_seconds_per_step"] > 0 and d["communication_seconds_per_token"] > 0
    assert d["parallel"]["devices"] == devices and d["parallel"]["mode"] == "tensor"
    assert [s["devices"] for s in d["parallel"]["scaling"]] == [1, 2, 4, 8]
    assert d["placement"]["devices"][0]["count"] == devices and d["fits"] is True
    text = run(capsys, "--model", "llama-3.1-8b", "--machine", machine, "--devices", str(devices),
               "--parallel", "tensor")[1]
    assert "communication" in text and "ms per decode step" in text


def test_interconnect_flag_sets_the_link(capsys):
    d = json.loads(run(capsys, "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", "--devices", "2",
                       "--parallel", "tensor", "--interconnect", "64", "--json")[1])
    assert d["parallel"]["interconnect_bytes_per_second"] == 64e9


@pytest.mark.parametrize("argv, fragment", [
    (["--devices", "2", "--parallel", "tensor", "--gpu-layers", "10"], "with --parallel tensor"),
    (["--machine", "desktop-ddr5", "--devices", "2"], "--interconnect"),
])
def test_errors_are_one_line(capsys, argv, fragment):
    args = ["--model", "qwen3-8b-q4_k_m", *(["--machine", "rtx-4090"] if "--machine" not in argv else []), *argv]
    code, out, err = run(capsys, *args)
    assert code == 2 and out == "" and err.count("\n") == 1 and fragment in err


def test_bad_flag_values_are_one_line(capsys):
    with pytest.raises(SystemExit) as stop:
        main([*BASE, "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", "--parallel", "pipeline"])
    assert stop.value.code == 2
    with pytest.raises(SystemExit):
        main([*BASE, "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", "--gpu-layers", "-1"])
    err = capsys.readouterr().err
    assert "must be a whole number in [0," in err


def test_a_model_that_does_not_fit_gets_no_expected_request(capsys):
    # the ceiling says it cannot be reached; an expected figure of the card alone would be a fast fiction
    argv = ["predict", "--model", "deepseek-v3-q4_k_m", "--machine", "rtx-4090", "--batch", "64", "--context", "100000",
            "--contexts", "0", "--batches", "1", "--prompts", "16"]
    assert main([*argv, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["fits"] is False and "calibration" in d
    assert not [k for k in d["request"] if k.startswith("expected")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "expected with llama.cpp CUDA: none, the model does NOT fit here" in out
    assert "time per output token" not in out


def test_the_placed_crossovers_are_the_windows(capsys):
    # predict's placement carries the n* and b* the numbers panel shows for the same placement
    from rooflab.core.app.figures import summarise
    from rooflab.core.io import load_model
    from rooflab.core.io.presets import load_machine
    from rooflab.core.report.chart_types import Scenario
    from rooflab.core.values.workload import Workload

    # at FP32 accumulate (bf16, the lesson's 165.2 TFLOP/s), where the placed step turns compute-bound
    code, out, _ = run(capsys, "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--dtype", "bf16", "--json")
    p = json.loads(out)["placement"]
    s = summarise(Scenario(model=load_model("gpt-oss-120b-mxfp4"), machine=load_machine("rtx-4090"),
                           workload=Workload(prompt=2048, answer=256, compute_dtype="bf16")))
    assert code == 0 and s.placed is not None and s.placed.placement.flags() == p["flags"]
    assert p["prefill_crossover_tokens"] == pytest.approx(s.headline_prefill_crossover)
    # JSON has no infinity: a placement that never turns compute-bound as it batches prints null
    b_star = s.headline_batch_crossover
    assert p["batch_crossover"] == (None if b_star == float("inf") else pytest.approx(b_star))
    assert p["max_batch_that_fits"] == s.headline_max_batch
    # the one-memory figures keep their meaning beside them: the card alone never turns compute-bound;
    # as placed, the host's experts do at ~425 sequences (their int8 path, 4.1 TOP/s)
    assert json.loads(out)["batch_crossover"] is None and 200 < b_star < 1000
    code, text, _ = run(capsys, "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--dtype", "bf16")
    assert f"as placed, prefill turns compute-bound at n* = {p['prefill_crossover_tokens']:,.1f} tokens" in text
