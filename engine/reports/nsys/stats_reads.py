"""SQL over an nsys export that the ``nsys stats`` reports and ``nsys analyze`` rules need.

The reports and rules (``engine.analysis.nsys``) name no export table and write no SQL: they ask
here, or read columns through the trace. Each function takes an opened
:class:`~engine.reports.nsys.sqlite_trace.NsysSqliteTrace`.
"""

from __future__ import annotations

from engine.reports.nsys.schema import KERNEL

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


__all__ = ["DIM_BITS", "KERNEL", "dims_text", "packed_dims_expr"]
