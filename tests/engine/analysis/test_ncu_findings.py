"""ncu findings with gains on the H100 recordings (tests/data/recordings/ncu): the FP32 GEMM's gain from
this GPU's TF32 rate, uncoalesced access, ncu's estimates capped by the roofline, the grid as the
occupancy limiter. Numbers are checked against independent computations from the report's metrics."""

from __future__ import annotations

import lzma
import shutil
from pathlib import Path

import pytest

from engine.analysis.findings.model import sort_findings
from engine.analysis.findings.ncu_all import ncu_findings
from engine.reports.ncu import NcuReport
from engine.reports.ncu.decoders import read_ncu_rep
from engine.system.calibration import Calibration, save_calibration
from tests.conftest import REPO

pytest.importorskip("ncu_report")

DATA = REPO / "tests" / "data" / "recordings" / "ncu"


@pytest.fixture(autouse=True)
def _no_calibration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No calibration of this machine unless a test stores one (the datasheet is used then)."""
    monkeypatch.setenv("KERNELSCOPE_DATA", str(tmp_path / "data"))
    monkeypatch.setattr("engine.system.calibration.current_gpu_uuid", lambda: None)


def _read(name: str, tmp_path_factory: pytest.TempPathFactory) -> NcuReport:
    out = tmp_path_factory.mktemp(name) / f"{name}.ncu-rep"
    with lzma.open(DATA / f"{name}.ncu-rep.xz", "rb") as f, out.open("wb") as g:
        shutil.copyfileobj(f, g, 1 << 20)
    return read_ncu_rep(out, use_cache=False)


@pytest.fixture(scope="module")
def gemm(tmp_path_factory: pytest.TempPathFactory) -> NcuReport:
    return _read("torch_fp32_gemm", tmp_path_factory)


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> NcuReport:
    return _read("full", tmp_path_factory)


def _one(report: NcuReport, fid: str, subject: str) -> object:
    found = [f for f in ncu_findings(report) if f.id == fid and f.subject.startswith(subject)]
    assert len(found) == 1, [f.id for f in ncu_findings(report)]
    return found[0]


def test_fp32_gemm_gain_from_the_h100_tf32_rate(gemm: NcuReport) -> None:
    f = _one(gemm, "ncu.fp32-gemm-on-hopper", "sm80_xmma_gemm_f32f32")
    dur = float(gemm.kernels["duration_ns"].iloc[0])
    # Independently: the matmul is 4096 x 4096 x 4096, 2 FLOP per multiply-add.
    flop = 2 * 4096**3
    achieved = f.evidence_value("achieved FP32") * 1e12 * dur / 1e9  # type: ignore[attr-defined]
    assert achieved == pytest.approx(flop, rel=0.01)
    moved = gemm.value(0, "dram__bytes_read.sum") + gemm.value(0, "dram__bytes_write.sum")  # type: ignore[operator]
    expected_ns = dur - max(achieved / 494.5e12 * 1e9, moved / 3.35e12 * 1e9)
    g = f.gain  # type: ignore[attr-defined]
    assert g.seconds == pytest.approx(expected_ns / 1e9, rel=1e-6)
    assert 0 < g.seconds * 1e9 <= dur and g.window == "kernel time"
    assert "NVIDIA H100 80GB HBM3" in g.formula and "H100-SXM" in g.formula
    assert "NVIDIA H100 80GB HBM3" in f.summary and "H200" not in g.formula  # type: ignore[attr-defined]
    # The largest computable win comes first.
    assert sort_findings(ncu_findings(gemm))[0].id == "ncu.fp32-gemm-on-hopper"


def test_fp32_gemm_gain_from_a_calibration_of_the_same_gpu(gemm: NcuReport, tmp_path: Path) -> None:
    cal = Calibration(gpu_uuid="GPU-0", gpu_name="NVIDIA H100 80GB HBM3", device="cuda:0",
                      measured_at="2026-11-26T07:00:00Z", torch_version="2.11", timer="cuda events",
                      copy_bytes=1 << 28, matmul_n=8192, tf32_flop_per_s=350e12, bf16_flop_per_s=700e12,
                      fp32_flop_per_s=50e12, dram_bytes_per_s=3.0e12)
    save_calibration(cal)
    f = _one(gemm, "ncu.fp32-gemm-on-hopper", "sm80_xmma_gemm_f32f32")
    g = f.gain  # type: ignore[attr-defined]
    assert "calibration of NVIDIA H100 80GB HBM3" in g.formula and "350.0 TFLOP/s" in g.formula
    dur = float(gemm.kernels["duration_ns"].iloc[0])
    assert g.seconds == pytest.approx((dur - 2 * 4096**3 / 350e12 * 1e9) / 1e9, rel=0.01)


def test_uncoalesced_strided_copy_gets_ncus_estimate(full: NcuReport) -> None:
    f = _one(full, "ncu.uncoalesced", "strided_copy")
    kid = int(full.kernels.loc[full.kernels["Base Name"] == "strided_copy", "ID"].iloc[0])
    dur = float(full.kernels.loc[kid, "duration_ns"])
    own = full.rules[(full.rules["ID"] == kid) & (full.rules["rule"] == "UncoalescedGlobalAccess")]
    assert f.evidence_value("excess sectors") == 87.5  # type: ignore[attr-defined]  # 4 of 32 bytes used
    expected = dur * float(own["speedup_pct"].iloc[0]) / 100 / 1e9
    assert f.gain.seconds == pytest.approx(expected)  # type: ignore[attr-defined]
    assert f.gain.seconds > 0  # type: ignore[attr-defined]
    # A float4 copy moves 16 sectors per request and uses every byte: not uncoalesced.
    flagged = {g.subject.split("(")[0] for g in ncu_findings(full) if g.id == "ncu.uncoalesced"}
    assert "coalesced_copy" not in flagged and "strided_copy" in flagged


def test_ncu_estimates_are_capped_by_the_roofline(full: NcuReport) -> None:
    f = _one(full, "ncu.rule.HighPipeUtilization", "coalesced_copy")
    kid = int(full.kernels.loc[full.kernels["Base Name"] == "coalesced_copy", "ID"].iloc[0])
    sm = full.value(kid, "sm__throughput.avg.pct_of_peak_sustained_elapsed")
    mem = full.value(kid, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
    assert mem is not None and sm is not None and mem > 80  # near the DRAM roof
    assert f.evidence_value("estimated speedup") > 90  # type: ignore[attr-defined]  # ncu's own claim
    dur = float(full.kernels.loc[kid, "duration_ns"])
    assert f.gain.seconds == pytest.approx(dur * (100 - max(sm, mem)) / 100 / 1e9, rel=1e-3)  # type: ignore[attr-defined]


def test_occupancy_limiter_is_the_grid(full: NcuReport) -> None:
    f = _one(full, "ncu.low-occupancy", "few_blocks_regs")
    assert f.title == "Low occupancy: the grid is too small"  # type: ignore[attr-defined]
    assert "5 block(s) for 132 SMs" in f.summary and "registers" in f.summary  # type: ignore[attr-defined]
    assert f.evidence_value("grid size") == 5 and f.evidence_value("SMs") == 132  # type: ignore[attr-defined]
