"""Achieved copy throughput and its ceilings, checked against the fixtures' SQLite read directly."""

from __future__ import annotations

import json
import sqlite3
import sys
import types

import numpy as np
import pytest

from engine.analysis import bandwidth as bw
from engine.reports import open_report
from tests.conftest import FIXTURES, NSYS_DIR

NAIVE = NSYS_DIR / "host_overhead_naive.sqlite"
FIXED = NSYS_DIR / "host_overhead_fixed.sqlite"
TORCH = NSYS_DIR / "torch_sdpa_gemm.sqlite"
KINETO = FIXTURES / "torch" / "torch_sdpa_trace.json"


def _sql_rows(path):
    """(start, bytes, rate B/s, copyKind label, host memory kind label) straight from the export."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(
            """
            SELECT m.start, m.bytes, m.bytes * 1e9 / (m.end - m.start), o.label,
                   CASE WHEN m.copyKind = 1 THEN s.label ELSE d.label END
            FROM CUPTI_ACTIVITY_KIND_MEMCPY m
            JOIN ENUM_CUDA_MEMCPY_OPER o ON o.id = m.copyKind
            JOIN ENUM_CUDA_MEM_KIND s ON s.id = m.srcKind
            JOIN ENUM_CUDA_MEM_KIND d ON d.id = m.dstKind
            ORDER BY m.start
            """
        ).fetchall()
    finally:
        con.close()


def _label(text: str) -> str:
    # ENUM labels read "Host-to-Device" / "Pageable" (older exports: "[CUDA memcpy Host-to-Device]").
    return text.replace("[CUDA memcpy ", "").rstrip("]").strip()


@pytest.mark.parametrize("path,host_kind", [(NAIVE, "Pageable"), (FIXED, "Pinned")],
                         ids=["naive_pageable", "fixed_pinned"])
def test_every_transfer_rate_equals_bytes_over_duration(path, host_kind):
    rows = _sql_rows(path)
    with open_report(path) as trace:
        x = bw.transfers(trace)
    assert len(x) == len(rows) == 20
    np.testing.assert_array_equal(x["start"].to_numpy(), [r[0] for r in rows])
    np.testing.assert_array_equal(x["bytes"].to_numpy(), [r[1] for r in rows])
    np.testing.assert_allclose(x["bytes_per_s"].to_numpy(), [r[2] for r in rows], rtol=1e-12)
    np.testing.assert_allclose(x["gb_per_s"].to_numpy() * 1e9, [r[2] for r in rows], rtol=1e-12)
    assert list(x["direction"]) == [_label(r[3]) for r in rows]
    assert list(x["memory"]) == [_label(r[4]) for r in rows]
    assert set(x["memory"]) == {host_kind}
    assert set(x["direction"]) == {"Host-to-Device", "Device-to-Host"}


def test_pinned_copies_are_much_faster_than_pageable():
    with open_report(NAIVE) as t:
        naive = bw.kind_stats(bw.transfers(t)).set_index("kind")
    with open_report(FIXED) as t:
        fixed = bw.kind_stats(bw.transfers(t)).set_index("kind")
    h2d_pageable = naive.loc["Host-to-Device · Pageable", "gb_per_s"]
    h2d_pinned = fixed.loc["Host-to-Device · Pinned", "gb_per_s"]
    # Same 503 MB moved: 67.1 ms pageable vs 9.1 ms pinned on the H200.
    assert h2d_pinned > 5 * h2d_pageable


@pytest.mark.parametrize("path", [NAIVE, FIXED, TORCH], ids=lambda p: p.stem)
def test_kind_stats_aggregate_matches_sqlite_group_by(path):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    groups = con.execute(
        "SELECT copyKind, CASE WHEN copyKind = 1 THEN srcKind ELSE dstKind END, count(*), sum(bytes), "
        "sum(end - start), min(bytes * 1.0 / (end - start)), max(bytes * 1.0 / (end - start)) "
        "FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1, 2"
    ).fetchall()
    con.close()
    with open_report(path) as trace:
        stats = bw.kind_stats(bw.transfers(trace), bw.trace_ceilings(trace, use_calibration=False))
    assert len(stats) == len(groups)
    kinds = {(1, 0): "Host-to-Device · Pageable", (1, 1): "Host-to-Device · Pinned",
             (2, 0): "Device-to-Host · Pageable", (2, 1): "Device-to-Host · Pinned"}
    by_kind = stats.set_index("kind")
    for ck, mk, n, nbytes, dur, lo, hi in groups:
        row = by_kind.loc[kinds[(ck, mk)]]
        assert row["count"] == n
        assert row["bytes"] == nbytes
        assert row["total_ns"] == dur
        assert row["gb_per_s"] == pytest.approx(nbytes / dur, rel=1e-12)
        assert row["min_gb_per_s"] == pytest.approx(lo, rel=1e-12)
        assert row["max_gb_per_s"] == pytest.approx(hi, rel=1e-12)
        assert row["ceiling_source"] == "spec"
        assert row["ceiling_gb_per_s"] == 64.0
        assert row["pct_of_ceiling"] == pytest.approx(100 * nbytes / dur / 64.0, rel=1e-12)


def test_nsys_rates_agree_with_cuda_event_benchmark():
    """nsys's view of the 256 MiB copies matches torch's CUDA-event timing of them (same H200 run)."""
    bench = json.loads((FIXTURES / "telemetry" / "torch_workload_bench_h200.json").read_text())
    with open_report(TORCH) as trace:
        stats = bw.kind_stats(bw.transfers(trace)).set_index("kind")
    assert stats.loc["Host-to-Device · Pinned", "median_gb_per_s"] == pytest.approx(
        bench["h2d_pinned_GBps"], rel=0.05)
    assert stats.loc["Device-to-Host · Pinned", "median_gb_per_s"] == pytest.approx(
        bench["d2h_pinned_GBps"], rel=0.05)


def test_histogram_counts_every_transfer_on_shared_bins():
    with open_report(TORCH) as trace:
        x = bw.transfers(trace)
    h = bw.histogram(x, bins=20)
    assert set(h["kind"]) == set(x["kind"])
    for kind, g in h.groupby("kind"):
        assert g["count"].sum() == (x["kind"] == kind).sum()
        assert g["bytes"].sum() == x.loc[x["kind"] == kind, "bytes"].sum()
        assert len(g) == 20
    edges = h[h["kind"] == h["kind"].iloc[0]]
    assert edges["lo_gb_per_s"].iloc[0] == pytest.approx(x["gb_per_s"].min())
    assert edges["hi_gb_per_s"].iloc[-1] == pytest.approx(x["gb_per_s"].max())
    # Log bins: constant ratio between consecutive edges.
    ratios = edges["hi_gb_per_s"].to_numpy() / edges["lo_gb_per_s"].to_numpy()
    np.testing.assert_allclose(ratios, ratios[0])


@pytest.mark.parametrize("name,key", [
    ("NVIDIA H200", "H200-SXM"),
    ("NVIDIA H100 80GB HBM3", "H100-SXM"),
    ("NVIDIA H100 PCIe", "H100-PCIe"),
    ("NVIDIA A100-SXM4-80GB", "A100-80GB-SXM"),
    ("NVIDIA A100-SXM4-40GB", "A100-40GB-SXM"),
    ("NVIDIA A100 80GB PCIe", "A100-80GB-PCIe"),
    ("NVIDIA A100-PCIE-40GB", "A100-40GB-PCIe"),
    ("Tesla T4", None),
    (None, None),
])
def test_gpu_spec_matches_report_names(name, key):
    spec = bw.gpu_spec(name)
    assert (spec.key if spec else None) == key


def test_spec_agrees_with_the_bandwidth_the_report_recorded():
    """TARGET_INFO_GPU.memoryBandwidth of the H200 (4.814 TB/s) is the datasheet's 4.8 TB/s."""
    con = sqlite3.connect(f"file:{FIXED}?mode=ro", uri=True)
    name, recorded = con.execute("SELECT name, memoryBandwidth FROM TARGET_INFO_GPU").fetchone()
    con.close()
    spec = bw.gpu_spec(name)
    assert spec is not None
    assert spec.hbm_bytes_per_s == pytest.approx(recorded, rel=0.01)
    assert spec.pcie_bytes_per_s_per_direction == 64e9
    assert spec.flop_per_s["fp32"] == 67e12
    assert spec.flop_per_s["bf16_tensor"] == 989.5e12


def test_calibration_wins_where_it_measured():
    from engine.sessions.calibrate import Calibration

    cal = Calibration(gpu_uuid="GPU-x", gpu_name="NVIDIA H200", device="cuda", measured_at="today",
                      torch_version="2.11", timer="cuda-event", copy_bytes=1, matmul_n=1,
                      h2d_pinned_bytes_per_s=55.0e9)
    ceil = {(c.direction, c.memory): c for c in bw.ceilings("NVIDIA H200", "GPU-x", calibration=cal)}
    assert ceil[("Host-to-Device", "Pinned")].source == "calibration"
    assert ceil[("Host-to-Device", "Pinned")].bytes_per_s == 55.0e9
    assert "calibrated" in ceil[("Host-to-Device", "Pinned")].label
    assert ceil[("Device-to-Host", "Pinned")].source == "spec"  # not measured: the spec
    assert ceil[("Device-to-Device", "Device")].bytes_per_s == 2.4e12
    assert ceil[("Device-to-Device", "Device")].source == "spec"


def test_stored_calibration_of_the_reports_gpu_is_used(tmp_path, monkeypatch):
    """A calibration saved for the H200 of the fixture (by UUID) gives measured ceilings."""
    from engine.sessions.calibrate import Calibration, save_calibration

    monkeypatch.setenv("KERNELSCOPE_DATA", str(tmp_path))
    with open_report(FIXED) as trace:
        name, uuid = bw.report_gpu(trace)
        assert uuid == "85577ab8-2cf2-3688-0198-3f3659a3e7e9"
        save_calibration(Calibration(
            gpu_uuid=f"GPU-{uuid}", gpu_name=name, device="cuda", measured_at="2026-11-26T00:00:00Z",
            torch_version="2.11.0", timer="cuda-event", copy_bytes=1 << 28, matmul_n=8192,
            h2d_pinned_bytes_per_s=55.02e9, d2h_pinned_bytes_per_s=54.85e9, d2d_copy_bytes_per_s=1.9e12))
        a = bw.analyze(trace)
    ceil = {(c.direction, c.memory): c for c in a.ceilings}
    assert ceil[("Host-to-Device", "Pinned")].source == "calibration"
    assert ceil[("Host-to-Device", "Pinned")].bytes_per_s == 55.02e9
    assert "2026-11-26" in ceil[("Host-to-Device", "Pinned")].detail
    assert ceil[("Device-to-Device", "Device")].bytes_per_s == 1.9e12
    assert ceil[("Host-to-Device", "Pageable")].source == "spec"  # not measured
    row = a.stats.set_index("kind").loc["Host-to-Device · Pinned"]
    assert row["ceiling_source"] == "calibration"
    assert row["pct_of_ceiling"] == pytest.approx(100 * row["gb_per_s"] / 55.02, rel=1e-12)
    assert not any("specification" in n for n in a.notes)


def test_damaged_calibration_is_named_and_spec_used(tmp_path, monkeypatch):
    from engine.sessions.calibrate import calibration_path

    monkeypatch.setenv("KERNELSCOPE_DATA", str(tmp_path))
    path = calibration_path("85577ab8-2cf2-3688-0198-3f3659a3e7e9")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    with open_report(FIXED) as trace:
        a = bw.analyze(trace)
    assert all(c.source == "spec" for c in a.ceilings)
    assert any("damaged" in n and str(path) in n for n in a.notes)


def test_missing_calibration_module_falls_back_to_spec(monkeypatch):
    monkeypatch.setitem(sys.modules, "engine.sessions.calibrate", None)  # import raises ImportError
    ceil = bw.ceilings("NVIDIA H200", "85577ab8-2cf2-3688-0198-3f3659a3e7e9")
    assert ceil and all(c.source == "spec" for c in ceil)


def test_calibration_module_that_raises_falls_back_to_spec(monkeypatch):
    mod = types.ModuleType("engine.sessions.calibrate")

    def load_calibration(uuid=None):
        raise ValueError("damaged calibration file")

    mod.load_calibration = load_calibration  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "engine.sessions.calibrate", mod)
    assert all(c.source == "spec" for c in bw.ceilings("NVIDIA H200", "u"))


def test_unknown_gpu_has_no_ceilings_and_says_so():
    assert bw.ceilings("Tesla T4", None, use_calibration=False) == []


def test_kineto_trace_has_no_uuid_and_uses_spec():
    with open_report(KINETO) as trace:
        a = bw.analyze(trace)
    assert a.gpu_name == "NVIDIA H200"
    assert len(a.transfers) == 10
    assert all(c.source == "spec" for c in a.ceilings)
    assert a.notes == ["Ceilings are the GPU's specification; run `kernelscope calibrate` on that "
                       "machine for measured ones."]


def test_report_without_copies_says_what_is_missing():
    from engine.reports.base import ReportInfo, Trace

    class Empty(Trace):
        def _load(self, name, columns):
            return None

    a = bw.analyze(Empty(ReportInfo(NAIVE, "nsys-sqlite")))
    assert len(a.transfers) == 0 and len(a.stats) == 0 and len(a.histogram) == 0
    assert a.notes[0] == "This report has no memory copies (CUDA memory copies were not captured)."
    assert a.notes[1] == "The report does not name its GPU, so no ceilings can be drawn."


def test_analysis_is_typed_and_its_json_is_strict():
    import dataclasses
    import json

    from engine.reports import open_report
    from tests.conftest import NSYS_DIR

    a = bw.analyze(open_report(NSYS_DIR / "host_overhead_naive.sqlite"), use_calibration=False)
    assert dataclasses.is_dataclass(a)
    try:
        a.gpu_name = "x"  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("BandwidthAnalysis must be frozen")
    doc = json.loads(json.dumps(a.to_json(), allow_nan=False))
    assert doc["schema"] == "kernelscope.bandwidth/1" and doc["gpu_name"] == "NVIDIA H200"
    assert doc["transfers"] == len(a.transfers) == 20
    assert len(doc["stats"]) == len(a.stats) and doc["ceilings"][0]["gb_per_s"] == a.ceilings[0].gb_per_s


# -- latency-bound and L2-resident copies (issue 25) ---------------------------------------------


@pytest.fixture(scope="module")
def torchrun(tmp_path_factory: pytest.TempPathFactory):
    from tests.engine.analysis import ddp_recordings as D

    if not D.available():
        pytest.skip("the DDP recordings are not in this checkout")
    return D.unpack(tmp_path_factory.mktemp("ddp"), D.TORCHRUN)[0]


@pytest.fixture(scope="module")
def train_fixed(tmp_path_factory: pytest.TempPathFactory):
    import lzma
    import shutil

    from tests.conftest import REPO

    out = tmp_path_factory.mktemp("single") / "train_fixed.sqlite"
    src = REPO / "tests" / "data" / "recordings" / "nsys" / "single" / "train_fixed.sqlite.xz"
    with lzma.open(src) as f, out.open("wb") as g:
        shutil.copyfileobj(f, g)
    return out


def _copies(path, kind: int):
    """(bytes, duration ns) of every copy of one copyKind, straight from the export."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return np.array(con.execute("SELECT bytes, [end] - start FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                                    "WHERE copyKind = ?", (kind,)).fetchall(), dtype=float)
    finally:
        con.close()


def test_tiny_copies_are_latency_bound_with_their_latency(train_fixed):
    """train_fixed's loss.item(): one 4-byte device-to-host copy. It is rated latency-bound with its
    per-copy time, not as 0.0026 % of the 64 GB/s PCIe ceiling."""
    a = bw.analyze(open_report(train_fixed), use_calibration=False)
    row = a.stats.set_index("kind").loc["Device-to-Host · Pinned"]
    (nbytes, dur), = _copies(train_fixed, 2)
    assert nbytes == 4 and row["count"] == 1
    assert row["rating"] == "latency-bound" and row["latency_bound"] == 1
    assert row["latency_ns"] == dur == 2368
    assert np.isnan(row["pct_of_ceiling"])  # no share of the bandwidth for a copy this small
    assert row["note"].startswith("latency-bound: 4 B per copy, 2.4 µs per copy (median)")
    # the big pinned uploads of the same run keep their share of the ceiling
    pinned = a.stats.set_index("kind").loc["Host-to-Device · Pinned"]
    assert pinned["rating"] == "mixed" and pinned["pct_of_ceiling"] == pytest.approx(83.4, abs=0.1)


def test_device_copies_above_a_calibrated_ceiling_are_explained_by_l2(torchrun):
    """ddp_torchrun's device-to-device copies reach 1.26 TB/s together; against a calibrated 960 GB/s
    (a copy too big for L2) that is 132 %: the copies whose source and destination fit in the 52.4 MB L2
    say why."""
    cal = types.SimpleNamespace(d2d_copy_bytes_per_s=960e9, gpu_name="NVIDIA H100 80GB HBM3",
                                measured_at="2026-11-27")
    a = bw.analyze(open_report(torchrun), calibration=cal)
    assert a.l2_bytes == 52428800  # TARGET_INFO_GPU.l2CacheSize of the H100
    row = a.stats.set_index("kind").loc["Device-to-Device · Device"]
    copies = _copies(torchrun, 8)
    agg = copies[:, 0].sum() / copies[:, 1].sum()  # bytes per ns = GB/s
    assert row["pct_of_ceiling"] == pytest.approx(100 * agg / 960, rel=1e-9)
    assert row["pct_of_ceiling"] == pytest.approx(131.5, abs=0.1)
    at_ceiling = copies[:, 0] / 960  # ns at 960 GB/s
    tiny = (at_ceiling < 1000) & (at_ceiling < 0.25 * copies[:, 1])
    in_l2 = (2 * copies[:, 0] <= 52428800) & ~tiny
    assert row["l2_resident"] == int(in_l2.sum()) == 168
    assert row["latency_bound"] == int(tiny.sum())
    assert row["note"].startswith("above the calibration ceiling (132 %): copies that stay in L2 run above "
                                  "the HBM rate")
    assert ("168 of 676 copies L2-resident (≤ 16.8 MB: source and destination fit in the 52.4 MB L2"
            in row["note"])
    doc = a.to_json()
    assert doc["l2_bytes"] == 52428800
    assert [s["rating"] for s in doc["stats"]] == list(a.stats["rating"])


def test_each_kind_has_its_sum_and_its_union_and_the_union_is_the_summarys():
    """The same copies, one value each: Bandwidth's summed time beside the union the summary shows."""
    from engine.analysis.summary import summarize

    t = open_report(NAIVE)
    stats = bw.analyze(t).stats
    parts = {p.part: p for p in summarize(open_report(NAIVE)).gpu.parts}
    assert len(stats)
    for _, row in stats.iterrows():
        part = parts[f"memcpy {row['direction']} ({row['memory']})"]
        assert row["union_ns"] == part.union_ns <= row["total_ns"] == part.total_ns


def test_tiny_times_in_notes_never_use_scientific_notation():
    assert bw._time(0.00006) == "0.000060 ns" and bw._time(0.06) == "0.06 ns"  # (it read "6e-05 ns")
    assert bw._nbytes(4) == "4 B" and bw._nbytes(52428800) == "52.4 MB"
