"""NVTX trace reports of an nsys SQLite export without pandas (``nvtx_pushpop_trace``).

The integer columns of the push/pop ranges come from the columnar cache (only those rows:
``read_where``), their texts from one column-only query, factorised once; the tree (parent,
level, range stack, time in children) is built in one pass over the ranges sorted by thread and
start, and the CSV is formatted a chunk of rows at a time by :mod:`.csvfast`. The bytes are
those of :func:`engine.analysis.nsys.stats.more.nvtx_pushpop_trace` + ``to_csv``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.catalog import COLUMNS
from engine.analysis.nsys.stats.csvfast import _CHUNK, IntColumn, TextColumn, _quoted, _rows
from engine.analysis.nsys.stats.fast import SummaryTable
from engine.analysis.nsys.stats.traces import CsvTable, distinct, factorize
from engine.reports.nsys.columns import has_null

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

_NVTX = "NVTX_EVENTS"
_PUSHPOP = "eventType IN (59, 70)"
_DOMAIN_CREATE = 75


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

    from engine.reports.nsys.columns import NULL

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


def pushpop_trace_csv(trace: NsysSqliteTrace) -> CsvTable | None:
    """``nvtx_pushpop_trace`` as CSV chunks; None where the general path must handle it.

    None for exports without NVTX_EVENTS or its columns, with NULL starts or threads, or with
    names that hold a newline. A range never popped ends at the table's last timestamp.
    """
    import sqlite3

    import numpy as np

    from engine.reports.nsys.columns import NULL

    if not trace.has_sqlite_table(_NVTX):
        return None
    have = set(trace.column_names(_NVTX))
    if not {"start", "end", "eventType", "globalTid"} <= have:
        return None
    try:
        extra, texts = name_exprs(trace, _PUSHPOP)
        cols = trace.column_store().read_where(
            _NVTX, {"id": "rowid", "start": '"start"', "end": '"end"', "globalTid": '"globalTid"',
                    **extra}, _PUSHPOP)
        if not len(cols["id"]):
            return CsvTable("nvtx_pushpop_trace", 0, lambda: iter(()))
        if has_null(cols["start"]) or has_null(cols["globalTid"]):
            return None
        named = range_names(trace, _PUSHPOP, cols, texts)
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
            t_uniq, t_code = factorize(tree_key)
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


_RANGES = "eventType IN (59, 70, 60, 71)"
_KERNEL, _RUNTIME = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"


def _ranges(trace: NsysSqliteTrace) -> tuple[dict[str, npt.NDArray[np.int64]], list[str]] | None:
    """Ranges ended on the thread that began them, or None for the general path.

    Columns id, start, end, globalTid, name (a code into the names that come with them), style
    (0 push/pop, 1 start/end); no columns when there are no such ranges.
    """
    import numpy as np

    from engine.reports.nsys.columns import NULL

    have = set(trace.column_names(_NVTX))
    if not {"start", "end", "eventType", "globalTid"} <= have:
        return None
    where = _RANGES + (' AND "endGlobalTid" IS NULL' if "endGlobalTid" in have else "")
    extra, texts = name_exprs(trace, where)
    cols = trace.column_store().read_where(
        _NVTX, {"id": "rowid", "start": '"start"', "end": '"end"', "globalTid": '"globalTid"',
                "eventType": '"eventType"', **extra}, where)
    if not len(cols["id"]):
        return {}, []
    if has_null(cols["start"]) or has_null(cols["globalTid"]):
        return None
    named = range_names(trace, where, cols, texts)
    if named is None:
        return None
    last_s, last_e = trace.rows(f'SELECT max("start"), max("end") FROM {_NVTX}')[0]
    last = max(int(str(v)) for v in (last_s, last_e) if v is not None)
    end = np.asarray(cols["end"])
    out = {"id": np.asarray(cols["id"]), "start": np.asarray(cols["start"]),
           "end": np.where(end == NULL, last, end), "globalTid": np.asarray(cols["globalTid"]),
           "name": named[0], "style": np.isin(cols["eventType"], (60, 71)).astype(np.int64)}
    return out, named[1]


def _launches(trace: NsysSqliteTrace) -> dict[str, npt.NDArray[np.int64]] | None:
    """Each kernel with each of its launch calls, or None for the general path.

    Per row: kernel row, duration, name id and call row (-1: a kernel without a call, kept as a
    LEFT JOIN keeps it); and the calls' start, end and globalTid columns.
    """
    import numpy as np

    from engine.reports.nsys.columns import NULL

    if not trace.has_sqlite_table(_RUNTIME):
        return None
    have_k, have_a = set(trace.column_names(_KERNEL)), set(trace.column_names(_RUNTIME))
    names = [f'"{c}"' for c in ("demangledName", "shortName") if c in have_k]
    if not names or not {"start", "end", "correlationId", "globalPid"} <= have_k or \
            not {"start", "end", "correlationId", "globalTid"} <= have_a:
        return None
    store = trace.column_store()  # both tables at once: a table under 1M rows reads on one thread
    pk = store.read_async(_KERNEL, {"start": '"start"', "end": '"end"', "correlationId": '"correlationId"',
                                    "globalPid": '"globalPid"',
                                    "nameId": f"coalesce({', '.join(names)}, NULL)"})
    a = store.read(_RUNTIME, {c: f'"{c}"' for c in ("start", "end", "correlationId", "globalTid")})
    k = pk.result()
    if any(has_null(k[c]) for c in ("start", "end", "nameId")) or \
            any(has_null(a[c]) for c in ("start", "end", "globalTid")):
        return None
    corr_k, gpid = np.asarray(k["correlationId"]), np.asarray(k["globalPid"])
    corr_a, gtid = np.asarray(a["correlationId"]), np.asarray(a["globalTid"])
    ok_k = (corr_k != NULL) & (gpid != NULL) & ((gpid & 0xFFFFFF) == 0)
    ok_a = corr_a != NULL
    if (corr_k[ok_k] < 0).any() or (corr_k[ok_k] >= 1 << 40).any() or \
            (corr_a[ok_a] < 0).any() or (corr_a[ok_a] >= 1 << 40).any():
        return None
    procs, code = factorize(np.concatenate([gpid[ok_k] >> 24, gtid[ok_a] >> 24]))
    if len(procs) >= 1 << 22:
        return None
    n_k = int(ok_k.sum())
    key_k = np.full(len(corr_k), -1, np.int64)
    key_k[ok_k] = (code[:n_k].astype(np.int64) << 40) | corr_k[ok_k]
    key_a = (code[n_k:].astype(np.int64) << 40) | corr_a[ok_a]
    calls = np.flatnonzero(ok_a)
    order = np.argsort(key_a, kind="stable")
    sk = key_a[order]
    lo = np.searchsorted(sk, key_k, side="left")
    cnt = np.where(key_k >= 0, np.searchsorted(sk, key_k, side="right") - lo, 0)
    rows = np.maximum(cnt, 1)  # a LEFT JOIN: one row without a call for unmatched kernels
    k_row = np.repeat(np.arange(len(corr_k), dtype=np.int64), rows)
    first = np.cumsum(rows) - rows
    within = np.arange(int(rows.sum()), dtype=np.int64) - np.repeat(first, rows)
    matched = np.repeat(cnt, rows) > 0
    call = np.full(len(k_row), -1, np.int64)
    call[matched] = calls[order[np.repeat(lo, rows)[matched] + within[matched]]]
    kdur = (np.asarray(k["end"]) - np.asarray(k["start"]))[k_row]
    return {"kid": k_row, "kdur": kdur, "nameId": np.asarray(k["nameId"])[k_row], "call": call,
            "a_start": np.asarray(a["start"]), "a_end": np.asarray(a["end"]), "gtid": gtid}


def _range_pairs(launch: dict[str, npt.NDArray[np.int64]], ranges: dict[str, npt.NDArray[np.int64]],
                 ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(launch row, range row) for every launch whose call lies inside a range of its thread."""
    import numpy as np

    rows = np.flatnonzero(launch["call"] >= 0)
    call = launch["call"][rows]
    cg, cs, ce = launch["gtid"][call], launch["a_start"][call], launch["a_end"][call]
    out_l, out_r = [], []
    rg_tid = ranges["globalTid"]
    for tid in distinct(rg_tid).tolist():
        mine = cg == tid
        if not mine.any():
            continue
        idx = np.flatnonzero(mine)
        idx = idx[np.argsort(cs[idx], kind="stable")]
        s_sorted = cs[idx]
        rr = np.flatnonzero(rg_tid == tid)
        lo = np.searchsorted(s_sorted, ranges["start"][rr], side="left")
        n = np.searchsorted(s_sorted, ranges["end"][rr], side="right") - lo
        total = int(n.sum())
        if not total:
            continue
        r_idx = np.repeat(rr, n)
        pos = np.repeat(lo - (np.cumsum(n) - n), n) + np.arange(total)
        keep = ce[idx[pos]] <= ranges["end"][r_idx]
        out_l.append(rows[idx[pos[keep]]])
        out_r.append(r_idx[keep])
    if not out_l:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(out_l), np.concatenate(out_r)


def kern_sum_table(trace: NsysSqliteTrace) -> SummaryTable | None:
    """``nvtx_kern_sum`` without pandas; None where the general path must handle it.

    The same rows as :func:`engine.analysis.nsys.stats.nvtx.nvtx_kern_sum`: a kernel counts once
    for every range of its launching thread that contains its launch call, once without a range
    when none does; grouped by process, thread, range, style and kernel name.
    """
    import sqlite3

    import numpy as np

    from engine.analysis.nsys.stats.fast import _segment_stats
    from engine.reports.nsys.columns import NULL

    if not (trace.has_sqlite_table(_NVTX) and trace.has_sqlite_table(_KERNEL)):
        return None
    try:
        got = _ranges(trace)
        launch = _launches(trace) if got and got[0] else None
    except sqlite3.Error:
        return None
    if not got or not got[0] or launch is None:
        return None
    ranges, rnames = got
    strings = trace.strings()
    k_ids = distinct(launch["nameId"])
    if any(int(i) not in strings for i in k_ids.tolist()):
        return None
    knames = [str(strings[int(i)]) for i in k_ids.tolist()]
    l_rows, r_rows = _range_pairs(launch, ranges)
    alone = np.ones(len(launch["kid"]), bool)
    alone[l_rows] = False
    alone_rows = np.flatnonzero(alone)
    rows = np.concatenate([l_rows, alone_rows])
    n_m = len(l_rows)
    # Group keys in pandas' sorted order (a missing value last): pid, tid, range, style, kernel.
    call = launch["call"][rows]
    g = np.where(call >= 0, launch["gtid"][np.maximum(call, 0)], NULL)
    big = np.int64(1) << 62
    pid = np.where(g == NULL, big, (g >> 24) & 0xFFFFFF)
    tid = np.where(g == NULL, big, g & 0xFFFFFF)
    n_rank = _ranks(rnames)
    rname = np.concatenate([n_rank[ranges["name"][r_rows]], np.full(len(alone_rows), len(rnames))])
    style = np.concatenate([ranges["style"][r_rows], np.full(len(alone_rows), 2)])
    k_rank = _ranks(knames)
    kname = k_rank[np.searchsorted(k_ids, launch["nameId"][rows])]
    rid = np.concatenate([ranges["id"][r_rows], np.full(len(alone_rows), -1)])
    kid = launch["kid"][rows]
    order = np.lexsort((kname, style, rname, tid, pid))
    keys = np.stack([pid, tid, rname, style, kname])[:, order]
    new = np.ones(len(order), bool)
    new[1:] = (keys[:, 1:] != keys[:, :-1]).any(axis=0)
    group = np.empty(len(order), np.int64)
    group[order] = np.cumsum(new) - 1
    n_groups = int(new.sum())
    stats = _segment_stats(group, launch["kdur"][rows], n_groups)
    inst = _distinct(group[:n_m], rid[:n_m], n_groups)
    kern = _distinct(group, kid, n_groups)
    heads = order[new]
    sorted_names = sorted(set(rnames))
    sorted_k = sorted(set(knames))
    out_rows: list[list[Any]] = []
    for gi, h in enumerate(heads.tolist()):
        total, count, mean, median, vmin, vmax, std = stats[gi]
        rn = None if int(rname[h]) == len(rnames) else sorted_names[int(rname[h])]
        p = None if int(pid[h]) == big else int(pid[h])
        t = None if int(tid[h]) == big else int(tid[h])
        out_rows.append([rn, ("PushPop", "StartEnd", None)[int(style[h])], p, t, int(inst[gi]),
                         int(kern[gi]), total, mean, median, vmin, vmax, std, sorted_k[int(kname[h])]])
    # By range (none as ""), then process and thread (none first), then total time descending;
    # Python's sort is stable, so the group order breaks the remaining ties (as pandas' does).
    out_rows.sort(key=lambda r: (r[0] or "", r[2] is not None, r[2] or 0, r[3] is not None, r[3] or 0,
                                 -r[6]))
    return SummaryTable("nvtx_kern_sum", [list(c) for c in zip(*out_rows, strict=True)])


def _ranks(labels: list[str]) -> npt.NDArray[np.int64]:
    """Each label's rank among the distinct labels sorted (equal labels share a rank)."""
    import numpy as np

    rank = {s: i for i, s in enumerate(sorted(set(labels)))}
    return np.array([rank[s] for s in labels], dtype=np.int64)


def _distinct(group: npt.NDArray[np.int64], values: npt.NDArray[np.int64], n_groups: int,
              ) -> npt.NDArray[np.int64]:
    """Distinct non-negative ``values`` per group (pandas' nunique: a missing one not counted)."""
    import numpy as np

    ok = values >= 0
    v = values[ok]
    if len(v) and (int(v.max()) >= 1 << 40 or n_groups >= 1 << 22):  # pragma: no cover - huge ids
        pairs = np.unique(np.stack([group[ok], v]), axis=1)
        return np.bincount(pairs[0], minlength=n_groups).astype(np.int64)
    keys = distinct((group[ok] << 40) | v)
    return np.bincount(keys >> 40, minlength=n_groups).astype(np.int64)


_STYLE_WHERE = {"nvtx_pushpop_sum": "eventType IN (59, 70)", "nvtx_startend_sum": "eventType IN (60, 71)"}


def style_sum_table(trace: NsysSqliteTrace, report: str) -> SummaryTable | None:
    """``nvtx_pushpop_sum`` / ``nvtx_startend_sum`` without pandas (None: the general path).

    The ranges of that style that ended, grouped by ``domain:text`` name: numpy segment
    statistics of their durations, most total time first, ties by name.
    """
    import sqlite3

    from engine.analysis.nsys.stats.fast import _grouped, _time_rows

    if not trace.has_sqlite_table(_NVTX):
        return None
    if not {"start", "end", "eventType"} <= set(trace.column_names(_NVTX)):
        return None
    where = _STYLE_WHERE[report] + ' AND "end" IS NOT NULL'
    try:
        extra, texts = name_exprs(trace, where)
        cols = trace.column_store().read_where(_NVTX, {"duration": '"end" - "start"', **extra}, where)
        if has_null(cols["duration"]):
            return None
        # domains named as the nvtx table names them (textId string first)
        named = (range_names(trace, where, cols, texts, domain_id_first=True)
                 if len(cols["duration"]) else None)
    except sqlite3.Error:
        return None
    if named is None:
        return None
    return _time_rows(_grouped(named[1], named[0], cols["duration"]), report)


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
    where = 'eventType IN (59, 60) AND "end" IS NOT NULL'
    try:
        extra, texts = name_exprs(trace, where)
        if texts is None:
            return None
        cols = trace.column_store().read_where(
            _NVTX, {"duration": '"end" - "start"', "eventType": '"eventType"', **extra}, where)
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
