"""Coverage of a lane of millions of disjoint intervals without a per-event prefix sum (no Qt).

A lane's coverage (the busy fraction of each pixel column) needs the busy time before any instant:
the dense form keeps a running total per interval (8 bytes an event: 170 MB for 21M CUDA API calls).
Where the intervals are sorted and disjoint (a CPU thread's CUDA calls, a stream's kernels), the
busy time before interval ``k`` is the total of the block of :data:`STRIDE` intervals it falls in
plus the durations inside that block, so :class:`SparseUnion` keeps one total per block (1/64 of
the memory) and sums at most 63 durations per pixel edge when drawing.

:func:`scan` checks a lane's columns chunk by chunk. The columns of a big report are memory-mapped
cache files (:mod:`engine.reports.columns`); after each chunk its pages are handed back
(``MADV_DONTNEED`` on the read-only file mapping: the data stays in the OS cache and on disk), so
opening a 21M-call lane does not leave 340 MB of it resident in the app. Drawing touches only the
pages of the intervals it looks up.
"""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np

#: intervals per block of the running total
STRIDE = 64
#: lanes with fewer intervals keep the dense running total (exact, simple, small)
MIN_EVENTS = 1_000_000
#: intervals checked per chunk of :func:`scan` (a multiple of STRIDE)
CHUNK = 1 << 22


def file_mapping(arr: np.ndarray) -> mmap.mmap | None:
    """The read-only file mapping ``arr``'s memory lies in (a mapped cache column), else None."""
    obj: Any = arr
    while isinstance(obj, np.ndarray):
        obj = obj.base
    if isinstance(obj, mmap.mmap):
        return obj
    return None


def release(arr: np.ndarray, lo: int, hi: int) -> None:
    """Hand back the resident pages of ``arr[lo:hi]`` when ``arr`` is a read-only file mapping.

    Anonymous memory is never touched (MADV_DONTNEED would zero it); a mapping that cannot be
    advised is left as it is.
    """
    mm = file_mapping(arr)
    if mm is None or hi <= lo or not hasattr(mm, "madvise"):
        return
    try:
        base = np.frombuffer(mm, dtype=np.uint8).ctypes.data
    except (TypeError, ValueError, BufferError):
        return
    start = arr.ctypes.data + lo * arr.strides[0] - base
    end = arr.ctypes.data + hi * arr.strides[0] - base
    start -= start % mmap.PAGESIZE
    end = min(end + (-end) % mmap.PAGESIZE, len(mm))
    if 0 <= start < end:
        try:
            mm.madvise(mmap.MADV_DONTNEED, start, end - start)
        except (OSError, ValueError):
            pass


class SparseUnion:
    """Sorted, disjoint intervals and the busy time before every :data:`STRIDE`-th one."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray, block_cum: np.ndarray) -> None:
        self.starts, self.ends, self.block_cum = starts, ends, block_cum

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def total(self) -> int:
        """Busy ns of every interval."""
        return int(self.block_cum[-1])

    def busy_before_index(self, k: np.ndarray) -> np.ndarray:
        """Busy ns of intervals ``0 .. k-1`` for each ``k`` (0 <= k <= len)."""
        n = len(self.starts)
        block = k // STRIDE
        base = block * STRIDE
        idx = base[:, None] + np.arange(STRIDE)[None, :]
        inside = idx < k[:, None]
        idx = np.minimum(idx, max(n - 1, 0))
        dur = np.where(inside, self.ends[idx] - self.starts[idx], 0)
        out: np.ndarray = self.block_cum[block] + dur.sum(axis=1)
        return out

    def covered_before(self, x: np.ndarray) -> np.ndarray:
        """Busy ns before each time in ``x`` (sorted float64), as the dense union gives it."""
        if not len(self.starts):
            return np.zeros(len(x))
        xi = np.floor(x).astype(np.int64)
        k = np.searchsorted(self.starts, xi, side="right") - 1
        kc = np.clip(k, 0, len(self.starts) - 1)
        s_k = self.starts[kc]
        part = np.clip(x - s_k, 0, self.ends[kc] - s_k)
        return np.where(k >= 0, self.busy_before_index(kc) + part, 0.0)


def scan(starts: np.ndarray, ends: np.ndarray) -> SparseUnion | None:
    """A SparseUnion of the lane when its intervals are sorted and disjoint; None otherwise.

    Reads the columns a chunk at a time and hands each chunk's pages back when they are file
    mappings, so the lane's columns are never all resident at once.
    """
    n = len(starts)
    n_blocks = -(-n // STRIDE)
    sums = np.zeros(n_blocks, dtype=np.int64)
    prev_end: int | None = None
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        s = np.asarray(starts[lo:hi])
        e = np.asarray(ends[lo:hi])
        ok = prev_end is None or int(s[0]) > prev_end
        ok = ok and bool(np.all(s[1:] > e[:-1])) and bool(np.all(e >= s))
        if not ok:  # overlapping, touching or unsorted: the dense union
            release(starts, 0, hi)
            release(ends, 0, hi)
            return None
        sums[lo // STRIDE:-(-hi // STRIDE)] = np.add.reduceat(e - s, np.arange(0, hi - lo, STRIDE))
        prev_end = int(e[-1])
        release(starts, lo, hi)
        release(ends, lo, hi)
    cum = np.zeros(n_blocks + 1, dtype=np.int64)
    np.cumsum(sums, out=cum[1:])
    return SparseUnion(starts, ends, cum)
