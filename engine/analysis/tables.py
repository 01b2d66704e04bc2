"""Keys and caches every analysis table shares: process keys as text, joins on integer keys.

``pid_keys`` turns process (GPU, stream) ids of any table into the same text, ``corr_keys``
correlation ids into int64, ``match_first`` joins two tables on (key, id) pairs with numpy,
``factorize_rows`` numbers distinct tuples, and ``trace_cache`` keeps what is derived from a
trace for as long as the trace lives. Re-exported by :mod:`engine.analysis.steps`.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.system.arrays import distinct

if TYPE_CHECKING:
    import numpy.typing as npt

    from engine.reports.base import Trace


def _text(v: Any) -> str:
    if v is None or (isinstance(v, (float, np.floating)) and np.isnan(v)):
        return ""
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def unique_first(values: npt.NDArray[Any]
                 ) -> tuple[npt.NDArray[Any], npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """(distinct values sorted, index of each one's first row, rows per value) of a 1-D array.

    What ``np.unique(values, return_index=True, return_counts=True)`` gives (a stable sort), without
    its first call importing ``numpy.ma`` (~10 ms of every command's start-up). No NaN handling.
    """
    v = np.asarray(values).ravel()
    if not len(v):
        empty = np.zeros(0, dtype=np.intp)
        return v[:0], empty, empty
    order = np.argsort(v, kind="stable")
    vs = v[order]
    new = np.empty(len(vs), dtype=bool)
    new[0] = True
    np.not_equal(vs[1:], vs[:-1], out=new[1:])
    at = np.flatnonzero(new)
    counts = np.diff(np.append(at, len(vs)))
    return vs[at], order[at], counts


def small_codes(values: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64]]:
    """Codes (int16, or int32 past 32767 values) of non-negative integers in order of first appearance.

    Returns the codes and the distinct values.

    What ``pd.factorize`` gives for a column with few distinct values, without hashing every row:
    one ``bincount`` when the values are small, else a sort; the first appearances are
    found in growing prefixes (4k rows, then 4x more each time up to a million: the first few
    thousand rows usually hold them all).
    """
    v = np.asarray(values)
    if not len(v):
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64)
    hi = int(v.max())
    if int(v.min()) == hi:  # one value (one process, thread, GPU or stream): no counting
        return np.zeros(len(v), dtype=np.int16), np.array([hi], dtype=np.int64)
    if hi < 1 << 25:
        present = np.flatnonzero(np.bincount(v, minlength=hi + 1))
    else:
        present = unique_first(v)[0]
    k = len(present)
    first = np.full(k, len(v), dtype=np.int64)
    found = 0
    lo, step = 0, 1 << 12  # growing prefixes: a few distinct values all appear early
    while lo < len(v):
        u, idx, _ = unique_first(v[lo:lo + step])
        pos = np.searchsorted(present, u)
        new = first[pos] == len(v)
        first[pos[new]] = idx[new] + lo
        found += int(new.sum())
        if found == k:
            break
        lo, step = lo + step, min(step * 4, 1 << 20)
    order = np.argsort(first, kind="stable")  # code -> value, first appearance first
    uniq = present[order]
    # int16 codes when they fit (a 20M-row column: 40 MB instead of 80)
    dt: Any = np.int16 if k < 1 << 15 else np.int32
    rank = np.empty(k, dtype=dt)
    rank[order] = np.arange(k, dtype=dt)
    if hi < 1 << 25:
        lut = np.zeros(hi + 1, dtype=dt)
        lut[present] = rank
        codes = lut[v]
    else:
        codes = rank[np.searchsorted(present, v)]
    return codes, uniq.astype(np.int64)


def pid_keys(values: Any) -> npt.NDArray[Any]:
    """A process id as text, so ints, floats and strings from different tables compare equal.

    Vectorised: each distinct value is converted once (a column of millions has a few pids).
    A numeric numpy column (an nsys export's) is coded with numpy; other columns with pandas.
    """
    v = values if isinstance(values, np.ndarray) else None
    if v is not None and v.dtype.kind in "iuf" and v.ndim == 1:
        return _numeric_pid_keys(v)
    import pandas as pd

    codes, uniques = pd.factorize(pd.Series(values, copy=False), use_na_sentinel=True)
    table = np.array([_text(u) for u in uniques] + [""], dtype=object)
    out: npt.NDArray[Any] = table[codes]  # code -1 (missing) picks the trailing ""
    return out


def _numeric_pid_keys(v: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """:func:`pid_keys` of a numeric column (NaN: "") without pandas."""
    codes, labels = pid_codes(v)
    out: npt.NDArray[Any] = np.array(labels + [""], dtype=object)[codes]
    return out


def pid_codes(v: npt.NDArray[Any]) -> tuple[npt.NDArray[np.int64], list[str]]:
    """Codes of a numeric column's values and their :func:`pid_keys` texts (NaN: ""), without pandas."""
    if not len(v):
        return np.zeros(0, dtype=np.int64), []
    if v.dtype.kind in "iu" and int(v.min()) >= 0 and int(v.max()) < 1 << 25:
        codes, uniq = small_codes(v)
        return codes.astype(np.int64), [_text(u) for u in uniq.tolist()]
    nan = np.isnan(v) if v.dtype.kind == "f" else None
    if nan is not None and nan.any():
        uniq, inv = np.unique(v[~nan], return_inverse=True)
        codes = np.full(len(v), len(uniq), dtype=np.int64)
        codes[~nan] = inv
        return codes, [_text(u) for u in uniq] + [""]
    uniq, inv = np.unique(v, return_inverse=True)
    return inv.astype(np.int64).reshape(-1), [_text(u) for u in uniq]


def pid_key(value: Any) -> str:
    """One process id as text (what :func:`pid_keys` gives for it)."""
    return _text(value)


#: small tables of an nsys export read without pandas by :func:`table_records`
_SMALL_TABLES = frozenset({"gpus", "processes"})


def table_records(trace: Trace, name: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of a small table (``gpus``, ``processes``) as dicts: ``table(name).to_dict("records")``.

    For an nsys export the rows come from SQLite without pandas, each column typed as pandas
    infers it from the rows (ints; floats with NaN for NULL when a number column has NULLs;
    strings with NaN for NULL; None where a column is all NULL); other traces, and columns of
    mixed types, go through the table.
    """
    from engine.reports.base import TABLES

    want = list(TABLES[name][0]) if columns is None else list(columns)
    if name in _SMALL_TABLES and not trace.has(name):
        return []  # not captured: no rows (as the table, without building one)
    rows = trace.stored_rows(name, want, limit=20000) if name in _SMALL_TABLES else None
    if rows is not None:
        typed = [_as_inferred(list(col)) for col in zip(*rows, strict=True)] if rows else []
        if len(rows) < 20000 and all(c is not None for c in typed):
            return [dict(zip(want, r, strict=True)) for r in zip(*typed, strict=True)] if rows else []
    df = trace.table(name, want)
    return [{str(k): v for k, v in row.items()} for row in df.to_dict("records")]


def _as_inferred(col: list[Any]) -> list[Any] | None:
    """A column of SQLite values as pandas' ``from_records`` + ``to_dict`` gives them; None: unsure."""
    known = [x for x in col if x is not None]
    if not known:
        return col
    if any(isinstance(x, bool) for x in known):
        return None
    nulls = len(known) < len(col)
    if all(isinstance(x, int) for x in known):
        if not nulls:
            return col
        if max(abs(x) for x in known) >= 2**53:
            return None
        return [float("nan") if x is None else float(x) for x in col]
    if all(isinstance(x, (int, float)) for x in known):
        return [float("nan") if x is None else float(x) for x in col]
    if all(isinstance(x, str) for x in known):
        return [float("nan") if x is None else x for x in col]
    return None


def pandas_order(values: npt.NDArray[Any], *, ascending: bool = True) -> npt.NDArray[np.intp]:
    """The order ``sort_values`` gives a column without NaN (its quicksort, ties as pandas leaves them)."""
    v = np.asarray(values)
    idx = np.arange(len(v))
    if ascending:
        out: npt.NDArray[np.intp] = idx[v.argsort(kind="quicksort")]
        return out
    out = idx[::-1][v[::-1].argsort(kind="quicksort")][::-1]
    return out


def corr_keys(values: Any) -> npt.NDArray[np.int64]:
    """Correlation ids as int64 (-1 when missing or not a number), whatever dtype a table has."""
    import pandas as pd

    num = pd.to_numeric(pd.Series(values, copy=False), errors="coerce")
    out: npt.NDArray[np.int64] = num.fillna(-1).to_numpy(dtype=np.float64).astype(np.int64)
    return out


def factorize_rows(*columns: npt.NDArray[Any]) -> tuple[npt.NDArray[np.intp], list[tuple[Any, ...]]]:
    """Codes of each row's tuple of values, and the distinct tuples in order of first appearance.

    What ``pd.factorize(pd.MultiIndex.from_arrays(columns))`` gives, for a fraction of its cost:
    each column factorized alone (missing values kept as values), the codes packed into one int.
    """
    import pandas as pd

    n = len(columns[0])
    packed = np.zeros(n, dtype=np.int64)
    levels = []
    for col in columns:
        c, u = pd.factorize(col, use_na_sentinel=False)
        packed = packed * max(len(u), 1) + c
        levels.append((np.asarray(u, dtype=object), max(len(u), 1)))
    codes, uniq = pd.factorize(packed)
    parts: list[npt.NDArray[Any]] = []
    rest = np.asarray(uniq, dtype=np.int64)
    for u, size in reversed(levels):
        parts.append(u[rest % size] if len(u) else np.full(len(rest), None, dtype=object))
        rest = rest // size
    return codes, list(zip(*reversed(parts), strict=True))


def match_first(left: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
                right: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    """For each row of ``left`` (two int key columns), the first ``right`` row with the same keys, or -1.

    The rows a pandas left merge with ``right.drop_duplicates(keys)`` gives, in numpy: the two keys
    packed into one int64, the right side's first rows found with a stable sort and searchsorted
    (or, for keys dense enough, in a table addressed by key: no sort).
    """
    return match_first_counted(left, right)[0]


def match_first_counted(left: tuple[npt.NDArray[Any], npt.NDArray[Any]],
                        right: tuple[npt.NDArray[Any], npt.NDArray[Any]]
                        ) -> tuple[npt.NDArray[np.int64], int]:
    """:func:`match_first`, and how many distinct keys ``right`` has (fewer than its rows: duplicates)."""
    lp, lc, rp, rc = (np.asarray(k) for k in (*left, *right))  # int64 only a chunk at a time
    if not len(lp) or not len(rp):
        return np.full(len(lp), -1, dtype=np.int64), -1
    if len(rp) >= _RISING_MIN_ROWS and _rising(rp, rc) and (
            max(int(lp.max()), int(rp[-1])) - min(int(lp.min()), int(rp[0])) < 1 << 16):
        # every right key once, in key order (CUPTI's calls): searched a chunk at a time in each
        # process's run, no table addressed by key (a 69M-call report: ~0.5 GB) nor packed keys,
        # and no pass over the (mapped) right columns for their extremes
        return _match_rising(lp, lc, rp, rc), len(rp)
    out = np.full(len(lp), -1, dtype=np.int64)
    cmin = min(int(lc.min()), int(rc.min()))
    span = max(int(lc.max()), int(rc.max())) - cmin + 1
    pmin = min(int(lp.min()), int(rp.min()))
    pmax = max(int(lp.max()), int(rp.max()))
    if (pmax - pmin + 1) * span >= 1 << 62:  # keys too wide to pack: pandas does it
        import pandas as pd

        r = pd.DataFrame({"p": rp, "c": rc, "i": np.arange(len(rp))}).drop_duplicates(["p", "c"])
        j = pd.DataFrame({"p": lp, "c": lc}).merge(r, how="left", on=["p", "c"])
        got = j["i"].notna().to_numpy()
        out[got] = j["i"].to_numpy()[got].astype(np.int64)
        return out, len(r)
    size = (pmax - pmin + 1) * span
    if size <= max(4 * len(rp), 1 << 22) and len(rp) < 2**31 - 1:
        # keys dense enough to address a table directly: the first row per key without a sort,
        # keys packed a chunk at a time (no full-length temporaries)
        n = len(rp)
        first_row = np.full(size, n, dtype=np.int32)
        step = 1 << 21
        for lo in range(0, n, step):
            rk = _packed(rp[lo:lo + step], rc[lo:lo + step], pmin, span, cmin)
            np.minimum.at(first_row, rk, np.arange(lo, lo + len(rk), dtype=np.int32))
        for lo in range(0, len(lp), step):
            rows = first_row[_packed(lp[lo:lo + step], lc[lo:lo + step], pmin, span, cmin)]
            out[lo:lo + step] = np.where(rows < n, rows, -1)
        return out, int((first_row < n).sum())
    rk = _packed(rp, rc, pmin, span, cmin)
    lk = _packed(lp, lc, pmin, span, cmin)
    uniq, first = np.unique(rk, return_index=True)  # first occurrence of each key
    pos = np.minimum(np.searchsorted(uniq, lk), len(uniq) - 1)
    hit = uniq[pos] == lk
    out[hit] = first[pos[hit]]
    return out, len(uniq)


#: right sides of at least this many rows are checked for keys in rising order (then searched by run)
_RISING_MIN_ROWS = 1 << 22
#: rows per chunk of the searches by run
_SEARCH_CHUNK = 1 << 21


def _rising(p: npt.NDArray[Any], c: npt.NDArray[Any]) -> bool:
    """True when the pairs (p, c) rise strictly row by row (sorted by p, then c; no pair twice)."""
    if p.dtype.kind not in "iu" or c.dtype.kind not in "iu":
        return False
    for lo in range(0, len(p), _SEARCH_CHUNK):
        _hand_back(lo)
        ps = _plain(p[lo:lo + _SEARCH_CHUNK + 1]).astype(np.int64)
        cs = _plain(c[lo:lo + _SEARCH_CHUNK + 1])
        dp = ps[1:] - ps[:-1]
        if bool((dp < 0).any()) or not bool(((dp > 0) | (cs[1:] > cs[:-1])).all()):
            return False
    return True


def _match_rising(lp: npt.NDArray[Any], lc: npt.NDArray[Any], rp: npt.NDArray[Any], rc: npt.NDArray[Any]
                  ) -> npt.NDArray[np.int64]:
    """:func:`match_first` where the right keys rise strictly (:func:`_rising`).

    Each ``left`` chunk is searched in the run of right rows of each of its ``p`` values (the rows
    of one ``p`` are contiguous there, their ``c`` sorted).
    """
    out = np.full(len(lp), -1, dtype=np.int64)
    rp, rc = _plain(rp), _plain(rc)
    p_info, c_info = np.iinfo(rp.dtype), np.iinfo(rc.dtype)
    runs: dict[int, tuple[int, int]] = {}

    def run_of(v: int) -> tuple[int, int]:
        if v not in runs:
            if not p_info.min <= v <= p_info.max:
                runs[v] = (0, 0)
            else:
                pv = np.array(v, dtype=rp.dtype)
                runs[v] = (int(np.searchsorted(rp, pv, side="left")),
                           int(np.searchsorted(rp, pv, side="right")))
        return runs[v]

    for lo in range(0, len(lp), _SEARCH_CHUNK):
        _hand_back(lo)
        p, c = np.asarray(lp[lo:lo + _SEARCH_CHUNK]), np.asarray(lc[lo:lo + _SEARCH_CHUNK])
        one = int(p.min()) == int(p.max())
        for v in ([int(p[0])] if one else distinct(p).tolist()):
            a, b = run_of(int(v))
            if a == b:
                continue
            at = None if one else np.flatnonzero(p == v)
            want = c if at is None else c[at]
            w = np.clip(want, c_info.min, c_info.max).astype(rc.dtype, copy=False)
            a, b = narrowed(rc, a, b, w)  # the part of the run the chunk's ids fall in
            if a == b:
                continue
            run = rc[a:b]
            j = np.minimum(np.searchsorted(run, w), b - a - 1)
            hit = run[j] == want
            got = np.flatnonzero(hit) if at is None else at[hit]
            out[got + lo] = j[hit] + a
    return out


def narrowed(col: npt.NDArray[Any], a: int, b: int, keys: npt.NDArray[Any]) -> tuple[int, int]:
    """The rows of ``col[a:b]`` (sorted) that values between ``keys``' least and greatest can be.

    A chunk of a join searches that slice instead of the whole run: a few MB of a 0.5 GB column,
    fewer search steps, each in pages the last one touched.
    """
    if not len(keys):
        return a, a
    run = col[a:b]
    lo = a + int(np.searchsorted(run, keys.min(), side="left"))
    hi = a + int(np.searchsorted(run, keys.max(), side="right"))
    return lo, hi


def _hand_back(lo: int) -> None:
    """After each chunk of a pass: the mapped pages read so far leave this process's resident size.

    (``engine.system.shared_maps.release``; they stay in the OS's cache.) A pass over a 69M-row
    mapped column touches 0.55 GB of its pages faster than the overview's periodic hand-back.
    """
    if lo:
        from engine.system.shared_maps import release

        release()


def _packed(p: npt.NDArray[Any], c: npt.NDArray[Any], pmin: int, span: int, cmin: int
            ) -> npt.NDArray[np.int64]:
    """(p - pmin) * span + (c - cmin) as int64."""
    k = p.astype(np.int64)
    k -= pmin
    k *= span
    k += c
    k -= cmin
    return k


_MEMO: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def trace_cache(trace: Trace, key: str, make: Any) -> Any:
    """A per-trace cache of derived tables: built once however many rules and views ask.

    The value must not be modified by callers (it is shared); it lives as long as the trace.
    """
    try:
        store = _MEMO.setdefault(trace, {})
    except TypeError:  # not weak-referenceable: no cache
        return make()
    if key not in store:
        store[key] = make()
        # the big arrays of every table kept so far (some are built lazily) leave the heap for
        # file mappings (engine.analysis.file_backed; small reports: nothing is moved)
        from engine.analysis.file_backed import move_to_files

        move_to_files(store, depth=5)
    return store[key]


def move_trace_tables(trace: Trace) -> None:
    """Move the big arrays of every table kept for ``trace`` to file mappings (``file_backed``).

    For the arrays the tables build lazily after their last neighbour was kept (cached properties):
    called between two phases of work (the summary, then the findings).
    """
    from engine.analysis.file_backed import move_to_files

    store = _MEMO.get(trace)
    if store:
        move_to_files(store, depth=5)


def forget_trace(trace: Trace) -> None:
    """Drop the derived tables kept for ``trace`` (:func:`trace_cache`).

    Call it when done with a trace: a kept table that refers to its trace keeps both alive (the cache
    holds its keys weakly, its values not), about 100 MB for a 400k-kernel report.
    """
    _MEMO.pop(trace, None)


def union_sorted(s: np.ndarray, e: np.ndarray, mask: np.ndarray | None = None) -> int:
    """Length of the union of [start, end) intervals already sorted by start (no sort).

    Only the rows where ``mask`` holds, when given. Walked a few million rows at a time with the
    running end carried over, so a 20M-row column costs no full-length temporary.

    The union is the span (last running end - first start) less the gaps: a row starts a gap
    where it begins after every earlier row ended (``s[i] - max(e[:i])`` when positive). That is
    the sum of the merged blocks' lengths, term for term, in four array passes.
    """
    gaps = 0
    first: int | None = None
    run: int | None = None  # the running end carried into the chunk
    for lo in range(0, len(s), UNION_CHUNK):
        ss, es = _plain(s[lo:lo + UNION_CHUNK]), _plain(e[lo:lo + UNION_CHUNK])
        if mask is not None:
            m = mask[lo:lo + UNION_CHUNK]
            ss, es = ss[m], es[m]
        if not len(ss):
            continue
        run_end = np.maximum.accumulate(es)
        if run is None:
            first = int(ss[0])
        else:
            np.maximum(run_end, run, out=run_end)
            gaps += max(int(ss[0]) - run, 0)
        g = ss[1:] - run_end[:-1]
        np.maximum(g, 0, out=g)
        gaps += int(g.sum())
        run = int(run_end[-1])
    if run is None or first is None:
        return 0
    return run - first - gaps


def disjoint_sorted(s: np.ndarray, e: np.ndarray) -> bool:
    """True when intervals sorted by start neither overlap nor end before they start.

    Then the union of any subset of them is the sum of its durations (no union needed).
    """
    for lo in range(0, len(s), UNION_CHUNK):
        ss, es = _plain(s[lo:lo + UNION_CHUNK + 1]), _plain(e[lo:lo + UNION_CHUNK + 1])
        if not (bool((es >= ss).all()) and bool((ss[1:] >= es[:-1]).all())):
            return False
    return True


def _plain(a: np.ndarray) -> np.ndarray:
    """An array as a plain ndarray view (a memory-mapped column's slices cost a subclass each)."""
    return a.view(np.ndarray) if type(a) is not np.ndarray else a


#: rows per step of the chunked unions
UNION_CHUNK = 1 << 21


def blocks_sorted(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals already sorted by start, as disjoint blocks (starts, ends).

    Walked a few million rows at a time with the open block carried over, as :func:`union_sorted`,
    into buffers of the input's length (views of the blocks found are returned: no second copy).
    """
    n = len(s)
    starts = np.empty(n, dtype=np.int64)
    ends = np.empty(n, dtype=np.int64)
    k = 0  # blocks found
    open_e: int | None = None
    for lo in range(0, n, UNION_CHUNK):
        ss, es = s[lo:lo + UNION_CHUNK], e[lo:lo + UNION_CHUNK]
        run_end = np.maximum.accumulate(es)
        if open_e is not None:
            np.maximum(run_end, open_e, out=run_end)
        new = np.empty(len(ss), dtype=bool)
        new[0] = open_e is None or ss[0] > open_e
        new[1:] = ss[1:] > run_end[:-1]
        idx = np.flatnonzero(new)
        if len(idx):
            if open_e is not None:  # the block carried in ends before idx[0]
                ends[k - 1] = run_end[idx[0] - 1] if idx[0] > 0 else open_e
            starts[k:k + len(idx)] = ss[idx]
            ends[k:k + len(idx) - 1] = run_end[idx[1:] - 1]
            k += len(idx)
        open_e = int(run_end[-1])
    if open_e is not None:
        ends[k - 1] = open_e
    return starts[:k], ends[:k]
