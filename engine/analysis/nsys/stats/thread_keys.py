"""One key per row that is equal for the rows of one thread, across tables (NVTX ranges and API calls).

An nsys export names a thread by its ``globalTid``; a Kineto trace has none, only ``pid`` and
``tid``. :func:`thread_keys` gives each row its ``globalTid`` where it has one, else a code of its
(pid, tid) shared by every table passed together (negative: a globalTid never is), else a key of
its own (a row of no known thread is on a thread alone).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.reports.trace_columns import NULL

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt



def thread_keys(*tables: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]],
                ) -> list[npt.NDArray[np.int64]]:
    """The thread key of each row of each table, given as (globalTid, pid, tid) columns."""
    import numpy as np

    keys = [np.asarray(g, dtype=np.int64) for g, _p, _t in tables]
    if not any((k == NULL).any() for k in keys):
        return keys
    keys = [k.copy() for k in keys]
    known = [(k == NULL) & (np.asarray(p) != NULL) & (np.asarray(t) != NULL)
             for k, (_g, p, t) in zip(keys, tables, strict=True)]
    pairs = np.concatenate([np.stack([np.asarray(p)[m], np.asarray(t)[m]]).astype(np.int64)
                            for m, (_g, p, t) in zip(known, tables, strict=True)], axis=1)
    if pairs.shape[1]:
        _u, code = np.unique(pairs, axis=1, return_inverse=True)
        code = -2 - np.asarray(code, dtype=np.int64).reshape(-1)
        at = 0
        for k, m in zip(keys, known, strict=True):
            n = int(m.sum())
            k[m] = code[at:at + n]
            at += n
    next_alone = NULL - 1
    for k in keys:
        alone = k == NULL
        n = int(alone.sum())
        k[alone] = next_alone - np.arange(n, dtype=np.int64)
        next_alone -= n
    return keys
