"""A placement whose bill is over the card only by what a lighter back-end context leaves free
runs (llama.cpp ran Gemma-3-12B Q4_K_M wholly on an 8 GiB card): ``rooflab predict`` says it
fits and marks the memory line TIGHT with the amount, not OVERFLOWS; a card smaller still is
refused."""

from __future__ import annotations

import dataclasses
import json

from rooflab.core.cli.main import main
from rooflab.core.io.presets import load_machine

GiB = 1 << 30


def _card(tmp_path, gib: float):
    m = dataclasses.replace(load_machine("rtx-3060-12gb"), memory=gib * GiB, key="", name=f"RTX 3060 at {gib} GiB")
    path = tmp_path / f"card-{gib}.json"
    path.write_text(json.dumps(m.to_dict()), encoding="utf-8")
    return str(path)


def test_a_bill_over_the_card_by_less_than_the_contexts_range_runs_and_says_tight(tmp_path, capsys):
    args = ["predict", "--model", "gemma-3-12b-q4_k_m", "--gpu-layers", "49", "--prompt", "512", "--answer", "128"]
    assert main([*args, "--machine", _card(tmp_path, 8)]) == 0
    out = capsys.readouterr().out
    assert "placement: fits with all 49 layers on the GPU" in out
    (gpu,) = [line for line in out.splitlines() if line.strip().startswith("GPU ")]
    assert "TIGHT: runs if its back end's context takes 0.04 GB less than the 0.48 billed" in gpu
    assert "OVERFLOWS" not in gpu
    assert main([*args, "--machine", _card(tmp_path, 7.8)]) == 0
    out = capsys.readouterr().out
    assert "placement: does NOT fit" in out and "OVERFLOWS" in out
