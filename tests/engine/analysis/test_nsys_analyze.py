"""Expert rules against NVIDIA's `nsys analyze` output for the same recordings."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from engine.analysis.nsys.analyze import RULES, RuleResult, parse_rule_spec, run_rule, to_csv
from engine.reports import open_report
from engine.system.errors import KernelscopeError
from tests.conftest import FIXTURES, NSYS_DIR, ORACLES

FIXTURE_NAMES = [
    "host_overhead_naive", "host_overhead_fixed", "host_overhead_gpumetrics", "torch_sdpa_gemm",
    "legacy2022_partial_naive",
]
KINETO = FIXTURES / "torch" / "torch_sdpa_trace.json"

# nsys 2025.3 writes an empty file for cuda_memcpy_sync on the 2022.4 (schema 3.0) export although
# the capture holds three synchronous pageable cudaMemcpy calls (its query needs greenContextId,
# which that schema lacks). We agree with its table and name the calls in the explanation
# (test_legacy_memcpy_sync_explains_what_nsys_leaves_out).
KNOWN_DIFFERENCES: dict[tuple[str, str], str] = {}

_traces: dict[str, object] = {}


def trace(name: str):  # noqa: ANN201 - a cached reader per fixture
    if name not in _traces:
        path = KINETO if name == "kineto" else NSYS_DIR / f"{name}.sqlite"
        if not path.exists():
            pytest.skip(f"fixture {path} missing")
        _traces[name] = open_report(path)
    return _traces[name]


@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_matches_nsys_oracle_byte_for_byte(fixture: str, rule: str) -> None:
    oracle = ORACLES / f"{fixture}_{rule}.csv"
    expected = KNOWN_DIFFERENCES.get((fixture, rule), oracle.read_text())
    result = run_rule(trace(fixture), rule)
    assert to_csv(result) == expected
    assert result.table.empty == (expected == "")
    assert result.explanation


def test_numeric_columns_are_numeric() -> None:
    table = run_rule(trace("host_overhead_naive"), "cuda_memcpy_sync").table
    assert pd.api.types.is_integer_dtype(table["Duration (ns)"])
    assert pd.api.types.is_float_dtype(table["Bytes (MB)"])
    assert table["Green Context ID"].isna().all()
    util = run_rule(trace("torch_sdpa_gemm"), "gpu_time_util").table
    assert util["In-Use (%)"].tolist() == [2.7, 21.5]
    assert util["Row#"].tolist() == [1, 2]


# Expected outputs below are what nsys analyze (2022.4, same rule logic; 2025.3 only adds the
# Green Context ID column to copy rules) printed for these options on the same fixture.
def test_gpu_gaps_small_gap_finds_gaps() -> None:
    t = trace("host_overhead_naive")
    assert run_rule(t, "gpu_gaps").table.empty
    csv = to_csv(run_rule(t, "gpu_gaps", gap=1))
    assert csv == (
        "Row#,Duration (ns),Start (ns),PID,Device ID,Context ID\n"
        "1,2932565,620335528,2022,0,1\n"
        "2,1398459,681424729,2022,0,1\n"
        "3,1396762,641701877,2022,0,1\n"
        "4,1380507,661474951,2022,0,1\n"
    )
    # rows limits to the longest gaps; gap=0 lists every idle stretch (34 of them).
    assert len(run_rule(t, "gpu_gaps", gap="1", rows="2").table) == 2
    assert len(run_rule(t, "gpu_gaps", gap=0).table) == 34


def test_gpu_time_util_threshold_chunks_rows() -> None:
    t = trace("host_overhead_naive")
    assert to_csv(run_rule(t, "gpu_time_util", threshold=99)) == (
        "Row#,In-Use (%),Duration (ns),Start (ns),PID,Device ID,Context ID\n"
        "1,70.5,10948866,617497201,2022,0,1\n"
        "2,77.0,7299244,661292665,2022,0,1\n"
        "3,87.9,14598488,675891153,2022,0,1\n"
        "4,88.1,14598488,635745311,2022,0,1\n"
        "5,92.6,3649622,602898713,2022,0,1\n"
        "6,95.8,7299244,591949847,2022,0,1\n"
        "7,98.3,3649622,694139263,2022,0,1\n"
        "8,98.8,3649622,653993421,2022,0,1\n"
    )
    assert to_csv(run_rule(t, "gpu_time_util", threshold=95, chunks=10)) == (
        "Row#,In-Use (%),Duration (ns),Start (ns),PID,Device ID,Context ID\n"
        "1,73.2,10948866,613847579,2022,0,1\n"
        "2,84.3,10948866,679540775,2022,0,1\n"
        "3,84.6,10948866,657643043,2022,0,1\n"
        "4,85.4,10948866,635745311,2022,0,1\n"
    )
    # rows keeps the first merged rows in time order, then sorts them by in-use percentage.
    assert to_csv(run_rule(t, "gpu_time_util", threshold=99, rows=3)) == (
        "Row#,In-Use (%),Duration (ns),Start (ns),PID,Device ID,Context ID\n"
        "1,70.5,10948866,617497201,2022,0,1\n"
        "2,92.6,3649622,602898713,2022,0,1\n"
        "3,95.8,7299244,591949847,2022,0,1\n"
    )
    # One chunk = the whole span; the threshold is strict (41.9 % is not below 41).
    whole = run_rule(t, "gpu_time_util", threshold=101, chunks=1).table
    assert whole[["In-Use (%)", "Duration (ns)", "Start (ns)"]].values.tolist() == [
        [91.7, 109488660, 591949847]
    ]
    assert run_rule(t, "gpu_time_util", threshold=41).table.empty
    assert len(run_rule(t, "gpu_time_util", threshold=42).table) == 1


def test_gpu_time_util_ties_keep_chunk_order() -> None:
    # Two single chunks both print 89.7 %; nsys lists the earlier one first.
    table = run_rule(trace("host_overhead_naive"), "gpu_time_util", threshold=97, chunks=77).table
    tied = table[table["In-Use (%)"] == 89.7]
    assert tied["Start (ns)"].tolist() == [627498122, 647405156]


def test_time_window_and_nvtx_filter() -> None:
    t = trace("host_overhead_naive")
    all_syncs = run_rule(t, "cuda_api_sync").table
    assert len(all_syncs) == 5
    late = run_rule(t, "cuda_api_sync", start=660_000_000).table
    assert sorted(late["Start (ns)"]) == sorted(s for s in all_syncs["Start (ns)"] if s >= 660_000_000)
    first_iteration = run_rule(t, "cuda_memcpy_sync", nvtx="iteration(naive)").table
    assert 0 < len(first_iteration) < 20
    with pytest.raises(KernelscopeError, match="No NVTX range"):
        run_rule(t, "cuda_api_sync", nvtx="no such range")


def test_parse_rule_spec() -> None:
    assert parse_rule_spec("gpu_gaps:gap=100") == ("gpu_gaps", {"gap": "100"})
    assert parse_rule_spec("gpu_time_util:threshold=30:chunks=10") == (
        "gpu_time_util", {"threshold": "30", "chunks": "10"},
    )
    assert parse_rule_spec("cuda_api_sync") == ("cuda_api_sync", {})
    # nsys 2022 names are accepted and resolved.
    assert parse_rule_spec("gpu-starv:gap=1") == ("gpu_gaps", {"gap": "1"})
    name, options = parse_rule_spec("gpu_gaps:gap=1")
    assert len(run_rule(trace("host_overhead_naive"), name, **options).table) == 4


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: parse_rule_spec("no_such_rule"), "Unknown rule 'no_such_rule'"),
        (lambda: parse_rule_spec("gpu_gaps:foo=1"), "has no option 'foo'"),
        (lambda: parse_rule_spec("gpu_gaps:gap"), "not of the form key=value"),
        (lambda: run_rule(trace("host_overhead_naive"), "nope"), "Unknown rule"),
        (lambda: run_rule(trace("host_overhead_naive"), "gpu_gaps", chunks=3), "has no option"),
        (lambda: run_rule(trace("host_overhead_naive"), "gpu_time_util", chunks=0), "between 1"),
        (lambda: run_rule(trace("host_overhead_naive"), "gpu_time_util", chunks=1001), "between 1"),
        (lambda: run_rule(trace("host_overhead_naive"), "gpu_gaps", gap="abc"), "must be a number"),
        (lambda: run_rule(trace("host_overhead_naive"), "cuda_api_sync", rows=2.5), "an integer"),
    ],
)
def test_errors_are_sentences(call, message: str) -> None:  # noqa: ANN001
    with pytest.raises(KernelscopeError, match=re.escape(message)) as info:
        call()
    assert str(info.value).endswith(".")


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms"


def test_explanations_quote_real_numbers() -> None:
    t = trace("host_overhead_naive")
    r = run_rule(t, "cuda_memcpy_sync")
    total = int(r.table["Duration (ns)"].sum())
    assert "20 synchronous cudaMemcpy calls" in r.explanation
    assert _ms(total) in r.explanation
    assert "pinned" in r.fix and "cudaMemcpyAsync" in r.fix
    gaps = run_rule(trace("torch_sdpa_gemm"), "gpu_gaps")
    assert "1 GPU gap" in gaps.explanation and _ms(689610850) in gaps.explanation
    util = run_rule(trace("torch_sdpa_gemm"), "gpu_time_util")
    assert "2.7%" in util.explanation
    sync = run_rule(trace("host_overhead_fixed"), "cuda_api_sync")
    assert "5 synchronization calls" in sync.explanation and "(5 cudaStreamSynchronize)" in sync.explanation
    nothing = run_rule(trace("host_overhead_fixed"), "cuda_memcpy_sync")
    assert nothing.table.empty and nothing.fix == "" and nothing.explanation.startswith("No ")
    assert to_csv(nothing) == ""


def test_rules_run_on_kineto_trace() -> None:
    t = trace("kineto")
    results = {rule: run_rule(t, rule) for rule in RULES}
    assert all(isinstance(r, RuleResult) and r.explanation for r in results.values())
    # The trace's 10 copies are cudaMemcpyAsync calls on pageable memory (see the JSON's
    # "Memcpy HtoD (Pageable -> Device)" events and their cudaMemcpyAsync runtime calls).
    copies = results["cuda_memcpy_async"].table
    assert len(copies) == 10
    assert set(copies["API Name"]) == {"cudaMemcpyAsync"}
    assert set(copies["PID"]) == {1161}  # the process, not Kineto's per-device "pid" lane
    assert (copies["Src Kind"] == "Pageable").sum() == 5 and (copies["Dst Kind"] == "Pageable").sum() == 5
    assert copies["Duration (ns)"].is_monotonic_decreasing
    assert results["cuda_memcpy_sync"].table.empty
    syncs = results["cuda_api_sync"].table
    assert sorted(set(syncs["API Name"])) == ["cudaDeviceSynchronize", "cudaStreamSynchronize"]
    assert len(syncs) == 12
    to_csv(results["gpu_time_util"])
    assert len(run_rule(t, "gpu_gaps", gap=0).table) > 0


def test_legacy_memcpy_sync_explains_what_nsys_leaves_out() -> None:
    result = run_rule(trace("legacy2022_partial_naive"), "cuda_memcpy_sync")
    assert result.table.empty and to_csv(result) == ""
    assert "3 synchronous cudaMemcpy calls" in result.explanation
    assert "schema 3.0.0" in result.explanation
