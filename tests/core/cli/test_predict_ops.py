"""``rooflab predict --ops``: the operation view on the command line (text, JSON, CSV), its
rows summing to the pass figures the same command prints without --ops."""

from __future__ import annotations

import csv
import io
import json

import pytest

from rooflab.core.cli.main import main
from rooflab.core.report.ops_table import OP_KEYS
from rooflab.core.values.quant import bytes_per_value

STABLE = {"name", "layer_kind", "phase", "flops", "bytes", "intensity", "bound", "seconds_ceiling",
          "seconds_expected", "share"}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_ops_json_lists_both_phases_summing_to_the_pass(capsys):
    code, out, _ = run(capsys, "predict", "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", "--ops", "--json",
                       "--ceiling-only", "--prompt", "2048")
    assert code == 0
    d = json.loads(out)
    assert {o["phase"] for o in d["ops"]} == {"prefill", "decode"}
    for o in d["ops"]:
        assert STABLE <= o.keys()
        assert o["seconds_expected"] is None            # --ceiling-only: a ceiling is never "expected"
        assert o["bound"] in ("memory", "compute")
    code, out, _ = run(capsys, "predict", "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", "--json",
                       "--ceiling-only", "--prompt", "2048")
    request = json.loads(out)["request"]
    for s in d["sums"]:
        rows = [o for o in d["ops"] if o["phase"] == s["phase"]]
        counted = sum(o["flops"] - o["flops_left_out"] for o in rows)
        assert counted == pytest.approx(s["pass_flops"], rel=1e-9)
        moved = sum(o["weight_bytes"] + o["cache_bytes"] for o in rows)
        assert moved == pytest.approx(s["pass_bytes"], rel=1e-9)
        assert sum(o["share"] for o in rows) == pytest.approx(1.0)
    # the prefill pass the rows sum to is the one whose time the plain command prints as TTFT
    pre = next(s for s in d["sums"] if s["phase"] == "prefill")
    assert pre["pass_seconds_ceiling"] == pytest.approx(request["ttft_seconds"], rel=1e-6)
    q = next(o for o in d["ops"] if (o["phase"], o["name"]) == ("decode", "q_proj"))
    assert q["intensity"] == pytest.approx(2 / bytes_per_value("q4_k"), rel=0.01)


def test_ops_text_and_csv(capsys):
    code, out, _ = run(capsys, "predict", "--model", "gpt-oss-20b-mxfp4", "--machine", "dgx-spark", "--ops",
                       "--ceiling-only", "--context", "8192")
    assert code == 0
    assert "sliding moe" in out and "attn_scores" in out and "expert_up" in out
    assert "decode: the rows' FLOPs" in out
    code, out, _ = run(capsys, "predict", "--model", "gpt-oss-20b-mxfp4", "--machine", "dgx-spark", "--ops", "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and tuple(rows[0]) == OP_KEYS
    assert any(r["seconds_expected"] for r in rows)       # the DGX Spark's published calibration


def test_ops_bad_input_is_one_line(capsys):
    code, out, err = run(capsys, "predict", "--model", "no-such-model", "--machine", "rtx-4090", "--ops")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
