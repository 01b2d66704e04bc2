"""The Run view's session worker: runs one session on its QThread, buffering output lines for the
GUI thread to drain; plus the calls the Run view makes off the GUI thread (sessions list, doctor)."""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Signal

from gui.workers.jobs import Worker

if TYPE_CHECKING:
    from engine.sessions.outcome import Outcome
    from engine.sessions.spec import SessionSpec
    from engine.sessions.store import SessionRecord


class RunWorker(Worker):
    """Runs one session; output lines are buffered for the GUI thread to drain."""

    sig_lines = Signal()  # the buffer went from empty to non-empty

    def __init__(self, spec: SessionSpec) -> None:
        super().__init__()
        self.spec = spec
        self.session_cancel = threading.Event()
        self._lock = threading.Lock()
        self._buf: deque[Any] = deque()
        self.dropped = 0
        #: the runner's latest progress estimate (also sent while the program prints nothing)
        self.last_progress: Any = None

    def cancel(self) -> None:
        # Not the worker's own cancel flag: the runner must return its 'cancelled' outcome,
        # which then reaches the view through sig_finished like any other outcome.
        self.session_cancel.set()

    def _on_line(self, line: Any) -> None:
        with self._lock:
            was_empty = not self._buf
            self._buf.append(line)
        if was_empty:
            self.sig_lines.emit()

    def take_lines(self) -> list[Any]:
        """Everything buffered so far (called from the GUI thread)."""
        with self._lock:
            out = list(self._buf)
            self._buf.clear()
        return out

    def work(self) -> Outcome:
        from engine.sessions.runner import run_session

        return run_session(self.spec, on_line=self._on_line, cancel=self.session_cancel,
                           on_progress=self._on_progress)

    def _on_progress(self, progress: Any) -> None:
        self.last_progress = progress  # read by the view's 1 s tick; a reference swap needs no lock


def list_sessions(limit: int) -> list[SessionRecord]:
    from engine.sessions.store import SessionStore, data_root

    if not (data_root() / "sessions.sqlite").exists():
        return []  # looking must not create the store; the first session does
    return SessionStore().list(limit=limit)


def doctor_text(target: Any) -> str:
    from engine.sessions import doctor

    if target is None:
        return "Doctor (this machine):\n" + doctor.format_checks(doctor.run_doctor())
    return f"Doctor ({target.display}):\n" + doctor.format_checks(doctor.run_remote_doctor(target))


def gpu_checks() -> list[Any]:
    """The doctor's driver/GPU checks (NVML; fast, never raises): the Run form's defaults."""
    from engine.sessions.doctor import check_gpus

    return check_gpus()
