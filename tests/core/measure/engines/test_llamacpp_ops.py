"""llama.cpp's graph timed node by node (measure.engines.llamacpp.ops): how node names and ops
become operations (the names llama.cpp's builders give, read off a real graph of this build),
and a real run of a tiny random-weight GGUF written by the project's writer, whose rows carry
the operation names ``predict.ops`` gives the same model, through the command line too.
Structure and sanity only, never speed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooflab.core.cli.main import main
from rooflab.core.io.gguf import read_gguf
from rooflab.core.jobs import run_job
from rooflab.core.measure.engines.llamacpp.ops import NodePlan, measure_nodes_in_child, node_operation, tally_nodes
from rooflab.core.predict import ops
from rooflab.core.values.workload import Workload
from tests.factories import needs
from tests.factories.llm_configs import llama_config, random_gguf

LAYERS = 2


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    needs.llama_cpp()
    return random_gguf(tmp_path_factory.mktemp("nodes") / "tiny-q8_0.gguf",
                       llama_config(num_hidden_layers=LAYERS, hidden_size=256, num_attention_heads=4,
                                    num_key_value_heads=2, intermediate_size=512, vocab_size=1000), "q8_0")


# a layer of the graph this llama.cpp builds for a llama model, as its callback named each node
GRAPH = [("embd", "GET_ROWS", "embedding", None), ("norm-0", "RMS_NORM", "norm", 0),
         ("attn_norm-0", "MUL", "attn_norm", 0), ("Qcur-0", "MUL_MAT", "q_proj", 0),
         ("Qcur-0", "RESHAPE", "layout", 0), ("Qcur-0", "ROPE", "rope", 0), ("Vcur-0", "MUL_MAT", "v_proj", 0),
         ("Kcur-0", "MUL_MAT", "k_proj", 0), ("Kcur-0 (view)", "VIEW", "layout", 0),
         ("cache_k_l0 (view)", "SET_ROWS", "kv_write", 0), ("cache_v_l0 (view) (permuted)", "PERMUTE", "layout", 0),
         ("kq-0", "MUL_MAT", "attn_scores", 0), ("kq_soft_max-0", "SOFT_MAX", "softmax", 0),
         ("kqv-0", "MUL_MAT", "attn_weighted_sum", 0), ("kqv_out-0", "CONT", "attn_other", 0),
         ("__fattn__-0", "FLASH_ATTN_EXT", "attention", 0), ("attn_out-0", "MUL_MAT", "o_proj", 0),
         ("ffn_inp-0", "ADD", "residual", 0), ("ffn_gate-0", "MUL_MAT", "ffn_gate", 0),
         ("ffn_up-0", "MUL_MAT", "ffn_up", 0), ("ffn_swiglu-0", "SWIGLU", "ffn_act", 0),
         ("ffn_out-0", "MUL_MAT", "ffn_down", 0), ("l_out-0", "ADD", "residual", 0),
         ("ffn_moe_gate-1", "MUL_MAT_ID", "expert_gate", 1), ("node_65", "GET_ROWS", "other", None),
         ("result_norm", "MUL", "output_norm", None), ("result_output", "MUL_MAT", "output_head", None)]


@pytest.mark.parametrize("name, op, operation, layer", GRAPH)
def test_node_names_become_operations(name, op, operation, layer):
    assert node_operation(name, op) == (operation, layer)


def test_a_norm_goes_to_the_weight_multiply_after_it(gguf):
    spec = read_gguf(gguf)
    nodes = [("norm-0", "RMS_NORM", 2e-6), ("attn_norm-0", "MUL", 1e-6), ("Qcur-0", "MUL_MAT", 5e-6),
             ("Qcur-1", "MUL_MAT", 7e-6), ("norm", "RMS_NORM", 3e-6), ("result_norm", "MUL", 1e-6)]
    rows = {(r.layer_kind, r.name): r for r in tally_nodes(nodes, spec, ops.DECODE, 8)}
    assert rows[("dense", "attn_norm")].seconds == pytest.approx(3e-6)
    assert rows[("dense", "q_proj")].seconds == pytest.approx(12e-6) and rows[("dense", "q_proj")].calls == 2
    assert rows[("head", "output_norm")].seconds == pytest.approx(4e-6)
    assert sum(r.seconds for r in rows.values()) == pytest.approx(sum(n[2] for n in nodes))   # nothing lost


def test_an_unnamed_node_is_read_by_the_one_before_it(gguf):
    spec = read_gguf(gguf)
    nodes = [("kqv_out-1", "CONT", 1e-6), ("node_32", "MUL_MAT", 4e-6), ("ffn_moe_weighted-1", "MUL", 1e-6),
             ("ffn_moe_weighted-1 (view)", "VIEW", 1e-7), ("node_59", "ADD", 2e-6), ("node_33", "GET_ROWS", 3e-6)]
    rows = {(r.layer_kind, r.name): r.seconds for r in tally_nodes(nodes, spec, ops.DECODE, 8)}
    assert rows[("dense", "o_proj")] == pytest.approx(4e-6)       # Qwen3's output projection has no name
    assert rows[("dense", "moe_dispatch")] == pytest.approx(3e-6)
    assert rows[("other", "other")] == pytest.approx(3e-6)        # the last layer's row selection


def test_a_mixture_of_experts_graph_has_its_router_and_experts(tmp_path):
    needs.llama_cpp()
    from tests.factories.llm_configs import qwen3_moe_config

    path = random_gguf(tmp_path / "moe-q8_0.gguf", qwen3_moe_config(num_hidden_layers=1), "q8_0")
    m = run_job(measure_nodes_in_child(path, NodePlan(prompts=(8,), repeats=1, threads=1)))
    measured = {(o.phase, o.layer_kind, o.name): o for o in m.operations}
    for name in ("q_proj", "o_proj", "qk_norm", "router", "expert_gate", "expert_up", "expert_down", "ffn_act",
                 "attn_scores"):
        assert measured[("decode", "moe", name)].seconds > 0, name


def test_a_real_graph_timed_node_by_node_carries_the_predicted_names(gguf):
    m = run_job(measure_nodes_in_child(gguf, NodePlan(prompts=(16,), repeats=1, threads=1)))
    spec = m.spec
    assert m.engine == "llama.cpp" and not m.flash_attention and m.threads == 1
    predicted = {(o.phase, o.layer_kind, o.name) for phase in (ops.prefill_operations(spec, Workload(prompt=16)),
                                                                ops.decode_operations(spec, Workload(prompt=16)))
                 for o in phase}
    measured = {(o.phase, o.layer_kind, o.name): o for o in m.operations}
    for phase in (ops.PREFILL, ops.DECODE):
        for name in ("q_proj", "k_proj", "v_proj", "attn_scores", "softmax", "attn_weighted_sum", "o_proj",
                     "ffn_gate", "ffn_up", "ffn_act", "ffn_down", "attn_norm", "ffn_norm", "rope"):
            row = measured[(phase, "dense", name)]
            assert (phase, "dense", name) in predicted
            assert row.seconds > 0 and row.prompt == 16
        assert measured[(phase, "dense", "q_proj")].calls == LAYERS          # one node a layer
        assert measured[(phase, "head", "output_head")].calls == 1
    for p in m.passes:
        assert p.seconds > 0 and p.seconds_ops > 0
        # the nodes' own times (callbacks left out) are a part of the pass timed node by node
        assert any(f"{p.phase} of prompt 16" in note for note in m.notes)


def test_measure_model_ops_on_llama_cpp(gguf, capsys):
    code = main(["measure", "model", str(gguf), "--engine", "llamacpp", "--ops", "--machine", "desktop-ddr5",
                 "--prompts", "16", "--repeats", "1", "--threads", "1", "--json"])
    out, _ = capsys.readouterr()
    assert code == 0
    d = json.loads(out)
    assert d["engine"] == "llama.cpp" and {p["phase"] for p in d["passes"]} == {"prefill", "decode"}
    row = next(r for r in d["ops"] if (r["phase"], r["name"]) == ("decode", "ffn_down"))
    assert row["seconds_measured"] > 0 and row["seconds_ceiling"] > 0 and 0 < row["share_of_bound"]
    write = next(r for r in d["ops"] if r["name"] == "kv_write")
    assert write["seconds_ceiling"] is None and write["seconds_measured"] > 0        # measured, not predicted
    code = main(["measure", "model", str(gguf), "--engine", "llamacpp", "--ops", "--machine", "desktop-ddr5",
                 "--prompts", "16", "--repeats", "1", "--threads", "1"])
    out, _ = capsys.readouterr()
    assert code == 0 and "summed by operation" in out and "the callbacks between nodes" in out
    assert any(line.split()[:3] == ["decode", "dense", "attn_scores"] for line in out.splitlines())


def test_a_gpu_asked_of_node_timing_is_one_line(gguf, capsys):
    code = main(["measure", "model", str(gguf), "--engine", "llamacpp", "--ops", "--machine", "desktop-ddr5",
                 "--gpu-layers", "4"])
    _, err = capsys.readouterr()
    assert code == 2 and "--gpu-layers" in err and len(err.strip().splitlines()) == 1
