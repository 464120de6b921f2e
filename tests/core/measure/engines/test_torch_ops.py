"""The torch engine timed operation by operation (measure.engines.torch.ops): how a profiler's
ranges become operation rows (on injected events, so no timing decides a test), which module is
which operation, and a real run of a tiny random-weight model whose rows carry the names,
shapes and FLOPs the prediction has. Structure and sanity only, never speed."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from rooflab.core.cli.main import main
from rooflab.core.errors import MeasurementError
from rooflab.core.jobs import run_job
from rooflab.core.measure.engines.torch.ops import (
    PREFIX,
    OpsPlan,
    measure_ops,
    module_operation,
    tally_events,
)
from rooflab.core.predict import ops

TINY = {"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512,
        "tie_word_embeddings": False}


@dataclass(eq=False)
class Event:
    """What tally_events reads of a profiler event."""

    name: str
    cpu_time_total: float                     # µs
    start: float = 0.0
    flops: float = 0.0
    input_shapes: list[Any] = field(default_factory=list)
    cpu_parent: Event | None = None
    cpu_children: list[Event] = field(default_factory=list)

    @property
    def time_range(self) -> SimpleNamespace:
        return SimpleNamespace(start=self.start)

    def add(self, *children: Event) -> Event:
        for c in children:
            c.cpu_parent = self
            self.cpu_children.append(c)
        return self


def _all(e: Event) -> list[Event]:
    return [e, *(x for c in e.cpu_children for x in _all(c))]


def test_ranges_become_operations_by_their_own_time():
    # a pass of 1000 µs: the model 900 (its own 20), one layer 850 (own 40: the residual adds),
    # attention 500 with q_proj 100 and k_proj 50 inside and, of its own 350: RoPE ops before the
    # first product (10 + 5), the scores' product 80, the softmax 20, the weighted sum's 60,
    # an output copy 15 and 160 of Python between them; the feed-forward 310 with up 200 (own 110:
    # its activation); the head 30; sampling the pass's own 100
    attention = Event(f"{PREFIX}attention::0", 500).add(
        Event(f"{PREFIX}leaf:q_proj:0", 100, 1).add(Event("aten::linear", 90, flops=1000, input_shapes=[[1, 8]])),
        Event(f"{PREFIX}leaf:k_proj:0", 50, 2).add(Event("aten::linear", 45, flops=500)),
        Event("aten::mul", 10, 3), Event("aten::cat", 5, 4),
        Event("aten::matmul", 80, 5, flops=64), Event("aten::softmax", 20, 6), Event("aten::matmul", 60, 7, flops=64),
        Event("aten::copy_", 15, 8))
    ffn = Event(f"{PREFIX}ffn::0", 310).add(Event(f"{PREFIX}leaf:ffn_up:0", 200).add(Event("aten::linear", 190)))
    layer = Event(f"{PREFIX}layer::0", 850).add(attention, ffn)
    model = Event(f"{PREFIX}model::", 900).add(layer, Event(f"{PREFIX}leaf:output_head:", 30))
    root = Event(f"{PREFIX}pass::", 1000).add(model)
    rows = {(layer_, name): row for (layer_, name), row in tally_events(_all(root)).rows.items()}
    seconds = {key: round(row.seconds * 1e6, 6) for key, row in rows.items()}
    assert seconds == {(0, "q_proj"): 100, (0, "k_proj"): 50, (0, "rope"): 15, (0, "attn_scores"): 80,
                       (0, "softmax"): 20, (0, "attn_weighted_sum"): 60, (0, "attn_other"): 15 + 160,
                       (0, "ffn_up"): 200, (0, "ffn_act"): 110, (0, "residual"): 40, (None, "output_head"): 30,
                       (None, "other"): 20, (None, "sampling"): 100}
    assert sum(seconds.values()) == 1000                       # every µs of the pass, once
    assert rows[(0, "q_proj")].flops == 1000 and rows[(0, "attn_scores")].flops == 64
    assert rows[(0, "q_proj")].shapes == "[[1, 8]]"


@pytest.mark.parametrize("name, expected", [
    ("model.layers.3", ("layer", "")), ("model.layers.3.self_attn", ("attention", "")),
    ("model.layers.3.self_attn.q_proj", ("leaf", "q_proj")), ("model.layers.3.self_attn.k_norm", ("leaf", "qk_norm")),
    ("model.layers.3.mlp", ("ffn", "")), ("model.layers.3.mlp.down_proj", ("leaf", "ffn_down")),
    ("model.layers.3.input_layernorm", ("leaf", "attn_norm")),
    ("model.layers.3.post_attention_layernorm", ("leaf", "ffn_norm")),
    ("model.norm", ("leaf", "output_norm")), ("lm_head", ("leaf", "output_head")),
    ("model.embed_tokens", ("leaf", "embedding")), ("model.layers", None), ("model.layers.3.self_attn.dropout", None),
])
def test_modules_name_their_operation(name, expected):
    names = frozenset({"model.layers.3.mlp", "model.layers.3.mlp.down_proj"})
    assert module_operation(name, names) == expected


def test_moe_modules():
    names = frozenset({"model.layers.0.mlp", "model.layers.0.mlp.gate", "model.layers.0.mlp.experts",
                       "model.layers.1.mlp", "model.layers.1.mlp.experts", "model.layers.1.mlp.experts.0",
                       "model.layers.1.mlp.experts.0.up_proj"})
    assert module_operation("model.layers.0.mlp", names) == ("moe", "")
    assert module_operation("model.layers.0.mlp.gate", names) == ("leaf", "router")
    assert module_operation("model.layers.0.mlp.experts", names) == ("leaf", "experts")       # fused
    assert module_operation("model.layers.1.mlp.experts", names) == ("experts", "")
    assert module_operation("model.layers.1.mlp.experts.0.up_proj", names) == ("leaf", "expert_up")


def test_plan_refuses_what_it_cannot_time():
    with pytest.raises(MeasurementError, match="CPU only"):
        OpsPlan(device="cuda")
    with pytest.raises(MeasurementError, match="prompts"):
        OpsPlan(prompts=(0,))


@pytest.fixture(scope="module")
def timed():
    return run_job(measure_ops(TINY, OpsPlan(prompts=(16,), repeats=1, threads=1)))


def test_a_tiny_model_timed_by_operation(timed):
    assert timed.attention == "eager"
    rows = {(o.phase, o.layer_kind, o.name): o for o in timed.operations}
    for phase in ("prefill", "decode"):
        for name in ("q_proj", "k_proj", "v_proj", "o_proj", "attn_scores", "softmax", "attn_weighted_sum", "rope",
                     "attn_norm", "ffn_norm", "qk_norm", "ffn_gate", "ffn_up", "ffn_act", "ffn_down"):
            row = rows[(phase, "dense", name)]
            assert row.seconds > 0 and row.calls >= 2            # both layers
        assert rows[(phase, "head", "output_head")].seconds > 0
    assert {p.phase for p in timed.passes} == {"prefill", "decode"}
    assert all(p.seconds > 0 and p.seconds_ops > 0 for p in timed.passes)
    # the profiler's FLOPs of a projection are the prediction's: 2 x rows x in x out
    predicted = {(o.phase, o.name): o for o in ops.prefill_operations(timed.spec, ops_workload(16))}
    for name in ("q_proj", "ffn_down"):
        assert rows[("prefill", "dense", name)].flops == pytest.approx(predicted[("prefill", name)].flops)
    assert "16, 64" in rows[("prefill", "dense", "q_proj")].shapes


def ops_workload(prompt: int) -> Any:
    from rooflab.core.values.workload import Workload

    return Workload(prompt=prompt, flash_attention=False, kv_type="f32")


def test_measure_model_ops_on_the_command_line(tmp_path, capsys):
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY), encoding="utf-8")
    code = main(["measure", "model", str(folder), "--engine", "torch", "--ops", "--machine", "reference-cpu",
                 "--prompts", "8", "--repeats", "1", "--threads", "1", "--json"])
    out, _ = capsys.readouterr()
    assert code == 0
    d = json.loads(out)
    row = next(r for r in d["ops"] if (r["phase"], r["name"]) == ("decode", "q_proj"))
    assert row["seconds_measured"] > 0 and row["seconds_ceiling"] > 0 and row["prompt"] == 8
    assert {"name", "layer_kind", "phase", "flops", "bytes", "intensity", "bound", "seconds_ceiling",
            "seconds_expected", "share", "seconds_measured"} <= row.keys()
    residual = next(r for r in d["ops"] if r["name"] == "residual")
    assert residual["seconds_ceiling"] is None and residual["seconds_measured"] > 0   # measured, not predicted
    assert {p["phase"] for p in d["passes"]} == {"prefill", "decode"}


def test_ops_need_an_engine_that_times_them(tmp_path, capsys):
    code = main(["measure", "model", "qwen3-0.6b", "--engine", "llama-bench", "--ops", "--machine", "reference-cpu"])
    _, err = capsys.readouterr()
    assert code == 2 and "--engine torch or --engine llamacpp" in err and len(err.strip().splitlines()) == 1


def test_torch_dying_mid_run_is_one_line(tmp_path, capsys, monkeypatch):
    # the timing runs in a child process: torch killed there (here by ROOFLAB_CHILD_CRASH, as
    # a segfault in a kernel would) ends the child, and the command says so in one line
    from rooflab.core.measure.engines.child_job import CRASH_ENV

    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY), encoding="utf-8")
    monkeypatch.setenv(CRASH_ENV, "SIGSEGV:0")
    code = main(["measure", "model", str(folder), "--engine", "torch", "--ops", "--machine", "reference-cpu",
                 "--prompts", "8", "--repeats", "1"])
    _, err = capsys.readouterr()
    lines = [line for line in err.strip().splitlines() if not line.startswith("[")]
    assert code == 2 and len(lines) == 1 and "SIGSEGV" in lines[0]


def test_an_operation_faster_than_its_ceiling_says_the_ceiling_is_wrong(timed):
    """A timing cannot beat the hardware: a profile whose peaks and bandwidth are far too low (a
    machine measured while busy) makes every operation 'beat' its bound, and the run says the
    ceiling is wrong instead of printing shares of 600 %; a true ceiling is not beaten."""
    import dataclasses

    from rooflab.core.io.presets import load_machine
    from rooflab.core.measure.engines.op_times import beaten_ceiling, compared_rows

    machine = load_machine("reference-cpu")
    low = dataclasses.replace(machine, bandwidth=1e6, peak_flops={k: 1e6 for k in machine.peak_flops})
    said = beaten_ceiling(compared_rows(timed, low), low)
    assert "ran faster than their ceiling" in said and "the ceiling is wrong" in said and "0.0 GB/s" in said
    high = dataclasses.replace(machine, bandwidth=1e16, peak_flops={k: 1e18 for k in machine.peak_flops})
    assert beaten_ceiling(compared_rows(timed, high), high) == ""
