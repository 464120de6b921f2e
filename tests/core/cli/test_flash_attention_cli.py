"""Flash attention (-fa) as llama.cpp has it: off, a quantized V cache is refused (llama.cpp's
context creation says "quantized V cache requires flash_attn"), in one line and exit status 2,
by ``predict``, ``compare``, ``fit`` and ``measure model`` before anything runs; and the toggle
says what it moves: the compute buffer holds the attention scores (the memory grows by what
``compute_buffer_bytes`` says), while the prompt's time moves only where a calibration timed
both kernels (the ceiling's does not: the sentence says so). It was accepted silently and
changed nothing on screen."""

from __future__ import annotations

import json

import pytest

from rooflab.core.cli.main import main
from rooflab.core.errors import SpecError
from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.footprint import compute_buffer_bytes
from rooflab.core.predict.work import padded
from rooflab.core.report.chart_types import Scenario
from rooflab.core.report.explain import flash_sentence
from rooflab.core.report.units import fmt
from rooflab.core.values.workload import Workload, runnable

MODEL = ("--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090")


@pytest.mark.parametrize("argv", [
    ("predict", *MODEL, "--kv-type", "q8_0", "-fa", "off"),
    ("compare", "--models", "qwen3-8b-q4_k_m", "--machines", "rtx-4090", "--kv-type", "q4_0", "-fa", "off"),
    ("fit", "--machine", "rtx-4090", "--kv-type", "q8_0", "--flash-attention", "off"),
    ("measure", "model", "missing.gguf", "--engine", "llama-bench", "--kv-type", "q8_0", "--flash-attention", "off"),
])
def test_a_quantized_v_cache_without_flash_attention_is_refused(capsys, argv):
    assert main(list(argv)) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1, err
    assert "needs flash attention" in lines[0] and "-fa off" in lines[0]


@pytest.mark.parametrize("kv, fa", [("f16", "off"), ("q8_0", "on"), ("bf16", "off")])
def test_what_llama_cpp_runs_is_not_refused(capsys, kv, fa):
    assert main(["predict", *MODEL, "--kv-type", kv, "-fa", fa, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["workload"]["flash_attention"] is (fa == "on")


def test_the_rule_is_one_function():
    assert runnable(Workload(kv_type="q8_0")).kv_type == "q8_0"
    with pytest.raises(SpecError, match="q5_1 KV cache needs flash attention"):
        runnable(Workload(kv_type="q5_1", flash_attention=False))


def test_off_moves_the_memory_and_says_what_it_moves(capsys):
    argv = ["predict", *MODEL, "--prompt", "16000", "--batch", "4", "--json"]
    used = {}
    for fa in ("on", "off"):
        assert main([*argv, "-fa", fa]) == 0
        out = json.loads(capsys.readouterr().out)
        used[fa] = out["placement"]["devices"][0]["compute_buffer_bytes"]
    spec = load_model("qwen3-8b-q4_k_m")
    cells = 4 * padded(16000 + 256)
    scores = float(compute_buffer_bytes(spec, 512, cells, attention_scores=True)
                   - compute_buffer_bytes(spec, 512, cells, attention_scores=False))
    assert scores > 1e9                                   # 32 heads x 65k cells x 512 rows x 4 bytes
    assert used["off"] - used["on"] == pytest.approx(scores, rel=1e-6)
    sc = Scenario(model=spec, machine=load_machine("rtx-4090"),
                  workload=Workload(prompt=16000, batch=4, flash_attention=False))
    sentence = flash_sentence(sc)
    assert fmt(scores, "B") in sentence and "same rate" in sentence       # no calibration: the ceiling's alike
    assert flash_sentence(Scenario(model=spec, machine=sc.machine, workload=Workload())) == ""
    assert main(["predict", *MODEL, "-fa", "off"]) == 0
    assert "Flash attention off (-fa off)" in capsys.readouterr().out     # in the why, beside TTFT
