"""``rooflab compare``: models x machines x weights in one table, text, JSON or CSV."""

from __future__ import annotations

import csv
import io
import json

import pytest

from rooflab.core.cli.main import main

MODELS = "gpt-oss-120b-mxfp4,qwen3-8b-q4_k_m,llama-3.3-70b-q4_k_m"
MACHINES = "rtx-4090,h100-sxm,m4-max,desktop-ddr5"


def run(capsys, *argv):
    code = main(["compare", "--ceiling-only", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_three_models_on_four_machines(capsys):
    code, out, _ = run(capsys, "--models", MODELS, "--machines", MACHINES)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 1 + 12
    assert lines[0].split()[:3] == ["model", "machine", "weights"]
    gpt_on_4090 = next(line for line in lines if line.startswith("gpt-oss-120b") and "rtx-4090" in line)
    assert "the experts of 23 of them on the CPU (-ngl 37 --n-cpu-moe 23)" in gpt_on_4090
    assert "16.0 ms" in gpt_on_4090


def test_json_has_stable_keys(capsys):
    d = json.loads(run(capsys, "--models", "qwen3-8b-q4_k_m", "--machines", "rtx-4090,h100-sxm", "--json",
                       "--depths", "0,1024")[1])
    assert [c["key"] for c in d["columns"]][:3] == ["model", "machine", "weights"]
    row = d["rows"][0]
    assert {"decode_tokens_per_second_at_0", "decode_tokens_per_second_at_1024", "largest_context_tokens",
            "tokens_per_second_total", "expected_tpot_seconds", "fits", "flags"} <= row.keys()
    assert row["expected_tpot_seconds"] is None and row["fits"] is True and d["depths"] == [0, 1024]


def test_weights_multiply_the_rows(capsys):
    text = run(capsys, "--models", "qwen3-8b-q4_k_m,qwen3-0.6b", "--machines", "rtx-4090",
               "--weights", "q4_k_m,q8_0", "--csv")[1]
    rows = list(csv.DictReader(io.StringIO("".join(line + "\n" for line in text.splitlines()
                                                   if not line.startswith("#")))))
    assert sorted(r["weights"] for r in rows) == ["Q4_K_M", "Q4_K_M", "Q8_0", "Q8_0"]


@pytest.mark.parametrize("argv, fragment", [
    (["--models", "no-such-model", "--machines", "rtx-4090"], "unknown model 'no-such-model'"),
    (["--models", "qwen3-8b-q4_k_m", "--machines", "no-such-gpu"], "unknown machine 'no-such-gpu'"),
    (["--models", "qwen3-8b-q4_k_m", "--machines", "rtx-4090", "--weights", "q3_zz"], "q3_zz"),
])
def test_bad_names_are_one_line_exit_2(capsys, argv, fragment):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and fragment in err


def test_out_saves_the_csv(capsys, tmp_path):
    code, _, err = run(capsys, "--models", "qwen3-8b-q4_k_m", "--machines", "rtx-4090", "--out", str(tmp_path))
    assert code == 0 and (tmp_path / "compare.csv").read_text(encoding="utf-8").startswith("# rooflab compare")
    assert "compare.png needs the desktop package" in err        # core alone draws no PNG
