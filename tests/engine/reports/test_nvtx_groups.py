"""NVTX rows grouped from the pages' text hashes give SQLite's groups, row for row (issue 26).

On every fixture and H100 recording, and on an export with many names (past the 64 that SQLite's
path codes with a CASE), a reordered table (rowid gaps) and a changed row: the groups read from the
pages (``nvtx_groups.grouped``) against the groups SQLite makes of the same rows
(``nvtx_ranges._grouped_codes``), for every filter the engine names.
"""

from __future__ import annotations

import lzma
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from engine.reports import open_report
from engine.reports.nsys import nvtx_ranges, schema
from engine.reports.nsys.nvtx_groups import grouped
from engine.reports.trace_columns import FILTERS
from tests.conftest import NSYS_SQLITE, REPO

RECORDINGS = sorted((REPO / "tests" / "data" / "recordings" / "nsys").glob("*/*.sqlite.xz"))
COLS = ('"domainId"', '"textId"', '"text"')


def _rows_of(trace: object, where: object) -> list[tuple[object, ...]]:
    got = grouped(trace, where)  # type: ignore[arg-type]
    assert got is not None
    code, groups = got
    return [groups[c] for c in code.tolist()]


def _sql_rows_of(trace: object, where: object) -> list[tuple[object, ...]]:
    cond = schema.where_sql("nvtx", where, set(trace.column_names(schema.NVTX))) if where else "1"  # type: ignore[attr-defined]
    code, groups = nvtx_ranges._grouped_codes(trace, schema.NVTX, cond, COLS)  # type: ignore[misc,arg-type]
    return [tuple(groups[c][:3]) for c in code.tolist()]


def _check(db: Path) -> int:
    trace = open_report(db)
    if not trace.has_sqlite_table(schema.NVTX):
        return 0
    n = 0
    for where in [None, *FILTERS["nvtx"].values()]:
        got, want = _rows_of(trace, where), _sql_rows_of(trace, where)
        assert got == want
        if len(set(want)) <= nvtx_ranges._FEW_GROUPS:  # SQLite's DISTINCT order: first seen first
            code, groups = grouped(trace, where)  # type: ignore[misc]
            assert groups == list(dict.fromkeys(want))
            assert np.array_equal(code, np.array([groups.index(g) for g in want], dtype=np.int64))
        n += len(got)
    return n


@pytest.mark.parametrize("db", NSYS_SQLITE, ids=lambda p: p.stem)
def test_fixtures(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    _check(db)


@pytest.mark.parametrize("xz", RECORDINGS, ids=lambda p: p.name.split(".")[0])
def test_recordings(xz: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    db = tmp_path / xz.name[: -len(".xz")]
    db.write_bytes(lzma.decompress(xz.read_bytes()))
    assert _check(db) > 0


def _many_names(tmp_path: Path) -> Path:
    """The multistream recording with 300 names (some long, some registered) and rowid gaps."""
    src = REPO / "tests/data/recordings/nsys/multistream/multistream.sqlite.xz"
    db = tmp_path / "many.sqlite"
    with lzma.open(src) as f, db.open("wb") as g:
        shutil.copyfileobj(f, g)
    con = sqlite3.connect(db)
    for _double in range(6):  # more ranges (copies of the recorded ones), to name 300 ways
        con.execute(f"INSERT INTO {schema.NVTX} SELECT * FROM {schema.NVTX} "
                    f"WHERE eventType = {schema.NVTX_PUSH_POP}")
    con.execute(f"UPDATE {schema.NVTX} SET text = 'name ' || (rowid % 300) || "
                f"CASE WHEN rowid % 5 = 0 THEN ' ' || hex(zeroblob(400)) ELSE '' END "
                f"WHERE eventType = {schema.NVTX_PUSH_POP} AND text IS NOT NULL")
    con.execute(f"DELETE FROM {schema.NVTX} WHERE rowid % 11 = 4 AND eventType = {schema.NVTX_PUSH_POP}")
    con.commit()
    con.close()
    return db


def test_many_names_long_names_and_rowid_gaps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    db = _many_names(tmp_path)
    assert _check(db) > 0
    trace = open_report(db)
    code, groups = grouped(trace, FILTERS["nvtx"]["ranges"])  # type: ignore[misc]
    assert len(groups) > nvtx_ranges._FEW_GROUPS
    assert any(len(str(g[2])) > 512 for g in groups)  # read back in full, hashed in the wide pass


def test_a_row_changed_after_its_hash_was_cached_is_noticed(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The group read back from SQLite must hash to the cached hash: else None (SQLite groups)."""
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    db = _many_names(tmp_path)
    trace = open_report(db)
    assert grouped(trace, None) is not None
    con = sqlite3.connect(db)
    (first,), = con.execute(f"SELECT min(rowid) FROM {schema.NVTX} WHERE text IS NOT NULL").fetchall()
    con.execute(f"UPDATE {schema.NVTX} SET text = 'changed' WHERE rowid = ?", (first,))
    con.commit()
    con.close()
    assert grouped(trace, None) is None  # the same trace object, its cache made before the change
