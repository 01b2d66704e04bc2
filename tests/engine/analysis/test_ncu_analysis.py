"""Nsight Compute analyses: sections, rules, roofline, verdicts, compare, against NVIDIA's own numbers.

The oracles are ncu 2025.3's `--page raw` / `--page details` exports of the fixtures: the roofline is
recomputed here from the raw page's metrics, and checked against what ncu's own rules and derived
metrics say about the same kernels.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import pytest

from engine.analysis.ncu.compare import compare_reports
from engine.analysis.ncu.roofline import roofline
from engine.analysis.ncu.sections import NOT_COLLECTED, kernel_sections, kernel_table, rules_table
from engine.analysis.ncu.verdict import verdict
from engine.reports.ncu import parse_number, read_ncu
from engine.reports.ncu.decoders import read_ncu_rep
from engine.sessions.ncu_logs import explain_ncu_log
from engine.system.errors import ReportError
from tests.conftest import FIXTURES, ORACLES

NCU = FIXTURES / "ncu"
NAMES = ["host_overhead_fixed", "torch_sdpa"]

pytest.importorskip("ncu_report")


@pytest.fixture(scope="module", params=NAMES)
def case(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    name = request.param
    return name, read_ncu(NCU / f"{name}.ncu-rep"), _raw_oracle(name)


def _raw_oracle(name: str) -> list[dict[str, float]]:
    """The raw oracle page: one dict per kernel, metric -> value in base units."""
    rows = list(csv.reader((ORACLES / f"{name}.raw.csv").open()))
    header = rows[0]
    return [{h: parse_number(c) for h, c in zip(header, r, strict=True)} for r in rows[2:]]


def _details_oracle(name: str) -> list[list[str]]:
    # metric rows stop after "Metric Value": pad them to the 20 columns of rule rows
    return [(r + [""] * 20)[:20] for r in list(csv.reader((ORACLES / f"{name}.details.csv").open()))[1:]]


def _close(a: float, b: float, rel: float = 1e-4) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-6)


# --- roofline --------------------------------------------------------------------------------------

FLOP_OPS = {
    "FP64": [("dadd", 1), ("dmul", 1), ("dfma", 2)],
    "FP32": [("fadd", 1), ("fmul", 1), ("ffma", 2)],
    "FP16": [("hadd", 2), ("hmul", 2), ("hfma", 4)],
}


def test_roofline_points_match_raw_oracle(case) -> None:  # type: ignore[no-untyped-def]
    name, r, raw = case
    rf = roofline(r)
    p = rf.points
    n = 0
    for kid, m in enumerate(raw):
        hz = m["smsp__cycles_elapsed.avg.per_second"]
        for prec, ops in FLOP_OPS.items():
            mine = (
                sum(
                    f * m[f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed"]
                    for op, f in ops
                )
                * hz
            )
            for level, bw_metric in [
                ("DRAM", "dram__bytes.sum.per_second"),
                ("L2", "derived__lts__lts2xbar_bytes.sum.per_second"),
                ("L1", "derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.per_second"),
            ]:
                row = p[(p["id"] == kid) & (p["precision"] == prec) & (p["level"] == level)]
                assert len(row) == 1
                # the oracle prints two decimals: allow for that rounding
                assert math.isclose(row["flops_per_s"].iloc[0], mine, rel_tol=1e-3, abs_tol=hz * 0.02)
                assert _close(row["bytes_per_s"].iloc[0], m[bw_metric])
                if m[bw_metric] > 0:
                    assert math.isclose(
                        row["intensity_flop_per_byte"].iloc[0],
                        mine / m[bw_metric],
                        rel_tol=1e-3,
                        abs_tol=1e-3,
                    )
                n += 1
        # NVIDIA's own derived per-cycle operation counts agree with our factors (2 per FMA, 4 per HFMA2)
        ffma2 = m["derived__smsp__sass_thread_inst_executed_op_ffma_pred_on_x2"]
        assert _close(
            ffma2, 2 * m["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed"], 1e-3
        )
        for op, factor in [("hadd", 2), ("hmul", 2), ("hfma", 4)]:
            derived = m[f"derived__smsp__sass_thread_inst_executed_op_{op}_pred_on_x{factor}"]
            per_cycle = m[f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed"]
            assert math.isclose(derived, factor * per_cycle, rel_tol=1e-3, abs_tol=0.02)
        hfma4 = m["derived__sm__sass_thread_inst_executed_op_hfma_pred_on_x4"]
        assert _close(hfma4, 4 * m["sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained"])
    assert n == 9 * len(raw)
    assert not rf.notes


def test_roofline_ceilings_match_raw_oracle(case) -> None:  # type: ignore[no-untyped-def]
    name, r, raw = case
    kc = roofline(r).kernel_ceilings
    for kid, m in enumerate(raw):
        got = dict(zip(kc[kc["id"] == kid]["name"], kc[kc["id"] == kid]["value"], strict=True))
        sm_hz = m["sm__cycles_elapsed.avg.per_second"]
        assert _close(
            got["FP32"], 2 * m["sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"] * sm_hz
        )
        assert _close(
            got["FP64"], 2 * m["sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained"] * sm_hz
        )
        assert _close(
            got["DRAM"], m["dram__bytes.sum.peak_sustained"] * m["dram__cycles_elapsed.avg.per_second"]
        )
        assert _close(
            got["L2"],
            m["derived__lts__lts2xbar_bytes.sum.peak_sustained"] * m["lts__cycles_elapsed.avg.per_second"],
        )
        # the DRAM roof is right if achieved/peak is ncu's own DRAM throughput percentage
        pct = m["dram__bytes.sum.per_second"] / got["DRAM"] * 100
        assert abs(pct - m["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"]) < 0.05


def test_roofline_fp32_agrees_with_ncu_rule(case) -> None:  # type: ignore[no-untyped-def]
    """ncu's SOLFPRoofline rule states 'achieved N% of this device's FP32 peak' for each kernel."""
    name, r, _raw = case
    rf = roofline(r)
    kc = rf.kernel_ceilings
    said = {}
    for row in _details_oracle(name):
        m = re.search(r"achieved (\d+)% of this device's FP32 peak", row[17])
        if row[15] == "SOLFPRoofline" and m:
            said[int(row[0])] = int(m.group(1))
    assert said, "the oracle has SOLFPRoofline messages"
    for kid, pct in said.items():
        fp32 = rf.points[(rf.points["id"] == kid) & (rf.points["precision"] == "FP32")]["flops_per_s"].iloc[0]
        peak = kc[(kc["id"] == kid) & (kc["name"] == "FP32")]["value"].iloc[0]
        assert round(fp32 / peak * 100) == pct


def test_tensor_roofline_agrees_with_tensor_pipe() -> None:
    """The attention kernel's FP16 tensor work over the dense FP16 roof is ncu's tensor pipe utilization."""
    r = read_ncu(NCU / "torch_sdpa.ncu-rep")
    rf = roofline(r)
    raw = _raw_oracle("torch_sdpa")
    kc = rf.kernel_ceilings
    for kid, m in enumerate(raw):
        t = rf.points[(rf.points["id"] == kid) & (rf.points["precision"] == "Tensor")]
        assert set(t["path"]) == {"FP16"}
        flops = t["flops_per_s"].iloc[0]
        assert _close(
            flops,
            m["sm__ops_path_tensor_src_fp16.sum.per_cycle_elapsed"] * m["sm__cycles_elapsed.avg.per_second"],
            1e-3,
        )
        roof = kc[(kc["id"] == kid) & (kc["name"] == "Tensor FP16")]["value"].iloc[0]
        pipe = m["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"]
        assert abs(flops / roof * 100 - pipe) < 0.5, (flops / roof * 100, pipe)


def test_roofline_calibration() -> None:
    r = read_ncu(NCU / "host_overhead_fixed.ncu-rep")
    base = roofline(r)
    cal = roofline(r, {"dram_bytes_per_s": 4.0e12, "FP32": 5.0e13})
    c = cal.ceilings
    assert set(c[c["source"] == "calibration"]["name"]) == {"DRAM", "FP32"}
    assert len(c[c["source"] == "report"]) == len(base.ceilings)
    p = cal.points
    saxpy = p[(p["id"] == 1) & (p["precision"] == "FP32") & (p["level"] == "DRAM")].iloc[0]
    assert _close(saxpy["attainable_flops_per_s"], saxpy["intensity_flop_per_byte"] * 4.0e12)
    sgemm = p[(p["id"] == 0) & (p["precision"] == "FP32") & (p["level"] == "DRAM")].iloc[0]
    assert sgemm["attainable_flops_per_s"] == 5.0e13 and sgemm["bound"] == "compute"


# --- kernel table, verdicts, sections --------------------------------------------------------------


def _details_value(name: str, kid: int, label: str, section: str) -> float:
    for row in _details_oracle(name):
        if row[0] == str(kid) and row[11] == section and row[12] == label:
            return parse_number(row[14])
    raise AssertionError(label)


def test_kernel_table_matches_details_oracle(case) -> None:  # type: ignore[no-untyped-def]
    name, r, _raw = case
    kt = kernel_table(r)
    assert list(kt["id"]) == list(range(len(kt)))
    for row in kt.to_dict("records"):
        kid = row["id"]
        sol = "GPU Speed Of Light Throughput"
        assert _close(
            row["sm_throughput_pct"], _details_value(name, kid, "Compute (SM) Throughput", sol), 1e-3
        )
        assert _close(row["memory_throughput_pct"], _details_value(name, kid, "Memory Throughput", sol), 1e-3)
        assert _close(
            row["achieved_occupancy_pct"], _details_value(name, kid, "Achieved Occupancy", "Occupancy"), 1e-3
        )
        assert row["duration_ns"] == _details_value(name, kid, "Duration", sol)
        assert row["verdict"] in ("memory-bound", "compute-bound", "latency-bound", "launch-bound")


def test_verdict_agrees_with_ncu_bottleneck_rule(case) -> None:  # type: ignore[no-untyped-def]
    """Our verdict and ncu's SOLBottleneck rule describe each kernel the same way."""
    name, r, _raw = case
    kt = kernel_table(r)
    for row in _details_oracle(name):
        if row[15] != "SOLBottleneck":
            continue
        mine = kt.loc[kt["id"] == int(row[0]), "verdict"].iloc[0]
        msg = row[17]
        if "low compute throughput and memory bandwidth" in msg:
            assert mine == "latency-bound"
        elif "Memory is more heavily utilized" in msg or "Memory Workload Analysis" in msg:
            assert mine == "memory-bound"
        elif "Compute is more heavily utilized" in msg:
            assert mine == "compute-bound"
        else:
            raise AssertionError(msg)


def test_verdict_kinds_from_numbers() -> None:
    assert (
        verdict({"sm_throughput_pct": 20, "memory_throughput_pct": 10, "duration_ns": 2000}).kind
        == "launch-bound"
    )
    small = verdict(
        {
            "sm_throughput_pct": 5,
            "memory_throughput_pct": 3,
            "duration_ns": 90_000,
            "launch__grid_size": 8,
            "launch__sm_count": 132,
        }
    )
    assert small.kind == "launch-bound" and "8 blocks for 132 SMs" in small.reason
    assert (
        verdict(
            {
                "sm__throughput.avg.pct_of_peak_sustained_elapsed": 85.0,
                "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 40.0,
            }
        ).kind
        == "compute-bound"
    )
    unknown = verdict({"duration_ns": 1e6})
    assert unknown.kind == "unknown" and "--section SpeedOfLight" in unknown.reason


def test_sections_hold_report_values(case) -> None:  # type: ignore[no-untyped-def]
    name, r, raw = case
    secs = kernel_sections(r, 0)
    assert list(secs) == [
        "GPU Speed Of Light",
        "Memory Workload Analysis",
        "Launch Statistics",
        "Occupancy",
        "Compute Workload Analysis",
        "Scheduler and Warp State",
        "Source Counters",
    ]
    m = raw[0]
    for title, df in secs.items():
        assert list(df.columns[:3]) == ["metric", "value", "unit"]
        for row in df.to_dict("records"):
            if row["name"] in m and not isinstance(row["value"], str):
                # the oracle prints two decimals
                assert math.isclose(row["value"], m[row["name"]], rel_tol=1e-6, abs_tol=0.0051), (
                    title,
                    row["metric"],
                )
    mem = secs["Memory Workload Analysis"].set_index("metric")
    assert (
        mem.loc["DRAM Bytes (read + write)", "value"]
        == m["dram__bytes_read.sum"] + m["dram__bytes_write.sum"]
    )
    occ = secs["Occupancy"].set_index("metric")
    limiter = occ.loc["Occupancy Limiter", "value"]
    limits = {
        w: m[f"launch__occupancy_limit_{k}"]
        for k, w in [
            ("registers", "registers"),
            ("shared_mem", "shared memory"),
            ("warps", "warps"),
            ("blocks", "blocks"),
            ("barriers", "barriers"),
        ]
    }
    assert limiter == " and ".join(w for w, v in limits.items() if v == min(limits.values()))
    stalls = secs["Scheduler and Warp State"]
    top = stalls[stalls["metric"].str.startswith("Stall #1")].iloc[0]
    reasons = {
        k: v
        for k, v in m.items()
        if k.startswith("smsp__average_warps_issue_stalled_")
        and k.endswith("_per_issue_active.ratio")
        and "_selected_" not in k
    }
    assert top["name"] == max(reasons, key=lambda k: reasons[k])
    cw = secs["Compute Workload Analysis"].set_index("metric")
    assert cw.loc["Uses wgmma (Hopper)", "value"] == ("yes" if name == "torch_sdpa" else "no")


def _per_pc(section):  # type: ignore[no-untyped-def]
    """The per-instruction rows of a Source Counters table (not the per-line totals)."""
    return section[(section["unit"] == "samples") & ~section["metric"].str.startswith("Hottest line")]


def test_source_counters() -> None:
    report = read_ncu(NCU / "host_overhead_fixed.ncu-rep")
    ho = kernel_sections(report, 0)["Source Counters"]
    # every sampled instruction is kept: their samples add up to ncu's own total
    ps = report.pc_samples
    for kid in (0, 1):
        assert ps[ps["ID"] == kid]["samples"].sum() == report.value(kid, "smsp__pcsamp_sample_count")
    hot_lines = ho[ho["metric"].str.startswith("Hottest line #")]
    lines = report.source_lines[0]
    assert len(hot_lines) == len(lines) > 0
    assert list(lines["samples"]) == sorted(lines["samples"], reverse=True)
    assert lines["samples"].sum() <= report.value(0, "smsp__pcsamp_sample_count")
    # a line's total is at least the samples of its hottest instructions listed above it
    per_pc = _per_pc(ho)
    top_file, top_line = lines.iloc[0]["file"], lines.iloc[0]["line"]
    on_top = per_pc[per_pc["metric"] == f"{top_file}:{top_line}"]["value"].sum()
    assert 0 < on_top <= lines.iloc[0]["samples"]
    lines = _per_pc(ho)
    assert len(lines) == 10 and lines["metric"].str.match(r".*host_overhead\.cu:\d+$").all()
    assert list(lines["value"]) == sorted(lines["value"], reverse=True)
    assert "LDS" in " ".join(lines["note"]) or "STS" in " ".join(lines["note"])
    sdpa = kernel_sections(read_ncu(NCU / "torch_sdpa.ncu-rep"), 0)["Source Counters"]
    assert sdpa["metric"].str.startswith("PC 0x").sum() == 10  # built without -lineinfo
    row = sdpa[sdpa["metric"] == "file:line"].iloc[0]
    assert row["value"] == NOT_COLLECTED and "-lineinfo" in row["note"]


# --- rules -----------------------------------------------------------------------------------------


def test_rules_table_ranked(case) -> None:  # type: ignore[no-untyped-def]
    name, r, _raw = case
    rt = rules_table(r)
    oracle = [row for row in _details_oracle(name) if row[15]]
    assert len(rt) == len(oracle)
    assert sorted(rt["rule"]) == sorted(row[15] for row in oracle)
    w = [x for x in rt["weighted_ns"] if not math.isnan(x)]
    assert w == sorted(w, reverse=True) and len(w) == sum(1 for row in oracle if row[19])
    for row in rt.to_dict("records"):
        if not math.isnan(row["speedup_pct"]):
            assert any(
                o[0] == str(row["id"]) and o[15] == row["rule"] and o[19] == f"{row['speedup_pct']:.4g}"
                for o in oracle
            )
            assert _close(row["weighted_ns"], row["speedup_pct"] / 100 * row["duration_ns"])
    if name == "host_overhead_fixed":
        top = rt.iloc[0]
        assert (top["id"], top["rule"], f"{top['speedup_pct']:.4g}") == (0, "HighPipeUtilization", "83.93")


def test_details_export_sections_say_where_the_rest_is() -> None:
    secs = kernel_sections(read_ncu(NCU / "host_overhead_fixed_details.csv"), 0)
    sol = secs["GPU Speed Of Light"].set_index("metric")
    assert sol.loc["Duration", "value"] == 2_100_000  # "2.10" ms in the export
    bank = secs["Memory Workload Analysis"].set_index("metric").loc["Shared Load Bank Conflicts"]
    assert bank["value"] == NOT_COLLECTED and "`--page raw` export" in bank["note"]
    assert "--section MemoryWorkloadAnalysis_Tables" in bank["note"]


def test_rules_from_details_csv_export() -> None:
    rt = rules_table(read_ncu(NCU / "host_overhead_fixed_details.csv"))
    ref = rules_table(read_ncu(NCU / "host_overhead_fixed.ncu-rep"))
    assert sorted(rt["rule"]) == sorted(ref["rule"])
    ranked, ref_ranked = rt.dropna(subset=["speedup_pct"]), ref.dropna(subset=["speedup_pct"])
    # the export prints 4 significant digits and its durations in ms with 2 decimals ("6.327", "2.10")
    assert list(zip(ranked["id"], ranked["rule"], strict=True)) == list(
        zip(ref_ranked["id"], ref_ranked["rule"], strict=True)
    )
    assert [f"{x:.4g}" for x in ranked["speedup_pct"]] == [f"{x:.4g}" for x in ref_ranked["speedup_pct"]]


# --- SpeedOfLight-only report (a CSV subset of the raw oracle) ---------------------------------------


def _sol_only_csv(tmp_path: Path) -> Path:
    rows = list(csv.reader((ORACLES / "host_overhead_fixed.raw.csv").open()))
    sol = {
        "gpu__time_duration.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        "l1tex__throughput.avg.pct_of_peak_sustained_active",
        "lts__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpc__cycles_elapsed.max",
        "sm__cycles_active.avg",
        "launch__grid_size",
        "launch__sm_count",
    }
    keep = [i for i, h in enumerate(rows[0]) if i < 11 or h in sol]
    out = tmp_path / "sol_only.csv"
    with out.open("w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        for r in rows:
            w.writerow([r[i] for i in keep])
    return out


def test_speed_of_light_only(tmp_path: Path) -> None:
    r = read_ncu(_sol_only_csv(tmp_path))
    kt = kernel_table(r)
    assert list(kt["verdict"]) == ["memory-bound", "memory-bound"]
    secs = kernel_sections(r, 1)
    sol = secs["GPU Speed Of Light"].set_index("metric")
    assert sol.loc["Duration", "value"] == 58_080
    occ = secs["Occupancy"]
    assert (occ["value"] == NOT_COLLECTED).all()
    assert (
        occ["note"].str.contains("--section Occupancy").all() and occ["note"].str.contains("--set full").all()
    )
    assert (secs["Compute Workload Analysis"]["value"] == NOT_COLLECTED).all()
    rf = roofline(r)
    assert rf.points.empty and "--section SpeedOfLight_RooflineChart" in rf.notes[0]


# --- compare ---------------------------------------------------------------------------------------


def test_compare_same_report() -> None:
    a = read_ncu(NCU / "torch_sdpa.ncu-rep")
    df = compare_reports(a, NCU / "torch_sdpa.ncu-rep")
    assert list(df["status"]) == ["matched"] * 4 and list(df["occurrence"]) == [0, 1, 2, 3]
    assert (df["duration_ns_delta"] == 0).all() and (df["speedup"] == 1).all()


def test_compare_by_name_and_launch_order() -> None:
    before = read_ncu(NCU / "torch_sdpa.ncu-rep")
    before.kernels = before.kernels[before.kernels["ID"] >= 2]  # launches 2 and 3 only
    after = read_ncu(NCU / "torch_sdpa.ncu-rep")
    df = compare_reports(before, after)
    assert list(df["status"]) == ["matched", "matched", "only after", "only after"]
    # the first launch in BEFORE (ID 2) pairs with the first in AFTER (ID 0)
    assert list(df["id_before"][:2]) == [2, 3] and list(df["id_after"]) == [0, 1, 2, 3]
    d = df.iloc[0]
    assert d["duration_ns_before"] == 46_688 and d["duration_ns_after"] == 46_816
    assert _close(d["duration_delta_pct"], (46_816 - 46_688) / 46_688 * 100)
    mixed = compare_reports(NCU / "host_overhead_fixed.ncu-rep", after)
    assert sorted(mixed["status"]) == ["only after"] * 4 + ["only before"] * 2


# --- logs and bad input ----------------------------------------------------------------------------


def test_explain_ncu_log() -> None:
    log = (
        "==PROF== Connected to process 4242 (/usr/bin/python3.12)\n"
        "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
        "Counters on the target device 0. For instructions on enabling permissions and to get more "
        "information see https://developer.nvidia.com/ERR_NVGPUCTRPERM\n"
        "==PROF== Disconnected from process 4242\n"
    )
    text = explain_ncu_log(log)
    assert text is not None and text.endswith(".") and "\n" not in text
    for words in ("root", "CAP_SYS_ADMIN", "NVreg_RestrictProfilingToAdminUsers=0"):
        assert words in text
    assert "no kernel" in (explain_ncu_log("==WARNING== No kernels were profiled.\n") or "")
    assert explain_ncu_log("==PROF== Report: /tmp/r.ncu-rep\n") is None


def _patched(tmp_path: Path, name: str, fmt: int) -> Path:
    b = bytearray((NCU / "host_overhead_fixed.ncu-rep").read_bytes())
    assert b[8:10] == b"\x08\x07"  # format 7 (ncu 2025.3)
    b[9] = fmt
    p = tmp_path / name
    p.write_bytes(bytes(b))
    return p


def _written_by(tmp_path: Path, version: bytes) -> Path:
    """host_overhead_fixed.ncu-rep as if a newer ncu wrote it: the version in its log replaced."""
    b = (NCU / "host_overhead_fixed.ncu-rep").read_bytes()
    assert b.count(b"2025.3.1.0 (build") == 1 and len(version) == len(b"2025.3.1.0")
    p = tmp_path / f"from-{version.decode()}.ncu-rep"
    p.write_bytes(b.replace(b"2025.3.1.0 (build", version + b" (build"))
    return p


def test_newer_report_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import version

    installed = version("ncu-report")
    year, release = (int(x) for x in installed.split(".")[:2])
    newer = _written_by(tmp_path, f"{year + 1}.{release}.0.0".encode())
    r = read_ncu_rep(newer, use_cache=False)
    need = f"{year + 1}.{release}"
    assert len(r.notes) == 1 and "\n" not in r.notes[0]
    wrote = f"written by Nsight Compute {need}.0.0, newer than the installed ncu-report {installed}"
    assert wrote in r.notes[0]
    assert f"install ncu-report {need} or newer (`pip install -U 'ncu-report>={need}'`)" in r.notes[0]
    # The same report from the installed version: no note.
    assert read_ncu_rep(_written_by(tmp_path, f"{year}.{release}.0.0".encode()), use_cache=False).notes == []
    formatted = _patched(tmp_path, "newer.ncu-rep", 99)
    assert read_ncu_rep(formatted, use_cache=False).notes == []  # its log says 2025.3.1: readable
    # A newer ncu's report that the wheel cannot decode cannot be made here: its failure is mocked
    # (in this process: the ncu_report reader; our own reader needs the wheel only for units).
    monkeypatch.setenv("KERNELSCOPE_NCU_OWN", "0")
    import ncu_report

    def refuse(path: str) -> None:
        raise RuntimeError("unsupported report version")

    monkeypatch.setattr(ncu_report, "load_report", refuse)
    with pytest.raises(ReportError, match=f"install ncu-report {need} or newer") as ei:
        read_ncu_rep(newer, use_cache=False)
    assert "\n" not in str(ei.value)


def test_corrupt_report(tmp_path: Path) -> None:
    b = bytearray((NCU / "host_overhead_fixed.ncu-rep").read_bytes())
    for i in range(200, len(b) - 10, 997):  # damage the contents, keep the block chain intact
        b[i] = (b[i] + 77) % 256
    p = tmp_path / "corrupt.ncu-rep"
    p.write_bytes(bytes(b))
    with pytest.raises(ReportError, match="damaged"):
        read_ncu_rep(p, use_cache=False)


def test_cache_round_trip(tmp_path: Path) -> None:
    import os

    src = tmp_path / "r.ncu-rep"
    src.write_bytes((NCU / "host_overhead_fixed.ncu-rep").read_bytes())
    first = read_ncu_rep(src)
    assert list(Path(os.environ["KERNELSCOPE_CACHE"]).glob("ncu-report/*.pickle"))
    again = read_ncu_rep(src)
    assert again.path == src
    assert again.values.equals(first.values) and again.rules.equals(first.rules)
    assert kernel_table(again).equals(kernel_table(first))
    # SASS and file:line are resolved on demand, also for a report that came from the cache
    bare = _per_pc(kernel_sections(again, 0, resolve_source=False)["Source Counters"])
    hot = bare
    assert hot["metric"].str.startswith("PC 0x").all() and len(hot) == 10
    hot = _per_pc(kernel_sections(again, 0)["Source Counters"])
    assert hot["metric"].str.contains(r"host_overhead\.cu:\d+$").all()
    assert list(hot["value"]) == list(bare["value"])


# --- CLI -------------------------------------------------------------------------------------------


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    import argparse

    from engine.cli.ncu import register

    p = argparse.ArgumentParser()
    register(p.add_subparsers())
    args = p.parse_args(argv)
    rc = args.func(args)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_cli_pages(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rep = str(NCU / "host_overhead_fixed.ncu-rep")
    rc, out, _ = _run(["ncu", rep, "--page", "rules", "--csv"], capsys)
    rows = list(csv.DictReader(out.splitlines()))
    assert rc == 0 and len(rows) == len(rules_table(read_ncu(rep)))
    assert (rows[0]["rank"], rows[0]["rule"]) == ("1", "HighPipeUtilization")
    rc, out, _ = _run(["ncu", rep, "--page", "verdict", "--json"], capsys)
    assert [d["verdict"] for d in json.loads(out)] == ["memory-bound", "memory-bound"]
    ceil = tmp_path / "c.json"
    ceil.write_text('{"DRAM": 4.0e12}')
    rc, out, _ = _run(["ncu", rep, "--page", "roofline", "--json", "--ceilings", str(ceil)], capsys)
    data = json.loads(out)
    assert (
        len(data["points"]) == 18
        and {
            "name": "DRAM",
            "kind": "memory",
            "value": 4000000000000,
            "unit": "byte/s",
            "source": "calibration",
        }
        in data["ceilings"]
    )
    rc, out, _ = _run(["ncu", rep, "--page", "sections", "--kernel", "saxpy"], capsys)
    assert "== [1] saxpy" in out and "Occupancy Limiter" in out and "sgemm" not in out
    rc, out, err = _run(["ncu", str(_sol_only_csv(tmp_path)), "--page", "roofline"], capsys)
    assert "--section SpeedOfLight_RooflineChart" in err


def test_cli_sections_disassemble_only_with_source(capsys: pytest.CaptureFixture[str]) -> None:
    """The sections page names the hottest PCs without disassembling; --source adds their SASS."""
    rep = str(NCU / "torch_sdpa.ncu-rep")
    rc, plain, _ = _run(["ncu", rep, "--page", "sections"], capsys)
    assert rc == 0
    hot = [ln for ln in plain.splitlines() if ln.startswith("PC 0x7f490f7a47c0")]
    assert hot and "samples of 4,983" in hot[0] and "WARPGROUP" not in hot[0]
    assert "--page sections --source` disassembles" in plain
    rc, full, _ = _run(["ncu", rep, "--page", "sections", "--source"], capsys)
    hot = [ln for ln in full.splitlines() if ln.startswith("PC 0x7f490f7a47c0")]
    assert rc == 0 and "WARPGROUP.DEPBAR.LE gsb0, 0x0  [top stall: barrier 462]" in hot[0]
    assert "--source` disassembles" not in full
    # the rest of the page is the same
    strip = [ln for ln in full.splitlines() if not ln.startswith(("PC 0x", "-", "metric", "file:line"))]
    assert strip == [ln for ln in plain.splitlines()
                     if not ln.startswith(("PC 0x", "-", "metric", "SASS and file:line"))]


def test_cli_compare(capsys: pytest.CaptureFixture[str]) -> None:
    rep = str(NCU / "torch_sdpa.ncu-rep")
    rc, out, _ = _run(["ncu-compare", rep, rep, "--csv"], capsys)
    rows = list(csv.DictReader(out.splitlines()))
    assert rc == 0 and [r["status"] for r in rows] == ["matched"] * 4
    rc, out2, _ = _run(["ncu", rep, "--compare", rep, "--csv"], capsys)
    assert out2 == out
