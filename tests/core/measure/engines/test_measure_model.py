"""Model timing on tiny random-weight models built from inline configs: the points' structure,
sanity where physics is clear, memory refusal before loading, cancel inside a forward pass,
architectures with sliding windows and experts, and a GGUF's tensor table as the source."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from rooflab.core.errors import Cancelled, MeasurementError, ModelFileError
from rooflab.core.io.hf_build import config_from_tensors
from rooflab.core.jobs import CancelToken, Progress
from rooflab.core.measure.engines.torch.models import resolve_source
from rooflab.core.measure.engines.torch.timing import ModelPlan, measure_model, measure_model_blocking
from rooflab.core.values.measured import MeasuredPoint

TINY_QWEN3 = {"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512,
              "tie_word_embeddings": True}
SMALL = ModelPlan(threads=1, prompts=(1, 64, 512), decode_steps=3, repeats=2, max_repeats=2, contexts=(2, 64),
                  batches=(1, 8), batch_steps=2)


@pytest.fixture(scope="module")
def measured():
    items: list[Progress] = []
    result = measure_model_blocking(TINY_QWEN3, SMALL, on_progress=items.append)
    return result, items


def test_points_arrive_one_by_one_in_order(measured):
    result, items = measured
    assert all(isinstance(i, Progress) for i in items)            # a job yields Progress only
    points = [i.sample for i in items if i.sample is not None]    # each point rides on one
    assert all(isinstance(p, MeasuredPoint) for p in points)
    assert tuple(points) == result.points
    assert [(p.kind, p.prompt) for p in points[:2]] == [("prefill", 1), ("decode", 1)]
    assert [p.kind for p in points].count("prefill") == 3
    assert [p.kind for p in points].count("decode") == 3
    batch = [(p.context, p.batch) for p in points if p.kind == "batch"]
    assert batch == [(2, 1), (2, 8), (64, 1), (64, 8)]
    assert any(i.step == "batch" and i.sample is None for i in items)


def test_points_are_sane(measured):
    result, _ = measured
    for p in result.points:
        assert p.seconds > 0 and p.median >= p.seconds and p.repeats >= 1
        assert p.source.startswith("torch ")
    decode = [p for p in result.points if p.kind == "decode"]
    assert [p.context for p in decode] == [1 + 1, 64 + 1, 512 + 1]      # the middle of 3 steps after n
    prefill = {p.prompt: p.seconds for p in result.points if p.kind == "prefill"}
    assert prefill[512] > prefill[1]                                    # more tokens, more work
    batch = {(p.context, p.batch): p for p in result.points if p.kind == "batch"}
    assert batch[(2, 8)].rate > batch[(2, 1)].rate                      # the weight fetch is shared


def test_the_run_describes_itself(measured):
    result, _ = measured
    spec = result.spec
    assert spec.tied_embeddings and spec.layers == 2 and spec.hidden == 64
    assert spec.params_total == 512 * 64 + 2 * (64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128 + 2 * 64 + 2 * 16) + 64
    assert result.kv_type == "f32" and result.dtype == "fp32" and result.random_weights
    assert result.overhead is not None and result.overhead > 0
    assert result.memory.total > result.memory.weights > 0
    record = result.record()
    assert json.loads(json.dumps(record))["points"][0]["kind"] == "prefill"


def test_memory_refusal_before_loading():
    started = time.perf_counter()
    with pytest.raises(MeasurementError, match="not enough memory") as info:
        measure_model_blocking(TINY_QWEN3, ModelPlan(prompts=(4096,)), available=200e6)
    assert "GB" in str(info.value)
    assert time.perf_counter() - started < 5


def test_cancel_inside_a_forward_pass_stops_at_the_next_layer():
    import torch

    config = dict(TINY_QWEN3, hidden_size=256, intermediate_size=768, num_hidden_layers=8, vocab_size=4096)
    cancel = CancelToken()
    plan = ModelPlan(threads=1, prompts=(2048,) * 50, decode_steps=1, repeats=50, max_repeats=50,
                     experiments=("prefill",),
                     overhead_probe=False)
    job = measure_model(config, plan, cancel)
    for item in job:
        if item.step == "prefill":
            break
    # Decoder layers begun after the cancel: torch runs global pre-hooks before a layer's own,
    # so this counts the layer whose cancel check raises (1), or none when the cancel lands
    # between the two. A wall-clock bound would measure the machine's load instead.
    begun_after_cancel: list[str] = []

    def count(module, args):
        if cancel.is_set() and type(module).__name__.endswith("DecoderLayer"):
            begun_after_cancel.append(type(module).__name__)

    handle = torch.nn.modules.module.register_module_forward_pre_hook(count)
    timer = threading.Timer(0.2, cancel.cancel)
    try:
        timer.start()
        with pytest.raises(Cancelled):
            for _ in job:
                pass
    finally:
        timer.join()
        handle.remove()
    assert cancel.cancelled and len(begun_after_cancel) <= 1


@pytest.mark.parametrize("config", [
    {"model_type": "gemma2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
     "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 256, "sliding_window": 8},
    {"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
     "num_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 2, "num_attention_heads": 4,
     "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 256},
], ids=["sliding-window", "mixture-of-experts"])
def test_other_architectures(config):
    plan = ModelPlan(threads=1, prompts=(4, 32), decode_steps=2, repeats=1, contexts=(24,), batches=(1, 3),
                     batch_steps=2,
                     overhead_probe=False, dtype="bf16")
    result = measure_model_blocking(config, plan)
    assert len(result.points) == 6 and result.kv_type == "bf16"
    if config["model_type"] == "qwen3_moe":
        assert result.spec.is_moe and result.spec.experts == 8 and result.spec.experts_used == 2
    else:
        assert result.spec.attention.sliding_window == 8


def test_config_json_folder_and_errors(tmp_path: Path):
    (tmp_path / "config.json").write_text(json.dumps(TINY_QWEN3))
    source = resolve_source(tmp_path)
    assert source.random_weights and source.folder is None
    assert resolve_source(tmp_path / "config.json").config["hidden_size"] == 64
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelFileError, match="no config.json"):
        resolve_source(empty)
    with pytest.raises(MeasurementError, match="model_type"):
        measure_model_blocking({"model_type": "no-such-architecture", "hidden_size": 8}, SMALL)


def test_real_weights_from_a_folder(tmp_path: Path):
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(**TINY_QWEN3)
    AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path)
    plan = ModelPlan(threads=1, prompts=(4,), decode_steps=2, repeats=1, experiments=("prefill", "decode"),
                     overhead_probe=False)
    result = measure_model_blocking(tmp_path, plan)
    assert not result.random_weights
    assert [p.kind for p in result.points] == ["prefill", "decode"]


def test_gguf_tensor_table_becomes_a_torch_model(tmp_path: Path):
    from rooflab.core.io import load_model
    from tests.factories.gguf_files import tiny_llama

    spec = load_model(tiny_llama(tmp_path / "tiny.gguf"))
    config, notes = config_from_tensors(spec)
    assert config["model_type"] == "llama" and not notes
    assert (config["hidden_size"], config["num_hidden_layers"], config["intermediate_size"]) == (256, 8, 512)
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]) == (2, 1, 128)
    plan = ModelPlan(threads=1, prompts=(4,), decode_steps=2, repeats=1, experiments=("prefill", "decode"),
                     overhead_probe=False)
    result = measure_model_blocking(tmp_path / "tiny.gguf", plan)
    assert result.spec.params_total == spec.params_total     # the same matrices, in torch
