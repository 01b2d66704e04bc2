"""nvtx_pushpop_trace, nvtx_kern_sum and the style summaries without pandas (issue 16): the
columnar reads, the one-pass tree, the numpy joins and the chunked CSV print the bytes of the
DataFrame path on every fixture, every H100 recording and an export with every case added by hand
(nesting, equal ranges, a range never popped, two threads, a named domain, a StringIds text, a
comma in a name, a kernel launched outside any range, a kernel without a launch call)"""

from __future__ import annotations

import lzma
import shutil
import sqlite3
from pathlib import Path

import pytest

from engine.analysis.nsys.stats import run_report, to_csv
from engine.analysis.nsys.stats.reports import nvtx_kern_sum, nvtx_pushpop_trace, nvtx_style_sums
from engine.reports import open_report
from engine.reports.nsys import nvtx_text_codes as nvtx_names
from tests.conftest import NSYS_SQLITE, REPO

RECORDINGS = sorted((REPO / "tests" / "data" / "recordings" / "nsys").glob("*/*.sqlite.xz"))


def _groups(found: list[tuple[int, str, object]] | None) -> dict[tuple[int, str], list[int]]:
    assert found is not None
    return {(e, n): sorted(d.tolist()) for e, n, d in found}  # type: ignore[attr-defined]


def _same(db: Path) -> int:
    trace = open_report(db)
    # nvtx_sum's groups from the columnar cache equal SQLite's GROUP BY (names, durations); with
    # many distinct texts (here: _FEW_TEXTS lowered) that GROUP BY answers instead
    mine = nvtx_names.nvtx_sum_groups(trace)  # type: ignore[arg-type]
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:  # a capture of many distinct range texts ("train_step 0" .. "train_step 299") is grouped by SQLite
        texts = con.execute("SELECT count(DISTINCT coalesce(e.text, s.value)) FROM NVTX_EVENTS e "
                            "LEFT JOIN StringIds s ON s.id = e.textId").fetchone()[0]
    finally:
        con.close()
    assert mine is not None or nvtx_names._FEW_TEXTS < 64 or texts > nvtx_names._FEW_TEXTS
    if mine is not None:
        assert _groups(mine) == _groups(trace.nvtx_range_groups())  # type: ignore[attr-defined]
    want = to_csv(run_report(trace, "nvtx_pushpop_trace"))
    table = nvtx_pushpop_trace.pushpop_trace_csv(trace)  # type: ignore[arg-type]
    assert table is not None
    pieces = list(table.chunks())
    assert b"".join(pieces).decode() == want
    for report in ("nvtx_pushpop_sum", "nvtx_startend_sum"):
        style = nvtx_style_sums.style_sum_table(trace, report)  # type: ignore[arg-type]
        general = nvtx_style_sums.general_style_sum(trace, report)
        assert (to_csv(style) if style is not None else "") == to_csv(general)
    kern_sum = nvtx_kern_sum.kern_sum_table(trace)  # type: ignore[arg-type]
    want = to_csv(nvtx_kern_sum.kern_sum_frame(trace))
    if not trace.has_sqlite_table("CUPTI_ACTIVITY_KIND_KERNEL"):  # type: ignore[attr-defined]
        assert kern_sum is None and want == ""
    else:
        assert kern_sum is not None and to_csv(kern_sum) == want
    return table.rows


@pytest.mark.parametrize("db", NSYS_SQLITE, ids=lambda p: p.stem)
def test_fixtures(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(nvtx_pushpop_trace, "_CHUNK", 3)
    _same(db)


@pytest.mark.parametrize("xz", RECORDINGS, ids=lambda p: p.name.split(".")[0])
def test_recordings(xz: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    db = tmp_path / xz.name[: -len(".xz")]
    db.write_bytes(lzma.decompress(xz.read_bytes()))
    assert _same(db) > 0


@pytest.mark.parametrize("few_texts", [64, 1], ids=["texts-coded-in-sql", "texts-fetched"])
def test_every_case_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, few_texts: int) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(nvtx_pushpop_trace, "_CHUNK", 4)
    monkeypatch.setattr(nvtx_names, "_FEW_TEXTS", few_texts)
    db = tmp_path / "cases.sqlite"
    shutil.copy(next(p for p in NSYS_SQLITE if p.stem == "host_overhead_naive"), db)
    t1, t2 = 281508900243430, 281508900243431
    rows = [  # start, end, eventType, text, textId, domainId, globalTid
        (10, 100, 59, "outer", None, 0, t1), (20, 50, 59, "a,b", None, 0, t1),
        (20, 50, 59, "twin", None, 0, t1), (25, 30, 59, "leaf", None, 0, t1),
        (60, None, 59, "open", None, 0, t1), (70, 80, 70, None, 900001, 7, t1),
        (15, 40, 59, "other thread", None, 0, t2), (16, 17, 59, "it's", None, 7, t2),
        (1, None, 75, "mydomain", None, 7, t1), (5, 95, 60, "startend", None, 0, t1),
        (2, None, 75, "by text", 900001, 8, t1), (30, 35, 60, "in8", None, 8, t1),
    ]
    with sqlite3.connect(db) as con:
        # A kernel whose launch call starts inside "leaf" of thread 1, one launched by a thread
        # without ranges, one without a launch call (a correlation id no call has).
        con.row_factory = sqlite3.Row
        kernel = dict(con.execute("SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone())
        call = dict(con.execute("SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = ?",
                                (kernel["correlationId"],)).fetchone())
        for corr, call_start, gtid in ((990001, 26, t1), (990002, 27, t1 + 5), (990003, None, t1)):
            _insert(con, "CUPTI_ACTIVITY_KIND_KERNEL", {**kernel, "correlationId": corr})
            if call_start is not None:
                _insert(con, "CUPTI_ACTIVITY_KIND_RUNTIME", {
                    **call, "correlationId": corr, "start": call_start, "end": call_start + 2,
                    "globalTid": gtid})
        con.execute("INSERT INTO StringIds (id, value) VALUES (900001, 'from string ids')")
        con.executemany('INSERT INTO NVTX_EVENTS ("start", "end", eventType, text, textId, domainId, '
                        "globalTid) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    assert _same(db) > 10
    text = to_csv(run_report(open_report(db), "nvtx_pushpop_trace"))
    assert '":a,b"' in text and "mydomain:from string ids" in text and "--:leaf" in text
    kern = to_csv(nvtx_kern_sum.kern_sum_frame(open_report(db))).splitlines()
    assert any(line.startswith(":leaf,PushPop,") for line in kern)
    assert any(line.startswith(",,,,0,") for line in kern)  # the kernel without a call


def _insert(con: sqlite3.Connection, table: str, row: dict[str, object]) -> None:
    con.execute(f"INSERT INTO {table} ({', '.join(map(repr, row))}) VALUES ({', '.join('?' * len(row))})",
                list(row.values()))
