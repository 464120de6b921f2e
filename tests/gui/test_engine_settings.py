"""llama.cpp's run settings in the Workload tab (-ub, -fa, -t): each edit reaches the workload
and the figures, the threads row shows only for a CPU machine, and the window's figures are
the command line's for the same settings."""

from __future__ import annotations

import json

import pytest

from rooflab.core.cli.main import main
from rooflab.core.io.catalogue import get_entry, load_entry
from rooflab.core.io.presets import load_machine
from rooflab.core.report.expected import expected_request
from tests.factories.waits import WAIT_MS

MOE = "qwen3-30b-a3b-q4_k_m"


def test_a_larger_ubatch_speeds_up_a_moe_prompt_as_the_command_line_says(qtbot, window, capsys):
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.set_model(load_entry(get_entry(MOE)))
        window.state.set_machine(load_machine("rtx-4090"))
        window.state.update_workload(prompt=4096)
    ttft = {}
    for ub in (128, 2048):
        with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS) as blocker:
            window.workload_panel.fields["ubatch"].spin.setValue(ub)
        assert window.state.workload.ubatch == ub
        frame = blocker.args[0]
        assert frame.expected_figures is not None
        ttft[ub] = expected_request(frame.scenario.model, frame.expected_figures, frame.scenario.workload,
                                    frame.stands_on)["expected_ttft_seconds"]
        assert main(["predict", "--model", MOE, "--machine", "rtx-4090", "--prompt", "4096", "-ub", str(ub),
                     "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["workload"]["ubatch"] == ub
        assert out["request"]["expected_ttft_seconds"] == pytest.approx(ttft[ub], rel=1e-6)
    # routed experts get ubatch x 8 / 128 rows each: 8 rows at -ub 128, 128 at -ub 2048
    assert ttft[2048] < 0.7 * ttft[128]


def test_flash_attention_box_reaches_the_workload(qtbot, window):
    box = window.workload_panel.flash_attention
    assert box.isChecked() == window.state.workload.flash_attention is True
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        box.setChecked(False)
    assert window.state.workload.flash_attention is False
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.update_workload(flash_attention=True)
    assert box.isChecked()


def test_threads_show_only_for_a_cpu_and_scale_its_prompt(qtbot, window):
    panel = window.workload_panel
    threads = panel.fields["threads"]
    # a GPU other than the window's own (rtx-4090): setting the machine it has is no change and
    # draws nothing, so the wait would rest on the window's first drawing landing inside it
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.set_machine(load_machine("h100-sxm"))
    assert not panel._engine_form.isRowVisible(threads)
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS) as blocker:
        window.state.set_machine(load_machine("epyc-9654"))
    assert panel._engine_form.isRowVisible(threads)
    every = blocker.args[0].summary.estimate.ttft
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS) as blocker:
        threads.spin.setValue(48)
    assert window.state.workload.threads == 48
    # half of the 96 cores: the compute-bound prefill takes about twice as long
    assert blocker.args[0].summary.estimate.ttft == pytest.approx(2 * every, rel=0.15)
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        threads.spin.setValue(0)
    assert window.state.workload.threads is None
