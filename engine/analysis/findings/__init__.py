"""Findings: what is wrong in a run, with evidence, a fix, an expected gain and how to verify.

``findings_for(path)`` opens an nsys/Kineto trace or an Nsight Compute report and runs the matching
rules (plus telemetry rules when a recording is given). The JSON document has schema
``kernelscope.findings/2``: ``{"schema", "report", "findings": [Finding.to_dict(), ...],
"if_all_applied"}``; gains carry their window, per-step saving and overlap group (see ``gains``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.analysis.findings.model import SCHEMA, Evidence, Finding, Gain, fmt_time, sort_findings
from engine.analysis.summary_text import fmt_bytes

__all__ = ["SCHEMA", "Evidence", "Finding", "Gain", "findings_for", "format_findings", "to_document"]


def is_ncu(path: Path) -> bool:
    """True for an Nsight Compute report or an ncu CSV export."""
    from engine.reports.open import sniff_kind

    kind = sniff_kind(path)
    if kind == "ncu-rep":
        return True
    if kind == "unknown" and path.suffix.lower() == ".csv":
        head = path.open("rb").read(200).decode("utf-8", "replace")
        return head.startswith('"ID"')
    return False


def findings_for(path: str | Path, *, reference: str | Path | None = None,
                 telemetry: str | Path | None = None, range_name: str | None = None) -> list[Finding]:
    """Every finding for one report, most severe first.

    Args:
        path: an .nsys-rep / nsys .sqlite / Kineto trace, or an .ncu-rep / ncu CSV export.
        reference: optional nsys report from the same machine with pinned copies: its measured
            rate is the pinned ceiling for pageable-copy gains.
        telemetry: optional NVML recording made during the run.
        range_name: the step range (nsys/Kineto) instead of the one found by structure.

    Raises:
        KernelscopeError: a file cannot be read (one sentence).

    """
    p = Path(path).expanduser()
    out: list[Finding] = []
    if is_ncu(p):
        from engine.analysis.findings.ncu_all import ncu_findings
        from engine.reports.ncu import read_ncu

        out += ncu_findings(read_ncu(p))
    else:
        from engine.analysis.findings.overview import overview
        from engine.reports import open_report

        ref = open_report(Path(reference).expanduser()) if reference else None
        out += overview(open_report(p), range_name=range_name, reference=ref)[1]
    if telemetry:
        from engine.analysis.findings.telemetry import telemetry_findings
        from engine.telemetry.recording import read_recording

        out += telemetry_findings(read_recording(telemetry))
    return sort_findings(out)


def to_document(path: str | Path, findings: list[Finding], *,
                if_all_applied: Any = None) -> dict[str, Any]:
    """The JSON document (schema ``kernelscope.findings/2``; strict JSON).

    ``if_all_applied`` (a ``gains.Combined``) is the bound of applying every finding, when known.
    """
    doc: dict[str, Any] = {"schema": SCHEMA, "report": str(path), "findings": [f.to_dict() for f in findings]}
    doc["if_all_applied"] = if_all_applied.to_json() if if_all_applied is not None else None
    return doc


def evidence_text(e: Evidence) -> str:
    """An evidence value with its unit, readable (ns as ms/µs, bytes as B/kB/MB/GB)."""
    v = e.value
    if e.unit == "ns" and isinstance(v, (int, float)):
        return fmt_time(float(v))
    if e.unit == "B" and isinstance(v, (int, float)):
        return fmt_bytes(float(v))
    if isinstance(v, float) and v.is_integer() and abs(v) >= 1000:
        return f"{int(v):,} {e.unit}".strip()
    if isinstance(v, float):
        return f"{v:,.2f} {e.unit}".strip()
    if isinstance(v, int):
        return f"{v:,} {e.unit}".strip()
    return f"{v} {e.unit}".strip()


def format_findings(findings: list[Finding], *, snippets: bool = True) -> str:
    """Readable text for a terminal."""
    if not findings:
        return "No findings: none of the rules fired on this report."
    lines: list[str] = []
    for i, f in enumerate(findings, 1):
        subject = f" [{f.subject}]" if f.subject else ""
        lines.append(f"{i}. [{f.severity.upper()}] {f.title}{subject}  ({f.id})")
        lines.append(f"   {f.summary}")
        for e in f.evidence:
            lines.append(f"     - {e.label}: {evidence_text(e)}   ({e.source})")
        if f.gain is not None:
            g = f.gain
            head = (f"{g.seconds * 1e3:,.2f} ms over the capture" if g.seconds is not None else "n/a")
            share = f" ({g.pct_of_wall:.1f} %)" if g.pct_of_wall is not None else ""
            step = (f"; {fmt_time(g.per_step_ns)} per steady step ({g.pct_of_step or 0:.1f} % of it)"
                    if g.per_step_ns is not None and not g.one_time else "")
            once = "; one-time" if g.one_time else ""
            lines.append(f"   Expected gain ({g.kind}): {head}{share}{step}{once} — {g.formula}")
        if f.fix:
            lines.append(f"   Fix: {f.fix}")
        if snippets and f.fix_cuda:
            lines += ["   CUDA C++:"] + [f"     {s}" for s in f.fix_cuda.splitlines()]
        if snippets and f.fix_torch:
            lines += ["   PyTorch:"] + [f"     {s}" for s in f.fix_torch.splitlines()]
        if f.verify:
            lines.append(f"   Verify: {f.verify}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
