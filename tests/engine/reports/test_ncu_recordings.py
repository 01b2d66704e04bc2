"""The ncu flag matrix recorded on an H100 (tests/data/recordings/ncu, ncu 2025.3.1): both pages of
every report byte-identical to ``ncu --import R --csv --page details|raw --print-units base``.

The matrix covers what the other fixtures do not: ``--set basic|detailed|full``, ``--section``
subsets, a ``--metrics`` list (no rule results: no rule columns), PM sampling (a rule result
without a message: rule columns but no rule row), source counters, two processes
(``--target-processes all``: kernels numbered process by process), NVTX filters (two NVTX
columns), range replay (a range result: no launch columns, Stream "n/a"), application replay and
``--profile-from-start off``, a cuBLAS FP32 GEMM from PyTorch, and 40 kernels of a PyTorch training
loop (train40_threads: the backward pass launches from the autograd thread, whose kernels ncu still
lists under the process id; cuDNN's ``cudnn::engines_precompiled::`` names).
"""

from __future__ import annotations

import lzma
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.reports.ncu.section_defs import read_report_layout
from tests.conftest import REPO

pytest.importorskip("ncu_report")

DATA = REPO / "tests" / "data" / "recordings" / "ncu"
NAMES = sorted(p.name[: -len(".ncu-rep.xz")] for p in DATA.glob("*.ncu-rep.xz"))

# One process per report, as `kernelscope ncu R --page ...` runs (see test_ncu_public.py).
_PAGES = """
import sys
from pathlib import Path
from engine.analysis.ncu.pages import details_csv, raw_csv
from engine.reports.ncu.decoders import read_ncu_rep
r = read_ncu_rep(sys.argv[1], use_cache=False)
Path(sys.argv[2]).write_text(details_csv(r))
Path(sys.argv[3]).write_text(raw_csv(r))
"""


def _unpack(name: str, out: Path) -> Path:
    target = out / f"{name}.ncu-rep"
    with lzma.open(DATA / f"{name}.ncu-rep.xz", "rb") as f, target.open("wb") as g:
        shutil.copyfileobj(f, g, 1 << 20)
    return target


def _oracle(name: str, page: str) -> str:
    with lzma.open(DATA / f"{name}.{page}.csv.xz", "rt", encoding="utf-8", newline="") as f:
        return f.read()


def test_the_matrix_is_there() -> None:
    if not DATA.is_dir():
        pytest.skip(f"{DATA} is missing")
    assert len(NAMES) == 16


@pytest.mark.parametrize("name", NAMES)
def test_pages_are_byte_identical(tmp_path: Path, name: str) -> None:
    report = _unpack(name, tmp_path)
    details, raw = tmp_path / "details.csv", tmp_path / "raw.csv"
    subprocess.run([sys.executable, "-c", _PAGES, str(report), str(details), str(raw)],
                   check=True, cwd=REPO, timeout=120)
    assert details.read_text() == _oracle(name, "details")
    assert raw.read_text() == _oracle(name, "raw")


def test_two_processes_are_numbered_process_by_process(tmp_path: Path) -> None:
    # The file holds the child's two results before the parent's one; ncu prints the parent first.
    layout = read_report_layout(_unpack("fork_all", tmp_path))
    pids = [r.pid for r in layout.results]
    assert len(pids) == 3 and pids[0] == pids[1] != pids[2] and pids[2] < pids[0]
    assert set(layout.processes) == set(pids)
    first_ids = [row.split('","')[1] for row in _oracle("fork_all", "raw").splitlines()[2:]]
    assert first_ids == [str(pids[2]), str(pids[0]), str(pids[0])]


def test_rule_results_without_a_message_still_give_rule_columns(tmp_path: Path) -> None:
    pm = read_report_layout(_unpack("pmsampling", tmp_path))
    metrics = read_report_layout(_unpack("metrics", tmp_path))
    assert all(r.has_rule_results for r in pm.results)
    assert not any(r.has_rule_results for r in metrics.results)
    assert _oracle("pmsampling", "details").splitlines()[0].endswith('"Estimated Speedup"')
    assert _oracle("metrics", "details").splitlines()[0].endswith('"Metric Value"')
