"""summarize(): the host-vs-GPU breakdown, checked against direct computations on the fixtures."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from engine.analysis.summary import api_category, interval_union_ns, summarize
from engine.reports import open_report
from tests.conftest import FIXTURES, NSYS_DIR, NSYS_SQLITE


def test_interval_union() -> None:
    s = np.array([0, 5, 20, 21, 30])
    e = np.array([10, 8, 25, 22, 31])
    total, bs, be = interval_union_ns(s, e)
    assert total == 10 + 5 + 1
    assert bs.tolist() == [0, 20, 30] and be.tolist() == [10, 25, 31]
    assert interval_union_ns(np.array([]), np.array([]))[0] == 0


@pytest.mark.parametrize(
    ("name", "cat"),
    [
        ("cudaMalloc_v3020", "allocation"), ("cudaFree", "allocation"),
        ("cudaHostAlloc_v3020", "allocation"), ("cuMemAlloc_v2", "allocation"),
        ("cudaMemcpy_v3020", "copies"), ("cudaMemsetAsync", "copies"),
        ("cudaDeviceSynchronize_v3020", "synchronization"), ("cudaStreamSynchronize", "synchronization"),
        ("cudaLaunchKernel_v7000", "launches"), ("cuLaunchKernelEx", "launches"),
        ("cudaStreamCreate", "setup"), ("cuLibraryLoadData", "setup"), ("cudaGetLastError", "other"),
    ],
)
def test_api_categories(name: str, cat: str) -> None:
    assert api_category(name) == cat


def _union_direct(path) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = []
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        try:
            rows += con.execute(f'SELECT start, "end" FROM {t}').fetchall()
        except sqlite3.OperationalError:
            pass
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(rows):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + ((cur_e - cur_s) if cur_e is not None else 0)


@pytest.mark.parametrize("path", NSYS_SQLITE, ids=lambda p: p.stem)
def test_summary_numbers_match_direct_sql(path) -> None:
    s = summarize(open_report(path))
    json.dumps(s)  # JSON-ready
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    api_total = con.execute('SELECT sum("end" - start) FROM CUPTI_ACTIVITY_KIND_RUNTIME').fetchone()[0]
    assert s["host"]["total_ns"] == api_total
    assert sum(c["total_ns"] for c in s["host"]["categories"]) == api_total
    assert s["gpu"]["busy_ns"] == _union_direct(path)
    assert s["gpu"]["busy_ns"] + s["gpu"]["idle_ns"] == s["wall"]["span_ns"]
    for b in s["bandwidth"]:
        assert b["gb_per_s"] == pytest.approx(b["bytes"] / b["total_ns"], abs=1e-3)


def test_naive_seed_findings() -> None:
    s = summarize(open_report(NSYS_DIR / "host_overhead_naive.sqlite"))
    assert s["wall"]["span_ns"] == 251_962_483
    bw = {(b["direction"], b["memory"]): b for b in s["bandwidth"]}
    h2d = bw[("Host-to-Device", "Pageable")]
    assert (h2d["count"], h2d["bytes"], h2d["total_ns"]) == (15, 503_316_480, 67_099_835)
    it = s["iterations"]
    assert it["range"] == ":iteration(naive)" and it["count"] == 5
    per_iter = {a["category"]: a for a in it["api_per_iteration"]}
    assert per_iter["allocation"]["calls"] == 50  # 5 cudaMalloc + 5 cudaFree per iteration
    one_time = {a["category"]: a for a in it["api_one_time"]}
    assert one_time["setup"]["total_ns"] >= 140_893_199  # cudaStreamCreate is outside the loop
    assert any("allocated inside every" in f for f in s["findings"])
    assert any("pageable" in f for f in s["findings"])


def test_fixed_run_has_pinned_copies_and_no_per_iteration_allocation() -> None:
    s = summarize(open_report(NSYS_DIR / "host_overhead_fixed.sqlite"))
    assert {b["memory"] for b in s["bandwidth"]} == {"Pinned"}
    per_iter = {a["category"] for a in s["iterations"]["api_per_iteration"]}
    assert "allocation" not in per_iter
    h2d = next(b for b in s["bandwidth"] if b["direction"] == "Host-to-Device")
    assert h2d["gb_per_s"] > 50  # H200 pinned copies ran at ~55 GB/s


def test_legacy_partial_says_it_is_partial() -> None:
    s = summarize(open_report(NSYS_DIR / "legacy2022_partial_naive.sqlite"))
    assert s["findings"][0].startswith("This capture has 11 CUDA API calls but no kernels")
    assert "2022.4.2.1" in s["findings"][0]


def test_kineto_summary() -> None:
    s = summarize(open_report(FIXTURES / "torch" / "torch_sdpa_trace.json"))
    kernels = next(p for p in s["gpu"]["parts"] if p["part"] == "kernels")
    assert kernels["count"] == 5
    assert {(b["direction"], b["memory"]) for b in s["bandwidth"]} == {
        ("Host-to-Device", "Pageable"), ("Device-to-Host", "Pageable"),
    }
