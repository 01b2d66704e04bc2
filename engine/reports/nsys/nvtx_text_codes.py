"""The ``domain:text`` names of NVTX ranges of an nsys export, as codes over columns (no pandas).

The rows' integer columns come from the columnar cache (only the rows a condition selects:
``read_where``), their texts from one column-only query, factorised once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.reports.nsys.columns import has_null
from engine.reports.nsys.schema import DURATION, NULL, NVTX, NVTX_DOMAIN_CREATE, NVTX_PUSH_POP, NVTX_START_END
from engine.reports.nsys.sorted_sets import factorize
from engine.reports.nsys.stats_reads import nvtx_where

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace


_NVTX = NVTX


_DOMAIN_CREATE = NVTX_DOMAIN_CREATE


_FEW_TEXTS = 64  # up to this many distinct inline texts are coded in SQL (a CASE per row)


def name_exprs(trace: NsysSqliteTrace, where: str) -> tuple[dict[str, str], list[str] | None]:
    """The integer columns :func:`range_names` needs (to read with the others, in one pass).

    Where the rows' inline texts are few (one DISTINCT scan tells), they come as a code column
    (``CASE "text" WHEN ... END``) and the texts are returned: no text is fetched row by row.
    """
    have = set(trace.column_names(_NVTX))
    exprs = {"textId": '"textId"' if "textId" in have else "NULL",
             "domainId": '"domainId"' if "domainId" in have else "NULL"}
    if "text" not in have:
        return exprs, []
    found = trace.rows(f'SELECT DISTINCT "text" FROM {_NVTX} WHERE {where} LIMIT {_FEW_TEXTS + 1}')
    if len(found) > _FEW_TEXTS or any(t is not None and (not isinstance(t, str) or "\0" in t)
                                      for (t,) in found):
        return exprs, None
    texts = [str(t) for (t,) in found if t is not None]
    whens = " ".join(f"""WHEN "text" = '{t.replace("'", "''")}' THEN {i}""" for i, t in enumerate(texts))
    exprs["textCode"] = f'CASE WHEN "text" IS NULL THEN -2 {whens} ELSE -1 END' if texts else \
        'CASE WHEN "text" IS NULL THEN -2 ELSE -1 END'
    return exprs, texts


def range_names(trace: NsysSqliteTrace, where: str, cols: dict[str, npt.NDArray[np.int64]],
                texts: list[str] | None, domain_id_first: bool = False,
                ) -> tuple[npt.NDArray[np.int64], list[str]] | None:
    """Codes and labels of the ``domain:text`` names of the NVTX rows where ``where`` holds.

    ``cols`` holds those rows' :func:`name_exprs` columns in table order, ``texts`` what it
    returned with them. A row's text is its ``textId``'s string where that resolves, else its
    ``text``; a domain's name is its create event's ``text``, else its ``textId``'s string; an
    unknown domain or text prints as empty (``domain_id_first``: a domain's ``textId`` string
    first, as nvtx_sum names them). None when the rows changed meanwhile.
    """
    from operator import itemgetter

    import numpy as np


    have = set(trace.column_names(_NVTX))
    strings = trace.strings()
    ints = {"textId": '"textId"' if "textId" in have else "NULL",
            "domainId": '"domainId"' if "domainId" in have else "NULL"}
    n = len(cols["textId"])
    labels: dict[object, int] = {}
    if texts is not None and "textCode" in cols:  # coded in SQL: None is label 0, texts follow
        code = np.asarray(cols["textCode"])
        if (code == -1).any():
            return None  # a text that is not one of the distinct ones: changed meanwhile
        labels = {None: 0, **{t: i + 1 for i, t in enumerate(texts)}}
        tcode = code + 1
        tcode[code == -2] = 0
    elif "text" in have:
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
        uniq, inv = factorize(text_ids[resolved])
        known = np.array([int(i) in strings for i in uniq.tolist()], dtype=bool)
        sub = np.array([labels.setdefault(strings[int(i)], len(labels)) if k else -1
                        for i, k in zip(uniq.tolist(), known.tolist(), strict=True)], np.int64)
        picked = sub[inv]
        part = tcode[resolved]
        tcode[resolved] = np.where(picked >= 0, picked, part)
    every = list(labels)
    created = trace.rows(f'SELECT {ints["domainId"]}, {"text" if "text" in have else "NULL"}, '
                         f'{ints["textId"]} FROM {_NVTX} WHERE eventType = {_DOMAIN_CREATE}')
    domains: dict[int, object] = {}
    for d, txt, tid in created:
        if d is not None:
            by_id = strings.get(int(str(tid))) if tid is not None else None
            if domain_id_first:
                domains[int(str(d))] = by_id if tid is not None and int(str(tid)) in strings else txt
            else:
                domains[int(str(d))] = txt if txt is not None else by_id
    dom = np.asarray(cols["domainId"])
    d_uniq, d_code = factorize(dom)
    d_names = [domains.get(int(d)) if d != NULL else None for d in d_uniq.tolist()]
    key = d_code.astype(np.int64) * len(every) + tcode
    k_uniq, codes = factorize(key)
    names = []
    for k in k_uniq.tolist():
        d, x = d_names[k // len(every)], every[k % len(every)]
        names.append(f"{'' if d is None else d}:{'' if x is None else x}")
    return codes.astype(np.int64), names


def nvtx_sum_groups(trace: NsysSqliteTrace) -> list[tuple[int, str, npt.NDArray[np.int64]]] | None:
    """The ended push/pop (59) and start/end (60) ranges grouped as nvtx_sum groups them.

    (eventType, ``domain:text`` name, durations) per group, as
    :meth:`~engine.reports.nsys.sqlite_trace.NsysSqliteTrace.nvtx_range_groups` returns them, from the
    columnar cache (kept for the next run) instead of an SQLite GROUP BY. None where that method
    must answer (a range without a start or a domain id, no NVTX table, many distinct texts).
    """
    import sqlite3

    import numpy as np

    if not trace.has_sqlite_table(_NVTX):
        return None
    have = set(trace.column_names(_NVTX))
    if not {"start", "end", "eventType", "domainId"} <= have:
        return None
    where = nvtx_where((NVTX_PUSH_POP, NVTX_START_END), ended=True)
    try:
        extra, texts = name_exprs(trace, where)
        if texts is None:
            return None
        cols = trace.column_store().read_where(
            _NVTX, {"duration": DURATION, "eventType": '"eventType"', **extra}, where)
    except sqlite3.Error:
        return None
    if not len(cols["duration"]):
        return []
    if has_null(cols["duration"]) or has_null(cols["domainId"]):
        return None
    named = range_names(trace, where, cols, texts, domain_id_first=True)
    if named is None:
        return None
    codes, names = named
    key = codes * 2 + (np.asarray(cols["eventType"]) == 60)
    order = np.argsort(key, kind="stable")
    k_sorted = key[order]
    bounds = np.flatnonzero(np.diff(k_sorted)) + 1
    durations = np.asarray(cols["duration"])[order]
    merged: dict[tuple[int, str], list[npt.NDArray[np.int64]]] = {}
    for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(order)], strict=True):
        k = int(k_sorted[lo])
        merged.setdefault((60 if k % 2 else 59, names[k // 2]), []).append(durations[lo:hi])
    return [(e, name, np.concatenate(parts)) for (e, name), parts in merged.items()]
