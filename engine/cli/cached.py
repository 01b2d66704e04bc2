"""A report's overview (summary and findings) for the command line, kept on disk between commands.

The command line asks the same :class:`engine.analysis.opened.OpenedReport` as the window: the first
``summary`` or ``findings`` of a report computes the overview and stores it under the report's
identity (the file and the engine's code, the same entries the window reads); every later one loads
it without opening the report, so a second question about a big trace (a 1 GB Kineto JSON) costs a
fraction of a second instead of a re-parse. A pinned-ceiling reference changes the findings, so
those runs are neither cached nor served from the cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.analysis.findings.model import Finding
    from engine.analysis.summary_model import Summary


def overview_of(path: str, range_name: str | None = None, reference: str | None = None
                ) -> tuple[Summary, list[Finding]]:
    """The summary and findings of the report at ``path`` (from the cache when it is there)."""
    from engine.analysis.opened import OpenedReport
    from engine.reports.open import sniff_kind

    p = Path(path).expanduser()
    sniff_kind(p)  # a clear sentence for a missing, empty or unreadable file before anything else
    report = OpenedReport(p, range_name=range_name, resident=False)  # the trace: opened if needed
    try:
        if reference is None:
            return report.overview()
        from engine.reports import open_report

        return report.overview(reference=open_report(Path(reference).expanduser()))
    finally:
        report.close()
