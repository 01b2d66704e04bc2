"""The command line keeps a report's overview: the second summary/findings do not open the report."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import FIXTURES, REPO


def _ks(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    import os

    env = dict(os.environ, KERNELSCOPE_CACHE=str(cache))
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, check=True)


def test_second_summary_and_findings_come_from_the_cache(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    shutil.copy(FIXTURES / "torch" / "torch_sdpa_trace.json", report)
    cache = tmp_path / "cache"
    first = _ks("summary", "--json", str(report), cache=cache).stdout
    # one entry under the report's identity; the second run reads it (and prints the same bytes)
    entries = list((cache / "results").rglob("overview-*.pickle"))
    assert len(entries) == 1
    again = _ks("summary", "--json", str(report), cache=cache).stdout
    assert again == first
    assert json.loads(again)["report"]["path"] == str(report)
    found = _ks("findings", "--json", str(report), cache=cache).stdout
    assert json.loads(found)["findings"] is not None
    # a changed file is a different report: computed again, not served stale
    report.write_text(report.read_text().replace('"schemaVersion": 1', '"schemaVersion": 1 '))
    _ks("summary", "--json", str(report), cache=cache)
    assert len(list((cache / "results").rglob("overview-*.pickle"))) == 2
