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
    flags = "-ngl 37 --n-cpu-moe 23 -ot blk.23.ffn_down=CPU"      # llama.cpp's fit: see test_fit
    assert "the experts of 24 of them on the CPU" in gpt_on_4090 and f"({flags})" in gpt_on_4090
    assert "16.2 ms" in gpt_on_4090


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


def test_names_given_twice_make_one_row_worked_out_once(capsys, monkeypatch):
    """Issue 15: 1,000 rows naming two mixture-of-experts models over and over took 87 s, each
    row placed again. A name repeated (or a weight format in another case) is one row."""
    from rooflab.core.report import compare
    from tests.factories.spies import spy

    calls = spy(monkeypatch, "compare_row", module=compare)
    models = ",".join(["gpt-oss-20b-mxfp4", "qwen3-30b-a3b-q4_k_m"] * 500)
    code, out, _ = run(capsys, "--models", models, "--machines", "reference-cpu,reference-cpu", "--csv")
    rows = [line for line in out.splitlines() if not line.startswith(("#", "model,"))]
    assert code == 0 and len(rows) == 2 and len(calls) == 2
    code, out, _ = run(capsys, "--models", "qwen3-0.6b", "--machines", "rtx-4090", "--weights", "q8_0,Q8_0,q8_0",
                       "--csv")
    assert code == 0 and len([line for line in out.splitlines() if line.startswith("Qwen3")]) == 1


def test_a_repeated_entry_is_worked_out_once_and_each_row_is_a_progress_point():
    from rooflab.core.io import load_model
    from rooflab.core.io.presets import load_machine
    from rooflab.core.jobs import run_job
    from rooflab.core.report.compare import compare_rows_job
    from rooflab.core.values.workload import Workload

    spec, machine = load_model("qwen3-0.6b"), load_machine("rtx-4090")
    seen = []
    rows = run_job(compare_rows_job([(spec, machine, "")] * 3, Workload()), seen.append)
    assert rows[0] is rows[1] is rows[2]
    assert [p.fraction for p in seen] == pytest.approx([1 / 3, 2 / 3, 1.0]) and seen[-1].message == "3 of 3 rows"


def test_progress_is_shown_only_for_a_long_table(capsys):
    """A clock handed in: what is shown depends on how long the table takes, never on this
    machine's speed."""
    from rooflab.core.cli.compare import RowProgress
    from rooflab.core.jobs import Progress

    now = [0.0]
    status = RowProgress(quiet_s=2.0, every_s=1.0, clock=lambda: now[0])
    for i in range(1, 11):
        now[0] = i * 0.5                        # half a second a row
        status(Progress(step="compare", message=f"{i} of 10 rows", fraction=i / 10))
    status.done()
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["rooflab compare: 4 of 10 rows", "rooflab compare: 6 of 10 rows", "rooflab compare: 8 of 10 rows",
                     "rooflab compare: 10 of 10 rows"]
    quick = RowProgress(quiet_s=2.0, clock=lambda: 0.0)
    quick(Progress(step="compare", message="1 of 1 rows", fraction=1.0))
    assert capsys.readouterr().err == ""


def test_the_table_and_csv_name_the_depths_the_rows_have(capsys, tmp_path):
    code, out, _ = run(capsys, "--models", "qwen3-0.6b", "--machines", "rtx-4090", "--depths", "0,4096",
                       "--out", str(tmp_path))
    assert code == 0 and "tok/s @4,096" in out and "@32,768" not in out
    header = next(line for line in (tmp_path / "compare.csv").read_text().splitlines() if line.startswith("model,"))
    assert header.count("decode_tokens_per_second_at_") == 2


def test_the_ubatch_is_a_compare_option_that_moves_an_offloaded_prompt(capsys):
    """-ub as in predict: gpt-oss-120b on an RTX 4090 streams its host experts to the GPU once
    per ubatch, so a larger ubatch gives a shorter TTFT; a bad one is one line, exit 2."""
    from rooflab.core.cli.main import main

    ttft = {}
    for ub in (512, 4096):
        assert main(["compare", "--models", "gpt-oss-120b-mxfp4", "--machines", "rtx-4090", "--ceiling-only",
                     "--prompt", "8192", "--ubatch", str(ub), "--json"]) == 0
        ttft[ub] = json.loads(capsys.readouterr().out)["rows"][0]["ttft_seconds"]
    assert ttft[4096] < 0.6 * ttft[512]
    assert main(["compare", "--models", "qwen3-8b-q4_k_m", "--machines", "rtx-4090", "--ubatch", "0"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
