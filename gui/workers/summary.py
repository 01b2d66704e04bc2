"""A report's summary and findings off the GUI thread, in a child process for a big report.

At 10M kernels the engine's summary peaks at ~1.7 GB; computed in the window's own process, that
memory stays with the window (Python and the allocator keep most of it), on top of the timeline's.
:func:`run_child` computes it in a fresh Python instead (``engine.analysis.findings.overview_store``),
which gives all of it back when it exits, and the window loads the small result. The result is kept
in the cache under the report's identity, so opening the report again shows its summary at once.
"""

from __future__ import annotations

import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gui.workers.jobs import Cancelled, Worker

if TYPE_CHECKING:
    from engine.analysis.findings.overview_store import Overview
    from gui.workers.load import LoadedReport

#: CUDA events (kernels, copies, memsets, API calls) above which the summary runs in a child process
CHILD_EVENTS = 2_000_000
#: one summary child at a time (two at 10M kernels would need twice the memory)
_CHILD_LOCK = threading.Lock()

Progress = Callable[[str], None]


def _signal_name(rc: int) -> str:
    import signal

    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


class CancelFlag(Protocol):
    """What run_child checks to stop early: a ``threading.Event`` or anything with ``is_set()``."""

    def is_set(self) -> bool: ...


def run_child(path: Path, range_name: str | None = None, *, progress: Progress | None = None,
              cancel: CancelFlag | None = None, poll_s: float = 0.25) -> Overview:
    """Compute the overview of ``path`` in a child process and return it.

    ``progress`` gets a short text (the child's stage and the seconds so far) about once a second;
    setting ``cancel`` kills the child and raises :class:`~gui.workers.jobs.Cancelled`. A child that
    fails or is killed raises a ``KernelscopeError`` with one sentence.
    """
    from engine.analysis.findings import overview_store
    from engine.system.errors import KernelscopeError

    with _CHILD_LOCK, tempfile.TemporaryDirectory(prefix="ks-summary-") as tmp:
        out = Path(tmp) / "overview.pickle"
        err_path = Path(tmp) / "stderr.txt"
        stage = ["starting"]
        error: list[str] = []
        t0 = time.monotonic()
        with open(err_path, "wb") as err:
            argv = overview_store.child_argv(path, out, range_name)
            proc = subprocess.Popen(argv, env=overview_store.child_env(), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=err, text=True)

            def read_stdout() -> None:
                assert proc.stdout is not None
                for line in proc.stdout:
                    kind, _, text = line.rstrip("\n").partition(": ")
                    if kind == "progress":
                        stage[0] = text
                    elif kind == "error":
                        error.append(text)

            reader = threading.Thread(target=read_stdout, name="ks-summary-child-out", daemon=True)
            reader.start()
            last = 0.0
            if progress is not None:  # at once: a small report's child can be done before the first poll
                progress(f"In a separate process: {stage[0]} (0 s)")
            try:
                while True:
                    try:
                        rc = proc.wait(timeout=poll_s)
                    except subprocess.TimeoutExpired:
                        rc = None
                    if cancel is not None and cancel.is_set():
                        raise Cancelled  # (also when the child has just finished: its result is not wanted)
                    if rc is not None:
                        break
                    now = time.monotonic() - t0
                    if progress is not None and now - last >= 1.0:
                        last = now
                        progress(f"In a separate process: {stage[0]} ({now:.0f} s)")
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            finally:
                reader.join(timeout=5)
        if rc == 0:
            got = overview_store.read_result(out)
            if got is not None:
                return got
            raise KernelscopeError("The summary's process finished without a readable result; "
                                   "reopen the report to try again.")
        if error:
            raise KernelscopeError(error[-1])
        if rc < 0:
            raise KernelscopeError(f"The summary's process was stopped ({_signal_name(rc)}, perhaps for "
                                   "lack of memory); the other views still work, reopen the report to "
                                   "try again.")
        tail = [ln for ln in err_path.read_text(errors="replace").splitlines() if ln.strip()]
        why = f": {tail[-1].strip()}" if tail else ""
        raise KernelscopeError(f"The summary's process failed (exit status {rc}{why}); the other views "
                               "still work.")


class SummaryWorker(Worker):
    """Compute a report's summary (:meth:`LoadedReport.ensure_summary`) with progress and cancel."""

    def __init__(self, report: LoadedReport) -> None:
        super().__init__()
        self.report = report

    def work(self) -> object:
        return self.report.ensure_summary(progress=self.sig_progress.emit, cancel=self.cancel_event)
