"""Read Nsight Compute results: ``.ncu-rep`` files and ``ncu --import ... --csv`` exports.

A ``.ncu-rep`` is read through NVIDIA's ``ncu_report`` module (PyPI ``ncu-report``), imported only
when such a file is opened. Everything is turned into plain pandas tables:

- ``kernels``: one row per profiled kernel (action) with its launch configuration and duration;
- ``metrics``: the ``--page details`` rows, long format, text exactly as ``ncu --print-units base``
  prints it, plus a numeric ``value`` column;
- ``raw``: the ``--page raw`` table, wide (one column per metric), text as ncu prints it, with the
  units in ``raw_units``.

CSV exports (``--page details`` or ``--page raw``, with or without ``--print-units base``, with
locale thousands separators) are read into the same tables, converted to base units. Input files are
only ever opened for reading.
"""

from __future__ import annotations

import csv
import io
import math
import re
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.reports.base import read_head
from engine.reports.ncu_names import simplify_names
from engine.reports.ncu_section_defs import SectionDef, read_section_defs
from engine.system.atomic import atomic_write
from engine.system.errors import ReportError

if TYPE_CHECKING:
    import pandas as pd

ID_COLUMNS = [
    "ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
    "Block Size", "Grid Size", "Device", "CC",
]
RULE_COLUMNS = [
    "Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup",
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
_SECTIONS: list[tuple[str, str, int, tuple[tuple[str, str], ...]]] = [
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

#: Units that Nsight Compute 2025.3 prints differently from what newer ``ncu_report`` wheels say.
_RAW_UNIT_OVERRIDES = {"idc__requests.sum": ""}
_THREAD_INST_DERIVED = re.compile(r"derived__(sm|smsp)__sass_thread_inst_executed_op_\w+_pred_on_x\d")
# Rule messages carry links as markup: @section:ID:Name@ and @url:Text:URL@ (ncu prints Name, Text (URL)).
_SECTION_LINK = re.compile(r"@section:[^:@]*:([^@]*)@")
_URL_LINK = re.compile(r"@url:([^:@]*):([^@]*)@")
# Names in an action's metric list that ncu does not print as metrics: breakdown and group
# entries, and the "regex:" patterns of section definitions (a custom section's body may list one).
_NOT_METRICS = ("breakdown:", "group:", "regex:")
_RULE_TYPES = {0: "", 1: "INF", 2: "OPT", 3: "WRN", 4: "ERR"}
_SPEEDUP_TYPES = {0: "", 1: "local", 2: "global"}

# Value kinds of ncu_report.IMetric (stable numbers of its enum).
_KIND_UNKNOWN, _KIND_ANY, _KIND_STRING, _KIND_FLOAT, _KIND_DOUBLE, _KIND_UINT32, _KIND_UINT64 = range(7)


RULE_TABLE_COLUMNS = [
    "ID", "rule", "name", "section", "type", "title", "message", "speedup_type", "speedup_pct",
]
SOURCE_COLUMNS = [
    "ID", "pc", "samples", "top_stall", "top_stall_samples", "inst_executed", "sass", "file", "line",
]


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


@dataclass
class _Partial:
    """What a summary read of a ``.ncu-rep`` decoded: a few metrics per kernel, every metric's name."""

    names: list[frozenset[str]]  # per kernel ID: every metric it has (no breakdown:/group: names)
    nums: list[dict[str, float]]  # per kernel ID: the summary metrics as floats (NaN: no value)
    units: dict[str, str]  # the summary metrics' raw-page units
    idents: list[list[str]]  # per kernel ID: the ID_COLUMNS cells
    use_cache: bool
    identity: tuple[int, int] = (0, 0)  # the file's (size, mtime_ns) when it was read
    all_names: list[str] = field(default_factory=list)  # sorted union of names, filled on first use
    matching: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # metric_names_matching


class LazyNcuReport(NcuReport):
    """A ``.ncu-rep`` read for the summary; the raw page and the full ``values`` come on first use.

    Decoding every one of a kernel's ~2,300 metrics (and asking each its unit) costs more than the
    rest of the summary together, and only the details/raw pages, rules and gates need them.
    :meth:`value`, :meth:`unit` and :meth:`metric_names_matching` answer from the metrics the
    summary reads (``engine.analysis.ncu.sections.summary_metrics``); reading ``raw``,
    ``raw_units``, ``values`` or ``units``, or asking :meth:`value` for another metric a kernel has,
    decodes the rest (from the report still open in ``ncu_report``, or by opening the file again)
    and rewrites the cache entry with the full tables. The results are the same as a full read.
    """

    def _full(self, key: str) -> Any:
        if self.__dict__.get("_partial") is not None:
            self._materialize()
        return self.__dict__[key]

    @property  # type: ignore[override]
    def raw(self) -> pd.DataFrame:
        """The ``--page raw`` table (decoded on first use)."""
        return self._full("_raw")  # type: ignore[no-any-return]

    @raw.setter
    def raw(self, table: pd.DataFrame) -> None:
        self.__dict__["_raw"] = table

    @property  # type: ignore[override]
    def raw_units(self) -> dict[str, str]:
        """The raw page's units (decoded on first use)."""
        return self._full("_raw_units")  # type: ignore[no-any-return]

    @raw_units.setter
    def raw_units(self, units: dict[str, str]) -> None:
        self.__dict__["_raw_units"] = units

    @property  # type: ignore[override]
    def values(self) -> pd.DataFrame | None:
        """Every metric as a float (decoded on first use)."""
        return self._full("_values")  # type: ignore[no-any-return]

    @values.setter
    def values(self, table: pd.DataFrame | None) -> None:
        self.__dict__["_values"] = table

    @property  # type: ignore[override]
    def units(self) -> dict[str, str]:
        """Every metric's base unit (decoded on first use)."""
        return self._full("_units")  # type: ignore[no-any-return]

    @units.setter
    def units(self, units: dict[str, str]) -> None:
        self.__dict__["_units"] = units

    def value(self, kernel_id: int, metric: str) -> float | None:
        """One metric of one kernel as a float in base units, or None when it was not collected."""
        part: _Partial | None = self.__dict__.get("_partial")
        if part is None:
            return super().value(kernel_id, metric)
        if not 0 <= kernel_id < len(part.nums):
            return None
        x = part.nums[kernel_id].get(metric)
        if x is None:
            if metric not in part.names[kernel_id]:
                return None
            self._materialize()
            return super().value(kernel_id, metric)
        return None if math.isnan(x) else x

    def unit(self, metric: str) -> str:
        """A metric's base unit ("" when unknown)."""
        part: _Partial | None = self.__dict__.get("_partial")
        if part is not None:
            u = part.units.get(metric)
            if u is not None:
                return u
            if not any(metric in names for names in part.names):
                return ""
        return super().unit(metric)

    def metric_names_matching(self, prefix: str, suffix: str = "") -> list[str]:
        """The report's metric names with that prefix and suffix, sorted."""
        part: _Partial | None = self.__dict__.get("_partial")
        if part is None:
            return super().metric_names_matching(prefix, suffix)
        found = part.matching.get((prefix, suffix))
        if found is None:
            if not part.all_names:
                part.all_names = sorted(frozenset().union(*part.names))
            found = [n for n in part.all_names if n.startswith(prefix) and n.endswith(suffix)]
            part.matching[(prefix, suffix)] = found
        return list(found)

    def _materialize(self) -> None:
        """Decode every metric of every kernel: the raw page, ``values`` and ``units``."""
        with _OPEN_LOCK:
            part: _Partial | None = self.__dict__.get("_partial")
            if part is None:
                return
            try:
                st = self.path.stat()
                if part.identity != (0, 0) and (st.st_size, st.st_mtime_ns) != part.identity:
                    raise ReportError(
                        f"{self.path} changed since it was opened, so its remaining metrics cannot be "
                        "read from it; open it again."
                    )
                ctx = _open_report(self.path)
                actions = [ctx.range_by_idx(i).action_by_idx(j) for i, j in self.action_refs]
            except ReportError:
                raise
            except Exception as exc:  # noqa: BLE001 - the native reader's errors are not for people
                raise ReportError(
                    f"{self.path} could not be read again for its remaining metrics ({exc}); "
                    "check that the file is still there and open it again."
                ) from exc
            raw, raw_units, values = _all_metrics(actions, part.idents)
            self.__dict__.update(_raw=raw, _raw_units=raw_units, _values=values, _units=dict(raw_units))
            self.__dict__["_partial"] = None
            if part.use_cache:
                _cache_store(self.path, self)


# ---------------------------------------------------------------------------------------------
# Number formatting as ``ncu --print-units base`` prints it


def format_number(value: float) -> str:
    """A double as ncu prints it in base units: integers without decimals, others with two."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:,.2f}"


def format_speedup(value: float) -> str:
    """An estimated speedup as ncu prints it (four significant digits)."""
    return f"{value:.4g}"


def _metric_text(metric: Any) -> tuple[str, float]:
    """The printed text of an ``ncu_report.IMetric`` and its numeric value (NaN if none)."""
    kind = metric.kind()
    if kind not in (_KIND_STRING, _KIND_FLOAT, _KIND_DOUBLE, _KIND_UINT32, _KIND_UINT64):
        return "no data", math.nan
    if not metric.has_value():
        return "", math.nan  # collected without a value (e.g. NUMA ids of a GPU without them): ncu prints ""
    if kind == _KIND_STRING:
        return str(metric.as_string()), math.nan
    if kind in (_KIND_UINT32, _KIND_UINT64):
        v = int(metric.as_uint64())
        return f"{v:,}", float(v)
    if kind in (_KIND_FLOAT, _KIND_DOUBLE):
        d = float(metric.as_double())
        return format_number(d), d
    return "no data", math.nan


# ---------------------------------------------------------------------------------------------
# .ncu-rep


def _check_file(path: Path) -> None:
    """Raise ReportError unless ``path`` is a complete Nsight Compute report (cheap, reads headers)."""
    head = read_head(path, 4, folder_sentence="is a folder, not a report; give the path of a .ncu-rep file.",
                     unreadable_hint="; check the file and try again")
    size = path.stat().st_size
    if size == 0:
        raise ReportError(f"{path} is empty (0 bytes); profile again or copy the report again.")
    with path.open("rb") as f:
        if head != b"NVR\x00":
            raise ReportError(
                f"{path} is not an Nsight Compute report (.ncu-rep); open a file written by `ncu -o`."
            )
        # The report is a chain of length-prefixed blocks that must end exactly at the end of file.
        pos = 4
        while pos + 4 <= size:
            f.seek(pos)
            (length,) = struct.unpack("<I", f.read(4))
            pos += 4 + length
        if pos != size:
            raise ReportError(
                f"{path} is truncated or damaged ({size:,} bytes, its blocks end at {pos:,}); "
                "copy or record the report again."
            )


#: The newest report file format this code was checked with (Nsight Compute 2025.3 writes 7).
KNOWN_FORMAT = 7


def report_format_version(path: Path) -> int | None:
    """The format version in a report's first block (protobuf field 1), or None if unreadable."""
    with path.open("rb") as f:
        head = f.read(24)
    if len(head) < 10 or head[:4] != b"NVR\x00" or head[8] != 0x08:
        return None
    value, shift = 0, 0
    for b in head[9:19]:
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value
    return None


def _newer_message(p: Path, fmt: int, *, partly: bool = False) -> str:
    try:
        version = _wheel_version()
    except Exception:  # noqa: BLE001 - only decoration for the message
        version = "(installed)"
    verb = "may not read all of it" if partly else "cannot read it"
    return (
        f"{p} was written by a newer Nsight Compute (report format {fmt}) and ncu-report {version} "
        f"{verb}; run `pip install -U ncu-report`, or export it with that ncu "
        "(`ncu --import R --csv --page raw`) and open the CSV."
    )


def _wheel_version() -> str:
    from importlib.metadata import version

    return version("ncu-report")


def _import_ncu_report() -> Any:
    try:
        import ncu_report  # noqa: PLC0415 - heavy native module, loaded only for .ncu-rep files
    except ImportError as exc:
        raise ReportError(
            "Reading .ncu-rep files needs NVIDIA's Python package `ncu-report`; "
            "install it with `pip install ncu-report`."
        ) from exc
    return ncu_report


_PROCESS_RE = re.compile(rb"2([\x05-\x7f])\x08([\x80-\xff]{0,4}[\x00-\x7f])\x12([\x00-\x7f])", re.S)


def _process_info(path: Path) -> tuple[str, str, str]:
    """(process id, process name, host name) from the report's header block.

    ``ncu_report`` does not expose them; the header holds a small protobuf message
    {1: pid, 2: host, 3: executable path}. Reports of several processes get the first one.
    """
    with path.open("rb") as f:
        head = f.read(1 << 16)
    for m in _PROCESS_RE.finditer(head):
        total = m.group(1)[0]
        host_len = m.group(3)[0]
        p = m.end() + host_len
        if p + 2 > len(head) or head[p] != 0x1A:
            continue
        path_len = head[p + 1]
        if p + 2 + path_len - (m.start() + 2) != total:
            continue
        pid = 0
        for i, b in enumerate(m.group(2)):
            pid |= (b & 0x7F) << (7 * i)
        host = head[m.end():p].decode("utf-8", "replace")
        exe = head[p + 2:p + 2 + path_len].decode("utf-8", "replace")
        return str(pid), exe.rsplit("/", 1)[-1], host
    return "", "", ""


def _value(action: Any, name: str) -> Any:
    m = action.metric_by_name(name)
    if m is None or not m.has_value():
        return None
    return m.value()


def _int_text(action: Any, name: str) -> str:
    """An identity metric (context, stream, device) as ncu prints it: an integer, whatever its kind.

    Reports of older ncu versions store these as doubles (1.0); ncu prints 1.
    """
    v = _value(action, name)
    return "" if v is None else str(int(v))


def _section_table(
    action: Any, defs: dict[str, SectionDef], arch: int | None
) -> list[tuple[str, str, int, tuple[tuple[str, str], ...]]]:
    """The sections the action was profiled with, in print order, with the header rows ncu prints.

    ncu prints the sections a report holds with the definitions stored in the report (a report of
    an older ncu prints its own sections, custom ones included), each header metric filtered by
    the GPU's architecture (:mod:`engine.reports.ncu_section_defs`): ordered by (order, name),
    sections without an order (0) last, each section's header metrics sorted by metric name. A
    section without header metrics prints its rule results only.
    """
    try:
        present = list(action.sections())
    except AttributeError:  # older wheels have no sections(): print every section we know
        return sorted(_SECTIONS, key=lambda s: (s[2], s[1]))
    table = []
    for s in present:
        ident = str(s.identifier())
        d = defs.get(ident)
        if d is not None:
            header = d.header_rows(arch, lambda n: action.metric_by_name(n) is not None)
        else:  # no stored definition found: the names and labels ncu_report gives
            header = sorted(((str(m.name()), str(m.label()) or str(m.name())) for m in s.header_metrics()),
                            key=lambda h: h[0])
        table.append((ident, str(s.name()), int(s.order()), tuple(header)))
    # A section without an order (0: custom sections) comes after the ordered ones.
    return sorted(table, key=lambda s: (s[2] <= 0, s[2], s[1]))


def _plain_message(text: str) -> str:
    """A rule message with its link markup replaced by the words ncu prints."""
    return _URL_LINK.sub(r"\1 (\2)", _SECTION_LINK.sub(r"\1", text))


def _unit(name: str, metric: Any) -> str:
    """The unit ncu 2025.3 prints for a metric on the raw page."""
    unit = _RAW_UNIT_OVERRIDES.get(name, str(metric.unit()))
    if unit == "inst" and _THREAD_INST_DERIVED.fullmatch(name):
        return "thread"
    return unit


def _rule_rows(action: Any) -> dict[str, list[list[str]]]:
    """Rule results of an action, by section identifier, as the five rule columns."""
    out: dict[str, list[list[str]]] = {}
    for r in action.rule_results_as_dicts():
        msg = r.get("rule_message") or {}
        if not msg.get("message"):
            continue  # a rule's second, empty result (e.g. UncoalescedSharedAccess): ncu prints none
        rtype = _RULE_TYPES.get(int(msg.get("type", 0) or 0), "")
        sp_type = sp = ""
        est = r.get("speedup_estimation")
        if est:
            sp_type = _SPEEDUP_TYPES.get(int(est.get("type", 0)), "")
            sp = format_speedup(float(est.get("speedup", math.nan)))
        out.setdefault(str(r.get("section_identifier", "")), []).append(
            [str(r.get("rule_identifier", "")), rtype, _plain_message(str(msg.get("message", ""))),
             sp_type, sp]
        )
    return out


def _rule_records(kid: int, action: Any) -> list[list[Any]]:
    """Rule results of an action as :data:`RULE_TABLE_COLUMNS` rows (speedup as a float)."""
    out: list[list[Any]] = []
    for r in action.rule_results_as_dicts():
        msg = r.get("rule_message") or {}
        est = r.get("speedup_estimation") or {}
        sp = float(est["speedup"]) if "speedup" in est else math.nan
        out.append([
            kid, str(r.get("rule_identifier", "")), str(r.get("name", "")),
            str(r.get("section_identifier", "")), _RULE_TYPES.get(int(msg.get("type", 0) or 0), ""),
            str(msg.get("title", "")), _plain_message(str(msg.get("message", ""))),
            _SPEEDUP_TYPES.get(int(est.get("type", 0) or 0), "") if est else "", sp,
        ])
    return out


_SOURCE_TOP = 10


def _source_records(
    kid: int, action: Any, names: list[str], all_samples: list[tuple[int, int, int]]
) -> list[list[Any]]:
    """The most sampled SASS instructions of an action (Source Counters), hottest first.

    ``smsp__pcsamp_sample_count`` is instanced by program counter; each PC gets its SASS text,
    its dominant stall reason and, when the kernel was built with ``-lineinfo``, its file:line.
    """
    samples = action.metric_by_name("smsp__pcsamp_sample_count")
    if samples is None or samples.num_instances() == 0 or not samples.has_correlation_ids():
        return []
    ids = samples.correlation_ids()
    n = samples.num_instances()
    counts = [(int(samples.as_uint64(i)), i) for i in range(n)]
    all_samples.extend((kid, int(ids.as_uint64(i)), c) for c, i in counts if c > 0)
    counts.sort(reverse=True)
    top = [(c, i) for c, i in counts[:_SOURCE_TOP] if c > 0]
    if not top:
        return []
    pcs = {i: int(ids.as_uint64(i)) for _, i in top}
    stalls: dict[int, tuple[str, int]] = {}
    for name in names:
        if not name.startswith("smsp__pcsamp_warps_issue_stalled_") or name.endswith("_not_issued"):
            continue
        m = action.metric_by_name(name)
        if m is None or m.num_instances() != n:
            continue
        reason = name[len("smsp__pcsamp_warps_issue_stalled_"):]
        for _, i in top:
            c = int(m.as_uint64(i))
            if c > stalls.get(i, ("", -1))[1]:
                stalls[i] = (reason, c)
    executed: dict[int, int] = {}
    inst = action.metric_by_name("inst_executed")
    if inst is not None and inst.has_correlation_ids():
        inst_ids = inst.correlation_ids()
        wanted = set(pcs.values())
        for j in range(inst.num_instances()):
            pc = int(inst_ids.as_uint64(j))
            if pc in wanted:
                executed[pc] = int(inst.as_uint64(j))
    out: list[list[Any]] = []
    for c, i in top:
        pc = pcs[i]
        reason, rc = stalls.get(i, ("", 0))
        # SASS text and file:line are filled in by resolve_sources(), when a kernel is looked at
        out.append([kid, pc, c, reason, rc, executed.get(pc), None, "", None])
    return out


def _sass_and_lines(action: Any, pcs: list[int]) -> dict[int, tuple[str, str, int | None]]:
    """SASS text, file and line per PC.

    The first source call decodes the kernel's SASS and line table (50-100 ms per kernel on a
    2-core machine), so this runs only for kernels someone looks at.
    """
    files = action.source_files()
    has_lines = files is not None and len(files) > 0
    out: dict[int, tuple[str, str, int | None]] = {}
    for pc in pcs:
        info = action.source_info(pc) if has_lines else None
        file, line = (str(info.file_name()), int(info.line())) if info is not None else ("", None)
        out[pc] = (str(action.sass_by_pc(pc) or "").strip(), file, line)
    return out


LINE_COLUMNS = ["file", "line", "samples", "pct"]


def _hottest_lines(action: Any, report: NcuReport, kernel_id: int, top: int = 10) -> pd.DataFrame:
    """Sampled instructions summed per source line, hottest first.

    Columns file, line, samples, pct (of the kernel's samples); empty without ``-lineinfo``.
    """
    import pandas as pd

    ps = report.pc_samples
    files = action.source_files()
    if ps is None or files is None or not len(files):
        return pd.DataFrame(columns=LINE_COLUMNS)
    mine = ps[ps["ID"] == kernel_id]
    totals: dict[tuple[str, int], int] = {}
    for pc, n in zip(mine["pc"], mine["samples"], strict=True):
        info = action.source_info(int(pc))
        if info is not None:
            key = (str(info.file_name()), int(info.line()))
            totals[key] = totals.get(key, 0) + int(n)
    all_samples = int(mine["samples"].sum()) or 1
    rows = sorted(totals.items(), key=lambda kv: -kv[1])[:top]
    return pd.DataFrame([[f, ln, n, 100.0 * n / all_samples] for (f, ln), n in rows], columns=LINE_COLUMNS)


_OPEN_REPORTS: dict[tuple[Path, int, int], Any] = {}
_OPEN_LOCK = threading.RLock()


def _open_report(path: Path, ctx: Any = None) -> Any:
    """The ``ncu_report`` context of a report file, kept open (one file at a time).

    The context keeps the kernels it has decoded (decoding one costs 30-150 ms; asking again, a
    few ms), so the summary read, the raw page and the SASS of the hottest instructions share one
    decode. Keyed by the file's size and modification time: a rewritten file is opened again.
    ``ctx`` registers a context the caller just opened.
    """
    st = path.stat()
    key = (path, st.st_size, st.st_mtime_ns)
    with _OPEN_LOCK:
        if ctx is None:
            ctx = _OPEN_REPORTS.get(key)
            if ctx is not None:
                return ctx
            ctx = _import_ncu_report().load_report(str(path))
        _OPEN_REPORTS.clear()  # keep one report open at a time
        _OPEN_REPORTS[key] = ctx
        return ctx


def resolve_sources(report: NcuReport, kernel_id: int) -> None:
    """Fill in the SASS text and file:line of one kernel's hottest instructions (``report.sources``).

    Reopens the ``.ncu-rep`` (kept open for later kernels); does nothing for CSV exports, for
    kernels already resolved, or when the file is gone (the rows keep their PCs and counts).
    """
    src = report.sources
    if report.source != "ncu-rep" or src is None or not len(src):
        return
    mine = src.index[(src["ID"] == kernel_id) & src["sass"].isna()]
    if not len(mine) or kernel_id in report.source_lines:
        return
    try:
        with _OPEN_LOCK:
            i, j = report.action_refs[kernel_id]
            action = _open_report(report.path).range_by_idx(i).action_by_idx(j)
        found = _sass_and_lines(action, [int(pc) for pc in src.loc[mine, "pc"]])
        report.source_lines[kernel_id] = _hottest_lines(action, report, kernel_id)
    except Exception:  # noqa: BLE001 - the SASS text is decoration; the counts are already there
        return
    src = src.astype({"sass": "object", "file": "object", "line": "object"})
    for idx in mine:
        pc: Any = src.at[idx, "pc"]
        sass, file, line = found[int(pc)]
        src.at[idx, "sass"], src.at[idx, "file"], src.at[idx, "line"] = sass, file, line
    report.sources = src


def _dim(action: Any, prefix: str) -> tuple[int, int, int]:
    return tuple(int(_value(action, f"{prefix}_{a}") or 0) for a in "xyz")  # type: ignore[return-value]


def _nvtx_range(action: Any) -> str:
    state = action.nvtx_state()
    if state is None:
        return ""
    names: list[str] = []
    try:
        for domain_id in state.domains():
            dom = state.domain_by_id(domain_id)
            names.extend(str(n) for n in dom.push_pop_ranges())
    except Exception:  # noqa: BLE001 - NVTX is optional decoration, never a reason to fail
        return ""
    return "/".join(names)


def read_ncu_rep(path: str | Path, *, use_cache: bool = True) -> NcuReport:
    """Read a ``.ncu-rep`` file into tables.

    Decoding a kernel in ``ncu_report`` costs about 0.1 s, so the tables are cached (pickled under
    the user cache directory, keyed by the file's identity and the engine's code); ``use_cache=False``
    neither reads nor writes the cache.

    Only the metrics the summary needs are decoded now (a :class:`LazyNcuReport`): the raw page,
    ``values``/``units`` and any other metric are decoded on first use, and the cache entry is then
    rewritten with the full tables.

    Args:
        path: The report file.
        use_cache: Read and write the on-disk cache.

    Returns:
        The report's kernels, details-page metrics, raw-page metrics, numeric values, rules and
        hottest source lines.

    Raises:
        ReportError: The file is missing, a folder, empty, truncated or not an Nsight Compute report.
    """
    p = Path(path)
    _check_file(p)
    if use_cache:
        cached = _cache_load(p)
        if cached is not None:
            return cached
    report = _read_ncu_rep(p, use_cache)
    if use_cache:
        _cache_store(p, report)
    return report


_CACHE_FORMAT = 6  # 5: stored section defs, "" for no value; 6: names by kernel count


def _cache_file(path: Path) -> Path:
    from engine.system.cache import cache_root, file_identity

    return cache_root() / "ncu-report" / f"{file_identity(path)}-{_CACHE_FORMAT}.pickle"


def _cache_load(path: Path) -> NcuReport | None:
    import pickle

    try:
        with _cache_file(path).open("rb") as f:
            report = pickle.load(f)  # noqa: S301 - our own cache in the user's cache directory
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None
    if not isinstance(report, NcuReport):
        return None
    report.path = path
    return report


def _cache_store(path: Path, report: NcuReport) -> None:
    import pickle

    target = _cache_file(path)
    try:
        atomic_write(target, lambda f: pickle.dump(report, f, protocol=pickle.HIGHEST_PROTOCOL),
                     binary=True, fsync=False)
    except OSError:
        pass  # a read-only or full cache only costs speed


def _read_ncu_rep(p: Path, use_cache: bool = False) -> NcuReport:
    import pandas as pd

    ncu = _import_ncu_report()
    fmt = report_format_version(p)
    try:
        ctx = _open_report(p, ncu.load_report(str(p)))
        refs = [(i, j) for i in range(ctx.num_ranges()) for j in range(ctx.range_by_idx(i).num_actions())]
        actions = [ctx.range_by_idx(i).action_by_idx(j) for i, j in refs]
    except Exception as exc:  # noqa: BLE001 - the native reader's errors are not for people
        if fmt is not None and fmt > KNOWN_FORMAT:
            raise ReportError(_newer_message(p, fmt)) from exc
        raise ReportError(f"{p} could not be read by ncu_report ({exc}); record the report again.") from exc
    if not actions:
        if fmt is not None and fmt > KNOWN_FORMAT:
            raise ReportError(_newer_message(p, fmt))
        raise ReportError(
            f"{p} has no kernel that ncu_report can read: it is damaged or holds no profiled kernel; "
            "copy it again, or profile again and check the ncu filters."
        )
    notes: list[str] = []
    if fmt is not None and fmt > KNOWN_FORMAT:
        notes.append(_newer_message(p, fmt, partly=True))
    pid, pname, host = _process_info(p)
    section_defs = read_section_defs(p)

    kernels: list[dict[str, Any]] = []
    details: list[list[Any]] = []
    raw_units: dict[str, str] = {}
    labels: dict[str, str] = {}
    rule_records: list[list[Any]] = []
    source_records: list[list[Any]] = []
    all_samples: list[tuple[int, int, int]] = []
    sections: dict[int, list[str]] = {}
    detail_units: dict[str, str] = {}
    from engine.reports.ncu_metrics import summary_metrics

    wanted, patterns = summary_metrics()
    name_sets: list[frozenset[str]] = []
    partial_nums: list[dict[str, float]] = []
    idents: list[list[str]] = []
    canonical: dict[str, str] = {}  # one str object per metric name: the cache pickles each once
    name_lists: dict[tuple[str, ...], tuple[list[str], frozenset[str], frozenset[str]]] = {}
    stored_names = [str(a.name(a.NameBase_DEMANGLED)) for a in actions]
    printed_names = simplify_names(stored_names)  # as ncu prints them: depends on the whole report
    for idx, a in enumerate(actions):
        block, grid = _dim(a, "launch__block_dim"), _dim(a, "launch__grid_dim")
        major = _value(a, "device__attribute_compute_capability_major")
        minor = _value(a, "device__attribute_compute_capability_minor")
        cc = f"{int(major)}.{int(minor or 0)}" if major is not None else ""
        demangled = printed_names[idx]
        ident = [
            str(idx), pid, pname, host, demangled, _int_text(a, "launch__context_id"),
            _int_text(a, "launch__stream_id"), "({}, {}, {})".format(*block),
            "({}, {}, {})".format(*grid), _int_text(a, "launch__device_id") or "0", cc,
        ]
        dur = _value(a, "gpu__time_duration.sum")
        kernels.append({
            "ID": idx, "Kernel Name": demangled, "Base Name": str(a.name(a.NameBase_FUNCTION)),
            "Mangled Name": str(a.name(a.NameBase_MANGLED)), "Process ID": pid, "Process Name": pname,
            "Context": ident[5], "Stream": ident[6], "Grid Size": ident[8], "Block Size": ident[7],
            "grid_x": grid[0], "grid_y": grid[1], "grid_z": grid[2],
            "block_x": block[0], "block_y": block[1], "block_z": block[2],
            "Registers Per Thread": _value(a, "launch__registers_per_thread"),
            "Static Shared Memory Per Block": _value(a, "launch__shared_mem_per_block_static"),
            "Dynamic Shared Memory Per Block": _value(a, "launch__shared_mem_per_block_dynamic"),
            "Device": ident[9], "Device Name": _value(a, "device__attribute_display_name") or "",
            "CC": cc, "duration_ns": float(dur) if dur is not None else math.nan,
            "NVTX Range": _nvtx_range(a),
        })
        rules = _rule_rows(a)
        nums: dict[str, float] = {}
        arch = int(major) * 10 + int(minor or 0) if major is not None else None
        for sid, sname, _order, header in _section_table(a, section_defs, arch):
            for metric_name, label in header:
                m = a.metric_by_name(metric_name)
                if m is None:  # a header metric the report lacks: ncu prints "n/a" without a unit
                    details.append([*ident, sname, label, "", "n/a", *[""] * 5, math.nan, metric_name])
                    continue
                text, num = _metric_text(m)
                nums[metric_name] = num
                unit = detail_units.get(metric_name)
                if unit is None:  # unit() costs ~60 us a call; a metric's unit is the same in every kernel
                    unit = detail_units[metric_name] = str(m.unit())
                details.append([*ident, sname, label, unit, text, "", "", "", "", "", num, metric_name])
            for rule in rules.get(sid, []):
                details.append([*ident, sid, "", "", "", *rule, math.nan, ""])
        listed = tuple(map(str, a.metric_names()))
        known = name_lists.get(listed)  # kernels of one report mostly have the same metric names
        if known is None:
            names = [canonical.setdefault(n, n) for n in listed]
            have = frozenset(n for n in names if not n.startswith(_NOT_METRICS))
            summary = wanted.intersection(have).union(
                n for n in have for pre, suf in patterns if n.startswith(pre) and n.endswith(suf))
            known = name_lists[listed] = (names, have, summary)
        names, have, summary = known
        # Only the summary's metrics now (the rest when the raw page or another metric is asked for).
        nums = {n: x for n, x in nums.items() if n in have}  # the details header metrics
        for name in summary.union(nums):
            if name not in nums or name not in raw_units:
                m = a.metric_by_name(name)
                if name not in nums:
                    nums[name] = _metric_text(m)[1]
                if name not in raw_units:
                    raw_units[name] = _unit(name, m)
        idents.append(ident)
        name_sets.append(have)
        partial_nums.append(nums)
        rule_records.extend(_rule_records(idx, a))
        source_records.extend(_source_records(idx, a, names, all_samples))
        sections[idx] = _labels(a, labels)

    metrics = pd.DataFrame(details, columns=[*DETAILS_COLUMNS, "value", "metric"])
    report = LazyNcuReport(
        p, "ncu-rep", pd.DataFrame(kernels, columns=KERNEL_COLUMNS), metrics, pd.DataFrame(), {},
        notes=notes, values=None, units={}, labels=labels,
        rules=pd.DataFrame(rule_records, columns=RULE_TABLE_COLUMNS),
        sources=pd.DataFrame(source_records, columns=SOURCE_COLUMNS), sections=sections,
        action_refs=refs, pc_samples=pd.DataFrame(all_samples, columns=["ID", "pc", "samples"]),
        stored_names=stored_names,
    )
    st = p.stat()
    report.__dict__["_partial"] = _Partial(
        name_sets, partial_nums, raw_units, idents, use_cache, (st.st_size, st.st_mtime_ns)
    )
    return report


def _all_metrics(
    actions: list[Any], idents: list[list[str]]
) -> tuple[pd.DataFrame, dict[str, str], pd.DataFrame]:
    """Every metric of every kernel: the raw page (text as ncu prints it), its units, ``values``."""
    import numpy as np
    import pandas as pd

    raw_rows: list[dict[str, str]] = []
    raw_units: dict[str, str] = {}
    numeric: list[dict[str, float]] = []
    for a, ident in zip(actions, idents, strict=True):
        row = dict(zip(ID_COLUMNS, ident, strict=True))
        nums: dict[str, float] = {}
        for name in map(str, a.metric_names()):
            if name.startswith(_NOT_METRICS):
                continue
            m = a.metric_by_name(name)
            row[name], nums[name] = _metric_text(m)
            if name not in raw_units:
                raw_units[name] = _unit(name, m)
        raw_rows.append(row)
        numeric.append(nums)
    cols = ID_COLUMNS + sorted(raw_units)
    # Built as one 2-D block each: per-column construction of ~2,000 columns costs ~0.5 s.
    cells = np.empty((len(raw_rows), len(cols)), dtype=object)
    for r, row in enumerate(raw_rows):
        cells[r] = [row.get(c, "") for c in cols]
    raw = pd.DataFrame(cells, columns=cols, dtype=object)
    names = sorted({n for nums in numeric for n in nums})
    pos = {n: i for i, n in enumerate(names)}
    table = np.full((len(numeric), len(names)), np.nan)
    for r, nums in enumerate(numeric):
        table[r, [pos[n] for n in nums]] = list(nums.values())
    values = pd.DataFrame(table, index=pd.Index(range(len(numeric)), name="ID"), columns=names)
    return raw, raw_units, values


def _labels(action: Any, labels: dict[str, str]) -> list[str]:
    """Record the labels ncu's sections give their metrics; return the action's section identifiers."""
    idents: list[str] = []
    try:
        secs = list(action.sections())
    except AttributeError:  # older wheels have no sections()
        return idents
    for s in secs:
        idents.append(str(s.identifier()))
        for m in (*s.header_metrics(), *s.body_metrics()):
            name = str(m.name())
            if name not in labels:
                label = str(m.label())
                if label:
                    labels[name] = label
    return idents


# ---------------------------------------------------------------------------------------------
# CSV exports

_PREFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "m": 1e-3, "u": 1e-6, "n": 1e-9}
_TIME_TO_NS = {"ns": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
_PER_TIME = {"ns": 1e9, "us": 1e6, "ms": 1e3}


def to_base_unit(unit: str) -> tuple[str, float]:
    """The base unit ncu's ``--print-units base`` uses for a scaled unit, and the factor to it.

    The factor is the one ncu applies (it multiplies by the prefix wherever it sits, so
    ``%/Kbyte`` values are multiplied by 1000, as ncu prints them).
    """
    if unit in _TIME_TO_NS:
        return "ns", _TIME_TO_NS[unit]
    num, sep, den = unit.partition("/")
    factor = 1.0
    m = re.fullmatch(r"([KMGTP])(byte|hz|B)(.*)", num)
    if m:
        factor *= _PREFIX[m.group(1)]
        num = m.group(2) + m.group(3)
    if sep:
        if den in _PER_TIME:
            factor *= _PER_TIME[den]
            den = "s"
        else:
            m = re.fullmatch(r"([KMGTP])(byte|B)", den)
            if m:
                factor *= _PREFIX[m.group(1)]
                den = m.group(2)
    return num + sep + den, factor


def parse_number(text: str) -> float:
    """A number as ncu prints it, with or without locale thousands separators; NaN if not a number."""
    s = text.strip()
    if not s:
        return math.nan
    if re.fullmatch(r"-?\d{1,3}(\.\d{3})+(,\d+)?", s):  # 1.234,5 (decimal comma locales)
        s = s.replace(".", "").replace(",", ".")
    else:
        s = s.replace(",", "")
    try:
        return float(s)
    except ValueError:
        return math.nan


def _base(text: str, unit: str) -> tuple[str, str, float]:
    """(base unit, printed text in base units, value) for one CSV cell."""
    value = parse_number(text)
    base, factor = to_base_unit(unit)
    if math.isnan(value):
        return base, text, value
    value *= factor
    if factor != 1.0:
        value = round(value, 6)
    return base, format_number(value), value


def _read_csv_rows(path: Path) -> list[list[str]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ReportError(f"{path} is not a text CSV export of ncu; export it with `ncu --csv`.") from exc
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    if not rows or rows[0][:1] != ["ID"] or rows[0][:len(ID_COLUMNS)] != ID_COLUMNS:
        raise ReportError(
            f"{path} is not an `ncu --csv --page details` or `--page raw` export; export it again."
        )
    return rows


def _kernels_from(ident_rows: dict[str, list[str]], values: dict[str, dict[str, float]]) -> pd.DataFrame:
    import pandas as pd

    out = []
    for key, ident in ident_rows.items():
        v = values.get(key, {})
        dims = []
        for col in (ident[8], ident[7]):
            nums = [int(x) for x in re.findall(r"\d+", col)] + [1, 1, 1]
            dims.append(nums[:3])
        out.append({
            "ID": int(ident[0]), "Kernel Name": ident[4], "Base Name": ident[4].split("(")[0].split(" ")[-1],
            "Mangled Name": "", "Process ID": ident[1], "Process Name": ident[2], "Context": ident[5],
            "Stream": ident[6], "Grid Size": ident[8], "Block Size": ident[7],
            "grid_x": dims[0][0], "grid_y": dims[0][1], "grid_z": dims[0][2],
            "block_x": dims[1][0], "block_y": dims[1][1], "block_z": dims[1][2],
            "Registers Per Thread": _int_or_none(v.get("launch__registers_per_thread")),
            "Static Shared Memory Per Block": _int_or_none(v.get("launch__shared_mem_per_block_static")),
            "Dynamic Shared Memory Per Block": _int_or_none(v.get("launch__shared_mem_per_block_dynamic")),
            "Device": ident[9], "Device Name": "", "CC": ident[10],
            "duration_ns": v.get("gpu__time_duration.sum", math.nan), "NVTX Range": "",
        })
    return pd.DataFrame(out, columns=KERNEL_COLUMNS)


def _int_or_none(v: float | None) -> int | None:
    return None if v is None or math.isnan(v) else int(v)


def read_ncu_csv(path: str | Path) -> NcuReport:
    """Read an ``ncu --import R --csv --page details`` or ``--page raw`` export.

    Values are converted to base units (as ``--print-units base`` would print them); locale
    thousands separators are understood.

    Raises:
        ReportError: The file is missing, a folder, or not such an export.
    """
    import pandas as pd

    p = Path(path)
    if not p.exists():
        raise ReportError(f"{p} does not exist; check the path.")
    if p.is_dir():
        raise ReportError(f"{p} is a folder, not a report; give the path of a .ncu-rep or .csv file.")
    rows = _read_csv_rows(p)
    header = rows[0]
    labels = {(s[1], label): metric for s in _SECTIONS for metric, label in s[3]}
    idents: dict[str, list[str]] = {}
    values: dict[str, dict[str, float]] = {}
    n_id = len(ID_COLUMNS)
    if header[n_id:n_id + 4] == ["Section Name", "Metric Name", "Metric Unit", "Metric Value"]:
        details = []
        for r in rows[1:]:
            r = (r + [""] * len(DETAILS_COLUMNS))[:len(DETAILS_COLUMNS)]
            ident = r[:n_id]
            idents.setdefault(ident[0], ident)
            section, label, unit, text = r[n_id:n_id + 4]
            metric = labels.get((section, label), "")
            if r[n_id + 4]:  # a rule row
                details.append([*r, math.nan, ""])
                continue
            unit, text, value = _base(text, unit)
            if metric:
                values.setdefault(ident[0], {})[metric] = value
            details.append([*ident, section, label, unit, text, "", "", "", "", "", value, metric])
        metrics = pd.DataFrame(details, columns=[*DETAILS_COLUMNS, "value", "metric"])
        raw = pd.DataFrame(columns=ID_COLUMNS)
        units = {str(m): str(u) for m, u in zip(metrics["metric"], metrics["Metric Unit"], strict=True) if m}
        rules = [
            [int(r[0]), r[n_id + 4], r[n_id + 4], r[n_id], r[n_id + 5], "", r[n_id + 6], r[n_id + 7],
             _parse_speedup(r[n_id + 8])]
            for r in metrics[DETAILS_COLUMNS].itertuples(index=False, name=None) if r[n_id + 4]
        ]
        return NcuReport(p, "csv-details", _kernels_from(idents, values), metrics, raw, {},
                         values=_values_frame(idents, values), units=units,
                         labels={m: lab for (_s, lab), m in labels.items()},
                         rules=pd.DataFrame(rules, columns=RULE_TABLE_COLUMNS),
                         sources=pd.DataFrame(columns=SOURCE_COLUMNS))

    if len(rows) < 2:
        raise ReportError(f"{p} has no units row; export it again with `ncu --csv --page raw`.")
    units_row = rows[1]
    names = header[n_id:]
    raw_units: dict[str, str] = {}
    factors: list[float] = []
    for name, unit in zip(names, units_row[n_id:], strict=False):
        base, factor = to_base_unit(unit)
        raw_units[name] = base
        factors.append(factor)
    raw_rows = []
    for r in rows[2:]:
        ident = r[:n_id]
        idents[ident[0]] = ident
        row = dict(zip(ID_COLUMNS, ident, strict=False))
        vals: dict[str, float] = {}
        for name, cell, unit in zip(names, r[n_id:], units_row[n_id:], strict=False):
            _, text, value = _base(cell, unit)
            if cell in ("", "no data"):
                text = cell
            row[name] = text
            vals[name] = value
        values[ident[0]] = vals
        raw_rows.append(row)
    raw = pd.DataFrame(raw_rows).reindex(columns=ID_COLUMNS + names).fillna("")
    # The details rows that the raw page can answer (no rule results: the raw page has none).
    details = []
    for key, ident in idents.items():
        for _sid, sname, _order, header_metrics in sorted(_SECTIONS, key=lambda s: (s[2], s[1])):
            for metric, label in header_metrics:
                if metric not in raw_units:
                    continue
                text = str(raw.loc[raw["ID"] == key, metric].iloc[0])
                details.append([*ident, sname, label, raw_units[metric], text, "", "", "", "", "",
                                values[key].get(metric, math.nan), metric])
    metrics = pd.DataFrame(details, columns=[*DETAILS_COLUMNS, "value", "metric"])
    return NcuReport(p, "csv-raw", _kernels_from(idents, values), metrics, raw, raw_units,
                     values=_values_frame(idents, values), units=dict(raw_units),
                     labels={m: lab for (_s, lab), m in labels.items()},
                     rules=pd.DataFrame(columns=RULE_TABLE_COLUMNS),
                     sources=pd.DataFrame(columns=SOURCE_COLUMNS))


def _parse_speedup(text: str) -> float:
    """An estimated speedup: ncu prints it with 4 significant digits and no grouping ("6.327")."""
    try:
        return float(text)
    except ValueError:
        return parse_number(text.replace(",", "."))


def _values_frame(idents: dict[str, list[str]], values: dict[str, dict[str, float]]) -> pd.DataFrame:
    import pandas as pd

    keys = list(idents)
    return pd.DataFrame([values.get(k, {}) for k in keys],
                        index=pd.Index([int(k) for k in keys], name="ID"), dtype="float64")


def read_ncu(path: str | Path) -> NcuReport:
    """Read an Nsight Compute report (``.ncu-rep``) or its CSV export (``.csv``).

    Raises:
        ReportError: The file cannot be read; the message says what to do.
    """
    p = Path(path)
    if p.suffix.lower() == ".csv":
        return read_ncu_csv(p)
    return read_ncu_rep(p)
