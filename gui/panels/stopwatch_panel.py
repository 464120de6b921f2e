"""The stopwatch converter: first-token and last-token times from a real run -> TTFT, TPOT,
decode rate and prompt rate, beside what rooflab predicts for the same request."""

from __future__ import annotations

from PySide6.QtWidgets import QDoubleSpinBox, QFormLayout, QGroupBox, QLabel, QSpinBox, QWidget

from rooflab.core.errors import RooflabError
from rooflab.core.predict.stopwatch import from_timestamps
from rooflab.core.report.units import fmt, keep_together
from rooflab.gui.state.recompute import Frame


def _seconds(tip: str) -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(0.0, 86_400.0)
    box.setDecimals(3)
    box.setSuffix(" s")
    box.setToolTip(tip)
    return box


class StopwatchPanel(QGroupBox):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Stopwatch → TTFT, TPOT", parent)
        self.setToolTip("A stopwatch's tokens ÷ seconds mixes the prompt's wait with the answer's pace. "
                        "Give the time the first and the last token appeared to separate them.")
        self.prompt_tokens = QSpinBox()
        self.prompt_tokens.setRange(1, 1 << 24)
        self.prompt_tokens.setGroupSeparatorShown(True)
        self.output_tokens = QSpinBox()
        self.output_tokens.setRange(2, 1 << 24)
        self.output_tokens.setGroupSeparatorShown(True)
        self.first_token = _seconds("Seconds from sending the request to the first answer token.")
        self.last_token = _seconds("Seconds from sending the request to the last answer token.")
        self.result = QLabel()
        self.result.setWordWrap(True)
        form = QFormLayout(self)
        form.addRow("Prompt tokens", self.prompt_tokens)
        form.addRow("Answer tokens", self.output_tokens)
        form.addRow("First token at", self.first_token)
        form.addRow("Last token at", self.last_token)
        form.addRow(self.result)
        self.prompt_tokens.setValue(2048)
        self.output_tokens.setValue(256)
        self.first_token.setValue(0.5)
        self.last_token.setValue(4.5)
        self._predicted = ""
        self._request: tuple[int, int] | None = None      # the workload's (prompt, answer) last shown
        for box in (self.prompt_tokens, self.output_tokens, self.first_token, self.last_token):
            box.valueChanged.connect(self._on_input_value_changed)
        self._update()

    def show_frame(self, frame: Frame) -> None:
        """The prediction for the workload on screen beside the timed run; the run's prompt and
        answer follow the workload's when it changes (model -> control), so the two figures are
        of one request until the user types another, which the result then says."""
        w = frame.scenario.workload
        request = (w.prompt, w.answer)
        if request != self._request:
            self._request = request
            for box, value in ((self.prompt_tokens, w.prompt), (self.output_tokens, w.answer)):
                box.blockSignals(True)
                box.setValue(max(box.minimum(), value))
                box.blockSignals(False)
        e, placed = frame.summary.estimate, frame.summary.placed
        self._predicted = "Nothing predicted for the workload on screen: the model does NOT fit here." \
            if placed is not None and not placed.fits else (
                f"Predicted for the workload on screen (prompt {w.prompt:,}, answer {w.answer:,}): "
                f"TTFT {fmt(e.ttft, 's')}, TPOT {fmt(e.tpot, 's')} ({fmt(e.decode_rate, 'tokens/s')}).")
        self._update()

    def _differs(self) -> str:
        """What sets the timed request apart from the workload on screen, "" when nothing does."""
        if self._request is None:
            return ""
        timed = (self.prompt_tokens.value(), self.output_tokens.value())
        if timed == self._request:
            return ""
        return (f"<br>The run timed here is another request (prompt {timed[0]:,}, answer {timed[1]:,}): set the "
                "Workload tab to it to compare one request with its prediction.")

    def _on_input_value_changed(self, _value: float) -> None:
        self._update()

    def _update(self) -> None:
        try:
            r = from_timestamps(prompt_tokens=self.prompt_tokens.value(), output_tokens=self.output_tokens.value(),
                                first_token=self.first_token.value(), last_token=self.last_token.value())
        except RooflabError as exc:
            self.result.setText(f"<span style='color:#c62828'>{exc}</span>")
            return
        # a figure stays on one line ("62.3 tokens/" then "s)" was cut at its slash)
        self.result.setText(keep_together(
            f"TTFT <b>{fmt(r.ttft, 's')}</b> · TPOT <b>{fmt(r.tpot, 's')}</b> · decode "
            f"<b>{fmt(r.decode_rate, 'tokens/s')}</b> · prompt {fmt(r.prompt_rate, 'tokens/s')}<br>"
            f"The stopwatch's tokens ÷ seconds, {fmt(r.naive_rate, 'tokens/s')}, mixes both.<br>{self._predicted}"
            f"{self._differs() if self._predicted else ''}"))
