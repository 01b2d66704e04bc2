"""The tables an Nsight Compute report is read into, and the sections ncu 2025.3 prints.

:class:`NcuReport` is what both readers return: the ``.ncu-rep`` reader
(:mod:`engine.reports.ncu.decoders`) and the CSV reader (:mod:`engine.reports.ncu.csv_export`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

ID_COLUMNS = [
    "ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
    "Block Size", "Grid Size", "Device", "CC",
]
RULE_COLUMNS = [
    "Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup",
]
#: The two columns ncu adds after "Host Name" for a report collected with ``--nvtx``.
NVTX_COLUMNS = [
    "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg",
    "Id:Domain:Start/Stop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg",
]
DETAILS_COLUMNS = [*ID_COLUMNS, "Section Name", "Metric Name", "Metric Unit", "Metric Value", *RULE_COLUMNS]
KERNEL_COLUMNS = [
    "ID", "Kernel Name", "Base Name", "Mangled Name", "Process ID", "Process Name", "Context", "Stream",
    "Grid Size", "Block Size", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
    "Registers Per Thread", "Static Shared Memory Per Block", "Dynamic Shared Memory Per Block",
    "Device", "Device Name", "CC", "duration_ns", "NVTX Range",
]

#: The sections of ``--page details`` as Nsight Compute 2025.3 prints them: (identifier, name, order,
#: header metrics as (metric, label)). Rows are printed section by section in (order, name) order;
#: a section's metric rows are sorted by metric name, and its rule results follow them.
SECTIONS: list[tuple[str, str, int, tuple[tuple[str, str], ...]]] = [
    ("SpeedOfLight", "GPU Speed Of Light Throughput", 10, (
        ("dram__cycles_elapsed.avg.per_second", "DRAM Frequency"),
        ("gpc__cycles_elapsed.avg.per_second", "SM Frequency"),
        ("gpc__cycles_elapsed.max", "Elapsed Cycles"),
        ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "Memory Throughput"),
        ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "DRAM Throughput"),
        ("gpu__time_duration.sum", "Duration"),
        ("l1tex__throughput.avg.pct_of_peak_sustained_active", "L1/TEX Cache Throughput"),
        ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2 Cache Throughput"),
        ("sm__cycles_active.avg", "SM Active Cycles"),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "Compute (SM) Throughput"),
    )),
    ("SpeedOfLight_RooflineChart", "GPU Speed Of Light Roofline Chart", 11, ()),
    ("SpeedOfLight_HierarchicalDoubleRooflineChart",
     "GPU Speed Of Light Hierarchical Roofline Chart (Double Precision)", 12, ()),
    ("SpeedOfLight_HierarchicalHalfRooflineChart",
     "GPU Speed Of Light Hierarchical Roofline Chart (Half Precision)", 12, ()),
    ("SpeedOfLight_HierarchicalSingleRooflineChart",
     "GPU Speed Of Light Hierarchical Roofline Chart (Single Precision)", 12, ()),
    ("SpeedOfLight_HierarchicalTensorRooflineChart",
     "GPU Speed Of Light Hierarchical Roofline Chart (Tensor Core)", 12, ()),
    ("PmSampling", "PM Sampling", 15, (
        ("profiler__pmsampler_buffer_size_bytes", "Maximum Buffer Size"),
        ("profiler__pmsampler_interval_time", "Maximum Sampling Interval"),
        ("profiler__pmsampler_pass_groups", "# Pass Groups"),
    )),
    ("ComputeWorkloadAnalysis", "Compute Workload Analysis", 20, (
        ("sm__inst_executed.avg.per_cycle_active", "Executed Ipc Active"),
        ("sm__inst_executed.avg.per_cycle_elapsed", "Executed Ipc Elapsed"),
        ("sm__inst_issued.avg.pct_of_peak_sustained_elapsed", "Issue Slots Busy"),
        ("sm__inst_issued.avg.per_cycle_active", "Issued Ipc Active"),
        ("sm__instruction_throughput.avg.pct_of_peak_sustained_elapsed", "SM Busy"),
    )),
    ("MemoryWorkloadAnalysis", "Memory Workload Analysis", 30, (
        ("derived__local_spilling_requests", "Local Memory Spilling Requests"),
        ("derived__local_spilling_requests_pct", "Local Memory Spilling Request Overhead"),
        ("dram__bytes.sum.per_second", "Memory Throughput"),
        ("gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed", "Mem Busy"),
        ("gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed", "Max Bandwidth"),
        ("l1tex__t_sector_hit_rate.pct", "L1/TEX Hit Rate"),
        ("launch__persisting_l2_cache_size", "L2 Persisting Size"),
        ("lrc__average_ilc_input_sector_success_rate.pct", "L2 Compression Success Rate"),
        ("lrc__average_ilc_output_sector_compression_achieved_rate.pct", "L2 Compression Ratio"),
        ("lrc__ilc_input_sectors.sum", "L2 Compression Input Sectors"),
        ("lts__t_sector_hit_rate.pct", "L2 Hit Rate"),
        ("sm__memory_throughput.avg.pct_of_peak_sustained_elapsed", "Mem Pipes Busy"),
    )),
    ("MemoryWorkloadAnalysis_Chart", "Memory Workload Analysis Chart", 31, ()),
    ("MemoryWorkloadAnalysis_Tables", "Memory Workload Analysis Tables", 32, ()),
    ("SchedulerStats", "Scheduler Statistics", 40, (
        ("smsp__issue_active.avg.pct_of_peak_sustained_active", "One or More Eligible"),
        ("smsp__issue_active.avg.per_cycle_active", "Issued Warp Per Scheduler"),
        ("smsp__issue_inst0.avg.pct_of_peak_sustained_active", "No Eligible"),
        ("smsp__warps_active.avg.per_cycle_active", "Active Warps Per Scheduler"),
        ("smsp__warps_eligible.avg.per_cycle_active", "Eligible Warps Per Scheduler"),
    )),
    ("WarpStateStats", "Warp State Statistics", 50, (
        ("smsp__average_warp_latency_per_inst_issued.ratio", "Warp Cycles Per Issued Instruction"),
        ("smsp__average_warps_active_per_inst_executed.ratio", "Warp Cycles Per Executed Instruction"),
        ("smsp__thread_inst_executed_per_inst_executed.ratio", "Avg. Active Threads Per Warp"),
        ("smsp__thread_inst_executed_pred_on_per_inst_executed.ratio",
         "Avg. Not Predicated Off Threads Per Warp"),
    )),
    ("InstructionStats", "Instruction Statistics", 60, (
        ("smsp__inst_executed.avg", "Avg. Executed Instructions Per Scheduler"),
        ("smsp__inst_executed.sum", "Executed Instructions"),
        ("smsp__inst_issued.avg", "Avg. Issued Instructions Per Scheduler"),
        ("smsp__inst_issued.sum", "Issued Instructions"),
    )),
    ("Nvlink_Topology", "NVLink Topology", 61, ()),
    ("Nvlink_Tables", "NVLink Tables", 62, ()),
    ("NumaAffinity", "NUMA Affinity", 63, ()),
    ("LaunchStats", "Launch Statistics", 70, (
        ("launch__block_size", "Block Size"),
        ("launch__cluster_scheduling_policy", "Cluster Scheduling Policy"),
        ("launch__cluster_size", "Cluster Size"),
        ("launch__func_cache_config", "Function Cache Configuration"),
        ("launch__grid_size", "Grid Size"),
        ("launch__registers_per_thread", "Registers Per Thread"),
        ("launch__shared_mem_config_size", "Shared Memory Configuration Size"),
        ("launch__shared_mem_per_block_driver", "Driver Shared Memory Per Block"),
        ("launch__shared_mem_per_block_dynamic", "Dynamic Shared Memory Per Block"),
        ("launch__shared_mem_per_block_static", "Static Shared Memory Per Block"),
        ("launch__sm_count", "# SMs"),
        ("launch__stack_size", "Stack Size"),
        ("launch__thread_count", "Threads"),
        ("launch__tpc_count", "# TPCs"),
        ("launch__tpc_enabled", "Enabled TPC IDs"),
        ("launch__uses_green_context", "Uses Green Context"),
        ("launch__waves_per_multiprocessor", "Waves Per SM"),
    )),
    ("Occupancy", "Occupancy", 80, (
        ("launch__cluster_max_active", "Max Active Clusters"),
        ("launch__cluster_max_potential_size", "Max Cluster Size"),
        ("launch__occupancy_cluster_gpu_pct", "Overall GPU Occupancy"),
        ("launch__occupancy_cluster_pct", "Cluster Occupancy"),
        ("launch__occupancy_limit_barriers", "Block Limit Barriers"),
        ("launch__occupancy_limit_blocks", "Block Limit SM"),
        ("launch__occupancy_limit_registers", "Block Limit Registers"),
        ("launch__occupancy_limit_shared_mem", "Block Limit Shared Mem"),
        ("launch__occupancy_limit_warps", "Block Limit Warps"),
        ("sm__maximum_warps_avg_per_active_cycle", "Theoretical Active Warps per SM"),
        ("sm__maximum_warps_per_active_cycle_pct", "Theoretical Occupancy"),
        ("sm__warps_active.avg.pct_of_peak_sustained_active", "Achieved Occupancy"),
        ("sm__warps_active.avg.per_cycle_active", "Achieved Active Warps Per SM"),
    )),
    ("WorkloadDistribution", "GPU and Memory Workload Distribution", 100, (
        ("dram__cycles_active.avg", "Average DRAM Active Cycles"),
        ("dram__cycles_elapsed.sum", "Total DRAM Elapsed Cycles"),
        ("l1tex__cycles_active.avg", "Average L1 Active Cycles"),
        ("l1tex__cycles_elapsed.sum", "Total L1 Elapsed Cycles"),
        ("lts__cycles_active.avg", "Average L2 Active Cycles"),
        ("lts__cycles_elapsed.sum", "Total L2 Elapsed Cycles"),
        ("sm__cycles_active.avg", "Average SM Active Cycles"),
        ("sm__cycles_elapsed.sum", "Total SM Elapsed Cycles"),
        ("smsp__cycles_active.avg", "Average SMSP Active Cycles"),
        ("smsp__cycles_elapsed.sum", "Total SMSP Elapsed Cycles"),
    )),
    ("SourceCounters", "Source Counters", 100, (
        ("derived__smsp__inst_executed_op_branch_pct", "Branch Instructions Ratio"),
        ("smsp__inst_executed_op_branch.sum", "Branch Instructions"),
        ("smsp__sass_average_branch_targets_threads_uniform.pct", "Branch Efficiency"),
        ("smsp__sass_branch_targets_threads_divergent.avg", "Avg. Divergent Branches"),
    )),
]


RULE_TABLE_COLUMNS = [
    "ID", "rule", "name", "section", "type", "title", "message", "speedup_type", "speedup_pct",
]
SOURCE_COLUMNS = [
    "ID", "pc", "samples", "top_stall", "top_stall_samples", "inst_executed", "sass", "file", "line",
]
LINE_COLUMNS = ["file", "line", "samples", "pct"]


@dataclass
class NcuReport:
    """What one Nsight Compute report (or its CSV export) holds, as plain tables.

    ``values`` holds every metric as a float in base units (one row per kernel, indexed by ID, one
    column per metric; NaN for text metrics and metrics without a single value), ``units`` their
    base units, ``labels`` the names ncu's sections print for them. ``rules`` holds the rule results
    stored in the report (``speedup_pct`` as a float, NaN when the rule gave no estimate) and
    ``source`` the hottest sampled SASS instructions per kernel (empty when source counters were
    not collected).
    """

    path: Path
    source: str  # "ncu-rep", "csv-details" or "csv-raw"
    kernels: pd.DataFrame
    metrics: pd.DataFrame
    raw: pd.DataFrame
    raw_units: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    values: pd.DataFrame | None = None
    units: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    rules: pd.DataFrame | None = None
    sources: pd.DataFrame | None = None
    sections: dict[int, list[str]] = field(default_factory=dict)
    action_refs: list[tuple[int, int]] = field(default_factory=list)  # kernel ID -> (range, action)
    pc_samples: pd.DataFrame | None = None  # ID, pc, samples: every sampled instruction
    source_lines: dict[int, pd.DataFrame] = field(default_factory=dict)  # filled by resolve_sources
    # kernel ID -> demangled name as the report stores it (``ncu --rename-kernels off``); .ncu-rep only
    stored_names: list[str] = field(default_factory=list)
    # ncu prints the rule columns when a result holds rule results, even ones without a message
    rule_columns: bool = False
    # kernel ID -> its two NVTX cells (``--nvtx`` reports only; ncu then prints NVTX_COLUMNS)
    nvtx: dict[int, tuple[str, str]] = field(default_factory=dict)
    # False when every result is a range (``--replay-mode range``): ncu then prints no Block Size
    # and Grid Size columns
    launch_columns: bool = True

    def value(self, kernel_id: int, metric: str) -> float | None:
        """One metric of one kernel as a float in base units, or None when it was not collected."""
        v = self.values
        if v is None or metric not in v.columns or kernel_id not in v.index:
            return None
        x: Any = v.at[kernel_id, metric]
        try:
            f = float(x)
        except (TypeError, ValueError):
            return None
        return None if math.isnan(f) else f

    def unit(self, metric: str) -> str:
        """A metric's base unit ("" when unknown)."""
        return self.units.get(metric, "")

    def metric_names_matching(self, prefix: str, suffix: str = "") -> list[str]:
        """The report's metric names (``values`` columns) with that prefix and suffix, sorted."""
        v = self.values
        if v is None:
            return []
        return sorted(str(c) for c in v.columns if str(c).startswith(prefix) and str(c).endswith(suffix))

    # Plain-row views of the tables (lists and dicts, no pandas needed by the caller). A
    # ``.ncu-rep`` read (:class:`engine.reports.ncu.lazy_report.LazyNcuReport`) answers them from the rows it
    # decoded, without building (or importing) pandas; these defaults read the DataFrames.

    def kernel_records(self) -> list[dict[str, Any]]:
        """One dict per kernel (the ``kernels`` columns)."""
        return _records(self.kernels)

    def rule_records(self) -> list[dict[str, Any]]:
        """One dict per rule result (:data:`RULE_TABLE_COLUMNS`), in report order."""
        return [] if self.rules is None else _records(self.rules)

    def source_records(self, kernel_id: int) -> list[dict[str, Any]]:
        """One kernel's hottest instructions (:data:`SOURCE_COLUMNS`), hottest first."""
        src = self.sources
        if src is None or not len(src):
            return []
        return _records(src[src["ID"] == kernel_id])

    def line_records(self, kernel_id: int) -> list[dict[str, Any]] | None:
        """One kernel's hottest source lines (:data:`LINE_COLUMNS`), or None when not resolved."""
        lines = self.source_lines.get(kernel_id)
        return None if lines is None else _records(lines)

    def detail_rows(self) -> list[tuple[Any, ...]]:
        """The details page rows: :data:`DETAILS_COLUMNS` and the numeric value."""
        return list(self.metrics[[*DETAILS_COLUMNS, "value"]].itertuples(index=False, name=None))

    def detail_values(self) -> dict[tuple[str, str], float]:
        """The details page's numbers: (kernel ID, metric name) -> value (the last row of a pair wins)."""
        m = self.metrics
        mine = m[m["metric"] != ""]
        return {(str(i), str(n)): float(v) for i, n, v in zip(mine["ID"], mine["metric"], mine["value"],
                                                              strict=True)}

    def raw_table(self) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The raw page: its columns and one tuple of cells per kernel."""
        return [str(c) for c in self.raw.columns], list(self.raw.itertuples(index=False, name=None))


def _records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """A table's rows as dicts keyed by column name."""
    return [{str(k): v for k, v in r.items()} for r in table.to_dict("records")]
