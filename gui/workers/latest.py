"""One background computation per view: results cached by key, the latest request wins.

Used by the Bandwidth, Kernels and Roofline views: each asks for ``fn(*args)`` under a key (the
report's id); the call runs in a :class:`gui.workers.Job` thread; while one runs, only the most
recent request waits. ``sig_result(key, value)`` / ``sig_error(key, sentence)`` arrive in the GUI
thread.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from PySide6.QtCore import QObject, Signal

from gui.workers.jobs import CallWorker, Job


class LatestCall(QObject):
    sig_result = Signal(object, object)  # key, result
    sig_error = Signal(object, str)  # key, sentence

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.cache: dict[Hashable, Any] = {}
        self._job: Job | None = None
        self._job_key: Hashable | None = None
        self._pending: tuple[Hashable, Callable[..., Any], tuple[Any, ...]] | None = None

    def busy(self) -> bool:
        return self._job is not None

    def request(self, key: Hashable, fn: Callable[..., Any], *args: Any) -> bool:
        """Start (or queue) ``fn(*args)``; True when the result was cached and emitted at once."""
        if key in self.cache:
            self._pending = None
            self.sig_result.emit(key, self.cache[key])
            return True
        if self._job is not None:
            self._pending = (key, fn, args)
            return False
        job = Job(CallWorker(fn, *args), self)
        self._job, self._job_key = job, key
        job.sig_finished.connect(self._on_finished)
        job.sig_errored.connect(self._on_errored)
        job.sig_done.connect(self._on_done)
        job.start()
        return False

    def forget(self, key: Hashable) -> None:
        self.cache.pop(key, None)

    def stop(self) -> None:
        self._pending = None
        if self._job is not None:
            self._job.stop()
            self._job = None

    def _on_finished(self, result: Any) -> None:
        self.cache[self._job_key] = result
        if self._pending is None:
            self.sig_result.emit(self._job_key, result)

    def _on_errored(self, msg: str) -> None:
        if self._pending is None:
            self.sig_error.emit(self._job_key, msg)

    def _on_done(self) -> None:
        job, self._job, self._job_key = self._job, None, None
        if job is not None:
            job.deleteLater()
        if self._pending is not None:
            key, fn, args = self._pending
            self._pending = None
            self.request(key, fn, *args)
