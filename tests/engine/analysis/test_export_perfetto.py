"""The streamed Perfetto export gives the same events as the reference builder, gzip or not."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from collections import Counter

import pytest

from engine.analysis import export, export_perfetto_rows, export_perfetto_sqlite
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
