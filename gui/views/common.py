"""Small widgets shared by the views: section headings, stat cards, muted text, colour swatches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QFont, QResizeEvent
from PySide6.QtWidgets import QFrame, QLabel, QSizePolicy, QStackedWidget, QVBoxLayout, QWidget

MUTED = "#5f6b7a"
KIND_LABELS = {
    "nsys-sqlite": "Nsight Systems SQLite export",
    "nsys-rep": "Nsight Systems report",
    "kineto": "PyTorch profiler trace",
    "ncu": "Nsight Compute report",
}


def producer(kind: str, version: str | None) -> str:
    """'Nsight Systems 2025.3.2.0' for nsys reports; the version text as is otherwise."""
    if not version:
        return "unknown"
    if kind.startswith("nsys") and version[:1].isdigit():
        return f"Nsight Systems {version}"
    return version


def placeholder_label() -> QLabel:
    """The large centred grey sentence a view shows instead of its content ("No report open", ...)."""
    label = QLabel()
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    label.setWordWrap(True)
    label.setStyleSheet(f"color: {MUTED}; font-size: 13pt;")
    return label


def heading(text: str, size_delta: int = 3) -> QLabel:
    label = QLabel(text)
    f = label.font()
    f.setPointSizeF(f.pointSizeF() + size_delta)
    f.setWeight(QFont.Weight.DemiBold)
    label.setFont(f)
    return label


def muted(text: str, wrap: bool = True) -> QLabel:
    label = QLabel(text)
    label.setWordWrap(wrap)
    label.setStyleSheet(f"color: {MUTED};")
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def swatch(color: str, size: int = 14) -> QLabel:
    label = QLabel()
    label.setFixedSize(size, size)
    label.setStyleSheet(f"background: {color}; border: 1px solid #00000030; border-radius: 2px;")
    return label


class WrapLabel(QLabel):
    """A word-wrapped label that is never squeezed below the height its text needs.

    Qt lays out wrapped labels from a guessed width; inside a scroll area that can cut off
    their last lines. This label sets its minimum height from its real width on every resize.
    """

    def __init__(self, text: str = "", muted: bool = False, parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setWordWrap(True)
        self.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        if muted:
            self.setStyleSheet(f"color: {MUTED};")

    def _fit(self) -> None:
        # QLabel.heightForWidth never answers less than the minimum height: clear it first, or a
        # label that once held three lines keeps their height after its text gets shorter.
        old = self.minimumHeight()
        if old:
            super().setMinimumHeight(0)
        h = self.heightForWidth(self.width())
        if h <= 0:
            h = old
        if h > 0 and h != self.minimumHeight():
            self.setMinimumHeight(h)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt override
        super().setText(text)
        self._fit()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._fit()


class StatCard(QFrame):
    """A headline number: caption above, big value, one line of context below."""

    def __init__(self, caption: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("StatCard")
        self.setStyleSheet(
            "#StatCard { background: #f5f7fa; border: 1px solid #dde3ea; border-radius: 6px; }"
        )
        lay = QVBoxLayout(self)
        lay.setContentsMargins(14, 10, 14, 10)
        lay.setSpacing(2)
        self.caption = muted(caption, wrap=False)
        self.value = QLabel("–")
        f = self.value.font()
        f.setPointSizeF(f.pointSizeF() + 9)
        f.setWeight(QFont.Weight.DemiBold)
        self.value.setFont(f)
        self.value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.detail = muted("")
        lay.addWidget(self.caption)
        lay.addWidget(self.value)
        lay.addWidget(self.detail)

    def set(self, value: str, detail: str = "") -> None:
        self.value.setText(value)
        self.detail.setText(detail)


class _CurrentFollower(QObject):
    """Forwards the current report to a view's slot, deferring it while the view is a hidden tab."""

    def __init__(self, view: QWidget, reports: Any, slot: Callable[[Any], None]) -> None:
        super().__init__(view)
        self._view = view
        self._slot = slot
        self._report: Any = None
        self._pending = False
        self._stack: QStackedWidget | None = None
        reports.sig_current_changed.connect(self._on_current)

    def _on_current(self, report: Any) -> None:
        self._report = report
        parent = self._view.parentWidget()
        stack = parent if isinstance(parent, QStackedWidget) else None
        if report is None or stack is None or stack.currentWidget() is self._view:
            self._pending = False
            self._slot(report)
            return
        self._pending = True
        if stack is not self._stack:
            self._stack = stack
            stack.currentChanged.connect(self._on_tab)

    def _on_tab(self, _index: int) -> None:
        if self._pending and self._stack is not None and self._stack.currentWidget() is self._view:
            self._pending = False
            self._slot(self._report)


def follow_current(view: QWidget, reports: Any, slot: Callable[[Any], None]) -> None:
    """Call ``slot(report)`` when the current report changes, but only while ``view`` is shown.

    A view that is a hidden tab of the main window gets the latest report when its tab is
    selected, so opening a big report starts only the work of the view the user is looking at
    (the others would compete for the CPU and the GIL). A view outside a tab widget (tests,
    dialogs) and a change to "no report" are forwarded at once.
    """
    _CurrentFollower(view, reports, slot)
