"""Findings on the real H200 fixtures; expected numbers are recomputed from the SQLite tables."""

from __future__ import annotations

import json
import sqlite3

import pytest

from engine.analysis.findings import findings_for, format_findings
from engine.analysis.findings.ncu import ncu_findings
from engine.analysis.findings.nsys import nsys_findings, pinned_ceiling
from engine.analysis.findings.telemetry import telemetry_findings
from engine.cli import main
from engine.reports import open_report
from tests.conftest import FIXTURES, NSYS_DIR

NAIVE = NSYS_DIR / "host_overhead_naive.sqlite"
FIXED = NSYS_DIR / "host_overhead_fixed.sqlite"
LEGACY = NSYS_DIR / "legacy2022_partial_naive.sqlite"
SDPA_NCU = FIXTURES / "ncu" / "torch_sdpa.ncu-rep"
TELEMETRY = FIXTURES / "telemetry" / "telemetry_h200.csv"


def q(path, sql):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def by_id(findings, fid, subject=None):
    hits = [f for f in findings if f.id == fid and (subject is None or f.subject == subject)]
    assert len(hits) == 1, [f.id for f in findings]
    return hits[0]


@pytest.fixture(scope="module")
def naive_findings():
    return nsys_findings(open_report(NAIVE), reference=open_report(FIXED))


def _wall(path):
    lo = min(r[0] for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
                            "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS")
             for r in q(path, f"select min(start) from {t}"))
    hi = max(r[0] for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
                            "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS")
             for r in q(path, f"select max(end) from {t}"))
    return hi - lo


def test_naive_per_iteration_allocation_gain_from_its_numbers(naive_findings):
    # Independent: allocation calls inside the 'iteration(naive)' NVTX ranges.
    (alloc_ns, calls), = q(NAIVE, """
        select sum(r.end - r.start), count(*) from CUPTI_ACTIVITY_KIND_RUNTIME r
        join StringIds s on s.id = r.nameId
        join NVTX_EVENTS n on coalesce(n.text, (select value from StringIds where id = n.textId))
             = 'iteration(naive)' and r.start >= n.start and r.start < n.end
        where s.value like 'cudaMalloc%' or s.value like 'cudaFree%'""")
    f = by_id(naive_findings, "nsys.per-iteration-alloc")
    assert calls == 50 and f.evidence_value("allocation calls inside iterations") == 50
    assert f.evidence_value("allocation API time inside iterations") == alloc_ns
    assert f.gain is not None and f.gain.seconds == pytest.approx(alloc_ns * 4 / 5 / 1e9, abs=1e-9)
    assert f.gain.pct_of_wall == pytest.approx(100 * alloc_ns * 4 / 5 / _wall(NAIVE), abs=0.01)
    assert f.severity in ("warning", "critical")
    assert "cudaMalloc" in f.fix_cuda and "torch" in f.fix_torch


def test_naive_pageable_gain_uses_the_fixed_runs_pinned_rate(naive_findings):
    (pin_b, pin_ns), = q(FIXED, "select sum(bytes), sum(end-start) from CUPTI_ACTIVITY_KIND_MEMCPY "
                                "where copyKind = 1 and srcKind = 1")
    (pg_b, pg_ns), = q(NAIVE, "select sum(bytes), sum(end-start) from CUPTI_ACTIVITY_KIND_MEMCPY "
                              "where copyKind = 1 and srcKind = 0")
    rate = pin_b / pin_ns * 1e9
    assert rate / 1e9 == pytest.approx(55.20, abs=0.01)  # what the fixture README says: ~55 GB/s
    f = by_id(naive_findings, "nsys.pageable-copies", "Host-to-Device")
    assert f.evidence_value("bytes") == pg_b == 503_316_480
    assert f.evidence_value("GPU copy time") == pg_ns
    expected = pg_ns - pg_b / rate * 1e9
    assert f.gain.seconds == pytest.approx(expected / 1e9, rel=1e-6)
    assert f.severity == "critical"  # 58 ms of a 252 ms capture
    assert "host_overhead_fixed.sqlite" in [e.source for e in f.evidence if e.label == "pinned ceiling"][0]
    d2h = by_id(naive_findings, "nsys.pageable-copies", "Device-to-Host")
    d2h_sql = "select sum(bytes), sum(end-start) from CUPTI_ACTIVITY_KIND_MEMCPY where copyKind = 2"
    (b2, ns2), = q(NAIVE, d2h_sql)
    (pb2, pns2), = q(FIXED, d2h_sql)
    assert d2h.gain.seconds == pytest.approx((ns2 - b2 / (pb2 / pns2)) / 1e9, rel=1e-6)


def test_naive_sync_copies_gain_is_host_blocking_beyond_the_copies(naive_findings):
    (api_ns, n), = q(NAIVE, """select sum(r.end - r.start), count(*) from CUPTI_ACTIVITY_KIND_RUNTIME r
        join StringIds s on s.id = r.nameId where s.value like 'cudaMemcpy\\_v%' escape '\\'""")
    (gpu_ns,), = q(NAIVE, "select sum(end - start) from CUPTI_ACTIVITY_KIND_MEMCPY")
    f = by_id(naive_findings, "nsys.sync-copies")
    assert n == 20 and f.evidence_value("synchronous copy calls") == 20
    assert f.evidence_value("host time blocked in these calls") == api_ns
    assert f.gain.seconds == pytest.approx((api_ns - gpu_ns) / 1e9, abs=1e-9)


def test_fixed_has_none_of_the_three(naive_findings):
    fixed = nsys_findings(open_report(FIXED))
    ids = {f.id for f in fixed}
    assert not ids & {"nsys.per-iteration-alloc", "nsys.pageable-copies", "nsys.sync-copies",
                      "capture.incomplete", "nsys.default-stream"}
    assert {"nsys.per-iteration-alloc", "nsys.pageable-copies", "nsys.sync-copies"} <= {
        f.id for f in naive_findings}


def test_naive_default_stream_and_overlap(naive_findings):
    ds = by_id(naive_findings, "nsys.default-stream")
    (streams,), = q(NAIVE, "select group_concat(distinct streamId) from CUPTI_ACTIVITY_KIND_MEMCPY")
    assert ds.evidence_value("default stream id") == streams == "7"
    ov = by_id(naive_findings, "nsys.no-copy-compute-overlap")
    (k_ns,), = q(NAIVE, "select sum(end-start) from CUPTI_ACTIVITY_KIND_KERNEL")
    assert ov.evidence_value("copy/kernel overlap") == 0
    assert ov.gain.seconds == pytest.approx(k_ns / 1e9)  # kernels are shorter than copies here
    assert ov.gain.kind == "upper bound"


def test_legacy_partial_capture_says_incomplete_and_why():
    found = nsys_findings(open_report(LEGACY))
    f = found[0] if found[0].id == "capture.incomplete" else by_id(found, "capture.incomplete")
    assert f.severity == "critical" and f.gain is None
    (n_api,), = q(LEGACY, "select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME")
    assert f.evidence_value("CUDA API calls recorded") == n_api == 11
    assert f.evidence_value("kernels recorded") == 0
    assert "2022.4.2.1" in f.summary and "older than the CUDA driver" in f.summary
    # No gain is computed from a partial capture.
    assert all(g.gain is None or g.gain.seconds is None for g in found)


def test_sdpa_ncu_tensor_pipe_and_occupancy_evidence():
    from engine.reports.ncu import parse_number, read_ncu

    rep = read_ncu(SDPA_NCU)
    found = ncu_findings(rep)
    raw = rep.raw
    tcol = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
    tensor = sum(parse_number(v) for v in raw[tcol]) / 4
    ach = sum(parse_number(v) for v in raw["sm__warps_active.avg.pct_of_peak_sustained_active"]) / 4
    t = by_id(found, "ncu.tensor-pipes-idle")
    assert t.evidence_value("tensor pipe active") == pytest.approx(tensor)
    assert 40 < tensor < 42
    assert t.evidence_value("wgmma instructions") == 393_216
    occ = by_id(found, "ncu.low-occupancy")
    assert occ.evidence_value("achieved occupancy") == pytest.approx(ach)
    assert occ.evidence_value("theoretical occupancy") == pytest.approx(18.75)
    assert occ.evidence_value("block limit (registers)") == 1
    assert "registers and shared memory" in occ.summary
    # Latency-bound as engine.analysis.ncu.verdict says, with the top stall (barrier) as evidence.
    lat = by_id(found, "ncu.latency-bound")
    stall = "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
    # ncu prints it with 2 decimals; the finding keeps 3.
    barrier = parse_number(raw[stall].iloc[0])
    assert lat.evidence_value("warp stall: barrier") == pytest.approx(barrier, abs=6e-3)
    assert "barrier" in lat.summary and "14.1 %" in lat.summary
    # The kernel uses wgmma and TMA, so that rule stays silent; ncu's own rules are carried over.
    assert "ncu.no-wgmma-tma" not in {f.id for f in found}
    own = by_id(found, "ncu.rule.TheoreticalOccupancy")
    assert own.gain.pct_of_wall == pytest.approx(53.82)


def test_sgemm_on_hopper_is_fp32_without_wgmma():
    found = findings_for(FIXTURES / "ncu" / "host_overhead_fixed.ncu-rep")
    ids = {(f.id, f.subject) for f in found}
    assert ("ncu.fp32-gemm-on-hopper", "sgemm_tiled") in ids
    assert ("ncu.no-wgmma-tma", "sgemm_tiled") in ids
    assert not any(f.subject == "saxpy" and f.id == "ncu.fp32-gemm-on-hopper" for f in found)


def test_telemetry_throttle_on_fixture():
    import csv

    rows = list(csv.DictReader(TELEMETRY.open()))
    busy = [r for r in rows if float(r["util_gpu"]) >= 5]
    top = max(float(r["sm_mhz"]) for r in rows)
    low = [r for r in busy if float(r["sm_mhz"]) < 0.9 * top]
    from engine.telemetry.recording import read_recording

    found = telemetry_findings(read_recording(TELEMETRY))
    f = by_id(found, "telemetry.throttled-clocks")
    assert f.evidence_value("busy samples") == len(busy)
    assert f.evidence_value("busy samples with low SM clock") == len(low) == 1
    assert f.evidence_value("lowest busy SM clock") == 1605
    # No power limit or process list in this recording: those rules stay silent.
    assert {x.id for x in found} == {"telemetry.throttled-clocks"}


def test_power_cap_and_other_processes_edge_cases():
    import pandas as pd

    df = pd.DataFrame({
        "timestamp_ns": [0, 100_000_000], "util_gpu_pct": [90.0, 95.0], "sm_clock_mhz": [1980, 1980],
        "power_w": [690.0, 700.0], "power_limit_w": [700.0, 700.0],
        "throttle_reasons": ["none", "SwPowerCap"],
        "processes": ['[[10, "train", 1]]', '[[10, "train", 1], [11, "other", 2]]'],
    })
    found = telemetry_findings(df, own_pids={10})
    assert by_id(found, "telemetry.power-cap").evidence_value("samples at the power cap") == 2
    assert "other (pid 11)" in by_id(found, "telemetry.other-processes").summary


def test_pinned_ceiling_falls_back_to_spec_without_measurement():
    from engine.analysis.bandwidth import gpu_spec

    rate, where = pinned_ceiling("Host-to-Device", open_report(LEGACY))
    assert rate == gpu_spec("NVIDIA H200").pcie_bytes_per_s_per_direction == 64e9
    assert "PCIe Gen5 x16" in where and "H200" in where


def test_cli_findings_json_and_text(capsys):
    assert main(["findings", str(NAIVE), "--json", "--pinned-from", str(FIXED)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "kernelscope.findings/1"
    ids = [f["id"] for f in doc["findings"]]
    assert ids.count("nsys.pageable-copies") == 2
    assert main(["findings", str(FIXED), "--brief"]) == 0
    out = capsys.readouterr().out
    assert "pageable" not in out.lower().split("expected gain")[0] or "nsys.pageable-copies" not in out
    assert main(["findings", str(FIXTURES / "missing.sqlite")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_format_findings_text_has_gain_and_snippets(naive_findings):
    text = format_findings(naive_findings)
    assert "Expected gain (estimate): 57.98 ms" in text
    assert "cudaMallocHost" in text and "pin_memory" in text


def test_pinned_ceiling_from_this_gpus_calibration(tmp_path, monkeypatch):
    from engine.sessions.calibrate import Calibration, save_calibration

    monkeypatch.setenv("KERNELSCOPE_DATA", str(tmp_path))
    (uuid,), = q(NAIVE, "select uuid from TARGET_INFO_GPU")
    save_calibration(Calibration(gpu_uuid=f"GPU-{uuid}", gpu_name="NVIDIA H200", device="cuda",
                                 measured_at="2026-11-26T00:00:00+00:00", torch_version="2.11",
                                 timer="cuda-event", copy_bytes=1 << 28, matmul_n=8192,
                                 h2d_pinned_bytes_per_s=50.0e9, d2h_pinned_bytes_per_s=52.0e9))
    rate, where = pinned_ceiling("Host-to-Device", open_report(NAIVE))
    assert rate == 50.0e9 and uuid in where
    f = by_id(nsys_findings(open_report(NAIVE)), "nsys.pageable-copies", "Host-to-Device")
    (pg_b, pg_ns), = q(NAIVE, "select sum(bytes), sum(end-start) from CUPTI_ACTIVITY_KIND_MEMCPY "
                              "where copyKind = 1 and srcKind = 0")
    assert f.gain.seconds == pytest.approx((pg_ns - pg_b / 50.0e9 * 1e9) / 1e9, rel=1e-6)
    # A reference report still wins over the calibration.
    assert pinned_ceiling("Host-to-Device", open_report(NAIVE), open_report(FIXED))[0] / 1e9 == pytest.approx(
        55.20, abs=0.01)
