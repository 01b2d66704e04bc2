"""A ``.ncu-rep`` read into plain rows; its pandas tables are built only when someone asks for them.

The ``.ncu-rep`` reader (:mod:`engine.reports.ncu.decoders`) decodes a report into :class:`NcuRows`:
lists and dicts, no pandas. :class:`LazyNcuReport` answers :meth:`~NcuReport.value`,
:meth:`~NcuReport.unit`, :meth:`~NcuReport.metric_names_matching` and the plain-row views
(:meth:`~NcuReport.kernel_records`, :meth:`~NcuReport.detail_rows`, :meth:`~NcuReport.raw_table`,
...) from those rows, so printing a page needs neither pandas (~0.3 s to import) nor a DataFrame;
reading ``kernels``, ``metrics``, ``raw``, ``values``, ``rules``, ``sources``, ``pc_samples`` or
``source_lines`` builds that table (the same table a direct build gives) and keeps it. A table
assigned by a caller (e.g. ``kernels`` filtered by ``--kernel``) replaces the rows' view of it.
The on-disk cache pickles the rows only, so loading it imports no pandas either.

A summary read (in-process, :class:`Partial`) decodes only the metrics the summary needs; the raw
page, ``values`` and any other metric are decoded on first use (:meth:`LazyNcuReport._materialize`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from engine.reports.ncu.model import (
    DETAILS_COLUMNS,
    ID_COLUMNS,
    KERNEL_COLUMNS,
    LINE_COLUMNS,
    RULE_TABLE_COLUMNS,
    SOURCE_COLUMNS,
    NcuReport,
)
from engine.system.errors import ReportError


@dataclass
class Partial:
    """What a summary read of a ``.ncu-rep`` decoded: a few metrics per kernel, every metric's name."""

    names: list[frozenset[str]]  # per kernel ID: every metric it has (no breakdown:/group: names)
    nums: list[dict[str, float]]  # per kernel ID: the summary metrics as floats (NaN: no value)
    units: dict[str, str]  # the summary metrics' raw-page units
    idents: list[list[str]]  # per kernel ID: the ID_COLUMNS cells
    use_cache: bool
    identity: tuple[int, int] = (0, 0)  # the file's (size, mtime_ns) when it was read
    all_names: list[str] = field(default_factory=list)  # sorted union of names, filled on first use
    matching: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # metric_names_matching


@dataclass
class NcuRows:
    """The decoded rows of a ``.ncu-rep`` as plain Python values (what the cache holds)."""

    kernels: list[dict[str, Any]]  # KERNEL_COLUMNS
    details: list[list[Any]]  # DETAILS_COLUMNS, value, metric name
    rule_table: list[list[Any]]  # RULE_TABLE_COLUMNS
    source_table: list[list[Any]]  # SOURCE_COLUMNS (sass, file, line filled in when resolved)
    all_samples: list[tuple[int, int, int]]  # (ID, pc, samples) of every sampled instruction
    idents: list[list[str]]  # per kernel ID: the ID_COLUMNS cells
    lines: dict[int, list[list[Any]]] = field(default_factory=dict)  # kernel ID -> LINE_COLUMNS rows
    # every metric, per kernel ID: {name: (text as the raw page prints it, value)}; None until decoded
    full_rows: list[dict[str, tuple[str, float]]] | None = None
    full_units: dict[str, str] = field(default_factory=dict)  # every metric's raw-page unit
    all_names: list[str] | None = None  # sorted union of full_rows' names, filled on first use


#: The tables built from the rows on first use (dropped when the report is pickled).
_TABLES = ("kernels", "metrics", "raw", "values", "rules", "sources", "pc_samples", "source_lines",
           "raw_units", "units")


def _table(name: str) -> property:
    def get(self: LazyNcuReport) -> Any:
        return self._get(name)

    def put(self: LazyNcuReport, value: Any) -> None:
        self._put(name, value)

    return property(get, put, doc=f"The ``{name}`` table (built from the decoded rows on first use).")


class LazyNcuReport(NcuReport):
    """A ``.ncu-rep`` held as plain rows (:class:`NcuRows`), its tables built on first use.

    Decoding every one of a kernel's ~2,300 metrics (and asking each its unit) costs more than the
    rest of the summary together, and only the details/raw pages, rules and gates need them: a
    summary read (:class:`Partial`) answers :meth:`value`, :meth:`unit` and
    :meth:`metric_names_matching` from the metrics the summary reads
    (:func:`engine.reports.ncu.metrics.summary_metrics`); reading ``raw``, ``raw_units``,
    ``values`` or ``units``, or asking :meth:`value` for another metric a kernel has, decodes the
    rest (from the report still open in ``ncu_report``, or by opening the file again) and rewrites
    the cache entry with every metric. The results are the same as a full read.
    """

    kernels = _table("kernels")  # type: ignore[assignment]
    metrics = _table("metrics")  # type: ignore[assignment]
    raw = _table("raw")  # type: ignore[assignment]
    values = _table("values")  # type: ignore[assignment]
    rules = _table("rules")  # type: ignore[assignment]
    sources = _table("sources")  # type: ignore[assignment]
    pc_samples = _table("pc_samples")  # type: ignore[assignment]
    source_lines = _table("source_lines")  # type: ignore[assignment]
    raw_units = _table("raw_units")  # type: ignore[assignment]
    units = _table("units")  # type: ignore[assignment]

    def __init__(self, rows: NcuRows, *, partial: Partial | None = None, **fields: Any) -> None:
        """``partial``: what a summary read decoded (None: ``rows`` hold every metric)."""
        self.__dict__.update(_rows=rows, _set={}, _built={}, _partial=partial)
        super().__init__(kernels=None, metrics=None, raw=None, **fields)  # type: ignore[arg-type]

    # -- tables ------------------------------------------------------------------------------
    def _get(self, name: str) -> Any:
        d = self.__dict__
        if name in d["_set"]:
            return d["_set"][name]
        if name in ("raw", "values", "raw_units", "units") and d["_partial"] is not None:
            self._materialize()
        built = d["_built"]
        if name not in built:
            built[name] = self._build(name)
        return built[name]

    def _put(self, name: str, value: Any) -> None:
        # The dataclass constructor assigns None/{} placeholders: the rows stand for those tables.
        if value is None or (isinstance(value, dict) and not value):
            return
        self.__dict__["_set"][name] = value

    def _build(self, name: str) -> Any:
        rows: NcuRows = self.__dict__["_rows"]
        if name in ("raw_units", "units"):
            return rows.full_units if name == "raw_units" else dict(rows.full_units)
        import pandas as pd

        from engine.reports.ncu.actions import metric_frames

        if name == "kernels":
            return pd.DataFrame(rows.kernels, columns=KERNEL_COLUMNS)
        if name == "metrics":
            return pd.DataFrame(rows.details, columns=[*DETAILS_COLUMNS, "value", "metric"])
        if name == "rules":
            return pd.DataFrame(rows.rule_table, columns=RULE_TABLE_COLUMNS)
        if name == "sources":
            src = pd.DataFrame(rows.source_table, columns=SOURCE_COLUMNS)
            if any(r[6] is not None for r in rows.source_table):  # resolved: as fill_sources leaves it
                for i, col in ((6, "sass"), (7, "file"), (8, "line")):
                    src[col] = pd.Series([r[i] for r in rows.source_table], dtype=object)
            return src
        if name == "pc_samples":
            return pd.DataFrame(rows.all_samples, columns=["ID", "pc", "samples"])
        if name == "source_lines":
            return {k: pd.DataFrame(v, columns=LINE_COLUMNS) for k, v in rows.lines.items()}
        if rows.full_rows is None:
            return pd.DataFrame() if name == "raw" else None
        raw, values = metric_frames(rows.full_rows, rows.idents, rows.full_units)
        self.__dict__["_built"]["raw" if name == "values" else "values"] = raw if name == "values" else values
        return raw if name == "raw" else values

    def __getstate__(self) -> dict[str, Any]:
        """The rows and what callers set; tables built from the rows are left out (built again)."""
        state = dict(self.__dict__)
        state["_built"] = {}
        return state

    # -- values ------------------------------------------------------------------------------
    def _full_rows(self) -> list[dict[str, tuple[str, float]]] | None:
        """Every metric per kernel, or None where a caller replaced ``values`` (then it answers)."""
        if "values" in self.__dict__["_set"]:
            return None
        rows: NcuRows = self.__dict__["_rows"]
        return rows.full_rows

    def value(self, kernel_id: int, metric: str) -> float | None:
        """One metric of one kernel as a float in base units, or None when it was not collected."""
        part: Partial | None = self.__dict__["_partial"]
        if part is not None:
            if not 0 <= kernel_id < len(part.nums):
                return None
            x = part.nums[kernel_id].get(metric)
            if x is None:
                if metric not in part.names[kernel_id]:
                    return None
                self._materialize()
                return self.value(kernel_id, metric)
            return None if math.isnan(x) else x
        full = self._full_rows()
        if full is None:
            return super().value(kernel_id, metric)
        if not 0 <= kernel_id < len(full):
            return None
        cell = full[kernel_id].get(metric)
        if cell is None or math.isnan(cell[1]):
            return None
        return cell[1]

    def unit(self, metric: str) -> str:
        """A metric's base unit ("" when unknown)."""
        part: Partial | None = self.__dict__["_partial"]
        if part is not None:
            u = part.units.get(metric)
            if u is not None:
                return u
            if not any(metric in names for names in part.names):
                return ""
        return str(self.units.get(metric, ""))

    def metric_names_matching(self, prefix: str, suffix: str = "") -> list[str]:
        """The report's metric names with that prefix and suffix, sorted."""
        part: Partial | None = self.__dict__["_partial"]
        if part is not None:
            found = part.matching.get((prefix, suffix))
            if found is None:
                if not part.all_names:
                    part.all_names = sorted(frozenset().union(*part.names))
                found = [n for n in part.all_names if n.startswith(prefix) and n.endswith(suffix)]
                part.matching[(prefix, suffix)] = found
            return list(found)
        full = self._full_rows()
        if full is None:
            return super().metric_names_matching(prefix, suffix)
        rows: NcuRows = self.__dict__["_rows"]
        if rows.all_names is None:
            rows.all_names = sorted({n for row in full for n in row})
        return [n for n in rows.all_names if n.startswith(prefix) and n.endswith(suffix)]

    def _materialize(self) -> None:
        """Decode every metric of every kernel (the raw page, ``values`` and ``units``), once."""
        from engine.reports.ncu.cache import cache_store
        from engine.reports.ncu.nvidia_reader import OPEN_LOCK

        with OPEN_LOCK:  # a GUI worker and the GUI thread may both ask
            part: Partial | None = self.__dict__["_partial"]
            if part is None:
                return
            full_rows, units = self._decode_all_metrics(part)
            rows: NcuRows = self.__dict__["_rows"]
            rows.full_rows, rows.full_units, rows.all_names = full_rows, units, None
            self.__dict__["_partial"] = None
            self.__dict__["_built"].clear()
            if part.use_cache:
                cache_store(self.path, self)

    def _decode_all_metrics(self, part: Partial) -> tuple[list[dict[str, tuple[str, float]]], dict[str, str]]:
        """Every metric of every kernel, from the report still open in ``ncu_report`` or opened again."""
        from engine.reports.ncu.actions import metric_row
        from engine.reports.ncu.nvidia_reader import OPEN_LOCK, open_action, open_report

        with OPEN_LOCK:
            try:
                st = self.path.stat()
                if part.identity != (0, 0) and (st.st_size, st.st_mtime_ns) != part.identity:
                    raise ReportError(
                        f"{self.path} changed since it was opened, so its remaining metrics cannot be "
                        "read from it; open it again."
                    )
                ctx = open_report(self.path)
                actions = [open_action(ctx, ref) for ref in self.action_refs]
            except ReportError:
                raise
            except Exception as exc:  # noqa: BLE001 - the native reader's errors are not for people
                raise ReportError(
                    f"{self.path} could not be read again for its remaining metrics ({exc}); "
                    "check that the file is still there and open it again."
                ) from exc
            units: dict[str, str] = {}
            return [metric_row(a, units) for a in actions], units

    # -- plain views -------------------------------------------------------------------------
    def _rows_for(self, name: str) -> NcuRows | None:
        """The rows, unless a caller replaced table ``name`` (then the table answers)."""
        return None if name in self.__dict__["_set"] else self.__dict__["_rows"]

    def kernel_records(self) -> list[dict[str, Any]]:
        """One dict per kernel (the ``kernels`` columns), numbers typed as the ``kernels`` table has them.

        As in the table, a numeric column where some kernel has no value or a fractional one is
        all floats (NaN where missing): e.g. a report where one kernel lacks its register count.
        """
        rows = self._rows_for("kernels")
        if rows is None:
            return super().kernel_records()
        out = [dict(k) for k in rows.kernels]
        for col in KERNEL_COLUMNS:
            cells = [k.get(col) for k in out]
            numbers = [c for c in cells if c is not None]
            if (numbers and len(numbers) < len(cells) or any(isinstance(c, float) for c in numbers)) and all(
                    isinstance(c, (int, float)) and not isinstance(c, bool) for c in numbers):
                for k in out:
                    k[col] = math.nan if k.get(col) is None else float(k[col])
        return out

    def rule_records(self) -> list[dict[str, Any]]:
        """One dict per rule result (:data:`RULE_TABLE_COLUMNS`), in report order."""
        rows = self._rows_for("rules")
        if rows is None:
            return super().rule_records()
        return [dict(zip(RULE_TABLE_COLUMNS, r, strict=True)) for r in rows.rule_table]

    def source_records(self, kernel_id: int) -> list[dict[str, Any]]:
        """One kernel's hottest instructions (:data:`SOURCE_COLUMNS`), hottest first."""
        rows = self._rows_for("sources")
        if rows is None:
            return super().source_records(kernel_id)
        return [dict(zip(SOURCE_COLUMNS, r, strict=True)) for r in rows.source_table if r[0] == kernel_id]

    def line_records(self, kernel_id: int) -> list[dict[str, Any]] | None:
        """One kernel's hottest source lines (:data:`LINE_COLUMNS`), or None when not resolved."""
        rows = self._rows_for("source_lines")
        if rows is None:
            return super().line_records(kernel_id)
        lines = rows.lines.get(kernel_id)
        return None if lines is None else [dict(zip(LINE_COLUMNS, r, strict=True)) for r in lines]

    def detail_rows(self) -> list[tuple[Any, ...]]:
        """The details page rows: :data:`DETAILS_COLUMNS` and the numeric value."""
        rows = self._rows_for("metrics")
        return super().detail_rows() if rows is None else [tuple(r[:-1]) for r in rows.details]

    def detail_values(self) -> dict[tuple[str, str], float]:
        """The details page's numbers: (kernel ID, metric name) -> value (the last row of a pair wins)."""
        rows = self._rows_for("metrics")
        if rows is None:
            return super().detail_values()
        return {(str(r[0]), r[-1]): float(r[-2]) for r in rows.details if r[-1] != ""}

    def raw_table(self) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The raw page: its columns and one tuple of cells per kernel."""
        if self.__dict__["_partial"] is not None:
            self._materialize()
        rows = self._rows_for("raw")
        if rows is None or rows.full_rows is None:
            return super().raw_table()
        names = sorted(rows.full_units)
        table = [(*ident, *[row[c][0] if c in row else "" for c in names])
                 for row, ident in zip(rows.full_rows, rows.idents, strict=True)]
        return [*ID_COLUMNS, *names], table

    def sources_to_resolve(self) -> list[int]:
        """Kernel IDs whose hottest instructions have no SASS text yet."""
        rows: NcuRows = self.__dict__["_rows"]
        if "sources" in self.__dict__["_set"]:
            src = self.__dict__["_set"]["sources"]
            return sorted({int(k) for k in src.loc[src["sass"].isna(), "ID"]} - set(rows.lines))
        return sorted({int(r[0]) for r in rows.source_table if r[6] is None} - set(rows.lines))

    def fill_sources(self, kernel_id: int, found: dict[int, tuple[str, str, int | None]],
                     lines: list[list[Any]]) -> None:
        """Set one kernel's SASS text, file and line per hottest PC, and its hottest source lines."""
        rows: NcuRows = self.__dict__["_rows"]
        rows.lines[kernel_id] = [list(r) for r in lines]
        for r in rows.source_table:
            if r[0] == kernel_id and r[6] is None:
                r[6], r[7], r[8] = found[int(r[1])]
        for name in ("sources", "source_lines"):
            self.__dict__["_built"].pop(name, None)
            self.__dict__["_set"].pop(name, None)


def sample_pairs(report: NcuReport, kernel_id: int) -> list[tuple[int, int]]:
    """(pc, samples) of every sampled instruction of one kernel."""
    if isinstance(report, LazyNcuReport) and "pc_samples" not in report.__dict__["_set"]:
        rows: NcuRows = report.__dict__["_rows"]
        return [(pc, n) for k, pc, n in rows.all_samples if k == kernel_id]
    ps = report.pc_samples
    if ps is None:
        return []
    mine = ps[ps["ID"] == kernel_id]
    return [(int(pc), int(n)) for pc, n in zip(mine["pc"], mine["samples"], strict=True)]
