"""Rank analysis: the step partition checked against SQL on a real report, rank numbering, bad input.
(The 2-GPU NCCL recordings are checked in test_ranks_recordings.py.)"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.analysis.ranks import SCHEMA, analyze_paths
from engine.system.errors import KernelscopeError
from tests.conftest import FIXTURES

NAIVE = FIXTURES / "nsys" / "host_overhead_naive.sqlite"


def _union_inside(intervals: list[tuple[int, int]], lo: int, hi: int) -> int:
    """Covered length of [lo, hi) by the intervals: a plain sweep, independent of the engine's code."""
    clipped = sorted((max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi)
    total, cur_a, cur_b = 0, None, None
    for a, b in clipped:
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    return total + (cur_b - cur_a if cur_b is not None else 0)


def test_step_partition_matches_sql_on_a_real_report() -> None:
    res = analyze_paths([NAIVE])
    [row] = res.ranks
    con = sqlite3.connect(f"file:{NAIVE}?mode=ro", uri=True)
    host_steps = con.execute("SELECT n.start, n.end FROM NVTX_EVENTS n "
                             "LEFT JOIN StringIds s ON s.id = n.textId "
                             "WHERE coalesce(s.value, n.text) = 'iteration(naive)' "
                             "ORDER BY n.start").fetchall()
    # the steps' windows on the GPU (found from its work, placed by the range): one per host range
    from engine.analysis.steps import find_steps
    from engine.reports import open_report

    st = find_steps(open_report(NAIVE))
    steps = list(zip(st.starts_ns.tolist(), st.ends_ns.tolist(), strict=True))
    assert len(steps) == len(host_steps)
    gpu = con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL SELECT start, end FROM "
                      "CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL SELECT start, end FROM "
                      "CUPTI_ACTIVITY_KIND_MEMSET").fetchall()
    utc = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]
    host = con.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'").fetchone()[0]
    pid = con.execute("SELECT DISTINCT globalPid / 16777216 % 16777216 FROM CUPTI_ACTIVITY_KIND_KERNEL")\
        .fetchall()
    assert (row.rank, row.pid, row.device, row.host, row.steps) == (0, pid[0][0], 0, host, len(steps))
    assert row.step_range == "iteration(naive)" and res.straggler is None
    zero = res.clock.job_start_utc_ns - utc  # the job clock's zero on the report's clock
    assert len(row.per_step) == len(steps)
    for cost, (lo, hi) in zip(row.per_step, steps, strict=True):
        assert (cost.start_ns + zero, cost.end_ns + zero) == (lo, hi)
        busy = _union_inside(gpu, lo, hi)
        assert cost.compute_ns == busy and cost.nccl_ns == 0 and cost.nccl_wait_ns == 0
        assert cost.idle_ns == (hi - lo) - busy
    assert [c.warmup for c in row.per_step] == [s.warmup for s in st.steps]
    steady = [c for c in row.per_step if not c.warmup]
    assert row.compute_ns == sum(c.compute_ns for c in steady)
    assert row.compute_ns + row.nccl_ns + row.idle_ns == sum(c.duration_ns for c in steady)
    doc = res.to_json()
    assert doc["schema"] == SCHEMA == "kernelscope.ranks/1"
    for key in ("rank", "report", "pid", "device", "host", "steps", "step_median_ns", "compute_ns", "nccl_ns",
                "nccl_wait_ns", "idle_ns"):
        assert key in doc["ranks"][0]
    assert doc["straggler"] is None and doc["collectives"] == []
    json.dumps(doc, allow_nan=False)


def test_rank_numbers_come_from_file_names(tmp_path: Path) -> None:
    for n in (3, 1):
        (tmp_path / f"job_rank{n}.sqlite").symlink_to(NAIVE)
    res = analyze_paths([tmp_path / "job_rank3.sqlite", tmp_path / "job_rank1.sqlite"])
    assert [(r.rank, Path(r.report).name) for r in res.ranks] == [(1, "job_rank1.sqlite"),
                                                                   (3, "job_rank3.sqlite")]
    assert res.ranks[0].per_step == res.ranks[1].per_step  # same recording, same clock
    assert "2 reports on 1 host placed on one clock by their session start (UTC)" in res.clock.sentence
    assert any("No NCCL kernels" in n for n in res.notes)


def test_no_gpu_work_is_one_sentence() -> None:
    legacy = FIXTURES / "nsys" / "legacy2022_partial_naive.sqlite"
    with pytest.raises(KernelscopeError, match=r"No GPU work was found in legacy2022_partial_naive\.sqlite"):
        analyze_paths([legacy])
    res = subprocess.run([sys.executable, "-m", "engine.cli", "ranks", str(legacy), "/etc/hostname"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and res.stderr.startswith("kernelscope: ")


def _rank_input(rank: int, calls: dict[str, int], kernels: list[str]) -> Any:
    """A rank with only what the NCCL call/kernel comparison reads (no timings)."""
    from collections import Counter

    import numpy as np

    from engine.analysis.ranks.load import RankInput

    empty = np.zeros(0, dtype=np.int64)
    return RankInput(report=f"job_rank{rank}.sqlite", pid=rank, device=rank, host=None, offset_ns=0,
                     compute_start=empty, compute_end=empty, nccl_start=empty, nccl_end=empty,
                     nccl_launch=empty, nccl_name=kernels, api_start=empty, api_end=empty, steps=None,
                     calls=Counter(calls), rank=rank)


def test_nvtx_and_kernel_disagreements_are_one_sentence_with_the_details_apart() -> None:
    """Sixty disagreements on eight ranks are one note (count and one example); the list is in details.

    AllToAll, Send and Recv calls run as SendRecv kernels (several grouped calls as one): no
    disagreement while such kernels ran.
    """
    from engine.analysis.ranks.analyze import _call_notes

    inputs = [_rank_input(r, {"AllReduce": 10, "Broadcast": 2, "AllGather": 3 + r, "ReduceScatter": 5,
                              "Reduce": 1, "Gather": 1, "Scatter": 1, "AllToAll": 4},
                          ["ncclDevKernel_AllReduce_Sum_f32_RING_LL"] * 9) for r in range(8)]
    notes, details = _call_notes(inputs)
    assert len(details) == 8 * 6 and len(notes) == 1  # 6 operations off per rank, p2p counted once
    assert notes[0].startswith("The NCCL NVTX ranges and the NCCL kernels disagree on 48 operation(s) over 8 "
                               "rank(s) (e.g. rank 0: 3 AllGather call(s) but 0 kernel(s); 47 more in the "
                               "details)")
    assert "Rank 0: 6 point-to-point (AllToAll, Send, Recv, ...) call(s) but 0 kernel(s)" in details
    grouped = [_rank_input(0, {"AllToAll": 12, "Send": 3, "AllReduce": 2},
                           ["ncclDevKernel_SendRecv"] + ["ncclDevKernel_AllReduce_Sum_f32_RING_LL"] * 2)]
    assert _call_notes(grouped) == ([], [])


def test_nccl_calls_name_the_operation_not_its_arguments() -> None:
    """``ncclAllToAll, opId=7`` is an AllToAll call (one key per operation, not per opId); NCCL's other
    ranges (communicators, groups, memory) and the profiler's variants count as their operation."""
    import pandas as pd

    from engine.analysis.ranks.load import nccl_calls

    texts = [("NCCL", f"ncclAllToAll, opId={i}") for i in range(30)] + [
        ("NCCL", "ncclAllReduce"), ("NCCL", "ncclGroupStart"), ("NCCL", "ncclGroupEnd"),
        ("NCCL", "ncclCommInitRankConfig"), ("NCCL", "ncclMemAlloc"), ("", "nccl:all_reduce"),
        ("", "nccl:_all_gather_base"), ("", "nccl:all_to_all_single"), ("", "not nccl")]

    class Trace:
        def table(self, name: str, columns: list[str]) -> pd.DataFrame:
            assert name == "nvtx"
            return pd.DataFrame({"text": [t for _, t in texts], "domain": [d for d, _ in texts],
                                 "pid": [7] * len(texts), "eventType": [59] * len(texts)})

    assert dict(nccl_calls(Trace(), "7")) == {"AllToAll": 31, "AllReduce": 2, "AllGather": 1}  # type: ignore[arg-type]
