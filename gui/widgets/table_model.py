"""A read-only Qt table model over a pandas DataFrame, and a proxy that sorts numbers as numbers.

Display text comes from :func:`gui.format.cell` (thousands separators, right-aligned numbers);
``Qt.UserRole`` gives the raw value, which the proxy sorts on and Copy puts on the clipboard.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt

from gui.format import cell, is_missing, is_number

#: identifier columns (nsys names): shown without thousands separators
ID_COLUMNS = {"PID", "TID", "DevId", "CorrId", "Ctx", "GreenCtx", "Strm", "Device", "ID", "Id"}

RAW_ROLE = Qt.ItemDataRole.UserRole

_Index = QModelIndex | QPersistentModelIndex


class DataFrameModel(QAbstractTableModel):
    """Rows and columns of a DataFrame; columns are copied to plain arrays once for fast access."""

    def __init__(self, df: Any = None, parent: Any = None) -> None:
        super().__init__(parent)
        self._columns: list[str] = []
        self._data: list[Any] = []
        self._numeric: list[bool] = []
        self._decimals: list[int] = []
        self._separators: list[bool] = []
        self._formats: list[Callable[[Any], str] | None] = []
        #: column name -> the header shown instead ("Time\n(sum)": two lines keep a column narrow)
        self.header_labels: dict[str, str] = {}
        self._rows = 0
        self.df = None
        if df is not None:
            self.set_frame(df)

    def set_frame(self, df: Any, formats: dict[str, Callable[[Any], str]] | None = None) -> None:
        """Show ``df``, its cells written by ``formats`` where given.

        ``formats`` maps a column to the function that writes its cells ("4 B", "2.4 µs" from raw bytes
        and nanoseconds: each cell in its own unit); the raw value stays for sorting and copies.
        """
        self.beginResetModel()
        self.df = df
        if df is None:
            self._columns, self._data, self._numeric, self._decimals, self._rows = [], [], [], [], 0
            self._separators, self._formats = [], []
        else:
            self._columns = [str(c) for c in df.columns]
            self._data = [df[c].to_numpy(dtype=object) for c in df.columns]
            self._numeric = [df[c].dtype.kind in "iuf" for c in df.columns]
            # sizes in MB keep three decimals, as nsys prints them
            self._decimals = [3 if "(MB" in str(c) or "(GB" in str(c) else 1 for c in df.columns]
            self._separators = [str(c) not in ID_COLUMNS for c in df.columns]
            self._formats = [(formats or {}).get(str(c)) for c in df.columns]
            self._rows = len(df)
        self.endResetModel()

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else self._rows

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._columns)

    def raw(self, row: int, col: int) -> Any:
        return self._data[col][row]

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        r, c = index.row(), index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            write = self._formats[c] if c < len(self._formats) else None
            v = self._data[c][r]
            if write is not None and not is_missing(v):
                return write(v)
            return cell(v, self._decimals[c], self._separators[c])
        if role == RAW_ROLE:
            v = self._data[c][r]
            if is_missing(v):
                return None
            if is_number(v):
                f = float(v)
                return None if math.isnan(f) else f
            return str(v)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            if self._numeric[c] or is_number(self._data[c][r]):
                return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            return int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            v = self._data[c][r]
            text = cell(v)
            return text if len(text) > 40 else None
        return None

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole:
            if orientation == Qt.Orientation.Horizontal:
                if section >= len(self._columns):
                    return None
                return self.header_labels.get(self._columns[section], self._columns[section])
            return str(section + 1)
        if role == Qt.ItemDataRole.TextAlignmentRole and orientation == Qt.Orientation.Horizontal:
            if section < len(self._numeric) and self._numeric[section]:
                return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            return int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        return None

    def column_names(self) -> list[str]:
        return list(self._columns)


class NumericSortProxy(QSortFilterProxyModel):
    """Sorts on the raw value: numbers numerically, text case-insensitively, blanks last."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.setSortRole(RAW_ROLE)
        self.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.setFilterKeyColumn(-1)  # the filter box matches any column

    def lessThan(self, left: _Index, right: _Index) -> bool:
        a = left.data(RAW_ROLE)
        b = right.data(RAW_ROLE)
        if a is None or b is None:
            # Blanks sort after everything in ascending order.
            return a is not None and b is None
        if isinstance(a, float) and isinstance(b, float):
            return a < b
        return str(a).lower() < str(b).lower()
