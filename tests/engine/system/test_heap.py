"""heap.kept(): a freed big array's pages stay for the next one; on leaving, they go back (glibc only)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine.system import heap
from tests.conftest import REPO

SCRIPT = """
import json, os, numpy as np
from engine.system import heap
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") >> 20
def freed():
    a = np.ones(64 << 17)  # 64 MB, touched
    before = rss()
    del a
    return before - rss()
out = {"plain": freed()}
with heap.kept():
    out["kept"] = freed()
    a = np.ones(64 << 17); addr = a.ctypes.data; del a
    b = np.ones(64 << 17); out["reused"] = b.ctypes.data == addr; del b
    held = rss()
    heap.trim()
    out["trimmed"] = held - rss()
out["after"] = freed()
print(json.dumps(out))
"""


@pytest.mark.skipif(heap.libc() is None, reason="not glibc")
def test_kept_heap_reuses_freed_pages_and_trim_hands_them_back() -> None:
    got = json.loads(subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True,
                                    check=True).stdout)
    assert got["plain"] >= 60  # glibc's default: a 64 MB array is its own mapping, unmapped when freed
    assert got["kept"] <= 4  # kept: the pages stay in the heap...
    assert got["reused"]  # ...and the next array of that size takes them
    assert got["trimmed"] >= 60  # trim(): handed back
    assert got["after"] >= 60  # leaving kept(): glibc's defaults again
