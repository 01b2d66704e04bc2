"""The copies as integer columns (ops.copy_columns) against the memcpy table, and the summary's
bandwidth rows from them against the rows the table gives."""

from __future__ import annotations

import lzma
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from engine.analysis.copy_kinds import bandwidth_columns as _bandwidth_columns
from engine.analysis.copy_kinds import bandwidth_rows as _bandwidth
from engine.analysis.copy_kinds import bandwidth_table as _bandwidth_table
from engine.analysis.ops import copy_columns
from engine.reports import open_report
from tests.conftest import NSYS_SQLITE

REC = Path(__file__).resolve().parents[2] / "data" / "recordings" / "nsys"


def _multistream(tmp_path: Path) -> list[Path]:
    src = REC / "multistream" / "multistream.sqlite.xz"  # Unified copies: Unknown memory kinds
    if not src.exists():
        return []
    out = tmp_path / "multistream.sqlite"
    out.write_bytes(lzma.decompress(src.read_bytes()))
    return [out]


def _check(path: Path) -> int:
    """copy_columns row for row with the memcpy table; the bandwidth rows both ways. Returns copies."""
    cc = copy_columns(open_report(path))
    assert cc is not None
    names = ["operation", "srcKindName", "dstKindName"]
    mc = open_report(path).table("memcpy", ["start", "end", "bytes", *names])
    assert cc.n == len(mc)
    assert cc.start.tolist() == mc["start"].tolist() and cc.end.tolist() == mc["end"].tolist()
    assert cc.nbytes.tolist() == mc["bytes"].astype(float).fillna(0).astype(np.int64).tolist()
    labels = [cc.kinds[int(c)] for c in cc.codes]
    table = list(zip(*([str(v) for v in mc[c].astype(str)] for c in names), strict=True))
    assert labels == table
    assert [cc.known[int(c)] for c in cc.codes] == mc["operation"].notna().tolist()
    assert len(set(cc.kinds)) == len(cc.kinds)
    assert _bandwidth_columns(cc) == _bandwidth_table(open_report(path))
    return cc.n


def test_copy_columns_match_the_table(tmp_path: Path) -> None:
    paths = [*NSYS_SQLITE, *_multistream(tmp_path)]
    if not paths:
        pytest.skip("no nsys fixtures")
    assert sum(_check(p) for p in paths) > 0


def _edited(tmp_path: Path, sql: str) -> Path:
    src = next((p for p in NSYS_SQLITE if p.name.startswith("host_overhead_naive")), None)
    if src is None:
        pytest.skip("no host_overhead_naive fixture")
    out = tmp_path / "edited.sqlite"
    shutil.copy(src, out)
    out.chmod(0o644)
    con = sqlite3.connect(out)
    con.execute(sql)
    con.commit()
    con.close()
    return out


def test_unknown_copy_kind_drops_out_as_in_the_table(tmp_path: Path) -> None:
    # a copyKind missing from ENUM_CUDA_MEMCPY_OPER: NaN in the table, so no bandwidth group
    path = _edited(tmp_path, "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET copyKind = 77 "
                             "WHERE rowid IN (SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_MEMCPY)")
    cc = copy_columns(open_report(path))
    assert cc is not None and False in cc.known
    _check(path)
    rows = _bandwidth(open_report(path))
    assert sum(r.count for r in rows) == cc.n - 1


def test_null_kind_uses_the_table(tmp_path: Path) -> None:
    path = _edited(tmp_path, "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET srcKind = NULL "
                             "WHERE rowid IN (SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_MEMCPY)")
    assert copy_columns(open_report(path)) is None
    assert _bandwidth(open_report(path)) == _bandwidth_table(open_report(path))
