"""Figures read in one style (issue 39): a serving table's latencies carry their unit (a 29 s
TTFT read "28994.1" in a column of ms), a memory's capacity reads as its vendor states it (a
64 GB host "64.00 GB", a 24 GiB card "25.77 GB"), a band's two ends share their decimals ("7 ms
to 10.3 ms" beside "7.94 ms"), and compare's text table has the expected TTFT its JSON has."""

from __future__ import annotations

import json
import re

from rooflab.core.cli.main import main
from rooflab.core.report.units import fmt_range

MODEL = ["--model", "qwen3-8b-q4_k_m"]


def test_serving_latencies_carry_their_unit(capsys):
    assert main(["predict", *MODEL, "--machine", "desktop-ddr5", "--serve", "--concurrency", "1,4"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.strip().startswith("c=")]
    assert rows
    for row in rows:
        cells = [c.strip() for c in row.split("|")[1:]]
        for cell in cells:
            for figure in re.findall(r"\S+ (?:ms|s|µs|h)\b", cell):
                number = float(figure.split()[0].replace(",", ""))
                assert number < 1000, row                           # 29 s, never 28994.1 (ms)
    assert "28994" not in out and " 29 s" in out and "(latencies in ms" not in out


def test_capacities_as_stated(capsys):
    assert main(["predict", *MODEL, "--machine", "rtx-4090"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"GPU +[\d.]+ GB of 24 GiB \(25.8 GB\):", out), out
    assert re.search(r"host +[\d.]+ GB of 64 GB:", out) and "64.00 GB" not in out


def test_a_band_keeps_its_decimals():
    assert fmt_range(0.007, 0.0103, "s") == "7.0 ms to 10.3 ms"
    assert fmt_range(0.0251, 0.0481, "s") == "25.1 ms to 48.1 ms"
    assert fmt_range(50.3, 60.6, "tokens/s") == "50.3 tokens/s to 60.6 tokens/s"
    assert fmt_range(2.5e9, 3e9, "B") == "2.50 GB to 3.00 GB"


def test_compare_text_has_the_expected_ttft_its_json_has(capsys):
    argv = ["compare", "--models", "qwen3-8b-q4_k_m", "--machines", "rtx-4090"]
    assert main(argv) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert "expected TTFT" in header
    assert main([*argv, "--json"]) == 0
    ttft = json.loads(capsys.readouterr().out)["rows"][0]["expected_ttft_seconds"]
    assert f"{ttft * 1e3:,.1f} ms" in row
