"""One Summary/Findings source: the summary of an open trace and the findings of the same engine.

``overview(trace)`` computes the summary once, runs the registered rules on the trace plus that
summary, and puts the top findings into the summary (``Summary.findings``), so the Summary view,
the Findings tab, ``kernelscope summary`` and ``kernelscope findings`` show one set of findings.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from engine.analysis.findings.gains import Combined, if_all_applied
from engine.analysis.findings.model import Finding, fmt_time, sort_findings
from engine.analysis.summary_model import Summary, TopFinding

if TYPE_CHECKING:
    from engine.reports.base import Trace

#: how many findings the summary shows
TOP = 5


def gain_text(f: Finding) -> str:
    """A finding's gain in a few words: per step when steady, else over the capture; "n/a" if none."""
    g = f.gain
    if g is None or g.seconds is None:
        return "no gain computed"
    bound = "≤ " if g.kind == "upper bound" else ""
    if g.per_step_ns is not None and not g.one_time:
        share = f" ({g.pct_of_step:.1f} % of the step)" if g.pct_of_step is not None else ""
        return f"{bound}{fmt_time(g.per_step_ns)} per step{share}"
    of = "of the kernel's time" if g.window == "kernel time" else "of the capture"
    share = f" ({g.pct_of_wall:.1f} % {of})" if g.pct_of_wall is not None else ""
    once = ", one-time" if g.one_time else ""
    return f"{bound}{fmt_time(g.seconds * 1e9)}{share}{once}"


def findings_for_trace(trace: Trace, summary: Summary, *, reference: Trace | None = None) -> list[Finding]:
    """Every finding of an open nsys/Kineto trace, computed from ``summary``; largest win first."""
    from engine.analysis.findings.nsys import nsys_findings

    return sort_findings(nsys_findings(trace, reference=reference, summary=summary))


def with_findings(summary: Summary, findings: list[Finding], top: int = TOP) -> Summary:
    """The summary with the engine's top findings in ``Summary.findings``."""
    return replace(summary, findings=tuple(
        TopFinding(f.id, f.title + (f" [{f.subject}]" if f.subject else ""), f.severity, f.summary,
                   gain_text(f)) for f in findings[:top]))


def combined(summary: Summary, findings: list[Finding]) -> Combined:
    """The "if all applied" bound of these findings for this summary's steps (see ``gains``).

    In a report of several processes a finding about one process ("pid N") saves time in that
    process's steps: the bound is taken per process, in its own steps, and the largest is given
    (the job goes at its slowest process's pace), naming the process.
    """
    it = summary.iterations
    base = if_all_applied(findings, step_ns=it.steady_median_ns if it else None,
                          gpu_busy_per_step_ns=it.gpu_busy_per_step_ns if it else None,
                          wall_ns=summary.wall.span_ns, gpu_busy_ns=summary.gpu.busy_ns)
    if it is None or len(it.processes) < 2:
        return base
    best: tuple[float, str, Combined] | None = None
    for p in it.processes:
        mine = [f for f in findings if _pid_of(f, it.pid) == p.pid]
        if not mine or not p.steady_median_ns:
            continue
        busy = it.gpu_busy_per_step_ns if p.pid == it.pid else p.gpu_busy_per_step_ns
        c = if_all_applied(mine, step_ns=p.steady_median_ns, gpu_busy_per_step_ns=busy)
        if c.per_step_ns is not None and (best is None or c.per_step_ns > best[0]):
            best = (c.per_step_ns, p.pid, c)
    if best is None or (base.per_step_ns is not None and best[0] <= base.per_step_ns):
        return base
    per_step, pid, c = best
    return replace(base, per_step_ns=per_step,
                   formula=f"in the steps of pid {pid} (the process that gains most): {c.formula} | "
                           f"{base.formula}")


def _pid_of(f: Finding, default: str) -> str:
    """The process a finding is about ("pid N" in its subject), else the summary's."""
    subject = f.subject or ""
    return subject[4:].split()[0] if subject.startswith("pid ") else default


def overview(trace: Trace, *, range_name: str | None = None, reference: Trace | None = None
             ) -> tuple[Summary, list[Finding]]:
    """The summary (with its top findings) and every finding of an open trace."""
    from engine.analysis.findings.overview_store import (
        HEAP_BUDGET,
        RELEASE_BUDGET,
        RELEASE_PERIOD_S,
        PageReleaser,
    )
    from engine.analysis.summary import summarize
    from engine.analysis.tables import move_trace_tables

    # the pages of the mapped columns and arrays read so far leave this process's resident size as it
    # goes (they stay in the OS's cache): a 10M-kernel report maps gigabytes of them
    with PageReleaser(RELEASE_PERIOD_S, RELEASE_BUDGET, HEAP_BUDGET):
        s = summarize(trace, range_name=range_name)
        move_trace_tables(trace)  # what the summary built lazily leaves the heap before the rules run
        found = findings_for_trace(trace, s, reference=reference)
    return with_findings(s, found), found
