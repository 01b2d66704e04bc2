"""``cuda_kern_exec_trace`` of an nsys SQLite export without pandas, streamed a chunk at a time.

Each kernel is joined with its launch call (same process, same correlation id) by a binary
search over the calls' packed ``(process, correlationId)`` keys, sorted once; rows are ordered by
the call's start (stable: kernel table order, then call table order, as the DataFrame path's
merge and stable sort give them). Only the pairs and their order are held (24 bytes a row);
each chunk gathers its columns from the columnar cache and is formatted by :mod:`.csvfast`, so
10M kernels are written in bounded memory. The bytes are those of
:func:`engine.analysis.nsys.stats.more.cuda_kern_exec_trace` + ``to_csv``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.catalog import _API_SUFFIX, COLUMNS
from engine.analysis.nsys.stats.csvfast import _CHUNK, IntColumn, TextColumn, _quoted, _rows
from engine.analysis.nsys.stats.fast import SummaryTable
from engine.analysis.nsys.stats.traces import CsvTable, _Source, distinct, factorize
from engine.reports.nsys.columns import has_null

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

_KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
_RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
_DIMS = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ")
_DIM_BITS = 21  # a grid/block dimension packs into 21 bits (3 of them in one int64 key)


def _pairs(k_proc: npt.NDArray[np.int64], k_corr: npt.NDArray[np.int64], a_proc: npt.NDArray[np.int64],
           a_corr: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """(kernel row, call row) of every kernel and call with equal (process, correlationId).

    Kernels in table order, each kernel's calls in table order (an inner merge's order). None
    when the keys cannot be packed into one int64 (the general path joins them then).
    """
    import numpy as np

    from engine.reports.nsys.columns import NULL

    ok_k, ok_a = k_corr != NULL, a_corr != NULL
    if (k_corr[ok_k] < 0).any() or (k_corr[ok_k] >= 1 << 40).any() or \
            (a_corr[ok_a] < 0).any() or (a_corr[ok_a] >= 1 << 40).any():
        return None
    procs, code = factorize(np.concatenate([k_proc[ok_k], a_proc[ok_a]]))
    if len(procs) >= 1 << 22:
        return None
    n_k = int(ok_k.sum())
    key_k = (code[:n_k].astype(np.int64) << 40) | k_corr[ok_k]
    key_a = (code[n_k:].astype(np.int64) << 40) | a_corr[ok_a]
    del code
    calls = np.flatnonzero(ok_a)
    order = np.argsort(key_a, kind="stable")
    sk = key_a[order]
    del key_a
    lo = np.searchsorted(sk, key_k, side="left")
    cnt = np.searchsorted(sk, key_k, side="right") - lo
    del sk, key_k
    total = int(cnt.sum())
    k_rows = np.repeat(np.flatnonzero(ok_k), cnt)
    first = np.cumsum(cnt) - cnt
    a_rows = calls[order[np.repeat(lo, cnt) + (np.arange(total, dtype=np.int64) - np.repeat(first, cnt))]]
    return k_rows, a_rows


def _source_into(out: list[_Source | BaseException], trace: NsysSqliteTrace, table: str,
                 exprs: dict[str, str], where: str) -> None:
    """Read a :class:`_Source` (in a thread): append it, or the exception that stopped it."""
    try:
        out.append(_Source(trace, table, exprs, where=where))
    except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
        out.append(exc)


def kern_exec_trace_csv(trace: NsysSqliteTrace) -> CsvTable | None:
    """``cuda_kern_exec_trace`` as CSV chunks, or None where the general path must handle it.

    None for exports without the kernel or runtime table (the general path prints nothing
    then too), without the columns it reads, with NULL times, processes or dimensions, or with
    names a text column cannot hold.
    """
    import sqlite3
    import threading

    import numpy as np

    from engine.reports.nsys.columns import NULL

    if not (trace.has_sqlite_table(_KERNEL) and trace.has_sqlite_table(_RUNTIME)):
        return None
    have_k, have_a = set(trace.column_names(_KERNEL)), set(trace.column_names(_RUNTIME))
    if not {"start", "end", "correlationId", "globalPid", "deviceId", *_DIMS} <= have_k or \
            not {"demangledName", "shortName"} & have_k or \
            not {"start", "end", "correlationId", "globalTid", "nameId"} <= have_a:
        return None
    name_expr = " , ".join(f'"{c}"' for c in ("demangledName", "shortName") if c in have_k)
    k_exprs = {c: f'"{c}"' for c in ("start", "end", "correlationId", "globalPid", "deviceId")}
    k_exprs.update(grid=_packed_expr("grid"), block=_packed_expr("block"))
    k_exprs["nameId"] = f"coalesce({name_expr}, NULL)"
    a_exprs = {c: f'"{c}"' for c in ("start", "end", "correlationId", "globalTid", "nameId")}
    # Only the calls that share a correlation id with a kernel (one in seven on a launch-bound
    # report), read while the kernels are.
    launches = f"correlationId IN (SELECT correlationId FROM {_KERNEL})"
    got: list[_Source | BaseException] = []
    reader = threading.Thread(target=_source_into, args=(got, trace, _RUNTIME, a_exprs, launches),
                              daemon=True)
    reader.start()
    try:
        ks = _Source(trace, _KERNEL, k_exprs)
    except sqlite3.Error:
        return None
    finally:
        reader.join()
    if not got or isinstance(got[0], sqlite3.Error):
        return None
    if isinstance(got[0], BaseException):
        raise got[0]
    calls = got[0]
    if not ks.rows or not calls.rows:
        return CsvTable("cuda_kern_exec_trace", 0, lambda: iter(()))
    if any(has_null(ks.column(c)) for c in ("start", "end", "globalPid", "grid", "block")) or \
            any(has_null(calls.column(c)) for c in ("start", "end", "globalTid", "nameId")):
        return None
    pairs = _pairs(np.asarray(ks.column("globalPid")) >> 24, np.asarray(ks.column("correlationId")),
                   np.asarray(calls.column("globalTid")) >> 24, np.asarray(calls.column("correlationId")))
    if pairs is None:
        return None
    k_rows, a_rows = pairs
    if not len(k_rows):
        return CsvTable("cuda_kern_exec_trace", 0, lambda: iter(()))
    order = np.argsort(np.asarray(calls.column("start"))[a_rows], kind="stable")
    k_rows, a_rows = k_rows[order], a_rows[order]
    del order
    strings = trace.strings()
    knames: dict[int, str] = {}
    for i in distinct(np.asarray(ks.column("nameId"))).tolist():
        if i != NULL:
            if i not in strings:
                return None  # an id without a string: the general path's fallbacks
            knames[i] = str(strings[i])
    a_ids = distinct(np.asarray(calls.column("nameId")))
    a_names = [_API_SUFFIX.sub("", str(strings.get(i, f"<unknown {i}>"))) for i in a_ids.tolist()]
    if any("\n" in t for t in a_names):
        return None  # a text column before the last one holds a newline: the general path

    def chunks() -> Iterator[bytes]:
        yield ",".join(_quoted(h).decode() for h in COLUMNS["cuda_kern_exec_trace"]).encode() + b"\n"
        for lo in range(0, len(k_rows), _CHUNK):
            yield _chunk(ks, calls, k_rows[lo:lo + _CHUNK], a_rows[lo:lo + _CHUNK], knames, a_ids,
                         a_names)

    return CsvTable("cuda_kern_exec_trace", len(k_rows), chunks)


def _packed_expr(prefix: str) -> str:
    """SQL packing a kernel's three grid or block dimensions into one integer (21 bits each).

    NULL where one is NULL or out of range (the general path prints those).
    """
    x, y, z = (f'"{prefix}{a}"' for a in "XYZ")
    top = (1 << _DIM_BITS) - 1
    return (f"CASE WHEN {x} BETWEEN 0 AND {top} AND {y} BETWEEN 0 AND {top} AND {z} BETWEEN 0 AND {top} "
            f"THEN ({x} << {2 * _DIM_BITS}) | ({y} << {_DIM_BITS}) | {z} END")


def _xyz(ks: _Source, prefix: str, rows: npt.NDArray[np.int64]) -> TextColumn:
    """GridXYZ / BlockXYZ ('%4d %4d %4d') of the chunk's kernels, as codes over its distinct ones."""
    import numpy as np

    uniq, codes = factorize(np.asarray(ks.column(prefix)[rows]))
    return TextColumn(codes.astype(np.int64), [_xyz_text(k) for k in uniq.tolist()])


def _chunk(ks: _Source, calls: _Source, kr: npt.NDArray[np.int64], ar: npt.NDArray[np.int64],
           knames: dict[int, str], a_ids: npt.NDArray[np.int64], a_names: list[str]) -> bytes:
    """One chunk of rows (kernel rows ``kr`` with their calls ``ar``) as CSV bytes."""
    import numpy as np

    from engine.reports.nsys.columns import NULL

    a_start = np.asarray(calls.column("start")[ar])
    a_end = np.asarray(calls.column("end")[ar])
    k_start = np.asarray(ks.column("start")[kr])
    k_end = np.asarray(ks.column("end")[kr])
    gtid = np.asarray(calls.column("globalTid")[ar])
    dev = np.asarray(ks.column("deviceId")[kr])
    queue = k_start - a_end
    not_queued = queue < 0
    k_ids = np.asarray(ks.column("nameId")[kr])
    uniq, codes = factorize(k_ids)
    labels = [knames.get(i, "") for i in uniq.tolist()]
    cols: list[IntColumn | TextColumn] = [
        IntColumn(a_start), IntColumn(a_end - a_start),
        IntColumn(a_end, not_queued), IntColumn(queue, not_queued),
        IntColumn(k_start), IntColumn(k_end - k_start),
        IntColumn(np.maximum(a_end, k_end) - a_start),
        IntColumn((gtid >> 24) & 0xFFFFFF), IntColumn(gtid & 0xFFFFFF),
        IntColumn(dev, dev == NULL),
        TextColumn(np.searchsorted(a_ids, np.asarray(calls.column("nameId")[ar])), a_names),
        _xyz(ks, "grid", kr), _xyz(ks, "block", kr),
        TextColumn(codes.astype(np.int64), labels),
    ]
    return _rows(cols[:-1], 0, len(kr), cols[-1])  # type: ignore[arg-type]


def kern_gb_sum_table(trace: NsysSqliteTrace) -> SummaryTable | None:
    """``cuda_gpu_kern_gb_sum`` without pandas; None where the general path must handle it.

    Kernels grouped by name, GridXYZ and BlockXYZ (the texts, sorted as the DataFrame path's
    groupby sorts them), numpy segment statistics of their durations, most total time first.
    """
    import sqlite3

    import numpy as np

    from engine.analysis.nsys.stats.fast import _segment_stats, _time_rows

    if not trace.has_sqlite_table(_KERNEL):
        return None
    have = set(trace.column_names(_KERNEL))
    names = [f'"{c}"' for c in ("demangledName", "shortName") if c in have]
    if not names or not {"start", "end", *_DIMS} <= have:
        return None
    exprs = {"duration": '"end" - "start"', "nameId": f"coalesce({', '.join(names)}, NULL)",
             "grid": _packed_expr("grid"), "block": _packed_expr("block")}
    try:
        src = _Source(trace, _KERNEL, exprs)
    except sqlite3.Error:
        return None
    if not src.rows or any(has_null(src.column(c)) for c in exprs):
        return None
    strings = trace.strings()
    ids, id_code = factorize(np.asarray(src.column("nameId")))
    if any(int(i) not in strings for i in ids.tolist()):
        return None
    grid, block = np.asarray(src.column("grid")), np.asarray(src.column("block"))
    g_uniq, g_code = factorize(grid)
    b_uniq, b_code = factorize(block)
    key = (id_code * len(g_uniq) + g_code) * len(b_uniq) + b_code
    k_uniq, codes = factorize(key)
    per = k_uniq // len(b_uniq)
    labels = [(_xyz_text(int(g_uniq[g])), _xyz_text(int(b_uniq[b])), str(strings[int(ids[i])]))
              for i, g, b in zip((per // len(g_uniq)).tolist(), (per % len(g_uniq)).tolist(),
                                 (k_uniq % len(b_uniq)).tolist(), strict=True)]
    stats = _segment_stats(codes, np.asarray(src.column("duration")), len(labels))
    # The DataFrame path's groups come sorted by (name, grid, block) texts: ties keep that order.
    order = sorted(range(len(labels)), key=lambda j: (labels[j][2], labels[j][0], labels[j][1]))
    return _time_rows([(labels[j], stats[j]) for j in order if stats[j] is not None],
                      "cuda_gpu_kern_gb_sum")


def _xyz_text(k: int) -> str:
    mask = (1 << _DIM_BITS) - 1
    return f"{k >> (2 * _DIM_BITS):4d} {(k >> _DIM_BITS) & mask:4d} {k & mask:4d}"
