"""The ``.ncu-rep`` kept open in NVIDIA's ``ncu_report`` (one at a time) and its decoded kernels.

The reader (:mod:`engine.reports.ncu.decoders`) opens a report here; a summary read decodes the rest of
its metrics (:mod:`engine.reports.ncu.lazy_report`) and the SASS of its hottest instructions from the same
open report later, without decoding its kernels again.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from engine.system.errors import ReportError

_OPEN_REPORTS: dict[tuple[Path, int, int], Any] = {}
_OPEN_ACTIONS: dict[tuple[int, int, int], Any] = {}  # (id(ctx), range, action) -> decoded action
OPEN_LOCK = threading.RLock()


def import_ncu_report() -> Any:
    """NVIDIA's ``ncu_report`` module (heavy, native: imported only for ``.ncu-rep`` files).

    Raises:
        ReportError: It is not installed; the message says how to install it.
    """
    try:
        import ncu_report  # noqa: PLC0415 - heavy native module, loaded only for .ncu-rep files
    except ImportError as exc:
        raise ReportError(
            "Reading .ncu-rep files needs NVIDIA's Python package `ncu-report`; "
            "install it with `pip install ncu-report`."
        ) from exc
    return ncu_report


def forget_open_reports() -> None:
    """Close the report kept open by :func:`open_report` (as a new process would start)."""
    with OPEN_LOCK:
        _OPEN_REPORTS.clear()
        _OPEN_ACTIONS.clear()


def open_report(path: Path, ctx: Any = None) -> Any:
    """The ``ncu_report`` context of a report file, kept open (one file at a time).

    The context keeps the kernels it has decoded (decoding one costs 30-150 ms; asking again, a
    few ms), so the summary read, the raw page and the SASS of the hottest instructions share one
    decode. Keyed by the file's size and modification time: a rewritten file is opened again.
    ``ctx`` registers a context the caller just opened.
    """
    st = path.stat()
    key = (path, st.st_size, st.st_mtime_ns)
    with OPEN_LOCK:
        if ctx is None:
            ctx = _OPEN_REPORTS.get(key)
            if ctx is not None:
                return ctx
            ctx = import_ncu_report().load_report(str(path))
        _OPEN_REPORTS.clear()  # keep one report open at a time
        _OPEN_ACTIONS.clear()
        _OPEN_REPORTS[key] = ctx
        return ctx


def open_action(ctx: Any, ref: tuple[int, int]) -> Any:
    """The decoded action ``ref`` = (range, action) of the open report ``ctx``.

    ``ncu_report`` decodes an action again on every ``action_by_idx`` (10-15 ms and ~10 MB each
    for a ``--set full`` kernel), so the open report's actions are kept with it.
    """
    with OPEN_LOCK:
        key = (id(ctx), *ref)
        a = _OPEN_ACTIONS.get(key)
        if a is None:
            a = _OPEN_ACTIONS[key] = ctx.range_by_idx(ref[0]).action_by_idx(ref[1])
        return a
