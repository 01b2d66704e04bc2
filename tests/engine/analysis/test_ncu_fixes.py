"""The ncu fix list (engine.analysis.findings.ncu_fixes) on real reports.

One entry per kernel name and rule with its gain per launch and in total, ties at a shared cap ranked
(verdict, then ncu's uncapped estimate), severity from the gain's share, the first fix agreeing with
the bottleneck verdict or saying why, and the fusion checklist item only for short kernels. Values are
checked against the reports' own metrics.
"""

from __future__ import annotations

import lzma
import shutil
import subprocess
from pathlib import Path

import pytest

from engine.analysis.findings import checklists as cl
from engine.analysis.findings.model import SEVERITIES
from engine.analysis.findings.ncu_all import ncu_findings
from engine.analysis.findings.ncu_fixes import Fix, first_per_kernel, fix_list
from engine.reports.ncu import NcuReport, read_ncu
from engine.reports.ncu.decoders import read_ncu_rep
from tests.conftest import FIXTURES, REPO

pytest.importorskip("ncu_report")

DATA = REPO / "tests" / "data" / "recordings" / "ncu"
NCU = FIXTURES / "ncu"


@pytest.fixture(autouse=True)
def _no_calibration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_DATA", str(tmp_path / "data"))
    monkeypatch.setattr("engine.system.calibration.current_gpu_uuid", lambda: None)


def _recording(name: str, tmp_path_factory: pytest.TempPathFactory) -> NcuReport:
    out = tmp_path_factory.mktemp(name) / f"{name}.ncu-rep"
    with lzma.open(DATA / f"{name}.ncu-rep.xz", "rb") as f, out.open("wb") as g:
        shutil.copyfileobj(f, g, 1 << 20)
    return read_ncu_rep(out, use_cache=False)


def _public(name: str, tmp_path_factory: pytest.TempPathFactory) -> NcuReport:
    d = tmp_path_factory.mktemp("ncu_public")
    subprocess.run(["tar", "xJf", str(FIXTURES / "ncu_public.tar.xz"), "-C", str(d),
                    f"ncu_public/{name}.ncu-rep"], check=True, timeout=120)
    return read_ncu(d / "ncu_public" / f"{name}.ncu-rep")


@pytest.fixture(scope="module")
def sdpa() -> NcuReport:
    return read_ncu(NCU / "torch_sdpa.ncu-rep")


@pytest.fixture(scope="module")
def host() -> NcuReport:
    return read_ncu(NCU / "host_overhead_fixed.ncu-rep")


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> NcuReport:
    return _recording("full", tmp_path_factory)


@pytest.fixture(scope="module")
def transpose(tmp_path_factory: pytest.TempPathFactory) -> NcuReport:
    return _public("Lashi0812__profiling_profiles_smemTranspose", tmp_path_factory)


def _fix(fixes: list[Fix], kernel: str, title: str) -> Fix:
    found = [x for x in fixes if x.kernel.startswith(kernel) and x.title == title]
    assert len(found) == 1, [(x.kernel, x.title) for x in fixes]
    return found[0]


def test_one_entry_per_kernel_with_gain_per_launch_and_in_total(sdpa: NcuReport) -> None:
    """torch_sdpa holds 4 launches of one cuDNN kernel: each ncu rule is one entry, not four."""
    fixes = fix_list(sdpa)
    titles = [x.title for x in fixes]
    assert len(titles) == len(set(titles))  # one kernel name: each rule once
    x = _fix(fixes, "cudnn_generated_fort_native_sdpa", "IssueSlotUtilization")
    assert x.launches == 4 and x.ids == (0, 1, 2, 3)
    rules = [r for r in sdpa.rule_records() if r["rule"] == "IssueSlotUtilization"]
    dur = {int(k["ID"]): float(k["duration_ns"]) for k in sdpa.kernel_records()}
    distance = {kid: 100 - max(sdpa.value(kid, "sm__throughput.avg.pct_of_peak_sustained_elapsed") or 0,
                               sdpa.value(kid, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_"
                                                "elapsed") or 0) for kid in dur}
    assert len(rules) == 4
    # Σ over the launches of each launch's own estimate × its duration (the cap, the mean distance
    # to the roofline, is above every launch's estimate here)
    expected = sum(dur[int(r["ID"])] * r["speedup_pct"] / 100 for r in rules)
    assert max(r["speedup_pct"] for r in rules) < min(distance.values())
    assert x.gain_ns == pytest.approx(expected, rel=1e-6)
    assert x.per_launch_ns == pytest.approx(expected / 4, rel=1e-6)
    share = f"{x.pct_of_kernel:.1f}"
    assert x.gain_words() == f"25.2 µs per launch × 4 launches = 0.10 ms ({share} % of its time)"
    assert x.pct_of_kernel == pytest.approx(100 * expected / sum(dur.values()), abs=0.01)


def test_a_shared_cap_is_no_tie(host: NcuReport) -> None:
    """sgemm_tiled sits at 93.7 % of memory peak: ncu's HighPipeUtilization (83.9 %), IssueSlotUtilization
    and CPIStall all end at the same 6.3 % cap; the uncapped estimate ranks them, the cap is a note."""
    fixes = fix_list(host)
    hpu = _fix(fixes, "sgemm_tiled", "HighPipeUtilization")
    isu = _fix(fixes, "sgemm_tiled", "IssueSlotUtilization")
    assert f"{hpu.gain_ns:.3g}" == f"{isu.gain_ns:.3g}"  # the same gain as shown: 133 µs
    assert hpu.estimate_ns == pytest.approx(2_101_888 * 0.83925497, rel=1e-6)  # ncu's own, uncapped
    assert hpu.rank < isu.rank and hpu.capped and not isu.capped
    assert hpu.short_note() == "capped (ncu: 1.76 ms); not the limiter"
    assert "capped at 6.3 % of the kernel's time (distance to the roofline)" in hpu.note
    # saxpy (memory-bound at 65.5 %): at the same 34.5 % cap, the memory-side rule ranks first
    l2 = _fix(fixes, "saxpy", "MemoryL2Compression")
    pipes = _fix(fixes, "saxpy", "HighPipeUtilization")
    assert f"{l2.gain_ns:.3g}" == f"{pipes.gain_ns:.3g}" and l2.rank < pipes.rank
    assert l2.agrees and not pipes.agrees
    best = first_per_kernel(fixes)
    assert best["saxpy"].title == "MemoryL2Compression"  # not HighPipeUtilization on a memory-bound kernel
    assert best["sgemm_tiled"].title.startswith("FP32 GEMM on Hopper")  # a new kernel: any verdict


def test_first_fix_agrees_with_the_verdict_or_says_why(host: NcuReport, full: NcuReport,
                                                       sdpa: NcuReport, transpose: NcuReport) -> None:
    for report in (host, full, sdpa, transpose):
        for x in first_per_kernel(fix_list(report)).values():
            assert x.agrees or f"is {x.verdict}" in x.note, (x.kernel, x.title, x.note)


def test_severity_follows_the_gain(host: NcuReport, full: NcuReport, sdpa: NcuReport,
                                   transpose: NcuReport) -> None:
    """One rule: the gain's share of all profiled kernel time (no info above a warning)."""
    for report in (host, full, sdpa, transpose):
        fixes = fix_list(report)
        total = sum(float(k["duration_ns"]) for k in report.kernel_records())
        ranks = [SEVERITIES.index(x.severity) for x in fixes]
        assert ranks == sorted(ranks)  # ranked by gain, so by severity too
        for x in fixes:
            share = 100 * (x.gain_ns or 0) / total
            assert x.severity == ("critical" if share >= 20 else "warning" if share >= 5 else "info")
    # full.ncu-rep: HighPipeUtilization on few_blocks_regs saves 0.27 ms of 0.97 ms (27.5 %)
    x = _fix(fix_list(full), "few_blocks_regs", "HighPipeUtilization")
    assert x.severity == "critical" and x.gain_ns is not None
    assert 100 * x.gain_ns / sum(float(k["duration_ns"]) for k in full.kernel_records()) == pytest.approx(
        27.5, abs=0.1)


def test_uncoalesced_stores_lead_the_public_transpose(transpose: NcuReport) -> None:
    """naiveGmem writes a transposed matrix column-wise: 32 sectors per store request, 4 would do."""
    fixes = fix_list(transpose)
    first = fixes[0]
    assert (first.kernel, first.title, first.rank) == ("naiveGmem", "Uncoalesced global stores", 1)
    kid = first.ids[0]
    sectors = transpose.value(kid, "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum")
    requests = transpose.value(kid, "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum")
    mem = transpose.value(kid, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
    dur = float(next(k["duration_ns"] for k in transpose.kernel_records() if int(k["ID"]) == kid))
    assert sectors is not None and requests is not None and mem is not None
    assert sectors / requests == pytest.approx(32.0, rel=0.01)
    assert first.gain_ns == pytest.approx(dur * (1 - 4 * requests / sectors) * mem / 100, rel=1e-6)
    assert first.gain_words() == "0.42 ms (79.8 % of its time)"
    # bank conflicts carry no estimate: "no gain computed", ranked last, never "0.0 µs"
    bank = [x for x in fixes if x.title == "Shared-memory bank conflicts"]
    assert bank and all(x.gain_ns is None and x.gain_words() == "no gain computed" for x in bank)
    assert fixes[-len(bank):] == bank


def test_loads_and_stores_share_one_ncu_estimate(tmp_path_factory: pytest.TempPathFactory) -> None:
    """armleth's matrix_addition2D: loads and stores uncoalesced, one finding, ncu's rule not repeated."""
    report = _public("armleth__report_v2", tmp_path_factory)
    ids = ("ncu.uncoalesced", "ncu.rule.UncoalescedGlobalAccess")
    found = [f for f in ncu_findings(report) if f.id in ids]
    assert [(f.id, f.title) for f in found] == [("ncu.uncoalesced", "Uncoalesced global loads and stores")]
    own = max(r["speedup_pct"] for r in report.rule_records() if r["rule"] == "UncoalescedGlobalAccess")
    dur = float(report.kernel_records()[0]["duration_ns"])
    gain = found[0].gain
    assert gain is not None and gain.seconds == pytest.approx(dur * own / 100 / 1e9, rel=1e-6)


def test_fusion_is_suggested_only_for_short_kernels(host: NcuReport, full: NcuReport,
                                                    tmp_path_factory: pytest.TempPathFactory) -> None:
    roadmap = cl.load_checklist("roadmap")
    assert roadmap.item("fusion.elementwise").max_kernel_us == 20

    def fusion(report: NcuReport) -> list[str]:
        found = ncu_findings(report)
        rows = cl.annotate(roadmap, {f.id for f in found}, findings=found)
        return next(r["triggered_by"] for r in rows if r["id"] == "fusion.elementwise")

    # HighPipeUtilization on saxpy (58 µs) and few_blocks_regs (274 µs, too small a grid): no fusion
    assert any(f.id == "ncu.rule.HighPipeUtilization" for f in ncu_findings(host))
    assert fusion(host) == [] and fusion(full) == []
    # 40 launches of 2-21 µs kernels of a training step: fusing the element-wise ones is the advice
    train = _recording("train40_threads", tmp_path_factory)
    assert fusion(train) == ["ncu.kernel-launch-bound", "ncu.rule.HighPipeUtilization"]
