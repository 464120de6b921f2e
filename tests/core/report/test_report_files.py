"""Report CSVs: a header block naming model, machine, workload and version, then rows."""

from __future__ import annotations

import csv
import io
import math

import pytest

from rooflab.core import __version__
from rooflab.core.app.figures import summarise
from rooflab.core.predict.work import bytes_read_per_token, weight_bytes_read_per_token
from rooflab.core.report import (
    CURVE_COLUMNS,
    SUMMARY_COLUMNS,
    TENSOR_COLUMNS,
    curves_csv,
    grouped_rows,
    header_lines,
    summary_csv,
    tensors_csv,
)
from rooflab.core.report.chart_types import Scenario
from rooflab.core.report.charts import build_charts
from rooflab.core.values.workload import Workload


@pytest.fixture
def scenario(moe_spec, machine):
    return Scenario(model=moe_spec, machine=machine, workload=Workload(draft_tokens=3))


def _rows(text: str) -> tuple[list[str], list[list[str]]]:
    header = [line for line in text.splitlines() if line.startswith("# ")]
    body = list(csv.reader(io.StringIO("\n".join(line for line in text.splitlines() if not line.startswith("#")))))
    return header, body


def test_header_block_records_everything(scenario):
    lines = header_lines(scenario, chart="Prefill")
    text = "\n".join(lines)
    assert f"rooflab {__version__}" in lines[0]
    for needle in ("model: tiny-moe", "machine: Test GPU", "workload: prompt 512", "draft_tokens 3", "chart: Prefill"):
        assert needle in text


def test_curves_csv_has_the_columns_and_one_row_per_point(scenario):
    panel = build_charts(scenario)["prefill"].panel("ttft")
    header, rows = _rows(curves_csv(panel.curves, header_lines(scenario)))
    assert header and rows[0] == list(CURVE_COLUMNS)
    ttft = [r for r in rows[1:] if r[0] == "ttft"]
    assert len(ttft) == panel.curve("ttft").x.size
    assert float(ttft[0][5]) == pytest.approx(panel.curve("ttft").y[0], rel=1e-9)
    n_star = [r for r in rows[1:] if r[0] == "n_star"][0]
    assert n_star[2] == "vline" and n_star[5] == ""


def test_stack_rows_are_named_by_category(scenario):
    bar = build_charts(scenario)["memory"].panel("breakdown").curves
    _, rows = _rows(curves_csv(bar, []))
    assert rows[0] == [*CURVE_COLUMNS, "base", "capacity"]
    assert [r[1] for r in rows[1:]] == ["weights", "KV cache", "free"]


def test_summary_and_tensor_tables(scenario):
    _, rows = _rows(summary_csv(summarise(scenario), []))
    assert rows[0] == list(SUMMARY_COLUMNS)
    names = {r[0] for r in rows[1:]}
    assert {"ttft", "tpot", "end_to_end", "decode_ceiling", "speculative_speedup"} <= names
    _, rows = _rows(tensors_csv(scenario.model, []))
    assert rows[0] == list(TENSOR_COLUMNS)
    assert len(rows) - 1 == len(scenario.model.tensors)


def test_header_writes_the_dtype_the_prediction_used_not_none(scenario):
    text = "\n".join(header_lines(scenario))
    assert "None" not in text
    assert f"compute_dtype {scenario.machine.default_dtype}" in text


def test_summary_writes_never_for_an_unreached_crossover_and_whole_bytes(scenario):
    summary = summarise(scenario)
    assert math.isinf(summary.batch_crossover)       # a 100 TFLOP/s, 1 TB/s toy: balance 100
    header, rows = _rows(summary_csv(summary, []))
    values = {r[0]: r[1] for r in rows[1:]}
    assert values["batch_crossover"] == "never" and "inf" not in values.values()
    assert any("never" in line for line in header)
    for key in ("decode_bytes_per_step", "resident_bytes", "cache_bytes", "machine_memory", "max_batch_that_fits"):
        assert values[key].isdigit(), (key, values[key])
    assert int(values["machine_memory"]) == scenario.machine.memory


def test_tensor_rows_add_up_to_the_groups(moe_spec, dense_spec):
    for spec in (moe_spec, dense_spec):
        rows = grouped_rows(spec)
        for g in rows:
            assert sum(r.tensor.nbytes for r in g.members) == g.group.bytes
            assert sum(r.bytes_read_per_token for r in g.members) == pytest.approx(g.bytes_read_per_token)
        # the per-role rule summed over the table is the W every decode step prices
        assert sum(g.bytes_read_per_token for g in rows) == pytest.approx(weight_bytes_read_per_token(spec))
    embedding = next(t for t in dense_spec.tensors if t.name == "token_embd.weight")
    read = bytes_read_per_token(dense_spec, embedding.role, embedding.nbytes, embedding.row_bytes)
    assert read == embedding.row_bytes
