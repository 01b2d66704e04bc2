"""engine.system.shared_maps: handing back the pages of read-only mappings never touches other memory.

The summary's page releaser used to advise every ``r--s`` range listed in ``/proc/self/maps``
from a thread. A range unmapped between the listing and the advice, then reused for a fresh
array, was zero-filled (``MADV_DONTNEED`` on private memory): wrong values, or a zeroed malloc
chunk header and ``free(): invalid pointer`` (seen once on big10m). The first test provokes that
interleaving with real threads (the old code zeroed ~7% of the arrays within seconds).
"""

from __future__ import annotations

import mmap
import threading
import time

import numpy as np

from engine.system import shared_maps
from tests.conftest import resident_kb

#: above glibc's largest mmap threshold (32 MiB): each array is its own anonymous mapping, at the
#: address the file mapping closed just before had (what the kernel picks first)
N_BYTES = 64 << 20


def test_releasing_while_mappings_close_and_arrays_reuse_their_addresses_zeroes_nothing(tmp_path):
    f = tmp_path / "col.bin"
    np.arange(N_BYTES // 8, dtype=np.int64).tofile(f)
    stop = threading.Event()
    released = []

    def release_in_a_loop() -> None:
        while not stop.is_set():
            released.append(shared_maps.release())

    thread = threading.Thread(target=release_in_a_loop, daemon=True)
    thread.start()
    zeroed = rounds = 0
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < 4.0:
            rounds += 1
            with f.open("rb") as fh:
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            shared_maps.register(mm)
            col = np.frombuffer(mm, dtype=np.int64)
            assert int(col[::4096].sum()) == int(np.arange(0, N_BYTES // 8, 4096).sum())
            del col
            mm.close()
            fresh = np.full(N_BYTES // 8, 7, dtype=np.int64)
            for _ in range(20):
                if int(fresh[::512].min()) != 7:
                    zeroed += 1
                    break
            del fresh
    finally:
        stop.set()
        thread.join()
    assert rounds > 20 and any(released)
    assert zeroed == 0


def test_registered_pages_are_dropped_values_kept_closed_ones_skipped(tmp_path):
    f = tmp_path / "col.npy"
    data = np.arange(4_000_000, dtype=np.int64)
    np.save(f, data)
    mapped = np.load(f, mmap_mode="r")
    shared_maps.register_array(mapped[10:])  # through a view: the memmap's own mapping
    assert int(mapped.sum()) == int(data.sum())
    assert resident_kb(f) >= data.nbytes // 1024
    assert shared_maps.release() >= data.nbytes
    assert resident_kb(f) < 64
    assert int(mapped.sum()) == int(data.sum())  # read back from the OS cache
    with f.open("rb") as fh:
        closed = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    shared_maps.register(closed)
    closed.close()
    before = shared_maps.release()
    assert before >= data.nbytes  # the closed one is skipped without an error
    copy_on_write = np.load(f, mmap_mode="c")
    shared_maps.register_array(copy_on_write)  # not read-only: never registered
    copy_on_write[:3] = -1
    shared_maps.release()
    assert copy_on_write[:4].tolist() == [-1, -1, -1, 3]
