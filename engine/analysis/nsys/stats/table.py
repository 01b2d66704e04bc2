"""A computed report as plain columns (:class:`SummaryTable`), and the empty DataFrame of a report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.catalog import _TEXT_COLS, COLUMNS

if TYPE_CHECKING:
    import pandas as pd


def empty_frame(report: str) -> pd.DataFrame:
    """An empty frame with the report's columns (what nsys prints for a report with no rows)."""
    import pandas as pd

    return pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS[report]})


class SummaryTable:
    """A computed report as plain columns (what the numpy reports return; no pandas needed).

    ``data`` holds one list per column of :data:`COLUMNS` ``[report]``; ``numeric`` says which
    columns are numbers (right-aligned in tables). :func:`to_csv` and :func:`format_table` accept
    it as they accept a DataFrame and print the same text; :meth:`to_frame` gives the DataFrame.
    """

    def __init__(self, report: str, data: list[list[Any]]) -> None:
        self.report = report
        self.columns: tuple[str, ...] = COLUMNS[report]
        self.data = data
        self.numeric = tuple(c not in _TEXT_COLS for c in self.columns)

    @property
    def empty(self) -> bool:
        """True when the report has no rows."""
        return not self.data or not self.data[0]

    def __len__(self) -> int:
        return len(self.data[0]) if self.data else 0

    def to_frame(self) -> pd.DataFrame:
        """The report as a DataFrame (numbers numeric, nsys column names)."""
        import pandas as pd

        if self.empty:
            return empty_frame(self.report)
        return pd.DataFrame({c: v for c, v in zip(self.columns, self.data, strict=True)})

