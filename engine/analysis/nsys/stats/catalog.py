"""The ``nsys stats`` reports Kernelscope prints: names, nsys 2022 aliases and column headers."""

from __future__ import annotations

import re
from collections.abc import Sequence

from engine.system.errors import KernelscopeError

#: Report name (nsys 2024+ spelling) -> one-line description.
REPORTS: dict[str, str] = {
    "cuda_api_sum": "CUDA API Summary: runtime and driver calls grouped by name",
    "cuda_gpu_kern_sum": "CUDA GPU Kernel Summary: kernel executions grouped by name",
    "cuda_gpu_mem_time_sum": "GPU Memory Operations Summary (by Time): memcpy/memset durations",
    "cuda_gpu_mem_size_sum": "GPU Memory Operations Summary (by Size): memcpy/memset sizes in MB",
    "nvtx_sum": "NVTX Range Summary: push/pop and start/end ranges grouped by name and style",
    "cuda_api_gpu_sum": "CUDA Summary (API/Kernels/MemOps): API calls, kernels and memory operations",
    "cuda_kern_exec_sum": "CUDA Kernel Launch & Exec Time Summary: API, queue and kernel times",
    "cuda_gpu_sum": "GPU Summary (Kernels/MemOps): kernels and memory operations together",
    "cuda_gpu_trace": "CUDA GPU Trace: one row per kernel, memcpy and memset, by start time",
    "cuda_api_trace": "CUDA API Trace: one row per runtime and driver call, by start time",
    "cuda_kern_exec_trace": "CUDA Kernel Launch & Exec Time Trace: each kernel with its launch call",
    "cuda_gpu_kern_gb_sum": "CUDA GPU Kernel/Grid/Block Summary: kernels grouped by name, grid and block",
    "nvtx_pushpop_sum": "NVTX Push/Pop Range Summary",
    "nvtx_startend_sum": "NVTX Start/End Range Summary",
    "nvtx_pushpop_trace": "NVTX Push/Pop Range Trace: every range with its parent, level and children",
    "nvtx_kern_sum": "NVTX Range Kernel Summary: kernels grouped by the NVTX range that launched them",
    "nvtx_gpu_proj_trace": "NVTX GPU Projection Trace: ranges projected onto the GPU work they launched",
    "nvtx_gpu_proj_sum": "NVTX GPU Projection Summary: projected ranges grouped by name and style",
    "osrt_sum": "OS Runtime Summary: OS runtime calls grouped by function (--trace=osrt)",
    "openmp_sum": "OpenMP Summary: OpenMP events grouped by name",
    "um_sum": "Unified Memory Analysis Summary: migrations and page faults per virtual address",
    "um_total_sum": "Unified Memory Totals Summary",
    "um_cpu_page_faults_sum": "Unified Memory CPU Page Faults Summary: faults per CPU instruction",
    "mpi_event_sum": "MPI Event Summary (captures with --trace=mpi; not computed for MPI data yet)",
    "mpi_event_trace": "MPI Event Trace (captures with --trace=mpi; not computed for MPI data yet)",
}

#: nsys 2022.x report names (``nsys stats --help-reports`` of 2022.4) -> current names.
ALIASES: dict[str, str] = {
    "cudaapisum": "cuda_api_sum",
    "gpukernsum": "cuda_gpu_kern_sum",
    "gpumemtimesum": "cuda_gpu_mem_time_sum",
    "gpumemsizesum": "cuda_gpu_mem_size_sum",
    "nvtxsum": "nvtx_sum",
    "apigpusum": "cuda_api_gpu_sum",
    "kernexecsum": "cuda_kern_exec_sum",
    "gpusum": "cuda_gpu_sum",
    "gputrace": "cuda_gpu_trace",
    "cudaapitrace": "cuda_api_trace",
    "kernexectrace": "cuda_kern_exec_trace",
    "nvtxppsum": "nvtx_pushpop_sum",
    "nvtxsesum": "nvtx_startend_sum",
    "nvtxpptrace": "nvtx_pushpop_trace",
    "nvtxkernsum": "nvtx_kern_sum",
    "nvtxgpuproj": "nvtx_gpu_proj_trace",
    "osrtsum": "osrt_sum",
    "openmpevtsum": "openmp_sum",
    "unifiedmemory": "um_sum",
    "unifiedmemorytotals": "um_total_sum",
    "umcpupagefaults": "um_cpu_page_faults_sum",
}

_STAT_COLS = ("Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)")
_SUM_COLS = ("Time (%)", "Total Time (ns)")

COLUMNS: dict[str, tuple[str, ...]] = {
    "cuda_api_sum": (*_SUM_COLS, "Num Calls", *_STAT_COLS, "Name"),
    "cuda_gpu_kern_sum": (*_SUM_COLS, "Instances", *_STAT_COLS, "Name"),
    "cuda_gpu_mem_time_sum": (*_SUM_COLS, "Count", *_STAT_COLS, "Operation"),
    "cuda_gpu_mem_size_sum": (
        "Total (MB)", "Count", "Avg (MB)", "Med (MB)", "Min (MB)", "Max (MB)", "StdDev (MB)",
        "Operation",
    ),
    "nvtx_sum": (*_SUM_COLS, "Instances", *_STAT_COLS, "Style", "Range"),
    "cuda_api_gpu_sum": (*_SUM_COLS, "Instances", *_STAT_COLS, "Category", "Operation"),
    "cuda_kern_exec_sum": (
        "PID", "TID", "DevId", "Count", "QCount",
        *(f"{p}{s} (ns)" for p in "TAQK" for s in ("Avg", "Med", "Min", "Max", "StdDev")),
        "API Name", "Kernel Name",
    ),
    "cuda_gpu_sum": (*_SUM_COLS, "Instances", *_STAT_COLS, "Category", "Operation"),
    # nsys 2025.3 columns. The Debian nsys 2022.4 `gputrace` differs: no GreenCtx column,
    # "Throughput (MBps)", memcpy names "[CUDA memcpy HtoD]" instead of "...Host-to-Device]", and its
    # throughput formula is the same as 2025.3's (bytes/1e6 * (1e9 // duration)).
    "cuda_gpu_trace": (
        "Start (ns)", "Duration (ns)", "CorrId", "GrdX", "GrdY", "GrdZ", "BlkX", "BlkY", "BlkZ",
        "Reg/Trd", "StcSMem (MB)", "DymSMem (MB)", "Bytes (MB)", "Throughput (MB/s)", "SrcMemKd",
        "DstMemKd", "Device", "Ctx", "GreenCtx", "Strm", "Name",
    ),
    "cuda_api_trace": (
        "Start (ns)", "Duration (ns)", "Name", "Result", "CorrID", "Pid", "Tid", "T-Pri", "Thread Name",
    ),
    "cuda_kern_exec_trace": (
        "API Start (ns)", "API Dur (ns)", "Queue Start (ns)", "Queue Dur (ns)", "Kernel Start (ns)",
        "Kernel Dur (ns)", "Total Dur (ns)", "PID", "TID", "DevId", "API Function", "GridXYZ",
        "BlockXYZ", "Kernel Name",
    ),
    "cuda_gpu_kern_gb_sum": (*_SUM_COLS, "Instances", *_STAT_COLS, "GridXYZ", "BlockXYZ", "Name"),
    "nvtx_pushpop_sum": (*_SUM_COLS, "Instances", *_STAT_COLS, "Range"),
    "nvtx_startend_sum": (*_SUM_COLS, "Instances", *_STAT_COLS, "Range"),
    "osrt_sum": (*_SUM_COLS, "Num Calls", *_STAT_COLS, "Name"),
    "nvtx_kern_sum": (
        "NVTX Range", "Style", "PID", "TID", "NVTX Inst", "Kern Inst", "Total Time (ns)", *_STAT_COLS,
        "Kernel Name",
    ),
    "nvtx_gpu_proj_trace": (
        "Name", "Projected Start (ns)", "Projected Duration (ns)", "Orig Start (ns)",
        "Orig Duration (ns)", "Style", "PID", "TID", "NumGPUOps", "Lvl", "NumChild", "RangeId",
        "ParentId", "RangeStack",
    ),
    "nvtx_gpu_proj_sum": (
        "Range", "Style", "Total Proj Time (ns)", "Total Range Time (ns)", "Range Instances",
        "Proj Avg (ns)", "Proj Med (ns)", "Proj Min (ns)", "Proj Max (ns)", "Proj StdDev (ns)",
        "Total GPU Ops", "Avg GPU Ops", "Avg Range Lvl", "Avg Num Child",
    ),
    "nvtx_pushpop_trace": (
        "Start (ns)", "End (ns)", "Duration (ns)", "DurChild (ns)", "DurNonChild (ns)", "Name", "PID",
        "TID", "Lvl", "NumChild", "RangeId", "ParentId", "RangeStack", "NameTree",
    ),
    "openmp_sum": (*_SUM_COLS, "Count", *_STAT_COLS, "Name"),
    "um_sum": (
        "Virtual Address", "HtoD Migration size (MB)", "DtoH Migration size (MB)", "CPU Page Faults",
        " GPU Page Faults", "Migration Throughput (MB/s)",
    ),
    "um_total_sum": (
        "Total HtoD Migration Size (MB)", "Total DtoH Migration Size (MB)", "Total CPU Page Faults",
        "Total GPU PageFaults", "Minimum Virtual Address", "Maximum Virtual Address",
    ),
    "um_cpu_page_faults_sum": ("CPU Page Faults", "CPU Instruction Address", "Source File", "Source Line"),
    # Headers unknown until an MPI capture's oracle exists: the reports are empty without MPI data.
    "mpi_event_sum": ("Name",),
    "mpi_event_trace": ("Name",),
}

# nsys strips the 4-digit CUDA-version suffix of runtime entry points (cudaMemcpy_v3020 ->
# cudaMemcpy) but keeps other suffixes: the fixtures' oracles show cudaEventRecordWithFlags_v11010,
# cudaStreamIsCapturing_v10000 and cuGetProcAddress_v2 printed as is.
_API_SUFFIX = re.compile(r"_v\d{4}$")

_NVTX_STYLES = {59: "PushPop", 60: "StartEnd"}


def columns_needed(names: Sequence[str]) -> dict[str, list[str]]:
    """The big-table columns that the given reports read (for prefetching)."""
    need: dict[str, list[str]] = {}
    core = {"cuda_api_sum": {"api": ["start", "end", "name"]},
            "cuda_gpu_kern_sum": {"kernels": ["start", "end", "name"]}}
    for n in names:
        for table, cols in core.get(n, {}).items():
            need.setdefault(table, [])
            need[table] += [c for c in cols if c not in need[table]]
    return need


def resolve_report_name(name: str) -> str:
    """Return the current report name for ``name`` (a current name or an nsys 2022 alias).

    Args:
        name: a report name such as ``"cuda_gpu_kern_sum"`` or ``"gpukernsum"`` (case-insensitive).

    Returns:
        The name as a key of :data:`REPORTS`.

    Raises:
        KernelscopeError: the name is not a known report.

    """
    key = name.strip().lower()
    if key in REPORTS:
        return key
    if key in ALIASES:
        return ALIASES[key]
    raise KernelscopeError(
        f"Unknown report {name!r}; choose one of {', '.join(REPORTS)} "
        f"(or the nsys 2022 names {', '.join(ALIASES)})."
    )


#: Columns that hold text (left-aligned in tables, never formatted as numbers).
_TEXT_COLS = frozenset({
    "Name", "Operation", "Style", "Range", "Category", "API Name", "Kernel Name", "Thread Name",
    "API Function", "GridXYZ", "BlockXYZ", "Virtual Address", "Minimum Virtual Address",
    "Maximum Virtual Address", "CPU Instruction Address", "Source File", "RangeStack", "NameTree",
    "NVTX Range", "SrcMemKd", "DstMemKd", "Device",
})
