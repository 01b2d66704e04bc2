"""vulkan_api_sum (the report added in one module): hand-computed sums on a fixture given Vulkan calls.

No fixture was recorded with ``--trace=vulkan``, so a copy of a real export gets a VULKAN_API table
with known calls; the expected rows are worked out by hand below. Debian's nsys 2022.4
(``nsys stats -r vulkanapisum -f csv`` on the same table) printed exactly these lines.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from engine.analysis.nsys import stats
from engine.reports import open_report
from tests.conftest import FIXTURES, NSYS_DIR

# (name, duration ns, eventClass): 53 is a Vulkan API call; other classes in the table are not calls.
CALLS = [
    ("vkQueueSubmit", 100, 53), ("vkQueueSubmit", 300, 53), ("vkQueueSubmit", 200, 53),
    ("vkCreateBuffer_v1234", 50, 53), ("vkCreateBuffer", 70, 53),  # two name ids, one printed name
    ("vkDestroyDevice", 1000, 53),
    ("vkQueueSubmit", 5000, 54),  # not a call: left out
]
# Totals 1000, 600, 70 and 50 of 1720 ns: 58.1 %, 34.9 %, 4.1 %, 2.9 %. vkQueueSubmit's sample
# stddev is sqrt((100² + 100² + 0) / 2) = 100. nsys groups by name id, then drops the suffix from
# the printed name: vkCreateBuffer shows twice.
EXPECTED = (
    "Time (%),Total Time (ns),Num Calls,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
    "58.1,1000,1,1000.0,1000.0,1000,1000,0.0,vkDestroyDevice\n"
    "34.9,600,3,200.0,200.0,100,300,100.0,vkQueueSubmit\n"
    "4.1,70,1,70.0,70.0,70,70,0.0,vkCreateBuffer\n"
    "2.9,50,1,50.0,50.0,50,50,0.0,vkCreateBuffer\n"
)


def _with_vulkan_calls(tmp_path: Path) -> Path:
    db = tmp_path / "vulkan.sqlite"
    shutil.copy(NSYS_DIR / "host_overhead_naive.sqlite", db)
    with sqlite3.connect(db) as con:
        con.execute('CREATE TABLE VULKAN_API (start INT NOT NULL, "end" INT NOT NULL, '
                    "eventClass INT NOT NULL, globalTid INT, correlationId INT, nameId INT NOT NULL, "
                    "returnValue INT NOT NULL)")
        top = con.execute("SELECT max(id) FROM StringIds").fetchone()[0]
        ids = {n: top + 1 + i for i, n in enumerate(dict.fromkeys(n for n, _, _ in CALLS))}
        con.executemany("INSERT INTO StringIds (id, value) VALUES (?, ?)", [(i, n) for n, i in ids.items()])
        t = 1_000_000
        for k, (name, dur, event_class) in enumerate(CALLS):
            con.execute("INSERT INTO VULKAN_API VALUES (?, ?, ?, ?, ?, ?, 0)",
                        (t, t + dur, event_class, 281_474_976_710_656, k, ids[name]))
            t += 10_000
    return db


def test_hand_computed_sums(tmp_path: Path) -> None:
    trace = open_report(_with_vulkan_calls(tmp_path))
    assert stats.run(trace, "vulkan_api_sum", "csv").text == EXPECTED
    df = stats.run(trace, "vulkan_api_sum")
    assert list(df.columns) == list(stats.COLUMNS["vulkan_api_sum"])
    assert df["Num Calls"].sum() == 6 and df["Total Time (ns)"].sum() == 1720 and len(df) == 4


def test_empty_without_vulkan_tracing() -> None:
    trace = open_report(NSYS_DIR / "host_overhead_naive.sqlite")
    assert stats.run(trace, "vulkan_api_sum", "csv").empty
    assert stats.format_table(stats.run(trace, "vulkan_api_sum")) == "(no data for this report)\n"
    kineto = open_report(FIXTURES / "torch" / "torch_sdpa_trace.json")
    assert stats.run(kineto, "vulkan_api_sum").empty
