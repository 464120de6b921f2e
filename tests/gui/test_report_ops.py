"""``rooflab report`` writes the operation view: ops.csv (one row per operation, the same rows
``rooflab predict --ops --csv`` prints) and roofline-ops.png (each operation on the roof)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from rooflab.core.io.catalogue import get_entry, load_entry
from rooflab.core.io.presets import load_machine
from rooflab.core.report.chart_types import Scenario
from rooflab.core.report.ops_chart import ops_roofline_chart
from rooflab.core.report.ops_table import OP_KEYS, scenario_operations
from rooflab.core.values.workload import Workload
from rooflab.gui.main import main


def _rows(path: Path) -> list[dict[str, str]]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    return list(csv.DictReader(lines))


def test_report_writes_ops_csv_and_png(tmp_path, capsys):
    out = tmp_path / "report"
    code = main(["report", "--model", "qwen3-30b-a3b-q4_k_m", "--machine", "rtx-4090", "--out", str(out),
                 "--context", "8192"])
    assert code == 0
    image = QImage(str(out / "roofline-ops.png"))
    assert image.width() == 1200 and image.height() == 800
    rows = _rows(out / "ops.csv")
    assert tuple(rows[0]) == OP_KEYS
    names = {(r["phase"], r["layer_kind"], r["name"]) for r in rows}
    assert ("decode", "moe", "expert_up") in names and ("prefill", "moe", "attn_scores") in names
    assert "# workload: prompt 2048" in (out / "ops.csv").read_text(encoding="utf-8")
    for phase in ("prefill", "decode"):
        assert sum(float(r["share"]) for r in rows if r["phase"] == phase) == pytest.approx(1.0, rel=1e-6)


def test_ops_chart_names_each_point_and_colours_it_by_its_clock():
    spec = load_entry(get_entry("qwen3-8b-q4_k_m"))  # type: ignore[arg-type]
    sc = Scenario(model=spec, machine=load_machine("rtx-4090"), workload=Workload(prompt=2048))
    timed = scenario_operations(sc, None)
    chart = ops_roofline_chart(sc, timed)
    panel = chart.panels[0]
    q = panel.curve("decode:dense:q_proj")
    assert q.role == "memory" and "decode · dense × 36 · q_proj" in q.label
    assert panel.curve("prefill:dense:ffn_up").role == "compute"
    # on the roof at the ceiling: min(C, I x B)
    m = sc.machine
    assert q.y[0] == pytest.approx(min(m.flops(), q.x[0] * m.bandwidth))
    keys = {c.key for c in panel.curves}
    assert "decode:embedding:embedding" not in keys      # no FLOPs: no place on a log-log roofline
