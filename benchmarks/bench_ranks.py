"""`kernelscope ranks` on a 64-rank job of real size: cold, cached, on Dask workers and on a Dask scheduler.

    python benchmarks/make_ranks64.py                     # once: /work/bigdata/ranks64 (11.7 GB)
    python benchmarks/bench_ranks.py [--job /work/bigdata/ranks64] [--skip-reference]

Rows (each in a fresh process tree; "cold" = a fresh, empty KERNELSCOPE_CACHE):

* reference: the per-rank baseline measured in the same run: ``nsys stats`` (cuda_gpu_kern_sum,
  cuda_api_sum) of one rank, times the number of ranks (a per-rank tool run rank after rank); without
  nsys, ``kernelscope summary`` of one rank instead (the table says which);
* cold: ``kernelscope ranks JOB/*.sqlite``;
* cached: the same command again (every rank read from the cache);
* dask --workers 2: ``kernelscope batch ranks JOB/*.sqlite --workers 2`` (a LocalCluster), cold;
* scheduler: ``dask scheduler`` and ``dask worker --nworkers 2`` started here, then
  ``kernelscope batch ranks ... --scheduler tcp://...``, cold.

Peak MB is the largest sum of the resident memory of every process of the run at once (the command,
its children, and the scheduler and workers for the last row), sampled every 0.1 s. CPU s is the user +
system time of the run's process tree (every process it waited for: readers, Dask workers), the fairer
measure on a shared machine: CPU s / cores is the time on a quiet one. "Named right" compares the
straggler the output names with ``truth.json`` of the job. Set TMPDIR to put the caches on another disk.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil  # type: ignore[import-untyped]

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
#: the command line, run in the snapshot of the code measured
KS = [sys.executable, "-m", "engine.cli"]
GOALS = {"cold": (120.0, 4096.0), "cached": (10.0, 4096.0), "dask --workers 2": (120.0, 4096.0),
         "scheduler": (120.0, 4096.0)}


class PeakSampler:
    """The largest total resident size of a set of process trees, sampled in a thread."""

    def __init__(self, roots: list[int]) -> None:
        self.roots = roots
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _total(self) -> float:
        seen: set[int] = set()
        total = 0
        for pid in self.roots:
            try:
                root = psutil.Process(pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                continue
            for p in procs:
                if p.pid in seen:
                    continue
                seen.add(p.pid)
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
        return total / 2**20

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, self._total())
            self._stop.wait(0.1)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak_mb


def children_cpu_s() -> float:
    """User + system seconds of every process this one waited for so far (and theirs)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


#: CPU seconds of each row's process tree, by row label (timed() records the last command's)
CPU_S: dict[str, float] = {}
_LAST_CPU = [0.0]


def timed(argv: list[str], env: dict[str, str], extra_roots: list[int] | None = None
          ) -> tuple[float, float, str, int]:
    """(wall s, peak MB of the run's processes together, stdout, exit status) of one command."""
    cpu0 = children_cpu_s()
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=env.get("PYTHONPATH"))
    sampler = PeakSampler([proc.pid, *(extra_roots or [])])
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    peak = sampler.stop()
    _LAST_CPU[0] = children_cpu_s() - cpu0
    if proc.returncode:
        print(f"  {' '.join(argv[:3])} ... failed ({proc.returncode}): {err.strip()[-500:]}", file=sys.stderr)
    return wall, peak, out, proc.returncode


def named_in_text(out: str) -> int | None:
    """The straggler ``kernelscope ranks`` names."""
    for line in out.splitlines():
        if line.startswith("Straggler: rank "):
            return int(line.split()[2])
    return None


def named_in_batch(out: str) -> int | None:
    """The straggler of ``kernelscope batch ranks --json``."""
    try:
        rows = json.loads(out)
    except json.JSONDecodeError:
        return None
    hit = [r["rank"] for r in rows if r.get("straggler")]
    return hit[0] if len(hit) == 1 else None


def reference(report: Path, n_ranks: int, env: dict[str, str]) -> tuple[str, float, float]:
    """(what, seconds for n_ranks, peak MB) of the per-rank baseline on one rank, times n_ranks."""
    nsys = shutil.which("nsys")
    with tempfile.TemporaryDirectory() as tmp:
        if nsys:
            names = "gpukernsum,cudaapisum" if _old_nsys(nsys) else "cuda_gpu_kern_sum,cuda_api_sum"
            argv = [nsys, "stats", "--force-overwrite", "true", "--format", "csv", "--report", names,
                    "--output", f"{tmp}/ref", str(report)]
            what = f"nsys stats ({names}) of 1 rank x"
        else:
            argv = [*KS, "summary", str(report)]
            what = "kernelscope summary of 1 rank x"
        wall, peak, _, _ = timed(argv, dict(env, KERNELSCOPE_CACHE=f"{tmp}/cache"))
    return f"{what} {n_ranks}", wall * n_ranks, peak


def _old_nsys(nsys: str) -> bool:
    """nsys before 2023 names its reports gpukernsum, cudaapisum (later: cuda_gpu_kern_sum, ...)."""
    out = subprocess.run([nsys, "--version"], capture_output=True, text=True).stdout
    digits = [w for w in out.split() if w[:4].isdigit()]
    return bool(digits) and int(digits[0][:4]) < 2023


def with_scheduler(reports: list[str], env: dict[str, str], tmp: Path) -> tuple[float, float, str, int]:
    """Start a Dask scheduler and 2 workers here, run the batch against it, stop them."""
    sched_file = tmp / "scheduler.json"
    log = open(tmp / "dask.log", "w")  # noqa: SIM115 - closed below
    sched = subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                              "--dashboard-address", ":0", "--scheduler-file", str(sched_file)],
                             stdout=log, stderr=log, env=env)
    worker = None
    try:
        for _ in range(300):
            if sched_file.exists() and sched_file.stat().st_size:
                break
            time.sleep(0.1)
        address = json.loads(sched_file.read_text())["address"]
        worker = subprocess.Popen([str(BIN / "dask"), "worker", address, "--nworkers", "2", "--nthreads", "1",
                                   "--memory-limit", "0", "--host", "127.0.0.1", "--dashboard-address", ":0"],
                                  stdout=log, stderr=log, env=env)
        time.sleep(8)  # the workers register
        argv = [*KS, "batch", "ranks", *reports, "--scheduler", address, "--json"]
        cpu0 = children_cpu_s()
        got = timed(argv, env, [sched.pid, worker.pid])
        _stop(worker, sched)
        _LAST_CPU[0] = children_cpu_s() - cpu0  # the scheduler's and workers' too, once they exited
        return got
    finally:
        _stop(worker, sched)
        log.close()


def _stop(*procs: subprocess.Popen[bytes] | None) -> None:
    """Terminate and wait for the processes (their CPU time then counts in children_cpu_s)."""
    for p in procs:
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def main() -> int:
    """Run the rows and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--job", type=Path, default=Path("/work/bigdata/ranks64"))
    ap.add_argument("--skip-reference", action="store_true")
    ap.add_argument("--rows", default="cold,cached,dask,scheduler")
    ap.add_argument("--commit", default="HEAD", help="the code measured (a snapshot of this commit)")
    ap.add_argument("--keep", type=Path, help="write each run's output there (ROW.txt)")
    a = ap.parse_args()
    global KEEP
    KEEP = a.keep
    truth = json.loads((a.job / "truth.json").read_text())
    reports = sorted((str(p) for p in a.job.glob("*_rank*.sqlite")),
                     key=lambda p: int(p.rsplit("rank", 1)[1].split(".")[0]))
    size_gb = sum(os.stat(p).st_size for p in reports) / 1e9
    want = set(a.rows.split(","))
    rows: list[tuple[str, float, float, str, str, str]] = []
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="ks-bench-ranks-") as tmp_s:
        tmp = Path(tmp_s)
        # the code measured: a snapshot of the commit (others editing the tree would change the engine's
        # code stamp, and with it every cache key, between the cold and the cached run)
        code = tmp / "code"
        code.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", a.commit], capture_output=True,
                                 check=True)
        subprocess.run(["tar", "-x", "-C", str(code)], input=archive.stdout, check=True)
        env = dict(os.environ, PYTHONPATH=str(code))
        ks = KS
        if not a.skip_reference:
            what, sec, peak = reference(Path(reports[0]), len(reports), env)
            rows.append((f"reference: {what}", sec, peak, "-", "-", "-"))
            CPU_S[rows[-1][0]] = _LAST_CPU[0] * len(reports)
        cache = dict(env, KERNELSCOPE_CACHE=str(tmp / "cache-ranks"))
        if "cold" in want or "cached" in want:
            for label in ("cold", "cached"):
                wall, peak, out, rc = timed([*ks, "ranks", *reports], cache)
                rows.append(_row(label, wall, peak, named_in_text(out) if rc == 0 else None, truth, out))
        if "dask" in want:
            dask_env = dict(env, KERNELSCOPE_CACHE=str(tmp / "cache-dask"))
            argv = [*ks, "batch", "ranks", *reports, "--workers", "2", "--json"]
            wall, peak, out, rc = timed(argv, dask_env)
            rows.append(_row("dask --workers 2", wall, peak, named_in_batch(out) if rc == 0 else None, truth,
                             out))
        if "scheduler" in want:
            sched_env = dict(env, KERNELSCOPE_CACHE=str(tmp / "cache-scheduler"))
            wall, peak, out, rc = with_scheduler(reports, sched_env, tmp)
            rows.append(_row("scheduler", wall, peak, named_in_batch(out) if rc == 0 else None, truth, out))
    load1 = os.getloadavg()
    print(f"job: {len(reports)} ranks x {truth['kernels_per_rank']:,} kernels, {size_gb:.2f} GB ({a.job}); "
          f"injected straggler: rank {truth['straggler']} (+{truth['extra_ms']} ms per step in "
          f"{truth['phase']})")
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", a.commit], capture_output=True,
                         text=True).stdout.strip()
    mem = psutil.virtual_memory().total / 2**30
    print(f"code: {a.commit} ({sha}); machine: {os.cpu_count()} cores, {mem:.0f} GiB; load average "
          f"{load0[0]:.1f} before, {load1[0]:.1f} after")
    head = ("run", "time s", "CPU s", "peak MB", "straggler named right?", "goal", "met?")
    table = [head] + [(r[0], f"{r[1]:.1f}", f"{CPU_S.get(r[0], 0.0):.1f}", f"{r[2]:,.0f}", r[3], r[4], r[5])
                      for r in rows]
    widths = [max(len(x[i]) for x in table) for i in range(len(head))]
    for x in table:
        print("  ".join(v.ljust(w) if i in (0, 4, 5) else v.rjust(w) for i, (v, w) in
                        enumerate(zip(x, widths, strict=True))).rstrip())
    return 0


KEEP: Path | None = None


def _row(label: str, wall: float, peak: float, named: int | None, truth: dict[str, object],
         out: str = "") -> tuple[str, float, float, str, str, str]:
    if KEEP is not None:
        KEEP.mkdir(parents=True, exist_ok=True)
        (KEEP / f"{label.replace(' ', '_').replace('-', '')}.txt").write_text(out)
    CPU_S[label] = _LAST_CPU[0]
    sec, mb = GOALS[label]
    right = named == truth["straggler"]
    said = f"yes (rank {named})" if right else f"NO ({'none' if named is None else f'rank {named}'})"
    met = "yes" if right and wall <= sec and peak <= mb else "no"
    return label, wall, peak, said, f"<= {sec:.0f} s, <= {mb:,.0f} MB", met


if __name__ == "__main__":
    raise SystemExit(main())
