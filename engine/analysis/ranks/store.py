"""Each report's ranks, read once: kept in the cache by the report's identity, read in parallel otherwise.

What a rank keeps after it is read is what the job needs of it: its steps and their partition
(:func:`engine.analysis.ranks.costs.local_costs`), its GPU work as merged blocks, and its NCCL
kernels; its CUDA API calls are not kept (the partition holds their share). A 400k-kernel rank is a
few MB that way, so a 64-rank job fits in one process; the reading, which needs the report's
tables, runs in worker processes (one report each) and is done once per report: the next run of
the same job reads the cache (``$KERNELSCOPE_CACHE/ranks``, keyed by the report's path, size, mtime,
inode and the engine's code, as every cached result).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.analysis.ranks.costs import local_costs
from engine.analysis.steps import merged
from engine.system.errors import KernelscopeError

if TYPE_CHECKING:
    from engine.analysis.ranks.load import RankInput

#: the cache's folder under the cache root, and the version of what it holds
FOLDER = "ranks"
VERSION = 1
#: reports read at once when not cached (each reader holds one report's tables)
DEFAULT_WORKERS = 2
#: a reader process reads this many reports, then a fresh one takes over (memory comes back)
TASKS_PER_READER = 8
#: reports not cached are read in other processes only when together they are this big (starting a
#: reader costs about a second)
PARALLEL_MIN_BYTES = 64 << 20


def slim(r: RankInput) -> RankInput:
    """The rank as the job needs it: its partition measured, GPU work merged, API calls dropped."""
    r.local = local_costs(r)
    r.compute_start, r.compute_end = merged(r.compute_start, r.compute_end)
    r.api_start = r.api_end = np.zeros(0, dtype=np.int64)
    return r


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
    from engine.analysis.ranks.load import ranks_of
    from engine.reports.open import open_report
    from engine.system.atomic import atomic_write_bytes

    got = cached_ranks(path, range_name)
    if got is not None:
        return got
    with open_report(path) as trace:
        inputs = [slim(r) for r in ranks_of(trace, range_name=range_name)]
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
        workers: Reader processes for the reports not cached (default 2; 0 or 1: in this process).
        on_read: Called with (reports done, reports) as they come in.

    Raises:
        ReportError: a report cannot be read (the first such, in the order of ``paths``).
    """
    from engine.system.errors import ReportError

    names = [str(p) for p in paths]
    out: list[list[RankInput] | str | None] = [cached_ranks(p, range_name) for p in names]
    todo = [i for i, got in enumerate(out) if got is None]
    done = len(names) - len(todo)
    n = DEFAULT_WORKERS if workers is None else workers
    n = min(n, len(todo), os.cpu_count() or 1)
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
        from concurrent.futures import ProcessPoolExecutor

        ctx = multiprocessing.get_context("spawn")  # no fork of a parent that holds threads and tables
        with ProcessPoolExecutor(max_workers=n, mp_context=ctx, max_tasks_per_child=TASKS_PER_READER) as pool:
            futures = {pool.submit(_read_or_say, names[i], range_name): i for i in todo}
            from concurrent.futures import as_completed

            for fut in as_completed(futures):
                out[futures[fut]] = fut.result()
                done += 1
                if on_read:
                    on_read(done, len(names))
    for got in out:
        if isinstance(got, str):
            raise ReportError(got)
    return [got for got in out if isinstance(got, list)]
