"""The ``nsys stats`` reports by name: titles and columns (from the registry), nsys 2022 aliases."""

from __future__ import annotations

import re

from engine.analysis.nsys.stats.registry import ReportField
from engine.system.errors import KernelscopeError

#: Report name (nsys 2024+ spelling) -> one-line description (each report module's ``title``).
REPORTS: ReportField = ReportField(lambda r: r.title)
#: Report name -> the columns nsys prints, in its order.
COLUMNS: ReportField = ReportField(lambda r: r.columns)

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

#: The statistics columns of nsys's summaries, and the two that open its time summaries.
STAT_COLS = ("Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)")
SUM_COLS = ("Time (%)", "Total Time (ns)")

# nsys strips the 4-digit CUDA-version suffix of runtime entry points (cudaMemcpy_v3020 ->
# cudaMemcpy) but keeps other suffixes: the fixtures' oracles show cudaEventRecordWithFlags_v11010,
# cudaStreamIsCapturing_v10000 and cuGetProcAddress_v2 printed as is.
_API_SUFFIX = re.compile(r"_v\d{4}$")

_NVTX_STYLES = {59: "PushPop", 60: "StartEnd"}


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
