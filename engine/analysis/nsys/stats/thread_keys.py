"""One key per row that is equal for the rows of one thread, across tables (NVTX ranges and API calls).

An nsys export names a thread by its ``globalTid``; a Kineto trace has none, only ``pid`` and
``tid``. :func:`thread_keys` gives each row its ``globalTid`` where it has one, else a code of its
(pid, tid) shared by every table passed together (negative: a globalTid never is), else a key of
its own (a row of no known thread is on a thread alone). :func:`pid_tid` gives the rows' process
and thread ids, decoded from the globalTid where every row has one (nothing more is read).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.reports.trace_columns import NULL, Where, decode_global_tid

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.reports.base import Trace



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


def pid_tid(trace: Trace, table: str, gtid: npt.NDArray[np.int64], where: str | Where | None,
            ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The ``pid`` and ``tid`` columns of the rows whose ``globalTid`` column is ``gtid``.

    Decoded from ``gtid`` as an nsys export's columns are; read (``trace.columns(table, ...,
    where=where)``) only where a row has no globalTid (a Kineto trace).
    """
    import numpy as np

    if not (gtid == NULL).any():
        pid, tid = decode_global_tid(np.asarray(gtid, dtype=np.int64))
        return pid, tid
    got = trace.columns(table, ["pid", "tid"], where=where)
    return np.asarray(got["pid"], dtype=np.int64), np.asarray(got["tid"], dtype=np.int64)
