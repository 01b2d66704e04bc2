"""engine.analysis.findings.overview_store: the child's entry point, its output file, and the
hand-back of the pages of read-only shared file mappings it read."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from engine.analysis.findings import overview_store
from engine.reports.npy import load_npy
from tests.conftest import NSYS_DIR, REPO, resident_kb

REPORT = NSYS_DIR / "host_overhead_naive.sqlite"


def test_release_shared_pages_drops_read_only_mappings_and_keeps_their_values(tmp_path):
    f = tmp_path / "col.npy"
    data = np.arange(4_000_000, dtype=np.int64)
    np.save(f, data)
    mapped = load_npy(f, mmap_mode="r")  # registered: the cache's columns are loaded so
    private = np.load(f, mmap_mode="c")  # copy-on-write: a private mapping, never advised
    private[:10] = -1
    assert int(mapped.sum()) == int(data.sum())
    assert resident_kb(f) >= data.nbytes // 1024  # read once: all of the shared mapping resident
    assert overview_store.release_shared_pages() >= data.nbytes
    assert resident_kb(f) < 64 + 40  # the private mapping's written page(s) stay
    assert int(mapped.sum()) == int(data.sum())  # read back from the OS cache
    assert private[:10].tolist() == [-1] * 10 and int(private[10:].sum()) == int(data[10:].sum())


def _child(report, out, cwd):
    """The overview child run by hand: the engine's child protocol (a JSON request on stdin)."""
    from engine.system.child import child_env

    request = json.dumps({"report": str(report), "range": None, "result": str(out)})
    return subprocess.run([sys.executable, "-m", overview_store.CHILD_MODULE], input=request,
                          env=child_env(), capture_output=True, text=True, timeout=300, cwd=cwd)


def test_child_entry_writes_the_overview_and_says_one_sentence_on_bad_input(tmp_path):
    from engine.analysis.findings.overview import overview
    from engine.reports import open_report

    out = tmp_path / "o.pickle"
    p = _child(REPORT, out, tmp_path)
    assert p.returncode == 0, p.stderr
    assert [json.loads(line) for line in p.stdout.splitlines()] == [
        {"progress": "reading the report"}, {"progress": "computing the summary and the findings"}]
    got = overview_store.read_result(out)
    trace = open_report(REPORT)
    try:
        want = overview(trace)
    finally:
        trace.close()
    assert got is not None
    assert json.dumps(got[0].to_json()) == json.dumps(want[0].to_json())
    assert [f.to_json() for f in got[1]] == [f.to_json() for f in want[1]]
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a report")
    p = _child(bad, out, REPO)
    assert p.returncode == 1 and p.stderr == ""
    last = json.loads(p.stdout.splitlines()[-1])
    assert list(last) == ["error"] and "\n" not in last["error"] and last["error"].endswith(".")


def test_read_result_refuses_what_is_not_an_overview(tmp_path):
    import pickle

    f = tmp_path / "x.pickle"
    f.write_bytes(pickle.dumps({"not": "an overview"}))
    assert overview_store.read_result(f) is None
    f.write_bytes(b"garbage")
    assert overview_store.read_result(f) is None
    assert overview_store.read_result(tmp_path / "missing") is None
