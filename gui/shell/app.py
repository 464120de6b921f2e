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
import stat
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

from rooflab.core.errors import RooflabError, SpecError
from rooflab.core.files.capped import file_kind
from rooflab.core.files.paths import data_dir
from rooflab.core.files.resources import resources_dir
from rooflab.core.io.catalogue import get_entry
from rooflab.core.io.textfile import printable
from rooflab.core.predict.choice import AUTO, PlacementChoice
from rooflab.core.values.defaults import DEFAULT_MACHINE, DEFAULT_MODEL, DEFAULT_WORKLOAD
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload
from rooflab.gui.shell.geometry import fit_to_screen
from rooflab.gui.state.app_state import AppState
from rooflab.gui.state.settings import Settings, load_settings, settings_path

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
# What the command line names is asked for now: an error in it is fatal. What the settings file
# holds is the last session's: a part of it that no longer works (a model file gone or replaced
# by a pipe, a weight format or a workload a hand edit broke) is set aside (reset in the
# settings, so it is not saved back), a notice names the file, and the window starts.

def _set_aside(settings: Settings, notices: list[str], part: str, why: str, instead: str, *names: str) -> None:
    """Reset the settings fields ``names`` and say so: ``part`` (what was kept) in the settings
    file could not be used because ``why``; ``instead``: what the window shows."""
    defaults = Settings()
    for name in names:
        setattr(settings, name, getattr(defaults, name))
    notices.append(f"{part} in {settings_path()} could not be used ({printable(why, 300)}): "
                   f"it was set aside and {instead}.")


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
        _set_aside(settings, notices, "The last machine", str(exc), f"{DEFAULT_MACHINE} is shown",
                   "machine", "machine_data")
    return load_machine(DEFAULT_MACHINE)


def _workload(settings: Settings, notices: list[str]) -> Workload:
    """The stored workload, field by field: a field of the wrong type or out of range (a hand
    edit, another version) is set aside and the rest kept."""
    known = {f.name for f in dataclasses.fields(Workload)}
    good: dict[str, object] = {}
    bad: list[str] = []
    for name, value in settings.workload.items():
        try:
            if name not in known:
                raise SpecError(f"workload.{name} is not a workload setting")
            dataclasses.replace(DEFAULT_WORKLOAD, **good, **{name: value})     # type: ignore[arg-type]
        except (RooflabError, TypeError) as exc:
            bad.append(str(exc))
        else:
            good[name] = value
    if bad:
        _set_aside(settings, notices, "Part of the stored workload", "; ".join(bad),
                   "the default is used for it", "workload")
        settings.workload = good
    return dataclasses.replace(DEFAULT_WORKLOAD, **good)     # type: ignore[arg-type]


def _placement(settings: Settings) -> PlacementChoice:
    """The placement the window was closed with; auto when none was kept or it is not one
    (a hand-edited file, an older or newer version)."""
    if not settings.placement:
        return AUTO
    try:
        return PlacementChoice.from_dict(settings.placement)
    except (RooflabError, TypeError):
        return AUTO


def _remembered_model(settings: Settings, notices: list[str]) -> str:
    """The model the last session showed, "" when none was kept or it is no longer there. Only
    its kind is looked at here (``os.stat``, which never blocks): a pipe or a device would hang
    or never end a read, and a missing file needs no worker to say so."""
    ref = settings.model
    if not ref or get_entry(ref) is not None:
        return ref
    try:
        mode: int | None = os.stat(os.path.expanduser(ref)).st_mode
    except (OSError, ValueError):
        mode = None
    if mode is not None and (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return ref
    why = f"it is {file_kind(mode)}, not a model file or folder" if mode is not None else \
        "no such file, folder or catalogue entry"
    _set_aside(settings, notices, f"The last model, {printable(ref)},", why, f"{DEFAULT_MODEL} is shown",
               "model", "weights")
    return ""


def _remembered_weights(settings: Settings, ref: str, notices: list[str]) -> str:
    """The weight format the last model was opened with, "" when none was kept or it is not one
    that applies to ``ref``."""
    from rooflab.core.io import takes_weights
    from rooflab.core.values.quant import recipe

    weights = settings.weights
    if not weights:
        return ""
    try:
        if not takes_weights(ref):
            raise SpecError(f"{ref} is a GGUF file, whose tensors have their own types")
        recipe(weights)
    except RooflabError as exc:
        _set_aside(settings, notices, f"The weight format {printable(repr(weights), 40)}", str(exc),
                   "the model opens in its own format", "weights")
        return ""
    return weights


def initial_state(model: str | None, machine: str | None, settings: Settings,
                  notices: list[str], weights: str | None = None) -> tuple[AppState, str | None]:
    """(state, ref still to open): a catalogue model loads here; a file or folder opens after
    the window shows, off the GUI thread, with the default model on screen meanwhile.
    ``model``, ``machine`` and ``weights`` come from the command line (an error in them is
    fatal); without them, the ones ``settings`` kept (a part that fails is set aside, reset in
    ``settings``, with a notice in ``notices``)."""
    from rooflab.core.io import load_model

    if model:
        ref = model
    else:
        ref = _remembered_model(settings, notices) or DEFAULT_MODEL
        weights = weights or _remembered_weights(settings, ref, notices) or None
    pending: str | None = None
    first = ref if get_entry(ref) is not None else DEFAULT_MODEL
    if first != ref:
        pending = ref
    try:
        spec = load_model(first, weights=weights if first == ref else None)
    except RooflabError as exc:
        if first == DEFAULT_MODEL or model:
            raise
        _set_aside(settings, notices, f"The last model, {first},", str(exc), f"{DEFAULT_MODEL} is shown",
                   "model", "weights")
        first, spec = DEFAULT_MODEL, load_model(DEFAULT_MODEL)
    state = AppState(spec, _machine(machine, settings, notices), _workload(settings, notices), model_ref=first,
                     model_weights=(weights or "") if first == ref else "", placement=_placement(settings))
    return state, pending


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
    state, pending = initial_state(model, getattr(args, "machine", None), settings, notices,
                                   getattr(args, "weights", None))
    # the weight format the last model was opened with comes back with it (unless set aside)
    weights = getattr(args, "weights", None) or ("" if model else settings.weights)
    window = MainWindow(state, settings, persist=not screenshot)
    if notices:
        window.messages.show_message(" ".join(notices), "warning")
    if not screenshot:
        fit_to_screen(window, maximize_small=not settings.geometry)     # a first start on a small screen
    window.show()
    if pending:
        window.open_model(pending, weights)
    previous_hook = sys.excepthook
    try:
        if screenshot:
            for line in notices:
                print(f"rooflab: warning: {line}", file=sys.stderr)
            return _screenshot(app, window, screenshot, named=bool(model))
        install_excepthook(window)
        return app.exec()
    finally:
        sys.excepthook = previous_hook
        dispose(window)


def _screenshot(app: QApplication, window: MainWindow, path: str, *, named: bool = True) -> int:
    """Render ``window`` once its model has opened. A model ``named`` on the command line that
    cannot be opened is an error (no PNG); the last session's is only a warning (the window
    says so and shows the default)."""
    jobs = window.opener.jobs
    if jobs.busy:
        loop = QEventLoop()
        jobs.finished.connect(loop.quit)
        loop.exec()
    window.recompute.recompute_now()
    app.processEvents()
    if jobs.last_error is not None:
        if named:
            print(f"rooflab: error: {printable(jobs.last_error, 2000)}", file=sys.stderr)
            return 2
        print(f"rooflab: warning: the last model in {settings_path()} could not be opened and was set aside: "
              f"{printable(jobs.last_error, 2000)}", file=sys.stderr)
    out = window.save_screenshot(path)
    print(out)
    return 0


def run_report(args: argparse.Namespace) -> int:
    """``rooflab report --model M --machine P [workload options] --out DIR``: the report files
    the window's File > Save report writes, without showing a window."""
    from rooflab.core.app.resolve import choice_from, resolve_machine, resolve_workload
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
