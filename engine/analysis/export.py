"""Reports to share: Markdown and self-contained HTML (inline SVG plots), and Perfetto timelines.

Nothing here needs Qt or matplotlib: plots are hand-written SVG (a few rectangles and labels), so
an HTML file opens anywhere, offline, with no external files.

- :func:`session_markdown` / :func:`session_html`: a report's summary and findings.
- :func:`comparison_markdown` / :func:`comparison_html`: two runs compared (iteration statistics,
  deltas, fairness).
- :func:`perfetto_trace`: a timeline in the Chrome trace-event JSON format that ui.perfetto.dev and
  chrome://tracing load: CUDA API calls and NVTX ranges per CPU thread, kernels / copies / memsets
  per GPU stream, as complete ("X") events with microsecond times, and flow arrows ("s"/"f") from
  each CUDA API launch/copy call to the kernel or memcpy it started (same correlationId and pid).
"""

from __future__ import annotations

import html
import json
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.findings.model import Finding, fmt_pct, fmt_time, fmt_value
from engine.analysis.findings.overview import gain_text
from engine.reports.trace_columns import NVTX_MARK, NVTX_PUSH_POP, NVTX_START_END
from engine.system.atomic import atomic_write_text
from engine.system.errors import KernelscopeError

if TYPE_CHECKING:
    from engine.analysis.compare import Comparison
    from engine.analysis.summary_model import Summary
    from engine.reports.base import Trace

#: Synthetic Perfetto process ids for GPUs (real pids are < 2**22 on Linux).
GPU_PID_BASE = 1 << 24
NVTX_STARTEND_TID = (1 << 24) - 1
#: Category and name shared by both ends of a flow (Perfetto matches v1 flows on id, cat and name).
FLOW_CAT = "cuda_flow"
FLOW_NAME = "launch"


def write_text(path: Path, text: str) -> None:
    """Write a file atomically (a reader never sees half of it).

    Raises:
        KernelscopeError: the folder is not writable.

    """
    try:
        atomic_write_text(path, text, shared=True)  # a report is meant to be shared
    except OSError as exc:
        raise KernelscopeError(f"Could not write {path} ({exc.strerror}); choose another -o path.") from exc


# -- SVG -----------------------------------------------------------------------------------------
_COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f"]


#: Colours by what a bar is, so one category has one colour in every report (not by position).
_CATEGORY_COLORS = [
    ("idle", "#bab0ac"), ("host-to-device", "#f28e2b"), ("device-to-host", "#e15759"),
    ("device-to-device", "#b07aa1"), ("peer", "#b07aa1"), ("memset", "#9c755f"), ("kernel", "#4e79a7"),
    ("alloc", "#ff9da7"), ("memcpy", "#f28e2b"), ("sync", "#76b7b2"), ("launch", "#59a14f"),
    ("setup", "#edc948"), ("context", "#edc948"), ("other", "#8c8c8c"),
]


def bar_color(label: str) -> str:
    """The colour of a bar: by the category its label names, else a stable hash of the label."""
    low = label.lower()
    for key, color in _CATEGORY_COLORS:
        if key in low:
            return color
    return _COLORS[zlib.crc32(label.encode()) % len(_COLORS)]


def svg_bars(title: str, items: list[tuple[str, float]], unit: str, width: int = 720,
             floor: float = 1e-12) -> str:
    """A horizontal bar chart as an SVG string (values >= 0).

    Bars are coloured by category (:func:`bar_color`); the scale is at least ``floor`` so that a lone
    tiny value does not fill the width, and a zero draws no bar.
    """
    bar_h, gap, left, top = 22, 6, 260, 30
    h = top + len(items) * (bar_h + gap) + 10
    vmax = max([v for _, v in items] + [floor])
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" '
             f'font-family="sans-serif" font-size="12" role="img" aria-label="{html.escape(title)}">',
             f'<text x="0" y="16" font-weight="bold">{html.escape(title)}</text>']
    for i, (label, v) in enumerate(items):
        y = top + i * (bar_h + gap)
        w = max((width - left - 110) * v / vmax, 1) if v > 0 else 0.0
        parts.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{html.escape(label[:40])}</text>')
        parts.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" '
                     f'fill="{bar_color(label)}"><title>{html.escape(label)}: '
                     f'{html.escape(fmt_value(v, unit))}</title></rect>')
        parts.append(f'<text x="{left + w + 6:.1f}" y="{y + 15}">{html.escape(fmt_value(v, unit))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def svg_samples(title: str, groups: list[tuple[str, list[float]]], unit: str, width: int = 720) -> str:
    """Dot plot of samples per group with the median marked (for iteration times)."""
    row_h, left, top = 40, 160, 30
    h = top + len(groups) * row_h + 45
    vals = [v for _, vs in groups for v in vs] or [0.0, 1.0]
    lo, hi = 0.0, max(vals) * 1.05 or 1.0
    span = width - left - 30

    def x(v: float) -> float:
        return left + span * (v - lo) / (hi - lo)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" '
             f'font-family="sans-serif" font-size="12" role="img" aria-label="{html.escape(title)}">',
             f'<text x="0" y="16" font-weight="bold">{html.escape(title)}</text>']
    for i, (label, vs) in enumerate(groups):
        y = top + i * row_h + row_h / 2
        parts.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end">{html.escape(label)}</text>')
        for v in vs:
            parts.append(f'<circle cx="{x(v):.1f}" cy="{y}" r="5" fill="{_COLORS[i % 8]}" '
                         f'fill-opacity="0.7"><title>{v:,.3f} {unit}</title></circle>')
        if vs:
            m = float(np.median(vs))
            parts.append(f'<line x1="{x(m):.1f}" x2="{x(m):.1f}" y1="{y - 12}" y2="{y + 12}" '
                         'stroke="black" stroke-width="2"/>')
    axis_y = top + len(groups) * row_h + 5
    parts.append(f'<line x1="{left}" x2="{left + span}" y1="{axis_y}" y2="{axis_y}" stroke="#888"/>')
    for k in range(5):
        v = lo + (hi - lo) * k / 4
        parts.append(f'<text x="{x(v):.1f}" y="{axis_y + 16}" text-anchor="middle">{v:,.2f}</text>')
    parts.append(f'<text x="{left + span}" y="{axis_y + 28}" text-anchor="end">{html.escape(unit)}</text>')
    parts.append("</svg>")
    return "".join(parts)


# -- Markdown / HTML -----------------------------------------------------------------------------
def findings_markdown(findings: list[Finding]) -> list[str]:
    """The findings as a Markdown section (shared by the nsys and ncu exports)."""
    if not findings:
        return ["No findings."]
    out = ["| severity | finding | expected gain | how the gain is computed |", "| --- | --- | --- | --- |"]
    for f in findings:
        g = f.gain
        gain = "n/a" if g is None or g.seconds is None else gain_text(f)
        subj = f" [{f.subject[:40]}]" if f.subject else ""
        formula = (g.formula if g else "").replace("|", "/")
        out.append(f"| {f.severity} | **{f.title}**{subj} (`{f.id}`) | {gain} | {formula} |")
    out.append("")
    for f in findings:
        out.append(f"### {f.title}" + (f" — {f.subject}" if f.subject else ""))
        out.append("")
        out.append(f.summary)
        out.append("")
        for e in f.evidence:
            v = fmt_time(float(e.value)) if e.unit == "ns" and isinstance(e.value, (int, float)) else (
                f"{e.value:,}" if isinstance(e.value, int) else
                f"{e.value:,.3f}" if isinstance(e.value, float) else str(e.value))
            unit = "" if e.unit == "ns" else e.unit
            out.append(f"- {e.label}: {v} {unit} _({e.source})_".replace("  ", " "))
        if f.fix:
            out += ["", f"**Fix:** {f.fix}"]
        if f.fix_cuda:
            out += ["", "```cuda", f.fix_cuda, "```"]
        if f.fix_torch:
            out += ["", "```python", f.fix_torch, "```"]
        if f.verify:
            out += ["", f"**Verify:** {f.verify}"]
        out.append("")
    return out


def _summary_plots(s: dict[str, Any]) -> list[str]:
    plots = []
    cats = [(c["label"], c["union_ns"] / 1e6) for c in s["host"]["categories"]]
    if cats:
        plots.append(svg_bars("CUDA API time by category (time with a call in flight)", cats, "ms"))
    for d in s["gpu"]["devices"]:
        parts = [(p["part"], p["union_ns"] / 1e6) for p in d["parts"]]
        if parts:
            parts.append(("GPU idle", d["idle_ns"] / 1e6))
            name = f"GPU {d['device']}" + (f" ({d['name']})" if d["name"] else "")
            plots.append(svg_bars(f"{name}: time of each activity (union over streams)", parts, "ms"))
    # From bytes and time (summary's gb_per_s is already rounded to 3 decimals).
    bw = [(f"{b['direction']} ({b['memory']})", b["bytes"] / b["total_ns"] if b["total_ns"] else 0.0)
          for b in s["bandwidth"]]
    if bw:
        plots.append(svg_bars("Achieved copy bandwidth", bw, "GB/s", floor=1.0))  # a scale of >= 1 GB/s
    return plots


def _pc(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f} %"


def _breakdown_md(s: dict[str, Any]) -> list[str]:
    """Per GPU, per process and per thread rows; shares are unions, sums are labelled as sums."""
    g = s["gpu"]
    out = ["## Where the time went", "",
           "| GPU | busy (union over streams) | % of wall | part | part (union) | % of GPU busy | "
           "summed over streams |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for d in g["devices"]:
        name = f"{d['device']}" + (f" {d['name']}" if d["name"] else "")
        for i, p in enumerate(d["parts"]):
            head = (f"| {name} | {fmt_time(d['busy_ns'])} | {_pc(d['busy_pct_of_wall'])} " if i == 0
                    else "| | | ")
            out.append(f"{head}| {p['part']} | {fmt_time(p['union_ns'])} | {_pc(p['pct_of_busy'])} | "
                       f"{fmt_time(p['total_ns'])} |")
    for d in g["devices"]:
        shares = sum(p["pct_of_busy"] or 0 for p in d["parts"])
        if shares > 100.5:  # the parts overlap: say so, with the stacked bar's shares (as the text does)
            bar = ", ".join(f"{p['part']} {fmt_pct(p.get('attributed_pct_of_busy'))}" for p in d["parts"]
                            if p.get("attributed_pct_of_busy"))
            out += ["", f"GPU {d['device']}: the parts overlap in time, so their shares add up to "
                    f"{shares:.1f} % of busy; without overlap, each overlap given to the part listed "
                    f"first: {bar}."]
    if g["device_count"] > 1:
        out += ["", f"Any GPU busy: {fmt_time(g['busy_ns'])} ({_pc(g['busy_pct_of_wall'])} of wall); "
                f"busy time summed over the {g['device_count']} GPUs: {fmt_time(g['busy_sum_ns'])} (a sum, "
                "not a share of wall)."]
    if len(s["processes"]) > 1:
        out += ["", "| process | name | CUDA API (union) | % of wall | GPU busy (union) | % of wall | "
                "GPUs |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for p in s["processes"]:
            out.append(f"| {p['pid']} | {p['name'] or ''} | {fmt_time(p['api_union_ns'])} | "
                       f"{_pc(p['api_pct_of_wall'])} | {fmt_time(p['gpu_busy_ns'])} | "
                       f"{_pc(p['gpu_busy_pct_of_wall'])} | {', '.join(p['devices'])} |")
    h = s["host"]
    out += ["", f"CUDA API: {fmt_time(h['union_ns'])} with a call in flight ({_pc(h['pct_of_wall'])} of "
            f"wall); {fmt_time(h['total_ns'])} summed over {h['calls']} calls on {h['thread_count']} "
            "thread(s).", ""]
    return out


def session_markdown(summary: Summary | dict[str, Any], findings: list[Finding],
                     extra: list[str] | None = None) -> str:
    """A report's headline numbers, its breakdown, ``extra`` sections (Markdown lines) and its findings."""
    summary = summary if isinstance(summary, dict) else summary.to_json()
    r = summary["report"]
    gpus = ", ".join(str(g["name"] or "unknown GPU") for g in r["gpus"]) or "unknown GPU"
    lines = [f"# Kernelscope report: {Path(r['path']).name}", "",
             f"- Recorded by: {r['product_version'] or 'unknown'} on {gpus}",
             f"- Capture: {fmt_time(summary['wall']['span_ns'])} wall span; CUDA API "
             f"{fmt_time(summary['host']['union_ns'])} with a call in flight; GPU busy "
             f"{fmt_time(summary['gpu']['busy_ns'])} ({summary['gpu']['busy_pct_of_wall'] or 0:.1f} %)"]
    it = summary.get("iterations")
    if it:
        lines.append(f"- Steps ({it['range']}, pid {it['pid']}): {it['count']}, "
                     f"{it['warmup_count']} warm-up, "
                     f"steady median {fmt_time(it['steady_median_ns'])}, first {fmt_time(it['first_ns'])}")
    if summary["missing"]:
        lines.append(f"- Not captured: {'; '.join(summary['missing'])}")
    lines += [""] + _breakdown_md(summary)
    lines += extra or []
    lines += ["## Findings", ""] + findings_markdown(findings)
    return "\n".join(lines) + "\n"


_CSS = ("body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
        "text-align:left;vertical-align:top}th{background:#f3f3f3}pre{background:#f6f8fa;padding:8px;"
        "overflow:auto}.critical{color:#b00020;font-weight:bold}.warning{color:#b35c00}"
        ".info{color:#555}.warn{color:#b00020}svg{display:block;margin:1em 0}")


def _md_to_html(md: str) -> str:
    """Enough Markdown for our own output: headings, lists, tables, code blocks, bold/code spans."""
    import re

    out: list[str] = []
    lines = md.splitlines()
    i = 0

    def inline(t: str) -> str:
        t = html.escape(t)
        t = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", t)
        t = re.sub(r"`(.+?)`", r"<code>\1</code>", t)
        t = re.sub(r"(?<![\w*])_(\(.+?\))_(?![\w*])", r"<em>\1</em>", t)
        for sev in ("critical", "warning", "info"):
            t = t.replace(f"<td>{sev}</td>", f'<td class="{sev}">{sev}</td>')
        return t

    while i < len(lines):
        ln = lines[i]
        if ln.startswith("```"):
            j = i + 1
            buf = []
            while j < len(lines) and not lines[j].startswith("```"):
                buf.append(lines[j])
                j += 1
            out.append("<pre><code>" + html.escape("\n".join(buf)) + "</code></pre>")
            i = j + 1
            continue
        if ln.startswith("<svg"):
            out.append(ln)
        elif ln.startswith("#"):
            level = len(ln) - len(ln.lstrip("#"))
            out.append(f"<h{level}>{inline(ln[level:].strip())}</h{level}>")
        elif ln.startswith("| "):
            rows = []
            while i < len(lines) and lines[i].startswith("| "):
                rows.append(lines[i])
                i += 1
            cells = [[c.strip() for c in r.strip().strip("|").split(" | ")] for r in rows]
            body = [c for c in cells if not all(set(x) <= set("- ") for x in c)]
            out.append("<table><tr>" + "".join(f"<th>{inline(c)}</th>" for c in body[0]) + "</tr>"
                       + "".join("<tr>" + "".join(f"<td>{inline(c)}</td>".replace(
                           "<td><strong>FAIL</strong></td>", '<td class="warn"><strong>FAIL</strong></td>')
                           for c in r) + "</tr>" for r in body[1:]) + "</table>")
            continue
        elif ln.startswith("- "):
            buf = []
            while i < len(lines) and lines[i].startswith("- "):
                buf.append(f"<li>{inline(lines[i][2:])}</li>")
                i += 1
            out.append("<ul>" + "".join(buf) + "</ul>")
            continue
        elif ln.strip():
            out.append(f"<p>{inline(ln)}</p>")
        i += 1
    return "\n".join(out)


def html_page(title: str, markdown: str, plots: list[str]) -> str:
    """A self-contained HTML page: inline CSS, the Markdown rendered, SVG plots after the headline."""
    body = _md_to_html(markdown)
    # Plots go after the first list (the headline facts).
    cut = body.find("</ul>")
    cut = cut + len("</ul>") if cut >= 0 else 0
    body = body[:cut] + "\n" + "\n".join(plots) + "\n" + body[cut:]
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}'
            f"</title><style>{_CSS}</style></head><body>\n{body}\n"
            "<p class=\"info\">Made by Kernelscope.</p></body></html>\n")


def session_html(summary: Summary | dict[str, Any], findings: list[Finding],
                 extra: list[str] | None = None) -> str:
    """The session report as one self-contained HTML file with plots."""
    summary = summary if isinstance(summary, dict) else summary.to_json()
    return html_page(f"Kernelscope: {Path(summary['report']['path']).name}",
                     session_markdown(summary, findings, extra), _summary_plots(summary))


def comparison_markdown(c: Comparison) -> str:
    """A comparison (see :mod:`engine.analysis.compare`) as Markdown."""
    lines = ["# Kernelscope comparison", "", f"- A (baseline): `{c.a}`", f"- B: `{c.b}`"]
    it = c.iterations
    if it:
        from engine.analysis.compare import result_sentence, speedup_sentence

        change = f"{it['change_pct']:+.1f} %, " if it["change_pct"] is not None else ""
        lines.append(
            f"- Iteration median: {fmt_time(it['median_ns_a'])} -> {fmt_time(it['median_ns_b'])} "
            f"({change}{speedup_sentence(it)}); 95 % CI of the change "
            f"[{fmt_time(it['delta_median_ci95_ns'][0])}, {fmt_time(it['delta_median_ci95_ns'][1])}]; "
            f"{it['test']}: {result_sentence(it)}; verdict: **{it['verdict']}**")
    lines += ["", "## Fairness", ""]
    lines += [f"- {w}" for w in c.warnings] or [
        "- Same GPU and driver, same launches, grids and bytes copied."]
    for title, rows in (("Kernels", c.kernels), ("CUDA API", c.api), ("NVTX ranges", c.nvtx)):
        if not rows:
            continue
        lines += ["", f"## {title}", "", "| name | A total | B total | change | calls A | calls B |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for r in rows:
            pct = f"{r['delta_pct']:+.1f} %" if r["delta_pct"] is not None else "new"
            lines.append(f"| `{r['name'][:70].replace('|', '/')}` | {fmt_time(r['total_ns_a'])} | "
                         f"{fmt_time(r['total_ns_b'])} | {pct} | {r['count_a']} | {r['count_b']} |")
    return "\n".join(lines) + "\n"


def comparison_plots(c: Comparison) -> list[str]:
    """SVG plots of a comparison: iteration times of A and B, biggest kernel changes."""
    plots = []
    it = c.iterations
    if it:
        plots.append(svg_samples("Iteration times (each dot one iteration; bar: median)", [
            ("A " + it["range_a"], [d / 1e6 for d in it["durations_ns_a"]]),
            ("B " + it["range_b"], [d / 1e6 for d in it["durations_ns_b"]])], "ms"))
    rows = c.kernels[:6]
    if rows:
        items: list[tuple[str, float]] = []
        for r in rows:
            items += [(f"A {r['name'][:34]}", r["total_ns_a"] / 1e6),
                      (f"B {r['name'][:34]}", r["total_ns_b"] / 1e6)]
        plots.append(svg_bars("Kernel time, A vs B", items, "ms"))
    return plots


def comparison_html(c: Comparison) -> str:
    """The comparison as one self-contained HTML file with plots."""
    return html_page("Kernelscope comparison", comparison_markdown(c), comparison_plots(c))


# -- Perfetto / Chrome trace-event JSON ------------------------------------------------------------
def _us(ns: np.ndarray, t0: int) -> list[float]:
    return [round(v, 3) for v in ((ns.astype(np.int64) - t0) / 1000.0).tolist()]


def _names(df: Any, key: str) -> dict[int, str]:
    """``key`` -> name of a table's rows that have a name (None or NaN: none, never "None")."""
    return {int(k): str(n) for k, n in zip(df[key], df["name"], strict=False)
            if n is not None and n == n} if len(df) else {}


class _Slices:
    """Complete ("X") events of table rows, in the order added, and the pids they name."""

    def __init__(self, t0: int) -> None:
        self.t0 = t0
        self.ev: list[dict[str, Any]] = []
        self.seen_pids: set[int] = set()

    def add(self, df: Any, cat: str, name_col: str, pid: Any, tid: Any,
            args: dict[str, str] | None = None) -> None:
        """One event per row of ``df``; ``pid``/``tid`` a list per row or one value for all."""
        if not len(df):
            return
        ts = _us(df["start"].to_numpy(), self.t0)
        dur = [round(v, 3) for v in ((df["end"].to_numpy(np.int64) - df["start"].to_numpy(np.int64))
                                     / 1000.0).tolist()]
        names = df[name_col].astype(str).tolist()
        pids = pid if isinstance(pid, list) else [pid] * len(df)
        tids = tid if isinstance(tid, list) else [tid] * len(df)
        extra = {k: df[c].tolist() for k, c in (args or {}).items()}
        for i in range(len(df)):
            e = {"ph": "X", "cat": cat, "name": names[i], "ts": ts[i], "dur": dur[i], "pid": pids[i],
                 "tid": tids[i]}
            if extra:
                e["args"] = {k: (v[i].item() if hasattr(v[i], "item") else v[i]) for k, v in extra.items()}
            self.ev.append(e)
            self.seen_pids.add(pids[i])


def perfetto_trace(trace: Trace) -> dict[str, Any]:
    """The trace as a Chrome trace-event document (``{"traceEvents": [...]}``).

    Times are microseconds from the first event (``ts``/``dur`` floats with ns precision). CPU
    events use the real pid/tid; GPU events use pid ``GPU_PID_BASE + deviceId`` and tid = stream.
    """
    from engine.analysis.summary import capture_window

    t0, _ = capture_window(trace)
    out = _Slices(t0)
    api = trace.table("api", ["start", "end", "pid", "tid", "baseName", "correlationId"])
    out.add(api, "cuda_api", "baseName", [int(p) for p in api["pid"]], [int(t) for t in api["tid"]],
            {"correlationId": "correlationId"})
    _nvtx_slices(trace, out)
    k, m = _gpu_slices(trace, out)
    out.ev.extend(flow_events(api, [(k, "kernel"), (m, "memcpy")], t0))
    return {"traceEvents": _perfetto_meta(trace, out) + out.ev, "displayTimeUnit": "ns",
            "otherData": {"source": str(trace.info.path), "producer": "kernelscope",
                          "time_origin_ns": t0}}


def _nvtx_slices(trace: Trace, out: _Slices) -> None:
    """Push/pop ranges (their thread), start/end ranges (one row per process), then marks."""
    nv = trace.table("nvtx", ["start", "end", "eventType", "text", "pid", "tid"])
    if not len(nv):
        return
    rng = nv[nv["end"].notna() & nv["eventType"].isin([NVTX_PUSH_POP, NVTX_START_END])]
    rng = rng.assign(text=rng["text"].fillna(""))
    pushpop = rng[rng["eventType"] == NVTX_PUSH_POP]
    out.add(pushpop, "nvtx", "text", [int(p) for p in pushpop["pid"]], [int(t) for t in pushpop["tid"]])
    startend = rng[rng["eventType"] == NVTX_START_END]
    out.add(startend, "nvtx", "text", [int(p) for p in startend["pid"]], NVTX_STARTEND_TID)
    marks = nv[nv["eventType"] == NVTX_MARK]
    for s, text, p, t in zip(marks["start"], marks["text"].fillna(""), marks["pid"], marks["tid"],
                             strict=False):
        out.ev.append({"ph": "i", "s": "t", "cat": "nvtx", "name": str(text),
                       "ts": round((int(s) - out.t0) / 1000.0, 3), "pid": int(p), "tid": int(t)})


def _gpu_slices(trace: Trace, out: _Slices) -> tuple[Any, Any]:
    """Kernels, copies and memsets on their GPU's streams; the kernels' and copies' tables (for flows)."""
    gpu_cols = ["start", "end", "deviceId", "streamId", "correlationId", "pid"]
    k = trace.table("kernels", [*gpu_cols, "name", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"])
    if len(k):
        k = k.assign(
            grid=[f"({x},{y},{z})" for x, y, z in zip(k["gridX"], k["gridY"], k["gridZ"], strict=False)],
            block=[f"({x},{y},{z})" for x, y, z in zip(k["blockX"], k["blockY"], k["blockZ"], strict=False)])
    out.add(k, "kernel", "name", [GPU_PID_BASE + int(d) for d in k["deviceId"]],
            [int(s) for s in k["streamId"]],
            {"correlationId": "correlationId", "grid": "grid", "block": "block"} if len(k) else None)
    m = trace.table("memcpy", [*gpu_cols, "bytes", "operation"])
    if len(m):
        m = m.assign(label=["[CUDA memcpy " + str(o) + "]" for o in m["operation"]])
    out.add(m, "memcpy", "label", [GPU_PID_BASE + int(d) for d in m["deviceId"]],
            [int(s) for s in m["streamId"]],
            {"bytes": "bytes", "correlationId": "correlationId"} if len(m) else None)
    ms = trace.table("memset", [*gpu_cols, "bytes"])
    if len(ms):
        ms = ms.assign(label="[CUDA memset]")
    out.add(ms, "memset", "label", [GPU_PID_BASE + int(d) for d in ms["deviceId"]],
            [int(s) for s in ms["streamId"]], {"bytes": "bytes"} if len(ms) else None)
    return k, m


def _perfetto_meta(trace: Trace, out: _Slices) -> list[dict[str, Any]]:
    """Names for the processes (GPUs too) and the threads / streams the events use."""
    pnames = _names(trace.table("processes", ["pid", "name"]), "pid")
    threads = trace.table("threads", ["pid", "tid", "name"])
    meta: list[dict[str, Any]] = []
    gnames = _names(trace.table("gpus", ["id", "name"]), "id")
    for pid in sorted(out.seen_pids):
        if pid >= GPU_PID_BASE:
            dev = pid - GPU_PID_BASE
            name = f"GPU {dev}" + (f" {gnames[dev]}" if dev in gnames else "")
        else:
            name = pnames.get(pid, f"process {pid}")
        meta.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
    streams = {(e["pid"], e["tid"]) for e in out.ev if e["pid"] >= GPU_PID_BASE}
    for pid, tid in sorted(streams):
        meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                     "args": {"name": f"stream {tid}"}})
    used = {(e["pid"], e["tid"]) for e in out.ev}
    if len(threads):
        for p, t, n in zip(threads["pid"], threads["tid"], threads["name"], strict=False):
            if (int(p), int(t)) in used and n is not None:
                meta.append({"ph": "M", "name": "thread_name", "pid": int(p), "tid": int(t),
                             "args": {"name": str(n)}})
    return meta


def flow_events(api: Any, gpu: list[tuple[Any, str]], t0: int) -> list[dict[str, Any]]:
    """Flow arrows from CUDA API calls to the GPU work they started.

    A GPU row (kernel, memcpy) is linked to the API call of the same process with the same
    ``correlationId``. Each link is a pair of trace events with one ``id``: ``"ph": "s"`` at the
    call's start on its CPU thread and ``"ph": "f"`` with ``"bp": "e"`` (bind to the enclosing
    slice) at the GPU row's start on its stream, so both ends sit on the slices already exported.
    Rows without a matching call (e.g. work from a process whose API trace was not captured) get none.
    """
    if not len(api):
        return []
    calls: dict[tuple[int, int], tuple[float, int, int]] = {}
    api_ts = _us(api["start"].to_numpy(), t0)
    for ts, p, t, c in zip(api_ts, api["pid"].tolist(), api["tid"].tolist(), api["correlationId"].tolist(),
                           strict=False):
        if c is not None and c == c:  # not NULL / NaN
            calls.setdefault((int(p), int(c)), (ts, int(p), int(t)))
    out: list[dict[str, Any]] = []
    fid = 0
    for df, kind in gpu:
        if not len(df):
            continue
        ts_gpu = _us(df["start"].to_numpy(), t0)
        for ts, p, c, d, s in zip(ts_gpu, df["pid"].tolist(), df["correlationId"].tolist(),
                                  df["deviceId"].tolist(), df["streamId"].tolist(), strict=False):
            if p is None or c is None or p != p or c != c:
                continue
            call = calls.get((int(p), int(c)))
            if call is None:
                continue
            fid += 1
            args = {"correlationId": int(c), "to": kind}
            out.append({"ph": "s", "cat": FLOW_CAT, "name": FLOW_NAME, "id": fid, "ts": call[0],
                        "pid": call[1], "tid": call[2], "args": args})
            out.append({"ph": "f", "bp": "e", "cat": FLOW_CAT, "name": FLOW_NAME, "id": fid, "ts": ts,
                        "pid": GPU_PID_BASE + int(d), "tid": int(s), "args": args})
    return out


def perfetto_json(trace: Trace) -> str:
    """:func:`perfetto_trace` serialized (compact)."""
    return json.dumps(perfetto_trace(trace), separators=(",", ":"))
