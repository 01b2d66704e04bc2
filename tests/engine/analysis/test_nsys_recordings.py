"""Every nsys stats report and analyze rule we print, against nsys 2025.3.1 on the H100 recordings.

tests/data/recordings/nsys/<set>/<name>.sqlite.xz are real exports (a 2-GPU DDP job per rank and
whole-job, a training loop bad/fixed, a multi-stream CUDA program with NVTX push/pop and start/end,
OS runtime and unified memory, a 2-process report); oracles/<name>/<name>_<report>.csv.xz is what
`nsys stats -r <report> --format csv` / `nsys analyze -r <rule> --format csv` printed for each
(an empty file when nsys found nothing). Our text must be the same bytes.
"""

from __future__ import annotations

import lzma
import subprocess
import sys
from pathlib import Path

import pytest

from engine.analysis.nsys import analyze, stats
from engine.reports import open_report
from engine.reports.base import Trace
from tests.conftest import REPO

RECORDINGS = REPO / "tests" / "data" / "recordings" / "nsys"
ORACLE_DIRS = sorted(RECORDINGS.glob("*/oracles/*"))


def _cases() -> list[object]:
    out: list[object] = []
    for od in ORACLE_DIRS:
        stem = od.name
        if not (od.parent.parent / f"{stem}.sqlite.xz").exists():
            continue
        for f in sorted(od.glob(f"{stem}_*.csv.xz")):
            name = f.name[len(stem) + 1: -len(".csv.xz")]
            if name in stats.REPORTS or name in analyze.RULES:
                out.append(pytest.param(stem, name, f, id=f"{stem}-{name}"))
    return out


CASES = _cases()
_traces: dict[str, Trace] = {}


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recordings' SQLite exports, decompressed once."""
    folder = tmp_path_factory.mktemp("recordings")
    for xz in RECORDINGS.glob("*/*.sqlite.xz"):
        (folder / xz.name[: -len(".xz")]).write_bytes(lzma.decompress(xz.read_bytes()))
    return folder


def _trace(exports: Path, stem: str) -> Trace:
    if stem not in _traces:
        _traces[stem] = open_report(exports / f"{stem}.sqlite")
    return _traces[stem]


def test_the_recordings_cover_the_new_reports() -> None:
    if not CASES:
        pytest.skip("tests/data/recordings has no nsys oracles in this checkout")
    names = {c.values[1] for c in CASES}  # type: ignore[attr-defined]
    assert {"cuda_api_trace", "cuda_kern_exec_trace", "cuda_gpu_kern_gb_sum", "nvtx_pushpop_sum",
            "nvtx_startend_sum", "osrt_sum", "um_sum", "um_total_sum", "um_cpu_page_faults_sum",
            "cuda_memcpy_async", "gpu_time_util", "nvtx_pushpop_trace", "nvtx_kern_sum",
            "nvtx_gpu_proj_trace", "nvtx_gpu_proj_sum"} <= names


@pytest.mark.parametrize(("stem", "name", "oracle"), CASES)
def test_matches_nsys_2025(exports: Path, stem: str, name: str, oracle: Path) -> None:
    want = lzma.decompress(oracle.read_bytes()).decode()
    trace = _trace(exports, stem)
    if name in stats.REPORTS:
        got = stats.to_csv(stats.run_report(trace, name))
    else:
        got = analyze.to_csv(analyze.run_rule(trace, name))
    assert got == want


@pytest.mark.parametrize("stem", sorted({c.values[0] for c in CASES}))  # type: ignore[attr-defined]
def test_fast_paths_match_nsys_2025(exports: Path, stem: str) -> None:
    """The pandas-free core reports, the vectorised traces, the numpy NVTX and grid/block reports
    and the reports told empty from the schema print the oracles' bytes."""
    od = next(d for d in ORACLE_DIRS if d.name == stem)
    names = ["cuda_api_sum", "cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum",
             "nvtx_sum", "cuda_api_gpu_sum", "cuda_gpu_sum", "cuda_gpu_trace", "cuda_api_trace",
             "cuda_kern_exec_trace", "cuda_gpu_kern_gb_sum", "nvtx_kern_sum", "nvtx_pushpop_trace",
             "osrt_sum", "um_sum", "um_total_sum", "um_cpu_page_faults_sum", "nvtx_startend_sum"]
    fast = dict(stats.run_many(open_report(exports / f"{stem}.sqlite"), names, "csv"))
    for name, table in fast.items():
        want = lzma.decompress((od / f"{stem}_{name}.csv.xz").read_bytes()).decode()
        assert stats.to_csv(table) == want, name


def test_cli_writes_empty_files_for_reports_without_rows(exports: Path, tmp_path: Path) -> None:
    """nsys writes PREFIX_<report>.csv even when the report has no rows; so do we."""
    db = exports / "twoproc.sqlite"
    if not db.exists():
        pytest.skip("the 2-process recording is not in this checkout")
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "engine.cli", "stats", str(db), "-f", "csv", "-o", str(out),
         "-r", "nvtx_startend_sum,um_sum,cuda_api_sum"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out_nvtx_startend_sum.csv").read_bytes() == b""
    assert (tmp_path / "out_um_sum.csv").read_bytes() == b""
    assert (tmp_path / "out_cuda_api_sum.csv").stat().st_size > 100
    assert "nvtx_startend_sum: skipped" in r.stderr


def test_mpi_data_gets_one_sentence(exports: Path, tmp_path: Path) -> None:
    """Without MPI data the MPI reports are empty (as nsys prints them); with it, one sentence."""
    import shutil
    import sqlite3

    db = tmp_path / "mpi.sqlite"
    shutil.copy(exports / "twoproc.sqlite", db)
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE MPI_P2P_EVENTS (start INTEGER, \"end\" INTEGER)")
    r = subprocess.run([sys.executable, "-m", "engine.cli", "stats", str(db), "-r", "mpi_event_sum"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "nsys stats -r mpi_event_sum" in r.stderr
