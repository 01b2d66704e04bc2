"""A .ncu-rep read into plain rows (engine/reports/ncu/lazy_report.py) prints the pages without pandas, and
its plain views say what the pandas tables built from them say.

- Pages: `kernelscope ncu R --page P` runs as a real process, cold and with the tables cached, and
  must not import pandas or numpy (~0.3 s of a ~0.8 s page); its output must equal the page printed
  from a report that holds only pandas tables (the same tables, no rows behind them).
- Views: every plain view (kernel/rule/source/line records, details rows, raw table, value, unit,
  metric_names_matching) equals the one the base NcuReport derives from the tables.
"""

from __future__ import annotations

import argparse
import io
import lzma
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.cli.ncu import _page
from engine.reports.ncu import LazyNcuReport, NcuReport, read_ncu, resolve_all_sources
from tests.conftest import FIXTURES, REPO

pytest.importorskip("ncu_report")

RECORDINGS = REPO / "tests" / "data" / "recordings" / "ncu"
PAGES = ["details", "raw", "rules", "roofline", "verdict", "sections", None]  # None: the summary

_RUN = """
import sys
from engine.cli.app import main
rc = main(sys.argv[1:])
sys.stderr.write("\\nloaded: %s\\n" % sorted(m for m in ("pandas", "numpy") if m in sys.modules))
sys.exit(rc)
"""


def _unpacked(name: str, tmp: Path) -> Path:
    if name.endswith(".xz"):
        out = tmp / Path(name).name[:-3]
        with lzma.open(RECORDINGS / name, "rb") as f, out.open("wb") as g:
            shutil.copyfileobj(f, g, 1 << 20)
        return out
    out = tmp / name
    shutil.copyfile(FIXTURES / "ncu" / name, out)
    return out


def _cli(report: Path, page: str | None, cache: Path) -> tuple[str, str]:
    env = {**os.environ, "KERNELSCOPE_CACHE": str(cache)}
    argv = [sys.executable, "-c", _RUN, "ncu", str(report), *(["--page", page] if page else [])]
    p = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert p.returncode in (0, 1), p.stderr[-2000:]  # rules: 1 when a report has none
    return p.stdout, p.stderr.rsplit("loaded: ", 1)[1].strip()


@pytest.mark.parametrize("name", ["host_overhead_fixed.ncu-rep", "source.ncu-rep.xz"])
def test_pages_print_without_pandas(name: str, tmp_path: Path) -> None:
    report = _unpacked(name, tmp_path)
    for page in PAGES:
        cold, loaded = _cli(report, page, tmp_path / f"cold-{page}")
        assert loaded == "[]", (page, loaded)
        # the next page reads the tables from the cache, still without pandas
        other = "details" if page != "details" else "raw"
        again, loaded = _cli(report, other, tmp_path / f"cold-{page}")
        assert loaded == "[]", (page, other, loaded)
        assert len(cold) > 100 and len(again) > 100


def _frames_only(r: LazyNcuReport) -> NcuReport:
    """The same report as pandas tables only (what the base NcuReport's views read)."""
    return NcuReport(
        r.path, r.source, r.kernels, r.metrics, r.raw, dict(r.raw_units), notes=list(r.notes),
        values=r.values, units=dict(r.units), labels=dict(r.labels), rules=r.rules, sources=r.sources,
        sections=dict(r.sections), action_refs=list(r.action_refs), pc_samples=r.pc_samples,
        source_lines=dict(r.source_lines),
        stored_names=list(r.stored_names), rule_columns=r.rule_columns, nvtx=dict(r.nvtx),
        launch_columns=r.launch_columns,
    )


def _plain(x: Any) -> Any:
    """A cell as a plain comparable value: NaN and None alike, numpy scalars as Python numbers."""
    if x is None:
        return None
    if isinstance(x, str):
        return x
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    try:
        f = float(x)
    except (TypeError, ValueError):
        return x
    return None if math.isnan(f) else f


def _read(name: str, tmp: Path) -> LazyNcuReport:
    report = read_ncu(_unpacked(name, tmp))
    assert isinstance(report, LazyNcuReport)
    resolve_all_sources(report)
    return report


@pytest.mark.parametrize("name", ["host_overhead_fixed.ncu-rep", "source.ncu-rep.xz", "full.ncu-rep.xz"])
def test_plain_views_equal_the_tables(name: str, tmp_path: Path) -> None:
    lazy = _read(name, tmp_path)
    base = _frames_only(lazy)
    assert _plain(lazy.kernel_records()) == _plain(base.kernel_records())
    for mine, theirs in zip(lazy.kernel_records(), base.kernel_records(), strict=True):
        # typed as the table types them (an int column stays int, a column with a gap is float)
        assert {c: type(v).__name__ for c, v in mine.items() if v is not None} == {
            c: type(v).__name__ for c, v in theirs.items() if v is not None}
    assert _plain(lazy.rule_records()) == _plain(base.rule_records())
    assert _plain(lazy.detail_rows()) == _plain(base.detail_rows())
    assert _plain(lazy.raw_table()) == _plain(base.raw_table())
    ids = [int(k["ID"]) for k in base.kernel_records()]
    assert any(lazy.source_records(k) for k in ids) or name == "host_overhead_fixed.ncu-rep"
    for k in ids:
        assert _plain(lazy.source_records(k)) == _plain(base.source_records(k))
        assert _plain(lazy.line_records(k)) == _plain(base.line_records(k))
    values = base.values
    assert values is not None and len(values.columns) > 100
    for k in ids:
        for metric in values.columns:
            assert lazy.value(k, str(metric)) == base.value(k, str(metric)), (k, metric)
    assert lazy.value(len(ids), str(values.columns[0])) is None and lazy.value(0, "no__such_metric") is None
    for metric in list(values.columns)[::50]:
        assert lazy.unit(str(metric)) == base.unit(str(metric))
    for prefix, suffix in (("smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"), ("dram__", ""),
                           ("launch__", "")):
        assert lazy.metric_names_matching(prefix, suffix) == base.metric_names_matching(prefix, suffix)


@pytest.mark.parametrize("name", ["host_overhead_fixed.ncu-rep", "source.ncu-rep.xz", "full.ncu-rep.xz"])
def test_pages_from_rows_equal_pages_from_tables(name: str, tmp_path: Path) -> None:
    lazy = _read(name, tmp_path)
    base = _frames_only(lazy)
    for page in PAGES:
        for fmt in ({}, {"csv": True}, {"json": True}):
            if page in ("details", "raw") and not fmt.get("json"):
                fmt = {"csv": True}
            args = argparse.Namespace(page=page, source=True, csv=fmt.get("csv", False),
                                      json=fmt.get("json", False), print_units="base", ceilings=None,
                                      input=str(lazy.path))
            printed = []
            for report in (lazy, base):
                out = io.StringIO()
                _page(report, args, out)
                printed.append(out.getvalue())
            assert printed[0] == printed[1], (page, fmt)
            assert len(printed[0]) > 50
