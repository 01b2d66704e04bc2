"""The streamed Perfetto export gives the same events as the reference builder, gzip or not."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from collections import Counter

import numpy as np
import pytest

from engine.analysis import export, export_perfetto, export_perfetto_rows, export_perfetto_sqlite
from engine.analysis.export_perfetto import write_perfetto
from engine.cli import main
from engine.reports import open_report
from tests.conftest import NSYS_DIR

FIXTURES = sorted(NSYS_DIR.glob("*.sqlite"))


def _events(doc):
    return Counter(json.dumps(e, sort_keys=True) for e in doc["traceEvents"])


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_streamed_gzip_equals_the_reference_events(path, tmp_path):
    ref = export.perfetto_trace(open_report(path))
    out = tmp_path / "t.json.gz"
    n = write_perfetto(open_report(path), out)
    assert out.read_bytes()[:2] == b"\x1f\x8b"  # a gzip file, as ui.perfetto.dev opens it
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert n == len(doc["traceEvents"]) == len(ref["traceEvents"])
    assert _events(doc) == _events(ref)
    # Metadata first and in the same order; the same time origin.
    meta = [e for e in doc["traceEvents"] if e["ph"] == "M"]
    assert meta == [e for e in ref["traceEvents"] if e["ph"] == "M"]
    assert doc["otherData"] == ref["otherData"] and doc["displayTimeUnit"] == "ns"


def test_python_formatter_writes_the_same_bytes_as_pyarrow(tmp_path, monkeypatch):
    path = NSYS_DIR / "torch_sdpa_gemm.sqlite"
    write_perfetto(open_report(path), tmp_path / "a.json")
    monkeypatch.setattr(export_perfetto_rows, "ARROW", False)
    write_perfetto(open_report(path), tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_null_correlation_id_takes_the_general_path(tmp_path):
    path = tmp_path / "nulls.sqlite"
    shutil.copy(NSYS_DIR / "host_overhead_naive.sqlite", path)
    con = sqlite3.connect(path)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = NULL WHERE rowid = "
                "(SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)")
    con.commit()
    con.close()
    assert export_perfetto_sqlite.SqliteEvents.open(open_report(path)) is None
    out = tmp_path / "t.json"
    n = write_perfetto(open_report(path), out)
    doc = json.loads(out.read_text())
    assert n == len(doc["traceEvents"]) > 0


def test_cli_writes_gzip_for_gz_names_and_one_sentence_when_unwritable(tmp_path, capsys):
    path = NSYS_DIR / "host_overhead_fixed.sqlite"
    assert main(["export", str(path), "--format", "perfetto", "-o", str(tmp_path / "t.json.gz")]) == 0
    assert json.loads(gzip.decompress((tmp_path / "t.json.gz").read_bytes()))["traceEvents"]
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["export", str(path), "--format", "perfetto", "-o", str(blocker / "t.json.gz")]) == 1
    err = capsys.readouterr().err
    assert "Could not write" in err and "Traceback" not in err


@pytest.mark.parametrize("arrow", [True, False], ids=["pyarrow", "python"])
def test_microseconds_are_the_exact_nanosecond_values(arrow, monkeypatch):
    from engine.analysis.export_perfetto_rows import Vocab, format_rows

    monkeypatch.setattr(export_perfetto_rows, "ARROW", arrow and export_perfetto_rows.ARROW)
    ns = [-1500, -5, 0, 5, 999, 1000, 1500, 244929721, 10**15 + 7]
    names = Vocab(lambda i: f'"n{i}"')
    text = format_rows(["\n", ("v", names, names.codes(np.array([3, 3, 9, 3, 9, 9, 3, 3, 9]))), ":",
                        ("us", np.array(ns)), ",", ("d", np.array(ns) * 2)], len(ns))
    assert bytes(text).decode().split("\n")[1:] == [
        '"n3":-1.500,-3000', '"n3":-0.005,-10', '"n9":0.000,0', '"n3":0.005,10', '"n9":0.999,1998',
        '"n9":1.000,2000', '"n3":1.500,3000', '"n3":244929.721,489859442',
        '"n9":1000000000000.007,2000000000000014']
    assert names.strings == ['"n3"', '"n9"']


def test_chunk_boundaries_do_not_change_a_byte(tmp_path, monkeypatch):
    # NVTX inline texts, flows, names and launch shapes cut into chunks of a few rows give the same file.
    for path in (NSYS_DIR / "host_overhead_naive.sqlite", NSYS_DIR / "torch_sdpa_gemm.sqlite"):
        write_perfetto(open_report(path), tmp_path / "a.json")
        monkeypatch.setattr(export_perfetto_sqlite, "CHUNK", 7)
        monkeypatch.setattr(export_perfetto_sqlite, "SCAN", 13)
        write_perfetto(open_report(path), tmp_path / "b.json")
        monkeypatch.undo()
        assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_flows_link_the_first_call_of_a_key_and_skip_work_without_a_call(tmp_path):
    path = tmp_path / "dup.sqlite"
    shutil.copy(NSYS_DIR / "host_overhead_naive.sqlite", path)
    con = sqlite3.connect(path)
    api = "CUPTI_ACTIVITY_KIND_RUNTIME"
    cols = [r[1] for r in con.execute(f"PRAGMA table_info({api})")]
    launch, corr = con.execute(
        f"SELECT rowid, correlationId FROM {api} WHERE correlationId IN "
        "(SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL) ORDER BY rowid").fetchone()
    # a second call with the same process and correlationId, later: the arrow still starts at the first
    sel = ", ".join('"start" + 5000000' if c == "start" else '"end" + 5000000' if c == "end" else f'"{c}"'
                    for c in cols)
    con.execute(f"INSERT INTO {api} ({', '.join(cols)}) SELECT {sel} FROM {api} WHERE rowid = ?", (launch,))
    # a kernel whose call was not captured gets no arrow
    lost = con.execute("SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start DESC").fetchone()
    lost = lost[0]
    con.execute(f"DELETE FROM {api} WHERE correlationId = ?", (lost,))
    con.commit()
    con.close()
    out = tmp_path / "t.json"
    n = write_perfetto(open_report(path), out)
    doc = json.loads(out.read_text())
    ref = export.perfetto_trace(open_report(path))
    assert n == len(doc["traceEvents"]) and _events(doc) == _events(ref)
    starts = {e["args"]["correlationId"]: e for e in doc["traceEvents"] if e["ph"] == "s"}
    calls = [e for e in doc["traceEvents"]
             if e.get("cat") == "cuda_api" and e["args"]["correlationId"] == corr]
    assert len(calls) == 2 and starts[corr]["ts"] == min(c["ts"] for c in calls)
    assert lost not in starts and corr in starts


def test_gzip_without_isal_is_the_same_text(tmp_path, monkeypatch):
    import sys

    path = NSYS_DIR / "torch_sdpa_gemm.sqlite"
    write_perfetto(open_report(path), tmp_path / "a.json.gz")
    monkeypatch.setitem(sys.modules, "isal", None)  # import isal raises ImportError: zlib
    assert export_perfetto.gzip_compressor().__class__.__module__ == "zlib"
    write_perfetto(open_report(path), tmp_path / "b.json.gz")
    assert gzip.decompress((tmp_path / "a.json.gz").read_bytes()) == gzip.decompress(
        (tmp_path / "b.json.gz").read_bytes())


@pytest.mark.parametrize("arrow", [True, False], ids=["pyarrow", "python"])
def test_inline_texts_are_coded_in_order_of_first_appearance(arrow, monkeypatch):
    from engine.analysis.export_perfetto_rows import distinct_texts

    monkeypatch.setattr(export_perfetto_rows, "ARROW", arrow and export_perfetto_rows.ARROW)
    codes, distinct = distinct_texts("step\0upload\0step\0\0été, \"q\"\0upload", "\0")
    assert codes.tolist() == [0, 1, 0, 2, 3, 1] and distinct == ["step", "upload", "", 'été, "q"']
    assert distinct_texts("", "\0")[1] == [""]
