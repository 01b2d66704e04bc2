"""Per-kernel tables of an Nsight Compute report, grouped as ncu's sections group them.

- :func:`kernel_table`: one row per profiled kernel (action) with the headline numbers, its
  bottleneck verdict and its most promising rule;
- :func:`kernel_sections`: one kernel's sections (GPU Speed Of Light, Memory Workload Analysis,
  Launch Statistics, Occupancy, Compute Workload Analysis, Scheduler and Warp State, Source
  Counters), each a ``metric, value, unit`` table; a metric the report lacks is a "not collected"
  row that names the ncu option that would collect it;
- :func:`rules_table`: the rule results stored in the report, ranked across all kernels by
  estimated speedup × kernel duration ("what to fix first").
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from engine.reports.ncu import (  # noqa: F401 - the metric catalogue, re-exported
    ACHIEVED_OCC,
    DRAM_PCT,
    DURATION,
    LAYOUT,
    LIMITERS,
    MEM_PCT,
    SM_PCT,
    STALL_PREFIX,
    STALL_SUFFIX,
    THEORETICAL_OCC,
    summary_metrics,
    top_stalls,
)
from engine.system.errors import KernelscopeError

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.ncu import NcuReport

NOT_COLLECTED = "not collected"
SECTION_COLUMNS = ["metric", "value", "unit", "text", "name", "note"]
KERNEL_TABLE_COLUMNS = [
    "id", "name", "short_name", "mangled_name", "duration_ns", "grid", "block", "registers",
    "shared_mem_static", "shared_mem_dynamic", "sm_throughput_pct", "memory_throughput_pct",
    "dram_throughput_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct", "verdict",
    "verdict_reason", "top_rule", "top_speedup_pct", "nvtx_range", "device", "cc",
]
RULES_TABLE_COLUMNS = [
    "id", "kernel", "rule", "name", "section", "type", "title", "message", "speedup_type", "speedup_pct",
    "duration_ns", "weighted_ns",
]

# Metric names used in several places.
def how_to_collect(section: str) -> str:
    """The ncu option that collects a section, as a sentence fragment."""
    return f"collect with `ncu --section {section}` (or `--set full`)"


def _fmt(value: float, unit: str) -> str:
    if unit == "ns" and value >= 1000:
        return f"{value / 1000:,.2f} us"
    if value == int(value) and abs(value) < 1e15:
        text = f"{int(value):,}"
    else:
        text = f"{value:,.2f}"
    return f"{text} {unit}".strip()


def _kernel_ids(report: NcuReport) -> list[int]:
    return [int(k["ID"]) for k in report.kernel_records()]


def _check_id(report: NcuReport, action_id: int) -> None:
    if int(action_id) not in _kernel_ids(report):
        raise KernelscopeError(
            f"The report has no kernel with ID {action_id}; its IDs are "
            f"{', '.join(str(i) for i in _kernel_ids(report))}."
        )


def _missing_note(report: NcuReport, section: str) -> str:
    if report.source == "csv-details":  # the page holds only the sections' header metrics
        return ("not in a `--page details` export: open the .ncu-rep or a `--page raw` export; if it "
                f"was never collected, {how_to_collect(section)}")
    return how_to_collect(section)


def _row(report: NcuReport, kid: int, metric: str, label: str, section: str) -> list[Any]:
    v = report.value(kid, metric)
    if v is None:
        return [label, NOT_COLLECTED, "", NOT_COLLECTED, metric, _missing_note(report, section)]
    unit = report.unit(metric)
    return [label, v, unit, _fmt(v, unit), metric, ""]


def occupancy_limiter(report: NcuReport, kid: int) -> tuple[str, dict[str, float]] | None:
    """What limits a kernel's theoretical occupancy: the smallest per-SM block limit.

    Returns:
        (limiter words, e.g. "registers" or "registers and shared memory", {limiter: blocks per SM}),
        or None when the occupancy limits were not collected.
    """
    limits = {what: report.value(kid, m) for m, what in LIMITERS}
    have = {k: v for k, v in limits.items() if v is not None}
    if not have:
        return None
    low = min(have.values())
    names = [k for k, v in have.items() if v == low]
    return " and ".join(names), have


def kernel_sections(
    report: NcuReport, action_id: int, *, resolve_source: bool = True
) -> dict[str, pd.DataFrame]:
    """One kernel's sections as tables, in ncu's order (:func:`section_rows` as DataFrames).

    Raises:
        KernelscopeError: The report has no kernel with that ID.
    """
    import pandas as pd

    return {title: pd.DataFrame(r, columns=SECTION_COLUMNS)
            for title, r in section_rows(report, action_id, resolve_source=resolve_source).items()}


def section_rows(
    report: NcuReport, action_id: int, *, resolve_source: bool = True
) -> dict[str, list[list[Any]]]:
    """One kernel's sections as rows, in ncu's order.

    Args:
        report: A report read by :func:`engine.reports.ncu.read_ncu`.
        action_id: The kernel's ID (``kernels["ID"]``).
        resolve_source: Disassemble the hottest instructions (SASS text, file:line). The first time
            per kernel this costs 50-100 ms of ncu_report decoding; without it the Source Counters
            rows carry PCs, sample counts and stall reasons only.

    Returns:
        Section title → rows of :data:`SECTION_COLUMNS`: ``metric`` (the label ncu prints), ``value`` (a float
        in base units, or the text "not collected"), ``unit``, ``text`` (value and unit for display),
        ``name`` (the ncu metric name, empty for derived rows) and ``note`` (for a "not collected"
        row, the ncu option that collects it).

    Raises:
        KernelscopeError: The report has no kernel with that ID.
    """
    kid = int(action_id)
    _check_id(report, kid)
    rows: dict[str, list[list[Any]]] = {}
    for title, section, metrics in LAYOUT:
        out = rows.setdefault(title, [])
        for metric, label in metrics:
            out.append(_row(report, kid, metric, label, section))

    mem = rows["Memory Workload Analysis"]
    rd, wr = report.value(kid, "dram__bytes_read.sum"), report.value(kid, "dram__bytes_write.sum")
    if rd is not None and wr is not None:
        mem.insert(0, ["DRAM Bytes (read + write)", rd + wr, "byte", _fmt(rd + wr, "byte"), "", ""])
    rows["Occupancy"].append(_occupancy_limiter_row(report, kid))
    rows["Compute Workload Analysis"].append(_wgmma_row(report, kid))
    rows["Scheduler and Warp State"].extend(_stall_rows(report, kid))
    rows["Source Counters"].extend(_source_rows(report, kid, resolve_source))
    return rows


def _occupancy_limiter_row(report: NcuReport, kid: int) -> list[Any]:
    """The Occupancy section's "Occupancy Limiter" row."""
    lim = occupancy_limiter(report, kid)
    if lim is None:
        return ["Occupancy Limiter", NOT_COLLECTED, "", NOT_COLLECTED, "", _missing_note(report, "Occupancy")]
    words, limits = lim
    blocks = limits[words.split(" and ")[0]]
    return ["Occupancy Limiter", words, "", f"{words} ({_fmt(blocks, '')} blocks per SM)", "", ""]


def _wgmma_row(report: NcuReport, kid: int) -> list[Any]:
    """The Compute Workload Analysis section's "Uses wgmma (Hopper)" row."""
    gmma = report.value(kid, "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active")
    cc = str(next(k["CC"] for k in report.kernel_records() if int(k["ID"]) == kid))
    if gmma is None:
        return ["Uses wgmma (Hopper)", NOT_COLLECTED, "", NOT_COLLECTED, "",
                _missing_note(report, "ComputeWorkloadAnalysis")]
    used = "yes" if gmma > 0 else ("no" if cc.startswith("9.") else "no (needs compute capability 9.x)")
    return ["Uses wgmma (Hopper)", used, "", used, "", ""]


def _stall_rows(report: NcuReport, kid: int) -> list[list[Any]]:
    """The Scheduler and Warp State section's top stall reasons (or a "not collected" row)."""
    stalls = top_stalls(report, kid)
    if not stalls:
        return [["Top Stall Reasons", NOT_COLLECTED, "", NOT_COLLECTED, "",
                 _missing_note(report, "WarpStateStats")]]
    return [[f"Stall #{rank}: {reason.replace('_', ' ')}", cycles, "cycles/inst",
             f"{cycles:,.2f} cycles per issued instruction", f"{STALL_PREFIX}{reason}{STALL_SUFFIX}", ""]
            for rank, (reason, cycles) in enumerate(stalls, 1)]


def _source_rows(report: NcuReport, kid: int, resolve_source: bool) -> list[list[Any]]:
    """The Source Counters section's hottest instructions and lines (SASS and file:line if resolved)."""
    if resolve_source:
        from engine.reports.ncu import resolve_sources

        resolve_sources(report, kid)
    mine = report.source_records(kid)
    if not mine:
        return [["Hottest Instructions", NOT_COLLECTED, "", NOT_COLLECTED, "",
                 _missing_note(report, "SourceCounters") + "; build with `-lineinfo` for file:line"]]
    src: list[list[Any]] = []
    total = report.value(kid, "smsp__pcsamp_sample_count")
    for r in mine:
        where = f"{r['file']}:{r['line']}" if r["file"] else f"PC 0x{int(r['pc']):x}"
        sass = r["sass"] if isinstance(r["sass"], str) else ""
        note = f"{sass}  [top stall: {r['top_stall']} {r['top_stall_samples']}]".strip()
        n = int(r["samples"])
        src.append([where, float(n), "samples",
                    f"{n:,} samples" + (f" of {int(total):,}" if total else ""), "", note])
    lines = report.line_records(kid)
    if lines is not None:
        for rank, ln in enumerate(lines, 1):
            src.append([f"Hottest line #{rank}: {ln['file']}:{ln['line']}", float(ln["samples"]),
                        "samples", f"{int(ln['samples']):,} samples ({ln['pct']:.1f} %)", "",
                        "samples of every instruction on that line"])
    if not resolve_source and any(r["sass"] is None for r in mine):
        src.append(["SASS and file:line", "not read", "", "not read", "",
                    "`kernelscope ncu R --page sections --source` disassembles the hottest instructions"])
    if resolve_source and not any(str(r["file"]) != "" for r in mine):
        src.append(["file:line", NOT_COLLECTED, "", NOT_COLLECTED, "",
                    "build the kernel with `nvcc -lineinfo` to map instructions to source lines"])
    return src


def rules_table(report: NcuReport) -> pd.DataFrame:
    """The rule results of all kernels, ranked (:func:`rules_rows` as a DataFrame).

    Args:
        report: A report read by :func:`engine.reports.ncu.read_ncu`.

    Returns:
        One row per rule result with columns :data:`RULES_TABLE_COLUMNS`.
    """
    import pandas as pd

    rows = rules_rows(report)
    if not rows:
        return pd.DataFrame(columns=RULES_TABLE_COLUMNS)
    return pd.DataFrame(rows, columns=RULES_TABLE_COLUMNS)


def rules_rows(report: NcuReport) -> list[list[Any]]:
    """The rule results of all kernels, ranked by estimated speedup × kernel duration.

    ``weighted_ns`` = ``speedup_pct`` / 100 × ``duration_ns``: the time a fix could save, by ncu's
    own estimate. Rules without an estimate rank last (``weighted_ns`` NaN), in report order.

    Args:
        report: A report read by :func:`engine.reports.ncu.read_ncu`.

    Returns:
        One row per rule result, :data:`RULES_TABLE_COLUMNS` in order (NaN where not known).
    """
    kernels = {int(k["ID"]): k for k in report.kernel_records()}
    rows: list[tuple[bool, float, int, list[Any]]] = []
    for order, r in enumerate(report.rule_records()):
        kid = int(r["ID"])
        k = kernels.get(kid)
        dur = float(k["duration_ns"]) if k is not None else math.nan
        sp = float(r["speedup_pct"])
        weighted = sp / 100.0 * dur
        row = [kid, k["Kernel Name"] if k is not None else math.nan, r["rule"], r["name"], r["section"],
               r["type"], r["title"], r["message"], r["speedup_type"], sp, dur, weighted]
        rows.append((math.isnan(weighted), 0.0 if math.isnan(weighted) else -weighted, order, row))
    rows.sort(key=lambda t: t[:3])
    return [t[3] for t in rows]


def _count(x: Any) -> int | None:
    """A count cell as an int (None when missing or NaN)."""
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else int(x)


def kernel_table(report: NcuReport) -> pd.DataFrame:
    """One row per profiled kernel (:func:`kernel_rows` as a DataFrame).

    Args:
        report: A report read by :func:`engine.reports.ncu.read_ncu`.

    Returns:
        Columns :data:`KERNEL_TABLE_COLUMNS`.
    """
    import pandas as pd

    return pd.DataFrame(kernel_rows(report), columns=KERNEL_TABLE_COLUMNS)


def kernel_rows(report: NcuReport) -> list[list[Any]]:
    """One row per profiled kernel: launch, duration, throughputs, occupancy, verdict, top rule.

    Args:
        report: A report read by :func:`engine.reports.ncu.read_ncu`.

    Returns:
        :data:`KERNEL_TABLE_COLUMNS` in order; percentages and durations are floats (NaN when not
        collected), ``top_rule`` is the rule with the largest estimated speedup for that kernel.
    """
    from engine.analysis.ncu.verdict import kernel_metrics, verdict

    best: dict[int, tuple[str, float]] = {}
    # Within one kernel, ranking by weighted time is ranking by speedup: the first rule is the best.
    for r in rules_rows(report):
        sp = r[RULES_TABLE_COLUMNS.index("speedup_pct")]
        if not math.isnan(sp) and int(r[0]) not in best:
            best[int(r[0])] = (str(r[2]), float(sp))

    def num(x: float | None) -> float:
        return math.nan if x is None else float(x)

    out = []
    for k in report.kernel_records():
        kid = int(k["ID"])
        v = verdict(kernel_metrics(report, kid))
        rule, sp = best.get(kid, ("", math.nan))
        out.append([
            kid, k["Kernel Name"], k["Base Name"], k["Mangled Name"], float(k["duration_ns"]),
            k["Grid Size"], k["Block Size"], _count(k["Registers Per Thread"]),
            _count(k["Static Shared Memory Per Block"]), _count(k["Dynamic Shared Memory Per Block"]),
            num(report.value(kid, SM_PCT)), num(report.value(kid, MEM_PCT)), num(report.value(kid, DRAM_PCT)),
            num(report.value(kid, ACHIEVED_OCC)), num(report.value(kid, THEORETICAL_OCC)),
            v.kind, v.reason, rule, sp, k["NVTX Range"], k["Device"], k["CC"],
        ])
    return out
