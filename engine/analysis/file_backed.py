"""Big derived arrays moved from the heap into read-only file mappings: the OS's memory, not this process's.

A 10M-kernel report's per-trace tables (``tables.trace_cache``: GPU operations, their sequences,
calls, steps) hold gigabytes of derived numpy arrays for as long as the trace lives. Each array of
at least :data:`MIN_BYTES` is written once to an unlinked file under the cache root and replaced by
a read-only shared mapping of it (same dtype, shape and values): its pages then live in the OS's
page cache, a read maps them again without I/O, and the pages this process has touched can be
handed back (``engine.system.shared_maps.release``), so the resident size stays near the arrays
being computed on. Smaller arrays, object arrays and arrays already mapped from a file are left as
they are: small reports never touch the disk.

    file_backed.move_to_files(value)    # the value with its big arrays mapped (objects changed in place)
    tables.move_trace_tables(trace)  # the same for every table kept for a trace

``KERNELSCOPE_FILE_BACKED_BYTES`` sets the threshold (``0``: every non-empty array, for tests;
``off``: never).
"""

from __future__ import annotations

import logging
import mmap
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.system.shared_maps import register, release

#: arrays of at least this many bytes are moved into a file mapping (2M int64 values)
MIN_BYTES = 16 << 20
#: how deep objects, dicts, lists and tuples are walked to find arrays
_DEPTH = 4
#: objects of these modules are walked (their attributes replaced in place); others are left alone
_WALKED = ("engine.analysis.",)


def min_bytes() -> int | None:
    """The threshold in bytes, or None when moving is off."""
    env = os.environ.get("KERNELSCOPE_FILE_BACKED_BYTES", "").strip().lower()
    if env in ("off", "no", "-1"):
        return None
    if env.isdigit():
        return max(1, int(env))
    return MIN_BYTES


def _directory() -> str | None:
    """Where the files are written (under the cache root), or None when it cannot be made."""
    from engine.system.cache import cache_root

    d = cache_root() / "mapped-arrays"
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return str(d)


def is_mapped(a: np.ndarray) -> bool:
    """True when the array's memory is a file mapping (ours, np.memmap, the columnar cache)."""
    b: Any = a
    while b is not None:
        if isinstance(b, (mmap.mmap, np.memmap)):
            return True
        b = getattr(b, "base", None) if isinstance(b, np.ndarray) else getattr(b, "obj", None)
        if isinstance(b, memoryview):
            b = b.obj
    return False


#: whether this process has said that its arrays stay on the heap (once is enough)
_said: list[bool] = []


def _cannot_write(directory: str, exc: BaseException) -> None:
    """Say once that big arrays stay in memory because ``directory`` cannot take them.

    A full disk otherwise only shows as gigabytes more memory (big10m: 6.1 GB instead of 1.8 GB).
    """
    if _said:
        return
    _said.append(True)
    try:
        free = f", {shutil.disk_usage(directory).free / 1e9:.1f} GB free there"
    except OSError:
        free = ""
    why = getattr(exc, "strerror", None) or str(exc)
    logging.getLogger(__name__).warning(
        "Big arrays stay in memory: they could not be written to %s (%s%s); expect gigabytes more "
        "memory on a big report. Free some space there or set KERNELSCOPE_CACHE to a folder with room.",
        directory, why, free)


def mapped_copy(a: np.ndarray, directory: str) -> np.ndarray | None:
    """``a`` written to an unlinked file and mapped read-only (None when the file cannot be written)."""
    c = np.ascontiguousarray(a)
    try:
        fd, path = tempfile.mkstemp(prefix="a-", suffix=".bin", dir=directory)
    except OSError as exc:
        _cannot_write(directory, exc)
        return None
    try:
        with os.fdopen(fd, "wb") as fh:
            c.tofile(fh)
        with open(path, "rb") as fh:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        _cannot_write(directory, exc)
        return None
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    register(mm)  # its pages can be handed back (the array keeps the mapping open: its base)
    return np.frombuffer(mm, dtype=c.dtype).reshape(c.shape)


def filled(n: int, dtype: Any, fill: Callable[[int, int], np.ndarray], chunk: int = 1 << 21) -> np.ndarray:
    """An array of ``n`` values computed a chunk at a time: ``fill(lo, hi)`` gives rows ``lo:hi``.

    Big enough to move (see the module docstring), the chunks are written straight to an unlinked
    file that is then mapped read-only: the whole array is never on the heap (a 69M-row column of
    durations: 0.55 GB). Otherwise, or where the file cannot be written, a plain array.
    """
    dt = np.dtype(dtype)
    threshold = min_bytes()
    directory = _directory() if threshold is not None and n and n * dt.itemsize >= threshold else None
    if directory is not None:
        got = _filled_file(n, dt, fill, chunk, directory)
        if got is not None:
            return got
    out = np.empty(n, dtype=dt)
    for lo in range(0, n, chunk):
        out[lo:lo + chunk] = fill(lo, min(lo + chunk, n))
    return out


def hand_back() -> None:
    """The resident pages of every registered read-only mapping leave this process (``shared_maps``).

    For a pass over mapped columns bigger than what the overview's periodic hand-back keeps down.
    """
    release()


def gathered(col: np.ndarray, rows: np.ndarray, *, hand_back_each: bool = False) -> np.ndarray:
    """``col[rows]`` (``rows``: integer positions), built by :func:`filled` a chunk at a time.

    ``hand_back_each``: the mapped pages read are handed back after each chunk (``col`` mapped).
    """
    def part(lo: int, hi: int) -> np.ndarray:
        out: np.ndarray = col[rows[lo:hi]]
        if hand_back_each:
            release()
        return out

    return filled(len(rows), col.dtype, part)


def _filled_file(n: int, dt: np.dtype[Any], fill: Callable[[int, int], np.ndarray], chunk: int,
                 directory: str) -> np.ndarray | None:
    """:func:`filled` into a file mapping; None when the file cannot be written."""
    try:
        fd, path = tempfile.mkstemp(prefix="a-", suffix=".bin", dir=directory)
    except OSError as exc:
        _cannot_write(directory, exc)
        return None
    try:
        with os.fdopen(fd, "wb") as fh:
            for lo in range(0, n, chunk):
                part = np.ascontiguousarray(fill(lo, min(lo + chunk, n)), dtype=dt)
                if len(part) != min(chunk, n - lo):
                    raise ValueError(f"{len(part)} values for rows {lo}:{min(lo + chunk, n)}")
                part.tofile(fh)
        with open(path, "rb") as fh:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        _cannot_write(directory, exc)
        return None
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    register(mm)
    return np.frombuffer(mm, dtype=dt)


class _Mover:
    """One walk: each array object moved at most once (arrays shared by two tables stay shared)."""

    def __init__(self, threshold: int, directory: str) -> None:
        self.threshold = threshold
        self.directory = directory
        self.moved: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id -> (original, mapped)
        self.seen: set[int] = set()
        self.bytes = 0

    def value(self, v: Any, depth: int) -> Any:
        if isinstance(v, np.ndarray):
            return self.array(v)
        if depth <= 0 or id(v) in self.seen:
            return v
        if isinstance(v, dict):
            self.seen.add(id(v))
            for k, x in list(v.items()):
                y = self.value(x, depth - 1)
                if y is not x:
                    v[k] = y
        elif isinstance(v, list):
            self.seen.add(id(v))
            for i, x in enumerate(v):
                y = self.value(x, depth - 1)
                if y is not x:
                    v[i] = y
        elif isinstance(v, tuple):
            new = [self.value(x, depth - 1) for x in v]
            if any(a is not b for a, b in zip(new, v, strict=True)):
                return type(v)(*new) if hasattr(type(v), "_fields") else type(v)(new)
        elif type(v).__module__.startswith(_WALKED):
            self.seen.add(id(v))
            self.attributes(v, depth)
        return v

    def attributes(self, obj: Any, depth: int) -> None:
        d = getattr(obj, "__dict__", None)
        if isinstance(d, dict):
            for k, x in list(d.items()):
                y = self.value(x, depth - 1)
                if y is not x:
                    d[k] = y  # (frozen dataclasses too: their fields are in __dict__)
        for cls in type(obj).__mro__:
            for name in getattr(cls, "__slots__", ()):
                x = getattr(obj, name, None)
                if x is None:
                    continue
                y = self.value(x, depth - 1)
                if y is not x:
                    object.__setattr__(obj, name, y)

    def array(self, a: np.ndarray) -> np.ndarray:
        got = self.moved.get(id(a))
        if got is not None and got[0] is a:
            return got[1]
        if a.nbytes < self.threshold or a.dtype.hasobject or is_mapped(a):
            return a
        m = mapped_copy(a, self.directory)
        if m is None:
            return a
        self.moved[id(a)] = (a, m)
        self.bytes += a.nbytes
        return m


def move_to_files(value: Any, depth: int = _DEPTH) -> Any:
    """``value`` with its big arrays in file mappings (see the module docstring).

    Dicts, lists and the attributes of the engine's own objects are changed in place; a tuple or
    an array given directly is returned as a new value. Nothing changes when moving is off, no
    array is big enough or the cache directory cannot be written.
    """
    threshold = min_bytes()
    if threshold is None:
        return value
    directory = _directory()
    if directory is None:
        return value
    return _Mover(threshold, directory).value(value, depth)
