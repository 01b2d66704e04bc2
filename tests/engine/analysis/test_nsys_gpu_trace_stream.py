"""cuda_gpu_trace streamed chunk by chunk (issue 16: a 10M-kernel trace is several GB of text):
the chunks, the path without a writable columnar cache and the command line's streamed output
all give the bytes of the DataFrame path (:func:`run_report` + :func:`to_csv`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.analysis.nsys import stats
from engine.analysis.nsys.stats import format_table, run_report, to_csv
from engine.analysis.nsys.stats.reports import (
    cuda_api_trace,
    cuda_gpu_trace,
    cuda_kern_exec_trace,
)
from engine.cli import app, main
from engine.reports import open_report
from tests.conftest import FIXTURES, NSYS_SQLITE
from tests.oracles.nsys_nvtx_pandas import ORACLES as nvtx_oracles
from tests.oracles.nsys_stats_pandas import pandas_report

KINETO = FIXTURES / "torch" / "torch_sdpa_trace.json"


@pytest.mark.parametrize("db", NSYS_SQLITE, ids=lambda p: p.stem)
def test_small_chunks_give_the_dataframe_paths_bytes(db: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cuda_gpu_trace, "_CHUNK", 7)  # many chunks, a short last one
    trace = open_report(db)
    want = to_csv(run_report(trace, "cuda_gpu_trace"))
    table = cuda_gpu_trace.gpu_trace_csv(trace)  # type: ignore[arg-type]
    assert table is not None
    pieces = list(table.chunks())
    assert len(pieces) == 1 + -(-table.rows // 7) if table.rows else pieces == []
    assert b"".join(pieces).decode() == want
    reference = pandas_report(trace, "cuda_gpu_trace")  # the pandas version it replaced
    assert want == to_csv(reference)
    assert format_table(run_report(trace, "cuda_gpu_trace")) == format_table(reference)


def test_without_a_writable_cache_the_columns_stay_in_memory(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(blocker / "cache"))  # mkdir fails: no cache
    monkeypatch.setattr(cuda_gpu_trace, "_CHUNK", 5)
    db = max(NSYS_SQLITE, key=lambda p: p.stat().st_size)
    trace = open_report(db)
    table = cuda_gpu_trace.gpu_trace_csv(trace)  # type: ignore[arg-type]
    assert table is not None and table.rows > 10
    assert table.text == to_csv(run_report(trace, "cuda_gpu_trace"))


def test_command_line_streams_big_reports_to_the_file_and_stdout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(app, "_STREAM_ROWS", 0)  # every report counts as big
    monkeypatch.setattr(cuda_gpu_trace, "_CHUNK", 3)
    db = max(NSYS_SQLITE, key=lambda p: p.stat().st_size)
    want = to_csv(run_report(open_report(db), "cuda_gpu_trace")).encode()
    assert main(["stats", str(db), "-r", "cuda_gpu_trace,cuda_gpu_kern_sum", "-f", "csv",
                 "-o", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out_cuda_gpu_trace.csv").read_bytes() == want
    assert (tmp_path / "out_cuda_gpu_kern_sum.csv").read_bytes().startswith(b"Time (%)")
    capsysbinary.readouterr()
    assert main(["stats", str(db), "-r", "cuda_gpu_trace", "-f", "csv"]) == 0
    assert capsysbinary.readouterr().out == want


@pytest.mark.parametrize("db", NSYS_SQLITE, ids=lambda p: p.stem)
def test_streamed_api_trace_gives_the_dataframe_paths_bytes(db: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cuda_api_trace, "_CHUNK", 11)
    trace = open_report(db)
    want = to_csv(run_report(trace, "cuda_api_trace"))
    table = cuda_api_trace.api_trace_csv(trace)  # type: ignore[arg-type]
    assert table is not None
    assert table.rows == len(run_report(trace, "cuda_api_trace"))
    assert table.text == want
    reference = pandas_report(trace, "cuda_api_trace")  # the pandas version it replaced
    assert want == to_csv(reference)
    assert format_table(run_report(trace, "cuda_api_trace")) == format_table(reference)


@pytest.mark.parametrize("name", ["cuda_api_trace", "cuda_gpu_trace", "cuda_kern_exec_trace"])
def test_trace_reports_on_a_kineto_trace_equal_their_pandas_reference(name: str) -> None:
    """The same rows on a Kineto trace (cuda_api_trace: no thread names, empty T-Pri and Thread Name)."""
    trace = open_report(KINETO)
    reference = pandas_report(trace, name)
    assert len(reference) >= (5 if name == "cuda_kern_exec_trace" else 20)  # 5 kernels with their launches
    assert stats.run(trace, name, "csv").text == to_csv(reference)
    frame = run_report(trace, name)
    assert format_table(frame) == format_table(reference)
    for col in reference.columns:
        assert frame[col].astype(object).where(frame[col].notna(), None).tolist() == \
            reference[col].astype(object).where(reference[col].notna(), None).tolist(), col


@pytest.mark.parametrize("db", NSYS_SQLITE, ids=lambda p: p.stem)
def test_streamed_kern_exec_trace_gives_the_dataframe_paths_bytes(db: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """cuda_kern_exec_trace joined by numpy and streamed (a chunk of 13 rows at a time) prints the
    bytes of the pandas merge (the table too); an export without kernels has no rows."""

    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cuda_kern_exec_trace, "_CHUNK", 13)
    trace = open_report(db)
    want = to_csv(run_report(trace, "cuda_kern_exec_trace"))
    table = cuda_kern_exec_trace.kern_exec_trace_csv(trace)  # type: ignore[arg-type]
    if not trace.has_sqlite_table("CUPTI_ACTIVITY_KIND_KERNEL"):  # type: ignore[attr-defined]
        assert table is None and want == ""
        return
    assert table is not None and table.rows > 0
    pieces = list(table.chunks())
    assert len(pieces) == 1 + -(-table.rows // 13)
    assert b"".join(pieces).decode() == want
    reference = pandas_report(trace, "cuda_kern_exec_trace")  # the pandas merge it replaced
    assert want == to_csv(reference)
    assert format_table(run_report(trace, "cuda_kern_exec_trace")) == format_table(reference)


@pytest.mark.parametrize("db", [*NSYS_SQLITE, KINETO], ids=lambda p: p.stem)
def test_grid_block_summary_gives_the_pandas_references_bytes(
        db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One path over trace.columns on an export and on a Kineto trace; the pandas groupby it replaced."""
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    trace = open_report(db)
    reference = nvtx_oracles["cuda_gpu_kern_gb_sum"](trace)
    got = run_report(trace, "cuda_gpu_kern_gb_sum")
    assert to_csv(got) == to_csv(reference)
    assert format_table(got) == format_table(reference)
    assert len(got) == len(reference) and (len(got) > 0) == trace.has("kernels")


def test_kern_exec_trace_without_a_writable_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launch calls read by condition (read_where) stay in memory when nothing can be cached."""

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(blocker / "cache"))
    monkeypatch.setattr(cuda_kern_exec_trace, "_CHUNK", 5)
    db = max(NSYS_SQLITE, key=lambda p: p.stat().st_size)
    trace = open_report(db)
    table = cuda_kern_exec_trace.kern_exec_trace_csv(trace)  # type: ignore[arg-type]
    assert table is not None and table.rows >= 10  # two chunks at least
    assert table.text == to_csv(run_report(trace, "cuda_kern_exec_trace"))
