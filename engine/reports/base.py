"""The common table model shared by every trace reader.

Every reader (nsys sqlite, Kineto JSON) produces the same tables with the same columns, so
analyses, the CLI and the GUI never care where the data came from. Column names follow the nsys
SQLite export (``start``, ``end``, ``deviceId``, ``streamId``, ...), which is what users know, plus a
few resolved columns (``name``, ``pid``, ``tid``, label columns). Times are integer nanoseconds.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.reports.trace_columns import NULL as NULL  # re-exported: the one missing-value stand-in
from engine.reports.trace_columns import (
    ColumnsRead,
    NvtxNames,
    ReadyColumns,
    TextIds,
    Where,
    check_names,
    from_tables,
    nvtx_names_from_tables,
)
from engine.reports.trace_columns import decode_global_tid as decode_global_tid  # re-exported
from engine.system.errors import ReportError

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np
    import numpy.typing as npt
    import pandas as pd

#: Table name -> (columns every reader provides, one-line description).
TABLES: dict[str, tuple[tuple[str, ...], str]] = {
    "kernels": (
        (
            "start", "end", "deviceId", "contextId", "greenContextId", "streamId", "correlationId",
            "globalPid", "pid", "name", "shortName", "mangledName", "gridX", "gridY", "gridZ",
            "blockX", "blockY", "blockZ", "registersPerThread", "staticSharedMemory",
            "dynamicSharedMemory", "localMemoryTotal", "graphNodeId",
        ),
        "CUDA kernel executions",
    ),
    "memcpy": (
        (
            "start", "end", "deviceId", "contextId", "greenContextId", "streamId", "correlationId",
            "globalPid", "pid", "bytes", "copyKind", "srcKind", "dstKind", "operation",
            "srcKindName", "dstKindName", "srcDeviceId", "dstDeviceId",
        ),
        "CUDA memory copies",
    ),
    "memset": (
        (
            "start", "end", "deviceId", "contextId", "greenContextId", "streamId", "correlationId",
            "globalPid", "pid", "bytes", "memKind", "memKindName", "value",
        ),
        "CUDA memsets",
    ),
    "api": (
        (
            "start", "end", "globalTid", "pid", "tid", "correlationId", "name", "baseName",
            "eventClass", "returnValue",
        ),
        "CUDA runtime and driver API calls",
    ),
    "sync": (
        (
            "start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid",
            "syncType", "syncTypeName",
        ),
        "CUDA synchronization events",
    ),
    "nvtx": (
        (
            "start", "end", "eventType", "text", "domainId", "domain", "globalTid", "pid", "tid",
            "category",
        ),
        "NVTX ranges and marks",
    ),
    "memory_usage": (
        (
            "start", "globalPid", "pid", "deviceId", "address", "bytes", "memKind", "memKindName",
            "memoryOperationType", "operationName", "name", "correlationId",
        ),
        "CUDA memory usage events (--cuda-memory-usage)",
    ),
    "gpus": (
        (
            "id", "name", "smCount", "memoryBandwidth", "clockRate", "totalMemory", "l2CacheSize",
            "computeMajor", "computeMinor", "uuid", "busLocation",
        ),
        "GPU information",
    ),
    "gpu_metrics": (
        ("timestamp", "typeId", "gpu", "metricId", "metricName", "value"),
        "GPU metrics samples (--gpu-metrics-devices)",
    ),
    "processes": (("globalPid", "pid", "name"), "processes"),
    "threads": (("globalTid", "pid", "tid", "name"), "threads"),
    "cpu_ops": (
        ("start", "end", "pid", "tid", "name", "correlationId"),
        "CPU operators (PyTorch profiler)",
    ),
}


def read_head(path: Path, n: int, *, folder_sentence: str, unreadable_hint: str = "") -> bytes:
    """The first ``n`` bytes of a report file, or a one-sentence ReportError saying what is wrong.

    Args:
        path: The file.
        n: How many bytes to read.
        folder_sentence: What to say when ``path`` is a directory (after the path).
        unreadable_hint: Appended to the sentence for other read errors (e.g. "; check the file").

    Raises:
        ReportError: missing, a directory, not a regular file (a FIFO would block), or unreadable.
    """
    if not path.exists():
        raise ReportError(f"{path} does not exist; check the path.")
    if path.is_dir():
        raise ReportError(f"{path} {folder_sentence}")
    if not path.is_file():
        # A FIFO or device would block or stream forever; reports are always regular files.
        raise ReportError(
            f"{path} is not a regular file (a pipe, socket or device); save the report to a file "
            "and open that."
        )
    try:
        with path.open("rb") as fh:
            return fh.read(n)
    except PermissionError as exc:
        raise ReportError(f"{path} cannot be read: permission denied; check its permissions.") from exc
    except OSError as exc:
        raise ReportError(f"{path} cannot be read ({exc.strerror}){unreadable_hint}.") from exc


@dataclass
class ReportInfo:
    """What is known about where a trace came from."""

    path: Path
    kind: str  # "nsys-sqlite", "nsys-rep", "kineto"
    product_version: str | None = None
    schema_version: str | None = None
    sqlite_path: Path | None = None
    notes: list[str] = field(default_factory=list)


class Trace:
    """A loaded trace: lazily built tables plus the reasons for any that are missing.

    ``not_applicable`` names tables this kind of trace can never hold (left out of
    :meth:`missing_report`, still empty and listed in ``missing``).

    Subclasses implement :meth:`_load` for a table name, returning a DataFrame, or ``None`` when the
    capture does not contain that data (with the reason recorded via :meth:`_mark_missing`).
    """

    def __init__(self, info: ReportInfo) -> None:
        self.info = info
        self._cache: dict[str, pd.DataFrame] = {}
        #: table name -> sentence saying why it is missing (not captured, too old, ...).
        self.missing: dict[str, str] = {}
        self.not_applicable: frozenset[str] = frozenset()
        # Views and the summary read tables from several threads; a table is read once.
        self._locks: dict[str, threading.RLock] = {}
        self._locks_guard = threading.Lock()
        self._text_ids: TextIds | None = None

    # -- API -----------------------------------------------------------------------------------
    def table(self, name: str, columns: list[str] | None = None) -> pd.DataFrame:
        """Return table ``name`` (see :data:`TABLES`); an empty frame with its columns if missing.

        Args:
            name: a key of :data:`TABLES`.
            columns: only these columns (read lazily: a big report's reports and views only pay
                for the columns they use). None means every column, in :data:`TABLES` order.

        """
        if name not in TABLES:
            raise KeyError(f"unknown table {name!r}; known: {', '.join(TABLES)}")
        all_cols = list(TABLES[name][0])
        want = all_cols if columns is None else list(columns)
        unknown = [c for c in want if c not in all_cols]
        if unknown:
            raise KeyError(f"table {name!r} has no column(s) {unknown}; it has {all_cols}")
        with self._table_lock(name):  # two threads asking for one table: one reads, one waits
            return self._table_locked(name, want, all_cols, columns)

    def columns(self, table: str, names: Sequence[str], *,
                where: str | Where | None = None) -> dict[str, npt.NDArray[Any]]:
        """Integer columns of table ``table`` as numpy arrays, row for row with :meth:`table`.

        Args:
            table: a key of :data:`TABLES`.
            names: its integer columns and the derived ones (``duration``, ``nameId``, ``pid``,
                ...): see :mod:`engine.reports.trace_columns`.
            where: only the rows a named filter (``"ranges"`` of ``nvtx``, ...) or a
                :class:`~engine.reports.trace_columns.Where` passes.

        Returns:
            name -> int64 array (int32 for ids and kinds that fit), :data:`NULL` for a missing
            value; empty arrays when the table was not captured.

        Raises:
            KeyError: an unknown table or filter, or a text column (ask for its id).
            ReportError: the report cannot be read.

        """
        return self.columns_async(table, names, where=where).result()

    def columns_async(self, table: str, names: Sequence[str], *,
                      where: str | Where | None = None) -> ColumnsRead:
        """:meth:`columns`, started: readers that can read in the background do (``result()`` waits).

        The default reads the pandas tables here and now.
        """
        check_names(table, names, TABLES)
        return ReadyColumns(from_tables(self, table, names, where, TABLES[table][0], self._ids()))

    def columns_cached(self, table: str, names: Sequence[str]) -> dict[str, npt.NDArray[Any]] | None:
        """:meth:`columns` when every one is at hand without a read (mapped from a cache), else None.

        The default has no such cache: None.
        """
        return None

    def has_columns(self, table: str, names: Sequence[str]) -> bool:
        """True when the trace holds table ``table`` with every one of these columns (derived: their sources).

        A column it lacks still reads (as NULL); callers that need real values ask first.
        """
        from engine.reports.trace_columns import DERIVED

        if not self.has(table):
            return False
        have = set(TABLES[table][0])
        derived = DERIVED.get(table, {})
        return all(set(derived[n].source if n in derived else (n,)) <= have for n in names)

    def prefetch_columns(self, table: str, names: Sequence[str]) -> None:
        """Start reading columns that :meth:`columns` will be asked for (a no-op where nothing is gained)."""

    def stored_rows(self, table: str, names: Sequence[str],
                    limit: int | None = None) -> list[tuple[object, ...]] | None:
        """A small table's rows as the reader stores them, without pandas; None: ask :meth:`table`.

        For readers that can answer without building a DataFrame (an nsys export's); the default
        has none.
        """
        return None

    def nvtx_range_columns(self, names: Sequence[str]) -> tuple[
            dict[str, npt.NDArray[Any]], npt.NDArray[np.int64], list[tuple[Any, Any]]] | None:
        """The closed NVTX ranges' columns, each one's name code and the codes' (domain, text) pairs.

        For readers that name ranges by code without reading every text (an nsys export's); the
        default has none: None (callers read the ``nvtx`` table).
        """
        return None

    def nvtx_names(self, where: str | Where | None, *, domain_by_text: bool = False) -> NvtxNames:
        """Each ``nvtx`` row's (domain, text), row for row with ``columns("nvtx", ..., where=where)``.

        Returns:
            (a code per row, the (domain, text) pair of each code; None for a missing one). An nsys
            export names a domain by its create event's text id first, or with ``domain_by_text``
            its inline text first; the default reads the table's ``domain`` and ``text``.

        """
        return nvtx_names_from_tables(self, where)

    def strings(self) -> dict[int, str]:
        """The texts of the id columns (``nameId``, ``textId``, ...) that :meth:`columns` gave, by id."""
        return self._ids().strings()

    def _ids(self) -> TextIds:
        with self._locks_guard:
            if self._text_ids is None:
                self._text_ids = TextIds()
            return self._text_ids

    def _table_lock(self, name: str) -> threading.RLock:
        with self._locks_guard:
            lock = self._locks.get(name)
            if lock is None:
                lock = self._locks[name] = threading.RLock()
            return lock

    def _table_locked(
        self, name: str, want: list[str], all_cols: list[str], columns: list[str] | None
    ) -> pd.DataFrame:
        cached = self._cache.get(name)
        need = [c for c in want if cached is None or c not in cached.columns]
        if need and name not in self.missing:
            df = self._load(name, need)
            import pandas as pd

            if df is None:
                self.missing.setdefault(name, f"{TABLES[name][1]} were not captured")
            else:
                new = df[need]
                if cached is None:
                    cached = new
                else:
                    cached = cached.copy(deep=False)
                    for c in need:  # keep the dtype (object names are not re-inferred as str)
                        cached[c] = pd.Series(new[c].to_numpy(), index=cached.index, dtype=new[c].dtype)
                if all(c in cached.columns for c in all_cols):
                    cached = cached[all_cols]  # complete: keep it in canonical order
                self._cache[name] = cached
        if name in self.missing:
            import pandas as pd

            return pd.DataFrame({c: pd.Series(dtype="object") for c in want})
        assert cached is not None
        if columns is None or list(cached.columns) == want:
            return cached
        return cached[want]

    def has(self, name: str) -> bool:
        """True when table ``name`` was captured (it may still have zero rows)."""
        self._probe(name)
        return name not in self.missing

    def row_count(self, name: str) -> int | None:
        """Rows of table ``name``; None when it was not captured.

        The default reads one column; readers that can count without reading override it.
        """
        if not self.has(name):
            return None
        cached = self._cache.get(name)
        if cached is not None:
            return len(cached)
        return len(self.table(name, columns=[TABLES[name][0][0]]))

    def missing_report(self) -> list[str]:
        """Sentences naming every table that this capture lacks."""
        for name in TABLES:
            self._probe(name)
        return [self.missing[n] for n in TABLES if n in self.missing and n not in self.not_applicable]

    def _probe(self, name: str) -> None:
        """Find out whether ``name`` was captured (recording it in ``missing`` if not).

        The default loads the table; readers that can tell cheaply (from a schema) override it.
        """
        self.table(name)

    def system_env(self, name: str) -> str | None:
        """A value the profiler recorded about the machine (nsys: ``NvDriverVersion``, ``Hostname``...).

        None where the trace records none (the default).
        """
        return None

    def close(self) -> None:
        """Release file handles (subclasses with connections override)."""

    # -- for subclasses ------------------------------------------------------------------------
    def _load(self, name: str, columns: list[str]) -> pd.DataFrame | None:  # pragma: no cover
        """Load at least ``columns`` of table ``name``; None when the capture lacks the table."""
        raise NotImplementedError

    def _mark_missing(self, name: str, why: str) -> None:
        self.missing[name] = why

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
