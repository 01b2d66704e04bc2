"""kernelscope batch on Dask: a real scheduler and workers on 127.0.0.1, a LocalCluster and no Dask at all
give the same table; a bad report is a row with its sentence; values match NVIDIA's oracles."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from engine.sessions.batch import jobs_of, run_batch
from tests.conftest import FIXTURES, ORACLES
from tests.engine.sessions.dask_cluster import DASK, dask_cluster

pytestmark = pytest.mark.skipif(not DASK.exists(), reason="dask[distributed] is not installed")
NSYS = FIXTURES / "nsys"
REPORTS = [str(NSYS / "host_overhead_naive.sqlite"), str(NSYS / "torch_sdpa_gemm.sqlite"),
           str(NSYS / "legacy2022_partial_naive.sqlite")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    with dask_cluster(tmp_path_factory.mktemp("dask")) as c:
        yield c


def _bad(tmp_path: Path) -> str:
    p = tmp_path / "broken.sqlite"
    p.write_bytes((NSYS / "host_overhead_fixed.sqlite").read_bytes()[:5000])  # truncated copy
    return str(p)


def _oracle_rows(name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((ORACLES / f"{name}_cuda_gpu_kern_sum.csv").read_text())))


def test_same_table_in_process_local_cluster_and_remote_scheduler(tmp_path: Path,
                                                                  cluster: tuple[str, Path]) -> None:
    address, sched_file = cluster
    reports = [*REPORTS, _bad(tmp_path)]
    seen: list[tuple[int, int]] = []
    here = run_batch("stats", reports, workers=0)
    remote = run_batch("stats", reports, scheduler=address, on_progress=lambda d, n, r: seen.append((d, n)))
    by_file = run_batch("stats", reports, scheduler_file=str(sched_file))
    local = run_batch("stats", reports, workers=2)
    for other in (remote, by_file, local):
        pd.testing.assert_frame_equal(here, other)
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    # values: NVIDIA's `nsys stats --report cuda_gpu_kern_sum` for the same reports
    for name in ("host_overhead_naive", "torch_sdpa_gemm"):
        got = here[here["report"] == str(NSYS / f"{name}.sqlite")]
        oracle = _oracle_rows(name)
        assert list(got["Name"]) == [r["Name"] for r in oracle]
        assert [int(x) for x in got["Total Time (ns)"]] == [int(r["Total Time (ns)"]) for r in oracle]
        assert [int(x) for x in got["Instances"]] == [int(r["Instances"]) for r in oracle]
    legacy = here[here["report"] == REPORTS[2]].iloc[0]
    assert "no rows" in legacy["note"] and pd.isna(legacy["error"])
    broken = here[here["report"] == reports[3]].iloc[0]
    assert "broken.sqlite" in broken["error"] and broken["error"].endswith(".")


def test_summary_rows_match_the_single_report_summary(cluster: tuple[str, Path]) -> None:
    from engine.analysis.summary import summarize
    from engine.reports.open import open_report

    table = run_batch("summary", REPORTS[:2], scheduler=cluster[0])
    for path, row in zip(REPORTS[:2], table.itertuples(), strict=True):
        s = summarize(open_report(path))
        doc = s.to_json() if hasattr(s, "to_json") else s
        assert (row.report, row.span_ns, row.gpu_busy_ns, row.api_calls) == \
            (path, doc["wall"]["span_ns"], doc["gpu"]["busy_ns"], doc["host"]["calls"])


def test_summary_findings_column_is_kernelscope_findings(cluster: tuple[str, Path]) -> None:
    """The 'findings' column counts what `kernelscope findings --json` lists for the same report."""
    table = run_batch("summary", REPORTS[:2], scheduler=cluster[0])
    here = run_batch("summary", REPORTS[:2], workers=0)
    pd.testing.assert_frame_equal(table, here)
    for path, row in zip(REPORTS[:2], table.itertuples(), strict=True):
        res = subprocess.run([sys.executable, "-m", "engine.cli", "findings", path, "--json"],
                             capture_output=True, text=True, timeout=120, check=False)
        assert res.returncode == 0, res.stderr
        ids = [f["id"] for f in json.loads(res.stdout)["findings"]]
        assert row.findings == len(ids) and row.top_finding == (ids[0] if ids else None)
    assert table["findings"].sum() > 0  # the plain summary gave 0 for every report


def test_cli_writes_parquet_and_csv_and_json(tmp_path: Path, cluster: tuple[str, Path]) -> None:
    cli = [sys.executable, "-m", "engine.cli", "batch", "stats", *REPORTS[:2]]
    pq, cv = tmp_path / "t.parquet", tmp_path / "t.csv"
    for out in (pq, cv):
        res = subprocess.run([*cli, "--scheduler-file", str(cluster[1]), "-o", str(out)], capture_output=True,
                             text=True, timeout=120, check=False)
        assert res.returncode == 0, res.stderr
        n = len(_oracle_rows("host_overhead_naive")) + len(_oracle_rows("torch_sdpa_gemm"))
        assert "2/2" in res.stderr and f"wrote {n} rows to {out}" in res.stderr
    a, b = pd.read_parquet(pq), pd.read_csv(cv)
    assert list(a["Name"]) == list(b["Name"]) and list(a["Total Time (ns)"]) == list(b["Total Time (ns)"])
    js = subprocess.run([*cli, "--workers", "0", "--json"], capture_output=True, text=True, timeout=120,
                        check=False)
    rows = json.loads(js.stdout)
    assert [r["Name"] for r in rows] == list(a["Name"])
    bad = subprocess.run([*cli, "--scheduler", "tcp://127.0.0.1:9", "--json"], capture_output=True, text=True,
                         timeout=120, check=False)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "Dask scheduler" in bad.stderr


def test_jobs_group_rank_files_and_drop_duplicate_exports() -> None:
    jobs = jobs_of(["/r/a_rank1.nsys-rep", "/r/a_rank0.sqlite", "/r/a_rank1.sqlite", "/r/a_rank10.sqlite",
                    "/r/a_rank2.sqlite", "/r/whole.sqlite", "/s/a_rank0.sqlite"])
    assert jobs == [["/r/a_rank0.sqlite", "/r/a_rank1.sqlite", "/r/a_rank2.sqlite", "/r/a_rank10.sqlite"],
                    ["/r/whole.sqlite"], ["/s/a_rank0.sqlite"]]


def test_ranks_table_of_the_ddp_recordings_same_locally_and_on_the_cluster(
        tmp_path_factory: pytest.TempPathFactory, cluster: tuple[str, Path]) -> None:
    from tests.engine.analysis import ddp_recordings as D

    if not D.available():
        pytest.skip("the 2-GPU DDP recordings are not in tests/data")
    folder = tmp_path_factory.mktemp("ddp_batch")
    files = [str(p) for p in D.unpack(folder, (*D.PER_RANK, *D.TORCHRUN, *D.KINETO))]
    here = run_batch("ranks", files, workers=0)
    remote = run_batch("ranks", files, scheduler=cluster[0])
    pd.testing.assert_frame_equal(here, remote)
    # three jobs (per-rank nsys, around torchrun, Kineto), two ranks each: report x rank
    assert len(here) == 6 and here["job"].nunique() == 3
    injected = D.truth(D.PER_RANK)["injected_delay_ms"] * 1e6
    for _job, rows in here.groupby("job"):
        assert list(rows["rank"]) == [0, 1] and list(rows["straggler"]) == [False, True]
        wait = int(rows["straggler_wait_per_step_ns"].iloc[0])
        assert abs(wait - injected) <= 0.2 * injected
    from engine.analysis.ranks import analyze_paths

    single = analyze_paths(files[:2])
    rows = here[here["job"] == str(Path(files[0]).parent / "ddp")]
    assert list(rows["nccl_wait_ns"]) == [r.nccl_wait_ns for r in single.ranks]


def test_findings_rows_are_the_single_report_findings(cluster: tuple[str, Path]) -> None:
    from engine.analysis.findings import findings_for

    table = run_batch("findings", REPORTS[:2], scheduler=cluster[0])
    want = [(p, f.to_dict()["id"], f.to_dict()["title"]) for p in REPORTS[:2] for f in findings_for(p)]
    assert list(zip(table["report"], table["id"], table["title"], strict=True)) == want and want


def test_cancel_stops_after_the_current_report() -> None:
    import threading

    from engine.sessions.batch import BatchError

    cancel = threading.Event()
    seen: list[int] = []

    def progress(done: int, total: int, report: str) -> None:
        seen.append(done)
        cancel.set()

    with pytest.raises(BatchError, match=r"^Cancelled after 1 of 3 reports\.$"):
        run_batch("summary", REPORTS, workers=0, on_progress=progress, cancel=cancel)
    assert seen == [1]
