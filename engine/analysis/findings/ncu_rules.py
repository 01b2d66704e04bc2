"""Nsight Compute's own rule results as findings: one per kernel name and rule, over every launch.

ncu attaches its rules (with an estimated speedup for the OPT ones) to each launch. A kernel
launched three times gets the same rule three times; here it is one finding whose gain is the sum
over the launches (each launch's estimate × that launch's duration, capped as :func:`rule_cap`
says), with the uncapped sum kept as evidence so the rank can break ties between capped gains.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.analysis.findings.model import Evidence, Finding, fmt_time
from engine.analysis.findings.ncu import UNCAPPED

if TYPE_CHECKING:
    from engine.analysis.findings.ncu import KernelGroup
    from engine.reports.ncu import NcuReport

#: ncu rules whose fix changes how many bytes move (not bound by the kernel's distance to its roof).
TRAFFIC_RULES = frozenset({"UncoalescedGlobalAccess", "UncoalescedSharedAccess", "MemoryCacheAccessPattern",
                           "SharedMemoryConflicts"})

#: the evidence label of ncu's uncapped estimate (ns over every launch); the fix list ranks ties by it


def rule_cap(kg: KernelGroup, rule: str) -> tuple[float | None, str]:
    """The most an ncu rule's estimate may claim (percent of the kernel's time), and why.

    A fix that keeps the work (occupancy, issue slots, stalls, launch shape) cannot make the kernel
    faster than its nearest roof allows: the cap is the distance to it. A fix that removes traffic
    (uncoalesced or poorly used sectors) can go further, up to the share of the kernel's memory
    sectors that are excess when that is measured.
    """
    from engine.analysis.findings import ncu as n

    if rule in TRAFFIC_RULES:
        b = kg.m(n.LD_BYTES_PER_SECTOR)
        if b is not None and 0 < b < n.SECTOR_BYTES:
            return 100 * (1 - b / n.SECTOR_BYTES), "unused bytes of the load sectors"
        s, r = kg.m(n.LD_SECTORS), kg.m(n.LD_REQ)
        if s and r and s / r > n.SECTORS_PER_REQUEST_IDEAL:
            return 100 * (1 - n.SECTORS_PER_REQUEST_IDEAL * r / s), "excess load sectors"
        return None, ""
    dist = n.roofline_distance_pct(kg)
    return (dist, "distance to the roofline (100 % − the busier of SM and memory throughput)"
            ) if dist is not None else (None, "")


def _opt_rules(report: NcuReport) -> dict[int, list[dict[str, Any]]]:
    """The report's OPT rule results (those that give optimization advice) per kernel ID."""
    out: dict[int, list[dict[str, Any]]] = {}
    for r in report.rule_records():
        if str(r.get("type") or "") == "OPT" and str(r.get("rule") or ""):
            out.setdefault(int(r["ID"]), []).append(r)
    return out


def _estimate(x: Any) -> float | None:
    from engine.analysis.findings.ncu import parse_rule_args

    return parse_rule_args(x)


def rule_ncu_own(report: NcuReport, groups: list[KernelGroup],
                 skip: frozenset[tuple[str, str]] = frozenset()) -> list[Finding]:
    """One finding per kernel name and OPT rule of Nsight Compute, its gain summed over the launches.

    ``skip`` holds (kernel name, rule) pairs whose estimate another finding already uses (ncu's
    UncoalescedGlobalAccess is the gain of ``ncu.uncoalesced``): they are not listed twice.
    """
    rules = _opt_rules(report)
    if not rules:
        return []
    dur = {int(k["ID"]): float(k["duration_ns"]) for k in report.kernel_records()}
    out: list[Finding] = []
    for kg in groups:
        per_rule: dict[str, dict[int, float | None]] = {}
        texts: dict[str, dict[str, None]] = {}
        for kid in kg.ids:
            for r in rules.get(kid, []):
                rule = str(r["rule"])
                est = _estimate(r.get("speedup_pct"))
                seen = per_rule.setdefault(rule, {})
                old = seen.get(kid)
                seen[kid] = est if old is None else (old if est is None else max(old, est))
                texts.setdefault(rule, {})[str(r.get("message") or "").replace("\n", " ")] = None
        for rule, ests in per_rule.items():
            if (kg.name, rule) not in skip:
                out.append(_finding(kg, rule, ests, dur, " ".join(t for t in texts[rule] if t)))
    return out


def _finding(kg: KernelGroup, rule: str, ests: dict[int, float | None], dur: dict[int, float],
             text: str) -> Finding:
    """The finding of one ncu rule on the launches of one kernel name."""
    from engine.analysis.findings.ncu import _base, _gain

    known = {kid: e for kid, e in ests.items() if e is not None}
    cap, cap_why = rule_cap(kg, rule)
    n = len(ests)
    on = f"{n} of {kg.launches} launches" if kg.launches > 1 else "its launch"
    ev: list[Evidence] = []
    gain = None
    if known:
        uncapped = sum(dur.get(k, 0.0) * e / 100 for k, e in known.items())
        capped = sum(dur.get(k, 0.0) * (min(e, cap) if cap is not None else e) / 100
                     for k, e in known.items())
        mean = 100 * uncapped / kg.duration_ns if kg.duration_ns else max(known.values())
        ev.append(Evidence("estimated speedup", round(mean, 2), "%",
                           f"ncu rule {rule}, duration-weighted over {on}"))
        ev.append(Evidence(UNCAPPED, round(uncapped, 1), "ns", f"Σ launch duration × ncu's {rule} estimate"))
        if cap is not None:
            ev.append(Evidence("cap", round(cap, 2), "%", cap_why))
        formula = (f"Σ over {on}: duration × min(ncu's estimated speedup, {cap:.2f} % = {cap_why}) = "
                   f"{fmt_time(capped)} (uncapped {fmt_time(uncapped)})" if cap is not None else
                   f"Σ over {on}: duration × ncu's estimated speedup = {fmt_time(capped)}")
        gain = _gain(kg, capped, formula, "estimate")
    else:
        ev.append(Evidence("estimated speedup", "n/a", "%", f"ncu rule {rule} (no estimate)"))
    ev.append(Evidence("launches with this rule", n, "launches", f"ncu rule {rule}"))
    return _base(
        kg, f"ncu.rule.{rule}", f"Nsight Compute: {rule}", "info", text[:600], ev,
        fix="See the rule's text; Nsight Compute's section of the same name shows the details.",
        gain=gain,
        verify=f"Re-profile: ncu no longer raises {rule}, or its estimate shrinks.",
    )
