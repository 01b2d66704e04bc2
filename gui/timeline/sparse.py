"""Coverage of a lane of millions of disjoint intervals without a per-event prefix sum (no Qt).

A lane's coverage (the busy fraction of each pixel column) needs the busy time before any instant:
the dense form keeps a running total per interval (8 bytes an event: 170 MB for 21M CUDA API calls).
Where the intervals are sorted and disjoint (a CPU thread's CUDA calls, a stream's kernels), the
busy time before interval ``k`` is the total of the block of :data:`STRIDE` intervals it falls in
plus the durations inside that block, so :class:`SparseUnion` keeps one total per block (1/64 of
the memory) and sums at most 63 durations per pixel edge when drawing.

:func:`scan` checks a lane's columns chunk by chunk. The columns of a big report are memory-mapped
cache files (:mod:`engine.reports.nsys.columns`); after each chunk its pages are handed back
(``MADV_DONTNEED`` on the read-only file mapping: the data stays in the OS cache and on disk), so
opening a 21M-call lane does not leave 340 MB of it resident in the app. Drawing touches only the
pages of the intervals it looks up, and not even those at an overview: each block's first start and
last end (kept in memory) answer a pixel edge between blocks exactly and inside a block narrower
than 1/64 of a pixel column by interpolation. The canvas hands back what a frame read after it
(``Lane.release_pages``), and a big lane's arrays built in memory (a stream's kernels with copies
inserted, name codes) move to file mappings of their own (:func:`spill`), so a timeline of 10M
kernels and 21M calls holds ~170 MB, not ~900 MB, while the summary's child process runs beside it.
"""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Any

import numpy as np

#: intervals per block of the running total
STRIDE = 64
#: lanes with fewer intervals keep the dense running total (exact, simple, small)
MIN_EVENTS = 1_000_000
#: intervals checked per chunk of :func:`scan` (a multiple of STRIDE)
CHUNK = 1 << 22
#: arrays of a big lane from this size on are moved to a file mapping (:func:`spill`)
SPILL_MIN_BYTES = 8 << 20


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
    """Sorted, disjoint intervals and the busy time before every :data:`STRIDE`-th one.

    ``block_first`` / ``block_last`` (the first start and the last end of each block, 1/32 of
    the columns' size, in memory) answer most lookups without touching the mapped columns: a time
    between two blocks has the block totals as its exact answer, and a time inside a block that is
    narrow next to a pixel column may be interpolated (``tol_ns``). Only the other lookups read
    the block's own events, so an overview of 21M calls keeps none of their pages resident.
    """

    def __init__(self, starts: np.ndarray, ends: np.ndarray, block_cum: np.ndarray,
                 block_first: np.ndarray | None = None, block_last: np.ndarray | None = None) -> None:
        self.starts, self.ends, self.block_cum = starts, ends, block_cum
        n = len(starts)
        if block_first is None:
            block_first = np.asarray(starts[::STRIDE], dtype=np.int64)
        if block_last is None:
            block_last = np.asarray(ends[np.minimum(np.arange(STRIDE - 1, n + STRIDE - 1, STRIDE), n - 1)]
                                    if n else ends[:0], dtype=np.int64)
        self.block_first, self.block_last = block_first, block_last

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

    def covered_before(self, x: np.ndarray, tol_ns: float = 0.0) -> np.ndarray:
        """Busy ns before each time in ``x`` (sorted float64), as the dense union gives it.

        With ``tol_ns`` > 0, a time inside a block no wider than ``tol_ns`` gets the block's busy
        time interpolated over its width (off by less than ``tol_ns``) instead of its events read.
        """
        n = len(self.starts)
        if not n:
            return np.zeros(len(x))
        xi = np.floor(x).astype(np.int64)
        b = np.searchsorted(self.block_first, xi, side="right") - 1  # the block that starts at or before
        bc = np.clip(b, 0, len(self.block_first) - 1)
        last = self.block_last[bc]
        out = np.where(b >= 0, self.block_cum[bc + 1], 0).astype(np.float64)  # between blocks: exact
        inside = (b >= 0) & (x < last)
        if tol_ns > 0:
            first = self.block_first[bc]
            span = last - first
            near = inside & (span <= tol_ns)
            if near.any():
                i = np.flatnonzero(near)
                done = self.block_cum[bc[i]]
                out[i] = done + (self.block_cum[bc[i] + 1] - done) * ((x[i] - first[i]) / span[i])
            inside &= ~near
        if inside.any():  # the block's own events: the one before x and its part up to x
            i = np.flatnonzero(inside)
            base = bc[i] * STRIDE
            idx = base[:, None] + np.arange(STRIDE)[None, :]
            valid = idx < n
            idx = np.minimum(idx, n - 1)
            k = base + ((self.starts[idx] <= xi[i, None]) & valid).sum(axis=1) - 1
            s_k = self.starts[k]
            part = np.clip(x[i] - s_k, 0, self.ends[k] - s_k)
            out[i] = self.busy_before_index(k) + part
        return out

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The columns this union reads (for handing their pages back, see :func:`release`)."""
        return self.starts, self.ends


def scan(starts: np.ndarray, ends: np.ndarray) -> SparseUnion | None:
    """A SparseUnion of the lane when its intervals are sorted and disjoint; None otherwise.

    Reads the columns a chunk at a time and hands each chunk's pages back when they are file
    mappings, so the lane's columns are never all resident at once.
    """
    n = len(starts)
    n_blocks = -(-n // STRIDE)
    sums = np.zeros(n_blocks, dtype=np.int64)
    first = np.zeros(n_blocks, dtype=np.int64)
    last = np.zeros(n_blocks, dtype=np.int64)
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
        blocks = slice(lo // STRIDE, -(-hi // STRIDE))
        sums[blocks] = np.add.reduceat(e - s, np.arange(0, hi - lo, STRIDE))
        first[blocks] = s[::STRIDE]
        last[blocks] = e[np.minimum(np.arange(STRIDE - 1, hi - lo + STRIDE - 1, STRIDE), hi - lo - 1)]
        prev_end = int(e[-1])
        release(starts, lo, hi)
        release(ends, lo, hi)
    cum = np.zeros(n_blocks + 1, dtype=np.int64)
    np.cumsum(sums, out=cum[1:])
    return SparseUnion(starts, ends, cum, first, last)


def spill(arr: np.ndarray, directory: Path | None = None, min_bytes: int | None = None) -> np.ndarray:
    """``arr`` as a read-only mapping of a file of its own (written once, already unlinked).

    A big lane's arrays built in memory (a GPU stream's kernels with its copies inserted, a CPU
    thread's name codes) then behave as the cached columns do: only the pages drawn are resident,
    and :func:`release` hands them back. Small arrays, views of broadcasts, arrays that are file
    mappings already, and any failure to write keep ``arr`` as it is.
    """
    if arr.nbytes < (SPILL_MIN_BYTES if min_bytes is None else min_bytes) or file_mapping(arr) is not None \
            or 0 in arr.strides:
        return arr
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(prefix="ks-lane-", suffix=".npy", dir=directory) as fh:
            np.save(fh, np.ascontiguousarray(arr), allow_pickle=False)
            fh.flush()
            out: np.ndarray = np.load(fh.name, mmap_mode="r")  # the mapping outlives the name
    except (OSError, ValueError):
        return arr
    return out


def release_outside(arr: np.ndarray | None, lo: int, hi: int) -> None:
    """Hand back the resident pages of a mapped ``arr`` outside ``arr[lo:hi]``."""
    if arr is None or file_mapping(arr) is None:
        return
    release(arr, 0, lo)
    release(arr, hi, len(arr))
