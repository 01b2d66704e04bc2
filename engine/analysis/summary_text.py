"""The summary as readable terminal text (``kernelscope summary`` without ``--json``), and the formatters.

Shares are unions; sums are labelled as sums. Re-exported by :mod:`engine.analysis.summary`.
``fmt_time``, ``fmt_bytes``, ``fmt_rate``, ``fmt_pct`` and ``fmt_value`` are the engine's one way
to print a duration, a size, a rate, a share or a value in a unit (``findings.model`` re-exports
them): never scientific notation, never "None".
"""

from __future__ import annotations

import math
import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.analysis.summary_model import GpuPart, Summary


def fmt_time(ns: float) -> str:
    """A duration from nanoseconds: 1.23 s, 4.56 ms, 78.9 µs, 850 ns (the sign kept).

    Seconds stay seconds past a minute (155.30 s, not 2 min 35.3 s): time axes count in seconds.
    """
    if abs(ns) >= 1e9:
        return f"{ns / 1e9:,.2f} s"
    if abs(ns) >= 1e5:
        return f"{ns / 1e6:,.2f} ms"
    if abs(ns) >= 1e3 or ns == 0:
        return f"{ns / 1e3:,.1f} µs"
    return f"{ns:,.0f} ns"


def fmt_bytes(n: float) -> str:
    """A size in decimal units, as nsys prints them: 512 B, 4.1 kB, 83.9 MB, 1.88 GB."""
    a = abs(n)
    if a >= 1e9:
        return f"{n / 1e9:,.2f} GB"
    if a >= 1e6:
        return f"{n / 1e6:,.1f} MB"
    if a >= 1e3:
        return f"{n / 1e3:,.1f} kB"
    return f"{n:,.0f} B"


def fmt_rate(bytes_per_s: float) -> str:
    """A transfer rate: 7.50 GB/s, 12.3 MB/s, 4.0 kB/s, 900 B/s."""
    return fmt_bytes(bytes_per_s) + "/s"


def fmt_pct(p: float | None, digits: int = 1) -> str:
    """A share: '39.8 %', '< 0.1 %' for a tiny non-zero one, 'n/a' when unknown."""
    if p is None or not math.isfinite(p):
        return "n/a"
    floor = 10.0 ** -digits
    if 0 < abs(p) < floor:
        return f"< {floor:.{digits}f} %"
    return f"{p:,.{digits}f} %"


def fmt_number(v: float) -> str:
    """A plain number with two significant decimals at least, never in scientific notation."""
    if v == 0 or not math.isfinite(v) or abs(v) >= 0.01:
        return f"{v:,.2f}"
    decimals = min(-math.floor(math.log10(abs(v))) + 1, 12)  # two significant digits
    return f"{v:.{decimals}f}"


#: units :func:`fmt_value` converts: (formatter, scale to the formatter's unit)
_UNITS = {"ns": ("time", 1.0), "µs": ("time", 1e3), "us": ("time", 1e3), "ms": ("time", 1e6),
          "s": ("time", 1e9), "B": ("bytes", 1.0), "kB": ("bytes", 1e3), "MB": ("bytes", 1e6),
          "GB": ("bytes", 1e9), "B/s": ("rate", 1.0), "MB/s": ("rate", 1e6), "GB/s": ("rate", 1e9),
          "%": ("pct", 1.0)}


def fmt_value(v: float, unit: str) -> str:
    """``v`` in ``unit`` printed in the unit that reads best (ms → µs, GB → kB ...)."""
    kind, scale = _UNITS.get(unit, ("", 1.0))
    if kind == "time":
        return fmt_time(v * scale)
    if kind == "bytes":
        return fmt_bytes(v * scale)
    if kind == "rate":
        return fmt_rate(v * scale)
    if kind == "pct":
        return fmt_pct(v)
    return f"{fmt_number(v)} {unit}".strip()


_ms = fmt_time


def _share(p: float | None) -> str:
    return "   n/a" if p is None else f"{p:6.1f}"


def _overlap_note(parts: tuple[GpuPart, ...]) -> list[str]:
    """A footnote when the parts' shares of busy add up to more than 100 % (they overlap in time)."""
    shares = sum(p.pct_of_busy or 0.0 for p in parts)
    if shares <= 100.5:
        return []
    bar = ", ".join(f"{p.part} {fmt_pct(p.attributed_pct_of_busy)}" for p in parts
                    if p.attributed_pct_of_busy)
    text = (f"(the parts overlap in time, so their shares add up to {shares:.1f} % of busy; without "
            f"overlap, each overlap given to the part listed first as the stacked bar draws it: {bar})")
    return textwrap.wrap(text, 108, initial_indent="    ", subsequent_indent="     ")


def format_summary(s: Summary) -> str:
    """Render a summary as readable terminal text (shares are unions; sums are labelled as sums)."""
    rep = s.report
    lines = [f"Report   {rep.path}  ({rep.kind}, {rep.product_version or 'unknown version'})"]
    models: dict[str, int] = {}  # one line per GPU model, with a count: "2 × NVIDIA H100 ..."
    for info in rep.gpus:
        sms = f" ({info.smCount} SMs)" if info.smCount else ""
        label = f"{info.name or 'unknown GPU'}{sms}"
        models[label] = models.get(label, 0) + 1
    for label, n in models.items():
        lines.append(f"GPU      {f'{n} × ' if n > 1 else ''}{label}")
    lines.append(f"Capture  {_ms(s.wall.span_ns)} wall span")
    lines += _host_lines(s) + _gpu_lines(s)
    if len(s.processes) > 1:
        lines.append("")
        lines.append("Processes (API and GPU time are unions within each process)")
        for pr in s.processes:
            lines.append(f"  pid {pr.pid:<10} {(pr.name or '')[:24]:<24} API {_ms(pr.api_union_ns):>12} "
                         f"({_share(pr.api_pct_of_wall)} %)  GPU busy {_ms(pr.gpu_busy_ns):>12} "
                         f"({_share(pr.gpu_busy_pct_of_wall)} %)  GPUs {','.join(pr.devices) or '-'}")
    if s.bandwidth:
        lines.append("")
        lines.append("Achieved copy bandwidth (bytes over the copies' durations summed; the union is the "
                     "part's time above)")
        width = max(len(b.direction) for b in s.bandwidth)
        for b in s.bandwidth:
            rate = fmt_rate(b.bytes_per_s) if b.bytes_per_s is not None else "n/a"
            union = f", {_ms(b.union_ns)} union" if b.union_ns is not None else ""
            lines.append(f"  {b.direction:<{width}} {b.memory:<10} {rate:>12}  ({b.count} copies, "
                         f"{fmt_bytes(b.bytes)} in {_ms(b.total_ns)} summed{union})")
    lines += _steps_lines(s)
    if s.missing:
        lines.append("")
        lines.append("Not in this capture: " + "; ".join(s.missing) + ".")
    if s.findings:
        lines.append("")
        lines.append("Top findings (kernelscope findings for all)")
        lines += [f"  - [{f.severity.upper()}] {f.title}: {f.gain}" for f in s.findings]
    return "\n".join(lines)


def _host_lines(s: Summary) -> list[str]:
    """CUDA API time: the union and the sum, per category and per thread."""
    h = s.host
    lines = ["", f"CUDA API time {_ms(h.union_ns)} with a call in flight ({h.pct_of_wall or 0:.1f} % of "
                 f"wall); {_ms(h.total_ns)} summed over {h.calls} calls on {h.thread_count} thread(s)",
             f"  {'category':<36} {'summed':>14} {'% of API':>8} {'in flight':>12} {'% of wall':>9}"]
    for c in h.categories:
        lines.append(f"  {c.label:<36} {_ms(c.total_ns):>14} {_share(c.pct_of_api):>8} {_ms(c.union_ns):>12} "
                     f"{_share(c.pct_of_wall):>9}  {c.calls:>8} calls")
    if h.thread_count > 1:
        lines.append("  per thread (union of its calls):")
        for t in h.threads[:8]:
            lines.append(f"    pid {t.pid} tid {t.tid:<10} {_ms(t.union_ns):>14} "
                         f"{_share(t.pct_of_wall)} % of wall  {t.calls:>8} calls")
    return lines


def _gpu_lines(s: Summary) -> list[str]:
    """GPU busy time, per GPU and per part (unions, with the sums over streams beside them)."""
    g = s.gpu
    if g.device_count > 1:
        lines = ["", f"GPU busy (any of {g.device_count} GPUs) {_ms(g.busy_ns)} "
                     f"({g.busy_pct_of_wall or 0:.1f} % of wall), none busy {_ms(g.idle_ns)}; "
                     f"busy summed over GPUs {_ms(g.busy_sum_ns)} (a sum)"]
    else:
        lines = ["", f"GPU busy {_ms(g.busy_ns)} ({g.busy_pct_of_wall or 0:.1f} % of wall), idle "
                     f"{_ms(g.idle_ns)}"]
    for d in g.devices:
        head = f"  GPU {d.device}" + (f" {d.name}" if d.name else "")
        lines.append(f"{head}: busy {_ms(d.busy_ns)} ({d.busy_pct_of_wall or 0:.1f} % of wall), "
                     f"{len(d.streams)} stream(s)")
        lines.append(f"    {'part':<40} {'union':>12} {'% of busy':>9} {'% of wall':>9} "
                     f"{'summed over streams':>20}")
        for p in d.parts:
            lines.append(f"    {p.part:<40} {_ms(p.union_ns):>12} {_share(p.pct_of_busy):>9} "
                         f"{_share(p.pct_of_wall):>9} {_ms(p.total_ns):>20}")
        lines += _overlap_note(d.parts)
    return lines


def _steps_lines(s: Summary) -> list[str]:
    """The steps: how they were found, per-step medians and API means, or why there are none."""
    it = s.iterations
    if not it:
        return ["", s.no_steps[0].upper() + s.no_steps[1:] + "."] if s.no_steps else []
    lines = ["", f"Steps of {it.range} (pid {it.pid}, {it.source}, chosen by {it.chosen_by}): {it.count}, "
                 f"{it.warmup_count} warm-up, first {_ms(it.first_ns)}, steady median "
                 f"{_ms(it.steady_median_ns)} on the GPU, GPU busy per step "
                 f"{_ms(it.gpu_busy_per_step_ns)} (median)"]
    from engine.analysis.step_model import METHOD_WORDS

    found = METHOD_WORDS.get(it.method, it.method)
    lines.append(f"  how: {found}, confidence {it.confidence:.0%}" + (f" ({it.why})" if it.why else ""))
    host_ns = it.host_steady_median_ns
    if host_ns is not None and it.steady_median_ns and host_ns < 0.8 * it.steady_median_ns:
        lines.append(f"  the host runs ahead: its side of a step takes {_ms(host_ns)}, the GPU's "
                     f"{_ms(it.steady_median_ns)} (the job's pace is the GPU's)")
    if it.outlier_steps:
        shown = ", ".join(map(str, it.outlier_steps[:10])) + (" …" if len(it.outlier_steps) > 10 else "")
        lines.append(f"  outlier steps (> 1.5x the median: stalls): {shown}")
    if it.api_per_iteration:
        steady = it.count - it.warmup_count if it.count > it.warmup_count else it.count
        lines.append(f"  CUDA API time per steady step (a mean over the {steady} steady steps, stalls "
                     "included; the host's side of each step):")
    lines += [f"  per step       {a.category:<16} {_ms(a.per_iteration_ns or 0):>12}"
              for a in it.api_per_iteration]
    lines += [f"  warm-up        {a.category:<16} {_ms(a.total_ns):>12}" for a in it.api_warmup]
    lines += [f"  outside steps  {a.category:<16} {_ms(a.total_ns):>12}" for a in it.api_one_time]
    if len(it.processes) > 1:
        lines += [f"  pid {ps.pid}: {ps.count} steps of {ps.range}, {ps.warmup_count} warm-up, steady median "
                  f"{_ms(ps.steady_median_ns)}" for ps in it.processes]
    others = [c for c in it.candidates if c != it.range]
    if others:
        lines.append(f"  other repeating ranges (--range): {', '.join(others[:6])}")
    return lines
