"""engine.analysis.opened.OpenedReport: row counts, one overview for the command line and the window
(the same cache entries, the same JSON), the child process chosen for a big report of a resident
program, and the ncu link."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.analysis import opened
from engine.analysis.findings import overview_store
from engine.analysis.opened import OpenedReport
from tests.conftest import FIXTURES, NSYS_DIR, REPO

REPORT = NSYS_DIR / "host_overhead_gpumetrics.sqlite"


def _json(overview) -> str:
    summary, found = overview
    return json.dumps([summary.to_json(), [f.to_json() for f in found]], sort_keys=True)


def _engine(path: Path) -> str:
    from engine.analysis.findings.overview import overview
    from engine.reports import open_report

    trace = open_report(path)
    try:
        return _json(overview(trace))
    finally:
        trace.close()


def test_row_counts_are_the_traces(tmp_path):
    from engine.reports import open_report
    from engine.reports.base import TABLES

    report = OpenedReport.open(REPORT)
    trace = open_report(REPORT)
    try:
        assert report.table_rows == {n: trace.row_count(n) for n in TABLES}
        assert report.table_rows["kernels"] == 10 and report.table_rows["api"]
    finally:
        trace.close()
        report.close()


def test_the_counts_left_for_after_the_first_paint_are_the_traces(tmp_path):
    # A window's open leaves the sync and NVTX counts (no cached column yet) for count_rows_left.
    from engine.reports import open_report
    from engine.reports.base import TABLES

    copy = tmp_path / "torch_sdpa_gemm.sqlite"
    shutil.copy(NSYS_DIR / copy.name, copy)
    report = OpenedReport.open(copy, rows_later=True)
    trace = open_report(copy)
    try:
        expected = {n: trace.row_count(n) for n in TABLES}
        assert report.rows_left == ("sync", "nvtx")
        assert report.table_rows == {n: v for n, v in expected.items() if n not in ("sync", "nvtx")}
        report.count_rows_left()
        assert report.rows_left == ()
        assert report.table_rows == expected
        assert report.table_rows["sync"] == 99 and report.table_rows["nvtx"] == 8
    finally:
        trace.close()
        report.close()


@pytest.mark.parametrize("name", ["host_overhead_gpumetrics.sqlite", "torch_sdpa_gemm.sqlite"])
def test_the_window_then_the_command_line_get_the_same_overview(tmp_path, name):
    copy = tmp_path / name
    shutil.copy(NSYS_DIR / name, copy)
    window = OpenedReport.open(copy)  # resident, small: computed here and kept in the cache
    try:
        got = window.overview()
        assert not window.summary_from_cache and not window.in_child()
    finally:
        window.close()
    assert _json(got) == _engine(copy)
    cli = subprocess.run([sys.executable, "-m", "engine.cli", "summary", "--json", str(copy)], cwd=REPO,
                         capture_output=True, text=True, check=True)
    assert json.loads(cli.stdout) == got[0].to_json()
    kept = overview_store.cached_file(copy, None)  # the entry both read (the CLI's key, the window's)
    assert kept is not None and kept.exists()
    back = overview_store.read_result(kept)
    assert back is not None and _json(back) == _json(got)


def test_the_command_line_then_the_window_reads_the_kept_overview(tmp_path):
    from engine.cli.cached import overview_of

    copy = tmp_path / REPORT.name
    shutil.copy(REPORT, copy)
    first = overview_of(str(copy))
    window = OpenedReport.open(copy)
    try:
        second = window.overview()
        assert window.summary_from_cache
    finally:
        window.close()
    assert _json(second) == _json(first) == _engine(copy)


def test_a_big_report_of_a_resident_program_is_summarized_in_a_child(tmp_path, monkeypatch):
    monkeypatch.setattr(opened, "CHILD_EVENTS", 0)  # every report counts as big
    copy = tmp_path / REPORT.name
    shutil.copy(REPORT, copy)
    said: list[str] = []
    window = OpenedReport.open(copy)
    cli = OpenedReport(copy, resident=False)
    try:
        assert window.in_child() and not cli.in_child()
        got = window.overview(progress=said.append)
    finally:
        window.close()
        cli.close()
    assert said and said[0].startswith("In a separate process: ")
    assert _json(got) == _engine(copy)


def test_a_step_range_is_part_of_the_key(tmp_path):
    copy = tmp_path / REPORT.name
    shutil.copy(REPORT, copy)
    report = OpenedReport.open(copy)
    try:
        summary = report.summary
        assert summary.iterations is not None
        other = summary.iterations.candidates[1]
        report.set_range(other)
        assert report.summary.iterations is not None and report.summary.iterations.range == other
        assert not report.summary_from_cache
    finally:
        report.close()


def test_the_ncu_result_of_a_kernel_launch():
    from engine.analysis.ncu_match import base_name

    ncu = OpenedReport.open(FIXTURES / "ncu" / "host_overhead_fixed.ncu-rep")
    nsys = OpenedReport.open(NSYS_DIR / "host_overhead_fixed.sqlite")
    try:
        assert ncu.is_ncu and not nsys.is_ncu
        kernels = ncu.ncu.kernels
        names = nsys.trace.table("kernels", columns=["name", "shortName", "start"]).sort_values("start")
        first = names.iloc[0]
        hit = ncu.ncu_result(str(first["name"]), first["shortName"], 0)
        assert hit is not None and base_name(str(hit["Kernel Name"])) == base_name(str(first["shortName"]))
        assert hit["ID"] == int(kernels[kernels["Kernel Name"].map(base_name)
                                        == base_name(str(first["shortName"]))]["ID"].min())
        assert ncu.ncu_result(str(first["name"]), first["shortName"], len(kernels)) is None
        assert nsys.ncu_result(str(first["name"]), first["shortName"], 0) is None
    finally:
        ncu.close()
        nsys.close()
