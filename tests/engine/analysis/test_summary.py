"""summarize(): the host-vs-GPU breakdown, checked against direct computations on the fixtures."""

from __future__ import annotations

import json
import lzma
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from engine.analysis.summary import api_category, interval_union_ns, summarize
from engine.reports import open_report
from tests.conftest import FIXTURES, NSYS_DIR, NSYS_SQLITE

RECORDINGS = Path(__file__).resolve().parents[2] / "data" / "recordings"


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


def _sql_union(rows) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(rows):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + ((cur_e - cur_s) if cur_e is not None else 0)


def assert_shares_bounded(s) -> None:
    """Every share of a whole is at most 100 %, and every union at most its whole."""
    doc = s.to_json()
    json.dumps(doc, allow_nan=False)  # strict JSON

    def walk(node, path=""):
        if isinstance(node, dict):
            for k, v in node.items():
                if k.startswith("pct_") or k.endswith("_pct_of_wall") or k == "pct_of_gpu_busy":
                    assert v is None or 0 <= v <= 100.0, f"{path}.{k} = {v}"
                walk(v, f"{path}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]")

    walk(doc)
    wall = s.wall.span_ns
    assert s.host.union_ns <= wall and s.gpu.busy_ns <= wall
    assert sum(c.attributed_ns for c in s.host.categories) == s.host.union_ns
    for c in s.host.categories:
        assert c.union_ns <= s.host.union_ns
    for t in s.host.threads:
        assert t.union_ns <= wall
    for d in s.gpu.devices:
        assert d.busy_ns <= wall
        assert sum(p.attributed_ns for p in d.parts) == d.busy_ns  # the stacked bar is exactly busy
        for p in d.parts:
            assert p.union_ns <= d.busy_ns
        for st in d.streams:
            assert st.busy_ns <= d.busy_ns
    assert s.gpu.busy_sum_ns == sum(d.busy_ns for d in s.gpu.devices) >= s.gpu.busy_ns
    for p in s.processes:
        assert p.api_union_ns <= wall and p.gpu_busy_ns <= wall


@pytest.mark.parametrize("path", NSYS_SQLITE, ids=lambda p: p.stem)
def test_summary_numbers_match_direct_sql(path) -> None:
    s = summarize(open_report(path))
    assert_shares_bounded(s)
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    api_total = con.execute('SELECT sum("end" - start) FROM CUPTI_ACTIVITY_KIND_RUNTIME').fetchone()[0]
    assert s.host.total_ns == api_total
    assert sum(c.total_ns for c in s.host.categories) == api_total
    assert s.host.union_ns == _sql_union(con.execute('SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_RUNTIME'))
    threads = con.execute("SELECT DISTINCT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchall()
    assert s.host.thread_count == len(threads)
    for (gtid,) in threads:
        row = next(t for t in s.host.threads if t.tid == str(gtid % (1 << 24)))
        assert row.union_ns == _sql_union(con.execute(
            'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE globalTid = ?', (gtid,)))
    assert s.gpu.busy_ns == _union_direct(path)
    assert s.gpu.busy_ns + s.gpu.idle_ns == s.wall.span_ns
    for d in s.gpu.devices:
        rows = []
        for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
            try:
                rows += con.execute(f'SELECT start, "end" FROM {t} WHERE deviceId = ?',
                                    (int(d.device),)).fetchall()
            except sqlite3.OperationalError:
                pass
        assert d.busy_ns == _sql_union(rows)
    for b in s.bandwidth:
        assert b.gb_per_s == pytest.approx(b.bytes / b.total_ns, abs=1e-3)


def test_naive_breakdown_and_steps() -> None:
    s = summarize(open_report(NSYS_DIR / "host_overhead_naive.sqlite"))
    assert s.wall.span_ns == 251_962_483
    bw = {(b.direction, b.memory): b for b in s.bandwidth}
    h2d = bw[("Host-to-Device", "Pageable")]
    assert (h2d.count, h2d.bytes, h2d.total_ns) == (15, 503_316_480, 67_099_835)
    it = s.iterations
    assert it is not None and it.range == "iteration(naive)" and it.count == 5 and it.warmup_count == 0
    per_iter = {a.category: a for a in it.api_per_iteration}
    # on the GPU no iteration is warm-up (the first is 1.42x the median): 5 cudaMalloc + 5 cudaFree
    # in each of the 5 steps (the steps tile the GPU's time from the first iteration's first copy)
    assert per_iter["allocation"].calls in (40, 45, 50)
    assert not it.api_warmup or "allocation" not in {a.category for a in it.api_warmup}
    one_time = {a.category: a for a in it.api_one_time}
    assert one_time["setup"].total_ns >= 140_893_199  # cudaStreamCreate is outside the loop
    assert it.candidates[0] == "iteration(naive)" and "upload" in it.candidates
    assert s.findings == ()  # the findings engine fills them (findings.overview)


def test_fixed_run_has_pinned_copies_and_no_per_iteration_allocation() -> None:
    s = summarize(open_report(NSYS_DIR / "host_overhead_fixed.sqlite"))
    assert {b.memory for b in s.bandwidth} == {"Pinned"}
    assert s.iterations is not None
    assert "allocation" not in {a.category for a in s.iterations.api_per_iteration}
    h2d = next(b for b in s.bandwidth if b.direction == "Host-to-Device")
    assert h2d.gb_per_s > 50  # H200 pinned copies ran at ~55 GB/s


def test_overview_puts_the_engines_top_findings_in_the_summary() -> None:
    from engine.analysis.findings.overview import overview

    s, found = overview(open_report(NSYS_DIR / "legacy2022_partial_naive.sqlite"))
    assert [f.id for f in s.findings] == [f.id for f in found[: len(s.findings)]]
    assert s.findings[0].id == "capture.incomplete"
    assert "2022.4.2.1" in s.findings[0].text


def test_kineto_summary() -> None:
    s = summarize(open_report(FIXTURES / "torch" / "torch_sdpa_trace.json"))
    assert_shares_bounded(s)
    kernels = s.part("kernels")
    assert kernels is not None and kernels.count == 5
    assert {(b.direction, b.memory) for b in s.bandwidth} == {
        ("Host-to-Device", "Pageable"), ("Device-to-Host", "Pageable"),
    }


def test_cli_summary_json_is_strict_and_takes_a_range(capsys) -> None:
    from engine.cli.app import main

    naive = NSYS_DIR / "host_overhead_naive.sqlite"
    assert main(["summary", str(naive), "--json", "--range", "upload"]) == 0
    doc = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"non-strict {c}"))
    assert doc["schema"] == "kernelscope.summary/2"
    it = doc["iterations"]
    assert it["range"] == "upload" and it["chosen_by"] == "user" and it["count"] == 5
    assert doc["findings"] and doc["findings"][0]["id"] == "nsys.pageable-copies"
    assert main(["summary", str(naive)]) == 0
    text = capsys.readouterr().out
    assert "Steps of iteration(naive)" in text and "other repeating ranges (--range): upload" in text
    assert "summed over streams" in text and "% of busy" in text


def test_phases_per_step_fit_in_the_step_and_first_step_extra_is_never_negative(tmp_path) -> None:
    """A phase's per-step time is measured in the steady steps only, so it fits in the step.

    legacy2022_partial_naive: "allocate" used to read 57.7 ms per step in a 21.5 ms step (its sum over
    every step, the long last one included, divided by the count).
    """
    s = summarize(open_report(NSYS_DIR / "legacy2022_partial_naive.sqlite"))
    it = s.iterations
    assert it is not None and it.phases
    for ph in it.phases:
        assert 0 <= ph.per_iteration_ns <= it.steady_median_ns, ph
    assert it.first_iteration_extra_ns is None or it.first_iteration_extra_ns >= 0
    # a Kineto trace whose first step is faster than the steady median (it read -5.18 ms)
    trace = tmp_path / "torch_train.json"
    trace.write_bytes(lzma.decompress((RECORDINGS / "torch" / "torch_train.json.xz").read_bytes()))
    its = summarize(open_report(trace)).iterations
    assert its is not None and its.first_iteration_extra_ns == 0
    assert its.first_ns < its.median_after_first_ns  # (faster: nothing extra to say)


def test_overlapping_parts_say_so_and_their_attributed_shares_add_up_to_busy(tmp_path) -> None:
    """Copies under kernels: the parts' union shares add up to 156 % of busy; the text says why."""
    from engine.analysis.summary import format_summary
    from engine.analysis.summary_text import fmt_time

    db = tmp_path / "multistream.sqlite"
    xz = RECORDINGS / "nsys" / "multistream" / "multistream.sqlite.xz"
    db.write_bytes(lzma.decompress(xz.read_bytes()))
    s = summarize(open_report(db))
    parts = s.gpu.devices[0].parts
    assert sum(p.pct_of_busy or 0 for p in parts) > 150
    assert all(0 <= (p.pct_of_busy or 0) <= 100 for p in parts)
    assert sum(p.attributed_pct_of_busy or 0 for p in parts) == pytest.approx(100, abs=0.05)
    busy = s.gpu.devices[0].busy_ns
    for p in parts:
        assert p.attributed_pct_of_busy == pytest.approx(100 * p.attributed_ns / busy, abs=0.01)
    text = format_summary(s)
    assert "the parts overlap in time, so their shares add up to 156.5 % of busy" in text
    assert "None" not in text and "e-0" not in text
    assert "(bytes over the copies' durations summed; the union is the part's time above)" in text
    # the same copies, one value each: the bandwidth row's union is the GPU part's, its sum a sum
    by_part = {p.part: p for p in s.gpu.parts}
    for b in s.bandwidth:
        part = by_part[f"memcpy {b.direction} ({b.memory})"]
        assert b.union_ns == part.union_ns <= b.total_ns == part.total_ns
        assert f"{fmt_time(b.total_ns)} summed, {fmt_time(b.union_ns)} union)" in text


def test_a_kineto_trace_starts_at_zero_whatever_event_comes_first(tmp_path) -> None:
    """Times are relative to the earliest event of any kind: no ``wall.start_ns = -3000``."""
    base = 4_900_000_000.0
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "ts": 0, "args": {"name": "python"}},  # arbitrary ts
        {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": base - 3.0, "s": "t",
         "args": {"Device Type": 1, "Device Id": 0, "Total Allocated": 0, "Total Reserved": 0, "Bytes": 0}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": base,
         "dur": 5.0, "args": {"correlation": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": base + 10.0,
         "dur": -12.0, "args": {"correlation": 8}},  # a negative duration: ends before the first event
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": base + 6.0, "dur": 20.0,
         "args": {"device": 0, "stream": 7, "correlation": 7}},
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    t = open_report(path)
    for name in ("api", "kernels"):
        df = t.table(name, ["start", "end"])
        assert (df["start"] >= 0).all() and (df["end"] >= 0).all(), name
    s = summarize(t)
    assert s.wall.start_ns >= 0 and s.wall.span_ns >= 0
    # the origin is the memory event, 3 µs before the first call; the kernel starts 6 µs after that call
    assert t.table("kernels", ["start"])["start"].iloc[0] == 9_000
