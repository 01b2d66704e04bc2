"""Run Python's cyclic garbage collector on the GUI thread only.

When the collector runs in a worker thread (it runs wherever an allocation crosses its
threshold), it can free a Qt wrapper created on the GUI thread. Its destructor then takes Qt's
connection lock and waits for the GIL, while the GUI thread holds the GIL and waits for that lock:
the window freezes. Seen here: a Run-view worker listing sessions collected garbage while the window
added a report. So automatic collection is switched off and a GUI-thread timer collects instead,
by generation, when the allocation counts pass the same thresholds the automatic collector uses.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QCoreApplication, QObject, QTimer

_GUARD_NAME = "kernelscope-gc-guard"


class MainThreadGC(QObject):
    """Disables automatic collection and collects from a timer on the thread that owns it."""

    def __init__(self, interval_ms: int = 500, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.setObjectName(_GUARD_NAME)
        self.threshold = gc.get_threshold()
        gc.disable()
        self.timer = QTimer(self)
        self.timer.timeout.connect(self.check)
        self.timer.start(interval_ms)

    def check(self) -> None:
        """Collect the generations whose allocation counts passed their thresholds."""
        c0, c1, c2 = gc.get_count()
        if c0 > self.threshold[0]:
            gen = 2 if c2 > self.threshold[2] else 1 if c1 > self.threshold[1] else 0
            gc.collect(gen)

    def stop(self) -> None:
        """Stop the timer and give collection back to Python."""
        self.timer.stop()
        gc.enable()


def install() -> MainThreadGC | None:
    """Install the guard on the running QApplication once (None without an application)."""
    app = QCoreApplication.instance()
    if app is None:
        return None
    guard = app.findChild(MainThreadGC, _GUARD_NAME)
    if guard is None:
        guard = MainThreadGC(parent=app)
        app.aboutToQuit.connect(guard.stop)
    return guard
