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

from engine.errors import KernelscopeError

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
DURATION = "gpu__time_duration.sum"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEM_PCT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_PCT = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
ACHIEVED_OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL_OCC = "sm__maximum_warps_per_active_cycle_pct"
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"

#: (title, ncu section identifier that collects the metrics, ((metric, label), ...)).
#: The identifier is what ``ncu --section`` takes; every one of them is also in ``--set full``.
LAYOUT: list[tuple[str, str, tuple[tuple[str, str], ...]]] = [
    ("GPU Speed Of Light", "SpeedOfLight", (
        (DURATION, "Duration"),
        (SM_PCT, "Compute (SM) Throughput"),
        (MEM_PCT, "Memory Throughput"),
        (DRAM_PCT, "DRAM Throughput"),
        ("l1tex__throughput.avg.pct_of_peak_sustained_active", "L1/TEX Cache Throughput"),
        ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2 Cache Throughput"),
        ("gpc__cycles_elapsed.max", "Elapsed Cycles"),
        ("sm__cycles_active.avg", "SM Active Cycles"),
        ("gpc__cycles_elapsed.avg.per_second", "SM Frequency"),
        ("dram__cycles_elapsed.avg.per_second", "DRAM Frequency"),
    )),
    ("Memory Workload Analysis", "MemoryWorkloadAnalysis", (
        ("dram__bytes.sum.per_second", "DRAM Bandwidth"),
        ("gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed", "Mem Busy"),
        ("gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed", "Max Bandwidth"),
        ("sm__memory_throughput.avg.pct_of_peak_sustained_elapsed", "Mem Pipes Busy"),
        ("l1tex__t_sector_hit_rate.pct", "L1/TEX Hit Rate"),
        ("lts__t_sector_hit_rate.pct", "L2 Hit Rate"),
        ("derived__local_spilling_requests", "Local Memory Spilling Requests"),
    )),
    ("Memory Workload Analysis", "MemoryWorkloadAnalysis_Chart", (
        ("dram__bytes_read.sum", "DRAM Bytes Read"),
        ("dram__bytes_write.sum", "DRAM Bytes Written"),
    )),
    ("Memory Workload Analysis", "MemoryWorkloadAnalysis_Tables", (
        ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "Shared Load Bank Conflicts"),
        ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "Shared Store Bank Conflicts"),
        ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "Shared Bank Conflicts (all)"),
    )),
    ("Launch Statistics", "LaunchStats", (
        ("launch__grid_size", "Grid Size"),
        ("launch__block_size", "Block Size"),
        ("launch__thread_count", "Threads"),
        ("launch__registers_per_thread", "Registers Per Thread"),
        ("launch__shared_mem_per_block_static", "Static Shared Memory Per Block"),
        ("launch__shared_mem_per_block_dynamic", "Dynamic Shared Memory Per Block"),
        ("launch__shared_mem_per_block_driver", "Driver Shared Memory Per Block"),
        ("launch__shared_mem_config_size", "Shared Memory Configuration Size"),
        ("launch__cluster_size", "Cluster Size"),
        ("launch__sm_count", "# SMs"),
        ("launch__waves_per_multiprocessor", "Waves Per SM"),
    )),
    ("Occupancy", "Occupancy", (
        (THEORETICAL_OCC, "Theoretical Occupancy"),
        (ACHIEVED_OCC, "Achieved Occupancy"),
        ("sm__maximum_warps_avg_per_active_cycle", "Theoretical Active Warps per SM"),
        ("sm__warps_active.avg.per_cycle_active", "Achieved Active Warps Per SM"),
        ("launch__occupancy_limit_registers", "Block Limit Registers"),
        ("launch__occupancy_limit_shared_mem", "Block Limit Shared Mem"),
        ("launch__occupancy_limit_warps", "Block Limit Warps"),
        ("launch__occupancy_limit_blocks", "Block Limit SM"),
        ("launch__occupancy_limit_barriers", "Block Limit Barriers"),
    )),
    ("Compute Workload Analysis", "ComputeWorkloadAnalysis", (
        ("sm__inst_executed.avg.per_cycle_active", "Executed Ipc Active"),
        ("sm__inst_executed.avg.per_cycle_elapsed", "Executed Ipc Elapsed"),
        ("sm__inst_issued.avg.pct_of_peak_sustained_elapsed", "Issue Slots Busy"),
        ("sm__instruction_throughput.avg.pct_of_peak_sustained_elapsed", "SM Busy"),
        ("sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active", "Pipe ALU"),
        ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "Pipe FMA"),
        ("sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active", "Pipe FP64"),
        ("sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active", "Pipe Shared (FP16+Tensor)"),
        ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "Pipe Tensor (All)"),
        ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "Pipe Tensor (FP)"),
        ("sm__pipe_tensor_op_imma_cycles_active.avg.pct_of_peak_sustained_active", "Pipe Tensor (INT)"),
        ("sm__pipe_tensor_op_dmma_cycles_active.avg.pct_of_peak_sustained_active", "Pipe Tensor (DP)"),
        ("sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active",
         "Inst Tensor (Warp Group, wgmma)"),
        ("sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active", "Inst LSU"),
        ("sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active", "Inst XU"),
        ("sm__pipe_tma_cycles_active.avg.pct_of_peak_sustained_active", "Pipe TMA"),
    )),
    ("Scheduler and Warp State", "SchedulerStats", (
        ("smsp__warps_active.avg.per_cycle_active", "Active Warps Per Scheduler"),
        ("smsp__warps_eligible.avg.per_cycle_active", "Eligible Warps Per Scheduler"),
        ("smsp__issue_active.avg.per_cycle_active", "Issued Warp Per Scheduler"),
        ("smsp__issue_active.avg.pct_of_peak_sustained_active", "One or More Eligible"),
        ("smsp__issue_inst0.avg.pct_of_peak_sustained_active", "No Eligible"),
    )),
    ("Scheduler and Warp State", "WarpStateStats", (
        ("smsp__average_warp_latency_per_inst_issued.ratio", "Warp Cycles Per Issued Instruction"),
        ("smsp__thread_inst_executed_per_inst_executed.ratio", "Avg. Active Threads Per Warp"),
    )),
    ("Source Counters", "SourceCounters", (
        ("smsp__inst_executed_op_branch.sum", "Branch Instructions"),
        ("smsp__sass_average_branch_targets_threads_uniform.pct", "Branch Efficiency"),
        ("smsp__sass_branch_targets_threads_divergent.avg", "Avg. Divergent Branches"),
    )),
]

#: Occupancy limiters: (block-limit metric, what limits).
LIMITERS = [
    ("launch__occupancy_limit_registers", "registers"),
    ("launch__occupancy_limit_shared_mem", "shared memory"),
    ("launch__occupancy_limit_warps", "warps"),
    ("launch__occupancy_limit_blocks", "blocks"),
    ("launch__occupancy_limit_barriers", "barriers"),
]


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
    return [int(i) for i in report.kernels["ID"]]


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


def top_stalls(report: NcuReport, kid: int, n: int = 5) -> list[tuple[str, float]]:
    """The largest warp stall reasons (cycles per issued instruction), ``selected`` excluded."""
    out = []
    for name in report.metric_names_matching(STALL_PREFIX, STALL_SUFFIX):
        reason = name[len(STALL_PREFIX):-len(STALL_SUFFIX)]
        x = report.value(kid, name)
        if reason != "selected" and x is not None:
            out.append((reason, x))
    out.sort(key=lambda t: -t[1])
    return out[:n]


def summary_metrics() -> tuple[frozenset[str], tuple[tuple[str, str], ...]]:
    """The metrics that the summary reads: kernel table, verdicts, sections, rules and roofline.

    A ``.ncu-rep`` reader decodes these for every kernel up front and any other metric only when
    it is asked for (the details and raw pages need them all).

    Returns:
        (metric names, (prefix, suffix) patterns of further names such as the stall reasons).
    """
    from engine.analysis import ncu_roofline as rf
    from engine.analysis.ncu_verdict import _KEYS

    names = {metric for _title, _section, metrics in LAYOUT for metric, _label in metrics}
    names |= {metric for metric, _what in LIMITERS}
    names |= {"dram__bytes_read.sum", "dram__bytes_write.sum", "smsp__pcsamp_sample_count",
              "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active"}
    names |= {name for keys in _KEYS.values() for name in keys[1:]}
    names |= {rf.SM_HZ, rf.SMSP_HZ}
    for ops, (inst, _factor) in rf.SCALAR.values():
        names.add(rf._PEAK.format(inst))
        names |= {rf._SMSP.format(op) for op, _f in ops}
    for path in rf.TENSOR_PATHS:
        dense = rf.DENSE_TENSOR_PEAKS.get(path, ())
        names |= {f"sm__ops_path_tensor_op_{d}.sum.peak_sustained" for d in dense}
        names |= {f"sm__ops_path_tensor_src_{path}.sum.peak_sustained",
                  f"sm__ops_path_tensor_src_{path}.sum.per_cycle_elapsed"}
    names |= {metric for level in rf.LEVELS.values() for metric in level}
    # the Info view's GPU row (engine.reports.ncu_trace)
    names |= {"device__attribute_multiprocessor_count", "device__attribute_l2_cache_size",
              "device__attribute_clock_rate"}
    return frozenset(names), ((STALL_PREFIX, STALL_SUFFIX),)


def kernel_sections(
    report: NcuReport, action_id: int, *, resolve_source: bool = True
) -> dict[str, pd.DataFrame]:
    """One kernel's sections as tables, in ncu's order.

    Args:
        report: A report read by :func:`engine.reports.ncu.read_ncu`.
        action_id: The kernel's ID (``kernels["ID"]``).
        resolve_source: Disassemble the hottest instructions (SASS text, file:line). The first time
            per kernel this costs 50-100 ms of ncu_report decoding; without it the Source Counters
            rows carry PCs, sample counts and stall reasons only.

    Returns:
        Section title → DataFrame with columns ``metric`` (the label ncu prints), ``value`` (a float
        in base units, or the text "not collected"), ``unit``, ``text`` (value and unit for display),
        ``name`` (the ncu metric name, empty for derived rows) and ``note`` (for a "not collected"
        row, the ncu option that collects it).

    Raises:
        KernelscopeError: The report has no kernel with that ID.
    """
    import pandas as pd

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

    occ = rows["Occupancy"]
    lim = occupancy_limiter(report, kid)
    if lim is None:
        occ.append(["Occupancy Limiter", NOT_COLLECTED, "", NOT_COLLECTED, "",
                    _missing_note(report, "Occupancy")])
    else:
        words, limits = lim
        blocks = limits[words.split(" and ")[0]]
        occ.append(["Occupancy Limiter", words, "", f"{words} ({_fmt(blocks, '')} blocks per SM)", "", ""])

    cw = rows["Compute Workload Analysis"]
    gmma = report.value(kid, "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active")
    cc = str(report.kernels.loc[report.kernels["ID"].astype(int) == kid, "CC"].iloc[0])
    if gmma is None:
        cw.append(["Uses wgmma (Hopper)", NOT_COLLECTED, "", NOT_COLLECTED, "",
                   _missing_note(report, "ComputeWorkloadAnalysis")])
    else:
        used = "yes" if gmma > 0 else ("no" if cc.startswith("9.") else "no (needs compute capability 9.x)")
        cw.append(["Uses wgmma (Hopper)", used, "", used, "", ""])

    ws = rows["Scheduler and Warp State"]
    stalls = top_stalls(report, kid)
    if not stalls:
        ws.append(["Top Stall Reasons", NOT_COLLECTED, "", NOT_COLLECTED, "",
                   _missing_note(report, "WarpStateStats")])
    for rank, (reason, cycles) in enumerate(stalls, 1):
        ws.append([f"Stall #{rank}: {reason.replace('_', ' ')}", cycles, "cycles/inst",
                   f"{cycles:,.2f} cycles per issued instruction",
                   f"{STALL_PREFIX}{reason}{STALL_SUFFIX}", ""])

    src = rows["Source Counters"]
    if resolve_source:
        from engine.reports.ncu import resolve_sources

        resolve_sources(report, kid)
    hot = report.sources
    mine = hot[hot["ID"] == kid] if hot is not None and len(hot) else None
    if mine is None or not len(mine):
        src.append(["Hottest Instructions", NOT_COLLECTED, "", NOT_COLLECTED, "",
                    _missing_note(report, "SourceCounters") + "; build with `-lineinfo` for file:line"])
    else:
        total = report.value(kid, "smsp__pcsamp_sample_count")
        for r in mine.to_dict("records"):
            where = f"{r['file']}:{r['line']}" if r["file"] else f"PC 0x{int(r['pc']):x}"
            sass = r["sass"] if isinstance(r["sass"], str) else ""
            note = f"{sass}  [top stall: {r['top_stall']} {r['top_stall_samples']}]".strip()
            n = int(r["samples"])
            src.append([where, float(n), "samples",
                        f"{n:,} samples" + (f" of {int(total):,}" if total else ""), "", note])
        lines = report.source_lines.get(kid)
        if lines is not None:
            for rank, ln in enumerate(lines.to_dict("records"), 1):
                src.append([f"Hottest line #{rank}: {ln['file']}:{ln['line']}", float(ln["samples"]),
                            "samples", f"{int(ln['samples']):,} samples ({ln['pct']:.1f} %)", "",
                            "samples of every instruction on that line"])
        if resolve_source and not any(mine["file"].astype(str) != ""):
            src.append(["file:line", NOT_COLLECTED, "", NOT_COLLECTED, "",
                        "build the kernel with `nvcc -lineinfo` to map instructions to source lines"])
    return {title: pd.DataFrame(r, columns=SECTION_COLUMNS) for title, r in rows.items()}


def rules_table(report: NcuReport) -> pd.DataFrame:
    """The rule results of all kernels, ranked by estimated speedup × kernel duration.

    ``weighted_ns`` = ``speedup_pct`` / 100 × ``duration_ns``: the time a fix could save, by ncu's
    own estimate. Rules without an estimate rank last (``weighted_ns`` NaN), in report order.

    Args:
        report: A report read by :func:`engine.reports.ncu.read_ncu`.

    Returns:
        One row per rule result with columns :data:`RULES_TABLE_COLUMNS`.
    """
    import pandas as pd

    rules = report.rules
    if rules is None or not len(rules):
        return pd.DataFrame(columns=RULES_TABLE_COLUMNS)
    k = report.kernels.assign(id=report.kernels["ID"].astype(int))[["id", "Kernel Name", "duration_ns"]]
    df = rules.rename(columns={"ID": "id"}).merge(k, on="id", how="left")
    df = df.rename(columns={"Kernel Name": "kernel"})
    df["weighted_ns"] = df["speedup_pct"] / 100.0 * df["duration_ns"]
    df["_order"] = range(len(df))
    df = df.sort_values(["weighted_ns", "_order"], ascending=[False, True], na_position="last")
    return df[RULES_TABLE_COLUMNS].reset_index(drop=True)


def kernel_table(report: NcuReport) -> pd.DataFrame:
    """One row per profiled kernel: launch, duration, throughputs, occupancy, verdict, top rule.

    Args:
        report: A report read by :func:`engine.reports.ncu.read_ncu`.

    Returns:
        Columns :data:`KERNEL_TABLE_COLUMNS`; percentages and durations are floats (NaN when not
        collected), ``top_rule`` is the rule with the largest estimated speedup for that kernel.
    """
    import pandas as pd

    from engine.analysis.ncu_verdict import kernel_metrics, verdict

    ranked = rules_table(report)
    best: dict[int, tuple[str, float]] = {}
    # Within one kernel, ranking by weighted time is ranking by speedup: the first rule is the best.
    for r in ranked.to_dict("records"):
        if not math.isnan(r["speedup_pct"]) and int(r["id"]) not in best:
            best[int(r["id"])] = (str(r["rule"]), float(r["speedup_pct"]))

    def num(x: float | None) -> float:
        return math.nan if x is None else float(x)

    def count(x: Any) -> int | None:
        return None if x is None or pd.isna(x) else int(x)

    out = []
    for k in report.kernels.to_dict("records"):
        kid = int(k["ID"])
        v = verdict(kernel_metrics(report, kid))
        rule, sp = best.get(kid, ("", math.nan))
        out.append([
            kid, k["Kernel Name"], k["Base Name"], k["Mangled Name"], float(k["duration_ns"]),
            k["Grid Size"], k["Block Size"], count(k["Registers Per Thread"]),
            count(k["Static Shared Memory Per Block"]), count(k["Dynamic Shared Memory Per Block"]),
            num(report.value(kid, SM_PCT)), num(report.value(kid, MEM_PCT)), num(report.value(kid, DRAM_PCT)),
            num(report.value(kid, ACHIEVED_OCC)), num(report.value(kid, THEORETICAL_OCC)),
            v.kind, v.reason, rule, sp, k["NVTX Range"], k["Device"], k["CC"],
        ])
    return pd.DataFrame(out, columns=KERNEL_TABLE_COLUMNS)
