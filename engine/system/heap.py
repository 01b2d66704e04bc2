"""glibc's C heap kept for reuse while a big analysis runs, and handed back on demand.

numpy takes every array over 32 MB (and, by default, over 128 kB until glibc raises its threshold)
from a fresh ``mmap`` and unmaps it when freed: the next array of that size is a new mapping that the
kernel zero-fills page by page. A 35M-operation summary makes hundreds of 0.3-0.5 GB temporaries;
on the 2-core VM that zero-filling was 16 % of its CPU time (``perf``: ``clear_page_erms``). While
:func:`kept` is on, glibc serves every size from its heap and keeps what is freed, so a temporary
reuses the pages of the last one; :func:`trim` hands the free pages back (the caller decides when:
``engine.analysis.findings.overview_store.PageReleaser`` does it past a resident-size budget).
Elsewhere than glibc nothing changes.

    with heap.kept():
        big_numpy_work()
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from collections.abc import Iterator
from typing import Any

#: glibc's mallopt parameters
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_MMAP_MAX = -4
#: glibc's defaults for them
DEFAULT_MMAP_MAX = 65536
DEFAULT_TRIM_THRESHOLD = 128 << 10
DEFAULT_MMAP_THRESHOLD = 128 << 10
#: while kept: never trimmed by glibc itself (trim() does it)
KEPT_TRIM_THRESHOLD = 2**31 - 1


@functools.cache
def libc() -> Any:
    """The C library when it is glibc (mallopt, malloc_trim), else None."""
    try:
        lib = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return lib if hasattr(lib, "mallopt") and hasattr(lib, "malloc_trim") else None


_depth = 0


@contextlib.contextmanager
def kept() -> Iterator[None]:
    """Every allocation from the heap, freed memory kept for the next (nested: the outermost restores)."""
    global _depth
    lib = libc()
    if lib is None:
        yield
        return
    _depth += 1
    if _depth == 1:
        lib.mallopt(M_MMAP_MAX, 0)
        lib.mallopt(M_TRIM_THRESHOLD, KEPT_TRIM_THRESHOLD)
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            lib.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
            lib.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
            lib.malloc_trim(0)


def trim() -> None:
    """Hand the heap's free pages back to the OS (``malloc_trim(0)``; nothing off glibc)."""
    lib = libc()
    if lib is not None:
        lib.malloc_trim(0)
