"""The summary as readable terminal text (``kernelscope summary`` without ``--json``).

Shares are unions; sums are labelled as sums. Re-exported by :mod:`engine.analysis.summary`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.analysis.summary_model import Summary


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms" if ns >= 1e5 else f"{ns / 1e3:,.1f} µs"


def _share(p: float | None) -> str:
    return "   n/a" if p is None else f"{p:6.1f}"


def format_summary(s: Summary) -> str:
    """Render a summary as readable terminal text (shares are unions; sums are labelled as sums)."""
    rep = s.report
    lines = [f"Report   {rep.path}  ({rep.kind}, {rep.product_version or 'unknown version'})"]
    for info in rep.gpus:
        lines.append(f"GPU      {info.name} ({info.smCount} SMs)")
    lines.append(f"Capture  {_ms(s.wall.span_ns)} wall span")
    h = s.host
    lines.append("")
    lines.append(f"CUDA API time {_ms(h.union_ns)} with a call in flight ({h.pct_of_wall or 0:.1f} % "
                 f"of wall); "
                 f"{_ms(h.total_ns)} summed over {h.calls} calls on {h.thread_count} thread(s)")
    lines.append(f"  {'category':<36} {'summed':>14} {'% of API':>8} {'in flight':>12} {'% of wall':>9}")
    for c in h.categories:
        lines.append(f"  {c.label:<36} {_ms(c.total_ns):>14} {_share(c.pct_of_api):>8} {_ms(c.union_ns):>12} "
                     f"{_share(c.pct_of_wall):>9}  {c.calls:>8} calls")
    if h.thread_count > 1:
        lines.append("  per thread (union of its calls):")
        for t in h.threads[:8]:
            lines.append(f"    pid {t.pid} tid {t.tid:<10} {_ms(t.union_ns):>14} "
                         f"{_share(t.pct_of_wall)} % of wall"
                         f"  {t.calls:>8} calls")
    g = s.gpu
    lines.append("")
    if g.device_count > 1:
        lines.append(f"GPU busy (any of {g.device_count} GPUs) {_ms(g.busy_ns)} "
                     f"({g.busy_pct_of_wall or 0:.1f} % of wall), none busy {_ms(g.idle_ns)}; "
                     f"busy summed over GPUs {_ms(g.busy_sum_ns)} (a sum)")
    else:
        lines.append(f"GPU busy {_ms(g.busy_ns)} ({g.busy_pct_of_wall or 0:.1f} % of wall), idle "
                     f"{_ms(g.idle_ns)}")
    for d in g.devices:
        head = f"  GPU {d.device}" + (f" {d.name}" if d.name else "")
        lines.append(f"{head}: busy {_ms(d.busy_ns)} ({d.busy_pct_of_wall or 0:.1f} % of wall), "
                     f"{len(d.streams)} stream(s)")
        lines.append(f"    {'part':<40} {'union':>12} {'% of busy':>9} {'% of wall':>9} "
                     f"{'summed over streams':>20}")
        for p in d.parts:
            lines.append(f"    {p.part:<40} {_ms(p.union_ns):>12} {_share(p.pct_of_busy):>9} "
                         f"{_share(p.pct_of_wall):>9} {_ms(p.total_ns):>20}")
    if len(s.processes) > 1:
        lines.append("")
        lines.append("Processes (API and GPU time are unions within each process)")
        for pr in s.processes:
            lines.append(f"  pid {pr.pid:<10} {(pr.name or '')[:24]:<24} API {_ms(pr.api_union_ns):>12} "
                         f"({_share(pr.api_pct_of_wall)} %)  GPU busy {_ms(pr.gpu_busy_ns):>12} "
                         f"({_share(pr.gpu_busy_pct_of_wall)} %)  GPUs {','.join(pr.devices) or '-'}")
    if s.bandwidth:
        lines.append("")
        lines.append("Achieved copy bandwidth")
        for b in s.bandwidth:
            lines.append(f"  {b.direction:<18} {b.memory:<10} {b.gb_per_s or 0:8.2f} GB/s"
                         f"  ({b.count} copies, {b.bytes / 1e6:,.1f} MB)")
    it = s.iterations
    if it:
        lines.append("")
        lines.append(f"Steps of {it.range} (pid {it.pid}, {it.source}, chosen by {it.chosen_by}): "
                     f"{it.count}, "
                     f"{it.warmup_count} warm-up, first {_ms(it.first_ns)}, steady median "
                     f"{_ms(it.steady_median_ns)} on the GPU, GPU busy per step "
                     f"{_ms(it.gpu_busy_per_step_ns)}")
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
        for a in it.api_per_iteration:
            lines.append(f"  per step       {a.category:<16} {_ms(a.per_iteration_ns or 0):>12}")
        for a in it.api_warmup:
            lines.append(f"  warm-up        {a.category:<16} {_ms(a.total_ns):>12}")
        for a in it.api_one_time:
            lines.append(f"  outside steps  {a.category:<16} {_ms(a.total_ns):>12}")
        if len(it.processes) > 1:
            for ps in it.processes:
                lines.append(f"  pid {ps.pid}: {ps.count} steps of {ps.range}, {ps.warmup_count} warm-up, "
                             f"steady median {_ms(ps.steady_median_ns)}")
        others = [c for c in it.candidates if c != it.range]
        if others:
            lines.append(f"  other repeating ranges (--range): {', '.join(others[:6])}")
    if not it and s.no_steps:
        lines.append("")
        lines.append(s.no_steps[0].upper() + s.no_steps[1:] + ".")
    if s.missing:
        lines.append("")
        lines.append("Not in this capture: " + "; ".join(s.missing) + ".")
    if s.findings:
        lines.append("")
        lines.append("Top findings (kernelscope findings for all)")
        lines += [f"  - [{f.severity.upper()}] {f.title}: {f.gain}" for f in s.findings]
    return "\n".join(lines)
