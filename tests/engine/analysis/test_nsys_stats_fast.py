"""The core reports (numpy over the columnar cache) against NVIDIA's oracles and the pandas reference."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine.analysis.nsys import stats
from engine.analysis.nsys.stats import format_table, named_durations, run_report, to_csv
from engine.analysis.nsys.stats import group_stats as stats_fast
from engine.analysis.nsys.stats.group_stats import segment_stats as _segment_stats
from engine.reports import open_report
from engine.reports.base import Trace
from engine.reports.nsys import columns
from tests.conftest import NSYS_DIR, NSYS_SQLITE, ORACLES, REPO
from tests.oracles.nsys_stats_pandas import pandas_report

FAST_REPORTS = ("cuda_api_sum", "cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum",
                "nvtx_sum", "cuda_api_gpu_sum", "cuda_gpu_sum")


def fast_reports(trace: Trace, names: list[str]) -> dict[str, object]:
    """The reports among ``names`` whose groups came from the export's columns (not its tables)."""
    out = {n: stats.run(trace, n, "csv") for n in names}
    took = named_durations.sources(trace)
    return {n: t for n, t in out.items() if all(took.get(k, "columns") == "columns"
                                                 for k in stats.registry()[n].needs)}

ORACLE_CASES = [
    pytest.param(db, report, id=f"{db.stem}-{report}")
    for db in NSYS_SQLITE
    for report in FAST_REPORTS
    if (ORACLES / f"{db.stem}_{report}.csv").exists()
]


def test_every_fixture_has_core_oracles() -> None:
    assert len(NSYS_SQLITE) >= 5
    assert len(ORACLE_CASES) == len(NSYS_SQLITE) * len(FAST_REPORTS)


@pytest.mark.parametrize(("db", "report"), ORACLE_CASES)
def test_fast_reports_match_nsys_oracle_bytes(db: Path, report: str) -> None:
    tables = fast_reports(open_report(db), [report])
    assert set(tables) == {report}  # every fixture takes the fast path
    oracle = (ORACLES / f"{db.stem}_{report}.csv").read_text()
    assert to_csv(tables[report]) == oracle
    assert tables[report].empty == (oracle == "")


@pytest.mark.parametrize("db", NSYS_SQLITE, ids=lambda p: p.stem)
def test_fast_reports_equal_the_dataframe_path(db: Path) -> None:
    fast = fast_reports(open_report(db), list(FAST_REPORTS))
    trace = open_report(db)
    for report in FAST_REPORTS:
        df = pandas_report(trace, report)
        table = stats.registry()[report].compute(trace, False)
        assert to_csv(fast[report]) == to_csv(df), report
        assert format_table(table) == format_table(df), report
        assert format_table(table, max_width=12) == format_table(df, max_width=12), report
        if not df.empty:  # the same numbers, not only the same text
            frame = run_report(trace, report)
            assert list(frame.columns) == list(df.columns)
            for col in df.columns:
                if pd.api.types.is_numeric_dtype(df[col].dtype):
                    np.testing.assert_allclose(frame[col].to_numpy(float), df[col].to_numpy(float),
                                               rtol=1e-12, err_msg=f"{report} {col}")
                else:
                    assert frame[col].tolist() == df[col].tolist(), f"{report} {col}"


@pytest.mark.parametrize("pages", [False, True])
def test_threaded_rowid_chunks_read_the_same_columns(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     pages: bool) -> None:
    """Big tables are split into rowid ranges read by threads (SQLite) or read from the file's
    pages; on a real fixture forced through each path, the columns come back whole and in row
    order, are cached as .npy files that the next open maps instead of reading (the page reader
    writes into those files from the start), and the report keeps its oracle bytes."""
    monkeypatch.setenv("KERNELSCOPE_SQLITE_PAGES", "1" if pages else "0")
    db = next(p for p in NSYS_SQLITE if p.stem == "torch_sdpa_gemm")
    direct = sqlite3.connect(db).execute(
        'SELECT "end" - "start", nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY rowid').fetchall()
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(columns, "CHUNK_ROWS", 100)
    oracle = (ORACLES / "torch_sdpa_gemm_cuda_api_sum.csv").read_text()
    for attempt in ("read", "cached"):
        trace = open_report(db)
        read = trace.read_summary_columns("api")
        assert read is not None
        cols = read.result()
        assert cols is not None
        assert list(zip(cols["duration"].tolist(), cols["nameId"].tolist(), strict=True)) == direct
        # mapped from the cache files on every path: the page reader writes into them, the SQLite
        # path writes each scan's columns and maps them back (one scan's arrays in memory at a time)
        assert isinstance(cols["duration"], np.memmap), attempt
        assert to_csv(fast_reports(trace, ["cuda_api_sum"])["cuda_api_sum"]) == oracle
    assert len(list((tmp_path / "cache" / "columns").glob("*/CUPTI_ACTIVITY_KIND_RUNTIME.*.npy"))) == 2


def test_per_group_statistics_equal_the_one_sort_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bounded-memory path (one group at a time) prints what the single-sort path prints."""
    db = next(p for p in NSYS_SQLITE if p.stem == "torch_sdpa_gemm")
    trace = open_report(db)
    wanted = ["cuda_api_sum", "cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum", "nvtx_sum"]
    before = {r: to_csv(t) for r, t in fast_reports(trace, wanted).items()}
    monkeypatch.setattr(stats_fast, "_PER_GROUP_MIN_ROWS", 0)
    monkeypatch.setattr(stats_fast, "_PER_GROUP_MAX_GROUPS", 10_000)
    after = {r: to_csv(t) for r, t in fast_reports(open_report(db), wanted).items()}
    assert after == before and len(before) == 4
    for r in wanted:
        assert before[r] == (ORACLES / f"torch_sdpa_gemm_{r}.csv").read_text()


def _copy(tmp_path: Path, stem: str) -> Path:
    dst = tmp_path / f"{stem}.sqlite"
    shutil.copy(NSYS_DIR / f"{stem}.sqlite", dst)
    return dst


def test_null_time_leaves_the_report_to_the_general_path(tmp_path: Path) -> None:
    db = _copy(tmp_path, "host_overhead_naive")
    with sqlite3.connect(db) as con:  # the export declares NOT NULL: rebuild the table without it
        con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO k_old")
        con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL AS SELECT * FROM k_old")
        con.execute("DROP TABLE k_old")
        con.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = NULL WHERE rowid = 3')
    trace = open_report(db)
    got = fast_reports(trace, ["cuda_api_sum"])
    # a kernel without an end has no duration: the tables' path says so, as the pandas reference does
    with pytest.raises(ValueError):
        run_report(trace, "cuda_gpu_kern_sum")
    assert named_durations.sources(trace)["kernels"] == "tables"
    with pytest.raises(ValueError):
        pandas_report(trace, "cuda_gpu_kern_sum")
    assert to_csv(got["cuda_api_sum"]) == (ORACLES / "host_overhead_naive_cuda_api_sum.csv").read_text()


def test_a_missing_short_name_column(tmp_path: Path) -> None:
    db = _copy(tmp_path, "host_overhead_naive")
    with sqlite3.connect(db) as con:  # an export without short names: not "no kernels"
        con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN shortName")
    trace = open_report(db)
    got = fast_reports(trace, ["cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum"])
    # trace.columns reads the kernel names from the demangled names alone: no fallback needed
    assert set(got) == {"cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum"}
    assert not run_report(trace, "cuda_gpu_kern_sum").empty
    assert to_csv(run_report(trace, "cuda_gpu_kern_sum")) == to_csv(pandas_report(trace, "cuda_gpu_kern_sum"))


def test_names_missing_from_stringids(tmp_path: Path) -> None:
    """An API name id without a string prints '<unknown ID>' as the DataFrame path does; a kernel
    whose demangled name is missing needs the short-name fallback, which the general path does."""
    db = _copy(tmp_path, "host_overhead_naive")
    with sqlite3.connect(db) as con:
        api_id = con.execute("SELECT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1").fetchone()[0]
        k_id = con.execute("SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
        con.execute("DELETE FROM StringIds WHERE id IN (?, ?)", (api_id, k_id))
    got = fast_reports(open_report(db), ["cuda_api_sum", "cuda_gpu_kern_sum"])
    assert set(got) == {"cuda_api_sum"}
    text = to_csv(got["cuda_api_sum"])
    assert f"<unknown {api_id}>" in text
    assert text == to_csv(pandas_report(open_report(db), "cuda_api_sum"))


def test_missing_tables_give_empty_reports() -> None:
    db = next(p for p in NSYS_SQLITE if p.stem == "legacy2022_partial_naive")  # no kernel table
    got = fast_reports(open_report(db), ["cuda_gpu_kern_sum", "cuda_api_sum"])
    assert got["cuda_gpu_kern_sum"].empty and to_csv(got["cuda_gpu_kern_sum"]) == ""
    assert format_table(got["cuda_gpu_kern_sum"]) == "(no data for this report)\n"
    assert not got["cuda_api_sum"].empty


def test_other_reports_and_readers_are_left_out() -> None:
    kineto = open_report(REPO.parent / "shared" / "fixtures" / "torch" / "torch_sdpa_trace.json")
    # Kineto: the same code, over trace.columns (answered from its tables); copies by their labels
    assert set(fast_reports(kineto, list(FAST_REPORTS))) >= {"cuda_api_sum", "cuda_gpu_kern_sum"}
    for report in FAST_REPORTS:
        assert to_csv(run_report(kineto, report)) == to_csv(pandas_report(kineto, report)), report


def test_segment_stats_equal_pandas_groupby() -> None:
    """Odd and even counts, one-value groups, negative values, an unused code, a wide value range."""
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 6, 5000)
    codes[(codes == 3) | (codes == 4)] = 5  # code 4 has no values
    codes[:3] = [0, 1, 2]
    values = rng.integers(-1000, 10**12, 5000)
    values[codes == 2] = rng.integers(0, 3, (codes == 2).sum())  # many ties
    codes, values = np.append(codes, 3), np.append(values, 42)  # code 3: a single value
    got = _segment_stats(codes.astype(np.int64), values.astype(np.int64), 6)
    ref = pd.Series(values).groupby(codes).agg(["sum", "count", "median", "min", "max", "std"])
    assert got[4] is None
    for g, row in ref.iterrows():
        total, count, mean, median, vmin, vmax, std = got[int(g)]  # type: ignore[misc]
        assert (total, count, vmin, vmax) == (row["sum"], row["count"], row["min"], row["max"])
        assert mean == row["sum"] / row["count"] and median == row["median"]
        assert std == pytest.approx(0.0 if count == 1 else row["std"], rel=1e-9)


def test_cold_cli_stats_never_imports_pandas(tmp_path: Path) -> None:
    """The point of the fast path: `kernelscope stats` of the core reports runs without pandas, and
    writes nsys's bytes."""
    src = NSYS_DIR / "host_overhead_fixed.sqlite"
    code = (
        "import sys; from engine.cli import main; "
        f"rc = main(['stats', {str(src)!r}, '-r', {','.join(FAST_REPORTS)!r}, '-f', 'csv', "
        f"'-o', {str(tmp_path / 'out')!r}]); "
        "print(rc, 'pandas' in sys.modules, 'numpy' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       timeout=120)
    assert r.stdout.split() == ["0", "False", "True"], r.stderr
    for report in FAST_REPORTS:
        assert (tmp_path / f"out_{report}.csv").read_text() == \
            (ORACLES / f"host_overhead_fixed_{report}.csv").read_text(), report


def test_module_has_no_pandas_at_import() -> None:
    r = subprocess.run(
        [sys.executable, "-c", "import sys, engine.analysis.nsys.stats, engine.reports.nsys.sqlite_trace; "
         "print('pandas' in sys.modules, 'numpy' in sys.modules)"],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )
    assert r.stdout.split() == ["False", "False"], r.stderr


def test_cli_computes_only_what_the_cache_lacks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from engine.cli import main

    src = str(NSYS_DIR / "torch_sdpa_gemm.sqlite")
    cache = Path(os.environ["KERNELSCOPE_CACHE"]) / "results"
    assert main(["stats", src, "-r", "cuda_api_sum,nvtx_sum", "-f", "csv", "-o", str(tmp_path / "a")]) == 0
    assert sorted(p.name for p in cache.rglob("stats-*")) == ["stats-cuda_api_sum.csv", "stats-nvtx_sum.csv"]
    assert main(["stats", src, "-r", ",".join(FAST_REPORTS), "-f", "table"]) == 0
    table = capsys.readouterr().out
    assert main(["stats", src, "-r", ",".join(FAST_REPORTS), "-f", "csv", "-o", str(tmp_path / "b")]) == 0
    n = len(FAST_REPORTS)
    assert len(list(cache.rglob("stats-*.csv"))) == n and len(list(cache.rglob("stats-*.txt"))) == n
    trace = open_report(NSYS_DIR / "torch_sdpa_gemm.sqlite")
    for report in FAST_REPORTS:
        assert (tmp_path / f"b_{report}.csv").read_text() == \
            (ORACLES / f"torch_sdpa_gemm_{report}.csv").read_text(), report
        assert format_table(run_report(trace, report)) in table, report


@pytest.mark.parametrize("db", NSYS_SQLITE, ids=lambda p: p.stem)
def test_vectorised_gpu_trace_equals_the_dataframe_path(db: Path) -> None:
    """cuda_gpu_trace without pandas prints what the DataFrame path prints, on every fixture
    (nsys 2022.4's schema 3.0 without green contexts included)."""
    from engine.analysis.nsys.stats.reports.cuda_gpu_trace import gpu_trace_csv

    trace = open_report(db)
    fast = gpu_trace_csv(trace)  # type: ignore[arg-type]
    assert fast is not None
    assert fast.text == to_csv(run_report(trace, "cuda_gpu_trace"))
    assert fast.rows == len(run_report(trace, "cuda_gpu_trace"))
