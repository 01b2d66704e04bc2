#!/usr/bin/env python3
"""Time `kernelscope ncu REPORT --page P` per page: cold, with the tables cached, from the page cache.

    python benchmarks/bench_ncu.py REPORT.ncu-rep[.xz] [REPORT ...] [--rounds 3] [--pages details,raw]

Each measurement is a fresh `kernelscope ncu` process (imports, native library and all), run as the
user runs it, with its own Kernelscope cache directory:

- cold: an empty cache (the report is decoded; with our own reader the units are asked of ncu_report
  in a child, as in a first run of a report of a new kind);
- tables: another page was printed before, so the report's tables come from Kernelscope's cache;
- cached: the same page printed again (the results cache: no report is read).

"cold CPU s" is the median user + system time of the cold runs, children included (on a busy
machine the wall time says more about the neighbours than about Kernelscope). Peak memory is the
largest process's max RSS (``os.wait4``: the reader decodes big reports in child
processes); "tree MB" is the largest sum over the processes alive at once (cold runs, sampled every
10 ms). ``KERNELSCOPE_NCU_CHILDREN=0`` in the environment measures the in-process reader. Goals
(issue 14, "ncu speed"): every page <= 1.0 s cold and <= 300 MB, <= 0.2 s from the cache; the
table says PASS or FAIL per row. With ``ncu`` on PATH, ``ncu --import R --csv --page details`` is
timed too. ``.xz`` reports (as stored in tests/data) are unpacked to a temporary folder first.
"""

from __future__ import annotations

import argparse
import lzma
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = ["details", "raw", "sections", "rules", "roofline", "verdict"]
COLD_S, CACHED_S, RSS_MB = 1.0, 0.2, 300.0


def _tree_rss(pid: int) -> int:
    """Bytes resident in process ``pid`` and its descendants now (0 where /proc cannot tell)."""
    total = 0
    todo = [pid]
    while todo:
        q = todo.pop()
        try:
            with open(f"/proc/{q}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            with open(f"/proc/{q}/task/{q}/children") as f:
                todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            pass
    return total


TREE_PEAK: list[float] = []  # MB: the largest sum over the process tree of the last run()
CPU_S: list[float] = []  # CPU seconds (user + system) of the last run()'s process and its children


def run(report: Path, page: str, cache: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one `kernelscope ncu REPORT --page PAGE` process.

    The peak RSS is ``os.wait4``'s: the largest single process of the tree (the reader decodes in
    child processes). The largest sum over the processes alive at once, sampled every 10 ms, is
    left in :data:`TREE_PEAK`.
    """
    env = dict(os.environ, KERNELSCOPE_CACHE=str(cache))
    argv = [sys.executable, "-m", "engine.cli.app", "ncu", str(report), "--page", page]
    t = time.perf_counter()
    p = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    tree = 0
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        tree = max(tree, _tree_rss(p.pid))
        time.sleep(0.01)
    wall = time.perf_counter() - t
    TREE_PEAK[:] = [tree / 1e6]
    CPU_S[:] = [usage.ru_utime + usage.ru_stime]
    err = p.stderr.read().decode() if p.stderr else ""
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # rules: 1 when a report has none
        sys.exit(f"kernelscope ncu {report.name} --page {page} failed: {err[-1500:]}")
    return wall, usage.ru_maxrss / 1024


def ncu_seconds(report: Path) -> float | None:
    ncu = shutil.which("ncu")
    if not ncu:
        return None
    t = time.perf_counter()
    subprocess.run([ncu, "--import", str(report), "--csv", "--page", "details"], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def unpacked(path: Path, tmp: Path) -> Path:
    if path.suffix != ".xz":
        return path
    out = tmp / path.name[:-3]
    with lzma.open(path, "rb") as f, out.open("wb") as g:
        shutil.copyfileobj(f, g, 1 << 20)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reports", nargs="+", metavar="REPORT")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pages", default=",".join(PAGES), help=f"comma-separated (default {','.join(PAGES)})")
    a = ap.parse_args()
    pages = [p for p in a.pages.split(",") if p]
    rows: list[list[str]] = []
    fails = 0
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for given in a.reports:
            report = unpacked(Path(given), tmp)
            size = f"{report.name} ({report.stat().st_size / 1e6:.1f} MB)"
            for page in pages:
                cold: list[tuple[float, float]] = []
                tables: list[tuple[float, float]] = []
                cached: list[tuple[float, float]] = []
                trees: list[float] = []
                cpus: list[float] = []
                for r in range(a.rounds):
                    cache = tmp / f"cache-{page}-{r}"
                    cold.append(run(report, page, cache))
                    trees.append(TREE_PEAK[0])
                    cpus.append(CPU_S[0])
                    cached.append(run(report, page, cache))
                    other = "details" if page != "details" else "raw"
                    cache2 = tmp / f"cache2-{page}-{r}"
                    run(report, other, cache2)
                    tables.append(run(report, page, cache2))
                for mode, rs, goal in (("cold", cold, COLD_S), ("tables cached", tables, COLD_S),
                                       ("page cached", cached, CACHED_S)):
                    s = statistics.median(x[0] for x in rs)
                    mb = max(x[1] for x in rs)
                    ok = s <= goal and mb <= RSS_MB
                    fails += not ok
                    tree = f"{max(trees):.0f}" if mode == "cold" else ""
                    cpu = f"{statistics.median(cpus):.2f}" if mode == "cold" else ""
                    fastest = f"{min(x[0] for x in rs):.2f}"
                    rows.append([size, page, mode, f"{s:.2f}", fastest, cpu, f"{mb:.0f}", tree,
                                 f"<= {goal:g} s, <= {RSS_MB:g} MB", "PASS" if ok else "FAIL"])
            ncu_s = ncu_seconds(report)
            rows.append([size, "details", "ncu --import", f"{ncu_s:.2f}" if ncu_s else "no ncu here",
                         "", "", "", "", "", ""])
    hdr = ["report", "page", "mode", "median s", "fastest s", "cold CPU s", "peak RSS MB", "tree MB", "goal",
           ""]
    widths = [max(len(line[i]) for line in [hdr, *rows]) for i in range(len(hdr))]
    print(f"`kernelscope ncu REPORT --page PAGE`, each a fresh process; median of {a.rounds} rounds; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for n, line in enumerate([hdr, *rows]):
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))
    print(f"{fails} row(s) miss the goal")


if __name__ == "__main__":
    main()
