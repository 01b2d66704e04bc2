"""Reports told empty from the export's schema (issue 16: an empty report costs ~0.1 s, not the
~1 s of importing pandas): on every fixture and H100 recording, a report `empty_reports` calls
empty is empty on the general path too, and the command line writes it without importing pandas."""

from __future__ import annotations

import lzma
import subprocess
import sys
from pathlib import Path

import pytest

from engine.analysis.nsys import stats
from engine.analysis.nsys.stats.empty_on_capture import empty_reports
from engine.reports import open_report
from tests.conftest import NSYS_SQLITE, REPO

RECORDINGS = sorted((REPO / "tests" / "data" / "recordings" / "nsys").glob("*/*.sqlite.xz"))


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("recordings")
    out = list(NSYS_SQLITE)
    for xz in RECORDINGS:
        out.append(folder / xz.name[: -len(".xz")])
        out[-1].write_bytes(lzma.decompress(xz.read_bytes()))
    return out


def test_empty_reports_are_empty_on_the_general_path(exports: list[Path], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    said_empty, said_full = 0, 0
    for db in exports:
        trace = open_report(db)
        empty = empty_reports(trace, list(stats.REPORTS))  # type: ignore[arg-type]
        for name in stats.REPORTS:
            if name.startswith("mpi_") and name not in empty:
                continue  # MPI data: the general path says it cannot summarise it
            rows = len(stats.registry()[name].compute(trace, False))  # not told empty: computed
            if name in empty:
                assert rows == 0, (db.name, name)
                assert empty[name].empty and empty[name].columns == stats.COLUMNS[name]
                said_empty += 1
            else:
                said_full += rows > 0
    # The recordings have OS runtime, unified memory and NVTX data, the fixtures mostly not:
    # both answers occur for those reports.
    assert said_empty > 20 and said_full > 20


def test_command_line_writes_empty_reports_without_pandas(tmp_path: Path) -> None:
    db = next(p for p in NSYS_SQLITE if p.stem == "host_overhead_gpumetrics")
    names = "osrt_sum,um_sum,um_total_sum,um_cpu_page_faults_sum,openmp_sum,nvtx_startend_sum"
    code = ("import sys; from engine.cli import main; "
            f"rc = main(['stats', {str(db)!r}, '-r', {names!r}, '-f', 'csv', "
            f"'-o', {str(tmp_path / 'o')!r}]); "
            "print(rc, 'pandas' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                       env={"KERNELSCOPE_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"})
    assert r.stdout.split() == ["0", "False"], r.stderr
    for name in names.split(","):
        assert (tmp_path / f"o_{name}.csv").read_bytes() == b""
        assert f"{name}: skipped" in r.stderr
