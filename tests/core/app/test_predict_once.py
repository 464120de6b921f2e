"""``rooflab predict`` places the model once and summarises it once, whatever it prints (text,
JSON, CSV) and however it is placed (auto-fit, by hand, several devices): every figure it shows
is read from that one answer (``app.figures``). Before, one predict placed two to four times and
bisected the crossovers twice (issue 33)."""

from __future__ import annotations

import pytest

from rooflab.core.app import figures as figures_module
from rooflab.core.cli.main import main
from rooflab.core.predict import placed as placed_module

TABLE = ["--contexts", "0,4096", "--batches", "1,4", "--prompts", "512"]
CASES = {
    "auto-fit, the device holds it": ["--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090"],
    "auto-fit, a reserve sends layers to the host": ["--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090",
                                                     "--prompt", "5600", "--batch", "23"],
    "by hand": ["--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--gpu-layers", "37", "--cpu-moe", "30"],
    "does not fit": ["--model", "llama-3.3-70b-q4_k_m", "--machine", "rtx-4090", "--gpu-layers", "81"],
    "several devices": ["--model", "llama-3.3-70b-q4_k_m", "--machine", "h100-sxm", "--devices", "2",
                        "--parallel", "tensor"],
}


@pytest.fixture
def counted(monkeypatch):
    """Counts of the placements (``placed_summary``, which every choice goes through) and the
    summaries made while a command runs."""
    counts = {"placements": 0, "summaries": 0}
    place, summarise = placed_module.placed_summary, figures_module.summarise

    def counting_place(*args, **kwargs):
        counts["placements"] += 1
        return place(*args, **kwargs)

    def counting_summarise(*args, **kwargs):
        counts["summaries"] += 1
        return summarise(*args, **kwargs)

    monkeypatch.setattr(placed_module, "placed_summary", counting_place)
    monkeypatch.setattr(figures_module, "summarise", counting_summarise)
    return counts


@pytest.mark.parametrize("form", [[], ["--json"], ["--csv"]], ids=["text", "json", "csv"])
@pytest.mark.parametrize("case", list(CASES))
def test_predict_places_once_and_summarises_once(counted, capsys, case, form):
    assert main(["predict", *CASES[case], *TABLE, *form]) == 0
    out = capsys.readouterr().out
    assert out.strip()
    assert counted == {"placements": 1, "summaries": 1}, case


def test_the_counter_sees_a_second_placement(counted):
    # the count is real: placing a second scenario shows as a second placement and summary
    from rooflab.core.io import load_model
    from rooflab.core.io.presets import load_machine
    from rooflab.core.report.chart_types import Scenario
    from rooflab.core.values.workload import Workload

    sc = Scenario(model=load_model("qwen3-8b-q4_k_m"), machine=load_machine("rtx-4090"), workload=Workload())
    figures_module.figures(sc)
    figures_module.figures(sc)
    assert counted == {"placements": 2, "summaries": 2}
