"""Nsight Compute reports as Markdown and self-contained HTML, for reviews.

The same numbers as ``kernelscope ncu --page verdict`` and ``--page rules`` and the findings: the
kernel table (duration, SM / memory throughput, occupancy, bottleneck verdict), the rule results
ranked by estimated time saved, the findings with their expected gains, and a bar chart of kernel
durations. HTML reuses :func:`engine.analysis.export.html_page` (one file, inline SVG, no scripts).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.analysis.findings.model import Finding, fmt_time

if TYPE_CHECKING:
    from engine.reports.ncu import NcuReport

TOP_RULES = 15  # rule results listed (ranked by estimated time saved)
TOP_BARS = 20  # kernels in the duration chart
_SOURCES = {"ncu-rep": "report (.ncu-rep)", "csv-details": "details CSV export", "csv-raw": "raw CSV export"}


def _cell(text: Any, width: int = 60) -> str:
    s = "" if text is None or (isinstance(text, float) and math.isnan(text)) else str(text)
    s = s.replace("|", "/").replace("\n", " ")
    return s if len(s) <= width else s[: width - 1] + "…"


def _pct(v: Any) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{float(v):.1f} %"


def _ns(v: Any) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt_time(float(v))


def ncu_markdown(report: NcuReport, findings: list[Finding]) -> str:
    """An Nsight Compute report's kernels, ranked rules and findings as Markdown."""
    from engine.analysis.export import findings_markdown
    from engine.analysis.ncu.sections import kernel_table, rules_table

    kt = kernel_table(report)
    rules = rules_table(report)
    gpus = sorted({str(g) for g in report.kernels.get("Device Name", []) if str(g)}) or ["unknown GPU"]
    total = float(kt["duration_ns"].sum()) if len(kt) else 0.0
    lines = [f"# Kernelscope report: {Path(report.path).name}", "",
             f"- Nsight Compute {_SOURCES.get(report.source, report.source)} on {', '.join(gpus)}",
             f"- {len(kt)} profiled kernel launch{'es' if len(kt) != 1 else ''}, {_ns(total)} of kernel time "
             "(each measured alone under ncu's replay)", ""]
    from engine.analysis.findings.ncu_fixes import first_per_kernel, fix_list

    fixes = fix_list(report)
    by_launch = {i: x for x in first_per_kernel(fixes).values() for i in x.ids}  # report ID -> its fix first
    lines += ["## Kernels", "",
              "| ID | kernel | duration | SM % | memory % | achieved occupancy | verdict | fix first |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in kt.to_dict("records"):
        fx = by_launch.get(int(r["id"]))
        top = f"{fx.title} ({_pct(fx.pct_of_kernel)})" if fx is not None else ""
        lines.append(f"| {r['id']} | {_cell(r['name'])} | {_ns(r['duration_ns'])} | "
                     f"{_pct(r['sm_throughput_pct'])} | {_pct(r['memory_throughput_pct'])} | "
                     f"{_pct(r['achieved_occupancy_pct'])} | {r['verdict']} | {_cell(top, 64)} |")
    # the same list as the Kernels view: one entry per kernel name and fix, gain per launch and in total
    lines += ["", "## What to fix first", ""]
    ranked = [x for x in fixes if x.gain_ns is not None]
    if not ranked:
        lines.append("No fix with an estimated gain: the rules found nothing to save on this report.")
    else:
        lines += ["| rank | kernel | fix | severity | gain | note |", "| --- | --- | --- | --- | --- | --- |"]
        for i, x in enumerate(ranked[:TOP_RULES], 1):
            lines.append(f"| {i} | {_cell(x.kernel, 40)} | {x.title} | {x.severity} | {x.gain_words()} | "
                         f"{_cell(x.short_note(), 60)} |")
        if len(ranked) > TOP_RULES:
            lines.append(f"\n{len(ranked) - TOP_RULES} more: the Kernels view lists them all.")
    lines += ["", "## ncu's rule results (ncu's own estimates, before any cap)", ""]
    if not len(rules):
        lines.append("This report holds no rule results.")
    else:
        lines += ["| kernel | rule | estimated speedup | time it could save | message |",
                  "| --- | --- | --- | --- | --- |"]
        for r in rules.head(TOP_RULES).to_dict("records"):
            lines.append(f"| {_cell(r['kernel'], 40)} | {r['rule']} | {_pct(r['speedup_pct'])} | "
                         f"{_ns(r['weighted_ns'])} | {_cell(r['message'], 160)} |")
        if len(rules) > TOP_RULES:
            lines.append(f"\n{len(rules) - TOP_RULES} more rule results: "
                         "`kernelscope ncu REPORT --page rules`.")
    lines += ["", "## Findings", ""]
    lines += (findings_markdown(findings) if findings
              else ["No findings: none of the rules fired on this report."])
    return "\n".join(lines).rstrip() + "\n"


def ncu_plots(report: NcuReport) -> list[str]:
    """A bar chart of the longest kernel launches (µs)."""
    from engine.analysis.export import svg_bars
    from engine.analysis.ncu.sections import kernel_table

    kt = kernel_table(report)
    if not len(kt):
        return []
    top = kt.sort_values("duration_ns", ascending=False, kind="stable").head(TOP_BARS)
    items = [(f"{r['id']}: {_cell(r['name'], 40)}", float(r["duration_ns"]) / 1e3)
             for r in top.to_dict("records") if not math.isnan(float(r["duration_ns"]))]
    return [svg_bars(f"Kernel duration (the {len(items)} longest launches)", items, "µs")] if items else []


def ncu_html(report: NcuReport, findings: list[Finding]) -> str:
    """The same as :func:`ncu_markdown`, as one self-contained HTML page with the duration chart."""
    from engine.analysis.export import html_page

    return html_page(f"Kernelscope: {Path(report.path).name}", ncu_markdown(report, findings),
                     ncu_plots(report))
