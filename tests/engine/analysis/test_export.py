"""Exports: Perfetto JSON checked against the fixture tables; Markdown/HTML content and plots."""

from __future__ import annotations

import json
import re
import sqlite3
import xml.etree.ElementTree as ET
from collections import Counter

import pytest

from engine.analysis import export
from engine.analysis.compare import compare_traces
from engine.analysis.findings import findings_for
from engine.analysis.findings.overview import gain_text
from engine.analysis.summary import summarize
from engine.cli import main
from engine.reports import open_report
from tests.conftest import NSYS_DIR

NAIVE = NSYS_DIR / "host_overhead_naive.sqlite"
FIXED = NSYS_DIR / "host_overhead_fixed.sqlite"
SDPA = NSYS_DIR / "torch_sdpa_gemm.sqlite"


def q(path, sql):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("path", [NAIVE, SDPA], ids=lambda p: p.stem)
def test_perfetto_events_match_the_tables(path, tmp_path):
    out = tmp_path / "t.json"
    assert main(["export", str(path), "--format", "perfetto", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())  # valid JSON
    events = doc["traceEvents"]
    for e in events:
        assert e["ph"] in ("X", "M", "i", "s", "f")
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert isinstance(e["ts"], float | int) and e["dur"] >= 0 and e["ts"] >= 0
    cats = Counter(e["cat"] for e in events if e["ph"] == "X")
    (n_k, k_ns), = q(path, "select count(*), sum(end - start) from CUPTI_ACTIVITY_KIND_KERNEL")
    (n_m, m_ns), = q(path, "select count(*), sum(end - start) from CUPTI_ACTIVITY_KIND_MEMCPY")
    (n_api,), = q(path, "select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME")
    (n_nvtx,), = q(path, "select count(*) from NVTX_EVENTS where eventType in (59, 60) and end is not null")
    assert cats["kernel"] == n_k and cats["memcpy"] == n_m and cats["cuda_api"] == n_api
    assert cats["nvtx"] == n_nvtx
    k_dur_us = sum(e["dur"] for e in events if e.get("cat") == "kernel")
    assert k_dur_us == pytest.approx(k_ns / 1000, abs=1e-3 * n_k)
    m_dur_us = sum(e["dur"] for e in events if e.get("cat") == "memcpy")
    assert m_dur_us == pytest.approx(m_ns / 1000, abs=1e-3 * n_m)
    # Kernels sit on their stream under the GPU's synthetic process, which is named.
    (streams,), = q(path, "select count(distinct streamId) from CUPTI_ACTIVITY_KIND_KERNEL")
    assert len({e["tid"] for e in events if e.get("cat") == "kernel"}) == streams
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert "GPU 0 NVIDIA H200" in names
    # The first kernel's start matches the table (relative to the capture start).
    first = min((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    (k0,), = q(path, "select min(start) from CUPTI_ACTIVITY_KIND_KERNEL")
    assert first["ts"] == pytest.approx((k0 - doc["otherData"]["time_origin_ns"]) / 1000, abs=1e-3)


def test_session_markdown_and_html_have_findings_numbers_and_svg(tmp_path):
    s = summarize(open_report(NAIVE))
    found = findings_for(NAIVE, reference=FIXED)
    md = export.session_markdown(s, found)
    assert "| critical | **Host-to-Device copies use pageable host memory**" in md
    # The gain at the fixed run's pinned rate: 57.98 ms over the capture, shown per steady step.
    h2d = next(f for f in found if f.id == "nsys.pageable-copies" and f.subject == "Host-to-Device")
    assert "= 57.98 ms" in h2d.gain.formula and f"| {gain_text(h2d)} |" in md
    assert "per step" in gain_text(h2d)
    # One row per GPU, with the busy union and the parts' unions (shares of busy ≤ 100 %).
    row = "| 0 NVIDIA H200 | 100.36 ms | 39.8 % | memcpy Host-to-Device (Pageable) | 67.10 ms | 66.9 % |"
    assert row in md
    assert "```cuda" in md and "cudaMallocHost" in md
    page = export.session_html(s, found)
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert not re.search(r'(src|href)="(http|//)', page)  # self-contained
    svgs = re.findall(r"<svg.*?</svg>", page, flags=re.S)
    assert len(svgs) == 3  # API categories, GPU time, bandwidth
    for svg in svgs:
        ET.fromstring(svg)  # well-formed
    bw = svgs[2]
    assert "7.50 GB/s" in bw and "4.94 GB/s" in bw


def test_comparison_exports(tmp_path):
    c = compare_traces(open_report(NAIVE), open_report(FIXED))
    md = export.comparison_markdown(c)
    assert "speedup 4.59x" in md and "p=0.0286 < 0.05 -> faster; verdict: **faster**" in md
    page = export.comparison_html(c)
    svg = re.findall(r"<svg.*?</svg>", page, flags=re.S)[0]
    ET.fromstring(svg)
    # One dot per iteration of each run.
    assert svg.count("<circle") == 10
    out = tmp_path / "cmp.md"
    assert main(["export", str(NAIVE), "--compare", str(FIXED), "--format", "md", "-o", str(out)]) == 0
    assert out.read_text() == md
    assert oct(out.stat().st_mode & 0o777) != oct(0o600)


def test_export_errors(tmp_path, capsys):
    assert main(["export", str(NAIVE), "--compare", str(FIXED), "--format", "perfetto", "-o",
                 str(tmp_path / "x.json")]) == 1
    assert "leave out --compare" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["export", str(NAIVE), "--format", "md", "-o", str(blocker / "x.md")]) == 1
    assert "Could not write" in capsys.readouterr().err


FLOW_SQL = """select count(*) from {table} g where exists (select 1 from CUPTI_ACTIVITY_KIND_RUNTIME r
              where r.correlationId = g.correlationId and (r.globalTid >> 24) = (g.globalPid >> 24))"""


@pytest.mark.parametrize("path", [NAIVE, SDPA], ids=lambda p: p.stem)
def test_perfetto_flows_link_each_api_call_to_its_gpu_work(path):
    doc = json.loads(export.perfetto_json(open_report(path)))
    events = doc["traceEvents"]
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    # One flow per kernel / memcpy whose launching API call (same correlationId and process) exists,
    # counted from the SQLite tables directly.
    (n_k,), = q(path, FLOW_SQL.format(table="CUPTI_ACTIVITY_KIND_KERNEL"))
    (n_m,), = q(path, FLOW_SQL.format(table="CUPTI_ACTIVITY_KIND_MEMCPY"))
    assert n_k > 0 and n_m > 0
    assert len(starts) == len(ends) == n_k + n_m
    assert set(starts) == set(ends)
    assert Counter(e["args"]["to"] for e in ends.values()) == {"kernel": n_k, "memcpy": n_m}
    slices = {(e["pid"], e["tid"], e["ts"]): e for e in events if e["ph"] == "X"}
    for fid, s in starts.items():
        f = ends[fid]
        assert f["bp"] == "e" and (s["cat"], s["name"]) == (f["cat"], f["name"])
        # Both ends sit on the start of an exported slice with the same correlationId: the API call
        # on its CPU thread, the kernel / copy on its GPU stream.
        call, work = slices[(s["pid"], s["tid"], s["ts"])], slices[(f["pid"], f["tid"], f["ts"])]
        assert call["cat"] == "cuda_api" and work["cat"] == f["args"]["to"]
        assert call["args"]["correlationId"] == work["args"]["correlationId"] == s["args"]["correlationId"]
        assert f["pid"] >= export.GPU_PID_BASE > s["pid"] and f["ts"] >= s["ts"]
    launches = Counter(slices[(s["pid"], s["tid"], s["ts"])]["name"] for s in starts.values())
    assert set(launches) <= {"cudaLaunchKernel", "cudaMemcpy", "cudaMemcpyAsync", "cuLaunchKernel",
                             "cudaLaunchKernelExC", "cuLaunchKernelEx"}


def test_svg_values_never_use_scientific_notation():
    """A 4 kB/s rate drawn in GB/s read "4e-06 GB/s"; a 1.8e-08 GB size likewise (issue 25)."""
    svg = export.svg_bars("bw", [("Host-to-Device (Pinned)", 0.0), ("Device-to-Host (Pageable)", 4e-06),
                                 ("Device-to-Device", 7.5)], "GB/s", floor=1.0)
    assert "4.0 kB/s" in svg and "0 B/s" in svg and "7.50 GB/s" in svg
    assert not re.search(r"\de-\d", svg)
    times = export.svg_bars("t", [("kernels", 0.0123), ("memset", 1234.5)], "ms")
    assert "12.3 µs" in times and "1.23 s" in times and not re.search(r"\de-\d", times)
    from engine.analysis.findings.model import fmt_bytes, fmt_pct, fmt_value

    assert fmt_bytes(18) == "18 B" and fmt_value(1.8e-08, "GB") == "18 B"
    assert fmt_pct(0.00262) == "< 0.1 %" and fmt_pct(None) == "n/a"
    assert fmt_value(1.8e-08, "widgets") == "0.000000018 widgets"


def test_markdown_says_when_the_gpu_parts_overlap():
    doc = summarize(open_report(NAIVE)).to_json()
    part = doc["gpu"]["devices"][0]["parts"][0]
    for p in doc["gpu"]["devices"][0]["parts"]:
        p["pct_of_busy"] = 60.0  # as copies under kernels on other streams give
    part["attributed_pct_of_busy"] = 60.0
    md = "\n".join(export._breakdown_md(doc))
    n = len(doc["gpu"]["devices"][0]["parts"])
    assert f"the parts overlap in time, so their shares add up to {60.0 * n:.1f} % of busy" in md
    assert f"{part['part']} 60.0 %" in md


def test_no_none_for_a_gpu_or_process_without_a_name():
    doc = summarize(open_report(NAIVE)).to_json()
    doc["report"]["gpus"] = [{**g, "name": None} for g in doc["report"]["gpus"]]
    md = export.session_markdown(doc, [])
    assert "None" not in md and "on unknown GPU" in md


def test_ncu_export_fix_first_is_the_kernels_views() -> None:
    """The exported 'fix first' and 'What to fix first' are the Kernels view's list (not ncu's top rule)."""
    from engine.analysis.export_ncu import ncu_markdown
    from engine.analysis.findings import findings_for
    from engine.analysis.findings.ncu_fixes import first_per_kernel, fix_list
    from engine.reports.ncu import read_ncu
    from tests.conftest import FIXTURES

    path = FIXTURES / "ncu" / "host_overhead_fixed.ncu-rep"
    report = read_ncu(path)
    md = ncu_markdown(report, findings_for(path))
    first = first_per_kernel(fix_list(report))
    saxpy = next(x for k, x in first.items() if k.startswith("saxpy"))
    assert saxpy.title == "MemoryL2Compression"  # memory-bound: not ncu's top (HighPipeUtilization)
    row = next(line for line in md.splitlines() if line.startswith("| 1 | saxpy"))
    assert row.rstrip().endswith("| MemoryL2Compression (34.5 %) |")
    ranked = md[md.index("## What to fix first"):md.index("## ncu's rule results")]
    assert "| 1 | sgemm_tiled |" in ranked and "| 5 | saxpy | MemoryL2Compression |" in ranked
