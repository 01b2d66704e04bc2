"""Work around a PySide6 reference-count bug on Python < 3.12.

PySide6/shiboken6 6.12.0 (abi3 wheel) returns ``None`` from void C++ methods without taking a
reference (``QObject.setObjectName``, ``QLabel.setText``, ``QTimer.start``,
``QCoreApplication.processEvents`` ...). From Python 3.12 ``None`` is immortal and nothing
happens; on 3.10/3.11 every such call drops a reference that was never taken, and after a few
thousand calls the interpreter aborts with "Fatal Python error: none_dealloc". A GUI makes those
calls all the time, so an affected install would crash after minutes of use.

When (and only when) the leak is detected, we give ``None`` a very large reference count, which is
what Python 3.12 does for it anyway. The real fix is a PySide6 without the bug (or Python 3.12+).
"""

from __future__ import annotations

import sys

_applied = False


def _leaks_none() -> bool:
    from PySide6.QtCore import QObject

    probe = QObject()
    before = sys.getrefcount(None)
    for _ in range(8):
        probe.setObjectName("probe")
    return sys.getrefcount(None) < before


def protect_none_refcount() -> bool:
    """Apply the workaround if this interpreter + PySide6 need it; True when applied."""
    global _applied
    if _applied:
        return True
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    try:
        if not _leaks_none():
            return False
    except Exception:  # noqa: BLE001 - no PySide6: nothing to protect
        return False
    import ctypes

    # ob_refcnt is the first field of every CPython object (non-debug builds).
    ctypes.c_ssize_t.from_address(id(None)).value += 1 << 40
    _applied = True
    return True
