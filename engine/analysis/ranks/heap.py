"""The C heap a report is read with: Dask's worker setting (``MALLOC_TRIM_THRESHOLD_``) lifted for the read.

Dask starts its workers with ``MALLOC_TRIM_THRESHOLD_=65536`` so that freed memory goes back to the OS
at once. glibc then also stops raising its mmap threshold: every array over 128 kB becomes a fresh
mapping, zero-filled page by page and unmapped when freed. Reading a 400k-kernel rank makes thousands
of such arrays: 3.0-3.6 CPU s a rank instead of 1.4, half of it system time, and the children that
read the report's pages inherit the setting. For the read, arrays up to 32 MB come from the heap and
the heap is kept; afterwards the worker's setting is back and the heap trimmed (``malloc_trim``). The
children started meanwhile get an environment without the variable.

    with heap_for_reading():
        inputs = read_the_report()
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from engine.system.heap import DEFAULT_MMAP_THRESHOLD, M_MMAP_THRESHOLD, M_TRIM_THRESHOLD
from engine.system.heap import libc as _libc

#: the variable Dask's nanny sets for its workers (``distributed.nanny.pre-spawn-environ``)
VARIABLE = "MALLOC_TRIM_THRESHOLD_"
#: during a read: arrays up to this size from the heap (glibc's largest), a free top kept up to the other
READ_MMAP_THRESHOLD = 32 << 20
READ_TRIM_THRESHOLD = 256 << 20


@contextlib.contextmanager
def heap_for_reading() -> Iterator[None]:
    """Read with glibc's own heap settings where the process was started with ``MALLOC_TRIM_THRESHOLD_``.

    Elsewhere (the CLI's reader processes, the window) nothing changes.
    """
    trim = os.environ.get(VARIABLE)
    if trim is None:
        yield
        return
    lib = _libc()
    if lib is not None:
        lib.mallopt(M_MMAP_THRESHOLD, READ_MMAP_THRESHOLD)
        lib.mallopt(M_TRIM_THRESHOLD, READ_TRIM_THRESHOLD)
    os.environ.pop(VARIABLE, None)  # the page readers' children: glibc's defaults
    try:
        yield
    finally:
        os.environ[VARIABLE] = trim
        if lib is not None:
            lib.mallopt(M_MMAP_THRESHOLD, DEFAULT_MMAP_THRESHOLD)
            with contextlib.suppress(ValueError):
                lib.mallopt(M_TRIM_THRESHOLD, int(trim))
            lib.malloc_trim(0)
