"""The guide: one paragraph and a formula per quantity, every figure the window shows reaching
its section, and each worked figure it quotes derived again here (from the lessons' inputs, or
from rooflab's own functions where the guide quotes what they compute)."""

from __future__ import annotations

import dataclasses

import pytest

from rooflab.core.app.figures import summarise
from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.choice import AUTO
from rooflab.core.predict.roofline import balance
from rooflab.core.predict.sweep import decode_grid
from rooflab.core.report.chart_types import Scenario
from rooflab.core.report.charts import CHART_KEYS
from rooflab.core.report.explain import explain
from rooflab.core.report.guide import SECTIONS, guide_text, section, topic
from rooflab.core.values.defaults import DEFAULT_WORKLOAD

# what the issue asks the guide to explain, each by its section
ASKED = ("ttft", "tpot", "ceiling", "n_star", "batch_crossover", "step_bytes", "balance", "kv_read_factor",
         "compute_crossover", "roofline", "offload", "placement", "expected", "band")


def test_each_section_is_one_paragraph_with_a_formula():
    keys = [s.key for s in SECTIONS]
    assert len(keys) == len(set(keys)) and set(ASKED) <= set(keys)
    for s in SECTIONS:
        assert s.title and s.formula and "\n" not in s.text and len(s.text) > 120, s.key
        assert any(op in s.formula for op in ("=", "<=", "-ngl")), s.key
    text = guide_text()
    assert all(s.title in text and s.formula in text for s in SECTIONS)


@pytest.mark.parametrize(("model", "machine", "changes"), [
    ("qwen3-8b-q4_k_m", "rtx-4090", {}),
    ("gpt-oss-120b-mxfp4", "rtx-4090", {}),                          # placed: experts on the CPU
    ("qwen3-8b-q4_k_m", "rtx-4090", {"batch": 16, "draft_tokens": 4}),
])
def test_every_figure_of_the_numbers_panel_has_a_section(model, machine, changes):
    sc = Scenario(model=load_model(model), machine=load_machine(machine),
                  workload=dataclasses.replace(DEFAULT_WORKLOAD, **changes), placement=AUTO)
    for line in explain(sc, summarise(sc)):
        assert topic(line.key), line.key
    for key in ("expected_ttft", "expected_tpot", "expected_rate", *CHART_KEYS, "serving"):
        assert topic(key), key
    assert topic("no-such-figure") == "" and topic("n_star") == "n_star"


def _has(key: str, *figures: str) -> None:
    text = section(key).text
    for figure in figures:
        assert figure in text, (key, figure)


def test_worked_figures_from_the_lessons():
    # TPOT: first token at 12.0 s, 400th at 30.0 s
    tpot = (30.0 - 12.0) / 399
    _has("tpot", f"{tpot * 1e3:.1f} ms", f"{1 / tpot:.1f} tokens/s", f"{400 / 30:.1f}")
    # TTFT: 2 x 8.03e9 FLOP a token, 8,000 tokens, at half the 4090's 165.2 TFLOP/s; the CPU's 1.024
    _has("ttft", f"{8000 * 2 * 8.03e9 / (0.5 * 165.2e12):.1f} s", f"{8000 * 2 * 8.03e9 / (0.5 * 1.024e12):.0f} s")
    # decode ceiling: 273 GB/s over W = 4.672 GB plus 4,096 x 147,456 bytes
    step = 4.672e9 + 4096 * 147_456
    _has("ceiling", f"{step / 1e9:.2f}", f"{273e9 / step:.1f} tokens/s", f"{4096 * 147_456 / 1e9:.2f} GB")
    # n*: W = 2.384 GB, C = 741 GFLOP/s, 2 N = 0.88 GFLOP, B = 27.2 GB/s (the lesson's CPU run)
    _has("n_star", f"n* ~= {2.384 * 741 / (0.88 * 27.2):.0f} tokens")
    # b*: balance 164 x 0.5625 bytes per weight / 2
    _has("batch_crossover", f"~= {164 * 0.5625 / 2:.0f} sequences")
    # the step for 16 sequences of 4,096 tokens on 273 GB/s
    kv = 4096 * 147_456 / 1e9
    read = 4.67 + 16 * kv
    _has("step_bytes", f"{read:.1f} GB", f"{273 / read:.1f} tokens/s each", f"{16 * 273 / read:.0f} in total")
    # KV: 2 x 32 layers x 8 heads x 128 x 2 bytes, at 32,768 tokens
    k = 2 * 32 * 8 * 128 * 2
    _has("kv", f"{k:,} bytes", f"{k * 32_768 / 1e9:.2f} GB")
    # roofline: an H100 at intensity 1
    _has("roofline", f"{3.35:.2f} TFLOP/s", f"{100 * 3.35 / 989:.1f} %")
    # offload: 39.4 GB at 4.5 bits, 22 GB on the GPU at 1,008 GB/s, the rest at 89.6 GB/s
    model_gb = 70e9 * 4.5 / 8 / 1e9
    gpu_ms, cpu_ms = 22 / 1008 * 1e3, (model_gb - 22) / 89.6 * 1e3
    _has("offload", f"{gpu_ms:.1f} + {cpu_ms:.1f} ms", f"{1e3 / (gpu_ms + cpu_ms):.2f} tokens/s",
         f"{1008 / model_gb:.1f}", f"{(1 - 0.1) + 0.1 * 10:.1f} times")
    # the cache-read factor: Qwen3-0.6B FP32 at ~4,100 tokens, the cache read and copied
    _has("kv_read_factor", f"{2.384 + 0.940 + 0.940:.2f} GB", f"{2.384 + 0.940:.2f}")


def test_figures_the_guide_quotes_are_rooflabs_own():
    for key, figure in (("rtx-4090", 328), ("desktop-ddr5", 46), ("h100-sxm", 295)):
        assert round(balance(load_machine(key))) == figure
        _has("balance", f"about {figure}")
    _has("balance", f"{round(balance(load_machine('rtx-4090'), 'bf16'))} at the 165.2 of FP32 accumulate")
    m = load_machine("rtx-4090")
    _has("batch_crossover", f"{round(balance(m) * 0.5625 / 2)} at the FP16 accumulate",
         f"(balance {round(balance(m))})")
    _has("balance", f"({round(balance(load_machine('desktop-ddr5'), 'fp32'))} at FP32)")
    # the decode ceiling rooflab computes for the same model, machine and context
    grid = decode_grid(load_model("qwen3-8b-q4_k_m"), load_machine("dgx-spark"), DEFAULT_WORKLOAD, [4096], [1])
    rate = float(grid.per_sequence[0, 0])
    _has("ceiling", f"{rate:.1f} tokens/s")
