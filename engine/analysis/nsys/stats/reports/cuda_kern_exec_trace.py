"""``cuda_kern_exec_trace``: each kernel with its launch call (API, queue and kernel times), by API start.

On an nsys export, rendered as CSV without pandas (:func:`kern_exec_trace_csv`): each kernel is
joined with its launch call (same process, same correlation id) by a binary search over the
calls' packed ``(process, correlationId)`` keys, sorted once; only the pairs and their order are
held (24 bytes a row) and each chunk gathers its columns from the columnar cache. The table (window,
JSON, other traces) is :func:`kern_exec_trace_frame`. Same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.catalog import _API_SUFFIX, COLUMNS
from engine.analysis.nsys.stats.column_source import ColumnSource, distinct, factorize
from engine.analysis.nsys.stats.csv_columns import _CHUNK, IntColumn, TextColumn, _quoted, _rows
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.rendered import RenderedReport
from engine.analysis.nsys.stats.trace_tables import (
    api_names,
    empty_frame,
    usable,
    xyz,
)
from engine.reports.nsys.columns import has_null
from engine.reports.nsys.schema import KERNEL, NULL, RUNTIME
from engine.reports.nsys.stats_reads import dims_text, launched_kernels_where, packed_dims_expr

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import Trace
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace


@report(
    "cuda_kern_exec_trace",
    title="CUDA Kernel Launch & Exec Time Trace: each kernel with its launch call",
    columns=(
        "API Start (ns)", "API Dur (ns)", "Queue Start (ns)", "Queue Dur (ns)", "Kernel Start (ns)",
        "Kernel Dur (ns)", "Total Dur (ns)", "PID", "TID", "DevId", "API Function", "GridXYZ", "BlockXYZ",
        "Kernel Name",
    ),
    needs=("kernels", "api"),
)
def cuda_kern_exec_trace(trace: Trace, csv: bool) -> Any:
    """The rendered CSV where asked for on an export, else the table."""
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

    if csv and isinstance(trace, NsysSqliteTrace):
        table = kern_exec_trace_csv(trace)
        if table is not None:
            return table
    return kern_exec_trace_frame(trace)


_DIMS = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ")




def _pairs(k_proc: npt.NDArray[np.int64], k_corr: npt.NDArray[np.int64], a_proc: npt.NDArray[np.int64],
           a_corr: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """(kernel row, call row) of every kernel and call with equal (process, correlationId).

    Kernels in table order, each kernel's calls in table order (an inner merge's order). None
    when the keys cannot be packed into one int64 (the general path joins them then).
    """
    import numpy as np


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


def _source_into(out: list[ColumnSource | BaseException], trace: NsysSqliteTrace, table: str,
                 exprs: dict[str, str], where: str) -> None:
    """Read a :class:`ColumnSource` (in a thread): append it, or the exception that stopped it."""
    try:
        out.append(ColumnSource(trace, table, exprs, where=where))
    except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
        out.append(exc)


def kern_exec_trace_csv(trace: NsysSqliteTrace) -> RenderedReport | None:
    """``cuda_kern_exec_trace`` as CSV chunks, or None where the general path must handle it.

    None for exports without the kernel or runtime table (the general path prints nothing
    then too), without the columns it reads, with NULL times, processes or dimensions, or with
    names a text column cannot hold.
    """
    import sqlite3
    import threading

    import numpy as np


    if not (trace.has_sqlite_table(KERNEL) and trace.has_sqlite_table(RUNTIME)):
        return None
    have_k, have_a = set(trace.column_names(KERNEL)), set(trace.column_names(RUNTIME))
    if not {"start", "end", "correlationId", "globalPid", "deviceId", *_DIMS} <= have_k or \
            not {"demangledName", "shortName"} & have_k or \
            not {"start", "end", "correlationId", "globalTid", "nameId"} <= have_a:
        return None
    name_expr = " , ".join(f'"{c}"' for c in ("demangledName", "shortName") if c in have_k)
    k_exprs = {c: f'"{c}"' for c in ("start", "end", "correlationId", "globalPid", "deviceId")}
    k_exprs.update(grid=packed_dims_expr("grid"), block=packed_dims_expr("block"))
    k_exprs["nameId"] = f"coalesce({name_expr}, NULL)"
    a_exprs = {c: f'"{c}"' for c in ("start", "end", "correlationId", "globalTid", "nameId")}
    # Only the calls that share a correlation id with a kernel (one in seven on a launch-bound
    # report), read while the kernels are.
    launches = launched_kernels_where()
    got: list[ColumnSource | BaseException] = []
    reader = threading.Thread(target=_source_into, args=(got, trace, RUNTIME, a_exprs, launches),
                              daemon=True)
    reader.start()
    try:
        ks = ColumnSource(trace, KERNEL, k_exprs)
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
        return RenderedReport("cuda_kern_exec_trace", 0, lambda: iter(()))
    if any(has_null(ks.column(c)) for c in ("start", "end", "globalPid", "grid", "block")) or \
            any(has_null(calls.column(c)) for c in ("start", "end", "globalTid", "nameId")):
        return None
    pairs = _pairs(np.asarray(ks.column("globalPid")) >> 24, np.asarray(ks.column("correlationId")),
                   np.asarray(calls.column("globalTid")) >> 24, np.asarray(calls.column("correlationId")))
    if pairs is None:
        return None
    k_rows, a_rows = pairs
    if not len(k_rows):
        return RenderedReport("cuda_kern_exec_trace", 0, lambda: iter(()))
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

    return RenderedReport("cuda_kern_exec_trace", len(k_rows), chunks)




def _xyz(ks: ColumnSource, prefix: str, rows: npt.NDArray[np.int64]) -> TextColumn:
    """GridXYZ / BlockXYZ ('%4d %4d %4d') of the chunk's kernels, as codes over its distinct ones."""
    import numpy as np

    uniq, codes = factorize(np.asarray(ks.column(prefix)[rows]))
    return TextColumn(codes.astype(np.int64), [dims_text(k) for k in uniq.tolist()])


def _chunk(ks: ColumnSource, calls: ColumnSource, kr: npt.NDArray[np.int64], ar: npt.NDArray[np.int64],
           knames: dict[int, str], a_ids: npt.NDArray[np.int64], a_names: list[str]) -> bytes:
    """One chunk of rows (kernel rows ``kr`` with their calls ``ar``) as CSV bytes."""
    import numpy as np


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


def kern_exec_trace_frame(trace: Trace) -> pd.DataFrame:
    """Each kernel with its launch call: API, queue and kernel times, by API start."""
    import numpy as np
    import pandas as pd

    k = usable(trace, "kernels", ["start", "end", "correlationId", "globalPid", "deviceId", "name",
                                   "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"])
    api = usable(trace, "api", ["start", "end", "correlationId", "globalTid", "pid", "tid", "name"])
    if k is None or api is None:
        return empty_frame("cuda_kern_exec_trace")
    left = pd.DataFrame({
        "proc": pd.to_numeric(k["globalPid"], errors="coerce") // (1 << 24),
        "corr": pd.to_numeric(k["correlationId"]),
        "k_start": pd.to_numeric(k["start"]).astype("int64"),
        "k_end": pd.to_numeric(k["end"]).astype("int64"),
        "dev": pd.to_numeric(k["deviceId"], errors="coerce").astype("Int64"),
        "grid": xyz(k, "grid"), "block": xyz(k, "block"),
        "kname": k["name"].fillna("").astype(str),
    })
    right = pd.DataFrame({
        "proc": pd.to_numeric(api["globalTid"], errors="coerce") // (1 << 24),
        "corr": pd.to_numeric(api["correlationId"]),
        "a_start": pd.to_numeric(api["start"]).astype("int64"),
        "a_end": pd.to_numeric(api["end"]).astype("int64"),
        "pid": pd.to_numeric(api["pid"], errors="coerce").astype("Int64"),
        "tid": pd.to_numeric(api["tid"], errors="coerce").astype("Int64"),
        "aname": api_names(api),
    })
    if left["proc"].isna().any() or right["proc"].isna().any():  # Kineto: correlation ids suffice
        left["proc"], right["proc"] = 0, 0
    j = left.merge(right[right["corr"].notna()], on=["proc", "corr"], how="inner")
    if j.empty:
        return empty_frame("cuda_kern_exec_trace")
    queued = j["k_start"] - j["a_end"] >= 0
    out = pd.DataFrame({
        "API Start (ns)": j["a_start"],
        "API Dur (ns)": j["a_end"] - j["a_start"],
        "Queue Start (ns)": j["a_end"].where(queued).astype("Int64"),
        "Queue Dur (ns)": (j["k_start"] - j["a_end"]).where(queued).astype("Int64"),
        "Kernel Start (ns)": j["k_start"],
        "Kernel Dur (ns)": j["k_end"] - j["k_start"],
        "Total Dur (ns)": np.maximum(j["a_end"], j["k_end"]) - j["a_start"],
        "PID": j["pid"], "TID": j["tid"], "DevId": j["dev"],
        "API Function": j["aname"], "GridXYZ": j["grid"], "BlockXYZ": j["block"],
        "Kernel Name": j["kname"],
    })
    return out.sort_values("API Start (ns)", kind="stable").reset_index(drop=True)
