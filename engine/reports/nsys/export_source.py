"""What the export's readers need from an opened export: the :class:`ExportSource` protocol.

The modules that read parts of an nsys SQLite export for :class:`~engine.reports.nsys.sqlite_trace.
NsysSqliteTrace` (column reads, the engine's tables, NVTX ranges, summary columns) take the opened
export through this protocol rather than the trace class, so the trace imports them and they never
import the trace: the package's import graph has no circle, not even for type checking.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import ReportInfo
    from engine.reports.nsys.columns import ColumnStore
    from engine.reports.trace_columns import Where


class ExportSource(Protocol):
    """An opened nsys SQLite export, as its table readers see it."""

    info: ReportInfo

    def column_names(self, table: str) -> list[str]:
        """The columns of one of the export's tables."""

    def has_sqlite_table(self, table: str) -> bool:
        """Whether the export has table ``table``."""

    def query(self, sql: str, params: tuple[object, ...] = ()) -> pd.DataFrame:
        """One SQL query as a DataFrame."""

    def rows(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        """One SQL query as rows."""

    def strings(self) -> dict[int, str]:
        """The export's string table."""

    def enum_labels(self, table: str, fallback: dict[int, str]) -> dict[int, str]:
        """An enum table's labels, or ``fallback`` where the export lacks it."""

    def copy_kind_labels(self) -> dict[int, str]:
        """Memcpy kinds' labels."""

    def memory_kind_labels(self) -> dict[int, str]:
        """Memory kinds' labels."""

    def column_store(self) -> ColumnStore:
        """The export's columnar cache."""

    def columns(self, table: str, names: Sequence[str], *,
                where: str | Where | None = None) -> dict[str, npt.NDArray[Any]]:
        """Integer columns of an engine table."""
