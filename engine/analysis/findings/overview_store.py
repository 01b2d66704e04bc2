"""A report's overview (summary and findings) computed in a separate process and kept on disk.

At 10M kernels :func:`engine.analysis.findings.overview.overview` peaks at ~1.7 GB; a program that
also holds the report's timeline (the desktop window) runs it in a child process instead, so that
memory goes back to the OS when the child exits, and keeps the small result (~10 KB pickled) in
the cache under the report's identity (:func:`engine.system.cache.file_identity`: the file and the
engine's code), so the next open of the same report loads it instead of computing it again.

The child is ``python -m engine.analysis.findings.overview_child`` run by the engine's one child
runner (:func:`compute_in_child`, :mod:`engine.system.child`: a JSON request on stdin, progress lines,
cancel, the pickled ``(Summary, list[Finding])`` as its result). Which program uses the child and when
is decided by :class:`engine.analysis.opened.OpenedReport`. The pickles are read only from this user's
cache directory and from the child's result file, never from elsewhere.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.analysis.findings.model import Finding
    from engine.analysis.summary_model import Summary
    from engine.system.child import CancelFlag

#: bump when the pickled types change shape (the identity covers the engine's code anyway)
SCHEMA = 1
Overview = tuple["Summary", list["Finding"]]


def cache_key(range_name: str | None) -> str:
    """The file name of one step range's overview under the report's cache entry."""
    digest = hashlib.sha256((range_name or "").encode()).hexdigest()[:16]
    return f"overview-v{SCHEMA}-{'auto' if range_name is None else digest}.pickle"


def cached_file(path: Path, range_name: str | None = None) -> Path | None:
    """Where :func:`store` keeps the overview of ``path`` (None when ``path`` cannot be read)."""
    from engine.system.cache import cache_root, file_identity

    try:
        identity = file_identity(Path(path))
    except OSError:  # the report is gone (or unreadable): nothing to key a cache entry on
        return None
    return cache_root() / "results" / identity / cache_key(range_name)


def _check(value: object) -> Overview | None:
    from engine.analysis.findings.model import Finding
    from engine.analysis.summary_model import Summary

    if (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], Summary)
            and isinstance(value[1], list) and all(isinstance(f, Finding) for f in value[1])):
        return value[0], value[1]
    return None


def read_result(file: Path) -> Overview | None:
    """The overview pickled in ``file`` (written by this module), or None if absent or unusable."""
    try:
        data = Path(file).read_bytes()
    except OSError:
        return None
    return loads(data)


def load_cached(path: Path, range_name: str | None = None) -> Overview | None:
    """The overview of ``path`` for ``range_name`` saved by :func:`store`, or None."""
    file = cached_file(path, range_name)
    return None if file is None else read_result(file)


def dumps(overview: Overview) -> bytes:
    """The overview as bytes for :func:`read_result`."""
    return pickle.dumps(overview, protocol=pickle.HIGHEST_PROTOCOL)


def store(path: Path, range_name: str | None, overview: Overview) -> None:
    """Keep the overview of ``path`` in the cache; failures (read-only or full disk) are ignored."""
    from engine.system.atomic import atomic_write_bytes

    file = cached_file(path, range_name)
    if file is None:
        return
    try:
        data = dumps(overview)
    except (pickle.PicklingError, TypeError, AttributeError):  # a cache is never worth a failure
        return
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(file, data, fsync=False)
    except OSError:
        pass


def loads(data: bytes) -> Overview | None:
    """The overview in ``data`` (from :func:`dumps`), or None if it is not one."""
    try:
        return _check(pickle.loads(data))  # noqa: S301 - our own cache / our child's output only
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        return None


#: the module the child runs (``python -m``)
CHILD_MODULE = "engine.analysis.findings.overview_child"


#: the background child's niceness: a window's pan and zoom go first (big10m at 2 cores: frame p95
#: 35.7 ms with the child at the window's priority)
BACKGROUND_NICE = 10


def compute_in_child(path: Path, range_name: str | None = None, *, hint: str,
                     progress: Callable[[str], None] | None = None,
                     cancel: CancelFlag | None = None, background: bool = False) -> Overview:
    """The overview of ``path`` computed in a child process (:func:`engine.system.child.run_child`).

    ``background``: a window waits for it while the user works: the child runs at a lower priority
    (:data:`BACKGROUND_NICE`), so it takes only the CPU time the window leaves.

    Raises:
        Cancelled: ``cancel`` was set (the child is killed).
        KernelscopeError: one sentence when the child fails, is killed or gives no overview.

    """
    from engine.system.child import run_child
    from engine.system.errors import KernelscopeError

    what = "The summary's process"
    request = {"report": str(path), "range": range_name, "nice": BACKGROUND_NICE if background else 0}
    data = run_child(CHILD_MODULE, request, what=what, hint=hint, progress=progress, cancel=cancel)
    got = loads(data)
    if got is None:
        raise KernelscopeError(f"{what} finished without a readable result; {hint}")
    return got


def release_shared_pages() -> int:
    """Hand back this process's resident pages of read-only shared file mappings; bytes advised.

    Those are the memory-mapped cache columns and big derived arrays the summary scans (each
    registered in :mod:`engine.system.shared_maps` as it is mapped): their pages stay in the OS
    cache (a later read maps them again without I/O), so dropping them from this process only stops
    them counting in its RSS. Only mappings still open are advised, through their own ``mmap``
    object: never an address range read from ``/proc/self/maps``, which another thread may have
    unmapped and reused for a fresh allocation since (``MADV_DONTNEED`` would zero it). Linux only.
    """
    from engine.system.shared_maps import release

    return release()


class PageReleaser:
    """Keeps the summary's memory down from a thread while it runs (a context manager).

    * :func:`release_shared_pages` every ``period_s``, and as soon as this process's resident pages
      of shared file mappings pass ``budget`` bytes (looked at every :data:`LOOK_S`): a pass that
      gathers from a 69M-row mapped column touches 0.55 GB of its pages within a second, which a
      periodic hand-back alone let pile up (big10m: peaks of 2.0-2.1 GB).
    * With ``heap_budget``, the C heap is kept for reuse (``engine.system.heap.kept``: no fresh
      zero-filled mapping per temporary) and its free pages handed back (``heap.trim``) whenever
      the whole resident size passes ``heap_budget`` (at most every :data:`TRIM_S`).
    """

    def __init__(self, period_s: float, budget: int = 0, heap_budget: int = 0) -> None:
        import contextlib
        import threading

        self._stop = threading.Event()
        self._period_s = period_s
        self._budget = budget
        self._heap_budget = heap_budget
        self._heap = contextlib.ExitStack()
        self._thread = threading.Thread(target=self._run, name="ks-release-pages", daemon=True)

    def __enter__(self) -> PageReleaser:
        from engine.system import heap

        if self._heap_budget:
            self._heap.enter_context(heap.kept())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._heap.close()

    def _run(self) -> None:
        import time

        from engine.system import heap

        last = last_trim = time.monotonic()
        look = min(LOOK_S, self._period_s) if self._budget or self._heap_budget else self._period_s
        while not self._stop.wait(look):
            now = time.monotonic()
            shared, whole = _resident()
            if now - last >= self._period_s or (self._budget and shared > self._budget):
                release_shared_pages()
                last = now
            if self._heap_budget and whole > self._heap_budget and now - last_trim >= TRIM_S:
                heap.trim()
                last_trim = now


def _resident() -> tuple[int, int]:
    """(bytes of this process resident in shared pages (file mappings, shmem), all resident bytes)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            parts = fh.read().split()
        page = os.sysconf("SC_PAGE_SIZE")
        return int(parts[2]) * page, int(parts[1]) * page
    except (OSError, ValueError, IndexError):
        return 0, 0


#: seconds between two hand-backs of the mapped pages the child's summary has read
RELEASE_PERIOD_S = 0.5
#: ... and the mapped pages it may hold before they are handed back at once
RELEASE_BUDGET = 320 << 20
#: seconds between two looks at those pages
LOOK_S = 0.02
#: the resident size past which the kept heap's free pages are handed back, at most every TRIM_S
HEAP_BUDGET = 1300 << 20
TRIM_S = 0.1
#: the name the page releaser had (engine.analysis.findings.overview imports it so)
_Releaser = PageReleaser
