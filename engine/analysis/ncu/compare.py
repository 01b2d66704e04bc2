"""Before/after: two Nsight Compute reports side by side, kernel by kernel.

Kernels are matched by demangled name and launch order: the n-th launch of a kernel in BEFORE is
paired with the n-th launch of the same kernel in AFTER; launches only one side has are listed as
"only before" / "only after".
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.ncu import NcuReport

#: kernel_table() columns compared numerically (before, after, delta = after - before).
COMPARED = [
    "duration_ns", "sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct",
    "achieved_occupancy_pct", "theoretical_occupancy_pct", "registers",
]


def _report(r: NcuReport | str | Path) -> NcuReport:
    if isinstance(r, (str, Path)):
        from engine.reports.ncu import read_ncu

        return read_ncu(r)
    return r


def compare_reports(before: NcuReport | str | Path, after: NcuReport | str | Path) -> pd.DataFrame:
    """Kernel-by-kernel deltas between two reports.

    Args:
        before: The baseline report (an :class:`~engine.reports.ncu.NcuReport` or a path).
        after: The changed report.

    Returns:
        One row per kernel launch: ``name``, ``occurrence`` (0 for a kernel's first launch),
        ``status`` ("matched", "only before", "only after"), ``id_before``, ``id_after``, for each of
        :data:`COMPARED` ``<col>_before``, ``<col>_after`` and ``<col>_delta``, plus
        ``duration_delta_pct``, ``speedup`` (before / after duration), ``verdict_before`` and
        ``verdict_after``. Matched rows come in AFTER's launch order, then the unmatched ones.
    """
    import pandas as pd

    from engine.analysis.ncu.sections import kernel_table

    tb, ta = kernel_table(_report(before)), kernel_table(_report(after))
    for t in (tb, ta):
        t["occurrence"] = t.groupby("name").cumcount()
    merged = ta.merge(tb, on=["name", "occurrence"], how="outer", suffixes=("_after", "_before"),
                      indicator=True, sort=False)
    status = {"both": "matched", "left_only": "only after", "right_only": "only before"}
    out: dict[str, Any] = {
        "name": merged["name"], "occurrence": merged["occurrence"],
        "status": merged["_merge"].astype(str).map(status),
        "id_before": merged["id_before"].astype("Int64"), "id_after": merged["id_after"].astype("Int64"),
    }
    for col in COMPARED:
        b = pd.to_numeric(merged[f"{col}_before"], errors="coerce")
        a = pd.to_numeric(merged[f"{col}_after"], errors="coerce")
        out[f"{col}_before"], out[f"{col}_after"], out[f"{col}_delta"] = b, a, a - b
    b, a = out["duration_ns_before"], out["duration_ns_after"]
    out["duration_delta_pct"] = (a - b) / b * 100.0
    out["speedup"] = b / a
    out["verdict_before"] = merged["verdict_before"].fillna("")
    out["verdict_after"] = merged["verdict_after"].fillna("")
    df = pd.DataFrame(out)
    order = {"matched": 0, "only after": 1, "only before": 2}
    df["_s"] = df["status"].map(order)
    df["_a"] = df["id_after"].astype("float64").fillna(math.inf)
    df["_b"] = df["id_before"].astype("float64").fillna(math.inf)
    return df.sort_values(["_s", "_a", "_b"]).drop(columns=["_s", "_a", "_b"]).reset_index(drop=True)
