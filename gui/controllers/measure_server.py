"""The Measure tab's Server source: runs ``measure.loadtest.run``'s measurement of a running server
on its own worker (a job apart from the engines', so the Serving tab's source never cancels a
model run: the panel's start buttons are off while either runs), shows its progress on the
panel's bar, keeps what it measured for the model and machine on screen (as ``rooflab measure
server --predict-model`` does: ``keep_server_run``) and says so, for the Serving tab to draw.

Cancel ends the measurement within a second and keeps what was measured: it sets the job's
own stop flag, so the job returns its levels (marked cancelled) rather than being dropped."""

from __future__ import annotations

import functools
import html
import math
import threading
from collections.abc import Generator
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from rooflab.core.errors import RooflabError
from rooflab.core.jobs import CancelToken, Progress
from rooflab.core.measure.loadtest.plan import ServerLevel, ServerMeasurement, ServerPlan, keep_server_run
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload
from rooflab.gui.panels.measure_panel import MeasurePanel
from rooflab.gui.state.app_state import AppState
from rooflab.gui.workers.jobs import JobController, report_unexpected


def server_job(plan: ServerPlan, stop: threading.Event, api_key: str,
               _cancel: CancelToken) -> Generator[Progress, None, ServerMeasurement]:
    """``measure.loadtest.run`` stopped by ``stop`` (the Cancel button: what was measured comes back);
    the worker's own token (closing the window) drops it, and closing the generator stops it."""
    from rooflab.core.measure.loadtest.run import measure_server

    return measure_server(plan, stop, api_key=api_key or None)


class ServerMeasureController(QObject):
    """Runs the Server source; see the module docstring."""

    message = Signal(str, str)              # text, level ("error", "warning", "info")
    level_measured = Signal(object)         # a ServerLevel, as each level ends
    server_measured = Signal(object)        # the ServerMeasurement, once kept

    def __init__(self, state: AppState, view: MeasurePanel, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self.view = view
        self.jobs = JobController(self)
        self._stop = threading.Event()
        self._for: tuple[ModelSpec, MachineProfile] | None = None     # what was on screen when it started
        self.kept: Path | None = None                                  # the file the last run went into
        view.server.run_button.clicked.connect(self._on_run_button_clicked)
        view.cancel_button.clicked.connect(self._on_cancel_button_clicked)
        self.jobs.started.connect(self._on_jobs_started)
        self.jobs.yielded.connect(self._on_jobs_yielded)
        self.jobs.returned.connect(self._on_jobs_returned)
        self.jobs.errored.connect(self._on_jobs_errored)
        self.jobs.aborted.connect(self._on_jobs_aborted)
        self.jobs.finished.connect(self._on_jobs_finished)
        for signal in (state.model_changed, state.machine_changed, state.workload_changed):
            signal.connect(self._on_state_changed)
        self._show_lengths()

    def measure(self) -> None:
        """Load the server the form names with the workload's lengths; RooflabError (shown by the
        caller) for a bad field."""
        w = self._state.workload
        plan = self.view.server.server_plan(w.prompt, w.answer)
        self._stop = threading.Event()
        self._for = (self._state.model, self._state.machine)
        self.jobs.start(functools.partial(server_job, plan, self._stop, self.view.server.api_key_text()))

    def cancel(self) -> None:
        """End the run within a second, keeping what was measured."""
        self._stop.set()

    def shutdown(self) -> None:
        """On close: stop, then wait for the worker."""
        self._stop.set()
        self.jobs.shutdown()

    # -- the view and the state -----------------------------------------------------------------
    def _on_run_button_clicked(self) -> None:
        try:
            self.measure()
        except RooflabError as exc:
            self._show_error(str(exc))

    def _on_cancel_button_clicked(self) -> None:
        if self.jobs.busy:
            self.cancel()
            self.view.step.setText("Cancelling… (what was measured is kept)")

    def _on_state_changed(self, _value: object) -> None:
        self._show_lengths()

    def _show_lengths(self) -> None:
        w: Workload = self._state.workload
        self.view.server.show_lengths(
            f"Prompts of {w.prompt:,} tokens and answers of {w.answer:,} (the Workload tab's). Kept for "
            f"{self._state.model.name} on {self._state.machine.name}: the Serving tab draws it over their prediction.")

    # -- the job's signals ----------------------------------------------------------------------
    def _on_jobs_started(self) -> None:
        self.view.show_running(True)

    def _on_jobs_yielded(self, progress: Progress) -> None:
        self.view.show_progress(progress)
        if isinstance(progress.sample, ServerLevel):
            self.level_measured.emit(progress.sample)

    def _on_jobs_returned(self, result: ServerMeasurement) -> None:
        self.view.server.show_result(server_html(result))
        if not result.levels:
            self.view.show_stopped("Cancelled: no level was measured")
            return
        spec, machine = self._for or (self._state.model, self._state.machine)
        try:
            self.kept = keep_server_run(result, spec=spec, machine=machine)
        except (RooflabError, OSError) as exc:
            self._show_error(f"measured, but not kept: {exc}")
            return
        done = sum(lv.stats.completed for lv in result.levels)
        summary = (f"{'Cancelled: ' if result.cancelled else ''}{len(result.levels)} level"
                   f"{'s' if len(result.levels) != 1 else ''} measured, {done:,} requests completed; kept")
        self.view.show_done(summary)
        self.message.emit(f"Server measured: {summary} for {spec.name} on {machine.name}", "info")
        self.server_measured.emit(result)

    def _on_jobs_errored(self, exc: BaseException) -> None:
        if isinstance(exc, RooflabError):
            self._show_error(str(exc))
        else:
            self.view.show_stopped("Stopped")
            report_unexpected(exc)

    def _on_jobs_aborted(self) -> None:
        self.view.show_stopped("Cancelled")

    def _on_jobs_finished(self) -> None:
        self.view.show_running(False)

    def _show_error(self, text: str) -> None:
        self.view.show_error(text)
        self.message.emit(f"Server measurement: {text}", "error")


def _ms(x: float) -> str:
    return f"{x * 1e3:,.1f}" if math.isfinite(x) else "–"


def server_html(result: ServerMeasurement) -> str:
    """The measurement as a small table (per level: completed, failed, requests/s, output
    tokens/s, TTFT, TPOT and end-to-end p50 in ms; narrow enough for the Measure tab) with its
    problems and warnings."""
    head = "".join(f"<th>{h}</th>" for h in ("level", "ok", "failed", "req/s", "tok/s", "TTFT", "TPOT", "E2E"))
    rows = []
    for lv in result.levels:
        s = lv.stats
        level = f"c={s.level:g}" if s.mode == "concurrency" else f"{s.level:g}/s"
        cells = (level, str(s.completed), str(lv.count("error") + lv.count("timeout")),
                 f"{s.requests_per_second:.3g}", f"{s.output_tokens_per_second:,.0f}", _ms(s.ttft.p50),
                 _ms(s.tpot.p50), _ms(s.e2e.p50))
        rows.append("<tr>" + "".join(f"<td align='right'>{c}</td>" for c in cells) + "</tr>")
    notes = [f"{lv.load.mode} {lv.load.level:g}: {n} × {line}" for lv in result.levels for line, n in lv.problems()]
    notes += [f"{lv.load.mode} {lv.load.level:g}: {w}" for lv in result.levels for w in lv.warnings]
    notes += list(result.warnings)
    title = f"<b>{html.escape(result.plan.model)}</b> at {html.escape(result.plan.describe()['url'])}" + \
        (" (cancelled: the levels measured)" if result.cancelled else "")
    return (f"<p>{title}</p><table cellspacing='2'><tr>{head}</tr>{''.join(rows)}</table>"
            "<p style='color:gray'>TTFT, TPOT, E2E: p50 in ms; the rest is on the Serving tab and in a report.</p>"
            + "".join(f"<p style='color:gray'>{html.escape(n)}</p>" for n in notes[:8]))
