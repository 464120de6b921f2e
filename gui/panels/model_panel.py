"""The Model tab: open a file or folder (or drop one anywhere on the window), pick from the
catalogue or recent files, read the summary, and browse the tensor table grouped by role.

The panel only asks: ``open_requested(ref, weights)`` goes to the window, which opens the
model off the GUI thread and, on success, sets it on the state."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QProgressBar,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from rooflab.core.errors import RooflabError
from rooflab.core.io import takes_weights
from rooflab.core.io.catalogue import list_catalogue
from rooflab.core.predict.work import weight_bytes_read_per_token
from rooflab.core.report import units
from rooflab.core.report.tables import grouped_rows
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.quant import RECIPES
from rooflab.gui.state.app_state import AppState

WEIGHT_FORMATS: tuple[str, ...] = ("", *RECIPES)        # "" = the model's own; then every --weights format
MODEL_FILTER = "Models (*.gguf config.json *.json);;GGUF files (*.gguf);;config.json (*.json);;All files (*)"
URL_PROMPT = ("A Hugging Face name (hf:OWNER/REPO, hf:OWNER/REPO/FILE.gguf, hf:OWNER/REPO:Q4_K_M)\n"
              "or a link to a .gguf file. Only its header is read, never the whole file.")
# the two byte columns first after the name and type, so they show in the tab's default width
_COLUMNS = ("Tensor", "Type", "In file", "Per token", "Parameters", "Shape")
TYPES, FILE_BYTES, READ_BYTES, PARAMS, SHAPE = 1, 2, 3, 4, 5
# a group's types take at most two types' width ("Q4_K, Q6_K"); three (DeepSeek-V2-Lite's experts:
# Q4_K, its 1,408-wide rows' Q5_0 and Q8_0) elide, the row's tooltip naming them all
_TYPES_WIDTH_TEXT = "Q4_K, Q6_K"
_NUMERIC = {FILE_BYTES, READ_BYTES, PARAMS}


class _Row(QTreeWidgetItem):
    """Sorts numeric columns by value (kept in UserRole), the rest by text."""

    def __lt__(self, other: QTreeWidgetItem) -> bool:
        tree = self.treeWidget()
        column = tree.sortColumn() if tree is not None else 0
        if column in _NUMERIC:
            a, b = self.data(column, Qt.ItemDataRole.UserRole), other.data(column, Qt.ItemDataRole.UserRole)
            if a is not None and b is not None:
                return float(a) < float(b)
        return self.text(column) < other.text(column)


def _numeric(item: QTreeWidgetItem, column: int, value: float, text: str) -> None:
    item.setText(column, text)
    item.setData(column, Qt.ItemDataRole.UserRole, float(value))
    item.setTextAlignment(column, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)


class ModelPanel(QWidget):
    open_requested = Signal(str, str)        # ref (path or catalogue key), weights ("" = its own)

    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self.open_file_button = QPushButton("Open file…")
        self.open_file_button.setToolTip("Open a .gguf file or a config.json (Ctrl+O). You can also drop "
                                          "a file or model folder anywhere on the window.")
        self.open_url_button = QPushButton("Open URL…")
        self.open_url_button.setToolTip("A Hugging Face name or a GGUF link (Ctrl+L): only its header is read.")
        self.open_folder_button = QPushButton("Open folder…")
        self.open_folder_button.setToolTip("Open a Hugging Face model folder (config.json with or without "
                                           "*.safetensors: their headers give exact bytes).")
        self.catalogue = QComboBox()
        self.catalogue.setToolTip("Models with the lessons' figures, defined by their config and a weight format.")
        self.weights = QComboBox()
        self.weights.addItem("its own", "")
        for fmt in WEIGHT_FORMATS[1:]:
            self.weights.addItem(fmt.upper(), fmt)
        self.weights.setToolTip("Weight format for models defined by a config (catalogue, config.json, "
                                "folders). A GGUF file has its own tensor types.")
        self.recent = QComboBox()
        self.recent.setToolTip("Recently opened files and folders.")
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)
        self.busy.setTextVisible(True)
        self.busy.hide()
        self.summary = QFormLayout()
        self.summary_labels: dict[str, QLabel] = {}
        self.warnings = QLabel()
        self.warnings.setWordWrap(True)
        self.warnings.setStyleSheet("color:#9a6700;")
        self.tree = QTreeWidget()
        self.tree.setColumnCount(len(_COLUMNS))
        self.tree.setHeaderLabels(list(_COLUMNS))
        self.tree.setSortingEnabled(True)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        self.tree.headerItem().setToolTip(FILE_BYTES, "Bytes the tensors take in the file.")
        self.tree.headerItem().setToolTip(READ_BYTES, "Bytes one decode token reads at batch 1: an embedding reads one "
                                             "row, routed experts used/count of their bytes, the rest in full.")
        self._build()
        self._fill_catalogue()
        self.show_model(state.model)
        state.model_changed.connect(self._on_state_model_changed)
        state.workload_changed.connect(self._on_state_workload_changed)

    def _build(self) -> None:
        buttons = QHBoxLayout()
        buttons.addWidget(self.open_file_button)
        buttons.addWidget(self.open_folder_button)
        buttons.addWidget(self.open_url_button)
        form = QFormLayout()
        form.addRow("Catalogue", self.catalogue)
        form.addRow("Weights", self.weights)
        form.addRow("Recent", self.recent)
        for key, label in (("name", "Name"), ("architecture", "Architecture"), ("params", "Parameters"),
                           ("file", "File size"), ("w", "W per token"), ("kv", "KV per token"),
                           ("layers", "Layers"), ("experts", "Experts"), ("context", "Trained context"),
                           ("source", "Source")):
            value = QLabel()
            value.setWordWrap(True)
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.summary_labels[key] = value
            self.summary.addRow(label, value)
        self.summary_labels["w"].setToolTip("W: bytes of weights one decode token reads at batch 1 (the shared "
                                            "tensors, one embedding row, used/count of the routed experts).")
        self.summary_labels["kv"].setToolTip("k: bytes one token adds to the KV cache = 2 × layers × KV heads × "
                                             "head size × bytes per element (summed per layer).")
        layout = QVBoxLayout(self)
        layout.addLayout(buttons)
        layout.addLayout(form)
        layout.addWidget(self.busy)
        layout.addLayout(self.summary)
        layout.addWidget(self.warnings)
        layout.addWidget(self.tree, 1)
        self.open_file_button.clicked.connect(self._on_open_file_button_clicked)
        self.open_folder_button.clicked.connect(self._on_open_folder_button_clicked)
        self.open_url_button.clicked.connect(self._on_open_url_button_clicked)
        self.catalogue.activated.connect(self._on_catalogue_activated)
        self.weights.activated.connect(self._on_weights_activated)
        self.recent.activated.connect(self._on_recent_activated)

    def _fill_catalogue(self) -> None:
        self.catalogue.addItem("— choose —", "")
        try:
            for entry in list_catalogue():
                self.catalogue.addItem(entry.name, entry.key)
                self.catalogue.setItemData(self.catalogue.count() - 1, entry.description,
                                           Qt.ItemDataRole.ToolTipRole)
        except RooflabError as exc:
            self.warnings.setText(str(exc))

    def set_recent(self, refs: Sequence[str]) -> None:
        self.recent.clear()
        self.recent.addItem("— choose —" if refs else "(none yet)", "")
        for ref in refs:
            self.recent.addItem(ref, ref)
        self.recent.setEnabled(bool(refs))

    def set_busy(self, message: str | None) -> None:
        """Show ``message`` with a busy bar while a model opens; None hides it."""
        self.busy.setVisible(message is not None)
        self.busy.setFormat(message or "")
        for w in (self.open_file_button, self.open_folder_button, self.catalogue, self.recent):
            w.setEnabled(message is None)

    # -- state -> view ----------------------------------------------------------------------
    def show_model(self, spec: ModelSpec) -> None:
        s = self.summary_labels
        s["name"].setText(f"<b>{spec.name}</b>" + (f" ({spec.weights_format})" if spec.weights_format else ""))
        s["architecture"].setText(spec.architecture)
        s["params"].setText(f"{units.fmt(spec.params_total, 'params')} total, "
                            f"{units.fmt(spec.params_per_token, 'params')} per token")
        s["file"].setText(units.fmt(spec.file_bytes, "B"))
        s["w"].setText(units.fmt(weight_bytes_read_per_token(spec), "B"))
        self._show_kv(spec)
        s["layers"].setText(f"{spec.layers}")
        s["experts"].setText(f"{spec.experts_used} of {spec.experts} routed" +
                             (f" + {spec.shared_experts} shared" if spec.shared_experts else "")
                             if spec.is_moe else "dense")
        s["context"].setText(f"{spec.context_length:,} tokens" if spec.context_length else "unknown")
        s["source"].setText(spec.source)
        s["source"].setToolTip(spec.provenance)
        self.warnings.setText("\n".join(spec.warnings))
        self.warnings.setVisible(bool(spec.warnings))
        self._fill_tree(spec)
        index = self.catalogue.findData(spec.source.removeprefix("catalogue:"))
        self.catalogue.setCurrentIndex(max(index, 0))
        if takes_weights(self._state.model_ref):      # a GGUF on screen leaves the next choice alone
            self.weights.setCurrentIndex(max(self.weights.findData(self._state.model_weights), 0))

    def _show_kv(self, spec: ModelSpec) -> None:
        kv_type = self._state.workload.kv_type
        full, window = spec.kv_bytes_per_token(kv_type)
        kv = f"{units.fmt(full, 'B')} ({kv_type})"
        if spec.attention.sliding_window:
            kv += f" + {units.fmt(window, 'B')} in sliding layers (window {spec.attention.sliding_window:,})"
        self.summary_labels["kv"].setText(kv)

    def _fill_tree(self, spec: ModelSpec) -> None:
        self.tree.setSortingEnabled(False)
        self.tree.clear()
        for row in grouped_rows(spec):
            group = row.group
            top = _Row([str(group.name), ", ".join(group.types)])
            top.setToolTip(TYPES, ", ".join(group.types))
            top.setText(SHAPE, f"{group.tensors} tensor" + ("" if group.tensors == 1 else "s"))
            _numeric(top, PARAMS, group.params, units.fmt(group.params, "params"))
            _numeric(top, FILE_BYTES, group.bytes, units.fmt(group.bytes, "B"))
            _numeric(top, READ_BYTES, row.bytes_read_per_token, units.fmt(row.bytes_read_per_token, "B"))
            for r in row.members:
                t = r.tensor
                child = _Row([t.name, t.type_name])
                child.setText(SHAPE, " × ".join(map(str, t.shape)))
                _numeric(child, PARAMS, t.params, f"{t.params:,}")
                _numeric(child, FILE_BYTES, t.nbytes, units.fmt(t.nbytes, "B"))
                _numeric(child, READ_BYTES, r.bytes_read_per_token, units.fmt(r.bytes_read_per_token, "B"))
                top.addChild(child)
            self.tree.addTopLevelItem(top)
        self.tree.setSortingEnabled(True)
        self.tree.sortByColumn(FILE_BYTES, Qt.SortOrder.DescendingOrder)
        for column in range(len(_COLUMNS)):
            self.tree.resizeColumnToContents(column)
        widest = self.tree.fontMetrics().horizontalAdvance(_TYPES_WIDTH_TEXT) + 14      # + the cell's margins
        self.tree.setColumnWidth(TYPES, min(self.tree.columnWidth(TYPES), widest))

    def _on_state_model_changed(self, spec: ModelSpec) -> None:
        self.show_model(spec)

    def _on_state_workload_changed(self, _workload: object) -> None:
        self._show_kv(self._state.model)

    # -- requests ---------------------------------------------------------------------------
    def chosen_weights(self) -> str:
        """The weight format chosen for config-defined models ("" = each model's own)."""
        return str(self.weights.currentData() or "")

    def _weights(self) -> str:
        return self.chosen_weights()

    def _on_weights_activated(self, _index: int) -> None:
        ref = self._state.model_ref
        # re-price the model on screen when it is defined by a config; a GGUF keeps its types
        if ref and takes_weights(ref) and self.chosen_weights() != self._state.model_weights:
            self.open_requested.emit(ref, self.chosen_weights())

    def _on_open_file_button_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open model", "", MODEL_FILTER)
        if path:
            self.open_requested.emit(path, self._weights())

    def _on_open_folder_button_clicked(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open model folder")
        if path:
            self.open_requested.emit(path, self._weights())

    def _on_open_url_button_clicked(self) -> None:
        text, ok = QInputDialog.getText(self, "Open URL", URL_PROMPT)
        if ok and text.strip():
            self.open_requested.emit(text.strip(), self._weights())

    def _on_catalogue_activated(self, index: int) -> None:
        key = str(self.catalogue.itemData(index) or "")
        if key:
            self.open_requested.emit(key, self._weights())

    def _on_recent_activated(self, index: int) -> None:
        ref = str(self.recent.itemData(index) or "")
        if ref:
            self.open_requested.emit(ref, self._weights())
