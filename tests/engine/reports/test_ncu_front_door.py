"""The ncu reader's one way in (engine.reports.ncu) and its decoders, tried in one ordered list."""

from __future__ import annotations

import importlib
import logging
import subprocess
import sys
from pathlib import Path

import pytest

import engine.reports.ncu as ncu
from engine.reports.ncu.decoders import DECODERS
from tests.conftest import FIXTURES

REPO = Path(__file__).resolve().parents[3]


def test_every_public_name_is_its_module_s_object() -> None:
    """Each name of ``__all__`` resolves, to the object its defining module holds."""
    for name in ncu.__all__:
        value = getattr(ncu, name)
        module = ncu._DEFINED_IN.get(name)
        if module is not None:
            assert value is getattr(importlib.import_module(f"engine.reports.ncu.{module}"), name)
    with pytest.raises(AttributeError):
        ncu.read_ncu_rep  # noqa: B018 - an internal name is not part of the front door


def test_a_decode_child_imports_none_of_the_reader_around_it() -> None:
    """``python -m engine.reports.ncu.decode`` (a child) pays for its own module's imports only."""
    code = ("import sys, engine.reports.ncu.decode, engine.reports.ncu.unit_lookup\n"
            "print(sorted(m for m in sys.modules if m.startswith('engine.reports.ncu')))")
    out = subprocess.run([sys.executable, "-S", "-c", code], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    loaded = set(eval(out))  # noqa: S307 - our own child's printed list
    assert "engine.reports.ncu.decode" in loaded
    for heavy in ("decoders", "own_reader", "pb_results", "children", "sources", "csv_export", "cache"):
        assert f"engine.reports.ncu.{heavy}" not in loaded


def test_the_decoders_in_order() -> None:
    assert [name for name, _ in DECODERS] == [
        "cache", "own reader", "ncu_report in child processes", "ncu_report in this process",
    ]


def test_each_skipped_decoder_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       caplog: pytest.LogCaptureFixture) -> None:
    """Without the cache and our reader, a small report is read by ncu_report in this process."""
    pytest.importorskip("ncu_report")
    monkeypatch.setenv("KERNELSCOPE_NCU_OWN", "0")
    with caplog.at_level(logging.DEBUG, logger="engine.reports.ncu.decoders"):
        report = ncu.read_ncu(FIXTURES / "ncu" / "host_overhead_fixed.ncu-rep", use_cache=False)
    n = len(report.kernel_records())
    assert n > 0
    reasons = [r.getMessage().split(": ", 1)[1] for r in caplog.records]
    assert reasons == [
        "cache skipped: use_cache=False",
        "own reader skipped: KERNELSCOPE_NCU_OWN=0",
        f"ncu_report in child processes skipped: {n} kernels: fewer than 13 are decoded in this process",
    ]


def test_open_ncu_wraps_the_report_as_a_trace() -> None:
    """``open_ncu`` (what ``open_report(..., ncu=True)`` calls) gives the report's kernels as a Trace."""
    trace = ncu.open_ncu(FIXTURES / "ncu" / "host_overhead_fixed_details.csv")
    assert isinstance(trace, ncu.NcuTrace)
    assert ncu.is_ncu(trace)
    assert trace.ncu.source == "csv-details"
    assert list(trace.ncu.kernels["Kernel Name"]) == [
        "void sgemm_tiled<16>(int, const float *, const float *, float *)",
        "saxpy(int, float, const float *, float *)",
    ]
