"""Read-only shared file mappings this process made, and the hand-back of their resident pages.

The pages of a read-only shared file mapping (a memory-mapped cache column, a big derived array
moved to a file) count in this process's RSS once touched, though the OS keeps them in its page
cache anyway: ``MADV_DONTNEED`` on the mapping drops them from this process without losing a
value (a later read maps them again from the cache).

The advice is given only through the ``mmap`` object of a mapping that is registered here and
still open, with the GIL held (``mmap.madvise``): the object keeps its address range mapped, so
the advice can never land on memory the range was reused for. Advising the ranges listed in
``/proc/self/maps`` instead is unsafe: a range unmapped between the listing and the advice can
already hold a fresh private allocation (numpy's next big array), which ``MADV_DONTNEED`` then
zero-fills - silently wrong values, or a malloc chunk header zeroed and ``free(): invalid pointer``.

    shared_maps.register(mm)            # an mmap.mmap opened with ACCESS_READ
    shared_maps.register_array(arr)     # the read-only mapping under an np.memmap / np.load(mmap_mode="r")
    shared_maps.release()               # bytes advised
"""

from __future__ import annotations

import mmap
import threading
import weakref
from typing import Any

_LOCK = threading.Lock()
#: registered read-only mappings; an entry goes when its mmap object is freed
_LIVE: weakref.WeakSet[mmap.mmap] = weakref.WeakSet()


def register(mm: mmap.mmap) -> None:
    """Let :func:`release` hand back ``mm``'s resident pages (``mm`` must be read-only and shared)."""
    with _LOCK:
        _LIVE.add(mm)


def register_array(arr: Any) -> None:
    """:func:`register` the mapping under ``arr`` when it is a read-only ``np.memmap`` (else nothing)."""
    import numpy as np

    b: Any = arr
    for _depth in range(8):
        if isinstance(b, np.memmap):
            mm = getattr(b, "_mmap", None)
            if isinstance(mm, mmap.mmap) and getattr(b, "mode", None) == "r":
                register(mm)
                return
        if not isinstance(b, np.ndarray):
            return
        b = b.base


def release() -> int:
    """``MADV_DONTNEED`` on every registered mapping still open; bytes advised (0 off Linux)."""
    advice = getattr(mmap, "MADV_DONTNEED", None)
    if advice is None:
        return 0
    with _LOCK:
        live = list(_LIVE)
    total = 0
    for mm in live:
        try:
            n = len(mm)
            if n:
                mm.madvise(advice)  # raises ValueError once closed: nothing is advised then
            total += n
        except (ValueError, OSError):
            continue
    return total
