"""``predict --json`` and ``--csv`` print byte counts as whole numbers."""

from __future__ import annotations

import csv
import io
import json

from rooflab.core.cli.main import main

BYTE_KEYS = ("bytes_per_step", "kv_bytes_per_step", "memory_bytes")
JSON_ONLY_BYTE_KEYS = ("placed_memory_bytes",)        # the placement's, in --json only


def test_predict_json_writes_byte_counts_as_integers(capsys):
    # a mixture of experts: the expected bytes of a step at batch 3 are fractional
    assert main(["predict", "--model", "qwen3-30b-a3b-q4_k_m", "--machine", "rtx-4090", "--json",
                 "--contexts", "4096", "--batches", "1,3", "--prompts", "1"]) == 0
    rows = json.loads(capsys.readouterr().out)["decode"]
    for row in rows:
        for key in BYTE_KEYS + JSON_ONLY_BYTE_KEYS:
            assert isinstance(row[key], int), (key, row[key])


def test_predict_csv_writes_the_same_integers(capsys):
    args = ["predict", "--model", "qwen3-30b-a3b-q4_k_m", "--machine", "rtx-4090", "--contexts", "4096",
            "--batches", "3", "--prompts", "1"]
    assert main([*args, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["decode"]
    assert main([*args, "--csv"]) == 0
    (line,) = list(csv.DictReader(io.StringIO(capsys.readouterr().out.split("\ntable,")[0])))
    for key in BYTE_KEYS:
        assert line[key] == str(row[key])
