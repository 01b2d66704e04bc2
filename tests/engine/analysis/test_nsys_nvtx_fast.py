"""nvtx_pushpop_trace, nvtx_kern_sum, the style summaries and nvtx_sum, each one path over
trace.columns and trace.nvtx_names (issue 24): the chunked CSV and the table print the bytes of
the pandas references (tests/oracles) on every fixture, every H100 recording and an export with
every case added by hand (nesting, equal ranges, a range never popped, two threads, a named
domain, a StringIds text, a comma in a name, a kernel launched outside any range, a kernel without
a launch call), with the names coded in SQL and fetched; on a Kineto trace the ranges are named
from its table and the threads are its (pid, tid)."""

from __future__ import annotations

import lzma
import shutil
import sqlite3
from pathlib import Path

import pytest

from engine.analysis.nsys.stats import run, run_report, to_csv
from engine.analysis.nsys.stats.reports import nvtx_pushpop_trace
from engine.reports import open_report
from engine.reports.nsys import nvtx_ranges
from tests.conftest import FIXTURES, NSYS_SQLITE, REPO
from tests.oracles.nsys_nvtx_pandas import ORACLES
from tests.oracles.nsys_stats_pandas import pandas_report

RECORDINGS = sorted((REPO / "tests" / "data" / "recordings" / "nsys").glob("*/*.sqlite.xz"))
NVTX_REPORTS = ("nvtx_pushpop_trace", "nvtx_kern_sum", "nvtx_pushpop_sum", "nvtx_startend_sum")


def _csv(trace: object, name: str) -> str:
    got = run(trace, name, "csv")  # type: ignore[arg-type]
    return b"".join(got.chunks()).decode()


def _same(db: Path) -> int:
    trace = open_report(db)
    assert to_csv(run_report(trace, "nvtx_sum")) == to_csv(pandas_report(trace, "nvtx_sum"))
    for name in NVTX_REPORTS:
        want = to_csv(ORACLES[name](trace))
        assert _csv(trace, name) == want, name
        assert to_csv(run_report(trace, name)) == want, name
    return len(run_report(trace, "nvtx_pushpop_trace"))


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


def test_kineto_ranges_by_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Kineto trace's user annotations: one push/pop row each, parents on their own thread."""
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "torch_train.json"
    with lzma.open(REPO / "tests/data/recordings/torch/torch_train.json.xz") as f, path.open("wb") as g:
        shutil.copyfileobj(f, g)
    for trace in (open_report(path), open_report(FIXTURES / "torch" / "torch_sdpa_trace.json")):
        nvtx = trace.table("nvtx", ["start", "end", "text", "pid", "tid"])
        got = run_report(trace, "nvtx_pushpop_trace")
        assert len(got) == len(nvtx)
        assert sorted(got["Name"]) == sorted(":" + nvtx["text"].astype(str))
        assert to_csv(got) == _csv(trace, "nvtx_pushpop_trace")
        by_id = got.set_index("RangeId")
        for row in got[got["ParentId"].notna()].itertuples():
            parent = by_id.loc[int(row.ParentId)]  # type: ignore[arg-type]
            assert (parent["PID"], parent["TID"]) == (row.PID, row.TID)
            assert parent["Start (ns)"] <= row[1] and row[2] <= parent["End (ns)"]
        kern = run_report(trace, "nvtx_kern_sum")
        if not len(nvtx):  # no user annotation: no range to group by
            assert kern.empty
            continue
        kernels = trace.columns("kernels", ["duration"])["duration"]
        assert int(kern["Total Time (ns)"].sum()) >= int(kernels.sum())  # each kernel once at least
        assert kern["NVTX Range"].notna().any()
        alone = kern[kern["NVTX Range"].isna()]
        assert int(alone["Kern Inst"].sum()) <= len(kernels)
        assert to_csv(kern) == to_csv(run(trace, "nvtx_kern_sum", "csv"))


@pytest.mark.parametrize("few_groups", [64, 1], ids=["names-coded-in-sql", "names-grouped-by-sqlite"])
def test_every_case_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, few_groups: int) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(nvtx_pushpop_trace, "_CHUNK", 4)
    monkeypatch.setattr(nvtx_ranges, "_FEW_GROUPS", few_groups)
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
    kern = to_csv(run_report(open_report(db), "nvtx_kern_sum")).splitlines()
    assert any(line.startswith(":leaf,PushPop,") for line in kern)
    assert any(line.startswith(",,,,0,") for line in kern)  # the kernel without a call
    # domain 8's create event has an inline text and a text id: nvtx_kern_sum names it by the text,
    # the summaries by the text id's string (as the reports did before one path each)
    assert not any(line.startswith("from string ids:in8,") for line in kern)
    start_end = to_csv(run_report(open_report(db), "nvtx_startend_sum"))
    assert "from string ids:in8" in start_end and "by text:in8" not in start_end


def _insert(con: sqlite3.Connection, table: str, row: dict[str, object]) -> None:
    con.execute(f"INSERT INTO {table} ({', '.join(map(repr, row))}) VALUES ({', '.join('?' * len(row))})",
                list(row.values()))
