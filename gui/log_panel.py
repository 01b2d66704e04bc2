"""The log dock: a readable record of what happened (opened, exported, errors), newest last."""

from __future__ import annotations

import time

from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QPlainTextEdit, QWidget

_COLORS = {"info": "#2c3e50", "warning": "#a35c00", "error": "#b03a2e"}


class LogPanel(QPlainTextEdit):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setMaximumBlockCount(5000)
        f = QFont(self.font())
        f.setStyleHint(QFont.StyleHint.Monospace)
        f.setFamily("DejaVu Sans Mono")
        self.setFont(f)
        #: (level, message) in order, for tests and for copying
        self.entries: list[tuple[str, str]] = []

    def add(self, message: str, level: str = "info") -> None:
        self.entries.append((level, message))
        stamp = time.strftime("%H:%M:%S")
        prefix = {"info": "", "warning": "warning: ", "error": "error: "}.get(level, "")
        fmtc = QTextCharFormat()
        fmtc.setForeground(QColor(_COLORS.get(level, "#000")))
        cur = self.textCursor()
        cur.movePosition(QTextCursor.MoveOperation.End)
        if not self.document().isEmpty():
            cur.insertBlock()
        cur.insertText(f"{stamp}  {prefix}{message}", fmtc)
        self.setTextCursor(cur)
        self.ensureCursorVisible()

    def errors(self) -> list[str]:
        return [m for lvl, m in self.entries if lvl == "error"]
