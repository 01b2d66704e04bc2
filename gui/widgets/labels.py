"""Labels shared by the views: section headings, stat cards, muted text, colour swatches."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QResizeEvent
from PySide6.QtWidgets import QFrame, QLabel, QSizePolicy, QVBoxLayout, QWidget

MUTED = "#5f6b7a"


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
