"""Steps kept as arrays (StepList) and big derived arrays moved to file mappings (issue 26)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from engine.analysis import file_backed
from engine.analysis.step_model import Step, StepList, Steps, retimed, steps_from_arrays


def test_step_list_reads_as_the_tuple_of_steps_it_stands_for() -> None:
    steps = (Step(0, 10, 20, True), Step(1, 20, 35, False), Step(2, 40, 50, False))
    sl = StepList.of(steps)
    assert len(sl) == 3 and tuple(sl) == steps and sl == steps
    assert sl[0] == steps[0] and sl[-1] == Step(2, 40, 50, False) and sl[1:] == steps[1:]
    with pytest.raises(IndexError):
        sl[3]
    assert pickle.loads(pickle.dumps(sl)) == sl
    st = Steps("s", "nvtx", "1", steps, 0, 0)  # a tuple given is converted
    assert isinstance(st.steps, StepList) and st.steps == steps
    assert st.warmup_count == 1 and st.steady_count == 2
    assert tuple(st.steady) == steps[1:] and st.warmup_flags.tolist() == [True, False, False]
    assert st.durations_ns == [10, 15, 10] and st.steady_median_ns == 12.5


def test_steps_from_arrays_and_retimed_keep_indices_and_flags() -> None:
    st = steps_from_arrays("s", "gpu", "1", np.array([0, 10, 20]), np.array([10, 20, 30]),
                           [True, False, False], 5, 9)
    assert list(st.steps) == [Step(0, 0, 10, True), Step(1, 10, 20, False), Step(2, 20, 30, False)]
    moved = retimed(st, np.array([1, 11, 21]), np.array([9, 19, 29]))
    assert list(moved.steps) == [Step(0, 1, 9, True), Step(1, 11, 19, False), Step(2, 21, 29, False)]
    with pytest.raises(ValueError):
        retimed(st, np.array([1, 2]), np.array([3, 4]))
    # a million steps are three arrays: no Step object made until one is read
    n = 1_000_000
    starts = np.arange(n) * 10
    big = steps_from_arrays("s", "gpu", "1", starts, starts + 5, np.zeros(n, bool), 0, 0)
    assert big.count == n and big.steps[n - 1] == Step(n - 1, 10 * (n - 1), 10 * (n - 1) + 5, False)
    assert big.steps.starts.nbytes + big.steps.ends.nbytes + big.steps.warmup.nbytes == 17 * n


def test_big_arrays_move_to_read_only_file_mappings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path))
    monkeypatch.setenv("KERNELSCOPE_FILE_BACKED_BYTES", "1000")
    a = np.arange(1000, dtype=np.int64)  # 8000 bytes: moved
    small = np.arange(10, dtype=np.int64)  # 80 bytes: kept
    st = steps_from_arrays("s", "gpu", "1", a, a + 1, np.zeros(1000, bool), 0, 0)
    store = {"x": (a, small), "steps": [st]}
    file_backed.move_to_files(store, depth=5)
    moved, kept = store["x"]
    assert file_backed.is_mapped(moved) and np.array_equal(moved, a) and moved.dtype == a.dtype
    assert kept is small and not file_backed.is_mapped(kept)
    assert not moved.flags.writeable
    assert file_backed.is_mapped(st.steps.starts) and np.array_equal(st.steps.starts, a)
    assert st.steps[999] == Step(999, 999, 1000, False)
    assert list(tmp_path.joinpath("mapped-arrays").iterdir()) == []  # unlinked once mapped
    again = file_backed.move_to_files(store["x"])  # mapped arrays are not written twice
    assert again[0] is moved
    monkeypatch.setenv("KERNELSCOPE_FILE_BACKED_BYTES", "off")
    b = np.arange(1000, dtype=np.int64)
    assert file_backed.move_to_files([b])[0] is b


def test_a_cache_that_cannot_take_the_arrays_keeps_them_in_memory_and_says_so_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A full or read-only cache folder: the same values on the heap, and one sentence saying why."""
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("KERNELSCOPE_FILE_BACKED_BYTES", "1000")
    monkeypatch.setattr(file_backed, "_directory", lambda: str(blocked))  # writes there fail
    monkeypatch.setattr(file_backed, "_said", [])
    a = np.arange(1000, dtype=np.int64)
    with caplog.at_level("WARNING", logger="engine.analysis.file_backed"):
        got = file_backed.filled(1000, np.int64, lambda lo, hi: a[lo:hi])
        moved = file_backed.move_to_files([a])[0]
    assert np.array_equal(got, a) and not file_backed.is_mapped(got)
    assert moved is a
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1
    assert said[0].startswith("Big arrays stay in memory: they could not be written to " + str(blocked))
    assert "KERNELSCOPE_CACHE" in said[0]
