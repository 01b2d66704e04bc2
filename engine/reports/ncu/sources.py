"""The SASS text and file:line of each kernel's hottest instructions, filled in after a report is read.

A report's source counters (PCs and samples) are decoded with its kernels; the disassembly needs
NVIDIA's ``ncu_report`` (:mod:`engine.reports.ncu.nvidia_reader`), in child processes
(:mod:`engine.reports.ncu.children`) for many kernels, else in this process.
"""

from __future__ import annotations

from engine.reports.ncu import children
from engine.reports.ncu.decode import hot_sources
from engine.reports.ncu.lazy_report import LazyNcuReport, sample_pairs
from engine.reports.ncu.model import NcuReport
from engine.reports.ncu.nvidia_reader import OPEN_LOCK, open_action, open_report
from engine.system.errors import KernelscopeError


def resolve_sources(report: NcuReport, kernel_id: int) -> None:
    """Fill in the SASS text and file:line of one kernel's hottest instructions (``report.sources``).

    Reopens the ``.ncu-rep`` (kept open for later kernels); does nothing for CSV exports, for
    kernels already resolved, or when the file is gone (the rows keep their PCs and counts).
    """
    if not isinstance(report, LazyNcuReport) or kernel_id not in report.sources_to_resolve():
        return
    pcs = [int(r["pc"]) for r in report.source_records(kernel_id) if r["sass"] is None]
    try:
        with OPEN_LOCK:
            i, j = report.action_refs[kernel_id]
            action = open_action(open_report(report.path), (i, j))
    except Exception:  # noqa: BLE001 - the SASS text is decoration; the counts are already there
        return
    got = hot_sources(action, kernel_id, pcs, sample_pairs(report, kernel_id))
    if got is not None:
        report.fill_sources(kernel_id, got[0], got[1])


def resolve_all_sources(report: NcuReport) -> bool:
    """:func:`resolve_sources` for every kernel, decoded in child processes (what the sections page shows).

    Kernels already resolved are skipped; when the children cannot run, each kernel is resolved
    in-process. Returns whether any kernel was resolved now.
    """
    if not isinstance(report, LazyNcuReport):
        return False
    todo = report.sources_to_resolve()
    if not todo:
        return False
    found = None
    if len(todo) >= children.SPLIT_MIN and children.use_children():
        wanted = {k: ([int(r["pc"]) for r in report.source_records(k) if r["sass"] is None],
                      sample_pairs(report, k)) for k in todo}
        try:
            found = children.resolve_in_children(report.path, report.action_refs, wanted)
        except KernelscopeError:  # (each kernel is resolved in this process then)
            found = None
    if found is None:
        for k in todo:
            resolve_sources(report, k)
        return True
    for k, got in found.items():
        if got is not None:
            report.fill_sources(k, got[0], got[1])
    return True
