"""The Measure tab's Server source: a running OpenAI-compatible server (llama-server, vLLM,
SGLang, TGI, Ollama, LM Studio) loaded at concurrency levels and request rates, as ``rooflab
measure server`` does. The form reads its fields into a ``ServerPlan``; the prompt and answer
lengths are the Workload tab's.

The API key is a password field: it is handed to the measurement as it starts and to nothing
else. No setting, record or report holds it, and the form forgets nothing else either (the
address and model name are typed again in the next session)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QFormLayout, QGroupBox, QLineEdit, QPushButton, QSpinBox, QWidget

from rooflab.core.errors import MeasurementError
from rooflab.core.predict.serving import Lengths, Load
from rooflab.gui.panels.measure_fields import positive_floats, positive_ints, wrapped

#: The variable a plan made in the window names: the key typed is sent in its place and the
#: environment is never read (a stored run says "authenticated" without holding a key).
WINDOW_KEY = "ROOFLAB_API_KEY"
ENDPOINT_NAMES = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


class ServerBox(QGroupBox):
    """The Server source's form; see the module docstring."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("A running server", parent)
        self.url = QLineEdit()
        self.url.setPlaceholderText("http://127.0.0.1:8080")
        self.url.setToolTip("The server's address (a /v1 suffix is fine).")
        self.model_name = QLineEdit()
        self.model_name.setPlaceholderText("the model name it serves")
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("optional")
        self.api_key.setToolTip("Sent as the Authorization header; never saved, never in a report.")
        self.endpoint = QComboBox()
        for key, name in ENDPOINT_NAMES.items():
            self.endpoint.addItem(name, key)
        self.concurrency = QLineEdit("1, 2, 4")
        self.concurrency.setToolTip("Concurrent requests: each client sends its next when one ends.")
        self.rates = QLineEdit()
        self.rates.setPlaceholderText("e.g. 0.5, 1, 2")
        self.rates.setToolTip("Requests per second, arriving at random (Poisson), after the concurrency levels.")
        self.requests = QSpinBox()
        self.requests.setRange(0, 1000)
        self.requests.setSpecialValueText("auto")
        self.requests.setToolTip("Requests per level; auto: 4 per client, or 20 seconds of arrivals (16 to 1,000).")
        self.lengths = wrapped()
        self.result = wrapped()
        self.result.setTextFormat(Qt.TextFormat.RichText)
        self.result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.result.hide()
        self.run_button = QPushButton("Measure the server")
        self.run_button.setToolTip("Load the server at each level, time every token of every answer, keep the "
                                   "result for the model and machine on screen and draw it on the Serving tab.")
        form = QFormLayout(self)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
        for label, field in (("address", self.url), ("model name", self.model_name), ("API key", self.api_key),
                             ("endpoint", self.endpoint), ("concurrency", self.concurrency),
                             ("requests/s", self.rates), ("requests per level", self.requests)):
            form.addRow(label, field)
        form.addRow(self.lengths)
        form.addRow(self.run_button)
        form.addRow(self.result)

    def show_lengths(self, text: str) -> None:
        """What the run will send and where it is kept, said before it starts."""
        self.lengths.setText(text)

    def show_result(self, html: str) -> None:
        """The last measurement's table under the button."""
        self.result.setText(html)
        self.result.show()

    def loads(self) -> tuple[Load, ...]:
        """The concurrency levels, then the request rates; MeasurementError names a bad field."""
        concurrency = positive_ints(self.concurrency.text(), "concurrency") if self.concurrency.text().strip() else ()
        rates = positive_floats(self.rates.text(), "requests/s")
        if not concurrency and not rates:
            raise MeasurementError("give concurrency levels or request rates to measure the server at")
        return (*(Load(mode="concurrency", level=c) for c in concurrency),
                *(Load(mode="rate", level=r) for r in rates))

    def server_plan(self, prompt: int, answer: int) -> Any:
        """The ServerPlan the form describes for ``prompt`` and ``answer`` tokens; SpecError or
        MeasurementError names a bad field."""
        from rooflab.core.measure.loadtest.plan import ServerPlan

        if not self.url.text().strip():
            raise MeasurementError("type the server's address (http://host:port)")
        return ServerPlan(url=self.url.text().strip(), model=self.model_name.text().strip(), loads=self.loads(),
                          endpoint=str(self.endpoint.currentData()), prompt=Lengths(mean=prompt),
                          answer=Lengths(mean=answer), requests=self.requests.value() or None,
                          api_key_env=WINDOW_KEY if self.api_key_text() else None)

    def api_key_text(self) -> str:
        """The key typed ("" for none): for the measurement only."""
        return self.api_key.text().strip()
