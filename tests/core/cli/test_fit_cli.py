"""``rooflab fit``: every catalogue model ranked on one machine, the same rows as ``rooflab compare``."""

from __future__ import annotations

import json

import pytest

from rooflab.core.cli.main import main
from rooflab.core.io.catalogue import catalogue_keys
from rooflab.core.report.fit_table import FORMATS

EXTRA = ("rank", "catalogue_key", "named", "weights_format", "params_total", "fit", "fast_enough", "tokens_per_second",
         "why")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_fit_and_compare_agree_on_every_row(capsys):
    """Each row of ``rooflab fit`` is ``rooflab compare``'s row for the same model and format on the
    same machine, figure for figure (expected figures included)."""
    code, out, _ = run(capsys, "fit", "--machine", "rtx-4090", "--json", "--context", "1024")
    assert code == 0
    fitted = json.loads(out)
    models = ",".join(catalogue_keys())
    compared = {}
    for extra in ((), ("--weights", ",".join(FORMATS))):
        code, out, _ = run(capsys, "compare", "--models", models, "--machines", "rtx-4090", "--context", "1024",
                           "--json", *extra)
        assert code == 0
        compared.update({(r["model"], r["weights"]): r for r in json.loads(out)["rows"]})
    assert fitted["workload"] == json.loads(out)["workload"]
    assert {r["catalogue_key"] for r in fitted["rows"]} == set(catalogue_keys())
    for row in fitted["rows"]:
        same = compared[(row["model"], row["weights"])]
        assert {k: v for k, v in row.items() if k not in EXTRA} == same, row["model"]
        assert row["tokens_per_second"] == (same["expected_tokens_per_second_per_sequence"]
                                            if same["expected_tokens_per_second_per_sequence"] is not None
                                            else same["tokens_per_second_per_sequence"])
    assert any(r["expected_tpot_seconds"] is not None for r in fitted["rows"])      # a preset: published rates


def test_text_ranks_and_names_the_machine(capsys):
    code, out, _ = run(capsys, "fit", "--machine", "rtx-4090", "--ceiling-only")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("What can I run on NVIDIA GeForce RTX 4090? 24 GiB (25.8 GB)")
    assert lines[2].startswith("first what fits at 10 tokens/s or more, then slower, then paged from disk")
    assert lines[3].split()[:5] == ["rank", "model", "weights", "params", "B"]
    gpt = next(line for line in lines if "gpt-oss-120b" in line)
    assert "experts on the CPU, " in gpt and "-ngl 37 --n-cpu-moe 23" in gpt
    first = lines[4].split()
    assert first[:3] == ["1", "gpt-oss-120b", "MXFP4"] and first[4] == "116.8"     # the largest that runs
    assert "paged from disk" in lines[-1] or "does NOT fit" in lines[-1]


def test_min_tps_and_context_change_the_ranking(capsys):
    _, plain, _ = run(capsys, "fit", "--machine", "rtx-3060-12gb", "--ceiling-only", "--json", "--min-tps", "0",
                      "--sort", "speed")
    _, slow, _ = run(capsys, "fit", "--machine", "rtx-3060-12gb", "--ceiling-only", "--json", "--min-tps", "50",
                     "--context", "16384")
    plain, slow = json.loads(plain), json.loads(slow)
    assert slow["min_tokens_per_second"] == 50 and slow["workload"]["context"] == 16384
    assert slow["sort"] == "capability" and plain["sort"] == "speed" and plain["min_tokens_per_second"] is None
    runs = [r for r in slow["rows"] if r["fit"] in ("device", "experts", "layers")]
    ranks = [r["fast_enough"] for r in runs]
    assert ranks == sorted(ranks, reverse=True) and False in ranks
    fast = [r["params_total"] for r in runs if r["fast_enough"]]
    assert fast == sorted(fast, reverse=True)
    assert all(r["why"].endswith("below 50") for r in runs if not r["fast_enough"])
    llama = next(r for r in plain["rows"] if r["catalogue_key"] == "llama-3.3-70b-q4_k_m" and not r["weights_format"])
    assert llama["fit"] == "layers" and llama["fits"]
    deep = {r["model"]: r for r in slow["rows"]}
    assert deep["Qwen3-8B Q4_K_M"]["tpot_seconds"] > next(
        r for r in plain["rows"] if r["model"] == "Qwen3-8B Q4_K_M")["tpot_seconds"]


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--machine", "no-such-machine"], "unknown machine 'no-such-machine'"),
    (["--machine", "rtx-4090", "--weights", "q9_z"], "unknown weight format 'q9_z'"),
    (["--machine", "rtx-4090", "--min-tps", "-1"], "--min-tps must be 0 or more"),
    (["--machine", "rtx-4090", "--batch", "0"], "--batch must be in"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, fragment):
    code, out, err = run(capsys, "fit", *argv)
    assert code == 2 and out == "" and fragment in err and len(err.splitlines()) == 1


def test_an_unknown_sort_is_one_line_exit_2(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["fit", "--machine", "rtx-4090", "--sort", "size"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "argument --sort: invalid choice: 'size'" in err and len(err.splitlines()) == 1
