"""Long work off the GUI thread: a worker QObject in a QThread, and the job that owns both.

A worker lives in its own QThread and reports through ``sig_started``, ``sig_progress(str)``,
``sig_finished(object)`` and ``sig_errored(str)`` (plus ``sig_cancelled``). Its signals are
connected to a :class:`Job`, a QObject that lives in the GUI thread, so every slot the window
connects runs in the GUI thread (a lambda connected straight to a worker signal would not).
Cancel is cooperative: a ``threading.Event`` handed to the engine and checked between steps.
"""

from __future__ import annotations

import threading
import traceback
import weakref
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QThread, Signal, Slot

from engine.system.errors import Cancelled  # raised inside a worker when its cancel flag is set

#: Every QThread started here, so tests can check none is left running.
_THREADS: weakref.WeakSet[QThread] = weakref.WeakSet()


def running_threads() -> list[QThread]:
    """The QThreads started by :class:`Job` that are still running."""
    out = []
    for t in list(_THREADS):
        try:
            if t.isRunning():
                out.append(t)
        except RuntimeError:  # C++ object already deleted
            pass
    return out


class Worker(QObject):
    """Base worker: subclasses implement :meth:`work`; exceptions become one sentence."""

    sig_started = Signal()
    sig_progress = Signal(str)
    sig_finished = Signal(object)
    sig_errored = Signal(str)
    sig_cancelled = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.cancel_event = threading.Event()

    def cancel(self) -> None:
        self.cancel_event.set()

    def check_cancel(self) -> None:
        if self.cancel_event.is_set():
            raise Cancelled

    def work(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe_error(self, exc: BaseException) -> str:
        """One sentence for an unexpected failure (engine errors already are sentences)."""
        from engine.system.errors import KernelscopeError

        if isinstance(exc, KernelscopeError):
            return str(exc)
        return f"Unexpected error ({type(exc).__name__}: {exc}); please report it with the file."

    @Slot()
    def run(self) -> None:
        self.sig_started.emit()
        try:
            self.check_cancel()
            result = self.work()
            self.check_cancel()
        except Cancelled:
            self.sig_cancelled.emit()
        except Exception as exc:  # noqa: BLE001 - every failure must reach the user as a sentence
            from engine.system.errors import KernelscopeError

            if not isinstance(exc, KernelscopeError):
                traceback.print_exc()
            if self.cancel_event.is_set():
                self.sig_cancelled.emit()
            else:
                self.sig_errored.emit(self.describe_error(exc))
        else:
            self.sig_finished.emit(result)
        # The worker stays with its thread, which the Job quits and joins on the first report: a
        # QObject of a finished thread may be destroyed from the GUI thread. (It used to move itself
        # back here; QObject.moveToThread takes Qt's lock while this thread holds the GIL, and a GUI
        # thread destroying an object under that lock waits for the GIL: both hung, in a test.)


class CallWorker(Worker):
    """Run ``fn(*args)`` in the worker thread (used for statistics tables)."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        super().__init__()
        self._fn = fn
        self._args = args

    def work(self) -> Any:
        return self._fn(*self._args)


class Job(QObject):
    """Owns one worker and its QThread; re-emits the worker's signals in the GUI thread.

    The thread is quit and joined as soon as the worker reports, and :meth:`stop` cancels and
    joins it on teardown.
    """

    sig_started = Signal()
    sig_progress = Signal(str)
    sig_finished = Signal(object)
    sig_errored = Signal(str)
    sig_cancelled = Signal()
    #: emitted once, after whichever of finished / errored / cancelled.
    sig_done = Signal()

    def __init__(self, worker: Worker, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.worker = worker
        self.qthread = QThread()
        self.qthread.setObjectName(f"kernelscope-{type(worker).__name__}")
        _THREADS.add(self.qthread)
        self.done = False
        worker.moveToThread(self.qthread)
        self.qthread.started.connect(worker.run)
        worker.sig_started.connect(self._on_started)
        worker.sig_progress.connect(self._on_progress)
        worker.sig_finished.connect(self._on_finished)
        worker.sig_errored.connect(self._on_errored)
        worker.sig_cancelled.connect(self._on_cancelled)

    def start(self) -> None:
        self.qthread.start()

    def cancel(self) -> None:
        self.worker.cancel()

    def stop(self, timeout_ms: int = 10_000) -> bool:
        """Cancel, quit and wait for the thread; True when it has stopped."""
        self.worker.cancel()
        self.qthread.quit()
        return bool(self.qthread.wait(timeout_ms))

    def join(self) -> None:
        """Wait for the thread however long the worker takes (after :meth:`stop` timed out)."""
        self._join()

    def _join(self) -> None:
        self.qthread.quit()
        self.qthread.wait()

    @Slot()
    def _on_started(self) -> None:
        self.sig_started.emit()

    @Slot(str)
    def _on_progress(self, msg: str) -> None:
        if not self.done:
            self.sig_progress.emit(msg)

    @Slot(object)
    def _on_finished(self, result: object) -> None:
        self._finish()
        self.sig_finished.emit(result)
        self.sig_done.emit()

    @Slot(str)
    def _on_errored(self, msg: str) -> None:
        self._finish()
        self.sig_errored.emit(msg)
        self.sig_done.emit()

    @Slot()
    def _on_cancelled(self) -> None:
        self._finish()
        self.sig_cancelled.emit()
        self.sig_done.emit()

    def _finish(self) -> None:
        self.done = True
        self._join()
