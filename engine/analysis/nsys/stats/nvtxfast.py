"""NVTX trace reports of an nsys SQLite export without pandas (``nvtx_pushpop_trace``).

The integer columns of the push/pop ranges come from the columnar cache (only those rows:
``read_where``), their texts from one column-only query, factorised once; the tree (parent,
level, range stack, time in children) is built in one pass over the ranges sorted by thread and
start, and the CSV is formatted a chunk of rows at a time by :mod:`.csvfast`. The bytes are
those of :func:`engine.analysis.nsys.stats.more.nvtx_pushpop_trace` + ``to_csv``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.catalog import COLUMNS
from engine.analysis.nsys.stats.csvfast import _CHUNK, IntColumn, TextColumn, _quoted, _rows
from engine.analysis.nsys.stats.traces import CsvTable
from engine.reports.columns import has_null

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.reports.nsys_sqlite import NsysSqliteTrace

_NVTX = "NVTX_EVENTS"
_PUSHPOP = "eventType IN (59, 70)"
_DOMAIN_CREATE = 75


def name_exprs(trace: NsysSqliteTrace) -> dict[str, str]:
    """The integer columns :func:`range_names` needs, to read with the others (one pass)."""
    have = set(trace.columns(_NVTX))
    return {"textId": '"textId"' if "textId" in have else "NULL",
            "domainId": '"domainId"' if "domainId" in have else "NULL"}


def range_names(trace: NsysSqliteTrace, where: str, cols: dict[str, npt.NDArray[np.int64]],
                ) -> tuple[npt.NDArray[np.int64], list[str]] | None:
    """Codes and labels of the ``domain:text`` names of the NVTX rows where ``where`` holds.

    ``cols`` holds those rows' :func:`name_exprs` columns in table order. A row's text is its
    ``textId``'s string where that resolves, else its ``text``; a domain's name is its create
    event's ``text``, else its ``textId``'s string; an unknown domain or text prints as empty.
    None when the rows changed meanwhile (their count differs).
    """
    from operator import itemgetter

    import numpy as np

    from engine.reports.columns import NULL

    have = set(trace.columns(_NVTX))
    strings = trace.strings()
    ints = name_exprs(trace)
    n = len(cols["textId"])
    labels: dict[object, int] = {}
    if "text" in have:
        rows = trace.rows(f'SELECT "text" FROM {_NVTX} WHERE {where} ORDER BY rowid')
        if len(rows) != n:
            return None
        labels = {t: i for i, t in enumerate(dict.fromkeys(map(itemgetter(0), rows)))}
        tcode = np.fromiter(map(labels.__getitem__, map(itemgetter(0), rows)), np.int64, n)
        del rows
    else:
        tcode = np.full(n, labels.setdefault(None, 0), np.int64)
    text_ids = np.asarray(cols["textId"])
    resolved = text_ids != NULL
    if resolved.any():
        uniq, inv = np.unique(text_ids[resolved], return_inverse=True)
        known = np.array([int(i) in strings for i in uniq.tolist()], dtype=bool)
        sub = np.array([labels.setdefault(strings[int(i)], len(labels)) if k else -1
                        for i, k in zip(uniq.tolist(), known.tolist(), strict=True)], np.int64)
        picked = sub[inv]
        part = tcode[resolved]
        tcode[resolved] = np.where(picked >= 0, picked, part)
    texts = list(labels)
    created = trace.rows(f'SELECT {ints["domainId"]}, {"text" if "text" in have else "NULL"}, '
                         f'{ints["textId"]} FROM {_NVTX} WHERE eventType = {_DOMAIN_CREATE}')
    domains: dict[int, object] = {}
    for d, txt, tid in created:
        if d is not None:
            domains[int(str(d))] = txt if txt is not None else strings.get(int(str(tid))) \
                if tid is not None else None
    dom = np.asarray(cols["domainId"])
    d_uniq, d_code = np.unique(dom, return_inverse=True)
    d_names = [domains.get(int(d)) if d != NULL else None for d in d_uniq.tolist()]
    key = d_code.astype(np.int64) * len(texts) + tcode
    k_uniq, codes = np.unique(key, return_inverse=True)
    names = []
    for k in k_uniq.tolist():
        d, x = d_names[k // len(texts)], texts[k % len(texts)]
        names.append(f"{'' if d is None else d}:{'' if x is None else x}")
    return codes.astype(np.int64), names


def pushpop_trace_csv(trace: NsysSqliteTrace) -> CsvTable | None:
    """``nvtx_pushpop_trace`` as CSV chunks; None where the general path must handle it.

    None for exports without NVTX_EVENTS or its columns, with NULL starts or threads, or with
    names that hold a newline. A range never popped ends at the table's last timestamp.
    """
    import sqlite3

    import numpy as np

    from engine.reports.columns import NULL

    if not trace.has_sqlite_table(_NVTX):
        return None
    have = set(trace.columns(_NVTX))
    if not {"start", "end", "eventType", "globalTid"} <= have:
        return None
    try:
        cols = trace.column_store().read_where(
            _NVTX, {"id": "rowid", "start": '"start"', "end": '"end"', "globalTid": '"globalTid"',
                    **name_exprs(trace)}, _PUSHPOP)
        if not len(cols["id"]):
            return CsvTable("nvtx_pushpop_trace", 0, lambda: iter(()))
        if has_null(cols["start"]) or has_null(cols["globalTid"]):
            return None
        named = range_names(trace, _PUSHPOP, cols)
        last_s, last_e = trace.rows(f'SELECT max("start"), max("end") FROM {_NVTX}')[0]
    except sqlite3.Error:
        return None
    if named is None or any("\n" in n for n in named[1]):
        return None
    name_code, names = named
    last = max(int(str(v)) for v in (last_s, last_e) if v is not None)
    ids, start, gtid = (np.asarray(cols[c]) for c in ("id", "start", "globalTid"))
    end = np.asarray(cols["end"])
    end = np.where(end == NULL, last, end)
    order = np.lexsort((ids, -end, start, gtid))
    parent, level, stack = _tree(start[order], end[order], gtid[order])
    n = len(order)
    dur = (end - start)[order]
    has_p = parent >= 0
    child_dur = np.zeros(n, np.int64)
    np.add.at(child_dur, parent[has_p], dur[has_p])
    n_child = np.bincount(parent[has_p], minlength=n).astype(np.int64)
    sid = ids[order]
    paths = _paths(sid.tolist(), parent.tolist())
    final = np.lexsort((sid, start[order]))  # by start, then range id
    del stack

    def chunks() -> Iterator[bytes]:
        yield ",".join(_quoted(h).decode() for h in COLUMNS["nvtx_pushpop_trace"]).encode() + b"\n"
        for lo in range(0, n, _CHUNK):
            k = final[lo:lo + _CHUNK]
            o = order[k]
            p = parent[k]
            lvl = level[k]
            nc = name_code[o]
            tree_key = lvl * len(names) + nc
            t_uniq, t_code = np.unique(tree_key, return_inverse=True)
            trees = ["--" * (t // len(names)) + names[t % len(names)] for t in t_uniq.tolist()]
            g = gtid[o]
            cols_out: list[IntColumn | TextColumn] = [
                IntColumn(start[o]), IntColumn(end[o]), IntColumn(dur[k]), IntColumn(child_dur[k]),
                IntColumn(dur[k] - child_dur[k]), TextColumn(nc, names),
                IntColumn((g // (1 << 24)) % (1 << 24)), IntColumn(g % (1 << 24)),
                IntColumn(lvl), IntColumn(n_child[k]), IntColumn(sid[k]),
                IntColumn(np.where(p >= 0, sid[np.maximum(p, 0)], 0), p < 0),
                TextColumn(np.arange(len(k), dtype=np.int64), [paths[i] for i in k.tolist()],
                           plain=True),
                TextColumn(t_code.astype(np.int64), trees),
            ]
            yield _rows(cols_out[:-1], 0, len(k), cols_out[-1])  # type: ignore[arg-type]

    return CsvTable("nvtx_pushpop_trace", n, chunks)


def _tree(start: npt.NDArray[np.int64], end: npt.NDArray[np.int64], tid: npt.NDArray[np.int64],
          ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], list[int]]:
    """(parent position or -1, level) of ranges sorted by thread, start, end descending.

    A range's parent is the innermost earlier range of its thread still open that ends at or
    after it (one stack, as :func:`engine.analysis.nsys.stats.more.nvtx_pushpop_trace` walks).
    """
    import numpy as np

    s_l, e_l, t_l = start.tolist(), end.tolist(), tid.tolist()
    n = len(s_l)
    parent = [-1] * n
    level = [0] * n
    stack: list[int] = []
    for k in range(n):
        e, t = e_l[k], t_l[k]
        s = s_l[k]
        while stack:
            top = stack[-1]
            if t_l[top] != t or e_l[top] < e or e_l[top] < s:
                stack.pop()
            else:
                parent[k] = top
                level[k] = level[top] + 1
                break
        stack.append(k)
    return np.array(parent, np.int64), np.array(level, np.int64), stack


def _paths(ids: list[int], parent: list[int]) -> list[str]:
    """RangeStack of each range (":id" from the root down), parents before their children."""
    out = [""] * len(ids)
    for k, (i, p) in enumerate(zip(ids, parent, strict=True)):
        out[k] = (out[p] if p >= 0 else "") + f":{i}"
    return out
