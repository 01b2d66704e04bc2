"""Printing reports as ``nsys stats`` does: its CSV (byte for byte) and an aligned text table."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.table import SummaryTable

if TYPE_CHECKING:
    import pandas as pd


# -- output ---------------------------------------------------------------------------------------
def _decimals(column: str) -> int | None:
    """Digits after the point nsys prints for a column; None for integer/text columns."""
    if column.endswith(("(MB)", "(MB/s)")):
        return 3
    if column == "Time (%)" or any(s in column for s in ("Avg (", "Med (", "StdDev (")):
        return 1
    if column in ("Avg GPU Ops", "Avg Range Lvl", "Avg Num Child"):  # nvtx_gpu_proj_sum
        return 1
    return None


def _round_half_up(x: float, decimals: int) -> str:
    """Format ``x`` with ``decimals`` digits, ties away from zero, on the double's exact value.

    This is what the nsys 2025.3 oracles show: 1804230.25 prints "1804230.3" (Python's '%.1f'
    would give "1804230.2", ties to even), while 5237820.55, stored as 5237820.5499999998, prints
    "5237820.5" (rounding the shortest repr "5237820.55" would give "5237820.6").
    """
    text = f"{x:.{decimals}f}"
    scaled = abs(x) * 10.0**decimals
    # Only an exact binary tie can differ from '%.Nf'; check candidates exactly with Decimal.
    if abs(scaled - math.floor(scaled) - 0.5) <= 1e-6 * max(1.0, scaled * 1e-9):
        exact = Decimal(x).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
        text = f"{exact:f}"
    return text


def _format_column(series: pd.Series, column: str) -> list[str]:
    """Render one column as nsys does: fixed decimals for statistics, plain ints, '' for null."""
    import numpy as np
    import pandas as pd
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    decimals = _decimals(column)
    if decimals is not None:
        values = pd.to_numeric(series, errors="coerce").astype("float64").to_numpy()
        fmt = f"{{:.{decimals}f}}".format
        out = ["" if v != v else fmt(v) for v in values.tolist()]
        # Only exact binary ties can print differently from '%.Nf': redo candidates exactly.
        scaled = np.abs(values) * 10.0**decimals
        near = np.abs(scaled - np.floor(scaled) - 0.5) <= 1e-6 * np.maximum(1.0, scaled * 1e-9)
        for i in np.flatnonzero(near).tolist():
            out[i] = _round_half_up(float(values[i]), decimals)
        return out
    if is_numeric_dtype(series.dtype) and not is_bool_dtype(series.dtype):
        missing = series.isna().to_numpy()
        ints = series.fillna(0).astype("int64").to_numpy().astype(str)
        return np.where(missing, "", ints).tolist()  # type: ignore[no-any-return]
    result = []
    for v in series.tolist():
        if v is None or (not isinstance(v, str) and pd.isna(v)):
            result.append("")
        elif isinstance(v, float) and v.is_integer():
            result.append(str(int(v)))
        else:
            result.append(str(v))
    return result


def _format_list(values: list[Any], column: str, numeric: bool) -> list[str]:
    """:func:`_format_column` for a :class:`SummaryTable` column (plain Python values)."""
    decimals = _decimals(column)
    if decimals is not None:
        fmt = f"{{:.{decimals}f}}".format
        out = []
        for v in values:
            if v is None or v != v:
                out.append("")
                continue
            x = float(v)
            scaled = abs(x) * 10.0**decimals
            near = abs(scaled - math.floor(scaled) - 0.5) <= 1e-6 * max(1.0, scaled * 1e-9)
            out.append(_round_half_up(x, decimals) if near else fmt(x))
        return out
    if numeric:
        return ["" if v is None else str(int(v)) for v in values]
    return ["" if v is None else str(v) for v in values]


def _formatted(df: pd.DataFrame | SummaryTable) -> list[list[str]]:
    if isinstance(df, SummaryTable):
        cols = [_format_list(v, c, num) for v, c, num in zip(df.data, df.columns, df.numeric, strict=True)]
    else:
        cols = [_format_column(df[c], str(c)) for c in df.columns]
    return [list(r) for r in zip(*cols, strict=True)] if cols else []


def to_csv(df: pd.DataFrame | SummaryTable) -> str:
    """Render a report as ``nsys stats --format csv`` does.

    Args:
        df: a report as :func:`engine.analysis.nsys.stats.run` computes it (DataFrame or SummaryTable).

    Returns:
        The CSV text: header and rows with nsys's number formatting, newline (LF) line endings, fields
        quoted only when needed (csv module defaults); an empty string when there are no rows
        (nsys writes an empty file then).

    """
    if df.empty:
        return ""
    text = getattr(df, "text", None)
    if isinstance(text, str):  # a RenderedReport: rendered already
        return text
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([str(c) for c in df.columns])
    writer.writerows(_formatted(df))
    return buf.getvalue()


def format_table(df: pd.DataFrame | SummaryTable, max_width: int | None = None) -> str:
    """Render a report as an aligned text table for terminals (like nsys's column output).

    Args:
        df: a report as :func:`engine.analysis.nsys.stats.run` computes it (DataFrame or SummaryTable).
        max_width: truncate text cells longer than this (with "..."); None keeps them whole.

    Returns:
        Header, a dashed rule and one line per row; numbers right-aligned, text left-aligned.
        A one-line note when the report is empty.

    """
    if df.empty:
        return "(no data for this report)\n"
    headers = [str(c) for c in df.columns]
    rows = _formatted(df)
    if isinstance(df, SummaryTable):
        numeric = list(df.numeric)
    else:
        from pandas.api.types import is_numeric_dtype

        numeric = [is_numeric_dtype(df[c].dtype) for c in df.columns]
    if max_width is not None and max_width > 3:
        rows = [
            [v if num or len(v) <= max_width else v[: max_width - 3] + "..."
             for v, num in zip(r, numeric, strict=True)]
            for r in rows
        ]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(cells, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)]) + "\n"
