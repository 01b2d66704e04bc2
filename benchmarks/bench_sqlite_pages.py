"""Time the SQLite page reader against SQLite's ``group_concat`` on the big tables of an export.

    python benchmarks/bench_sqlite_pages.py REPORT.sqlite [--rounds 3]

For the CUDA API calls and the kernels (the columns the summary reads), one thread each way, in
this one process, alternating: SQLite's ``group_concat`` parsed by numpy (the column cache's SQL
path) and ``engine.reports.nsys.pages.read_columns``. Prints the best of the rounds, rows, ns a
row and the ratio, and checks that both give the same values.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TABLES = {
    "CUPTI_ACTIVITY_KIND_RUNTIME": ["start", "end", "globalTid", "correlationId", "nameId"],
    "CUPTI_ACTIVITY_KIND_KERNEL": ["start", "end", "deviceId", "streamId", "correlationId",
                                   "globalPid", "shortName"],
}


def main() -> int:
    import numpy as np

    from engine.reports.nsys.pages import read_columns

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    con = sqlite3.connect(f"file:{args.report}?mode=ro", uri=True)
    print(f"{args.report.name}: best of {args.rounds}, one thread each\n")
    print("| table | rows | group_concat s | page reader s | ns a row (pages) | ratio | same values |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for table, cols in TABLES.items():
        sql = ("SELECT " + ", ".join(f"group_concat(coalesce(\"{c}\", -1), ',')" for c in cols)
               + f" FROM {table}")
        best = {"sql": float("inf"), "pages": float("inf")}
        got_sql: list[np.ndarray] = []
        got_pages: dict[str, np.ndarray] | None = None
        for _ in range(args.rounds):
            t = time.perf_counter()
            row = con.execute(sql).fetchone()
            got_sql = [np.fromstring(x or "", dtype=np.int64, sep=",") for x in row]
            best["sql"] = min(best["sql"], time.perf_counter() - t)
            t = time.perf_counter()
            got_pages = read_columns(args.report, table, {c: f'"{c}"' for c in cols}, -1, n_threads=1)
            best["pages"] = min(best["pages"], time.perf_counter() - t)
        if got_pages is None:
            print(f"| {table} | | {best['sql']:.3f} | not read from pages | | | |")
            continue
        rows = len(got_sql[0])
        same = all(np.array_equal(a, got_pages[c]) for a, c in zip(got_sql, cols, strict=True))
        print(f"| {table} | {rows:,} | {best['sql']:.3f} | {best['pages']:.3f} | "
              f"{best['pages'] / max(rows, 1) * 1e9:.0f} | {best['pages'] / best['sql']:.2f} | "
              f"{'yes' if same else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
