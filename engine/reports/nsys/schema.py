"""The Nsight Systems SQLite export's schema, in one place.

Table names, the value that stands for SQL NULL in column-wise reads, how a ``globalTid`` /
``globalPid`` packs a process and thread id, and the SQL expressions that derive the columns the
engine reads. Nothing outside ``engine.reports`` names an export table or writes SQL over one: it asks
a trace for columns by the engine's table names (``kernels``, ``memcpy``, ``api``, ...).
"""

from __future__ import annotations

from typing import Any

#: The engine's table name -> the export's table.
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
NVTX = "NVTX_EVENTS"
OSRT = "OSRT_API"
STRINGS = "StringIds"
GPU_INFO = "TARGET_INFO_GPU"
GPU_METRICS = "GPU_METRICS"
GPU_METRIC_INFO = "TARGET_INFO_GPU_METRICS"
SESSION_START = "TARGET_INFO_SESSION_START_TIME"
SYSTEM_ENV = "TARGET_INFO_SYSTEM_ENV"
PROCESSES = "PROCESSES"
THREAD_NAMES = "ThreadNames"
MEMORY_USAGE = "CUDA_GPU_MEMORY_USAGE_EVENTS"
EXPORT_META = "META_DATA_EXPORT"
ENUM_MEMCPY_OPER = "ENUM_CUDA_MEMCPY_OPER"
ENUM_MEM_KIND = "ENUM_CUDA_MEM_KIND"
ENUM_SYNC_TYPE = "ENUM_CUPTI_SYNC_TYPE"
ENUM_DEV_MEM_EVENT_OPER = "ENUM_CUDA_DEV_MEM_EVENT_OPER"

TABLES: dict[str, str] = {
    "kernels": KERNEL, "memcpy": MEMCPY, "memset": MEMSET, "api": RUNTIME, "sync": SYNC,
    "nvtx": NVTX, "osrt": OSRT, "memory_usage": MEMORY_USAGE, "gpu_metrics": GPU_METRICS,
    "processes": PROCESSES, "threads": THREAD_NAMES, "gpus": GPU_INFO,
}

#: Stands for SQL NULL in integer columns read column-wise (never a real time, id or size).
NULL = -(2**62)

#: NVTX ``eventType`` values: push/pop range, start/end range, mark (nsys's NvtxEventType).
NVTX_PUSH_POP = 59
NVTX_START_END = 60
NVTX_MARK = 34
NVTX_DOMAIN_CREATE = 75

_PACK = 1 << 24

#: The kernel's name as nsys prints it: its demangled name, else its short name.
KERNEL_NAME_ID = 'coalesce("demangledName", "shortName")'
DURATION = '"end" - "start"'


def decode_global_tid(global_tid: Any) -> tuple[Any, Any]:
    """Split a ``globalTid``/``globalPid`` into (pid, tid); works on ints, numpy arrays and Series."""
    # Floor division and modulo work on all three (a pandas Series of objects has no >>).
    return (global_tid // _PACK) % _PACK, global_tid % _PACK


def table(name: str) -> str:
    """The export's table for the engine's table ``name`` (``"kernels"`` -> CUPTI_ACTIVITY_KIND_KERNEL)."""
    return TABLES[name]
