"""The columnar cache (engine/reports/nsys/columns.py) on real exports and on edge cases of the format."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from engine.reports.nsys import columns
from engine.reports.nsys.columns import NULL, ColumnStore, has_null
from tests.conftest import NSYS_DIR

_EXPRS = {"duration": '"end" - "start"', "nameId": '"nameId"', "corr": '"correlationId"'}


def _direct(db: Path, sql: str) -> list[tuple[int, ...]]:
    con = sqlite3.connect(db)
    try:
        return [tuple(r) for r in con.execute(sql).fetchall()]
    finally:
        con.close()


def test_chunked_threaded_read_equals_sqlite_and_is_mapped_from_the_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = NSYS_DIR / "torch_sdpa_gemm.sqlite"
    want = _direct(db, 'SELECT "end" - "start", nameId, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME '
                       "ORDER BY rowid")
    monkeypatch.setattr(columns, "CHUNK_ROWS", 97)  # many chunks, two threads, a short last one
    store = ColumnStore(db, tmp_path / "cols")
    got = store.read("CUPTI_ACTIVITY_KIND_RUNTIME", _EXPRS, frozenset({"nameId"}))
    assert list(zip(*(got[k].tolist() for k in _EXPRS), strict=True)) == want
    assert got["nameId"].dtype == np.int32 and got["duration"].dtype == np.int64
    again = ColumnStore(db, tmp_path / "cols").read("CUPTI_ACTIVITY_KIND_RUNTIME", _EXPRS)
    assert all(isinstance(a, np.memmap) for a in again.values())
    assert all(np.array_equal(again[k], got[k]) for k in _EXPRS)
    store.close()


def test_sqlite_path_reads_the_columns_in_as_many_scans_as_fit_and_gives_them_mapped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = NSYS_DIR / "torch_sdpa_gemm.sqlite"
    want = _direct(db, 'SELECT "end" - "start", nameId, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME '
                       "ORDER BY rowid")
    monkeypatch.setenv("KERNELSCOPE_SQLITE_PAGES", "0")  # SQLite's path: whole columns in memory
    monkeypatch.setattr(columns, "_SQL_PASS_VALUES", 2 * len(want))  # two columns per scan
    scans: list[int] = []
    read_sql = ColumnStore._read_sql

    def counted(self: ColumnStore, table: str, exprs: dict[str, str], out: dict[str, object],
                narrow: frozenset[str]) -> None:
        scans.append(len(exprs))
        read_sql(self, table, exprs, out, narrow)  # type: ignore[arg-type]

    monkeypatch.setattr(ColumnStore, "_read_sql", counted)
    store = ColumnStore(db, tmp_path / "cols")
    got = store.read("CUPTI_ACTIVITY_KIND_RUNTIME", _EXPRS, frozenset({"nameId"}))
    assert scans == [2, 1]
    assert list(zip(*(got[k].tolist() for k in _EXPRS), strict=True)) == want
    assert all(isinstance(a, np.memmap) for a in got.values())  # each scan's arrays let go of
    assert got["nameId"].dtype == np.int32 and got["duration"].dtype == np.int64
    store.close()


def test_nulls_wide_values_and_empty_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "t.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE T (a INTEGER, b INTEGER)")
    rows = [(i, i % 7) for i in range(1000)] + [(None, 2**40), (5, None)]
    con.executemany("INSERT INTO T VALUES (?, ?)", rows)
    con.execute("CREATE TABLE E (a INTEGER)")
    con.commit()
    con.close()
    monkeypatch.setattr(columns, "CHUNK_ROWS", 64)
    store = ColumnStore(db, tmp_path / "cols")
    got = store.read("T", {"a": '"a"', "b": '"b"'}, frozenset({"b"}))
    assert got["b"].dtype == np.int64  # 2**40 does not fit int32: read wide after all
    assert got["a"][1000] == NULL and got["b"][1001] == NULL
    assert has_null(got["a"]) and not has_null(got["a"][:1000])
    assert got["b"][:1000].tolist() == [i % 7 for i in range(1000)] and got["b"][1000] == 2**40
    assert len(store.read("E", {"a": '"a"'})["a"]) == 0
    with pytest.raises(sqlite3.Error):
        store.read("T", {"x": '"no_such_column"'})


def test_a_changed_export_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache key covers the file's identity: an export written again never reads stale columns."""
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    db = tmp_path / "r.sqlite"
    shutil.copy(NSYS_DIR / "host_overhead_naive.sqlite", db)
    first = ColumnStore(db).read("CUPTI_ACTIVITY_KIND_KERNEL", {"d": '"end" - "start"'})["d"].tolist()
    con = sqlite3.connect(db)
    con.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = "end" + 1000')
    con.commit()
    con.close()
    os.utime(db, ns=(db.stat().st_atime_ns, db.stat().st_mtime_ns + 10**9))
    second = ColumnStore(db).read("CUPTI_ACTIVITY_KIND_KERNEL", {"d": '"end" - "start"'})["d"].tolist()
    assert second == [d + 1000 for d in first]


def test_filtered_read_keeps_only_matching_rows_in_rowid_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = NSYS_DIR / "torch_sdpa_gemm.sqlite"
    table = "CUPTI_ACTIVITY_KIND_RUNTIME"
    where = '"nameId" IN (SELECT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY nameId ' \
            'ORDER BY count(*) LIMIT 3) OR "correlationId" % 5 = 0'
    want = _direct(db, f'SELECT rowid, "end" - "start", nameId FROM {table} WHERE {where} ORDER BY rowid')
    assert 0 < len(want) < _direct(db, f"SELECT count(*) FROM {table}")[0][0]
    monkeypatch.setattr(columns, "CHUNK_ROWS", 97)  # chunks with and without matching rows
    exprs = {"rowid": "rowid", "duration": '"end" - "start"', "nameId": '"nameId"'}
    got = ColumnStore(db, tmp_path / "cols").read_where(table, exprs, where)
    assert list(zip(*(got[k].tolist() for k in exprs), strict=True)) == want
    again = ColumnStore(db, tmp_path / "cols").read_where(table, exprs, where)
    assert all(isinstance(a, np.memmap) for a in again.values())  # cached under its filter
    other = ColumnStore(db, tmp_path / "cols").read_where(table, exprs, '"correlationId" < 0')
    assert all(len(a) == 0 for a in other.values())  # another filter is not the cached one


def test_a_read_of_columns_in_flight_waits_for_that_read(tmp_path: Path) -> None:
    """A prefetch still running (here: queued behind busy workers) serves a later read: one scan."""
    import threading

    db = NSYS_DIR / "torch_sdpa_gemm.sqlite"
    table = "CUPTI_ACTIVITY_KIND_RUNTIME"
    want = _direct(db, 'SELECT "end" - "start", nameId, correlationId, globalTid '
                       f"FROM {table} ORDER BY rowid")
    store = ColumnStore(db, cache_dir=None)  # no cache files: a second read would scan again
    pool = store._executor()
    gate = threading.Event()
    busy = [pool.submit(gate.wait) for _ in range(pool._max_workers)]
    pre = store.prefetch(table, _EXPRS, frozenset({"nameId"}))
    later = store.read_async(table, {"nameId": '"nameId"', "tid": '"globalTid"',
                                     "duration": '"end" - "start"'})
    gate.set()
    for b in busy:
        b.result()
    first, got = pre.result(), later.result()
    assert list(got) == ["nameId", "tid", "duration"]
    assert got["nameId"] is first["nameId"] and got["duration"] is first["duration"]  # not read again
    assert got["nameId"].dtype == np.int32
    rows = list(zip(got["duration"].tolist(), got["nameId"].tolist(), first["corr"].tolist(),
                    got["tid"].tolist(), strict=True))
    assert rows == want
    store.close()
