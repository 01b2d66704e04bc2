"""The nsys stats reports against NVIDIA's own output (nsys 2025.3.1 oracles in shared/fixtures)."""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine.analysis.nsys.stats import (
    ALIASES,
    COLUMNS,
    REPORTS,
    format_table,
    resolve_report_name,
    run_report,
    to_csv,
)
from engine.reports import open_report
from engine.reports.base import ReportInfo, Trace
from engine.system.errors import KernelscopeError
from tests.conftest import FIXTURES, NSYS_SQLITE, ORACLES

KINETO = FIXTURES / "torch" / "torch_sdpa_trace.json"

CASES = [
    pytest.param(db, report, id=f"{db.stem}-{report}")
    for db in NSYS_SQLITE
    for report in REPORTS
    if (ORACLES / f"{db.stem}_{report}.csv").exists()
]

_traces: dict[Path, Trace] = {}


def _fixture(stem: str) -> Path:
    return next(p for p in NSYS_SQLITE if p.stem == stem)


def _trace(path: Path) -> Trace:
    if path not in _traces:
        _traces[path] = open_report(path)
    return _traces[path]


def test_fixtures_present() -> None:
    assert NSYS_SQLITE, f"no nsys fixtures under {FIXTURES}"
    assert len(CASES) >= 35


@pytest.mark.parametrize(("db", "report"), CASES)
def test_matches_nsys_oracle_byte_for_byte(db: Path, report: str) -> None:
    oracle = (ORACLES / f"{db.stem}_{report}.csv").read_bytes().decode()
    df = run_report(_trace(db), report)
    assert list(df.columns) == list(COLUMNS[report])
    got = to_csv(df)
    if got != oracle:  # show the first differing line, not a wall of text
        exp_lines, got_lines = oracle.splitlines(), got.splitlines()
        for i, (e, g) in enumerate(zip(exp_lines, got_lines, strict=False)):
            assert g == e, f"line {i} differs"
        assert len(got_lines) == len(exp_lines)
    assert got == oracle  # same bytes, "\n" line endings, csv quoting
    if oracle:
        # Numbers stay numbers in the DataFrame, and parse back to the printed values.
        parsed = list(csv.reader(io.StringIO(oracle)))
        assert len(parsed) - 1 == len(df)
        for col in df.columns:
            if col in ("Name", "Operation", "Range", "Style", "Category", "API Name", "Kernel Name"):
                continue
            assert pd.api.types.is_numeric_dtype(df[col].dtype), col


@pytest.mark.parametrize("db", NSYS_SQLITE, ids=lambda p: p.stem)
def test_empty_oracle_means_empty_result(db: Path) -> None:
    for report in REPORTS:
        oracle = ORACLES / f"{db.stem}_{report}.csv"
        if oracle.exists() and oracle.stat().st_size == 0:
            df = run_report(_trace(db), report)
            assert df.empty and list(df.columns) == list(COLUMNS[report])
            assert to_csv(df) == ""


def test_rounding_is_half_away_from_zero_on_the_exact_double() -> None:
    # Oracle facts: QAvg 7216921/4 = 1804230.25 prints 1804230.3 (not '%.1f''s 1804230.2), while
    # 104756411/20 = 5237820.55, stored as 5237820.5499..., prints 5237820.5.
    df = pd.DataFrame({"Avg (ns)": [1804230.25, 104756411 / 20, 0.05, 2.5], "Total (MB)": [0.0005] * 4})
    rows = to_csv(df).splitlines()[1:]
    assert rows == ["1804230.3,0.001", "5237820.5,0.001", "0.1,0.001", "2.5,0.001"]


def test_ties_in_total_sorted_by_name() -> None:
    # torch_sdpa_gemm copies 14 x 256 MiB each way: equal totals, nsys lists Device-to-Host first.
    df = run_report(_trace(_fixture("torch_sdpa_gemm")), "cuda_gpu_mem_size_sum")
    assert df["Operation"].tolist()[:2] == ["[CUDA memcpy Device-to-Host]", "[CUDA memcpy Host-to-Device]"]


def test_aliases_and_unknown_names() -> None:
    for old, new in ALIASES.items():
        assert resolve_report_name(old) == new
        assert new in REPORTS
    assert set(ALIASES) >= {
        "cudaapisum", "gpukernsum", "gpumemtimesum", "gpumemsizesum", "nvtxsum", "gpusum",
        "gputrace", "kernexecsum", "apigpusum",
    }
    for name in REPORTS:
        assert resolve_report_name(name) == name
    assert resolve_report_name(" GpuKernSum ") == "cuda_gpu_kern_sum"
    with pytest.raises(KernelscopeError, match="cuda_api_sum") as err:
        resolve_report_name("cuda_gpu_kernel_summary")
    assert "Unknown report" in str(err.value)
    with pytest.raises(KernelscopeError):
        run_report(_trace(NSYS_SQLITE[0]), "vulkanapisum")


@pytest.mark.parametrize("db", NSYS_SQLITE, ids=lambda p: p.stem)
def test_gpu_trace_rows_and_order(db: Path) -> None:
    trace = _trace(db)
    df = run_report(trace, "cuda_gpu_trace")
    assert list(df.columns) == list(COLUMNS["cuda_gpu_trace"])
    n = sum(len(trace.table(t)) for t in ("kernels", "memcpy", "memset") if t not in trace.missing)
    assert len(df) == n
    if n:
        assert df["Start (ns)"].is_monotonic_increasing
        kernels = df[df["GrdX"].notna()]
        assert len(kernels) == (0 if "kernels" in trace.missing else len(trace.table("kernels")))
        assert (df["Duration (ns)"] >= 0).all()
        text = to_csv(df)
        assert text.startswith(",".join(COLUMNS["cuda_gpu_trace"]) + "\n")
        assert len(list(csv.reader(io.StringIO(text)))) == n + 1


def test_gpu_trace_values_cross_checked_with_nsys_2022() -> None:
    # First rows of `nsys stats -r gputrace -f csv host_overhead_fixed.sqlite` (Debian nsys 2022.4),
    # which prints memcpy names as "[CUDA memcpy HtoD]" and lacks GreenCtx.
    df = run_report(_trace(_fixture("host_overhead_fixed")), "cuda_gpu_trace")
    rows = list(csv.DictReader(io.StringIO(to_csv(df))))
    first = rows[0]
    assert (first["Start (ns)"], first["Duration (ns)"], first["CorrId"]) == ("612922473", "305023", "128")
    assert (first["Bytes (MB)"], first["SrcMemKd"], first["DstMemKd"]) == ("16.777", "Pinned", "Device")
    assert first["Device"] == "NVIDIA H200 (0)" and first["Ctx"] == "1" and first["Strm"] == "13"
    assert first["Name"] == "[CUDA memcpy Host-to-Device]" and first["GrdX"] == ""
    memset = rows[3]
    assert (memset["Name"], memset["SrcMemKd"], memset["DstMemKd"]) == ("[CUDA memset]", "Device", "")
    kernel = rows[4]
    assert [kernel[c] for c in ("GrdX", "GrdY", "GrdZ", "BlkX", "BlkY", "BlkZ", "Reg/Trd")] == [
        "128", "128", "1", "16", "16", "1", "32"]
    assert (kernel["StcSMem (MB)"], kernel["DymSMem (MB)"], kernel["Bytes (MB)"]) == ("0.002", "0.000", "")
    assert kernel["Name"] == "void sgemm_tiled<(int)16>(int, const float *, const float *, float *)"
    # Throughput as nsys (2022.4 and 2025.3) prints it: MB x (1e9 // ns) = 16.777216 x 3278 MB/s.
    assert first["Throughput (MB/s)"] == "54995.714"


def test_nvtx_names_and_styles() -> None:
    df = run_report(_trace(_fixture("torch_sdpa_gemm")), "nvtx_sum")
    assert "cuBLAS:cublasCreate_v2" in df["Range"].tolist()  # named domain
    assert ":sdpa" in df["Range"].tolist()  # default domain
    assert set(df["Style"]) == {"PushPop"}


def test_api_suffix_rule() -> None:
    names = run_report(_trace(_fixture("torch_sdpa_gemm")), "cuda_api_sum")["Name"].tolist()
    assert "cudaMemcpyAsync" in names and "cudaMemcpyAsync_v3020" not in names
    assert "cudaEventRecordWithFlags_v11010" in names and "cuGetProcAddress_v2" in names


def test_kineto_kernel_totals_match_json() -> None:
    doc = json.loads(KINETO.read_text())
    expected: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    for e in doc["traceEvents"]:
        if isinstance(e, dict) and e.get("cat") == "kernel" and e.get("ph") == "X":
            expected[e["name"]] += round(float(e["dur"]) * 1000)
            counts[e["name"]] += 1
    assert expected
    trace = open_report(KINETO)
    df = run_report(trace, "cuda_gpu_kern_sum")
    assert dict(zip(df["Name"], df["Total Time (ns)"], strict=True)) == dict(expected)
    assert dict(zip(df["Name"], df["Instances"], strict=True)) == dict(counts)
    assert df["Time (%)"].sum() == pytest.approx(100.0)


def test_kineto_all_reports_run() -> None:
    trace = open_report(KINETO)
    for report in REPORTS:
        df = run_report(trace, report)
        assert list(df.columns) == list(COLUMNS[report])
        assert isinstance(format_table(df), str)
    # Kineto GPU events carry the device as "pid"; launches still pair with kernels.
    exec_sum = run_report(trace, "cuda_kern_exec_sum")
    assert exec_sum["Count"].sum() == len(trace.table("kernels"))
    assert exec_sum["API Name"].tolist() == ["cuLaunchKernelEx"]
    gpu_trace = run_report(trace, "cuda_gpu_trace")
    assert len(gpu_trace) == sum(len(trace.table(t)) for t in ("kernels", "memcpy", "memset"))
    assert gpu_trace["Start (ns)"].is_monotonic_increasing


def test_format_table_aligns_columns() -> None:
    df = run_report(_trace(_fixture("host_overhead_fixed")), "cuda_gpu_kern_sum")
    lines = format_table(df).splitlines()
    assert lines[0].startswith("Time (%)") and set(lines[1]) <= {"-", " "}
    assert len(lines) == len(df) + 2
    assert lines[2].index("10514168") + len("10514168") == lines[3].index("305664") + len("305664")
    short = format_table(df, max_width=20)
    assert "void sgemm_tiled<..." in short
    assert format_table(df.iloc[:0]) == "(no data for this report)\n"


class _Scaled(Trace):
    """A real fixture's tables repeated to a large size (for timing only)."""

    def __init__(self, src: Trace, sizes: dict[str, int]) -> None:
        super().__init__(ReportInfo(path=src.info.path, kind="nsys-sqlite"))
        self._src, self._sizes = src, sizes

    def _load(self, name: str, columns: list[str]) -> pd.DataFrame | None:
        df = self._src.table(name)
        if name in self._src.missing:
            return None
        n = self._sizes.get(name)
        if not n or df.empty:
            return df
        reps = -(-n // len(df))
        big = pd.concat([df] * reps, ignore_index=True).iloc[:n].copy()
        big["correlationId"] = big["correlationId"] + np.repeat(np.arange(reps), len(df))[:n] * 10**7
        return big


def test_core_reports_on_a_large_trace() -> None:
    """Scale a real fixture to 400k kernels / 800k API calls: counts and totals scale exactly.
    (Speed is measured by benchmarks/bench_stats.py, not here.)"""
    src = _trace(_fixture("torch_sdpa_gemm"))
    big = _Scaled(src, {"kernels": 400_000, "api": 800_000})
    for report in ("cuda_api_sum", "cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum",
                   "cuda_gpu_mem_size_sum", "nvtx_sum"):
        assert not run_report(big, report).empty
    assert run_report(big, "cuda_api_sum")["Num Calls"].sum() == 800_000
    assert run_report(big, "cuda_gpu_kern_sum")["Instances"].sum() == 400_000


def test_cuda_gpu_trace_matches_nsys_2025_output() -> None:
    """nsys 2025.3.1 `stats -r cuda_gpu_trace -f csv` of host_overhead_naive, run on the lent H200 host
    (stdout; nsys adds one blank line at the end)."""
    from pathlib import Path

    oracle = Path(__file__).resolve().parents[2] / "data" / "oracles_nsys2025" / \
        "host_overhead_naive_cuda_gpu_trace.csv"
    trace = _trace(_fixture("host_overhead_naive"))
    assert to_csv(run_report(trace, "cuda_gpu_trace")) == oracle.read_text().rstrip("\n") + "\n"
