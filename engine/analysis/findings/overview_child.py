"""The overview's child process: ``python -m engine.analysis.findings.overview_child``.

Run by :func:`engine.analysis.findings.overview_store.compute_in_child` through the engine's child
runner (:mod:`engine.system.child`: the request on stdin, progress lines, the result's bytes): it opens
the report, computes its summary and findings, handing back the mapped pages it has read as it goes,
and returns them pickled (:func:`engine.analysis.findings.overview_store.dumps`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def handle(request: dict[str, Any], progress: Callable[[str], None]) -> bytes:
    """The child's work: open the report, compute its overview, return it pickled."""
    from engine.analysis.findings import overview_store
    from engine.analysis.findings.overview import overview
    from engine.reports import open_report

    _lower_priority(int(request.get("nice") or 0))
    progress("reading the report")
    trace = open_report(Path(request["report"]))
    try:
        progress("computing the summary and the findings")
        # the columns it maps would count in this process's RSS once read: handed back as it goes
        with overview_store.PageReleaser(overview_store.RELEASE_PERIOD_S, overview_store.RELEASE_BUDGET,
                                          overview_store.HEAP_BUDGET):
            result = overview(trace, range_name=request.get("range"))
    finally:
        trace.close()
    return overview_store.dumps(result)


def _lower_priority(nice: int) -> None:
    """Yield the CPU to the window that waits for this (a 2-core machine: its frames compete with us)."""
    if nice > 0:
        import os

        try:
            os.nice(nice)
        except (OSError, AttributeError):  # not allowed, or not on this OS: full priority
            pass


if __name__ == "__main__":
    from engine.system.child import serve

    sys.exit(serve(handle, out_of_memory="The summary ran out of memory."))
