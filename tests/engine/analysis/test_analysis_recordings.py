"""Issue 13 on the H100 recordings: shares ≤ 100 %, steps by structure, gains within their windows.

tests/data/recordings (README there): a 2-GPU DDP job with rank 1 slowed by a 20 ms host sleep per
step (one report per rank, one around torchrun, multi-rank Kineto traces), a training loop bad and
fixed, a 4-stream CUDA program, two processes on one GPU. Every number is checked against an
independent SQL query on the export (or the workload's own per-step log).
"""

from __future__ import annotations

import json
import lzma
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from engine.analysis.findings.overview import combined, overview
from engine.reports import open_report
from tests.engine.analysis.test_summary import _sql_union, assert_shares_bounded

REC = Path(__file__).resolve().parents[2] / "data" / "recordings" / "nsys"
NSYS = {"ddp_torchrun": "ddp", "ddp_rank0": "ddp", "ddp_rank1": "ddp", "train_bad": "single",
        "train_fixed": "single", "multistream": "multistream", "twoproc": "twoproc",
        "train_hostbound300": "single"}
KINETO = {"ddp_kineto_rank0_kineto": "ddp", "ddp_kineto_rank1_kineto": "ddp",
          "train_bad_kineto": "single", "train_fixed_kineto": "single"}

PID = "globalPid / 16777216 % 16777216 = ?"  # pid = (globalPid >> 24) & 0xFFFFFF

pytestmark = pytest.mark.skipif(not (REC / "ddp" / "ddp_torchrun.sqlite.xz").exists(),
                                reason="the H100 recordings are not in tests/data/recordings")


@pytest.fixture(scope="module")
def rec(tmp_path_factory: pytest.TempPathFactory):
    """name -> decompressed path (unpacked on first use)."""
    folder = tmp_path_factory.mktemp("rec13")
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            if name in NSYS:
                src, out = REC / NSYS[name] / f"{name}.sqlite.xz", folder / f"{name}.sqlite"
            else:
                src, out = REC / KINETO[name] / f"{name}.json.xz", folder / f"{name}.json"
            out.write_bytes(lzma.decompress(src.read_bytes()))
            cache[name] = out
        return cache[name]

    return get


def _sql(path: Path, query: str, args: tuple = ()) -> list[tuple]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(query, args).fetchall()
    finally:
        con.close()


def _gpu_rows(path: Path, where: str, args: tuple = ()) -> list[tuple]:
    rows: list[tuple] = []
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        try:
            rows += _sql(path, f'SELECT start, "end" FROM {t} WHERE {where}', args)
        except sqlite3.OperationalError:  # the export has no such table (no memsets recorded)
            pass
    return rows


def _step_ranges(path: Path, pid: int, like: str) -> list[tuple[int, int]]:
    return _sql(path, """SELECT n.start, n."end" FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
                         WHERE n.eventType IN (59, 60) AND coalesce(s.value, n.text) LIKE ?
                         AND n.globalTid / 16777216 % 16777216 = ? ORDER BY n.start""", (like, pid))


def _check_gains(s, found) -> None:
    """No gain exceeds its window; warm-up and start-up costs are never critical; strict JSON."""
    wall = s.wall.span_ns
    json.dumps([f.to_json() for f in found], allow_nan=False)
    for f in found:
        g = f.gain
        if g is None or g.seconds is None:
            continue
        assert g.seconds * 1e9 <= wall * (1 + 1e-9), f.id
        assert g.pct_of_wall is None or g.pct_of_wall <= 100, f.id
        if g.per_step_ns is not None:
            assert g.window == "steady steps" and g.per_step_ns <= g.window_ns, f.id
            assert g.pct_of_step is not None and g.pct_of_step <= 100, f.id
        if g.one_time:
            assert f.severity != "critical", f.id
    both = combined(s, found)
    assert both.seconds * 1e9 <= wall * (1 + 1e-9)
    if both.per_step_ns is not None:
        assert s.iterations is not None and both.per_step_ns <= s.iterations.steady_median_ns


@pytest.mark.parametrize("name", [*NSYS, *KINETO])
def test_every_share_and_gain_stays_within_its_whole(rec, name) -> None:
    s, found = overview(open_report(rec(name)))
    assert_shares_bounded(s)
    _check_gains(s, found)
    assert s.iterations is not None, "every recording has a step range"


def test_ddp_torchrun_one_row_per_gpu_and_process_with_unions_from_sql(rec) -> None:
    path = rec("ddp_torchrun")
    s, found = overview(open_report(path))
    assert s.gpu.device_count == 2 and [d.device for d in s.gpu.devices] == ["0", "1"]
    for d in s.gpu.devices:
        assert d.busy_ns == _sql_union(_gpu_rows(path, "deviceId = ?", (int(d.device),)))
        kern = next(p for p in d.parts if p.part == "kernels")
        assert kern.union_ns == _sql_union(_sql(
            path, 'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = ?',
            (int(d.device),)))
        assert kern.union_ns <= d.busy_ns < kern.total_ns + d.busy_ns  # before: kernels summed > busy
    assert s.gpu.busy_ns == _sql_union(_gpu_rows(path, "1"))
    assert s.gpu.busy_sum_ns == sum(d.busy_ns for d in s.gpu.devices) > s.gpu.busy_ns
    ranks = [p for p in s.processes if p.devices]
    assert len(ranks) == 2 and sorted(d for p in ranks for d in p.devices) == ["0", "1"]
    for p in ranks:
        assert p.gpu_busy_ns == _sql_union(_gpu_rows(path, PID, (int(p.pid),)))
    # The step is the training step of each rank (before: NCCL:ncclCommInitRankConfig).
    it = s.iterations
    assert it is not None and it.range == "train_step N" and it.source == "nvtx"
    assert {p.pid for p in it.processes} == {p.pid for p in ranks}
    for ps in it.processes:
        rows = _step_ranges(path, int(ps.pid), "train_step %")
        assert ps.count == len(rows) == 40
        d = [e - b for b, e in rows]
        # timed on the GPU: within 1 % of the host ranges (the loop synchronizes every step)
        assert ps.steady_median_ns == pytest.approx(np.median(d[ps.warmup_count:]), rel=0.01)
        assert 1 <= ps.warmup_count <= 3  # the workload warms up for 3 steps; the first two are slow
    # The slow rank's GPU waits ~20 ms per step: the largest win, ranked first, named by process.
    top = found[0]
    slow = json.loads((REC / "ddp" / "ddp_torchrun_steps_rank1.json").read_text())
    assert top.id == "nsys.gpu-idle" and top.severity == "critical"
    assert top.gain.per_step_ns == pytest.approx(slow["injected_delay_ms"] * 1e6, rel=0.2)
    assert top.subject.startswith("pid ")


@pytest.mark.parametrize("name", ["ddp_rank0", "ddp_rank1"])
def test_per_rank_reports_pick_the_training_step_not_nccl(rec, name) -> None:
    path = rec(name)
    s, found = overview(open_report(path))
    it = s.iterations
    assert it is not None and it.range == "train_step N" and it.count == 40  # before: NCCL:ncclAllReduce
    assert "NCCL:ncclAllReduce" in it.candidates
    pid = int(it.pid)
    rows = _step_ranges(path, pid, "train_step %")
    # the first step on the GPU: from its first operation (its host range also holds the set-up
    # before it), slower than the steady ones (warm-up)
    assert it.steady_median_ns < it.first_ns <= [int(e - b) for b, e in rows][0]
    idle = [f for f in found if f.id == "nsys.gpu-idle" and not f.gain.one_time]
    if name == "ddp_rank1":  # the rank that sleeps 20 ms per step on the host
        log = json.loads((REC / "ddp" / "ddp_per_rank_steps_rank1.json").read_text())
        delay = log["injected_delay_ms"]
        assert found[0].id == "nsys.gpu-idle" and found[0].severity == "critical"
        assert idle[0].gain.per_step_ns == pytest.approx(delay * 1e6, rel=0.2)
    else:  # rank 0's GPU is busy (waiting in the all-reduce): no steady GPU-idle finding
        assert idle == []
        assert all(f.severity != "critical" for f in found)
    assert not any(f.id == "nsys.launch-bound" for f in found)


def test_kineto_ranks_use_profiler_steps_and_unions(rec) -> None:
    for name in ("ddp_kineto_rank0_kineto", "ddp_kineto_rank1_kineto"):
        s, _ = overview(open_report(rec(name)))
        it = s.iterations
        assert it is not None and it.range == "ProfilerStep#N" and it.source == "profiler" and it.count == 4
        kern = s.part("kernels")
        # before: kernels 105.7 ms = 106.7 % of the 99.1 ms capture (rank 0)
        assert kern is not None and kern.union_ns <= s.gpu.busy_ns <= s.wall.span_ns
        doc = json.loads(rec(name).read_text())
        ks = [(round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)) for e in doc["traceEvents"]
              if e.get("cat") == "kernel"]
        assert kern.union_ns == pytest.approx(_sql_union(ks), abs=len(ks))  # µs→ns rounding per event


def test_training_loop_bad_to_fixed_walkthrough_prediction(rec, tmp_path) -> None:
    from engine.sessions import walkthrough as wt

    bad, fixed = rec("train_bad"), rec("train_fixed")
    s, found = overview(open_report(bad))
    it = s.iterations
    assert it is not None and it.range == "train_step N" and it.count == 40
    ids = [f.id for f in found[:4]]
    assert {"nsys.pageable-copies", "nsys.per-iteration-alloc"} <= set(ids)
    pageable = next(f for f in found if f.id == "nsys.pageable-copies")
    assert pageable.severity == "critical" and pageable.gain.per_step_ns > 0
    wt.start(tmp_path, bad)
    doc = wt.pick(tmp_path, ["copies.pinned", "host.fewer-syncs", "host.allocate-once"])
    predicted = doc["picked"]["predicted_per_iteration_ns"]
    run = wt.verify(tmp_path, fixed)
    measured = run["measured_per_iteration_ns"]
    _stats = run["stats"]
    # Measured on the GPU: the period of each step's 12.6 MB batch copy (one per step), independent of
    # the steps found. The fixed loop's host runs ahead (its host ranges take 5.1 ms, its GPU 8.0 ms):
    # the host ranges would claim 8.5 ms saved where the GPU step shrank by 5.6 ms.
    def copy_period(path: Path) -> float:
        starts = [r[0] for r in _sql(path, "SELECT start FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1 "
                                           "AND bytes > 1000000 ORDER BY start")]
        return float(np.median(np.diff(starts)[3:]))

    assert measured == pytest.approx(copy_period(bad) - copy_period(fixed), rel=0.05)
    assert run["verdict"] == "verified"
    # Within a factor of two of what the re-run measured, and never above the step itself; also
    # against the workload's own step log (its 3 declared warm-up steps left out).
    assert measured / 2 <= predicted <= 2 * measured
    assert predicted <= it.steady_median_ns
    bad_ms = json.loads((REC / "single" / "train_bad_steps.json").read_text())["step_ms"]
    fixed_ms = json.loads((REC / "single" / "train_fixed_steps.json").read_text())["step_ms"]
    logged = (np.median(bad_ms[3:]) - np.median(fixed_ms[3:])) * 1e6  # host-side log: an upper bound
    assert predicted <= 2 * logged
    # The fixed run: nothing per step is left to fix; start-up and warm-up are one-time, never critical.
    s2, found2 = overview(open_report(fixed))
    assert all(f.severity == "info" for f in found2)
    assert all(f.gain is None or f.gain.one_time or (f.gain.pct_of_step or 0) < 5 for f in found2)


def test_multistream_steps_and_streams_from_sql(rec) -> None:
    path = rec("multistream")
    s, _ = overview(open_report(path))
    it = s.iterations
    assert it is not None and it.range == "iteration N" and it.count == 6  # before: "pageable copies"
    (dev,) = s.gpu.devices
    assert len(dev.streams) >= 4
    for st in dev.streams:
        assert st.busy_ns == _sql_union(_gpu_rows(path, "streamId = ? AND deviceId = 0", (int(st.stream),)))
    assert sum(st.busy_ns for st in dev.streams) > dev.busy_ns  # streams overlap: never added as a share


def test_two_processes_one_set_of_steps_each(rec) -> None:
    path = rec("twoproc")
    s, _ = overview(open_report(path))
    it = s.iterations
    assert it is not None
    names = {p.pid: p.range for p in it.processes}
    assert sorted(names.values()) == ["proc0 iter N", "proc1 iter N"]
    for ps in it.processes:
        rows = _step_ranges(path, int(ps.pid), ps.range.replace(" N", " %"))
        assert ps.count == len(rows) == 30
    for p in s.processes:
        assert p.gpu_busy_ns == _sql_union(_gpu_rows(path, PID, (int(p.pid),)))
        assert p.api_union_ns == _sql_union(_sql(
            path, 'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE '
            "globalTid / 16777216 % 16777216 = ?", (int(p.pid),)))


def test_html_export_of_the_two_gpu_job_agrees_with_the_summary(rec, tmp_path) -> None:
    import re

    from engine.analysis.findings.model import fmt_time
    from engine.cli.app import main

    out = tmp_path / "ddp.html"
    assert main(["export", str(rec("ddp_torchrun")), "--format", "html", "-o", str(out)]) == 0
    page = out.read_text()
    s, found = overview(open_report(rec("ddp_torchrun")))
    for d in s.gpu.devices:  # one row and one chart per GPU, with the busy union
        assert f"<td>{d.device} {d.name}</td><td>{fmt_time(d.busy_ns)}</td>" in page
        assert f"GPU {d.device} ({d.name}): time of each activity (union over streams)" in page
    assert f"busy time summed over the 2 GPUs: {fmt_time(s.gpu.busy_sum_ns)} (a sum" in page
    assert len(re.findall(r"<svg", page)) == 4  # API categories, GPU 0, GPU 1, bandwidth
    assert found[0].title in page


@pytest.mark.parametrize("name", ["train_hostbound300", "ddp_rank1"])
def test_gpu_idle_names_host_code_outside_the_cuda_api(rec, name) -> None:
    """A step whose CPU time is mostly outside CUDA calls (a PyTorch loop of tiny batches: Python and
    autograd between launches; the DDP rank that sleeps 20 ms per step) is called host-bound, with the
    CUDA API time of the steady steps checked against SQL and the graph/compile fix."""
    path = rec(name)
    s, found = overview(open_report(path))
    it = s.iterations
    assert it is not None and it.range == "train_step N"
    pid = int(it.pid)
    # the steady steps' windows (timed on the GPU: each within 1 % of its host range in this loop)
    from engine.analysis.steps import find_steps

    st = find_steps(open_report(path))
    steady = np.stack(st.window(steady_only=True), axis=1).astype(np.int64)
    host = np.array(_step_ranges(path, pid, "train_step %")[it.warmup_count:], dtype=np.int64)
    assert np.median(steady[:, 1] - steady[:, 0]) == pytest.approx(np.median(host[:, 1] - host[:, 0]),
                                                                   rel=0.01)
    calls = np.array(_sql(path, 'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE '
                                "globalTid / 16777216 % 16777216 = ?", (pid,)), dtype=np.int64)
    # calls belong to the step the host was issuing: the steps' host-side windows
    m = ~np.array([x.warmup for x in st.steps])
    hs = np.stack([np.asarray(st.host_starts)[m], np.asarray(st.host_ends)[m]], axis=1).astype(np.int64)
    k = np.searchsorted(hs[:, 0], calls[:, 0], side="right") - 1
    inside = (k >= 0) & (calls[:, 0] < hs[np.maximum(k, 0), 1])
    api_sql = int((calls[inside, 1] - calls[inside, 0]).sum())
    window_sql = int((steady[:, 1] - steady[:, 0]).sum())
    idle = next(f for f in found if f.id == "nsys.gpu-idle" and not f.gain.one_time)
    ev = {e.label: e.value for e in idle.evidence}
    assert ev["window"] == window_sql
    assert ev["CUDA API time in the steady steps (summed over threads)"] == api_sql
    assert ev["host time outside CUDA API calls (at least)"] == window_sql - api_sql
    assert "in host code outside them" in idle.summary and "torch.compile" in (idle.fix_torch or "")
    per_step_outside = (window_sql - api_sql) / len(steady)
    if name == "ddp_rank1":
        log = json.loads((REC / "ddp" / "ddp_per_rank_steps_rank1.json").read_text())
        assert per_step_outside >= 0.9 * log["injected_delay_ms"] * 1e6
    else:  # ~2.2 ms of Python per step against ~0.6 ms in CUDA calls
        assert per_step_outside > 3 * api_sql / len(steady)
