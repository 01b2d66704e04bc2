"""Nsight Compute reports opened through open_report(ncu=True), as the window lists them."""

from __future__ import annotations

import pytest

from engine.reports import open_report
from engine.reports.ncu import NCU_KIND, NcuTrace, is_ncu, read_ncu
from engine.system.errors import ReportError
from tests.conftest import FIXTURES

NCU = FIXTURES / "ncu"
ORACLE_RAW = FIXTURES / "oracles" / "host_overhead_fixed.raw.csv"


def _raw_oracle(column: str) -> str:
    import csv

    with ORACLE_RAW.open(newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[2][rows[0].index(column)]  # header, units, first kernel


def test_without_ncu_flag_the_cli_behaviour_is_kept():
    with pytest.raises(ReportError, match="Nsight Compute report; open it with `kernelscope ncu`"):
        open_report(NCU / "host_overhead_fixed.ncu-rep")


@pytest.mark.parametrize("name", ["host_overhead_fixed.ncu-rep", "torch_sdpa.ncu-rep",
                                  "host_overhead_fixed_raw.csv"])
def test_ncu_reports_open_as_traces(name):
    trace = open_report(NCU / name, ncu=True)
    assert isinstance(trace, NcuTrace) and is_ncu(trace)
    assert trace.info.kind == NCU_KIND
    direct = read_ncu(NCU / name)
    assert list(trace.ncu.kernels["Kernel Name"]) == list(direct.kernels["Kernel Name"])
    # No timeline tables; the one sentence says where to look instead.
    assert not trace.has("kernels") and not trace.has("memcpy")
    assert "Nsight Compute report" in trace.missing["kernels"]
    assert "Kernels" in trace.missing["memcpy"]
    assert trace.missing_report() == []  # not applicable, not "not captured"
    assert len(trace.table("kernels")) == 0
    gpus = trace.table("gpus")
    assert list(gpus["name"]) == [_raw_oracle("device__attribute_display_name")]
    assert gpus["smCount"].iloc[0] == int(_raw_oracle("device__attribute_multiprocessor_count"))
    assert gpus["computeMajor"].iloc[0] == int(_raw_oracle("device__attribute_compute_capability_major"))


def test_summary_of_an_ncu_trace_is_empty_not_an_error():
    from engine.analysis.summary import summarize

    s = summarize(open_report(NCU / "torch_sdpa.ncu-rep", ncu=True))
    assert s.report.kind == NCU_KIND
    assert s.report.gpus[0].name == "NVIDIA H200"
    assert s.wall.span_ns == 0 and s.bandwidth == () and s.findings == () and s.iterations is None


def test_a_damaged_ncu_report_is_one_sentence(tmp_path):
    bad = tmp_path / "cut.ncu-rep"
    bad.write_bytes((NCU / "host_overhead_fixed.ncu-rep").read_bytes()[:5000])
    with pytest.raises(ReportError, match="truncated or damaged"):
        open_report(bad, ncu=True)
