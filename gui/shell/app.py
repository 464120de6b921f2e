"""Start the desktop application, or render without showing it: the QApplication, the first
state (default model, machine and workload, or the ones named), the excepthook, and the
handlers ``rooflab gui`` and ``rooflab report`` dispatch to."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import logging
import os
import re
import subprocess
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from PySide6.QtCore import QEventLoop, QLibraryInfo, Qt
from PySide6.QtGui import QGuiApplication, QIcon
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from rooflab.core.errors import RooflabError
from rooflab.core.files.paths import data_dir
from rooflab.core.files.resources import resources_dir
from rooflab.core.io.catalogue import get_entry
from rooflab.core.predict.choice import AUTO, PlacementChoice
from rooflab.core.values.defaults import DEFAULT_MACHINE, DEFAULT_MODEL, DEFAULT_WORKLOAD
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload
from rooflab.gui.state.app_state import AppState
from rooflab.gui.state.settings import Settings, load_settings

if TYPE_CHECKING:
    from rooflab.gui.shell.main_window import MainWindow

log = logging.getLogger(__name__)


# -- can a window open at all? --------------------------------------------------------------
# Qt aborts the process (SIGABRT, exit 134) when no platform plugin loads, after advising a
# reinstall that does not help; these checks run first, so the user gets one line instead.

WAYS_AROUND = ("run `rooflab gui MODEL --screenshot FILE.png` to render the window to a file, "
               "or set QT_QPA_PLATFORM=offscreen")


def _debian_package(soname: str) -> str:
    """``libxcb-icccm.so.4`` -> ``libxcb-icccm4``: Debian's naming rule for shared libraries
    (a hyphen before the version when the name ends in a digit)."""
    name, _, version = soname.partition(".so.")
    version = version.split(".")[0]
    return (f"{name}-{version}" if name[-1:].isdigit() else f"{name}{version}").lower()


def missing_xcb_libraries() -> list[str]:
    """The shared libraries Qt's xcb platform plugin needs and the system lacks (``ldd`` on the
    plugin); empty when the plugin or ``ldd`` cannot be found (then Qt has the last word)."""
    plugin = Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath)) / "platforms" / "libqxcb.so"
    if not plugin.is_file():
        return []
    try:
        out = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, timeout=20,
                             check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return sorted(set(re.findall(r"^\s*(\S+) => not found", out, flags=re.MULTILINE)))


def display_problem(environ: Mapping[str, str] | None = None, *, platform: str | None = None,
                    missing_libraries: Callable[[], list[str]] = missing_xcb_libraries) -> str | None:
    """Why a window cannot open here (one line, with the ways around it), or None. Only Linux
    is checked, and only what Qt would pick by itself: a QT_QPA_PLATFORM other than xcb is
    the user's choice, and a Wayland session may not need xcb's libraries."""
    env = os.environ if environ is None else environ
    if not (platform or sys.platform).startswith("linux"):
        return None
    chosen = env.get("QT_QPA_PLATFORM", "")
    if chosen and not chosen.startswith("xcb"):
        return None
    if not chosen and not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"):
        return f"no display to open the window on (DISPLAY and WAYLAND_DISPLAY are unset): {WAYS_AROUND}"
    if not chosen and env.get("WAYLAND_DISPLAY"):
        return None
    missing = missing_libraries()
    if not missing:
        return None
    packages = " ".join(dict.fromkeys(_debian_package(lib) for lib in missing))
    return (f"the window needs system libraries that are missing ({', '.join(missing)}): "
            f"on Debian/Ubuntu `sudo apt-get install {packages}`, or {WAYS_AROUND}")


def make_app(*, headless: bool = False) -> QApplication:
    """The QApplication (created once). ``headless``: render offscreen when no display is
    there (reports, screenshots on a server)."""
    app = QApplication.instance()
    if isinstance(app, QApplication):
        return app
    if headless and display_problem() is not None:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    QGuiApplication.setHighDpiScaleFactorRoundingPolicy(Qt.HighDpiScaleFactorRoundingPolicy.PassThrough)
    app = QApplication(sys.argv[:1])
    app.setApplicationName("rooflab")
    app.setApplicationDisplayName("rooflab")
    app.setDesktopFileName("rooflab")
    icon = QIcon()
    for name in ("rooflab.svg", "rooflab-256.png", "rooflab-64.png"):
        path = resources_dir() / "icons" / name
        if path.is_file():
            icon.addFile(str(path))
    app.setWindowIcon(icon)
    import pyqtgraph as pg

    pg.setConfigOptions(antialias=True)
    return app


def dispose(*widgets: QWidget | None) -> None:
    """Delete widgets while the QApplication still exists: left to the interpreter's exit,
    pyqtgraph's items can be destroyed after Qt's and crash on the way out."""
    for widget in widgets:
        if widget is not None:
            widget.close()
            widget.deleteLater()
    app = QApplication.instance()
    if app is not None:
        app.sendPostedEvents(None, 0)     # 0 = QEvent::DeferredDelete among all posted events
        app.processEvents()
    gc.collect()


# -- the first state ---------------------------------------------------------------------------

def _machine(ref: str | None, settings: Settings, notices: list[str]) -> MachineProfile:
    from rooflab.core.io.presets import load_machine

    if ref:
        return load_machine(ref)               # named on the command line: an error is fatal
    try:
        if settings.machine:
            return load_machine(settings.machine)
        if settings.machine_data:
            return MachineProfile.from_dict(settings.machine_data)
    except RooflabError as exc:
        notices.append(f"The last machine could not be restored ({exc}); showing {DEFAULT_MACHINE}.")
    return load_machine(DEFAULT_MACHINE)


def _workload(settings: Settings) -> Workload:
    if not settings.workload:
        return DEFAULT_WORKLOAD
    try:
        return dataclasses.replace(DEFAULT_WORKLOAD, **settings.workload)
    except (RooflabError, TypeError):
        return DEFAULT_WORKLOAD


def _placement(settings: Settings) -> PlacementChoice:
    """The placement the window was closed with; auto when none was kept or it is not one
    (a hand-edited file, an older or newer version)."""
    if not settings.placement:
        return AUTO
    try:
        return PlacementChoice.from_dict(settings.placement)
    except (RooflabError, TypeError):
        return AUTO


def initial_state(model: str | None, machine: str | None, settings: Settings,
                  notices: list[str], weights: str | None = None) -> tuple[AppState, str | None]:
    """(state, ref still to open): a catalogue model loads here; a file or folder opens after
    the window shows, off the GUI thread, with the default model on screen meanwhile."""
    from rooflab.core.io import load_model

    ref = model or settings.model or DEFAULT_MODEL
    pending: str | None = None
    first = ref if get_entry(ref) is not None else DEFAULT_MODEL
    if first != ref:
        pending = ref
    try:
        spec = load_model(first, weights=weights if first == ref else None)
    except RooflabError:
        if first == DEFAULT_MODEL or model:
            raise
        notices.append(f"The last model, {first}, could not be opened; showing {DEFAULT_MODEL}.")
        first, spec = DEFAULT_MODEL, load_model(DEFAULT_MODEL)
    return AppState(spec, _machine(machine, settings, notices), _workload(settings), model_ref=first,
                    model_weights=(weights or "") if first == ref else "", placement=_placement(settings)), pending


# -- errors --------------------------------------------------------------------------------

def log_file() -> Path:
    return data_dir() / "rooflab.log"


def install_excepthook(parent: QWidget) -> None:
    """Anything a GUI action did not catch: log the traceback, show one dialog."""
    path = log_file()

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        text = "".join(traceback.format_exception(kind, exc, tb))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as handle:
                handle.write(text + "\n")
        except OSError:
            pass
        if sys.__stderr__ is not None:
            sys.__stderr__.write(text)
        QMessageBox.critical(parent, "rooflab: unexpected error",
                             f"{kind.__name__}: {exc}\n\nThe details were written to {path}.")

    sys.excepthook = hook


# -- handlers ------------------------------------------------------------------------------

def run_gui(args: argparse.Namespace) -> int:
    """``rooflab`` / ``rooflab gui [MODEL] [--machine M] [--screenshot FILE]``."""
    from rooflab.gui.shell.main_window import MainWindow

    screenshot = getattr(args, "screenshot", None)
    if not screenshot and QApplication.instance() is None:
        problem = display_problem()
        if problem is not None:
            raise RooflabError(problem)
    app = make_app(headless=bool(screenshot))
    settings, notice = load_settings()
    notices = [notice] if notice else []
    model = getattr(args, "model", None)
    # the weight format the last model was opened with comes back with it
    weights = getattr(args, "weights", None) or (None if model else settings.weights or None)
    state, pending = initial_state(model, getattr(args, "machine", None), settings, notices, weights)
    window = MainWindow(state, settings, persist=not screenshot)
    if notices:
        window.messages.show_message(" ".join(notices), "warning")
    window.show()
    if pending:
        window.open_model(pending, weights or "")
    previous_hook = sys.excepthook
    try:
        if screenshot:
            return _screenshot(app, window, screenshot)
        install_excepthook(window)
        return app.exec()
    finally:
        sys.excepthook = previous_hook
        dispose(window)


def _screenshot(app: QApplication, window: MainWindow, path: str) -> int:
    jobs = window.opener.jobs
    if jobs.busy:
        loop = QEventLoop()
        jobs.finished.connect(loop.quit)
        loop.exec()
    window.recompute.recompute_now()
    app.processEvents()
    if jobs.last_error is not None:
        print(f"rooflab: error: {jobs.last_error}", file=sys.stderr)
        return 2
    out = window.save_screenshot(path)
    print(out)
    return 0


def run_report(args: argparse.Namespace) -> int:
    """``rooflab report --model M --machine P [workload options] --out DIR``: the report files
    the window's File > Save report writes, without showing a window."""
    from rooflab.core.cli.main import resolve_machine, resolve_workload
    from rooflab.core.cli.placement import choice_from
    from rooflab.core.io import load_model
    from rooflab.gui.export.report import write_report
    from rooflab.gui.plots import PLOT_CLASSES, ChartPlot
    from rooflab.gui.plots.plot_tabs import draw_expected
    from rooflab.gui.state.recompute import RecomputeController

    spec = load_model(args.model, weights=getattr(args, "weights", None))
    machine = resolve_machine(args, spec)
    workload = resolve_workload(args)
    make_app(headless=True)
    state = AppState(spec, machine, workload, model_ref=args.model, placement=choice_from(args))
    errors: list[str] = []
    recompute = RecomputeController(state)
    recompute.failed.connect(errors.append)
    frame = recompute.recompute_now()
    if frame is None:
        raise RooflabError(errors[0] if errors else "nothing to report")
    frame = recompute.add_band() or frame
    plots: list[ChartPlot] = [cls() for cls in PLOT_CLASSES]
    try:
        for plot in plots:
            plot.set_charts(frame.charts[plot.chart_key], current_label=frame.scenario.label)
            draw_expected(plot, frame)
        files = write_report(args.out, plots, frame)
    finally:
        dispose(*plots)
    for path in files.all:
        print(path)
    return 0
