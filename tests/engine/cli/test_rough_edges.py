"""The command line's rough edges from issue 12, each on real files: a Kineto trace with no schema
version, a JSON or SQLite file given to telemetry --replay, ncu --page rules on reports without rule
results (real public reports), bench naming every parameter a CPU run needs at once, and compare's
fairness warnings showing the difference and the tolerance."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from engine.analysis.compare import BYTES_TOLERANCE, compare_traces
from engine.reports import open_report
from tests.conftest import FIXTURES, NSYS_DIR, REPO

KS = [sys.executable, "-m", "engine.cli"]
FIXED = NSYS_DIR / "host_overhead_fixed.sqlite"
TORCH = FIXTURES / "torch" / "torch_sdpa_trace.json"


def ks(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KS, *args], capture_output=True, text=True, timeout=180, cwd=REPO)


def test_kineto_trace_without_schema_version(tmp_path: Path) -> None:
    doc = json.loads(TORCH.read_text())
    assert doc.pop("schemaVersion") == 1
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(doc))
    r = ks("info", str(bare))
    assert r.returncode == 0, r.stderr
    assert "written: a Chrome/PyTorch profiler trace with no Kineto schema version" in r.stdout
    assert "?" not in r.stdout.split("written:")[1].splitlines()[0]
    assert "written: Kineto schema 1" in ks("info", str(TORCH)).stdout


@pytest.mark.parametrize(("src", "kind"), [(TORCH, "a JSON file"),
                                           (FIXED, "an SQLite database, e.g. an nsys export")])
def test_telemetry_replay_of_a_report_says_what_it_is(src: Path, kind: str) -> None:
    r = ks("telemetry", "--replay", str(src), "--speed", "0")
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        f"kernelscope: {src} is not a telemetry recording (it is {kind}); give the .csv or .parquet file "
        "written by `kernelscope telemetry --record` (or open the report itself in Kernelscope)."]


def test_ncu_rules_page_without_rule_results(tmp_path: Path) -> None:
    with tarfile.open(FIXTURES / "ncu_public.tar.xz") as tar:
        member = tar.getmember("ncu_public/Lashi0812__profiling_profiles_index.ncu-rep")
        tar.extractall(tmp_path, members=[member], filter="data")
    rep = tmp_path / member.name
    r = ks("ncu", str(rep), "--page", "rules")
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == (
        "kernelscope: Lashi0812__profiling_profiles_index.ncu-rep holds no rule results: ncu did not apply "
        "its rules when it profiled (--apply-rules no, or sections without rules); profile again with "
        "`ncu --set full` (rules are applied by default) to get them.")
    r = ks("ncu", str(FIXTURES / "ncu" / "host_overhead_fixed_raw.csv"), "--page", "rules")
    assert "host_overhead_fixed_raw.csv holds no rule results: `--page raw` CSV exports have none" in r.stderr
    # a report with rules prints them and no such sentence
    r = ks("ncu", str(FIXTURES / "ncu" / "host_overhead_fixed.ncu-rep"), "--page", "rules")
    assert r.returncode == 0 and "holds no rule results" not in r.stderr and "rank" in r.stdout


def test_bench_names_every_parameter_a_cpu_run_needs() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible: the defaults run")
    r = ks("bench", "bandwidth", "--timer", "host", "--budget", "0.5")
    assert r.returncode == 1
    assert r.stderr.strip() == ("kernelscope: No CUDA GPU is visible to PyTorch; run bandwidth on the CPU "
                                "with --param device=cpu --param memory=pageable, or on a GPU machine.")
    r = ks("bench", "bandwidth", "--timer", "host", "--param", "device=cpu")
    assert r.stderr.strip() == ("kernelscope: bandwidth with device=cpu also needs --param memory=pageable "
                                "(memory=pinned needs a CUDA GPU).")
    r = ks("bench", "bandwidth", "--timer", "host", "--budget", "0.3", "--param", "device=cpu", "--param",
           "memory=pageable", "--param", "size_mb=4", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["results"][0]["check"]["ok"] is True


def _with_memcpy_bytes(tmp_path: Path, name: str, factor: float) -> Path:
    """A copy of the fixture whose first memcpy moved ``factor`` times its bytes."""
    dst = tmp_path / name
    shutil.copy(FIXED, dst)
    con = sqlite3.connect(dst)
    rowid, n = con.execute(
        "SELECT rowid, bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY ORDER BY start LIMIT 1").fetchone()
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = ? WHERE rowid = ?", (int(n * factor), rowid))
    con.commit()
    con.close()
    return dst


def test_compare_bytes_warning_shows_the_difference_and_tolerance(tmp_path: Path) -> None:
    total = int(open_report(FIXED).table("memcpy", ["bytes"])["bytes"].sum())
    first = sqlite3.connect(FIXED).execute(
        "SELECT bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY ORDER BY start LIMIT 1").fetchone()[0]
    # a difference under the tolerance is a fact, not a warning
    small = 1 + 0.5 * BYTES_TOLERANCE * total / first
    c = compare_traces(open_report(FIXED), open_report(_with_memcpy_bytes(tmp_path, "s.sqlite", small)))
    assert c.facts["bytes_copied"][0] != c.facts["bytes_copied"][1]
    assert not [w for w in c.warnings if "bytes" in w]
    # over it, the warning says by how much
    c = compare_traces(open_report(FIXED), open_report(_with_memcpy_bytes(tmp_path, "b.sqlite", 2.0)))
    ba, bb = c.facts["bytes_copied"]
    assert bb - ba == first
    (w,) = [w for w in c.warnings if "bytes" in w]
    assert w == (f"Different bytes copied: A {ba / 1e6:,.1f} MB, B {bb / 1e6:,.1f} MB "
                 f"(B {first / 1e6:+,.1f} MB, {first / ba * 100:+.1f} %; tolerance 1%).")


def test_findings_brief_is_one_line_per_finding_top_ten_and_a_count(tmp_path: Path) -> None:
    import lzma

    rep = tmp_path / "torch18_full.ncu-rep"
    with lzma.open(REPO / "tests" / "data" / "ncu" / "torch18_full.ncu-rep.xz", "rb") as f:
        rep.write_bytes(f.read())
    full = json.loads(ks("findings", str(rep), "--json").stdout)["findings"]
    assert len(full) > 10
    r = ks("findings", str(rep), "--brief")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 11
    for i, (ln, f) in enumerate(zip(lines[:10], full[:10], strict=True), 1):
        assert ln.startswith(f"{i:>2}. {f['severity'].upper()}") and ln.endswith(f"({f['id']})"), ln
    assert lines[10] == (f"{len(full)} findings; the first 10 are shown (all, with evidence and fixes: "
                         "without --brief).")
    # a report with fewer findings: all of them and the count (plus the if-all-applied bound)
    small = ks("findings", str(FIXED), "--brief").stdout.splitlines()
    n = len(json.loads(ks("findings", str(FIXED), "--json").stdout)["findings"])
    assert small[n] == f"{n} findings." and all(small[i].startswith(f"{i + 1:>2}. ") for i in range(n))


def test_export_ncu_report_as_markdown_and_html(tmp_path: Path) -> None:
    rep = FIXTURES / "ncu" / "torch_sdpa.ncu-rep"
    verdict = json.loads(ks("ncu", str(rep), "--page", "verdict", "--json").stdout)
    for fmt in ("md", "html"):
        out = tmp_path / f"r.{fmt}"
        r = ks("export", str(rep), "--format", fmt, "-o", str(out))
        assert r.returncode == 0, r.stderr
        text = out.read_text()
        assert "torch_sdpa.ncu-rep" in text and "NVIDIA H200" in text and "IssueSlotUtilization" in text
        for k in verdict:  # every kernel with ncu's verdict and its SM throughput as --page verdict has it
            assert f"{k['sm_throughput_pct']:.1f} %" in text and k["verdict"] in text
    html_text = (tmp_path / "r.html").read_text()
    assert html_text.count("<svg") == 1 and "<script" not in html_text
    r = ks("export", str(rep), "--format", "perfetto", "-o", str(tmp_path / "p.json"))
    assert r.returncode == 1 and "exports as --format md or html" in r.stderr


def test_html_colours_by_category_and_no_bar_for_zero(tmp_path: Path) -> None:
    import re

    from engine.analysis.export import bar_color, svg_bars

    fills = {}
    for name in ("host_overhead_naive.sqlite", "torch_sdpa_gemm.sqlite"):
        out = tmp_path / (name + ".html")
        assert ks("export", str(NSYS_DIR / name), "--format", "html", "-o", str(out)).returncode == 0
        bars = re.findall(r'<rect [^>]*fill="(#[0-9a-f]{6})"><title>([^:<]+):', out.read_text())
        fills[name] = {label: color for color, label in bars}
    common = set(fills["host_overhead_naive.sqlite"]) & set(fills["torch_sdpa_gemm.sqlite"])
    assert "GPU idle" in common and "kernels" in common
    for label in common:  # one category, one colour, in every report
        assert fills["host_overhead_naive.sqlite"][label] == fills["torch_sdpa_gemm.sqlite"][label]
    assert bar_color("GPU idle") == "#bab0ac"
    assert bar_color("memcpy Host-to-Device (Pinned)") != bar_color("memcpy Device-to-Host (Pinned)")
    svg = svg_bars("bw", [("Host-to-Device (Pinned)", 0.0), ("Device-to-Host (Pageable)", 4e-06)], "GB/s",
                   floor=1.0)
    widths = [float(w) for w in re.findall(r'<rect x="\d+" y="\d+" width="([0-9.]+)"', svg)]
    assert widths[0] == 0.0 and widths[1] <= 1.0  # no full-width bar for a vanishing rate
    assert "4.0 kB/s" in svg and "0 B/s" in svg and "e-0" not in svg  # one formatter, no scientific notation
