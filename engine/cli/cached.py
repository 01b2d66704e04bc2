"""A report's overview (summary and findings) for the command line, kept on disk between commands.

The first ``summary`` or ``findings`` of a report computes it and stores it under the report's
identity (the file and the engine's code: :mod:`engine.analysis.findings.overview_store`, the same
entries the window reads); every later one loads it without opening the report, so a second
question about a big trace (a 1 GB Kineto JSON) costs a fraction of a second instead of a re-parse.
A pinned-ceiling reference changes the findings, so those runs are neither cached nor served
from the cache.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.analysis.findings.model import Finding
    from engine.analysis.summary_model import Summary


def _variant(range_name: str | None) -> str | None:
    """The cache key's range part, with what else changes the result.

    That is the step detection switch and the stored calibrations (a new ``kernelscope calibrate``
    changes the copy findings' ceilings).
    """
    import os

    from engine.system.calibration import data_dir

    extra = []
    if os.environ.get("KERNELSCOPE_STEPS"):
        extra.append(f"steps={os.environ['KERNELSCOPE_STEPS']}")
    try:
        cals = sorted((p.name, p.stat().st_mtime_ns) for p in (data_dir() / "calibration").glob("*.json"))
    except OSError:
        cals = []
    if cals:
        extra.append(repr(cals))
    if not extra:
        return range_name  # the window's key too: the two share entries
    return "|".join([range_name or "", *extra])


def overview_of(path: str, range_name: str | None = None, reference: str | None = None
                ) -> tuple[Summary, list[Finding]]:
    """The summary and findings of the report at ``path`` (from the cache when it is there)."""
    from engine.analysis.findings import overview_store as store
    from engine.reports.open import sniff_kind

    p = Path(path).expanduser()
    sniff_kind(p)  # a clear sentence for a missing, empty or unreadable file before anything else
    key = _variant(range_name)
    if reference is None:
        got = store.load_cached(p, key)
        if got is not None:
            s, found = got
            return replace(s, report=replace(s.report, path=str(p))), found
    from engine.analysis.calls import prefetch_api_calls
    from engine.analysis.findings.overview import overview
    from engine.reports import open_report

    trace = open_report(p, cancel=threading.Event())
    prefetch_api_calls(trace)  # the calls' columns read while the kernels' are (two cores)
    ref = open_report(Path(reference).expanduser()) if reference else None
    s, found = overview(trace, range_name=range_name, reference=ref)
    if reference is None:
        store.store(p, key, (s, found))
    return s, found
