"""What to fix first in an Nsight Compute report: one ranked list for every view and page.

The list is built from the findings (:func:`engine.analysis.findings.ncu_all.ncu_findings_and_groups`):
one entry per kernel name and rule, its gain per launch and over every launch, the severity the
findings engine gave it (from the gain's share of all profiled kernel time). The Kernels view's
headline ("Fix first") is the first entry with a gain and its table is the list itself, so the
two can never disagree.

Ranking: the gain after its cap first (largest first); gains that read the same (a cap shared by
several rules) are ordered by the verdict (a fix of the kernel's limiter first), then by ncu's
uncapped estimate, so a shared cap does not leave a tie that ranks nothing. Each entry says
whether it agrees with its kernel's bottleneck verdict (a compute-side rule on a memory-bound
kernel does not) and, when not, why it is still listed where it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.analysis.findings.model import Finding, fmt_time
from engine.analysis.findings.ncu import UNCAPPED

if TYPE_CHECKING:
    from engine.analysis.findings.ncu import KernelGroup
    from engine.reports.ncu import NcuReport

MEMORY, COMPUTE, LATENCY, REPLACE = "memory", "compute", "latency", "replace"

#: the bottleneck each ncu rule (and each of our findings) addresses
SIDES: dict[str, str] = {
    **dict.fromkeys(("UncoalescedGlobalAccess", "UncoalescedSharedAccess", "MemoryCacheAccessPattern",
                     "SharedMemoryConflicts", "MemoryL2Compression", "DRAMUtilization", "L1TEXGlobal",
                     "ncu.uncoalesced", "ncu.bank-conflicts", "ncu.register-spills"), MEMORY),
    **dict.fromkeys(("FPInstructions", "HighPipeUtilization", "ThreadDivergence", "ncu.tensor-pipes-idle"),
                    COMPUTE),
    **dict.fromkeys(("IssueSlotUtilization", "CPIStall", "AchievedOccupancy", "TheoreticalOccupancy",
                     "LaunchConfiguration", "WorkloadImbalance", "SOLBottleneck", "TailEffect",
                     "ncu.latency-bound", "ncu.low-occupancy", "ncu.kernel-launch-bound"), LATENCY),
    # a different kernel (tensor cores, the Hopper path): the current bottleneck does not bound it
    **dict.fromkeys(("ncu.fp32-gemm-on-hopper", "ncu.no-wgmma-tma"), REPLACE),
}
SIDE_WORDS = {MEMORY: "a memory-traffic fix", COMPUTE: "a compute-pipe fix",
              LATENCY: "a latency fix (more eligible warps, a fuller GPU)"}
#: the fix sides that address each verdict's limiter (other verdicts: any side may help)
AGREES = {"memory-bound": {MEMORY, REPLACE, ""}, "compute-bound": {COMPUTE, REPLACE, ""}}


@dataclass(frozen=True)
class Fix:
    """One entry of the list: one rule (or finding) on the launches of one kernel name."""

    rank: int
    kernel: str
    ids: tuple[int, ...]  # the kernel's launches (report IDs)
    finding: Finding
    side: str  # memory | compute | latency | replace | "" (unknown)
    verdict: str  # the kernel's bottleneck verdict (engine.analysis.ncu.verdict)
    agrees: bool  # the fix addresses the verdict's limiter (or the verdict does not name one)
    gain_ns: float | None  # over every launch, after the cap
    estimate_ns: float | None  # before the cap (ncu's own estimate); equal to gain_ns when uncapped
    kernel_ns: float  # the kernel's time over every launch
    note: str  # the cap and the verdict, in words ("" when neither applies)

    @property
    def launches(self) -> int:
        """How many launches of the kernel the report holds."""
        return len(self.ids)

    @property
    def per_launch_ns(self) -> float | None:
        """The gain of one launch (the total over the launches ÷ their number)."""
        return None if self.gain_ns is None else self.gain_ns / max(self.launches, 1)

    @property
    def pct_of_kernel(self) -> float | None:
        """The gain as a percentage of the kernel's time (over the same launches)."""
        return None if self.gain_ns is None or not self.kernel_ns else 100.0 * self.gain_ns / self.kernel_ns

    @property
    def title(self) -> str:
        """The fix in a few words (ncu's rule name for ncu's own rules)."""
        t = self.finding.title
        return t.removeprefix("Nsight Compute: ")

    @property
    def severity(self) -> str:
        """The finding's severity (from the gain's share of all profiled kernel time)."""
        return self.finding.severity

    @property
    def capped(self) -> bool:
        """Whether the cap lowered ncu's estimate (by more than 1 %)."""
        return (self.gain_ns is not None and self.estimate_ns is not None
                and self.estimate_ns > self.gain_ns * 1.01)

    def short_note(self) -> str:
        """The note in a few words for a table cell ("capped (ncu: 1.76 ms); not the limiter")."""
        parts = []
        if self.capped:
            parts.append(f"capped (ncu: {fmt_time(self.estimate_ns or 0.0)})")
        if not self.agrees:
            parts.append("not the limiter")
        return "; ".join(parts)

    def gain_words(self) -> str:
        """The gain per launch and in total, e.g. "25.2 µs per launch × 4 launches = 0.10 ms"."""
        return finding_gain_words(self.finding)


def finding_gain_words(f: Finding, *, short: bool = False) -> str:
    """An ncu finding's gain per launch and over every launch, with its share of the kernel's time.

    "0.42 ms (79.8 % of its time)" for one launch; "25.2 µs per launch × 4 launches = 0.10 ms
    (53.8 % of its time)" for four ("25.2 µs × 4 = 0.10 ms (53.8 % of its time)" when ``short``);
    "≤ " before an upper bound; "no gain computed" without one.
    """
    g = f.gain
    if g is None or g.seconds is None:
        return "no gain computed"
    total = g.seconds * 1e9
    launches = int(_evidence(f, "profiled launches") or 1)
    bound = "≤ " if g.kind == "upper bound" else ""
    share = f" ({g.pct_of_wall:.1f} % of its time)" if g.pct_of_wall is not None else ""
    if launches <= 1:
        return f"{bound}{fmt_time(total)}{share}"
    each = f"{fmt_time(total / launches)} × {launches}" if short else \
        f"{fmt_time(total / launches)} per launch × {launches} launches"
    return f"{bound}{each} = {fmt_time(total)}{share}"


def side_of(f: Finding) -> str:
    """The bottleneck a finding's fix addresses (see :data:`SIDES`)."""
    rule = f.id.removeprefix("ncu.rule.")
    side = SIDES.get(rule, SIDES.get(f.id, ""))
    if rule == "HighPipeUtilization" and "under-utilized" in f.summary:
        return LATENCY  # "All compute pipelines are under-utilized … doesn't issue enough warps"
    return side


def _evidence(f: Finding, label: str) -> float | None:
    for e in f.evidence:
        if e.label == label and isinstance(e.value, (int, float)):
            return float(e.value)
    return None


def _note(f: Finding, kg: KernelGroup | None, side: str, agrees: bool, gain: float | None,
          estimate: float | None) -> str:
    """The cap and the verdict of one entry, in words."""
    parts = []
    cap = _evidence(f, "cap")
    if gain is not None and estimate is not None and estimate > gain * 1.01:
        why = next((e.source for e in f.evidence if e.label == "cap"), "").split(" (")[0]
        parts.append(f"ncu estimates {fmt_time(estimate)}; capped at {cap:.1f} % of the kernel's time"
                     + (f" ({why})" if why else "") if cap is not None else
                     f"ncu estimates {fmt_time(estimate)}; capped at {fmt_time(gain)}")
    if not agrees and kg is not None and kg.verdict is not None:
        mem = kg.verdict.numbers.get("memory_throughput_pct")
        sm = kg.verdict.numbers.get("sm_throughput_pct")
        busy = mem if kg.verdict.kind == "memory-bound" else sm
        unit = "memory" if kg.verdict.kind == "memory-bound" else "compute"
        at = f" ({unit} at {busy:.1f} % of peak)" if isinstance(busy, (int, float)) else ""
        left = f", at most the {100 - busy:.1f} % left" if isinstance(busy, (int, float)) else ""
        parts.append(f"{kg.name} is {kg.verdict.kind}{at}: {SIDE_WORDS.get(side, 'this fix')} helps only by "
                     f"bringing {unit} closer to its peak{left}")
    return "; ".join(parts)


def fixes_of(findings: list[Finding], groups: list[KernelGroup]) -> list[Fix]:
    """The ranked list of ``findings`` (of the kernels ``groups``); see the module docstring."""
    by_name = {kg.name: kg for kg in groups}
    rows = []
    for order, f in enumerate(findings):
        kg = by_name.get(f.subject)
        g = f.gain
        gain = g.seconds * 1e9 if g is not None and g.seconds is not None else None
        estimate = _evidence(f, UNCAPPED)
        estimate = max(estimate, gain or 0.0) if estimate is not None else gain
        side = side_of(f)
        verdict = kg.verdict.kind if kg is not None and kg.verdict is not None else "unknown"
        agrees = side in AGREES.get(verdict, {side})
        # the gain to the 3 digits shown: gains that read the same are a tie, broken by the verdict
        # (a fix of the kernel's limiter first) and then by ncu's uncapped estimate
        shown = float(f"{gain:.3g}") if gain is not None else 0.0
        rows.append(((gain is None, -shown, not agrees, -(estimate or 0.0), order),
                     (f, kg, side, verdict, agrees, gain, estimate)))
    rows.sort(key=lambda r: r[0])
    out = []
    for rank, (_key, (f, kg, side, verdict, agrees, gain, estimate)) in enumerate(rows, 1):
        out.append(Fix(rank, f.subject, tuple(kg.ids) if kg is not None else (), f, side, verdict, agrees,
                       gain, estimate, kg.duration_ns if kg is not None else 0.0,
                       _note(f, kg, side, agrees, gain, estimate)))
    return out


def fix_list(report: NcuReport) -> list[Fix]:
    """The report's ranked fixes (see the module docstring)."""
    from engine.analysis.findings.ncu_all import ncu_findings_and_groups

    return fixes_of(*ncu_findings_and_groups(report))


def rank_findings(findings: list[Finding], groups: list[KernelGroup]) -> list[Finding]:
    """``findings`` in the order of the fix list (for a Findings page that lists the same ranks)."""
    return [x.finding for x in fixes_of(findings, groups)]


def first_per_kernel(fixes: list[Fix]) -> dict[str, Fix]:
    """The best-ranked fix with a gain of each kernel name (the kernel table's "Fix first")."""
    out: dict[str, Fix] = {}
    for x in fixes:
        if x.gain_ns is not None and x.kernel not in out:
            out[x.kernel] = x
    return out
