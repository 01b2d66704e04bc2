"""A near-empty nsys report (the program never reached CUDA, e.g. python could not open its script)
says so, instead of guessing at an nsys older than the driver; that guess stays for launches without
kernels. Edge cases made from a real H200 export by dropping tables (nsys creates only tables with rows)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from engine.reports.nsys.sqlite_trace import NsysSqliteTrace
from tests.conftest import NSYS_DIR

SRC = NSYS_DIR / "host_overhead_fixed.sqlite"


def _without(tmp_path: Path, name: str, tables: list[str]) -> Path:
    dst = tmp_path / name
    shutil.copy(SRC, dst)
    con = sqlite3.connect(dst)
    for t in tables:
        con.execute(f"DROP TABLE IF EXISTS {t}")
    con.commit()
    con.close()
    return dst


def test_no_cuda_call_at_all(tmp_path: Path) -> None:
    path = _without(tmp_path, "empty.sqlite", [
        "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"])
    with NsysSqliteTrace(path) as t:
        assert not t.has("kernels")
        why = t.missing["kernels"]
    assert why.startswith("no CUDA kernels were recorded, and no CUDA API calls either")
    assert "older" not in why


def test_launches_without_kernels_keep_the_version_hint(tmp_path: Path) -> None:
    path = _without(tmp_path, "nokernels.sqlite", ["CUPTI_ACTIVITY_KIND_KERNEL"])
    with NsysSqliteTrace(path) as t:
        assert not t.has("kernels")
        assert "an nsys older than the driver also records none" in t.missing["kernels"]
