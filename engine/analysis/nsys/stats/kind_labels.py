"""Labels of the integer kinds of a trace's tables (copy kinds, memory kinds), for any trace.

An nsys export has them in its enum tables (``trace.copy_kind_labels()`` and the like); a Kineto
trace has them beside the kinds in its tables (``operation`` beside ``copyKind``, say).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.reports.base import Trace


def kind_labels(trace: Trace, method: str, table: str, pairs: list[tuple[str, str]]) -> dict[int, str]:
    """Kind -> label: the export's enum (``trace.<method>()``), or the pairs of a trace's table (Kineto)."""
    known = getattr(trace, method, None)
    if known is not None:
        return dict(known())
    out: dict[int, str] = {}
    if not trace.has(table):
        return out
    for code, text in pairs:
        df = trace.table(table, [code, text]).dropna().drop_duplicates()
        for k, v in zip(df[code].tolist(), df[text].tolist(), strict=True):
            out.setdefault(int(k), str(v))
    return out
