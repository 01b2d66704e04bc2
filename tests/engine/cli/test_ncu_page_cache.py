"""`kernelscope ncu R --page details|raw|sections` printed again comes from the results cache."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ORACLES, REPO

pytest.importorskip("ncu_report")

_RUN = """
import sys
from engine.cli.app import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    assert not e.code, e.code
# the wheel or our reader
read = "ncu_report" in sys.modules or "engine.reports.ncu.pb_results" in sys.modules
sys.stderr.write("report read: %s\\n" % read)
"""


def _ncu(args: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KERNELSCOPE_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-c", _RUN, "ncu", *args], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=300, check=True)


def test_second_print_skips_the_report(tmp_path: Path) -> None:
    report = tmp_path / "host_overhead_fixed.ncu-rep"
    shutil.copyfile(FIXTURES / "ncu" / "host_overhead_fixed.ncu-rep", report)
    oracle = (ORACLES / "host_overhead_fixed.details.csv").read_text()
    first = _ncu([str(report), "--page", "details"], tmp_path / "cache")
    second = _ncu([str(report), "--page", "details"], tmp_path / "cache")
    assert first.stdout == second.stdout == oracle
    assert "report read: True" in first.stderr
    assert "report read: False" in second.stderr
    # A rewritten report (new mtime and size) is read again, not served from the cache.
    shutil.copyfile(FIXTURES / "ncu" / "torch_sdpa.ncu-rep", report)
    third = _ncu([str(report), "--page", "details"], tmp_path / "cache")
    assert third.stdout == (ORACLES / "torch_sdpa.details.csv").read_text()
    assert "report read: True" in third.stderr
