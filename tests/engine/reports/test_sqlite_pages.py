"""The SQLite page reader (engine/reports/nsys/pages.py) against SQLite itself.

Every integer column of every table of every nsys export we hold (NVIDIA's fixtures and our own
H100 recordings) is read both ways and must be equal value for value; then the format's corners,
each built with SQLite: NULLs, every integer width, the constants 0/1, rows written before a column
was added, long texts before a wanted column, cells over a page (overflow), REAL values, WITHOUT
ROWID and INTEGER PRIMARY KEY tables, other page sizes, deep B-trees, deleted rows and a WAL.
"""

from __future__ import annotations

import lzma
import os
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from engine.reports.nsys import columns
from engine.reports.nsys.columns import NULL, ColumnStore
from engine.reports.nsys.page_exprs import text_hash
from engine.reports.nsys.pages import Unsupported, count_rows, parse_expr, read_columns
from tests.conftest import NSYS_DIR

REPO = Path(__file__).resolve().parents[3]
RECORDINGS = sorted((REPO / "tests" / "data" / "recordings" / "nsys").rglob("*.sqlite.xz"))
SHARED = sorted(NSYS_DIR.glob("*.sqlite"))
#: tables whose integer columns must be read from the pages (the ones the commands read)
MUST = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"}


def _sql(db: Path, table: str, exprs: dict[str, str]) -> dict[str, list[int]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        sel = ", ".join(f"coalesce({e}, {NULL})" for e in exprs.values())
        rows = con.execute(f'SELECT {sel} FROM "{table}" ORDER BY rowid').fetchall()
    finally:
        con.close()
    return {n: [r[i] for r in rows] for i, n in enumerate(exprs)}


def _int_columns(db: Path) -> dict[str, list[str]]:
    """table -> its columns that hold only integers or NULL (asked of SQLite, not the schema)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        out = {}
        for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                "AND sql NOT LIKE '%WITHOUT ROWID%'").fetchall():
            cols = []
            for _cid, name, typ, _nn, _d, pk in con.execute(f'PRAGMA table_info("{t}")').fetchall():
                if pk and typ.upper() == "INTEGER":
                    continue  # the rowid alias
                bad = con.execute(f'SELECT count(*) FROM "{t}" WHERE typeof("{name}") '
                                  "NOT IN ('integer', 'null')").fetchone()[0]
                if not bad:
                    cols.append(name)
            if cols:
                out[t] = cols
        return out
    finally:
        con.close()


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("exports")
    out = list(SHARED)
    for xz in RECORDINGS:
        dst = d / f"{xz.parent.name}_{xz.name[:-3]}"
        with lzma.open(xz) as src, dst.open("wb") as f:
            shutil.copyfileobj(src, f)
        out.append(dst)
    return out


def test_every_integer_column_of_every_export_equals_sqlite(exports: list[Path]) -> None:
    assert len(exports) >= 12
    checked = 0
    for db in exports:
        for table, cols in _int_columns(db).items():
            exprs = {c: f'"{c}"' for c in cols}
            got = read_columns(db, table, exprs, NULL)
            if got is None:
                assert table not in MUST, f"{db.name}: {table} not read from its pages"
                continue
            want = _sql(db, table, exprs)
            for c in cols:
                assert got[c].dtype == np.int64
                assert got[c].tolist() == want[c], f"{db.name} {table}.{c}"
                checked += 1
    assert checked > 500


def test_row_counts_from_the_leaf_pages_equal_sqlite(exports: list[Path], tmp_path: Path) -> None:
    for db in exports:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = "
                                                "'table' AND sql NOT LIKE '%WITHOUT ROWID%'")]
            for t in tables:
                want = con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
                assert count_rows(db, t) == want, (db.name, t)
        finally:
            con.close()
        store = ColumnStore(db, tmp_path / db.name)
        assert store.row_count("CUPTI_ACTIVITY_KIND_RUNTIME") == _count(db, "CUPTI_ACTIVITY_KIND_RUNTIME")
    assert count_rows(tmp_path / "absent.sqlite", "T") is None


def _count(db: Path, table: str) -> int:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
    finally:
        con.close()


def test_expressions_of_real_columns(exports: list[Path]) -> None:
    exprs = {"dur": '"end" - "start"', "tid": '"globalTid" % 16777216',
             "pid": '"globalTid" / 16777216 % 16777216', "name": '"nameId"'}
    for db in exports:
        got = read_columns(db, "CUPTI_ACTIVITY_KIND_RUNTIME", exprs, NULL)
        assert got is not None
        want = _sql(db, "CUPTI_ACTIVITY_KIND_RUNTIME", exprs)
        assert all(got[n].tolist() == want[n] for n in exprs), db.name
        # the timeline's kernel columns (its name is the first of two name ids that is set)
        kexprs = {"name": 'coalesce("demangledName", "shortName")', "dev": '"deviceId"',
                  "none": "NULL", "dur": '"end" - "start"'}
        if "CUPTI_ACTIVITY_KIND_KERNEL" not in _int_columns(db):
            continue  # (the legacy cut has no kernels)
        got = read_columns(db, "CUPTI_ACTIVITY_KIND_KERNEL", kexprs, NULL)
        assert got is not None, db.name
        want = _sql(db, "CUPTI_ACTIVITY_KIND_KERNEL", kexprs)
        assert all(got[n].tolist() == want[n] for n in kexprs), db.name


def _make(tmp_path: Path, name: str, ddl: str, rows: list[tuple[object, ...]],
          page_size: int = 4096, then: list[str] | None = None) -> Path:
    db = tmp_path / name
    con = sqlite3.connect(db)
    con.execute(f"PRAGMA page_size = {page_size}")
    con.execute(ddl)
    marks = ",".join("?" * len(rows[0])) if rows else ""
    if rows:
        con.executemany(f"INSERT INTO T VALUES ({marks})", rows)
    for stmt in then or []:
        con.execute(stmt)
    con.commit()
    con.close()
    return db


WIDTHS = [0, 1, -1, 127, 128, -128, -129, 255, 32767, -32768, 32768, 2**23 - 1, -(2**23), 2**23,
          2**31 - 1, -(2**31), 2**31, 2**47 - 1, -(2**47), 2**47, 2**63 - 1, -(2**63)]


@pytest.mark.parametrize("page_size", [512, 4096, 65536])
def test_every_integer_width_nulls_and_constants(tmp_path: Path, page_size: int) -> None:
    rng = np.random.default_rng(7)
    rows: list[tuple[object, ...]] = []
    for i in range(20000):  # several B-tree levels at 512-byte pages
        a = WIDTHS[i % len(WIDTHS)]
        b = None if i % 13 == 0 else int(rng.integers(-(2**40), 2**40))
        rows.append((a, b, i % 2, None if i % 5 else i))
    db = _make(tmp_path, "w.sqlite", "CREATE TABLE T (a INTEGER, b INTEGER, c INTEGER, d INTEGER)",
               rows, page_size)
    exprs = {"a": '"a"', "b": '"b"', "c": '"c"', "d": '"d"', "cb": '"c" - "b"', "none": "NULL",
             "co": 'coalesce("d", "b", "a")', "co2": 'coalesce("b", NULL)', "co3": 'coalesce(NULL, "d")',
             "m": '"b" % 1000', "dm": '"b" / 65536 % 4096'}
    got = read_columns(db, "T", exprs, NULL)
    assert got is not None
    want = _sql(db, "T", exprs)
    for n in exprs:
        assert got[n].tolist() == want[n], n
    # a difference that overflows 64 bits is a REAL in SQLite: not ours to read
    assert read_columns(db, "T", {"ab": '"a" - "b"'}, NULL) is None


def test_rows_written_before_a_column_was_added_and_deleted_rows(tmp_path: Path) -> None:
    db = _make(tmp_path, "alter.sqlite", "CREATE TABLE T (a INTEGER, b INTEGER)",
               [(i, i * 3) for i in range(3000)],
               then=["ALTER TABLE T ADD COLUMN c INTEGER", "DELETE FROM T WHERE a % 7 = 0",
                     "INSERT INTO T VALUES (-5, -6, -7)", "UPDATE T SET c = a WHERE a % 11 = 0"])
    exprs = {"a": '"a"', "b": '"b"', "c": '"c"'}
    got = read_columns(db, "T", exprs, NULL)
    assert got is not None
    assert {n: v.tolist() for n, v in got.items()} == _sql(db, "T", exprs)


def test_long_texts_before_a_wanted_column_and_wide_cells(tmp_path: Path) -> None:
    rows = [(i, "x" * (i % 900), i * 7) for i in range(2000)]  # texts of 0-899 bytes: 2-byte types
    db = _make(tmp_path, "text.sqlite", "CREATE TABLE T (a INTEGER, s TEXT, b INTEGER)", rows)
    exprs = {"a": '"a"', "b": '"b"'}
    got = read_columns(db, "T", exprs, NULL)
    assert got is not None and {n: v.tolist() for n, v in got.items()} == _sql(db, "T", exprs)
    assert read_columns(db, "T", {"s": '"s"'}, NULL) is None  # a TEXT column: SQLite's to read


@pytest.mark.parametrize("case", ["overflow", "real", "without_rowid", "rowid_alias", "wal"])
def test_what_it_does_not_read_goes_back_to_sqlite(tmp_path: Path, case: str) -> None:
    ddl, rows, then = "CREATE TABLE T (a INTEGER, s TEXT)", [(1, "x" * 10_000), (2, "y")], []
    if case == "real":
        rows = [(1, "a"), (2.5, "b")]
    elif case == "without_rowid":
        ddl, rows = "CREATE TABLE T (a INTEGER PRIMARY KEY, s TEXT) WITHOUT ROWID", [(1, "a")]
    elif case == "rowid_alias":
        ddl, rows = "CREATE TABLE T (a INTEGER PRIMARY KEY, s TEXT)", [(1, "a"), (9, "b")]
    elif case == "wal":
        rows = [(1, "a")]
    db = _make(tmp_path, f"{case}.sqlite", ddl, rows, then=then)
    keep = None
    if case == "wal":  # an open writer keeps its pages in the -wal file, not in the database
        keep = sqlite3.connect(db)
        keep.execute("PRAGMA journal_mode = wal")
        keep.execute("PRAGMA wal_autocheckpoint = 0")
        keep.execute("INSERT INTO T VALUES (5, 'z')")
        keep.commit()
    try:
        assert read_columns(db, "T", {"a": '"a"'}, NULL) is None
        # the column store falls back to SQLite and gives what SQLite gives
        if case in ("rowid_alias", "wal", "overflow"):  # (the SQL path needs a rowid too)
            got = ColumnStore(db, tmp_path / "cols").read("T", {"a": '"a"'})
            assert got["a"].tolist() == _sql(db, "T", {"a": '"a"'})["a"]
    finally:
        if keep is not None:
            keep.close()


def test_unsupported_expressions_and_missing_tables(tmp_path: Path) -> None:
    for e in ['"a" + "b"', 'CASE WHEN "a" IS NULL THEN 1 END', '"a" % 0', "rowid + 1", "coalesce()",
              'coalesce("a", 3)', 'texthash(3)', 'texthash("a", 2)']:
        with pytest.raises(Unsupported):
            parse_expr(e)
    db = _make(tmp_path, "m.sqlite", "CREATE TABLE T (a INTEGER)", [(1,)])
    assert read_columns(db, "NOPE", {"a": '"a"'}, NULL) is None
    assert read_columns(db, "T", {"x": '"x"'}, NULL) is None
    assert read_columns(tmp_path / "absent.sqlite", "T", {"a": '"a"'}, NULL) is None
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"SQLite format 3\x00" + bytes(50))
    assert read_columns(junk, "T", {"a": '"a"'}, NULL) is None
    empty = _make(tmp_path, "e.sqlite", "CREATE TABLE T (a INTEGER)", [])
    got = read_columns(empty, "T", {"a": '"a"'}, NULL)
    assert got is not None and len(got["a"]) == 0


def test_column_store_gives_the_same_arrays_either_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = NSYS_DIR / "torch_sdpa_gemm.sqlite"
    exprs = {"duration": '"end" - "start"', "nameId": '"nameId"', "tid": '"globalTid"'}
    pages = ColumnStore(db, tmp_path / "a").read("CUPTI_ACTIVITY_KIND_RUNTIME", exprs,
                                                 frozenset({"nameId"}))
    monkeypatch.setenv("KERNELSCOPE_SQLITE_PAGES", "0")
    monkeypatch.setattr(columns, "CHUNK_ROWS", 97)
    sql = ColumnStore(db, tmp_path / "b").read("CUPTI_ACTIVITY_KIND_RUNTIME", exprs,
                                               frozenset({"nameId"}))
    for n in exprs:
        assert pages[n].dtype == sql[n].dtype and np.array_equal(pages[n], sql[n]), n
    assert pages["nameId"].dtype == np.int32
    # written into the cache files (NpyFile), renamed into place and mapped; nothing left over
    assert all(isinstance(pages[n], np.memmap) for n in exprs)
    assert not list((tmp_path / "a").rglob("*.tmp"))
    again = ColumnStore(db, tmp_path / "a").cached("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId", '"nameId"')
    assert again is not None and np.array_equal(again, sql["nameId"])


def test_a_narrow_column_with_a_big_value_is_read_again_wide(tmp_path: Path) -> None:
    """A column asked for as int32 whose values do not fit: the files are written again as int64."""
    db = NSYS_DIR / "torch_sdpa_gemm.sqlite"
    exprs = {"start": '"start"', "nameId": '"nameId"'}
    got = ColumnStore(db, tmp_path / "w").read("CUPTI_ACTIVITY_KIND_RUNTIME", exprs,
                                               frozenset({"start", "nameId"}))
    con = sqlite3.connect(db)
    want = np.array(con.execute('SELECT "start" FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY rowid').fetchall(),
                    dtype=np.int64).reshape(-1)
    con.close()
    assert int(want.max()) >= 2**31  # (the case: nanosecond timestamps)
    assert got["start"].dtype == np.int64 and got["nameId"].dtype == np.int64
    assert np.array_equal(got["start"], want)
    assert not list((tmp_path / "w").rglob("*.tmp"))


def test_npy_file_written_by_ranges_from_threads(tmp_path: Path) -> None:
    """NpyFile: disjoint ranges written with pwrite from two threads give the .npy numpy reads."""
    import threading

    from engine.reports.nsys.pages import NpyFile

    want = np.arange(1_000_003, dtype=np.int64) * 7 - 3
    for dtype in (np.int64, np.int32):
        f = NpyFile(tmp_path / f"c{np.dtype(dtype).itemsize}.npy", dtype, len(want))
        cuts = list(range(0, len(want), 65_536)) + [len(want)]
        spans = list(zip(cuts, cuts[1:], strict=False))

        def write(k: int, f: NpyFile = f, spans: list[tuple[int, int]] = spans) -> None:
            for lo, hi in spans[k::2]:
                f[lo:hi] = want[lo:hi]

        threads = [threading.Thread(target=write, args=(k,)) for k in (0, 1)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        f.close()
        f.close()  # (twice: no error)
        got = np.load(f.path, mmap_mode="r")
        assert got.dtype == dtype and np.array_equal(got, want.astype(dtype))
        with pytest.raises(ValueError):
            f[0:2] = want[:2]  # closed
    short = NpyFile(tmp_path / "s.npy", np.int64, 4)
    with pytest.raises(ValueError):
        short[0:4] = want[:3]  # not as many values as rows
    short.close()


@pytest.mark.parametrize("narrow", [frozenset(), frozenset({"nameId", "pid"})])
def test_a_child_process_reads_big_tables_into_the_cache_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, narrow: frozenset[str]) -> None:
    """Above CHILD_LEAVES leaf pages a table is read by a child process (lowered to 0 here): the
    same values and types as in-process, written straight into the cache files and mapped."""
    from engine.reports.nsys import page_child as sqlite_child

    db = NSYS_DIR / "torch_sdpa_gemm.sqlite"
    exprs = {"start": '"start"', "dur": '"end" - "start"', "nameId": '"nameId"',
             "pid": '"globalTid" / 16777216 % 16777216'}
    monkeypatch.setenv("KERNELSCOPE_SQLITE_CHILD", "0")
    here = ColumnStore(db, tmp_path / "here").read("CUPTI_ACTIVITY_KIND_RUNTIME", exprs, narrow)
    monkeypatch.setenv("KERNELSCOPE_SQLITE_CHILD", "always")  # (by default: beside another read)
    monkeypatch.setattr(sqlite_child, "CHILD_LEAVES", 0)
    spawned: list[bool] = []
    real = sqlite_child.read_in_child
    monkeypatch.setattr(sqlite_child, "read_in_child",
                        lambda *a, **k: spawned.append(real(*a, **k)) or spawned[-1])
    store = ColumnStore(db, tmp_path / "child")
    got = store.read("CUPTI_ACTIVITY_KIND_RUNTIME", exprs, narrow)
    assert spawned == [True]
    for n in exprs:
        assert isinstance(got[n], np.memmap) and got[n].dtype == here[n].dtype
        assert np.array_equal(got[n], here[n]), n
    assert not list((tmp_path / "child").rglob("*.tmp"))
    # a table the page reader does not take (a REAL value): the child says so, SQLite reads it
    real_db = _make(tmp_path, "real.sqlite", "CREATE TABLE T (a INTEGER)", [(1,), (2.5,), (3,)])
    spawned.clear()
    with pytest.raises(sqlite3.DatabaseError):  # what the SQL path says of a REAL: not integers
        ColumnStore(real_db, tmp_path / "c2").read("T", {"a": '"a"'})
    assert spawned == [False]


def test_closing_a_reader_while_a_view_of_its_map_lives_never_raises() -> None:
    """A view of the file's map that outlives the reader (say in a traceback's frame) kept
    ``mmap.close`` from closing (``BufferError``, seen once at a row count on big10m): the reader
    closes its file, leaves the map to its last view, and the view reads the file's bytes."""
    from engine.reports.nsys.pages import _Reader

    path = sorted(NSYS_DIR.glob("*.sqlite"))[0]
    reader = _Reader(path, "StringIds")
    view = reader.buf[:16]  # what a frame of an exception kept alive would hold
    fd = reader.fd
    reader.close()  # raised BufferError before
    assert bytes(view) == b"SQLite format 3\x00"
    with pytest.raises(OSError):
        os.fstat(fd)  # the file is closed all the same
    del view
    reader.mm.close()  # no view left: it closes (unmapped at the latest with the reader)
    assert reader.mm.closed
    assert count_rows(path, "StringIds") == sqlite3.connect(path).execute(
        "SELECT count(*) FROM StringIds").fetchone()[0]


def test_rowids_and_text_hashes_are_the_same_from_the_pages_and_from_sqlite(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``rowid`` and ``texthash("col")``: what a range's name is grouped by, without reading it as text.

    Texts short and long (a second, wider pass), UTF-8, blobs, NULLs and rowid gaps; the same
    values through SQLite (its ``texthash`` function) and equal hashes exactly for equal values.
    """
    texts = ["", "x", "step", "ProfilerStep#12", "ProfilerStep#13", "a" * 7, "a" * 8, "a" * 9,
             "ü-unicode", "long " * 300, None, b"blob", b"blob\x00"]
    rows = [(None if i % 11 == 0 else i % 97, texts[(i * 7) % len(texts)], i % 5) for i in range(6000)]
    db = _make(tmp_path, "t.sqlite", "CREATE TABLE T (a INTEGER, text TEXT, b INTEGER)", rows,
               then=["DELETE FROM T WHERE b % 7 = 3"])
    exprs = {"h": 'texthash("text")', "r": "rowid", "a": '"a"', "k": 'texthash("text", "a", "b")'}
    got = read_columns(db, "T", exprs, NULL)
    assert got is not None
    con = sqlite3.connect(db)
    want = con.execute("SELECT rowid, a, text FROM T ORDER BY rowid").fetchall()
    con.close()
    assert got["r"].tolist() == [w[0] for w in want]
    assert got["a"].tolist() == [NULL if w[1] is None else w[1] for w in want]
    assert got["h"].tolist() == [NULL if w[2] is None else text_hash(w[2]) for w in want]
    con = sqlite3.connect(db)
    keyed = con.execute("SELECT a, text, b FROM T ORDER BY rowid").fetchall()
    con.close()
    # the keyed form: one key per (text, a, b), NULLs included, the same as the one-row function
    assert got["k"].tolist() == [text_hash(t, a, b) for a, t, b in keyed]
    assert len(set(got["k"].tolist())) == len(set(keyed))
    by_text: dict[object, set[int]] = {}
    for w, h in zip(want, got["h"].tolist(), strict=True):
        by_text.setdefault(w[2], set()).add(h)
    assert all(len(v) == 1 for v in by_text.values())
    assert len({next(iter(v)) for v in by_text.values()}) == len(by_text) == len(texts)
    monkeypatch.setenv("KERNELSCOPE_SQLITE_PAGES", "0")
    sql = ColumnStore(db, tmp_path / "cols").read("T", exprs)
    assert {k: v.tolist() for k, v in sql.items()} == {k: v.tolist() for k, v in got.items()}
    with pytest.raises(Unsupported):
        text_hash(5)  # SQLite compares numbers as numbers: not this reader's to hash
    assert read_columns(db, "T", {"h": 'texthash("a")'}, NULL) is None
