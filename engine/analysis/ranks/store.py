"""Each report's ranks, read once: kept in the cache by the report's identity, read in parallel otherwise.

What a rank keeps after it is read is what the job needs of it: its steps and their partition
(:func:`engine.analysis.ranks.costs.local_costs`), its GPU work as merged blocks, and its NCCL
kernels; its CUDA API calls are not kept (the partition holds their share). A 400k-kernel rank is a
few MB that way, so a 64-rank job fits in one process; the reading, which needs the report's
tables, runs in worker processes (one report each) and is done once per report: the next run of
the same job reads the cache (``$KERNELSCOPE_CACHE/ranks``, keyed by the report's path, size, mtime,
inode and the engine's code, as every cached result). While a report is read its columns are kept in
memory (/dev/shm), not in the column cache, and on a Dask worker with glibc's own heap settings
(:mod:`engine.analysis.ranks.heap`).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.analysis.ranks.costs import local_costs
from engine.analysis.steps import merged
from engine.system import scratch
from engine.system.errors import KernelscopeError

if TYPE_CHECKING:
    import numpy.typing as npt

    from engine.analysis.ranks.load import RankInput

#: a rank's lanes (its GPU work and NCCL kernels for a view to draw) keep at most this many blocks each
LANE_BLOCKS = 20_000
#: the cache's folder under the cache root, and the version of what it holds
FOLDER = "ranks"
VERSION = 1
#: reports read at once when not cached, at most (each reader holds one report's tables, ~500 MB at 400k
#: kernels)
DEFAULT_WORKERS = 4
#: the modules a reader imports on the way (imported before the readers are forked from this process)
READER_IMPORTS = ("pandas", "sqlite3", "engine.analysis.steps", "engine.analysis.ops",
                  "engine.analysis.calls", "engine.analysis.ranges", "engine.analysis.file_backed",
                  "engine.reports.open", "engine.reports.nsys.sqlite_trace", "engine.reports.nsys.columns",
                  "engine.reports.nsys.pages", "engine.reports.nsys.column_reads",
                  "engine.reports.nsys.page_exprs", "engine.system.atomic")
#: where a report's columns are kept while it is read (memory: tmpfs)
SCRATCH = "/dev/shm"
SCRATCH_PREFIX = "ks-rank-columns-"
#: the scratch is used where it has this many times the report's size free (its columns: ~0.8 times; the
#: readers at once)
SCRATCH_ROOM = 8
#: a reader process started fresh (spawn) reads this many reports, then another takes over
SPAWNED_READS = 4
#: reports not cached are read in other processes only when together they are this big (starting a
#: reader costs about a second)
PARALLEL_MIN_BYTES = 64 << 20


def slim(r: RankInput) -> RankInput:
    """The rank as the job needs it.

    Its partition measured, its API calls dropped, its GPU work kept only where NCCL kernels run (all
    a wait is measured against), and its lanes drawn with at most LANE_BLOCKS blocks each.
    """
    from engine.analysis.ranks.costs import clipped_to

    r.local = local_costs(r)
    cs, ce = merged(r.compute_start, r.compute_end)
    ns, ne = merged(r.nccl_start, r.nccl_end)
    r.lanes = (coarse(cs, ce, LANE_BLOCKS), coarse(ns, ne, LANE_BLOCKS))
    r.compute_start, r.compute_end = clipped_to(cs, ce, ns, ne)
    r.api_start = r.api_end = np.zeros(0, dtype=np.int64)
    return r


def coarse(starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64],
           max_blocks: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Merged blocks closer than span / max_blocks joined (what a lane can draw; a level of detail)."""
    if len(starts) <= max_blocks:
        return starts, ends
    gap = max(1, int((ends.max() - starts.min()) // max_blocks))
    new = np.empty(len(starts), dtype=bool)
    new[0] = True
    new[1:] = starts[1:] - ends[:-1] > gap
    idx = np.flatnonzero(new)
    return starts[idx], np.append(ends[idx[1:] - 1], ends[-1])


def _cache_file(path: Path, range_name: str | None) -> Path:
    import hashlib

    from engine.system.cache import cache_root, file_identity

    # the name too: a link to a report is another rank's report (its rank number is in its name)
    key = hashlib.sha256(f"{path.absolute()}\0{range_name or ''}".encode()).hexdigest()[:16]
    return cache_root() / FOLDER / f"{file_identity(path)}-{key}-v{VERSION}.pickle"


def cached_ranks(path: str | Path, range_name: str | None = None) -> list[RankInput] | None:
    """The report's ranks from the cache, or None when not cached (or the report changed)."""
    try:
        f = _cache_file(Path(path), range_name)
        with open(f, "rb") as fh:
            got = pickle.load(fh)  # noqa: S301 - our own cache, written by read_ranks
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError, ValueError):
        return None
    return got if isinstance(got, list) else None


def read_ranks(path: str | Path, range_name: str | None = None) -> list[RankInput]:
    """The report's ranks (:func:`engine.analysis.ranks.load.ranks_of`, slimmed), cached by its identity.

    Raises:
        ReportError: the report cannot be read.
    """
    from engine.analysis.ranks.heap import heap_for_reading
    from engine.analysis.ranks.load import ranks_of
    from engine.reports.open import open_report
    from engine.system.atomic import atomic_write_bytes

    got = cached_ranks(path, range_name)
    if got is not None:
        return got
    from engine.analysis.tables import forget_trace

    with heap_for_reading(), open_report(path) as trace:
        columns = _columns_dir(trace)
        found = columns is None or columns.exists()
        scratch = None if found else _columns_in_memory(trace, _size(str(path)))
        try:
            inputs = [slim(r) for r in ranks_of(trace, range_name=range_name)]
        finally:
            forget_trace(trace)  # its derived tables would outlive it (a Dask worker reads many)
            for folder in (scratch, None if found else columns):  # leave the column cache as found
                if folder is not None:
                    shutil.rmtree(folder, ignore_errors=True)
    try:
        atomic_write_bytes(_cache_file(Path(path), range_name), pickle.dumps(inputs, protocol=5), fsync=False)
    except OSError:
        pass  # a read-only or full cache: the next run reads the report again
    return inputs


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _columns_dir(trace: object) -> Path | None:
    """Where the report's columns are cached (an nsys export), else None."""
    store = getattr(trace, "column_store", None)
    folder = getattr(store(), "cache_dir", None) if callable(store) else None
    return folder if isinstance(folder, Path) else None


def _read_one(job: tuple[int, str, str | None, str | None]) -> tuple[int, list[RankInput] | str]:
    i, path, range_name, ahead = job
    if ahead is not None:  # the report a reader takes next: the disk reads it while this one is parsed
        will_need(ahead)
    return i, _read_or_say(path, range_name)


def will_need(path: str) -> None:
    """Ask the OS to start reading a file into its cache (posix_fadvise WILLNEED; where there is one)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass
    finally:
        os.close(fd)


def _read_in_processes(jobs: list[tuple[int, str]], range_name: str | None,
                       n: int) -> Iterator[tuple[int, list[RankInput] | str]]:
    """Read the reports in ``n`` processes, each report in a fresh one where that is cheap.

    Reading a report leaves memory behind in a process (the engine's per-trace caches, the allocator's
    arenas): a reader that read 32 reports held 2.5 GB. A process forked from a parent without
    threads costs milliseconds, so each report gets one; a parent with threads (the window) may not
    fork, and its readers are started fresh (spawn, about a second each) every few reports.
    """
    import threading

    fork = threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods()
    if fork:  # what every reader imports, imported once here and shared (pandas alone: 1-2 s a process)
        import importlib

        for module in READER_IMPORTS:
            try:
                importlib.import_module(module)
            except ImportError:  # moved or renamed: its reader imports it then
                continue
    ctx = multiprocessing.get_context("fork" if fork else "spawn")
    with ctx.Pool(processes=n, maxtasksperchild=1 if fork else SPAWNED_READS) as pool:
        # each reader asks for the report n places later (the one a reader takes after this round)
        queue = [(i, p, range_name, jobs[k + n][1] if k + n < len(jobs) else None)
                 for k, (i, p) in enumerate(jobs)]
        for _i, p in jobs[:n]:
            will_need(p)
        yield from pool.imap_unordered(_read_one, queue)


def _columns_in_memory(trace: object, report_bytes: int) -> Path | None:
    """Have the report's columns kept in memory (a folder of /dev/shm) while it is read, not on the disk.

    The rank is read once and kept in the ranks cache; a job's reports would fill the column cache
    (141 MB a 400k-kernel rank, written and deleted again: 9 GB of writes for 64 ranks). The columns
    still go through files, so a column two readers ask for is read once and big tables are read in
    child processes (engine.reports.nsys.columns). Returns the folder to delete after the read; None
    where there is no /dev/shm or it has less than SCRATCH_ROOM times the report's size free (a write past
    a full tmpfs' end is a SIGBUS): the columns are then read into this process's memory, each time asked.
    A report whose columns are cached already (``kernelscope summary`` ran on it) reads them from there.
    """
    store = getattr(trace, "column_store", None)
    got = store() if callable(store) else None
    if got is None or not hasattr(got, "cache_dir"):
        return None
    try:
        scratch.sweep(SCRATCH_PREFIX, SCRATCH)
        st = os.statvfs(SCRATCH)
        if st.f_bavail * st.f_frsize < SCRATCH_ROOM * max(report_bytes, 1 << 20):
            raise OSError("too little room")
        folder = scratch.make(SCRATCH_PREFIX, SCRATCH)
    except OSError:
        got.cache_dir = None
        return None
    got.cache_dir = folder
    return folder


def _read_or_say(path: str, range_name: str | None) -> list[RankInput] | str:
    """:func:`read_ranks` in a worker: a report that cannot be read comes back as its sentence."""
    try:
        return read_ranks(path, range_name)
    except KernelscopeError as exc:
        return str(exc)


def read_all(paths: Sequence[str | Path], range_name: str | None = None, *, workers: int | None = None,
             on_read: Callable[[int, int], None] | None = None) -> list[list[RankInput]]:
    """Every report's ranks, in the order of ``paths``: cached ones here, the others ``workers`` at once.

    Args:
        paths: The reports.
        range_name: The step range (None: found by structure).
        workers: Reader processes for the reports not cached (default: 2 a core, at most 4; 0 or 1: in
            this process).
        on_read: Called with (reports done, reports) as they come in.

    Raises:
        ReportError: a report cannot be read (the first such, in the order of ``paths``).
    """
    from engine.system.errors import ReportError

    names = [str(p) for p in paths]
    out: list[list[RankInput] | str | None] = [cached_ranks(p, range_name) for p in names]
    todo = [i for i, got in enumerate(out) if got is None]
    done = len(names) - len(todo)
    # reading a report waits on the disk more than it computes: two readers a core (at most 4)
    n = min(DEFAULT_WORKERS, 2 * (os.cpu_count() or 1)) if workers is None else workers
    n = min(n, len(todo))
    if sum(_size(names[i]) for i in todo) < PARALLEL_MIN_BYTES:
        n = 1
    if multiprocessing.current_process().daemon:
        n = 1  # a daemon (a Dask worker, a pool's process) may not start processes
    if n <= 1:
        for i in todo:
            out[i] = _read_or_say(names[i], range_name)
            done += 1
            if on_read:
                on_read(done, len(names))
    else:
        for i, read in _read_in_processes([(i, names[i]) for i in todo], range_name, n):
            out[i] = read
            done += 1
            if on_read:
                on_read(done, len(names))
    for got in out:
        if isinstance(got, str):
            raise ReportError(got)
    return [got for got in out if isinstance(got, list)]
