"""The operation view's data, built in core: "where the time goes" (``report.ops_bar``: a pass
cut into its operations, each segment's share the prediction's own) and the measured points
(``report.ops_chart.measured_op_curves``: each operation a run timed, at its predicted intensity
and the FLOP/s its measured time implies; rows with no place on a roofline left out)."""

from __future__ import annotations

import pytest

from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.ops import DECODE, PREFILL
from rooflab.core.predict.ops_clocks import timed_operations
from rooflab.core.report.ops_bar import time_bars
from rooflab.core.report.ops_chart import measured_op_curves
from rooflab.core.values.workload import Workload


def test_a_bar_is_its_pass_cut_into_its_operations():
    spec, machine = load_model("qwen3-8b-q4_k_m"), load_machine("rtx-4090")
    timed = timed_operations(spec, machine, Workload(prompt=512, context=8192))
    prefill, decode = time_bars(timed, "here")
    assert (prefill.phase, decode.phase, decode.series, decode.how) == (PREFILL, DECODE, "here", "at the ceiling")
    rows = [t for t in timed if t.op.phase == DECODE and t.seconds_ceiling > 0]
    assert [s.name for s in decode.segments] == [t.op.name for t in rows]          # in the pass's order
    assert decode.seconds == pytest.approx(sum(t.seconds_ceiling for t in rows), rel=1e-12)
    for s, t in zip(decode.segments, rows, strict=True):
        assert s.share == t.share and s.seconds == t.seconds_ceiling
    # contiguous: each segment starts where the one before it ends
    for a, b in zip(decode.segments, decode.segments[1:], strict=False):
        assert b.start == pytest.approx(a.start + a.seconds, rel=1e-12)
    mid = decode.segments[3]
    assert decode.segment_at(mid.start + mid.seconds / 2) is mid and decode.segment_at(decode.seconds * 2) is None
    assert "4 FLOP/byte" in decode.describe(next(s for s in decode.segments if s.name == "attn_scores"))
    expected = time_bars(timed_operations(spec, machine, Workload(prompt=512), expected=machine))
    assert expected[1].how == "as expected"


def test_measured_points_sit_at_the_predicted_intensity():
    rows = [{"phase": "decode", "layer_kind": "dense", "name": "q_proj", "prompt": 8, "intensity": 2.0,
             "flops": 4e6, "seconds_measured": 1e-3, "share_of_bound": 0.25},
            {"phase": "decode", "layer_kind": "dense", "name": "residual", "prompt": 8, "intensity": None,
             "flops": None, "seconds_measured": 2e-4, "share_of_bound": None},        # no prediction
            {"phase": "decode", "layer_kind": "dense", "name": "k_proj", "prompt": 8, "intensity": 2.0,
             "flops": 4e6, "seconds_measured": None, "share_of_bound": None}]         # not timed
    (q,) = measured_op_curves(rows)
    assert q.key == "decode:dense:q_proj:measured:8" and q.role == "measured"
    assert (q.x[0], q.y[0]) == (2.0, pytest.approx(4e9)) and q.extras["of its bound"][0] == 0.25
    assert q.label == "decode · dense · q_proj, measured (prompt 8), 25% of its bound"     # its gap, said
