"""The Roofline tab's "where the time goes" bar: the prefill and the decode step cut into their
operations. Control -> model: a drag of the context slider changes the workload and the bar
follows, each segment's share the one ``rooflab predict --ops --json`` prints for that workload.
Model -> control: a workload set in the state moves the slider and redraws the bar. Hover
reads a segment's row; pinned series get a bar each, compared operation by operation; it fits
and renders at 1280x720 and 1920x1080, light and dark."""

from __future__ import annotations

import json

import pytest

from rooflab.core.app.resolve import resolve_workload
from rooflab.core.cli.parser import build_parser
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.ops import DECODE, PREFILL
from rooflab.gui.main import main
from rooflab.gui.plots.ops_bar import colour_of
from rooflab.gui.plots.roofline import OPERATIONS, PASSES
from rooflab.gui.widgets.theme import DARK, LIGHT
from tests.factories.waits import WAIT_MS
from tests.gui.conftest import catalogue_spec

MODEL, MACHINE = "qwen3-8b-q4_k_m", "rtx-4090"


def _cli_shares(capsys, args: list[str]) -> dict[tuple[str, str, str], float]:
    assert main(["predict", *args, "--ops", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    return {(r["phase"], r["layer_kind"], r["name"]): r["share"] for r in doc["ops"]}


def _bar_shares(plot, row: int = 0) -> dict[tuple[str, str, str], float]:
    bars = plot.time_bar.bars
    return {(phase, s.layer_kind, s.name): s.share for phase in (PREFILL, DECODE) for s in bars[phase][row].segments}


def _open(qtbot, window, args: list[str]):
    plot = window.plot_panel.roofline
    window.plot_tabs.setCurrentWidget(plot)
    plot.set_view(OPERATIONS)
    workload = resolve_workload(build_parser().parse_args(["predict", *args]))
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.set_model(catalogue_spec(MODEL), ref=MODEL)
        window.state.set_machine(load_machine(MACHINE))
        window.state.set_workload(workload)
    return plot


def _agree(bar: dict, cli: dict) -> None:
    assert bar, "the bar has segments"
    for key, share in bar.items():
        assert share == pytest.approx(cli[key], rel=1e-9), key
    # every operation that takes time has its segment; the bar's shares sum to each pass
    assert {k for k, v in cli.items() if v > 0} == set(bar)
    for phase in (PREFILL, DECODE):
        assert sum(v for (p, _, _), v in bar.items() if p == phase) == pytest.approx(1.0, rel=1e-9)


def test_the_bar_follows_the_slider_and_equals_the_command_line(qtbot, window, capsys):
    args = ["--model", MODEL, "--machine", MACHINE, "--prompt", "512", "--context", "1024"]
    plot = _open(qtbot, window, args)
    assert not plot.time_bar.isHidden()
    _agree(_bar_shares(plot), _cli_shares(capsys, args))
    before = _bar_shares(plot)[(DECODE, "dense", "attn_scores")]

    # control -> model: the context slider dragged to its far end
    field = window.workload_panel.fields["context"]
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        field.slider.setValue(field.slider.maximum())
    context = window.state.workload.context
    assert context > 8192 and context == int(field.value())
    after = _bar_shares(plot)
    assert after[(DECODE, "dense", "attn_scores")] > 2 * before       # attention reads the longer cache
    _agree(after, _cli_shares(capsys, ["--model", MODEL, "--machine", MACHINE, "--prompt", "512",
                                       "--context", str(context)]))

    # model -> control: the workload set in the state moves the slider and the bar
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.update_workload(context=2048, batch=8)
    assert int(field.value()) == 2048 and int(window.workload_panel.fields["batch"].value()) == 8
    _agree(_bar_shares(plot), _cli_shares(capsys, args[:-1] + ["2048", "--batch", "8"]))

    # hover: a segment's row in the read-out line
    decode = plot.time_bar.bars[DECODE][0]
    q = next(s for s in decode.segments if s.name == "q_proj")
    text = plot.time_bar.readout_at(DECODE, q.start + q.seconds / 2, 0.0)
    assert "q_proj" in text and f"{q.share:.1%}" in text and "memory-bound" in text
    assert plot.readout.text() == text
    assert plot.time_bar.readout_at(DECODE, decode.seconds * 1.5, 0.0) == ""      # past the bar's end

    plot.set_view(PASSES)                         # the pass view has no bar
    assert plot.time_bar.isHidden()


def test_pinned_series_get_a_bar_each(qtbot, window):
    plot = _open(qtbot, window, ["--model", MODEL, "--machine", MACHINE, "--context", "4096"])
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.pin_current()
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.set_machine(load_machine("m4-max"))
    for phase in (PREFILL, DECODE):
        current, pinned = plot.time_bar.bars[phase]
        assert current.series != pinned.series
        # operation by operation: the same operations, in the same order and colours
        assert [s.name for s in current.segments] == [s.name for s in pinned.segments]
        assert current.seconds != pinned.seconds             # each on its own machine
    assert colour_of("q_proj") == colour_of("q_proj") != colour_of("k_proj")
    text = plot.time_bar.readout_at(DECODE, plot.time_bar.bars[DECODE][1].segments[0].seconds / 2, 1.0)
    assert text.startswith(plot.time_bar.bars[DECODE][1].series)


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)], ids=["720p", "1080p"])
@pytest.mark.parametrize("theme", [LIGHT, DARK], ids=["light", "dark"])
def test_the_bar_fits_and_renders(qtbot, window, tmp_path, size, theme):
    window.set_theme("dark" if theme.dark else "light")
    window.resize(*size)
    window.show()
    qtbot.waitExposed(window)
    plot = _open(qtbot, window, ["--model", MODEL, "--machine", MACHINE, "--context", "8192"])
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.pin_current()
    bar = plot.time_bar
    assert bar.isVisible() and len(bar.bars[DECODE]) == 2
    top_left = bar.mapTo(window, bar.rect().topLeft())
    assert top_left.y() + bar.height() <= window.height() and bar.width() <= window.width()
    assert plot.scroll_area.height() > bar.height()           # the roofline keeps most of the tab
    image = bar.grab()
    assert not image.isNull() and image.width() > 300
    # drawn in the theme: the background the theme's, the segments in their own colours
    img = image.toImage()
    corner = img.pixelColor(2, 2).name()
    assert corner == theme.background
    image.save(str(tmp_path / f"time-bar-{size[0]}-{theme.dark}.png"))
    window.grab().save(str(tmp_path / f"window-{size[0]}-{theme.dark}.png"))

