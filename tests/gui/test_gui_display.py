"""Starting the window where it cannot open: one line saying what is missing and how to go
on, exit 2, instead of Qt's abort (exit 134) and its advice to reinstall."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rooflab.gui.shell.app import display_problem, missing_xcb_libraries
from tests.factories.waits import WAIT_MS

_DISPLAY_VARS = ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")


def _no_libraries_missing() -> list[str]:
    return []


def _xcb_libraries_missing() -> list[str]:
    return ["libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxkbcommon-x11.so.0"]


def test_no_display_is_a_problem_with_the_ways_around_it():
    problem = display_problem({}, platform="linux", missing_libraries=_no_libraries_missing)
    assert problem is not None and "DISPLAY" in problem
    assert "--screenshot FILE.png" in problem and "QT_QPA_PLATFORM=offscreen" in problem


def test_missing_xcb_libraries_name_the_debian_packages():
    problem = display_problem({"DISPLAY": ":0"}, platform="linux", missing_libraries=_xcb_libraries_missing)
    assert problem is not None and "\n" not in problem
    assert "apt-get install libxcb-cursor0 libxcb-icccm4 libxkbcommon-x11-0" in problem
    assert "--screenshot" in problem


def test_a_usable_display_a_chosen_platform_or_another_os_is_left_to_qt():
    assert display_problem({"DISPLAY": ":0"}, platform="linux", missing_libraries=_no_libraries_missing) is None
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}, platform="linux",
                           missing_libraries=_xcb_libraries_missing) is None
    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}, platform="linux",
                           missing_libraries=_xcb_libraries_missing) is None
    assert display_problem({}, platform="darwin", missing_libraries=_xcb_libraries_missing) is None
    assert display_problem({"QT_QPA_PLATFORM": "xcb", "WAYLAND_DISPLAY": "w"}, platform="linux",
                           missing_libraries=_xcb_libraries_missing) is not None


def _rooflab_without_display(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in _DISPLAY_VARS}
    env.update(ROOFLAB_CONFIG_DIR=str(tmp_path / "cfg"), ROOFLAB_DATA_DIR=str(tmp_path / "data"), **extra)
    return subprocess.run([sys.executable, "-c", "import sys; from rooflab.gui.main import main; "
                           "sys.exit(main(sys.argv[1:]))", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def test_rooflab_without_a_display_says_so_in_one_line_and_exits_2(tmp_path):
    result = _rooflab_without_display(tmp_path)
    if not sys.platform.startswith("linux"):
        return          # elsewhere Qt has its own native platform
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rooflab: error: no display"), result.stderr
    assert "Reinstalling" not in result.stderr and "--screenshot" in lines[0]


def test_a_screenshot_needs_neither_a_display_nor_the_xcb_libraries(tmp_path):
    shot = tmp_path / "shot.png"
    result = _rooflab_without_display(tmp_path, "gui", "--screenshot", str(shot))
    assert result.returncode == 0, result.stderr
    if not missing_xcb_libraries():
        return          # with a display named and xcb complete, Qt would try (and fail) to connect
    shot.unlink()
    result = _rooflab_without_display(tmp_path, "gui", "--screenshot", str(shot), DISPLAY=":99")
    assert result.returncode == 0, result.stderr
    assert shot.is_file()


def test_the_torch_sweep_is_quick_by_default_and_says_how_long_before_it_starts(qtbot, tmp_path):
    """The default torch sweep on a 270M model estimated about 700 s once running, and nothing
    said so before: the tab offers a quick sweep and its estimate under the controls."""
    import json

    from rooflab.core.io import load_model
    from rooflab.core.io.presets import load_machine
    from rooflab.core.measure.engines.torch.timing import estimate_seconds
    from rooflab.core.values.defaults import DEFAULT_WORKLOAD
    from rooflab.gui.shell.main_window import MainWindow
    from rooflab.gui.state.app_state import AppState
    from rooflab.gui.state.settings import Settings
    from tests.core.measure.engines.test_model_estimate import GEMMA_270M

    config = tmp_path / "gemma" / "config.json"
    config.parent.mkdir()
    config.write_text(json.dumps(GEMMA_270M))
    spec = load_model(config, weights="fp32")
    window = MainWindow(AppState(spec, load_machine("reference-cpu"), DEFAULT_WORKLOAD, model_ref=str(config)),
                        Settings(), persist=False)
    qtbot.addWidget(window)
    window.show()
    window.left_tabs.setCurrentIndex(window.left_tabs.count() - 1)
    panel = window.measure_panel
    qtbot.waitUntil(panel.isVisible, timeout=WAIT_MS)
    assert panel.engine_key() == "torch"
    plan = panel.model_plan()
    seconds = estimate_seconds(spec, plan)
    assert seconds < 60, (plan, seconds)                                  # model -> the quick sweep
    assert panel.estimate.isVisibleTo(panel)
    assert panel.estimate.text().startswith(f"Takes about {5 * round(seconds / 5):.0f} s"), panel.estimate.text()
    # control -> estimate: a longer sweep says so before it starts
    panel.prompts.setText("1, 16, 64, 256, 1024")
    panel.prompts.editingFinished.emit()
    assert panel.estimate.text().startswith("Takes about ") and " min " in panel.estimate.text()
    window.measure.shutdown()
