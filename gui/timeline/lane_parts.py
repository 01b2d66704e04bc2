"""The events of one kind in one GPU lane, as the columnar timeline builds a lane from them (no Qt).

A GPU stream's lane is made of one :class:`Part` per event kind (kernels, copies, memsets): the
rows of that kind's table on that stream, with their start and end columns. On a stream of a table
shared by several streams those columns are the table's own gathered at the part's rows; where
the lane is drawn from its kinds' unions first (``gui.timeline.coarse``) with the unions kept by an
earlier open (``gui.timeline.gpu_layout``), the first paint needs none of them, so the gather waits
for the first read of :attr:`Part.starts` (the merge, after the first paint), and a union reads
the few events it looks up through :class:`Gathered` in the meantime.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


class Gathered:
    """``base[rows]`` read an index at a time, without gathering every row: ``g[i] == base[rows[i]]``."""

    def __init__(self, base: np.ndarray, rows: np.ndarray) -> None:
        self.base, self.rows = base, rows
        self.dtype = base.dtype

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, idx: Any) -> Any:
        return self.base[np.asarray(self.rows[idx])]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out: np.ndarray = self.base[np.asarray(self.rows)]
        return out if dtype is None else out.astype(dtype, copy=False)


class Part:
    """The events of one kind in one lane: rows of its table (None: all, in table order).

    ``codes`` (each event's name code) may be a function that works them out on first use: a lane
    drawn from its kinds' unions (gui.timeline.coarse) needs them only when merged. With
    ``gather_later``, ``starts`` and ``ends`` are the table's whole columns, gathered at ``rows``
    when :attr:`starts` or :attr:`ends` is first read (until then :meth:`views` reads them row by row).
    """

    def __init__(self, kind: int, rows: np.ndarray | None, starts: np.ndarray, ends: np.ndarray,
                 codes: np.ndarray | Callable[[], np.ndarray], in_order: bool | None = None,
                 gather_later: bool = False) -> None:
        self.kind, self.rows = kind, rows
        self._starts, self._ends, self._codes = starts, ends, codes
        self._gather = gather_later and rows is not None
        #: whether ``starts`` is in order (None: not checked yet; see ``columnar._in_order``)
        self.in_order = in_order

    def __len__(self) -> int:
        return len(self.rows) if self._gather and self.rows is not None else len(self._starts)

    @property
    def starts(self) -> np.ndarray:
        self._gathered()
        return self._starts

    @property
    def ends(self) -> np.ndarray:
        self._gathered()
        return self._ends

    @property
    def starts_if_read(self) -> np.ndarray | None:
        """``starts`` when it is an array already (not gathered yet: None)."""
        return None if self._gather else self._starts

    def views(self) -> tuple[Any, Any]:
        """(starts, ends) for a union to look a few events up in, without gathering them all."""
        if self._gather and self.rows is not None:
            return Gathered(self._starts, self.rows), Gathered(self._ends, self.rows)
        return self._starts, self._ends

    def _gathered(self) -> None:
        if self._gather and self.rows is not None:
            self._starts, self._ends = self._starts[self.rows], self._ends[self.rows]
            self._gather = False

    @property
    def codes(self) -> np.ndarray:
        if callable(self._codes):
            self._codes = self._codes()
        return self._codes
