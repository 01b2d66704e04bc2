"""SQL over an nsys export that the ``nsys stats`` reports and ``nsys analyze`` rules need.

The reports and rules (``engine.analysis.nsys``) name no export table and write no SQL: they ask
here, or read columns through the trace. Each function takes an opened
:class:`~engine.reports.nsys.sqlite_trace.NsysSqliteTrace`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.reports.nsys.schema import DURATION, KERNEL, OSRT

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

#: Bits per grid or block dimension in :func:`packed_dims_expr` (3 of them fit one int64).
DIM_BITS = 21


def packed_dims_expr(prefix: str) -> str:
    """SQL packing a kernel's three grid or block dimensions into one integer (21 bits each).

    NULL where one is NULL or out of range (the general path prints those).
    """
    x, y, z = (f'"{prefix}{a}"' for a in "XYZ")
    top = (1 << DIM_BITS) - 1
    return (f"CASE WHEN {x} BETWEEN 0 AND {top} AND {y} BETWEEN 0 AND {top} AND {z} BETWEEN 0 AND {top} "
            f"THEN ({x} << {2 * DIM_BITS}) | ({y} << {DIM_BITS}) | {z} END")


def dims_text(packed: int) -> str:
    """'%4d %4d %4d' of three dimensions packed by :func:`packed_dims_expr`, as nsys prints them."""
    mask = (1 << DIM_BITS) - 1
    return f"{packed >> (2 * DIM_BITS):4d} {(packed >> DIM_BITS) & mask:4d} {packed & mask:4d}"


#: An export's tables of host calls that nsys summarises by name: family -> (table, the calls'
#: ``eventClass``; other classes in the table are not calls).
CALL_TABLES: dict[str, tuple[str, int]] = {
    "osrt": (OSRT, 27),  # TRACE_PROCESS_EVENT_OS_RUNTIME
    "vulkan": ("VULKAN_API", 53),  # TRACE_PROCESS_EVENT_VULKAN_API
}


def call_columns(trace: NsysSqliteTrace, family: str) -> dict[str, npt.NDArray[np.int64]] | None:
    """``duration`` and ``nameId`` of the calls of a :data:`CALL_TABLES` family, in table order.

    None when the export has no such table (the calls were not traced); NULL values read as
    :data:`~engine.reports.nsys.schema.NULL`. Read through the columnar cache (kept for the next run).
    """
    table, event_class = CALL_TABLES[family]
    if not trace.has_sqlite_table(table):
        return None
    have = set(trace.column_names(table))
    where = f"eventClass = {event_class}" if "eventClass" in have else "1"
    name = '"nameId"' if "nameId" in have else "NULL"
    return trace.column_store().read_where(table, {"duration": DURATION, "nameId": name}, where)


__all__ = ["CALL_TABLES", "DIM_BITS", "KERNEL", "call_columns", "dims_text", "packed_dims_expr"]
