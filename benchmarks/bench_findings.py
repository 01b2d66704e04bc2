#!/usr/bin/env python3
"""Time `kernelscope findings` / `summary` / `export` against `nsys stats` (5 core reports) on a big report.

    python benchmarks/bench_findings.py BIG.sqlite [--rounds 3] [--rows findings,summary,html,perfetto]
                                        [--drop-caches] [--nsys PATH]

Prints issue 16's rows for findings, summary and export, every number measured in this one run: the
reference is `nsys stats` of the five core reports (nsys 2022.4 names), timed in each round right
before our commands, so that load on a shared machine hits both alike. For each row: ours "cold"
(a fresh, empty Kernelscope cache: the columnar cache is built during the run) and ours "from
cache" (the same command again with the cache the cold run left), median wall time and peak RSS
(GNU time; MB = MiB). On a report of 5M+ kernels (the issue's 10M-kernel case) the summary's goal
is 0.5 x and 2 GB (2048 MiB) and the findings' is bounded memory (2 GB, no time goal). The Perfetto
export is written as .json.gz (streamed, gzip); after the runs its gzip stream is checked end to
end and its events counted. Where `nsys` is absent the reference columns
say so and only our times are printed. The engine is byte-compiled before the runs, as an installed
kernelscope is (with PYTHONDONTWRITEBYTECODE set, each run would otherwise compile edited modules).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_stats import CORE_2022, GNU_TIME, drop_caches, timed  # noqa: E402

#: row -> (label, our argv with {r} report and {out} output stem, goal as x nsys stats 5, RSS goal MB)
ROWS: dict[str, tuple[str, list[str], float, float | None]] = {
    "findings": ("findings", ["findings", "{r}"], 1.0, None),
    "summary": ("summary", ["summary", "{r}"], 1.0, None),
    "html": ("export --format html", ["export", "{r}", "--format", "html", "-o", "{out}.html"], 1.0, None),
    "perfetto": ("export --format perfetto (.json.gz)",
                 ["export", "{r}", "--format", "perfetto", "-o", "{out}.json.gz"], 2.0, 600.0),
}


#: from this many kernels a report is "10M-kernel" size (issue 16): other goals for some rows
BIG_KERNELS = 5_000_000
#: row -> (goal as x nsys stats 5, RSS goal MB) at that size: summary 0.5 x and 2 GB, findings
#: bounded memory (2 GB, no time goal)
BIG_ROWS: dict[str, tuple[float, float | None]] = {
    "summary": (0.5, 2048.0), "findings": (float("inf"), 2048.0)}


def kernel_count(report: Path) -> int:
    """Kernels in an nsys SQLite export (0 when it is not one or has none)."""
    import sqlite3

    try:
        con = sqlite3.connect(f"file:{report}?mode=ro", uri=True)
        try:
            return int(con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def gzip_events(path: Path) -> tuple[int, int]:
    """(uncompressed bytes, events) of a gzip trace, read as a stream (the whole stream is checked)."""
    d = zlib.decompressobj(31)
    size = lines = 0
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 22):
            data = d.decompress(chunk)
            size += len(data)
            lines += data.count(b"\n")
    if not d.eof:
        raise SystemExit(f"{path}: the gzip stream is truncated")
    return size, lines - 1  # one event per line between the header and the footer


def main() -> int:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", default="findings,summary,html,perfetto")
    ap.add_argument("--nsys", default=shutil.which("nsys"))
    ap.add_argument("--drop-caches", action="store_true", help="drop the page cache before cold runs")
    ap.add_argument("--no-warm", action="store_true", help="skip the from-cache runs")
    args = ap.parse_args()
    if not Path(GNU_TIME).exists():
        sys.exit("GNU time is needed (Debian package 'time').")
    report = str(args.report.resolve())
    kernelscope = shutil.which("kernelscope") or str(Path(sys.executable).parent / "kernelscope")
    nsys = args.nsys if args.nsys and Path(args.nsys).exists() else None
    ref_name = (subprocess.run([nsys, "--version"], capture_output=True, text=True).stdout.strip()
                if nsys else "no nsys found: reference columns skipped")
    print(f"report: {report} ({args.report.stat().st_size / 1e6:.0f} MB)")
    print(f"reference: {ref_name}, `nsys stats` of {CORE_2022}; rounds: {args.rounds}; "
          f"cpus: {os.cpu_count()}; page cache dropped before cold runs: "
          f"{'yes' if args.drop_caches else 'no'}\n")
    wanted = [r.strip() for r in args.rows.split(",") if r.strip()]
    n_kernels = kernel_count(args.report)
    if n_kernels >= BIG_KERNELS:  # the 10M-kernel goals
        for key, (goal, rss) in BIG_ROWS.items():
            label, argv, _goal, _rss = ROWS[key]
            ROWS[key] = (label, argv, goal, rss)
        print(f"{n_kernels:,} kernels: 10M-size goals for {', '.join(BIG_ROWS)}\n")
    # Byte-compile the engine first: where PYTHONDONTWRITEBYTECODE is set (or __pycache__ is stale
    # after an edit), every run would compile the changed modules again (~0.07 s), which an
    # installed kernelscope never does.
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "engine"), quiet=1)
    work = Path(tempfile.mkdtemp(prefix="ks-bench-findings-"))
    env = dict(os.environ)
    ref: list[tuple[float, float]] = []
    cold: dict[str, list[tuple[float, float]]] = {k: [] for k in wanted}
    warm: dict[str, list[tuple[float, float]]] = {k: [] for k in wanted}
    try:
        for i in range(args.rounds):
            if nsys:
                if args.drop_caches:
                    drop_caches()
                ref.append(timed([nsys, "stats", "--format", "csv", "--force-overwrite", "true", "--output",
                                  str(work / f"ref{i}"), "--report", CORE_2022, report], env))
            for key in wanted:
                cache = work / f"cache-{key}{i}"
                env_ks = {**env, "KERNELSCOPE_CACHE": str(cache)}
                argv = [kernelscope, *(a.replace("{r}", report).replace("{out}", str(work / f"{key}{i}"))
                                       for a in ROWS[key][1])]
                if args.drop_caches:
                    drop_caches()
                cold[key].append(timed(argv, env_ks))
                if not args.no_warm:
                    warm[key].append(timed(argv, env_ks))
                shutil.rmtree(cache, ignore_errors=True)
        _print(wanted, ref, cold, warm)
        if "perfetto" in wanted:
            size, events = gzip_events(work / "perfetto0.json.gz")
            gz = (work / "perfetto0.json.gz").stat().st_size
            from engine.analysis.export_perfetto import gzip_compressor

            print(f"\nperfetto: {gz / 1e6:.0f} MB gzip ({size / 1e6:.0f} MB of JSON, {events:,} events, "
                  f"compressed by {type(gzip_compressor()).__module__}); the gzip stream is complete")
        if "html" in wanted:
            html = (work / "html0.html").read_text()
            print(f"html: {len(html) / 1e3:.0f} kB, {html.count('<svg')} charts")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _cell(runs: list[tuple[float, float]]) -> tuple[float, str]:
    ts = [t for t, _ in runs]
    mine = statistics.median(ts)
    return mine, f"{mine:.2f} ({min(ts):.2f}-{max(ts):.2f}), {max(m for _, m in runs):.0f} MB"


def _print(wanted: list[str], ref: list[tuple[float, float]], cold: dict[str, list[tuple[float, float]]],
           warm: dict[str, list[tuple[float, float]]]) -> None:
    theirs = statistics.median(t for t, _ in ref) if ref else None
    if ref:
        lo, hi = min(t for t, _ in ref), max(t for t, _ in ref)
        print(f"nsys stats, 5 core reports: {theirs:.2f} s median ({lo:.2f}-{hi:.2f}), "
              f"{max(m for _, m in ref):.0f} MB\n")
    print("| command | ours: median s (min-max), peak MB | ratio to nsys stats (5) | goal | met |")
    print("| --- | --- | --- | --- | --- |")
    for key in wanted:
        label, _argv, goal, rss_goal = ROWS[key]
        for mode, runs in (("cold cache", cold[key]), ("from cache", warm[key])):
            if not runs:
                continue
            mine, cell = _cell(runs)
            peak = max(m for _, m in runs)
            rss_ok = rss_goal is None or peak <= rss_goal
            goal_text = ("" if goal == float("inf") else f"<= {goal} x") + (
                f"{', ' if goal != float('inf') else ''}<= {rss_goal:.0f} MB" if rss_goal else "")
            if theirs:
                ratio = mine / theirs
                met = "yes" if ratio <= goal and rss_ok else "NO"
                print(f"| {label}, {mode} | {cell} | {ratio:.2f} | {goal_text} | {met} |")
            else:
                print(f"| {label}, {mode} | {cell} | - | {goal_text} | - |")
    print(json.dumps({"ref": ref, "cold": cold, "warm": warm}))


if __name__ == "__main__":
    sys.exit(main())
