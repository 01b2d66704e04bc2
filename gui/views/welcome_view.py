"""What the window shows with no report open: how to open one, the sample, recent files."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QListWidget, QListWidgetItem, QPushButton, QVBoxLayout, QWidget

from gui.widgets.labels import heading, muted


class WelcomeView(QWidget):
    sig_open_requested = Signal()
    sig_sample_requested = Signal()
    sig_path_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        outer = QHBoxLayout(self)
        outer.addStretch(1)
        col = QVBoxLayout()
        col.addStretch(1)
        col.addWidget(heading("Kernelscope", 14))
        col.addWidget(muted(
            "Open an Nsight Systems report (.nsys-rep or its .sqlite export) or a PyTorch profiler "
            "trace (.json, .json.gz) to see where the time went. You can also drop files on this window."
        ))
        buttons = QHBoxLayout()
        self.open_button = QPushButton("Open report…")
        self.sample_button = QPushButton("Open the sample report")
        self.open_button.setDefault(True)
        buttons.addWidget(self.open_button)
        buttons.addWidget(self.sample_button)
        buttons.addStretch(1)
        col.addLayout(buttons)
        col.addSpacing(18)
        self.recent_heading = heading("Recent reports", 2)
        col.addWidget(self.recent_heading)
        self.recent = QListWidget()
        self.recent.setMaximumHeight(220)
        col.addWidget(self.recent)
        col.addStretch(2)
        w = QWidget()
        w.setLayout(col)
        w.setMaximumWidth(720)
        outer.addWidget(w, 4)
        outer.addStretch(1)
        self.open_button.clicked.connect(self.sig_open_requested)
        self.sample_button.clicked.connect(self.sig_sample_requested)
        self.recent.itemActivated.connect(self._on_recent_activated)

    def _on_recent_activated(self, item: QListWidgetItem) -> None:
        self.sig_path_requested.emit(item.data(Qt.ItemDataRole.UserRole))

    def set_recent(self, paths: list[str]) -> None:
        self.recent.clear()
        for p in paths:
            it = QListWidgetItem(f"{Path(p).name}    —    {Path(p).parent}")
            it.setData(Qt.ItemDataRole.UserRole, p)
            it.setToolTip(p)
            self.recent.addItem(it)
        self.recent_heading.setVisible(bool(paths))
        self.recent.setVisible(bool(paths))
