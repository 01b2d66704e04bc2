"""A trace's integer columns, mapped from the columnar cache a chunk of rows at a time.

:class:`TraceColumnSource` is how the long trace reports (``cuda_gpu_trace``, ``cuda_api_trace``,
``cuda_kern_exec_trace``) and ``cuda_gpu_kern_gb_sum`` read millions of rows in bounded memory on
any trace (``trace.columns``); :func:`distinct`, :func:`factorize` and :func:`lookup` are the
sort-based set operations they label rows with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.reports.nsys.sorted_sets import distinct, factorize
from engine.reports.nsys.stats_reads import gpu_names

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np
    import numpy.typing as npt

    from engine.reports.base import Trace
    from engine.reports.trace_columns import ColumnsRead, Where


def lookup(uniq: npt.NDArray[np.int64], codes: npt.NDArray[np.int64],
            values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``codes[i]`` where ``values == uniq[i]``; -1 for values not in ``uniq``."""
    import numpy as np

    if not len(uniq):
        return np.full(len(values), -1, np.int64)
    pos = np.clip(np.searchsorted(uniq, values), 0, len(uniq) - 1)
    return np.where(uniq[pos] == values, codes[pos], -1)


class TraceColumnSource:
    """One table's integer columns (``trace.columns``, any trace), mapped afresh from its cache when asked.

    Each chunk of rows maps the cached columns again and lets them go, so the pages a chunk touched
    leave the process (its peak RSS stays that of one chunk). A trace without such a cache (a
    Kineto trace, an export whose cache cannot be written) keeps the columns it read, and so does a
    read of only the rows a filter ``where`` passes (``trace.columns``'s ``where``).
    """

    def __init__(self, trace: Trace, table: str, names: Sequence[str],
                 where: str | Where | None = None, started: ColumnsRead | None = None) -> None:
        """Read the columns (``started``: this read, begun by ``trace.columns_async``)."""
        self.trace, self.table, self.exprs = trace, table, tuple(names)
        got = started.result() if started is not None else trace.columns(table, list(names), where=where)
        self.rows = len(got[names[0]])
        cached = trace.columns_cached(table, list(names)) if where is None else None
        self.held: dict[str, npt.NDArray[np.int64]] = got if cached is None else {}
        del got, cached

    def column(self, name: str) -> npt.NDArray[np.int64]:
        """The whole column ``name``."""
        if name in self.held:
            return self.held[name]
        got = self.trace.columns_cached(self.table, [name])
        if got is None:  # the cache went away meanwhile: read it again and keep it
            got = self.trace.columns(self.table, [name])
            self.held[name] = got[name]
        return got[name]


__all__ = ["TraceColumnSource", "distinct", "factorize", "gpu_names", "lookup"]
