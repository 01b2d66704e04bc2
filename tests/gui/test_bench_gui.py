"""benchmarks/bench_gui.py end to end on a real fixture: two real app launches (the first with an
empty cache), the cold and warm columns of the table, RSS and the goals."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import NSYS_DIR, REPO

REPORT = NSYS_DIR / "host_overhead_gpumetrics.sqlite"


def test_cold_then_warm_launches_give_the_table_with_rss(tmp_path):
    out = tmp_path / "bench.json"
    p = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_gui.py"), str(REPORT), "--runs", "2",
                        "--cold", "--settle-max", "60", "--json", str(out)],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(out.read_text())
    assert set(res["columns"]) == {"cold cache", "warm cache"}
    assert res["goals"]["timeline_first_paint_s"] == 2.0  # a small report: the 400k goal
    for col in res["columns"].values():
        assert col["runs"] == 1 and col["n_frames"] == 50
        assert 0 < col["window_shown_s"] <= col["timeline_first_paint_s"] <= col["all_lanes_paint_s"]
        assert 50 < col["rss_at_all_lanes_mb"] <= col["peak_rss_mb"] < 4096
        assert 0 < col["anon_at_all_lanes_mb"] < col["rss_at_all_lanes_mb"]
        # a small report is summarized in the app's process: no child, the total is the app's
        assert col["peak_child_rss_mb"] == 0.0
        assert col["peak_rss_mb"] <= col["peak_total_rss_mb"] < col["peak_rss_mb"] * 1.2
        assert 0 < col["peak_total_pss_mb"] <= col["peak_total_rss_mb"]
    table = p.stdout
    assert "cold cache" in table and "warm cache" in table
    assert "peak RSS of the app process" in table and "peak RSS of its child processes" in table
    assert "peak RSS of app + children at once" in table and "<= 2048 MB" in table
    assert table.count("PASS") + table.count("FAIL") >= 8  # four goals, two columns each
    # the events counted are the report's (a real fixture: 10 kernels, 69 CUDA API calls)
    assert sum(v for k, v in res["events"].items() if k.startswith("api:")) == 69
