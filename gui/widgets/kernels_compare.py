"""Before/after comparison of two Nsight Compute reports for the Kernels view.

The numbers are :func:`engine.analysis.ncu.compare.compare_reports`'s (kernels matched by name and
launch order); this module computes them off the GUI thread, shapes them into the table the view
shows and writes the headline.
"""

from __future__ import annotations

import math
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from gui import format as fmt
from gui.widgets.table_model import DataFrameModel

#: shown columns -> (compare_reports column, scale); raw values stay numbers for sorting
COLUMNS: dict[str, tuple[str, float]] = {
    "Before (µs)": ("duration_ns_before", 1e-3),
    "After (µs)": ("duration_ns_after", 1e-3),
    "Speedup ×": ("speedup", 1.0),
    "Δ SM %": ("sm_throughput_pct_delta", 1.0),
    "Δ Memory %": ("memory_throughput_pct_delta", 1.0),
    "Δ Achieved occupancy %": ("achieved_occupancy_pct_delta", 1.0),
}

HEADER_TIPS = {
    "Launch": "The n-th launch of this kernel in its report (kernels are matched by name and launch order)",
    "Status": "matched: in both reports; only before / only after: a launch just one report holds",
    "Speedup ×": "before duration / after duration: above 1 is faster (the cell's tooltip gives the "
                 "duration change in %)",
    "Δ SM %": "SM throughput (% of peak), after − before, in percentage points",
    "Δ Memory %": "Memory throughput (% of peak), after − before, in percentage points",
    "Δ Achieved occupancy %": "Achieved occupancy (% of the maximum warps), after − before, in "
                              "percentage points; blank where a report did not collect it",
}

#: two-line header labels, so that every column fits beside a readable kernel name
HEADER_LABELS = {
    "ID before": "ID\nbefore", "ID after": "ID\nafter",
    "Before (µs)": "Before\n(µs)", "After (µs)": "After\n(µs)",
    "Speedup ×": "Speedup\n×", "Δ SM %": "Δ SM\n%",
    "Δ Memory %": "Δ Memory\n%", "Δ Achieved occupancy %": "Δ Occupancy\n%",
    "Bottleneck before": "Bottleneck\nbefore", "Bottleneck after": "Bottleneck\nafter",
}

_FASTER = QColor("#1e8449")
_SLOWER = QColor("#c0392b")


def compute_comparison(before: Any, after: Any) -> dict[str, Any]:
    """The engine's comparison plus both reports' short kernel names (runs in a worker thread).

    Args:
        before: The baseline :class:`~engine.reports.ncu.NcuReport`.
        after: The changed report.

    Returns:
        ``{"table": compare_reports(before, after), "short_before": {id: short name},
        "short_after": {id: short name}}``.
    """
    from engine.analysis.ncu.compare import compare_reports
    from engine.analysis.ncu.sections import kernel_table

    table = compare_reports(before, after)
    shorts = []
    for report in (before, after):
        kt = kernel_table(report)
        shorts.append({int(i): str(n) for i, n in zip(kt["id"], kt["short_name"], strict=True)})
    return {"table": table, "short_before": shorts[0], "short_after": shorts[1]}


def short_names(result: dict[str, Any]) -> list[str]:
    """Each comparison row's short kernel name (AFTER's where it has the launch, else BEFORE's)."""
    t = result["table"]
    out = []
    for name, ia, ib in zip(t["name"], t["id_after"], t["id_before"], strict=True):
        if ia is not None and not _missing(ia) and int(ia) in result["short_after"]:
            out.append(result["short_after"][int(ia)])
        elif ib is not None and not _missing(ib) and int(ib) in result["short_before"]:
            out.append(result["short_before"][int(ib)])
        else:
            out.append(str(name))
    return out


def comparison_frame(result: dict[str, Any]) -> Any:
    """The comparison table as shown: one row per launch, raw numbers (µs, %, points) for sorting."""
    import pandas as pd

    t = result["table"]
    out: dict[str, Any] = {
        "Kernel": short_names(result),
        "Launch": t["occurrence"].astype("int64") + 1,
        "Status": t["status"].astype(str),
        "ID before": t["id_before"].astype("float64"),
        "ID after": t["id_after"].astype("float64"),
    }
    for label, (col, scale) in COLUMNS.items():
        out[label] = t[col].astype("float64") * scale
    out["Bottleneck before"] = t["verdict_before"].astype(str)
    out["Bottleneck after"] = t["verdict_after"].astype(str)
    return pd.DataFrame(out)


def totals(table: Any) -> dict[str, float | int]:
    """Launch counts and summed durations (ns) of a :func:`compare_reports` table."""
    matched = table["status"] == "matched"
    return {
        "matched": int(matched.sum()),
        "only_before": int((table["status"] == "only before").sum()),
        "only_after": int((table["status"] == "only after").sum()),
        "before_ns": float(table["duration_ns_before"].sum()),
        "after_ns": float(table["duration_ns_after"].sum()),
        "matched_before_ns": float(table.loc[matched, "duration_ns_before"].sum()),
        "matched_after_ns": float(table.loc[matched, "duration_ns_after"].sum()),
    }


def ratio_text(before_ns: float, after_ns: float) -> str:
    """'1.223× faster' / '1.006× slower' / 'unchanged' (before / after durations)."""
    if before_ns <= 0 or after_ns <= 0:
        return "no time to compare"
    if before_ns == after_ns:
        return "unchanged"
    z = before_ns / after_ns
    if z >= 1:
        return f"{_times(z)} faster"
    return f"{_times(1 / z)} slower"


def headline(table: Any, before_name: str, after_name: str) -> str:
    """The comparison's headline (rich text): matches, total kernel time before → after."""
    import html

    t = totals(table)
    n = t["matched"]
    lines = [f"<b>{n}</b> kernel{'s' if n != 1 else ''} matched; total kernel time "
             f"<b>{fmt.duration(t['before_ns'])} → {fmt.duration(t['after_ns'])}</b> "
             f"(<b>{ratio_text(float(t['before_ns']), float(t['after_ns']))}</b>)."]
    extra = []
    if t["only_before"]:
        extra.append(f"{t['only_before']} launch{'es' if t['only_before'] != 1 else ''} only before")
    if t["only_after"]:
        extra.append(f"{t['only_after']} launch{'es' if t['only_after'] != 1 else ''} only after")
    if extra:
        line = "; ".join(extra)
        if n:
            line += (f"; the matched kernels alone: {fmt.duration(t['matched_before_ns'])} → "
                     f"{fmt.duration(t['matched_after_ns'])} "
                     f"({ratio_text(float(t['matched_before_ns']), float(t['matched_after_ns']))})")
        else:
            line += " — no kernel name is in both reports; are they recordings of the same program?"
        lines.append(line if line.endswith("?") else line + ".")
    for side, name in (("before", before_name), ("after", after_name)):
        present = table[f"duration_ns_{side}"].notna()
        if present.any() and table.loc[present, f"achieved_occupancy_pct_{side}"].isna().all():
            lines.append(f"{html.escape(name)} has no occupancy metrics, so the occupancy deltas are "
                         "blank; profile with `ncu --section Occupancy` (or `--set full`) for them.")
    lines.append(f"<span style='color:#5f6b7a'>Before: {html.escape(before_name)} · after: "
                 f"{html.escape(after_name)}. Kernels are matched by name and launch order; "
                 f"Δ columns are after − before.</span>")
    return "<br>".join(lines)


class CompareModel(DataFrameModel):
    """The comparison table: speedups and signed deltas formatted for reading, faster in green,
    slower in red; the full kernel name and column meanings in tooltips."""

    def __init__(self) -> None:
        super().__init__()
        self.full_names: list[str] = []
        self.duration_delta_pct: list[float] = []

    def set_result(self, result: dict[str, Any]) -> None:
        self.full_names = [str(n) for n in result["table"]["name"]]
        self.duration_delta_pct = [float(v) for v in result["table"]["duration_delta_pct"]]
        self.set_frame(comparison_frame(result))

    def data(self, index: Any, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        name = self._columns[index.column()]
        v = self.raw(index.row(), index.column())
        if role == Qt.ItemDataRole.DisplayRole and name in COLUMNS:
            if _missing(v):
                return ""
            f = float(v)
            if name == "Speedup ×":
                return f"{f:.3f}×"
            if name.startswith("Δ"):
                return f"{f:+,.2f}"
            return f"{f:,.2f}"
        if role == Qt.ItemDataRole.DisplayRole and name.startswith("ID ") and not _missing(v):
            return str(int(v))
        if role == Qt.ItemDataRole.ForegroundRole:
            if name == "Speedup ×" and not _missing(v) and float(v) != 1.0:
                return _FASTER if float(v) > 1.0 else _SLOWER
            if name == "Status" and v != "matched":
                return QColor("#8a6d00")
        if role == Qt.ItemDataRole.ToolTipRole and name == "Kernel":
            return self.full_names[index.row()] if index.row() < len(self.full_names) else None
        if role == Qt.ItemDataRole.ToolTipRole and name == "Speedup ×" and not _missing(v):
            pct = self.duration_delta_pct[index.row()]
            return f"duration {pct:+.1f} % (after − before) / before"
        return super().data(index, role)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if (role == Qt.ItemDataRole.ToolTipRole and orientation == Qt.Orientation.Horizontal
                and section < len(self._columns)):
            return HEADER_TIPS.get(self._columns[section])
        if (role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal
                and section < len(self._columns)):
            return HEADER_LABELS.get(self._columns[section], self._columns[section])
        return super().headerData(section, orientation, role)


def _missing(v: Any) -> bool:
    if v is None or type(v).__name__ in ("NAType", "NaTType"):
        return True
    try:
        return math.isnan(float(v))
    except (TypeError, ValueError):
        return False


def _times(z: float) -> str:
    return f"{z:.3f}×" if z < 10 else f"{z:,.1f}×"
