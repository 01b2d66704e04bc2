"""The PyTorch views' objects are kept on disk: a second open of the same file loads what the first built."""

from __future__ import annotations

import lzma
import os
from pathlib import Path

import numpy as np
import pytest

from engine.analysis.pytorch import kept_results as kept
from engine.analysis.pytorch.events import TorchEvents
from engine.analysis.pytorch.text import kernels_text, memory_text, modules_text, ops_text
from engine.reports import open_report
from tests.conftest import REPO


def _texts(trace: object) -> list[str]:
    ops = [ops_text(kept.operators(trace, by), kept.kernels(trace), limit=1000) for by in ("name", "shapes")]
    return [*ops, kernels_text(kept.kernels(trace), limit=1000), modules_text(kept.modules(trace)),
            memory_text(kept.memory(trace), None)]


def test_a_second_open_loads_the_first_opens_objects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.analysis.pytorch.events as events_mod
    import engine.analysis.pytorch.modules as modules_mod
    import engine.analysis.pytorch.operators as operators_mod

    path = tmp_path / "torch_train.json"
    path.write_bytes(lzma.decompress((REPO / "tests/data/recordings/torch/torch_train.json.xz").read_bytes()))
    first = open_report(path)
    built = _texts(first)
    ev = events_mod.torch_events(first)
    assert "aten::mm" in built[0] and built[3].strip() and built[4].strip()
    cache = Path(os.environ["KERNELSCOPE_CACHE"])
    names = sorted(p.name for p in cache.glob("results/*/pytorch-v*.pickle"))
    assert names == sorted(f"pytorch-v1-{n}.pickle" for n in
                           ("events", "ops-name", "ops-shapes", "kernels", "modules", "memory"))

    def fails(*_: object, **__: object) -> None:
        raise AssertionError("built again")

    with monkeypatch.context() as m:  # (the autouse fixture's KERNELSCOPE_CACHE stays set)
        m.setattr(events_mod, "_build", fails)
        m.setattr(operators_mod, "operator_table", fails)
        m.setattr(modules_mod, "module_tree", fails)
        second = open_report(path)
        assert _texts(second) == built
        again = events_mod.torch_events(second)
    assert isinstance(again, TorchEvents) and again is not ev
    for k, v in vars(ev).items():
        w = getattr(again, k)
        assert (np.array_equal(v, w) and v.dtype == w.dtype) if isinstance(v, np.ndarray) else v == w, k

    # the file changed: its identity changes, and everything is built again
    os.utime(path, ns=(1, 1))
    assert _texts(open_report(path)) == built
    assert len(list(cache.glob("results/*/pytorch-v1-events.pickle"))) == 2


def test_an_unreadable_pickle_is_built_again(tmp_path: Path) -> None:
    path = tmp_path / "torch_conv.json"
    path.write_bytes(lzma.decompress((REPO / "tests/data/recordings/torch/torch_conv.json.xz").read_bytes()))
    built = _texts(open_report(path))
    cache = Path(os.environ["KERNELSCOPE_CACHE"])
    for p in cache.glob("results/*/pytorch-v1-*.pickle"):
        p.write_bytes(b"not a pickle")
    assert _texts(open_report(path)) == built


def test_the_summarys_steps_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.analysis.steps as steps_mod
    from engine.analysis.summary import summarize

    path = tmp_path / "torch_train.json"
    path.write_bytes(lzma.decompress((REPO / "tests/data/recordings/torch/torch_train.json.xz").read_bytes()))
    first = open_report(path)
    it = summarize(first).iterations
    assert it is not None
    found = steps_mod.summary_steps(first, it)
    built = kept.summary_steps(first, it)
    assert [(s.pid, s.range_name, s.count, s.gpu_ns) for s in built] == [
        (s.pid, s.range_name, s.count, s.gpu_ns) for s in found]
    assert any(s.pid == it.pid and s.count == it.count for s in built)

    def fails(*_: object, **__: object) -> None:
        raise AssertionError("found again")

    monkeypatch.setattr(steps_mod, "summary_steps", fails)
    again = kept.summary_steps(open_report(path), it)
    assert again == built  # Steps compare field by field (the step arrays included)
    for a, b in zip(again, built, strict=True):
        assert np.array_equal(a.steps.starts, b.steps.starts) and np.array_equal(a.steps.ends, b.steps.ends)


def test_the_events_arrays_are_mapped_from_the_file_beside_their_pickle(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.analysis.pytorch.events as events_mod
    from engine.analysis.file_backed import is_mapped

    monkeypatch.setenv("KERNELSCOPE_FILE_BACKED_BYTES", "0")  # every array, not only those of 16 MB
    path = tmp_path / "torch_conv.json"
    path.write_bytes(lzma.decompress((REPO / "tests/data/recordings/torch/torch_conv.json.xz").read_bytes()))
    built = events_mod._build(open_report(path))
    first = events_mod.torch_events(open_report(path))
    cache = Path(os.environ["KERNELSCOPE_CACHE"])
    (arrays,) = cache.glob("results/*/pytorch-v1-events.arrays")
    (pickled,) = cache.glob("results/*/pytorch-v1-events.pickle")
    assert pickled.stat().st_size < arrays.stat().st_size  # the columns are in the arrays file
    builds = []
    real_build = events_mod._build
    monkeypatch.setattr(events_mod, "_build", lambda t: builds.append(1) or real_build(t))
    again = events_mod.torch_events(open_report(path))
    assert not builds
    for ev in (first, again):  # the first open returns the mapped arrays too (no heap copies kept)
        assert is_mapped(ev.start) and not ev.start.flags.writeable and is_mapped(ev.gpu_op)
        for k, v in vars(built).items():
            w = getattr(ev, k)
            assert (np.array_equal(v, w) and v.dtype == w.dtype) if isinstance(v, np.ndarray) else v == w, k

    # an arrays file that is not the pickle's (another write's token, or cut short): built again
    data = arrays.read_bytes()
    arrays.write_bytes(b"x" * 16 + data[16:])
    assert events_mod.torch_events(open_report(path)).n == built.n and len(builds) == 1
    arrays.write_bytes(arrays.read_bytes()[: len(data) // 2])
    assert events_mod.torch_events(open_report(path)).n == built.n and len(builds) == 2
    arrays.unlink()
    assert events_mod.torch_events(open_report(path)).n == built.n and len(builds) == 3
