"""Options as the user typed them (issue 34, the minor line): a value out of range names its
option ("--ubatch must be ...", not the field "workload.ubatch"), and a control character in
--model or --out never reaches the terminal raw: a model name is quoted, a folder holding one is
refused before anything is written (the files written there were listed raw)."""

from __future__ import annotations

import pytest

from rooflab.core.cli.main import main

ON = {"predict": ("--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090"),
      "compare": ("--models", "qwen3-8b-q4_k_m", "--machines", "rtx-4090"),
      "fit": ("--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090")}
RAW = ("\x1b", "\x07", "\x9b")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as stop:           # an option argparse refuses
        code = int(stop.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in err and not any(c in out + err for c in RAW), repr(err)
    return code, out, err


def one_line(code: int, err: str, says: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "error:" in lines[0] and says in lines[0], err


@pytest.mark.parametrize("command", sorted(ON))
@pytest.mark.parametrize("option, value, says", [
    ("--ubatch", "0", "rooflab: error: --ubatch must be an integer in [1, 65536], got 0"),
    ("--threads", "0", "rooflab: error: --threads must be an integer in [1, 1024] (or none), got 0"),
    ("--prompt", "0", "rooflab: error: --prompt must be an integer in [1, 16777216], got 0"),
    ("--context", "-1", "rooflab: error: --context must be an integer in [0, 16777216], got -1"),
    ("--kv-type", "zz", "rooflab: error: --kv-type must be one of"),
])
def test_a_value_out_of_range_names_its_option(capsys, command, option, value, says):
    code, out, err = run(capsys, command, *ON[command], option, value)
    one_line(code, err, says)
    assert "workload." not in err and out == ""


@pytest.mark.parametrize("option, value", [("--batch", "0"), ("--draft-tokens", "99"), ("--acceptance", "2"),
                                           ("--offload", "2")])
def test_predict_names_every_workload_option(capsys, option, value):
    code, _, err = run(capsys, "predict", *ON["predict"], option, value)
    one_line(code, err, f"rooflab: error: {option} must be")


def test_a_control_character_in_the_model_is_quoted(capsys):
    code, _, err = run(capsys, "predict", "--model", "qwen\x1b]0;pwned\x07", "--machine", "rtx-4090")
    one_line(code, err, "unknown model 'qwen\\x1b]0;pwned\\x07'")
    code, _, err = run(capsys, "measure", "server", "http://127.0.0.1:9", "--model", "o\x1b[31mk")
    one_line(code, err, "the model name 'o\\x1b[31mk' holds a control character")


@pytest.mark.parametrize("command", ["report", "compare"])
def test_a_control_character_in_out_is_refused_before_writing(capsys, tmp_path, command):
    folder = tmp_path / "rep\x1b]0;pwned\x07"
    argv = [*ON["predict"]] if command == "report" else [*ON["compare"]]
    code, out, err = run(capsys, command, *argv, "--out", str(folder))
    one_line(code, err, "argument --out: ")
    assert "holds a control character" in err and out == "" and not folder.exists()
