"""``rooflab predict``'s placement as issue 17 asks: crossovers on one rule, --offload as one path,
-ub as a workload option, MoE over several GPUs with the rest in host memory."""

from __future__ import annotations

import json
import math

import pytest

from rooflab.core.app.figures import summarise
from rooflab.core.cli.main import main
from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.choice import PlacementChoice
from rooflab.core.report.chart_types import Scenario
from rooflab.core.report.summary import NOT_RUN, summary_rows
from rooflab.core.values.workload import Workload

BASE = ["predict", "--ceiling-only", "--contexts", "0", "--batches", "1", "--prompts", "512"]


def predict(capsys, *argv: str) -> dict:
    assert main([*BASE, *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_placement_that_does_not_fit_has_null_crossovers_and_the_report_agrees(capsys):
    # on main the JSON left the keys out while the report's summary.csv wrote a crossover for the same case
    argv = ["--model", "llama-3.3-70b-q4_k_m", "--machine", "rtx-4090", "--gpu-layers", "81"]
    d = predict(capsys, *argv)
    assert d["fits"] is False
    assert d["placement"]["prefill_crossover_tokens"] is None and d["placement"]["batch_crossover"] is None
    sc = Scenario(model=load_model("llama-3.3-70b-q4_k_m"), machine=load_machine("rtx-4090"),
                  workload=Workload(prompt=2048, answer=256), placement=PlacementChoice(gpu_layers=81))
    s = summarise(sc)
    rows = {name: value for name, value, _ in summary_rows(s)}
    assert rows["placement_fits"] == "no"
    assert rows["placed_prefill_crossover"] == rows["placed_batch_crossover"] == NOT_RUN
    assert math.isnan(s.headline_prefill_crossover)


def test_a_placement_that_fits_has_its_crossovers_in_both(capsys):
    argv = ["--model", "llama-3.3-70b-q4_k_m", "--machine", "rtx-4090", "--gpu-layers", "30"]
    d = predict(capsys, *argv)
    sc = Scenario(model=load_model("llama-3.3-70b-q4_k_m"), machine=load_machine("rtx-4090"),
                  workload=Workload(prompt=2048, answer=256), placement=PlacementChoice(gpu_layers=30))
    rows = {name: value for name, value, _ in summary_rows(summarise(sc))}
    assert d["fits"] and rows["placed_prefill_crossover"] == pytest.approx(d["placement"]["prefill_crossover_tokens"])


def test_several_devices_carry_the_devices_crossovers(capsys):
    # the window's numbers and charts stand on the devices too (issue 20): one figure everywhere
    d = predict(capsys, "--model", "qwen3-32b-q4_k_m", "--machine", "rtx-4090", "--devices", "2",
                "--parallel", "tensor")
    sc = Scenario(model=load_model("qwen3-32b-q4_k_m"), machine=load_machine("rtx-4090"),
                  workload=Workload(prompt=2048, answer=256), placement=PlacementChoice(devices=2, parallel="tensor"))
    s = summarise(sc)
    assert d["placement"]["prefill_crossover_tokens"] == pytest.approx(s.headline_prefill_crossover)
    assert d["placement"]["max_batch_that_fits"] == s.headline_max_batch


def test_offload_is_one_path(capsys):
    # the issue: --offload 0.5 gave n* 338.7 at the top level (the share priced into the one-memory
    # pass) and 3.7 as placed; the top level keeps its one-memory meaning, the placement is -ngl 18's
    plain = predict(capsys, "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090")
    half = predict(capsys, "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", "--offload", "0.5")
    layers = predict(capsys, "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", "--gpu-layers", "18")
    assert half["placement"]["chosen_by"] == "offload" and half["placement"]["flags"] == "-ngl 18"
    assert half["prefill_crossover_tokens"] == pytest.approx(plain["prefill_crossover_tokens"])
    assert half["decode"][0]["tokens_per_second_per_sequence"] == plain["decode"][0]["tokens_per_second_per_sequence"]
    placed_n_star = layers["placement"]["prefill_crossover_tokens"]
    assert half["placement"]["prefill_crossover_tokens"] == pytest.approx(placed_n_star)
    assert half["request"] == layers["request"]


def test_the_ubatch_is_a_flag_and_in_the_json(capsys):
    argv = ["--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--gpu-layers", "37", "--cpu-moe", "24",
            "--prompt", "8192"]
    default = predict(capsys, *argv)
    big = predict(capsys, *argv, "--ubatch", "4096")
    assert default["workload"]["ubatch"] == 512 and big["workload"]["ubatch"] == 4096
    # host experts cross PCIe once per ubatch: 16 copies at -ub 512, 2 at -ub 4096
    assert big["request"]["prompt_tokens_per_second"] > 5 * default["request"]["prompt_tokens_per_second"]
    assert big["request"]["tpot_seconds"] == default["request"]["tpot_seconds"]
    assert main([*BASE, *argv, "--ubatch", "0"]) == 2
    assert "ubatch" in capsys.readouterr().err


def test_gpt_oss_on_two_5090s_with_experts_of_three_layers_on_the_cpu_runs(capsys):
    # refused on main ("--cpu-moe is not allowed with --devices"): a common llama.cpp set-up. The two
    # cards split the 37 units llama.cpp counts (19 layers, then 17 and the output) and the experts of layers 0-2
    # are computed from host memory
    d = predict(capsys, "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-5090", "--devices", "2", "--cpu-moe", "3")
    p = d["placement"]
    assert d["fits"] is True and p["flags"] == "-ngl 37 --n-cpu-moe 3"
    assert [(x["layers_computed"], x["output_layer"], x["experts_on_cpu_layers"]) for x in p["devices"]] == [
        (19, False, 3), (17, True, 0)]
    assert all(x["fits"] for x in p["devices"]) and p["host"]["expert_layers_computed"] == 3
    assert p["host"]["bytes_placed"] > 3 * 1.6e9
    assert d["parallel"]["devices"] == 2 and d["parallel"]["mode"] == "layer"
    # slower than every layer on the two cards, faster than one card with 24 layers' experts on the CPU
    both = predict(capsys, "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-5090", "--devices", "2")
    one = predict(capsys, "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-5090")
    assert both["request"]["tpot_seconds"] < d["request"]["tpot_seconds"] < one["request"]["tpot_seconds"]


def test_two_4090s_hold_gpt_oss_with_the_rest_on_the_host(capsys):
    # 63.4 GB on 2 x 24 GiB did not fit on main; llama.cpp's fit moves experts to the host, filling the
    # two cards in turn (its -ts)
    d = predict(capsys, "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--devices", "2")
    p = d["placement"]
    assert d["fits"] is True and p["chosen_by"] == "auto" and 0 < p["cpu_moe"] < 24
    assert " -ts " in p["flags"] and len(p["devices"]) == 2


def test_tensor_parallel_keeps_every_layer_on_the_devices(capsys):
    code = main([*BASE, "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-5090", "--devices", "2",
                 "--parallel", "tensor", "--cpu-moe", "3"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--parallel tensor" in err
