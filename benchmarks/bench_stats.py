#!/usr/bin/env python3
"""Time `kernelscope stats` (the five core reports) against `nsys stats` on a big report.

    python benchmarks/bench_stats.py bench-data/big.sqlite [--rounds 5] [--oracles bench-data/oracles]

The reference is Debian's nsight-systems 2022.4 (`../shared/tools/install-debian-nsys-2022.sh`),
whose `nsys stats` reads new-schema SQLite with the 2022 report names. Runs alternate (nsys, ours
cold, ours warm) so drift on a shared machine hits both tools alike. "cold" = a fresh, empty
Kernelscope cache; "warm" = the same command again, reopened from our cache. Peak memory is each
process's max RSS (GNU time). With --oracles DIR, our CSVs are compared with nsys 2025.3's files
`DIR/big_<report>.csv` (made on the GPU machine by benchmarks/device_make_big_report.sh's caller).
Make the big report with benchmarks/device_make_big_report.sh on a GPU machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CORE = ["cuda_api_sum", "cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum", "nvtx_sum"]
CORE_2022 = ["cudaapisum", "gpukernsum", "gpumemtimesum", "gpumemsizesum", "nvtxsum"]
GNU_TIME = shutil.which("time") or "/usr/bin/time"


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one run, via GNU time."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        r = subprocess.run([GNU_TIME, "-f", "%e %M", "-o", tf.name, *argv], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit(f"command failed ({r.returncode}): {' '.join(argv)}\n{r.stderr[-2000:]}")
        wall, kb = tf.read().split()[-2:]
    return float(wall), int(kb) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--nsys", default=shutil.which("nsys") or "nsys")
    ap.add_argument("--oracles", type=Path, help="folder with nsys 2025.3 big_<report>.csv files")
    args = ap.parse_args()
    if not Path(GNU_TIME).exists():
        sys.exit("GNU time is needed (Debian package 'time').")
    kernelscope = shutil.which("kernelscope") or str(Path(sys.executable).parent / "kernelscope")
    con = sqlite3.connect(f"file:{args.report}?mode=ro", uri=True)
    n_k = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    n_api = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    con.close()
    nsys_ver = subprocess.run([args.nsys, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"report: {args.report} ({args.report.stat().st_size / 1e6:.1f} MB, {n_k:,} kernels, "
          f"{n_api:,} API calls)")
    print(f"reference: {nsys_ver}; rounds: {args.rounds}; cpu count: {os.cpu_count()}\n")

    work = Path(tempfile.mkdtemp(prefix="ks-bench-"))
    results: dict[str, list[tuple[float, float]]] = {"nsys": [], "cold": [], "warm": []}
    env = dict(os.environ)
    for i in range(args.rounds):
        results["nsys"].append(timed(
            [args.nsys, "stats", "-r", ",".join(CORE_2022), "-f", "csv", "--force-overwrite", "true",
             "-o", str(work / f"nsys{i}"), str(args.report)], env))
        cache = work / f"cache{i}"
        env_ks = {**env, "KERNELSCOPE_CACHE": str(cache)}
        argv = [kernelscope, "stats", str(args.report), "-r", ",".join(CORE), "-f", "csv",
                "-o", str(work / f"ours{i}")]
        results["cold"].append(timed(argv, env_ks))
        results["warm"].append(timed(argv, env_ks))
        shutil.rmtree(cache, ignore_errors=True)

    ref = statistics.median(t for t, _ in results["nsys"])
    rows = [
        ("nsys stats (2022.4)", "nsys"), ("kernelscope stats, cold", "cold"),
        ("kernelscope stats, from cache", "warm"),
    ]
    print(f"{'tool':<32}{'median s':>10}{'min s':>8}{'max s':>8}{'peak MB':>9}{'ratio':>8}{'target':>8}")
    targets = {"nsys": "", "cold": "<= 0.5", "warm": "<= 0.1"}
    for label, key in rows:
        ts = [t for t, _ in results[key]]
        mem = max(m for _, m in results[key])
        med = statistics.median(ts)
        print(f"{label:<32}{med:>10.3f}{min(ts):>8.3f}{max(ts):>8.3f}{mem:>9.0f}{med / ref:>8.2f}"
              f"{targets[key]:>8}")
    if args.oracles:
        print()
        for rep in CORE:
            ours = (work / f"ours0_{rep}.csv").read_text()
            theirs = (args.oracles / f"big_{rep}.csv").read_text()
            print(f"{rep:<24} {'identical to nsys 2025.3' if ours == theirs else 'DIFFERS from nsys 2025.3'}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
