"""The nsys sqlite / Kineto readers on the real fixtures."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from engine.reports import open_report, sniff_kind
from engine.reports.base import TABLES, decode_global_tid
from engine.system.errors import ReportError
from tests.conftest import FIXTURES, NSYS_DIR, NSYS_SQLITE

KINETO = FIXTURES / "torch" / "torch_sdpa_trace.json"


def _raw(path: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("path", NSYS_SQLITE, ids=lambda p: p.stem)
def test_every_table_has_its_columns_and_row_counts_match_sqlite(path: Path) -> None:
    trace = open_report(path)
    for name, (cols, _) in TABLES.items():
        df = trace.table(name)
        assert list(df.columns) == list(cols), name
    counts = {
        "kernels": "CUPTI_ACTIVITY_KIND_KERNEL", "memcpy": "CUPTI_ACTIVITY_KIND_MEMCPY",
        "memset": "CUPTI_ACTIVITY_KIND_MEMSET", "api": "CUPTI_ACTIVITY_KIND_RUNTIME",
        "nvtx": "NVTX_EVENTS",
    }
    tables = {r[0] for r in _raw(path, "SELECT name FROM sqlite_master WHERE type='table'")}
    for name, table in counts.items():
        if table in tables:
            assert len(trace.table(name)) == _raw(path, f"SELECT count(*) FROM {table}")[0][0]
            assert trace.has(name)
        else:
            assert not trace.has(name) and len(trace.table(name)) == 0


def test_schema_versions_are_read_from_both_metadata_tables() -> None:
    new = open_report(NSYS_DIR / "host_overhead_naive.sqlite")
    old = open_report(NSYS_DIR / "legacy2022_partial_naive.sqlite")
    assert (new.info.product_version, new.info.schema_version) == ("2025.3.2.0", "3.20.3")
    assert (old.info.product_version, old.info.schema_version) == ("2022.4.2.1", "3.0.0")


def test_legacy_partial_capture_names_what_is_missing() -> None:
    trace = open_report(NSYS_DIR / "legacy2022_partial_naive.sqlite")
    assert len(trace.table("api")) == 11 and len(trace.table("memcpy")) == 3
    assert not trace.has("kernels")
    assert "kernels" in trace.missing["kernels"]
    assert any("kernels" in m for m in trace.missing_report())


def test_names_labels_and_decoded_ids() -> None:
    trace = open_report(NSYS_DIR / "host_overhead_naive.sqlite")
    k = trace.table("kernels")
    assert set(k["name"]) == {
        "sgemm_naive(int, const float *, const float *, float *)",
        "saxpy(int, float, const float *, float *)",
    }
    assert set(k["pid"]) == {2022}
    m = trace.table("memcpy")
    assert set(zip(m["operation"], m["srcKindName"], m["dstKindName"], strict=True)) == {
        ("Host-to-Device", "Pageable", "Device"), ("Device-to-Host", "Device", "Pageable"),
    }
    api = trace.table("api")
    assert (api["name"] == "cudaMemcpy_v3020").sum() == 20
    assert (api["baseName"] == "cudaMemcpy").sum() == 20
    assert set(api["tid"]) == {2022}
    nv = trace.table("nvtx")
    assert set(nv["text"]) >= {"iteration(naive)", "allocate", "upload", "compute", "download", "free"}
    assert decode_global_tid(281508900243430) == (2022, 2022)


def test_nvtx_text_ids_and_domains_are_resolved() -> None:
    nv = open_report(NSYS_DIR / "torch_sdpa_gemm.sqlite").table("nvtx")
    cublas = nv[nv["domain"] == "cuBLAS"]
    assert "cublasCreate_v2" in set(cublas["text"])  # stored as textId, not text


def test_gpu_metrics_have_names_and_gpu_index() -> None:
    gm = open_report(NSYS_DIR / "host_overhead_gpumetrics.sqlite").table("gpu_metrics")
    assert len(gm) == 206_866
    assert "SMs Active [Throughput %]" in set(gm["metricName"])
    assert set(gm["gpu"]) == {0}


def test_sqlite_is_opened_read_only_and_left_unchanged(tmp_path: Path) -> None:
    src = tmp_path / "r.sqlite"
    shutil.copy(NSYS_DIR / "host_overhead_fixed.sqlite", src)
    src.chmod(0o444)
    before = hashlib.sha256(src.read_bytes()).hexdigest()
    trace = open_report(src)
    for name in TABLES:
        trace.table(name)
    trace.close()
    assert hashlib.sha256(src.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.sqlite"]  # no -journal / -wal files


def test_kineto_totals_per_kernel_match_the_json() -> None:
    doc = json.loads(KINETO.read_text())
    expected: dict[str, int] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            expected[e["name"]] = expected.get(e["name"], 0) + round(e["dur"] * 1000)
    k = open_report(KINETO).table("kernels")
    got = (k["end"] - k["start"]).groupby(k["name"]).sum().to_dict()
    assert got == expected and len(k) == 5


def test_kineto_gz_and_tables(tmp_path: Path) -> None:
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(KINETO.read_bytes()))
    trace = open_report(gz)
    assert len(trace.table("memcpy")) == 10 and len(trace.table("memset")) == 5
    assert len(trace.table("cpu_ops")) == 45
    assert set(trace.table("memcpy")["srcKindName"]) == {"Pageable", "Device"}
    assert trace.table("gpus")["name"].tolist() == ["NVIDIA H200"]
    assert not trace.has("sync")


BAD_INPUTS = {
    "empty.sqlite": b"",
    "trunc.sqlite": None,  # filled from a real file below
    "notnsys.sqlite": None,
    "notatrace.json": b'{"hello": [1, 2, 3]}',
    "broken.json": b'{"traceEvents": [ {"ph": "X", ',
    "fake.nsys-rep": b"this is not a report at all",
    "random.bin": bytes(range(256)) * 4,
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_inputs_raise_one_clear_sentence(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    if name == "trunc.sqlite":
        path.write_bytes((NSYS_DIR / "host_overhead_naive.sqlite").read_bytes()[:20000])
    elif name == "notnsys.sqlite":
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE people (name TEXT)")
        con.commit()
        con.close()
    else:
        path.write_bytes(BAD_INPUTS[name] or b"")
    before = path.read_bytes()
    with pytest.raises(ReportError) as info:
        trace = open_report(path)
        for t in TABLES:
            trace.table(t)
    msg = str(info.value)
    assert str(path) in msg or path.name in msg
    assert "\n" not in msg and msg.endswith(".")
    assert path.read_bytes() == before


def test_missing_path_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="does not exist"):
        open_report(tmp_path / "nope.sqlite")
    with pytest.raises(ReportError, match="is a directory"):
        open_report(tmp_path)


def test_sniff_kind_by_content(tmp_path: Path) -> None:
    assert sniff_kind(NSYS_DIR / "host_overhead_naive.sqlite") == "sqlite"
    assert sniff_kind(NSYS_DIR / "host_overhead_naive.nsys-rep") == "nsys-rep"
    assert sniff_kind(KINETO) == "json"
    renamed = tmp_path / "trace.dat"
    renamed.write_bytes((NSYS_DIR / "host_overhead_naive.sqlite").read_bytes())
    assert sniff_kind(renamed) == "sqlite"


@pytest.mark.parametrize("path", NSYS_SQLITE, ids=lambda p: p.stem)
def test_columnar_and_prefetched_reads_equal_row_reads(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Big tables are read column-wise (group_concat) and optionally prefetched in threads; the
    fixtures are small, so force those paths and compare with the plain row-wise read."""
    import pandas as pd

    from engine.reports.nsys import export_tables

    plain = open_report(path)
    expected = {t: plain.table(t) for t in ("kernels", "memcpy", "memset", "api", "nvtx")}
    monkeypatch.setattr(export_tables, "_COLUMNAR_MIN_ROWS", 1)
    for prefetch in (False, True):
        trace = open_report(path)
        if prefetch:
            trace.prefetch({"api": ["start", "end", "name"], "kernels": ["start", "end", "name"]})
        for t, df in expected.items():
            got = trace.table(t)

            def norm(d: pd.DataFrame) -> pd.DataFrame:
                # An all-NULL column is None objects row-wise and NaN column-wise: both "missing".
                return d.astype(object).where(d.notna(), None)

            pd.testing.assert_frame_equal(norm(got), norm(df), check_dtype=False, obj=f"{path.stem}.{t}")


@pytest.mark.parametrize("path", NSYS_SQLITE, ids=lambda p: p.stem)
def test_row_count_equals_the_loaded_tables(path) -> None:
    # Counted in SQLite (the window does this on open) and by loading: the same for every table.
    from engine.reports import open_report
    from engine.reports.base import TABLES

    with open_report(path) as counted, open_report(path) as loaded:
        got = {n: counted.row_count(n) for n in TABLES}
        want = {n: (len(loaded.table(n)) if loaded.has(n) else None) for n in TABLES}
    assert got == want
    assert any(got.values())  # (the legacy partial capture has no kernels at all)
