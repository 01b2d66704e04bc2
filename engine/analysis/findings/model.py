"""The finding: what is wrong, the numbers that show it, how to fix it, what it should gain.

Every rule (nsys, ncu, telemetry) returns :class:`Finding` objects. A finding's expected gain is
computed from the user's own data and carries the formula it used, so a person can check it; the
walkthrough later compares it with the gain measured by a re-run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# the engine's one set of formatters (durations, sizes, rates, shares), re-exported for the rules
from engine.analysis.summary_text import fmt_bytes as fmt_bytes
from engine.analysis.summary_text import fmt_pct as fmt_pct
from engine.analysis.summary_text import fmt_rate as fmt_rate
from engine.analysis.summary_text import fmt_time as fmt_time
from engine.analysis.summary_text import fmt_value as fmt_value

SCHEMA = "kernelscope.findings/2"

#: Severities, most urgent first.
SEVERITIES = ("critical", "warning", "info")


@dataclass(frozen=True)
class Evidence:
    """One number behind a finding.

    Attributes:
        label: what the number is, in words.
        value: the number (or a short text, e.g. a kernel name).
        unit: its unit ("ns", "B", "GB/s", "%", "calls", ...; "" for plain counts or text).
        source: the table it comes from (an nsys stats report, an nsys SQLite table, an ncu
            section or metric, a telemetry column), so the user can look it up.

    """

    label: str
    value: float | int | str
    unit: str
    source: str


@dataclass(frozen=True)
class Gain:
    """The expected saving of a fix, computed from the report.

    Attributes:
        seconds: the total saving in seconds over the whole captured run, every step and the time
            outside the steps together (None when it cannot be computed); not per step (that is
            ``per_step_ns``). The JSON also gives it as ``capture_seconds``, a name that says so.
        pct_of_wall: that saving as a percentage of the capture's wall span.
        formula: the formula with the report's numbers filled in.
        kind: "estimate" (the fix removes this time) or "upper bound" (at most this much).
        per_step_ns: the saving per steady-state step (None without steps, or for one-time costs);
            at most the step's median duration.
        pct_of_step: that saving as a percentage of the steady step median.
        window: what the gain is measured in and capped by: "steady steps", "capture" or
            "kernel time".
        window_ns: the window's length: one steady step's median for "steady steps" (it caps
            ``per_step_ns``), the capture's span for "capture" (it caps ``seconds``).
        one_time: True for costs paid once (start-up, warm-up), which do not grow with the run.
        overlap: findings in the same group save the same time ("host": GPU idle behind host
            work; "gpu": GPU busy time); the "if all applied" bound counts a group at most once.

    """

    seconds: float | None
    pct_of_wall: float | None
    formula: str
    kind: str = "estimate"
    per_step_ns: float | None = None
    pct_of_step: float | None = None
    window: str = "capture"
    window_ns: int | None = None
    one_time: bool = False
    overlap: str = ""


@dataclass(frozen=True)
class Finding:
    """One problem found in a report.

    Attributes:
        id: stable identifier (checklist items refer to it), e.g. ``nsys.per-iteration-alloc``.
        title: short headline.
        severity: "critical", "warning" or "info".
        source: "nsys", "ncu", "telemetry" or "capture".
        summary: one or two plain sentences with the key numbers.
        evidence: the numbers behind it.
        fix: what to change, in words.
        fix_cuda: a short CUDA C++ example ("" when it does not apply).
        fix_torch: a short PyTorch example ("" when it does not apply).
        gain: the expected saving, or None where no saving applies (e.g. a broken capture).
        verify: how to check that the fix worked.
        subject: what it is about when not the whole run (a kernel name, a GPU).

    """

    id: str
    title: str
    severity: str
    source: str
    summary: str
    evidence: list[Evidence] = field(default_factory=list)
    fix: str = ""
    fix_cuda: str = ""
    fix_torch: str = ""
    gain: Gain | None = None
    verify: str = ""
    subject: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (strict JSON: null, never NaN or Infinity).

        ``gain.capture_seconds`` repeats ``gain.seconds`` under a name that says it is the total
        over the capture (``seconds`` stays for the readers that use it).
        """
        out: dict[str, Any] = _strict(asdict(self))
        if out.get("gain") is not None:
            out["gain"]["capture_seconds"] = out["gain"]["seconds"]
        return out

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (the same as :meth:`to_dict`)."""
        return self.to_dict()

    def evidence_value(self, label: str) -> float | int | str:
        """The value of the evidence item called ``label`` (KeyError if absent)."""
        for e in self.evidence:
            if e.label == label:
                return e.value
        raise KeyError(f"finding {self.id} has no evidence {label!r}")


def severity_for(pct_of_wall: float | None, *, critical: float = 20.0, warning: float = 5.0) -> str:
    """Severity from the share of wall time a fix would save."""
    if pct_of_wall is None:
        return "info"
    if pct_of_wall >= critical:
        return "critical"
    if pct_of_wall >= warning:
        return "warning"
    return "info"


def pct(part: float, whole: float) -> float | None:
    """``100 * part / whole`` rounded to 2 decimals, None when ``whole`` is 0."""
    return round(100.0 * part / whole, 2) if whole else None


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """The largest computable win first.

    A broken capture comes first (no gain can be trusted then); then findings with a steady-state
    gain, by time saved per step; then the other gains (one-time costs, ncu's share of kernel
    time), largest first; then findings without a gain. Severity breaks ties.
    """
    def key(f: Finding) -> tuple[int, float, int]:
        g = f.gain
        sev = SEVERITIES.index(f.severity)
        if f.source == "capture":
            return 0, 0.0, sev
        if g is not None and g.per_step_ns is not None and not g.one_time and g.per_step_ns > 0:
            return 1, -g.per_step_ns, sev
        if g is not None and g.seconds is not None and g.seconds > 0:
            return 2, -g.seconds, sev
        return 3, 0.0, sev

    return sorted(findings, key=key)


def _strict(value: Any) -> Any:
    """NaN / Infinity → None, recursively (strict JSON)."""
    import math

    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
