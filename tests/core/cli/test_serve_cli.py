"""``rooflab predict --serve``: the serving table agrees with ``predict``'s own request at one
client, the JSON keys are stable, and a bad value is one line and exit status 2."""

from __future__ import annotations

import json

import pytest

from rooflab.core.cli.main import main

MODEL = ("--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", "--ceiling-only")
LEVEL_KEYS = {"mode", "level", "completed", "duration", "ttft", "tpot", "itl", "e2e", "requests_per_second",
              "output_tokens_per_second", "tokens_per_second_per_sequence", "mean_prompt_tokens",
              "mean_answer_tokens", "sustained_requests_per_second", "goodput", "goodput_share"}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_serve_json_agrees_with_predict(capsys):
    code, out, _ = run(capsys, "predict", *MODEL, "--json")
    request = json.loads(out)["request"]
    code, out, _ = run(capsys, "predict", *MODEL, "--serve", "--concurrency", "1,4", "--request-rate", "0.5",
                       "--requests", "12", "--ttft-slo-ms", "500", "--json")
    assert code == 0
    d = json.loads(out)["serving"]
    assert d["expected"] is None and d["calibration"] is None
    assert d["plan"]["slots"] == d["sequences_that_fit"] and d["plan"]["step_tokens"] == 2048
    levels = d["ceiling"]["levels"]
    assert [(lv["mode"], lv["level"]) for lv in levels] == [("concurrency", 1), ("concurrency", 4), ("rate", 0.5)]
    assert all(LEVEL_KEYS == lv.keys() and lv["completed"] == 12 for lv in levels)
    assert {"mean", "p50", "p90", "p99"} == levels[0]["ttft"].keys()
    assert levels[0]["ttft"]["p50"] == pytest.approx(request["ttft_seconds"], rel=1e-3)
    assert levels[0]["tpot"]["p50"] == pytest.approx(request["tpot_seconds"], rel=1e-3)
    assert levels[0]["goodput_share"] == 1.0             # 180 ms alone, under the 500 ms bound
    assert d["ceiling"]["saturation_requests_per_second"] > levels[1]["requests_per_second"]


def test_serve_text(capsys):
    code, out, _ = run(capsys, "predict", *MODEL, "--request-rate", "1,2", "--slots", "8", "--step-tokens", "512")
    assert code == 0
    assert "8 slots, 512 tokens per step, prompt 2,048 tokens, answer 256 tokens" in out
    assert "TTFT p50" in out and "1/s" in out and "2/s" in out and "saturation:" in out
    assert max(len(line) for line in out.splitlines()) <= 160


def test_serve_default_levels_and_expected(capsys):
    code, out, _ = run(capsys, "predict", "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", "--serve",
                       "--json", "--requests", "8")
    d = json.loads(out)["serving"]
    assert [lv["level"] for lv in d["ceiling"]["levels"]] == [1, 2, 4, 8, 16]
    if d["expected"] is not None:        # a preset with a back end: the published calibration applies
        assert d["calibration"]["engine"]
        ceiling, expected = d["ceiling"]["levels"][0], d["expected"]["levels"][0]
        assert expected["tpot"]["p50"] >= ceiling["tpot"]["p50"]


@pytest.mark.parametrize("argv, says", [
    (("--serve", "--request-rate", "0"), "--request-rate"),
    (("--serve", "--request-rate", "nan"), "--request-rate"),
    (("--serve", "--concurrency", "0"), "--concurrency"),
    (("--serve", "--slots", "0"), "--slots"),
    (("--serve", "--requests", "1e9"), "--requests"),
    (("--serve", "--prompt-spread", "1.5"), "--prompt-spread"),
])
def test_bad_values_are_one_line(capsys, argv, says):
    with pytest.raises(SystemExit) as stop:
        main(["predict", *MODEL, *argv])
    _, err = capsys.readouterr()
    assert stop.value.code == 2 and says in err and len(err.strip().splitlines()) == 1


def test_refusals_after_parsing_are_one_line(capsys):
    for argv, says in ((("--serve", "--slots", "64", "--step-tokens", "16"), "at least slots"),
                       (("--serve", "--csv"), "not --csv")):
        code, _, err = run(capsys, "predict", *MODEL, *argv)
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1


def test_compare_serve_gives_each_row_predicts_levels(capsys):
    models = ("--models", "qwen3-8b-q4_k_m,gpt-oss-120b-mxfp4", "--machines", "rtx-4090")
    levels = ("--concurrency", "1,4", "--request-rate", "0.5", "--requests", "12")
    code, out, _ = run(capsys, "compare", *models, "--serve", *levels, "--json")
    assert code == 0
    served = json.loads(out)["serving"]
    assert [(r["model"], r["machine"]) for r in served] == [("Qwen3-8B Q4_K_M", "rtx-4090"),
                                                          ("gpt-oss-120b MXFP4", "rtx-4090")]
    code, out, _ = run(capsys, "predict", "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", "--serve",
                       *levels, "--json")
    alone = json.loads(out)["serving"]
    first = served[0]
    assert first["plan"] == alone["plan"]                               # the row is served as predict serves it
    assert first["ceiling"]["levels"] == alone["ceiling"]["levels"]
    assert first["expected"]["levels"] == alone["expected"]["levels"] and first["expected_with"]
    assert [(lv["mode"], lv["level"]) for lv in served[1]["ceiling"]["levels"]] == \
        [("concurrency", 1), ("concurrency", 4), ("rate", 0.5)]
    code, text, _ = run(capsys, "compare", *models, "--serve", *levels, "--ceiling-only")
    assert code == 0 and "serving Qwen3-8B Q4_K_M on rtx-4090" in text and "expected with" not in text
    assert text.count("TTFT p50") == 2 and "saturation:" in text
    code, _, err = run(capsys, "compare", *models, "--serve", "--csv")
    assert code == 2 and "--serve prints text or --json" in err
