#!/usr/bin/env python3
"""Time `kernelscope stats` / `analyze` / `summary` against Debian's `nsys` 2022.4 on a big report.

    python benchmarks/bench_stats.py BIG.sqlite [--rounds 3] [--rows core5,cache,gputrace,all9,analyze,...]
                                     [--drop-caches] [--oracles DIR] [--nsys PATH]

Prints the ratio table of issue 16, every number measured in this one run: for each row, the
median wall time and the peak RSS (GNU time) of our command and of the reference, alternating
(reference, ours cold, ours from cache) so that drift on a shared machine hits both alike.
"cold" = a fresh, empty Kernelscope cache (results and columnar cache); "from cache" = the same
command again with that cache. With --drop-caches (root) the OS page cache is dropped before each
cold run, so both tools read the export from disk. Where `nsys` is absent the reference columns
say so and only our times are printed.

The reference is Debian's nsight-systems 2022.4 (`../shared/tools/install-debian-nsys-2022.sh`),
whose `nsys stats` / `nsys analyze` read new-schema SQLite under the 2022 report and rule names.
With --oracles DIR, our CSVs are compared byte for byte with `DIR/<prefix>_<report>.csv` files.
Rows: core5 (the five core reports), cache (core5 again from our cache), gputrace, all9 (the nine
reports of nsys 2022.4 that we print), analyze (the six rules), analyze-cache (the six rules again
with the columnar cache the cold run left, against the same nsys analyze), summary (`kernelscope
summary`, against nsys stats core5, the goal for 10M-kernel reports), newer (every NVTX / OS runtime /
unified memory / trace report of :data:`NEWER_2022`, each against its nsys 2022.4 report where
2022.4 has one; r:NAME for one of them). On reports of 5M kernels or
more every row also has issue 16's memory goal (peak RSS <= 2 GB; --mem-goal MB to change it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench_ncu import _tree_rss  # (this folder is on sys.path: the scripts run from it)

CORE = "cuda_api_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum,nvtx_sum"
CORE_2022 = "cudaapisum,gpukernsum,gpumemtimesum,gpumemsizesum,nvtxsum"
ALL9 = CORE + ",cuda_api_gpu_sum,cuda_kern_exec_sum,cuda_gpu_sum,cuda_gpu_trace"
ALL9_2022 = CORE_2022 + ",apigpusum,kernexecsum,gpusum,gputrace"
RULES_2022 = "cuda-async-memcpy,cuda-sync-memcpy,cuda-sync-memset,cuda-sync-api,gpu-starv,gpu-low-util"
GNU_TIME = shutil.which("time") or "/usr/bin/time"
#: The newer reports (NVTX, OS runtime, unified memory, traces) -> nsys 2022.4's name. Row "newer"
#: runs them all, row "r:NAME" one.
NEWER_2022: dict[str, str] = {
    "nvtx_kern_sum": "nvtxkernsum", "nvtx_gpu_proj_trace": "nvtxgpuproj",
    "nvtx_gpu_proj_sum": "nvtxgpuproj", "nvtx_pushpop_sum": "nvtxppsum",
    "nvtx_pushpop_trace": "nvtxpptrace", "nvtx_startend_sum": "nvtxsesum", "osrt_sum": "osrtsum",
    "um_sum": "unifiedmemory", "um_total_sum": "unifiedmemorytotals",
    "um_cpu_page_faults_sum": "umcpupagefaults", "cuda_api_trace": "cudaapitrace",
    "cuda_kern_exec_trace": "kernexectrace", "cuda_gpu_kern_gb_sum": "gpukernsum",
}
#: Reports 2022.4 lacks, timed against the closest 2022.4 report doing the same work: the
#: projection summary aggregates the projection trace; the grid/block summary groups the kernels
#: as the kernel summary does, by two more keys.
CLOSEST_2022 = frozenset({"nvtx_gpu_proj_sum", "cuda_gpu_kern_gb_sum"})


@dataclass
class Row:
    """One line of the table: our argv and the reference argv (with {out} for an output prefix)."""

    label: str
    ours: list[str]
    ref: list[str] | None
    goal: float
    warm: bool = False  # ours from the cache the previous cold run left
    ref_key: str = ""  # the row whose reference times a warm row is compared with


def rows(report: str) -> dict[str, Row]:
    """The benchmark rows for ``report``."""
    stats = ["stats", report, "-f", "csv", "-o", "{out}", "-r"]
    nsys_stats = ["stats", "--format", "csv", "--force-overwrite", "true", "--output", "{out}",
                  "--report"]
    newer = {f"r:{name}": Row(f"stats -r {name}" + (f" (vs {old}, closest)" if name in CLOSEST_2022 else ""),
                              [*stats, name], [*nsys_stats, old, report], 0.5)
             for name, old in NEWER_2022.items()}
    return {
        **newer,
        "core5": Row("stats, 5 core reports", [*stats, CORE], [*nsys_stats, CORE_2022, report], 0.5),
        "cache": Row("stats, 5 core, from cache", [*stats, CORE], [*nsys_stats, CORE_2022, report],
                     0.1, warm=True, ref_key="core5"),
        "gputrace": Row("stats -r cuda_gpu_trace", [*stats, "cuda_gpu_trace"],
                        [*nsys_stats, "gputrace", report], 0.5),
        "all9": Row("stats, all 9 reports", [*stats, ALL9], [*nsys_stats, ALL9_2022, report], 0.5),
        "analyze": Row("analyze, 6 rules", ["analyze", report, "-f", "csv", "-o", "{out}"],
                       ["analyze", "--format", "csv", "--force-overwrite", "true", "--output", "{out}",
                        "--rule", RULES_2022, report], 0.5),
        "analyze-cache": Row("analyze, 6 rules, from cache", ["analyze", report, "-f", "csv", "-o", "{out}"],
                             None, 0.5, warm=True, ref_key="analyze"),
        "summary": Row("summary", ["summary", report], [*nsys_stats, CORE_2022, report], 0.5),
    }


def timed(argv: list[str], env: dict[str, str], limit: float | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one run, via GNU time; (inf, nan) past ``limit`` seconds.

    The peak is the larger of GNU time's (the largest single process) and the largest sum over the
    process tree sampled every 20 ms from /proc (Kernelscope reads big tables in child processes).
    """
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf, \
            tempfile.TemporaryFile("w+") as errf:  # (a file: a pipe could fill and stall it)
        proc = subprocess.Popen([GNU_TIME, "-f", "%e %M", "-o", tf.name, *argv], env=env,
                                stdout=subprocess.DEVNULL, stderr=errf, text=True,
                                start_new_session=True)  # its own group: a timeout stops it all
        t0, tree = time.monotonic(), 0
        while proc.poll() is None:
            tree = max(tree, _tree_rss(proc.pid))
            if limit is not None and time.monotonic() - t0 > limit:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                return float("inf"), float("nan")
            time.sleep(0.02)
        errf.seek(0)
        err = errf.read()
        r = subprocess.CompletedProcess(argv, proc.returncode, None, err)
        if r.returncode != 0:
            sys.exit(f"command failed ({r.returncode}): {' '.join(argv)}\n{r.stderr[-2000:]}")
        wall, kb = tf.read().split()[-2:]
    return float(wall), max(int(kb) / 1024, tree / 2**20)


def drop_caches() -> None:
    """Drop the OS page cache (root only), so the next run reads the export from disk."""
    subprocess.run(["sync"], check=False)
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as exc:
        sys.exit(f"--drop-caches needs root ({exc.strerror}).")


def main() -> int:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", default="core5,cache,gputrace,all9,analyze")
    ap.add_argument("--nsys", default=shutil.which("nsys"))
    ap.add_argument("--drop-caches", action="store_true", help="drop the page cache before cold runs")
    ap.add_argument("--oracles", type=Path, help="folder with <prefix>_<report>.csv files")
    ap.add_argument("--oracle-prefix", default="big")
    ap.add_argument("--ref-timeout", type=float, default=None,
                    help="stop a reference run after this many seconds (its time then reads '> N s')")
    ap.add_argument("--mem-goal", type=float, default=None,
                    help="peak RSS goal in MB for every row (default: 2048 for reports of 5M kernels "
                         "or more, as issue 16 asks at 10M; none below)")
    args = ap.parse_args()
    if not Path(GNU_TIME).exists():
        sys.exit("GNU time is needed (Debian package 'time').")
    report = str(args.report.resolve())
    kernelscope = shutil.which("kernelscope") or str(Path(sys.executable).parent / "kernelscope")
    con = sqlite3.connect(f"file:{report}?mode=ro", uri=True)
    counts = [con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME")]
    con.close()
    nsys = args.nsys if args.nsys and Path(args.nsys).exists() else None
    ref_name = (subprocess.run([nsys, "--version"], capture_output=True, text=True).stdout.strip()
                if nsys else "no nsys found: reference columns skipped")
    print(f"report: {report} ({args.report.stat().st_size / 1e6:.0f} MB, {counts[0]:,} kernels, "
          f"{counts[1]:,} CUDA API calls)")
    print(f"reference: {ref_name}; rounds: {args.rounds}; cpus: {os.cpu_count()}; "
          f"page cache dropped before cold runs: {'yes' if args.drop_caches else 'no'}\n")
    table = rows(report)
    mem_goal = args.mem_goal if args.mem_goal is not None else (2048.0 if counts[0] >= 5_000_000 else None)
    wanted = [r.strip() for r in args.rows.split(",") if r.strip()]
    wanted = [w for r in wanted for w in ([f"r:{n}" for n in NEWER_2022] if r == "newer" else [r])]
    unknown = [w for w in wanted if w not in table]
    if unknown:
        sys.exit(f"unknown row(s) {', '.join(unknown)}; rows: newer, {', '.join(table)}")
    work = Path(tempfile.mkdtemp(prefix="ks-bench-"))
    ours: dict[str, list[tuple[float, float]]] = {k: [] for k in wanted}
    ref: dict[str, list[tuple[float, float]]] = {k: [] for k in wanted}
    env = dict(os.environ)
    ref_runs: dict[tuple[object, ...], tuple[float, float]] = {}
    try:
        for i in range(args.rounds):
            for key in wanted:
                row = table[key]
                out = str(work / f"{key}{i}")
                if nsys and row.ref is not None and not row.warm:
                    seen = (i, *row.ref)  # one reference run a round for rows that share it
                    if seen not in ref_runs:
                        if args.drop_caches:
                            drop_caches()
                        ref_runs[seen] = timed([nsys, *(a.replace("{out}", out + "_ref") for a in row.ref)],
                                               env, args.ref_timeout)
                    ref[key].append(ref_runs[seen])
                cache = work / f"cache-{key}{i}"
                env_ks = {**env, "KERNELSCOPE_CACHE": str(cache)}
                argv = [kernelscope, *(a.replace("{out}", out) for a in row.ours)]
                if row.warm:  # fill the cache first, then time the warm run
                    timed(argv, env_ks)
                elif args.drop_caches:
                    drop_caches()
                ours[key].append(timed(argv, env_ks))
                shutil.rmtree(cache, ignore_errors=True)
        _print(table, wanted, ours, ref, mem_goal, args.ref_timeout or float("inf"))
        if args.oracles:
            print()
            for rep in ALL9.split(","):
                mine = work / f"all90_{rep}.csv"
                theirs = args.oracles / f"{args.oracle_prefix}_{rep}.csv"
                if mine.exists() and theirs.exists():
                    same = mine.read_bytes() == theirs.read_bytes()
                    print(f"{rep:<24} {'identical to' if same else 'DIFFERS from'} {theirs}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _print(table: dict[str, Row], wanted: list[str], ours: dict[str, list[tuple[float, float]]],
           ref: dict[str, list[tuple[float, float]]], mem_goal: float | None = None,
           limit: float = float("inf")) -> None:
    goal_mem = f", <= {mem_goal:.0f} MB" if mem_goal else ""
    print("| command | ours: median s (min-max), peak MB | nsys 2022.4: median s, peak MB | ratio | goal "
          "| met |")
    print("| --- | --- | --- | --- | --- | --- |")
    ref_core = ref.get("core5") or []
    for key in wanted:
        row = table[key]
        ts = [t for t, _ in ours[key]]
        mine = statistics.median(ts)
        cell = f"{mine:.2f} ({min(ts):.2f}-{max(ts):.2f}), {max(m for _, m in ours[key]):.0f} MB"
        base = ref[key] if not row.warm else (ref.get(row.ref_key) or ref_core)
        mem_ok = mem_goal is None or max(m for _, m in ours[key]) <= mem_goal
        if key == "summary" and not base:
            base = ref_core
        if base and all(t == float("inf") for t, _ in base):  # stopped at --ref-timeout
            met = mine / limit <= row.goal and mem_ok
            print(f"| {row.label} | {cell} | > {limit:.0f} (stopped) | < {mine / limit:.2f} | "
                  f"<= {row.goal}{goal_mem} | {'yes' if met else 'NO'} |")
        elif base:
            theirs = statistics.median(t for t, _ in base)
            ratio = mine / theirs
            met = ratio <= row.goal and mem_ok
            print(f"| {row.label} | {cell} | {theirs:.2f}, {max(m for _, m in base):.0f} MB | "
                  f"{ratio:.2f} | <= {row.goal}{goal_mem} | {'yes' if met else 'NO'} |")
        else:
            print(f"| {row.label} | {cell} | (not measured) | - | <= {row.goal}{goal_mem} | "
                  f"{'-' if mem_ok else 'NO (memory)'} |")


if __name__ == "__main__":
    sys.exit(main())
