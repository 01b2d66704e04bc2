"""Decoding a .ncu-rep in child processes (engine/reports/ncu/children.py) gives what one process gives.

Each case runs ``kernelscope ncu`` as real processes: once decoding in-process
(``KERNELSCOPE_NCU_CHILDREN=0``) and once in children, with an empty cache each, and compares the
bytes of the page; also the peak memory of the process tree (``os.wait4``) and that the tables the
children build are complete (the next page comes from the cache without ``ncu_report``).
"""

from __future__ import annotations

import lzma
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DATA = REPO / "tests" / "data" / "ncu"

pytest.importorskip("ncu_report")


@pytest.fixture(autouse=True)
def _wheel_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """These cases test the ``ncu_report`` reader (the fallback of engine/reports/ncu/own_reader.py)."""
    monkeypatch.setenv("KERNELSCOPE_NCU_OWN", "0")


@pytest.fixture(scope="module")
def full_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("split") / "torch18_full.ncu-rep"
    with lzma.open(DATA / "torch18_full.ncu-rep.xz", "rb") as f, out.open("wb") as g:
        shutil.copyfileobj(f, g, 1 << 20)
    return out


def _page(report: Path, page: str, cache: Path, *, children: bool, extra: str = "") -> str:
    """The output of `kernelscope ncu REPORT --page PAGE` (``extra``: Python run before it)."""
    env = dict(os.environ, KERNELSCOPE_CACHE=str(cache), KERNELSCOPE_NCU_CHILDREN="1" if children else "0")
    code = f"{extra}\nfrom engine.cli.app import main\nmain()"
    argv = [sys.executable, "-c", code, "ncu", str(report), "--page", *page.split()]
    p = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate()
    assert p.returncode == 0, err.decode()[-2000:]
    return out.decode()


def _peak_mb(report: Path, page: str, cache: Path) -> float:
    """Peak RSS (MB) of `kernelscope ncu` and its children (the largest process).

    Measured from a small launcher process: a child forked straight from this (large, late in the
    suite) pytest process counts the parent's resident pages until it execs, so ``wait4`` here would
    report pytest's own size, not Kernelscope's.
    """
    env = dict(os.environ, KERNELSCOPE_CACHE=str(cache), KERNELSCOPE_NCU_CHILDREN="1")
    argv = [sys.executable, "-m", "engine.cli.app", "ncu", str(report), "--page", page]
    launcher = ("import resource, subprocess, sys\n"
                "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL,\n"
                "                    stderr=subprocess.DEVNULL).returncode\n"
                "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", launcher, *argv], env=env, cwd=REPO, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[0] == "0"
    return int(out[1]) / 1024


@pytest.mark.parametrize("page", ["details", "raw", "sections", "sections --source"])
def test_children_print_the_same_page(full_report: Path, tmp_path: Path, page: str) -> None:
    single = _page(full_report, page, tmp_path / "one", children=False)
    split = _page(full_report, page, tmp_path / "split", children=True)
    assert split == single
    assert len(split) > 10_000


def test_small_slices_merge_in_order(full_report: Path, tmp_path: Path) -> None:
    """Five children of 3-4 kernels (each asks kernel 0's metric list first) print the same pages."""
    extra = "import engine.reports.ncu.children as s; s.PER_CHILD = 4"
    for page in ("details", "raw"):
        single = _page(full_report, page, tmp_path / f"one-{page}", children=False)
        split = _page(full_report, page, tmp_path / f"split-{page}", children=True, extra=extra)
        assert split == single, page


def test_children_keep_memory_down_and_fill_the_cache(full_report: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert _peak_mb(full_report, "details", cache) <= 300  # in one process: ~480 MB
    # The tables are complete: the raw page comes from the cache, ncu_report is not even imported.
    code = ("import sys\nfrom engine.cli.app import main\ntry:\n    main()\nfinally:\n"
            "    sys.stderr.write('ncu_report loaded' if 'ncu_report' in sys.modules else 'not loaded')")
    env = dict(os.environ, KERNELSCOPE_CACHE=str(cache))
    p = subprocess.run([sys.executable, "-c", code, "ncu", str(full_report), "--page", "raw"], env=env,
                       cwd=REPO, capture_output=True, check=True)
    assert p.stderr.decode().endswith("not loaded")
    single = _page(full_report, "raw", tmp_path / "one", children=False)
    assert p.stdout.decode() == single


@pytest.mark.parametrize("page", ["details", "raw", "sections --source"])
def test_kernels_of_several_processes_in_children(tmp_path: Path, page: str) -> None:
    """ncu numbers the kernels of a multi-process report process by process: children started ahead
    (decoding the kernels in file order) still give the in-process page, one kernel per child."""
    report = tmp_path / "fork_all.ncu-rep"
    with lzma.open(REPO / "tests" / "data" / "recordings" / "ncu" / "fork_all.ncu-rep.xz", "rb") as f, \
            report.open("wb") as g:
        shutil.copyfileobj(f, g)
    extra = ("import engine.reports.ncu.children as s; s.SPLIT_MIN = 1; s.PER_CHILD = s.PER_CHILD_SASS = 1\n"
             "import os; os.environ['KERNELSCOPE_NCU_PARALLEL'] = '2'")
    single = _page(report, page, tmp_path / "one", children=False)
    split = _page(report, page, tmp_path / "split", children=True, extra=extra)
    assert split == single
    assert len(split) > 1000
