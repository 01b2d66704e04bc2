"""A report's overview (summary and findings) for the command line, kept on disk between commands.

The command line asks the same :class:`engine.analysis.opened.OpenedReport` as the window: the first
``summary`` or ``findings`` of a report computes the overview and stores it under the report's
identity (the file and the engine's code, the same entries the window reads); every later one loads
it without opening the report, so a second question about a big trace (a 1 GB Kineto JSON) costs a
fraction of a second instead of a re-parse. A pinned-ceiling reference changes the findings, so
those runs are neither cached nor served from the cache.

A Kineto trace's first question, whichever it is (``summary``, ``findings``, ``ops``, ``modules``,
``memory``), keeps everything the others ask for: the overview and the PyTorch views' tables
(:func:`engine.analysis.pytorch.kept_results.views`), built from the PyTorch events it has in memory
once. Each later question then only loads a kept result (a 4 GB trace: the overview alone takes ~9 s
to compute from its cached columns, each table one to two seconds more).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.analysis.findings.model import Finding
    from engine.analysis.opened import OpenedReport
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
            got = report.overview()
            if not report.summary_from_cache:  # the first question: the views' tables too
                _keep_views(report)
            return got
        from engine.reports import open_report

        return report.overview(reference=open_report(Path(reference).expanduser()))
    finally:
        report.close()


def prepare(path: str) -> None:
    """Before a PyTorch table is asked of a Kineto trace: keep its overview and every view's table.

    Nothing is computed when they are kept already (the trace's first question made the set; a window
    keeps the overview, and the tables once its PyTorch view is shown). A report of another kind, or
    an overview that fails, is left to the command itself.
    """
    from engine.reports.open import sniff_kind
    from engine.system.errors import KernelscopeError

    p = Path(path).expanduser()
    if sniff_kind(p) != "json":
        return
    from engine.analysis.opened import OpenedReport

    report = OpenedReport(p, resident=False)
    try:
        report.overview()
        _keep_views(report)
    except KernelscopeError:
        pass  # the command's own table may still be there to compute; its own error, if any, is said
    finally:
        report.close()


def _keep_views(report: OpenedReport) -> None:
    """Keep the PyTorch views' tables of a Kineto trace (each computed only when it is not kept)."""
    if report.trace.info.kind != "kineto":
        return
    from engine.analysis.pytorch.kept_results import views

    views(report.trace)
