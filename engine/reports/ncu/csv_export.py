"""Read ``ncu --import R --csv --page details|raw`` exports into the tables of :class:`NcuReport`.

Values are converted to base units (as ``--print-units base`` prints them); locale thousands
separators are understood.
"""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

from engine.reports.ncu.model import (
    DETAILS_COLUMNS,
    ID_COLUMNS,
    KERNEL_COLUMNS,
    RULE_TABLE_COLUMNS,
    SECTIONS,
    SOURCE_COLUMNS,
    NcuReport,
)
from engine.reports.ncu.units import base_cell, parse_speedup, to_base_unit
from engine.system.errors import ReportError

if TYPE_CHECKING:
    import pandas as pd

def _read_csv_rows(path: Path) -> list[list[str]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ReportError(f"{path} is not a text CSV export of ncu; export it with `ncu --csv`.") from exc
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    if not rows or rows[0][:1] != ["ID"] or rows[0][:len(ID_COLUMNS)] != ID_COLUMNS:
        raise ReportError(
            f"{path} is not an `ncu --csv --page details` or `--page raw` export; export it again."
        )
    return rows


def _kernels_from(ident_rows: dict[str, list[str]], values: dict[str, dict[str, float]]) -> pd.DataFrame:
    import pandas as pd

    out = []
    for key, ident in ident_rows.items():
        v = values.get(key, {})
        dims = []
        for col in (ident[8], ident[7]):
            nums = [int(x) for x in re.findall(r"\d+", col)] + [1, 1, 1]
            dims.append(nums[:3])
        out.append({
            "ID": int(ident[0]), "Kernel Name": ident[4], "Base Name": ident[4].split("(")[0].split(" ")[-1],
            "Mangled Name": "", "Process ID": ident[1], "Process Name": ident[2], "Context": ident[5],
            "Stream": ident[6], "Grid Size": ident[8], "Block Size": ident[7],
            "grid_x": dims[0][0], "grid_y": dims[0][1], "grid_z": dims[0][2],
            "block_x": dims[1][0], "block_y": dims[1][1], "block_z": dims[1][2],
            "Registers Per Thread": _int_or_none(v.get("launch__registers_per_thread")),
            "Static Shared Memory Per Block": _int_or_none(v.get("launch__shared_mem_per_block_static")),
            "Dynamic Shared Memory Per Block": _int_or_none(v.get("launch__shared_mem_per_block_dynamic")),
            "Device": ident[9], "Device Name": "", "CC": ident[10],
            "duration_ns": v.get("gpu__time_duration.sum", math.nan), "NVTX Range": "",
        })
    return pd.DataFrame(out, columns=KERNEL_COLUMNS)


def _int_or_none(v: float | None) -> int | None:
    return None if v is None or math.isnan(v) else int(v)


def read_ncu_csv(path: str | Path) -> NcuReport:
    """Read an ``ncu --import R --csv --page details`` or ``--page raw`` export.

    Values are converted to base units (as ``--print-units base`` would print them); locale
    thousands separators are understood.

    Raises:
        ReportError: The file is missing, a folder, or not such an export.
    """
    p = Path(path)
    if not p.exists():
        raise ReportError(f"{p} does not exist; check the path.")
    if p.is_dir():
        raise ReportError(f"{p} is a folder, not a report; give the path of a .ncu-rep or .csv file.")
    rows = _read_csv_rows(p)
    n_id = len(ID_COLUMNS)
    if rows[0][n_id:n_id + 4] == ["Section Name", "Metric Name", "Metric Unit", "Metric Value"]:
        return _details_export(p, rows)
    return _raw_export(p, rows)


def _section_labels() -> dict[tuple[str, str], str]:
    """(section name, label) -> metric of every header metric of the sections ncu prints."""
    return {(s[1], label): metric for s in SECTIONS for metric, label in s[3]}


def _details_export(p: Path, rows: list[list[str]]) -> NcuReport:
    """The tables of a ``--page details`` export (``rows``: its header, then one row a metric or rule)."""
    import pandas as pd

    header = rows[0]
    labels = _section_labels()
    idents: dict[str, list[str]] = {}
    values: dict[str, dict[str, float]] = {}
    n_id = len(ID_COLUMNS)
    details = []
    for r in rows[1:]:
        r = (r + [""] * len(DETAILS_COLUMNS))[:len(DETAILS_COLUMNS)]
        ident = r[:n_id]
        idents.setdefault(ident[0], ident)
        section, label, unit, text = r[n_id:n_id + 4]
        metric = labels.get((section, label), "")
        if r[n_id + 4]:  # a rule row
            details.append([*r, math.nan, ""])
            continue
        unit, text, value = base_cell(text, unit)
        if metric:
            values.setdefault(ident[0], {})[metric] = value
        details.append([*ident, section, label, unit, text, "", "", "", "", "", value, metric])
    metrics = pd.DataFrame(details, columns=[*DETAILS_COLUMNS, "value", "metric"])
    raw = pd.DataFrame(columns=ID_COLUMNS)
    units = {str(m): str(u) for m, u in zip(metrics["metric"], metrics["Metric Unit"], strict=True) if m}
    rules = [
        [int(r[0]), r[n_id + 4], r[n_id + 4], r[n_id], r[n_id + 5], "", r[n_id + 6], r[n_id + 7],
         parse_speedup(r[n_id + 8])]
        for r in metrics[DETAILS_COLUMNS].itertuples(index=False, name=None) if r[n_id + 4]
    ]
    return NcuReport(p, "csv-details", _kernels_from(idents, values), metrics, raw, {},
                     values=_values_frame(idents, values), units=units,
                     labels={m: lab for (_s, lab), m in labels.items()},
                     rules=pd.DataFrame(rules, columns=RULE_TABLE_COLUMNS),
                     sources=pd.DataFrame(columns=SOURCE_COLUMNS),
                     rule_columns=len(header) > n_id + 4)


def _raw_export(p: Path, rows: list[list[str]]) -> NcuReport:
    """The tables of a ``--page raw`` export (``rows``: its header, its units row, then one row a kernel)."""
    import pandas as pd

    if len(rows) < 2:
        raise ReportError(f"{p} has no units row; export it again with `ncu --csv --page raw`.")
    n_id = len(ID_COLUMNS)
    units_row = rows[1]
    names = rows[0][n_id:]
    raw_units: dict[str, str] = {}
    for name, unit in zip(names, units_row[n_id:], strict=False):
        raw_units[name] = to_base_unit(unit)[0]
    idents: dict[str, list[str]] = {}
    values: dict[str, dict[str, float]] = {}
    raw_rows = []
    for r in rows[2:]:
        ident = r[:n_id]
        idents[ident[0]] = ident
        row = dict(zip(ID_COLUMNS, ident, strict=False))
        vals: dict[str, float] = {}
        for name, cell, unit in zip(names, r[n_id:], units_row[n_id:], strict=False):
            _, text, value = base_cell(cell, unit)
            if cell in ("", "no data"):
                text = cell
            row[name] = text
            vals[name] = value
        values[ident[0]] = vals
        raw_rows.append(row)
    raw = pd.DataFrame(raw_rows).reindex(columns=ID_COLUMNS + names).fillna("")
    # The details rows that the raw page can answer (no rule results: the raw page has none).
    details = []
    for key, ident in idents.items():
        for _sid, sname, _order, header_metrics in sorted(SECTIONS, key=lambda s: (s[2], s[1])):
            for metric, label in header_metrics:
                if metric not in raw_units:
                    continue
                text = str(raw.loc[raw["ID"] == key, metric].iloc[0])
                details.append([*ident, sname, label, raw_units[metric], text, "", "", "", "", "",
                                values[key].get(metric, math.nan), metric])
    metrics = pd.DataFrame(details, columns=[*DETAILS_COLUMNS, "value", "metric"])
    return NcuReport(p, "csv-raw", _kernels_from(idents, values), metrics, raw, raw_units,
                     values=_values_frame(idents, values), units=dict(raw_units),
                     labels={m: lab for (_s, lab), m in _section_labels().items()},
                     rules=pd.DataFrame(columns=RULE_TABLE_COLUMNS),
                     sources=pd.DataFrame(columns=SOURCE_COLUMNS))


def _values_frame(idents: dict[str, list[str]], values: dict[str, dict[str, float]]) -> pd.DataFrame:
    import pandas as pd

    keys = list(idents)
    return pd.DataFrame([values.get(k, {}) for k in keys],
                        index=pd.Index([int(k) for k in keys], name="ID"), dtype="float64")
