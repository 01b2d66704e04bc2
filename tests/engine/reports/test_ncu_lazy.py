"""The .ncu-rep summary read: only the summary's metrics up front, the rest decoded on first use.

A summary (kernel table, verdicts, every kernel's sections, ranked rules, roofline) of a report read
this way must be exactly what the fully decoded report gives, without decoding the other ~2,000
metrics per kernel; asking for anything else (the raw page, ``values``, another metric) decodes
them, from the open report or the file, and the cache then holds the full tables.
"""

from __future__ import annotations

import math
import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest

from engine.analysis.ncu.pages import details_csv, raw_csv
from engine.analysis.ncu.roofline import roofline
from engine.analysis.ncu.sections import (
    STALL_PREFIX,
    STALL_SUFFIX,
    kernel_sections,
    kernel_table,
    rules_table,
    summary_metrics,
)
from engine.reports.ncu import NcuReport
from engine.reports.ncu.cache import cache_file
from engine.reports.ncu.csv_export import read_ncu_csv
from engine.reports.ncu.decoders import read_ncu_rep
from engine.reports.ncu.nvidia_reader import forget_open_reports
from engine.system.errors import ReportError
from tests.conftest import FIXTURES

NCU = FIXTURES / "ncu"
REPORTS = ["torch_sdpa", "host_overhead_fixed"]

pytest.importorskip("ncu_report")


@pytest.fixture(autouse=True)
def _wheel_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """These cases test the ``ncu_report`` reader (the fallback of engine/reports/ncu/own_reader.py)."""
    monkeypatch.setenv("KERNELSCOPE_NCU_OWN", "0")


def _partial(report: NcuReport) -> Any:
    return report.__dict__.get("_partial")


def _summary(report: NcuReport) -> dict[str, Any]:
    kt = kernel_table(report)
    rf = roofline(report)
    return {
        "kernels": kt,
        "sections": {int(k): kernel_sections(report, int(k), resolve_source=False) for k in kt["id"]},
        "rules": rules_table(report),
        "points": rf.points, "ceilings": rf.ceilings, "kernel_ceilings": rf.kernel_ceilings,
        "notes": rf.notes,
    }


def _full(path: Path) -> NcuReport:
    report = read_ncu_rep(path, use_cache=False)
    assert report.raw is not None and _partial(report) is None  # reading .raw decoded everything
    return report


@pytest.mark.parametrize("name", REPORTS)
def test_summary_reads_only_its_metrics_and_equals_full_read(name: str) -> None:
    path = NCU / f"{name}.ncu-rep"
    lazy = read_ncu_rep(path, use_cache=False)
    got = _summary(lazy)
    part = _partial(lazy)
    assert part is not None, "the summary decoded every metric"
    for kid, nums in enumerate(part.nums):  # a small part of each kernel's metrics was decoded
        assert 50 < len(nums) < len(part.names[kid]) / 8, (kid, len(nums), len(part.names[kid]))
    full = _full(path)
    exp = _summary(full)
    for key in ("kernels", "rules", "points", "ceilings", "kernel_ceilings"):
        assert got[key].equals(exp[key]), key
    assert got["notes"] == exp["notes"]
    assert got["sections"].keys() == exp["sections"].keys()
    for kid, secs in got["sections"].items():
        for title, table in secs.items():
            assert table.equals(exp["sections"][kid][title]), (kid, title)
    # the stall reasons the verdicts rank come from the same metric names as the full table's columns
    assert lazy.metric_names_matching(STALL_PREFIX, STALL_SUFFIX) == full.metric_names_matching(
        STALL_PREFIX, STALL_SUFFIX) != []


def test_summary_metrics_cover_what_the_summary_asks_for(monkeypatch: pytest.MonkeyPatch) -> None:
    path = NCU / "torch_sdpa.ncu-rep"
    report = read_ncu_rep(path, use_cache=False)
    asked: set[str] = set()
    value = type(report).value

    def spy(self: NcuReport, kernel_id: int, metric: str) -> float | None:
        asked.add(metric)
        return value(self, kernel_id, metric)

    monkeypatch.setattr(type(report), "value", spy)
    _summary(report)
    names, patterns = summary_metrics()
    missing = {m for m in asked if m not in names
               and not any(m.startswith(p) and m.endswith(s) for p, s in patterns)}
    assert not missing
    assert len(asked) > 100  # the spy saw the summary's questions


def test_other_metric_decodes_the_rest() -> None:
    path = NCU / "host_overhead_fixed.ncu-rep"
    report = read_ncu_rep(path, use_cache=False)
    oracle = read_ncu_csv(NCU / "host_overhead_fixed_raw.csv")
    metric = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"  # a raw-page metric outside the summary
    names, _patterns = summary_metrics()
    assert metric not in names and metric not in _partial(report).nums[0]
    assert report.value(0, "no__such_metric") is None
    assert _partial(report) is not None  # a metric no kernel has decodes nothing
    got = report.value(0, metric)
    assert _partial(report) is None
    exp = oracle.value(0, metric)
    assert got is not None and exp is not None and got > 0
    assert math.isclose(got, exp, rel_tol=1e-6)
    assert report.unit(metric) == oracle.raw_units[metric]


def test_pages_of_a_summary_read_are_the_full_pages() -> None:
    path = NCU / "host_overhead_fixed.ncu-rep"
    lazy = read_ncu_rep(path, use_cache=False)
    kernel_table(lazy)
    assert _partial(lazy) is not None
    details = details_csv(lazy)  # the details page needs no more than the summary read
    assert _partial(lazy) is not None
    raw = raw_csv(lazy)
    assert _partial(lazy) is None
    full = _full(path)
    assert details == details_csv(full) and raw == raw_csv(full)
    assert lazy.values is not None and full.values is not None and lazy.values.equals(full.values)
    assert lazy.units == full.units and lazy.raw_units == full.raw_units
    # ncu's own raw page for this file: every metric column is there, in ncu's units
    oracle = read_ncu_csv(NCU / "host_overhead_fixed_raw.csv")
    assert set(oracle.raw_units) <= set(lazy.raw_units)


def test_cache_holds_the_summary_then_the_full_tables(tmp_path: Path) -> None:
    src = tmp_path / "r.ncu-rep"
    shutil.copyfile(NCU / "torch_sdpa.ncu-rep", src)
    first = read_ncu_rep(src)
    summary = kernel_table(first)
    forget_open_reports()  # as in a new process: the rest must come from the file
    again = read_ncu_rep(src)
    assert again is not first and _partial(again) is not None
    assert kernel_table(again).equals(summary)
    raw = again.raw
    assert _partial(again) is None and len(raw) == 4 and len(raw.columns) > 2000
    cache = cache_file(src)
    with cache.open("rb") as f:
        stored = pickle.load(f)  # noqa: S301 - the test's own cache
    assert _partial(stored) is None and stored.raw.equals(raw)  # the entry now holds the full tables
    assert stored.raw.equals(_full(NCU / "torch_sdpa.ncu-rep").raw)


def test_report_gone_before_the_rest_is_read(tmp_path: Path) -> None:
    src = tmp_path / "gone.ncu-rep"
    shutil.copyfile(NCU / "host_overhead_fixed.ncu-rep", src)
    report = read_ncu_rep(src, use_cache=False)
    forget_open_reports()
    src.unlink()
    with pytest.raises(ReportError, match="could not be read again") as ei:
        _ = report.raw
    assert "\n" not in str(ei.value) and str(src) in str(ei.value)
    assert kernel_table(report)["verdict"].notna().all()  # the summary still answers


def test_report_rewritten_before_the_rest_is_read(tmp_path: Path) -> None:
    src = tmp_path / "r.ncu-rep"
    shutil.copyfile(NCU / "host_overhead_fixed.ncu-rep", src)
    report = read_ncu_rep(src, use_cache=False)
    shutil.copyfile(NCU / "torch_sdpa.ncu-rep", src)  # profiled again into the same file
    with pytest.raises(ReportError, match="changed since it was opened") as ei:
        report.value(0, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum")
    assert "\n" not in str(ei.value)
    assert len(report.kernels) == 2 and report.value(0, "gpu__time_duration.sum") is not None
