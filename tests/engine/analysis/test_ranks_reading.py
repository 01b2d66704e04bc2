"""How a rank is read for the ranks cache: NCCL calls from the NVTX columns, no column cache left behind, the
C heap on a Dask worker, against the pandas table path and SQL on the real 2-GPU DDP recordings."""

from __future__ import annotations

import ctypes
import os
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from engine.analysis.ranks import store
from engine.analysis.ranks.heap import VARIABLE, heap_for_reading
from engine.analysis.ranks.load import _pid_keys, nccl_calls, nccl_calls_by_columns, nccl_op
from engine.reports.open import open_report
from tests.engine.analysis import ddp_recordings as D

pytestmark = pytest.mark.skipif(not D.available(), reason="the 2-GPU DDP recordings are not in tests/data")


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return D.unpack(tmp_path_factory.mktemp("ddp"), (*D.PER_RANK, *D.TORCHRUN))


def _calls_sql(db: Path) -> dict[str, Counter[str]]:
    """pid -> NCCL operation -> calls, straight from SQL (NCCL's domain, push/pop and start/end ranges)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    domains = dict(con.execute("SELECT domainId, text FROM NVTX_EVENTS WHERE eventType = 75"))
    rows = con.execute("SELECT e.globalTid / 16777216 % 16777216, e.domainId, coalesce(s.value, e.text) "
                       "FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
                       "WHERE e.eventType IN (59, 60)").fetchall()
    con.close()
    out: dict[str, Counter[str]] = {}
    for pid, dom, text in rows:
        op = nccl_op(domains.get(dom, ""), text or "")
        if op is not None:
            out.setdefault(str(pid), Counter())[op] += 1
    return out


def test_nccl_calls_from_the_columns_are_the_sql_counts_and_the_table_paths(
        reports: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path))
    assert [len(_calls_sql(db)) for db in reports] == [1, 1, 2]  # per rank, per rank, around torchrun
    for db in reports:
        want = _calls_sql(db)
        assert want and all(c["AllReduce"] > 100 for c in want.values())  # DDP's gradient all-reduces
        with open_report(db) as trace:
            got = nccl_calls_by_columns(trace)
            assert got == want
            for pk in set(_pid_keys(trace.columns("kernels", ["pid"])["pid"]).tolist()):
                assert nccl_calls(trace, pk) == want.get(pk, Counter())
        with open_report(db) as trace, monkeypatch.context() as m:  # the table path: no columns reader
            m.setattr(type(trace), "nvtx_range_columns", None, raising=False)
            assert nccl_calls_by_columns(trace) is None
            for pk, calls in want.items():
                assert nccl_calls(trace, pk) == calls


def test_a_rank_read_for_the_cache_leaves_no_columns(reports: list[Path], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    scratch = tmp_path / "shm"
    scratch.mkdir()
    monkeypatch.setattr(store, "SCRATCH", str(scratch))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    left = scratch / f"{store.SCRATCH_PREFIX}{dead}-x"  # a reader killed before it deleted its folder
    left.mkdir()
    (left / "kernels.npy").write_bytes(b"0" * 10)
    mine = scratch / f"{store.SCRATCH_PREFIX}{os.getpid()}-y"  # a live reader's
    mine.mkdir()
    inputs = store.read_ranks(reports[0])
    assert [r.steps is not None and r.steps.count > 10 for r in inputs] == [True]
    assert inputs[0].calls["AllReduce"] > 100
    columns = tmp_path / "cache" / "columns"
    assert not columns.exists() or not any(columns.iterdir())
    assert sorted(p.name for p in scratch.iterdir()) == [mine.name]  # its own deleted, the dead one's too
    assert store.cached_ranks(reports[0]) is not None


def test_a_dask_workers_heap_setting_is_lifted_for_the_read_and_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VARIABLE, "65536")
    with heap_for_reading():
        assert VARIABLE not in os.environ  # the page readers' children start with glibc's defaults
        child = subprocess.run([sys.executable, "-c", f"import os; print(os.environ.get('{VARIABLE}'))"],
                               capture_output=True, text=True, check=True).stdout.strip()
        assert child == "None"
    assert os.environ[VARIABLE] == "65536"
    monkeypatch.delenv(VARIABLE)
    with heap_for_reading():  # elsewhere nothing changes
        assert VARIABLE not in os.environ
    assert VARIABLE not in os.environ
    assert ctypes.CDLL("libc.so.6").mallopt(-3, 128 << 10) == 1  # glibc takes the value restored


def test_without_room_in_the_scratch_a_rank_reads_the_same_in_memory(reports: list[Path], tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "shm"
    scratch.mkdir()
    monkeypatch.setattr(store, "SCRATCH", str(scratch))
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "a"))
    roomy = store.read_ranks(reports[2])  # around torchrun: two ranks
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "b"))
    monkeypatch.setattr(store, "SCRATCH_ROOM", 1 << 40)  # no tmpfs has a petabyte free
    tight = store.read_ranks(reports[2])
    assert not any(scratch.iterdir()) and not (tmp_path / "b" / "columns").exists()
    assert len(roomy) == len(tight) == 2
    for a, b in zip(roomy, tight, strict=True):
        assert a.steps is not None and b.steps is not None and a.steps.count > 10
        assert (a.pid, a.steps.count, a.calls) == (b.pid, b.steps.count, b.calls)
        assert a.calls["AllReduce"] > 100
        for name in ("compute_start", "compute_end", "nccl_start", "nccl_end"):
            assert np.array_equal(getattr(a, name), getattr(b, name))
        for part in ("busy", "nccl", "compute", "host"):  # the steps' partition
            assert np.array_equal(getattr(a.local, part), getattr(b.local, part))
