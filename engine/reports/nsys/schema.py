"""The Nsight Systems SQLite export's schema, in one place.

Table names, how a ``globalTid``/``globalPid`` packs a process and thread id, and the SQL of every
column and filter that :meth:`~engine.reports.base.Trace.columns` reads from an export: the engine's
column names (:mod:`engine.reports.trace_columns` says which exist, for every kind of trace) map to
an expression over the export's table (:func:`column_sql`), and a named filter to its SQL
(:func:`where_sql`). Nothing outside ``engine.reports`` names an export table or writes SQL over
one: it asks a trace for columns by the engine's table names (``kernels``, ``memcpy``, ``api``, ...)::

    cols = trace.columns("kernels", ["start", "end", "nameId", "pid"])
    names = trace.strings()                   # nameId -> the kernel's name
    ranges = trace.columns("nvtx", ["start", "end", "textId"], where="ranges")

The expressions keep to the forms the page reader (:mod:`engine.reports.nsys.pages`) reads
straight from the file; the columnar cache (:mod:`engine.reports.nsys.columns`) keys its files by
column name and expression, so every reader of a column shares one file. :data:`NULL` (the
missing-value stand-in) and :func:`decode_global_tid` are the engine's, re-exported here.
"""

from __future__ import annotations

import re

from engine.reports.trace_columns import NARROW as NARROW
from engine.reports.trace_columns import NULL as NULL
from engine.reports.trace_columns import NVTX_DOMAIN_CREATE as NVTX_DOMAIN_CREATE
from engine.reports.trace_columns import NVTX_MARK as NVTX_MARK
from engine.reports.trace_columns import NVTX_PUSH_POP as NVTX_PUSH_POP
from engine.reports.trace_columns import NVTX_START_END as NVTX_START_END
from engine.reports.trace_columns import NVTXT_PUSH_POP as NVTXT_PUSH_POP
from engine.reports.trace_columns import NVTXT_START_END as NVTXT_START_END
from engine.reports.trace_columns import Where
from engine.reports.trace_columns import decode_global_tid as decode_global_tid

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

#: The kernel's name as nsys prints it: its demangled name, else its short name.
KERNEL_NAME_ID = 'coalesce("demangledName", "shortName")'
DURATION = '"end" - "start"'


def table(name: str) -> str:
    """The export's table for the engine's table ``name`` (``"kernels"`` -> CUPTI_ACTIVITY_KIND_KERNEL)."""
    return TABLES[name]


_GLOBAL_PID = '"globalPid" / 16777216 % 16777216'
_GLOBAL_TID = {"pid": '"globalTid" / 16777216 % 16777216', "tid": '"globalTid" % 16777216'}

#: A launch shape packed into one integer: x (31 bits) << 32 | y (16 bits) << 16 | z (16 bits); NULL
#: where a value does not fit, which CUDA's limits rule out.
_SHAPE = ('CASE WHEN "{w}X" BETWEEN 0 AND 2147483647 AND "{w}Y" BETWEEN 0 AND 65535 '
          'AND "{w}Z" BETWEEN 0 AND 65535 THEN ("{w}X" << 32) | ("{w}Y" << 16) | "{w}Z" END')

#: table -> derived column -> its SQL over the export's table (a stored column is ``"name"``)
COLUMN_SQL: dict[str, dict[str, str]] = {
    "kernels": {"duration": DURATION, "nameId": KERNEL_NAME_ID, "shortNameId": '"shortName"',
                "mangledNameId": '"mangledName"', "pid": _GLOBAL_PID,
                "gridShape": _SHAPE.format(w="grid"), "blockShape": _SHAPE.format(w="block")},
    "memcpy": {"duration": DURATION, "pid": _GLOBAL_PID},
    "memset": {"duration": DURATION, "pid": _GLOBAL_PID},
    "api": {"duration": DURATION, **_GLOBAL_TID},
    "sync": {"duration": DURATION, "pid": _GLOBAL_PID},
    "nvtx": {"duration": DURATION, **_GLOBAL_TID},
    "memory_usage": {"pid": _GLOBAL_PID},
    "threads": _GLOBAL_TID,
    "gpu_metrics": {"gpu": '"typeId" % 256'},
}

_QUOTED = re.compile(r'"(\w+)"')


def column_sql(table_name: str, column: str, have: set[str]) -> str:
    """The SQL of the engine's ``column`` of table ``table_name`` over an export whose table has ``have``.

    A column the export lacks is ``NULL`` (in a ``coalesce``, only that operand is); ``rowid`` is the
    row's id.
    """
    if column == "rowid":
        return "rowid"
    sql = COLUMN_SQL.get(table_name, {}).get(column, f'"{column}"')
    used = _QUOTED.findall(sql)
    if all(c in have for c in used):
        return sql
    if not sql.startswith("coalesce("):
        return "NULL"
    kept = [f'"{c}"' for c in used if c in have]
    return f"coalesce({', '.join(kept)})" if len(kept) > 1 else (kept[0] if kept else "NULL")


def where_sql(table_name: str, where: Where, have: set[str]) -> str:
    """The SQL condition of a filter (its columns as :func:`column_sql` gives them)."""
    parts = []
    for c in where.clauses:
        col = column_sql(table_name, c.column, have)
        if c.op == "in":
            parts.append(f"{col} IN ({', '.join(str(int(v)) for v in c.values)})")
        elif c.op == "not null":
            parts.append(f"{col} IS NOT NULL")
        elif c.op == "is null":
            parts.append(f"{col} IS NULL")
        elif c.op == "in table":  # a semi-join on the other table's same column
            parts.append(f'{col} IN (SELECT "{c.column}" FROM {TABLES[c.of]})')
        else:  # >=, <=
            parts.append(f"{col} {c.op} {int(c.values[0])}")
    return " AND ".join(parts)
