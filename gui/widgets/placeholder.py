"""The grey sentence a view shows instead of its content, and a stack that switches between the two."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QStackedWidget, QWidget

from gui.widgets.labels import MUTED


def placeholder_label() -> QLabel:
    """The large centred grey sentence a view shows instead of its content ("No report open", ...)."""
    label = QLabel()
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    label.setWordWrap(True)
    label.setStyleSheet(f"color: {MUTED}; font-size: 13pt;")
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class PlaceholderStack(QStackedWidget):
    """A view's content pages plus the placeholder sentence; ``show_placeholder`` / ``show_page``."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.placeholder = placeholder_label()
        self.addWidget(self.placeholder)

    def add_page(self, page: QWidget) -> QWidget:
        self.addWidget(page)
        return page

    def show_placeholder(self, text: str) -> None:
        self.placeholder.setText(text)
        self.setCurrentWidget(self.placeholder)

    def show_page(self, page: QWidget) -> None:
        self.setCurrentWidget(page)

    def showing_placeholder(self) -> bool:
        return self.currentWidget() is self.placeholder

    def placeholder_text(self) -> str:
        return self.placeholder.text()
