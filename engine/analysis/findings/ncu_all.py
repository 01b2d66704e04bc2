"""Every Nsight Compute finding of a report: our rules on each kernel group and ncu's own rules.

One finding per kernel name and rule, its gain summed over the launches; the severity of each follows
from the gain's share of all profiled kernel time. (The rules themselves are in
:mod:`engine.analysis.findings.ncu` and :mod:`engine.analysis.findings.ncu_rules`.)
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from engine.analysis.findings.model import severity_for
from engine.analysis.findings.ncu import KERNEL_RULES, UNCAPPED, KernelGroup, kernel_groups
from engine.analysis.findings.ncu_rules import rule_ncu_own

if TYPE_CHECKING:
    from engine.analysis.findings.model import Finding
    from engine.reports.ncu import NcuReport


def ncu_findings(report: NcuReport, *, include_ncu_rules: bool = True) -> list[Finding]:
    """Run every ncu rule on each kernel of the report (see :func:`ncu_findings_and_groups`)."""
    return ncu_findings_and_groups(report, include_ncu_rules=include_ncu_rules)[0]


def ncu_findings_and_groups(report: NcuReport, *, include_ncu_rules: bool = True
                            ) -> tuple[list[Finding], list[KernelGroup]]:
    """Every finding of the report and the kernel groups (one per kernel name) they are about.

    One finding per kernel name and rule, its gain summed over the launches; its severity follows
    from the gain's share of all profiled kernel time (:func:`severity_from_share`), the one rule for
    every ncu finding, so a larger gain never has a lower severity.
    """
    groups = kernel_groups(report)
    out: list[Finding] = []
    for kg in groups:
        for rule in KERNEL_RULES:
            out += rule(kg)
    if include_ncu_rules:
        # ncu.uncoalesced already uses ncu's UncoalescedGlobalAccess estimate: not listed twice
        skip = frozenset((f.subject, "UncoalescedGlobalAccess") for f in out if f.id == "ncu.uncoalesced"
                         and any(e.label == UNCAPPED for e in f.evidence))
        out += rule_ncu_own(report, groups, skip)
    total = sum(kg.duration_ns for kg in groups)
    return [replace(f, severity=severity_from_share(f, total)) for f in out], groups


def severity_from_share(f: Finding, total_ns: float) -> str:
    """An ncu finding's severity: its gain's share of all profiled kernel time (info without a gain)."""
    g = f.gain
    if g is None or g.seconds is None or not total_ns:
        return "info"
    return severity_for(100.0 * g.seconds * 1e9 / total_ns)
