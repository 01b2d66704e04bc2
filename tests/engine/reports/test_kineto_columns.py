"""The columnar Kineto reader gives the tables, PyTorch events and memory curves the dict reader gave.

The reference (tests/engine/reports/kineto_reference.py) is the reader as it was before: json.load of
the document and one dict per event. Every real Kineto recording in the repository and the shared
fixtures is read both ways, from the stream and again from the column cache.
"""

from __future__ import annotations

import lzma
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine.analysis.pytorch.events import CodedTexts
from engine.analysis.pytorch.events import _build as build_torch_events
from engine.analysis.pytorch.memory import _from_kineto as memory_from_columns
from engine.reports.base import TABLES
from engine.reports.kineto import KinetoTrace
from engine.reports.kineto_store import cache_dir
from tests.conftest import FIXTURES, REPO
from tests.engine.reports.kineto_reference import (
    ReferenceKinetoTrace,
    reference_memory,
    reference_torch_events,
)

TRACES = [*sorted((REPO / "tests/data/recordings/torch").glob("*.json.xz")),
          *sorted((REPO / "tests/data/recordings/nsys/ddp").glob("*kineto.json.xz")),
          FIXTURES / "torch" / "torch_sdpa_trace.json"]


@pytest.fixture(scope="module", params=TRACES, ids=lambda p: p.name)
def trace_file(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    src: Path = request.param
    if src.suffix != ".xz":
        return src
    out = tmp_path_factory.mktemp("kineto") / src.name[:-3]
    out.write_bytes(lzma.decompress(src.read_bytes()))
    return out


def _same_events(a: object, b: object) -> None:
    for name, want in vars(b).items():
        got = getattr(a, name)
        if isinstance(got, CodedTexts):  # coded differently: the same texts, event for event
            assert got.tolist() == want.tolist(), name
        elif isinstance(want, np.ndarray):
            assert got.dtype == want.dtype and np.array_equal(got, want), name
        else:
            assert got == want, name


@pytest.mark.parametrize("cached", [False, True], ids=["streamed", "cached"])
def test_tables_events_and_memory_equal_the_dict_reader(trace_file: Path, cached: bool) -> None:
    if not cached:
        folder = cache_dir(trace_file)
        assert folder is not None
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    new, ref = KinetoTrace(trace_file), ReferenceKinetoTrace(trace_file)
    assert (folder_exists := cache_dir(trace_file)) is not None and folder_exists.exists()
    assert new.base_ts_us == ref.base_ts_us and new.base_time_ns == ref.base_time_ns
    assert new.info.product_version == ref.info.product_version
    for name in TABLES:
        pd.testing.assert_frame_equal(new.table(name), ref.table(name), check_dtype=True)
    assert new.missing == ref.missing
    _same_events(build_torch_events(new), reference_torch_events(ref))
    mem_new, mem_ref = memory_from_columns(new), reference_memory(ref)
    assert mem_new.notes == mem_ref.notes and len(mem_new.curves) == len(mem_ref.curves)
    for a, b in zip(mem_new.curves, mem_ref.curves, strict=True):
        _same_events(a, b)


def test_columns_and_args_of(trace_file: Path) -> None:
    trace = KinetoTrace(trace_file)
    k = trace.table("kernels")
    cols = trace.columns("kernels", ["start", "end"])
    assert np.array_equal(cols["start"], k["start"].to_numpy()) and np.array_equal(cols["end"], k["end"])
    args = trace.args_of("kernels", ["correlation", "grid"])
    assert len(args["grid"]) == len(k)
    got = [None if v == -(1 << 62) else int(v) for v in args["correlation"]]
    assert got == [None if pd.isna(v) else int(v) for v in k["correlationId"]]


@pytest.mark.parametrize("parts, workers", [(3, None), (6, 2)])
def test_parts_written_by_worker_processes_join_to_the_whole_read(tmp_path: Path, parts: int,
                                                                   workers: int | None) -> None:
    """The parallel read of a big trace (each worker writes its part's files, joined file by file).

    With more parts than workers, a worker that is done takes the next part.
    """
    import re

    from engine.reports.kineto_store import write_parts
    from engine.reports.kineto_stream import read_columns

    f = tmp_path / "t.json"
    f.write_bytes(lzma.decompress((REPO / "tests/data/recordings/torch/torch_train.json.xz").read_bytes()))
    raw = f.read_bytes()
    boundary = re.compile(rb'\n  \{\n    "ph"')
    cuts = [0, *(m.start() for k in range(1, parts) if (m := boundary.search(raw, len(raw) * k // parts))),
            len(raw)]
    assert len(cuts) == parts + 1
    got = write_parts(f, cuts, tmp_path / "cache" / "t", workers=workers)
    want = read_columns(f)
    assert got is not None and got.n == want.n > 0 and isinstance(got.ts, np.memmap)
    assert got.meta == want.meta and got.origin_us == want.origin_us
    assert got.processes == want.processes and got.threads == want.threads
    for name in ("ts", "dur"):
        assert np.array_equal(getattr(got, name), getattr(want, name))
    for col, table in (("cat", "cats"), ("name", "names"), ("pid", "pids"), ("tid", "tids")):
        assert [getattr(got, table)[i] for i in getattr(got, col)] == \
            [getattr(want, table)[i] for i in getattr(want, col)]
    for k in want.ints:
        assert np.array_equal(got.ints[k], want.ints[k])
    for k in want.texts:
        assert [got.text_values[i] for i in got.texts[k]] == [want.text_values[i] for i in want.texts[k]]
    for k in want.memory:
        assert np.array_equal(got.memory[k], want.memory[k])
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["t"]  # no temporary folder left


def test_a_table_read_column_by_column_equals_the_whole(trace_file: Path) -> None:
    """Tables are made only with the columns asked for; asked in parts, they equal the whole table."""
    whole, parts = KinetoTrace(trace_file), KinetoTrace(trace_file)
    for name in ("kernels", "memcpy", "memset", "api", "cpu_ops", "nvtx"):
        cols = list(TABLES[name][0])
        first = parts.table(name, cols[:2])
        assert list(first.columns) == cols[:2]
        parts.table(name, cols[::-1][:3])
        pd.testing.assert_frame_equal(parts.table(name), whole.table(name), check_dtype=True)
