"""Big Kineto traces (issue 26): ``json.load`` (the reference) against Kernelscope's columnar reader.

For each trace (default: the 1 GB and 4 GB traces under /work/bigdata, made by
benchmarks/make_big_kineto.py from the H200 training-step recording when missing), every row runs in
a fresh process tree, and its peak is the resident memory of all its processes together
(benchmarks/tree_peak.py: the reader's worker processes, the window's summary child):

- ``json.load`` of the file (the reference; only for traces up to ``--reference-max-gb``: it takes
  about 5x the file in memory);
- ``parse alone``: the trace streamed into the column cache (cold: the cache is emptied first) and
  mapped, nothing more; MB/s here is the parse rate (decimal MB);
- ``open``: the same, then the PyTorch events built from the columns (what opening a trace costs);
- ``summary`` cold, from nothing: the trace parsed, then its overview and every PyTorch table computed and
  kept (a Kineto trace's first question keeps what every later one asks: ``engine.cli.cached``); MB/s here
  is over all of it;
- ``summary`` from the mapped columns (the open's cache: the overview and the tables computed and kept),
  then ``findings`` and ``summary`` again, ``ops`` (by name; by shapes with kernels), ``modules`` and
  ``memory``: each loads a kept result; ``ops`` again prints the kept text;
- the window's first paint (``kernelscope-gui TRACE --screenshot OUT --view timeline|pytorch``),
  cold (empty cache: the window's process parses) and warm (the second open); each window row also says
  when its screenshot was saved, from the process start (``--second-open N``: only those rows, N rounds).

    python benchmarks/bench_kineto.py [TRACE ...] [--shots docs/screenshots/issue26] [--reference-max-gb 1.5]
        [--no-window] [--second-open N]

The kept results are keyed by the engine's code too (``file_identity``): an edit under engine/analysis
or engine/reports between two rows makes the "again" rows compute anew (a shared working tree).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from tree_peak import run as run_tree  # noqa: E402 - the benchmarks folder is not a package

BIG = Path("/work/bigdata")
DEFAULT = [(BIG / "kineto_1gb.json", 1000), (BIG / "kineto_4gb.json", 4000)]
_JSON = "import json, sys; d = json.load(open(sys.argv[1])); print(len(d['traceEvents']))"
#: the parse alone: the trace streamed into the column cache and mapped (no events built from it)
_PARSE = ("import sys; from pathlib import Path; from engine.reports.kineto_store import columns_of; "
          "print(columns_of(Path(sys.argv[1])).n)")
_OPEN = ("import sys; from pathlib import Path; from engine.reports import open_report; "
         "t = open_report(Path(sys.argv[1])); print(t.events.n)")
#: the window with a screenshot deadline of 15 minutes (app.take_screenshot's own is 2: a cold 4 GB
#: trace on a loaded 2-core machine takes longer to open)
#: and prints when the screenshot was saved ("first paint WALL CPU WALL' CPU'", stdout): seconds from the
#: process start, CPU seconds of the process (all its threads), and both again from the report's open
#: (MainWindow.open_paths: what the report costs beyond the window's own start)
_GUI = """
import sys, time
t0, c0 = time.perf_counter(), time.process_time()
import gui.app as app
from gui.main_window import MainWindow
opened = [t0, c0]
open_paths = MainWindow.open_paths
def timed_open(self, *a, **k):
    opened[:] = [time.perf_counter(), time.process_time()]
    return open_paths(self, *a, **k)
MainWindow.open_paths = timed_open
shot = app.take_screenshot
shot.__defaults__ = (900_000, None)
def timed(*a, **k):
    r = shot(*a, **k)
    t, c = time.perf_counter(), time.process_time()
    print(f"first paint {t - t0:.3f} {c - c0:.3f} {t - opened[0]:.3f} {c - opened[1]:.3f}", flush=True)
    return r
app.take_screenshot = timed
sys.exit(app.main())
"""


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "engine.cli", *args]


class Bench:
    """Runs the rows of one trace and collects them."""

    def __init__(self, trace: Path, cache: Path) -> None:
        self.trace, self.cache = trace, cache
        self.size = trace.stat().st_size
        self.rows: list[tuple[str, float, float | None, float, float]] = []

    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(REPO), "KERNELSCOPE_CACHE": str(self.cache), "QT_QPA_PLATFORM": "offscreen"}

    def empty_cache(self) -> None:
        shutil.rmtree(self.cache, ignore_errors=True)
        self.cache.mkdir(parents=True)

    def row(self, what: str, argv: list[str], *, rate: bool = False) -> str:
        try:
            wall, peak, out, cpu = run_tree(argv, env=self.env())
        except subprocess.CalledProcessError as exc:  # the table says so; the other rows still run
            print(f"  {what}: failed ({exc.returncode}): {(exc.stderr or '').strip()[-300:]}", flush=True)
            self.rows.append((f"{what}: FAILED", 0.0, None, 0.0, 0.0))
            return ""
        paint = [line.split()[2:] for line in out.splitlines() if line.startswith("first paint ")]
        if paint:  # a window row: when its screenshot was saved, from the process start and the open
            at, at_cpu, at_open, at_open_cpu = (float(x) for x in paint[0])
            what = (f"{what} (paint at {at:.2f} s, {at_cpu:.2f} CPU s; "
                    f"from the open {at_open:.2f} s, {at_open_cpu:.2f} CPU s)")
        self.rows.append((what, wall, self.size / 1e6 / wall if rate else None, peak, cpu))
        print(f"  {what:44} {wall:8.2f} s {cpu:8.2f} CPU s {peak:8,.0f} MiB", flush=True)
        return out


def bench(trace: Path, cache: Path, shots: Path | None, reference_max_gb: float,
          cold_views: tuple[str, ...], *, window: bool = True) -> Bench:
    b = Bench(trace, cache)
    p = str(trace)
    print(f"{trace.name}: {b.size / 1e6:,.0f} MB", flush=True)
    if b.size <= reference_max_gb * 1e9:
        b.row("json.load (reference)", [sys.executable, "-c", _JSON, p], rate=True)
    b.empty_cache()
    b.row("summary, cold: parse + overview + PyTorch tables", _cli("summary", p), rate=True)
    b.empty_cache()
    b.row("parse alone: the column cache written (cold)", [sys.executable, "-c", _PARSE, p], rate=True)
    b.empty_cache()
    b.row("open: stream into the column cache (cold)", [sys.executable, "-c", _OPEN, p], rate=True)
    b.row("summary (columns mapped; keeps all)", _cli("summary", p))
    b.row("findings (kept)", _cli("findings", p))
    b.row("summary again (kept)", _cli("summary", p))
    for args in (("ops",), ("ops", "--by", "shapes", "--kernels"), ("modules",), ("memory",)):
        b.row(f"{' '.join(args)} (tables kept)", _cli(*args, p))
    b.row("ops again (text kept)", _cli("ops", p))
    if not window:
        return b
    out = shots or Path(cache) / "shots"
    out.mkdir(parents=True, exist_ok=True)
    stem = trace.stem
    for view in ("timeline", "pytorch"):
        if view in cold_views:
            b.empty_cache()
            shot = str(out / f"{stem}_{view}_cold.png")
            b.row(f"window first paint, {view}, cold",
                  [sys.executable, "-c", _GUI, p, "--screenshot", shot, "--view", view], rate=True)
        shot = str(out / f"{stem}_{view}.png")
        b.row(f"window first paint, {view}, warm",
              [sys.executable, "-c", _GUI, p, "--screenshot", shot, "--view", view])
    return b


def second_opens(trace: Path, cache: Path, shots: Path | None, rounds: int) -> Bench:
    """The window's second open only: the cache of ``trace`` is built once if empty, then each view's
    first paint is measured ``rounds`` times, the views alternating."""
    b = Bench(trace, cache)
    p = str(trace)
    if not cache.exists():
        cache.mkdir(parents=True)
    out = shots or Path(cache) / "shots"
    out.mkdir(parents=True, exist_ok=True)
    for view in ("timeline", "pytorch"):  # builds what is missing (not counted)
        warm = [sys.executable, "-c", _GUI, p, "--screenshot", str(out / "warmup.png"), "--view", view]
        subprocess.run(warm, env=dict(os.environ, **b.env()), check=True, capture_output=True)
    for _ in range(rounds):
        for view in ("timeline", "pytorch"):
            b.row(f"window first paint, {view}, second open",
                  [sys.executable, "-c", _GUI, p, "--screenshot", str(out / f"{trace.stem}_{view}.png"),
                   "--view", view])
    return b


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", type=Path, help="Kineto traces (default: the 1 GB and 4 GB ones)")
    ap.add_argument("--cache", type=Path, default=BIG / "bench_cache", help="the caches' folder (emptied)")
    ap.add_argument("--shots", type=Path, help="write the window's screenshots here")
    ap.add_argument("--reference-max-gb", type=float, default=1.5,
                    help="run json.load only on traces up to this size (it needs about 5x the file)")
    ap.add_argument("--cold-views", default="timeline,pytorch",
                    help="views whose cold first paint is measured")
    ap.add_argument("--no-window", action="store_true", help="leave out the window's rows")
    ap.add_argument("--second-open", type=int, metavar="N", default=0,
                    help="only the window's second open, N times per view (the cache kept, built if empty)")
    a = ap.parse_args()
    traces = [(t, 0) for t in a.traces] or DEFAULT
    for t, mb in traces:
        if not t.exists() and mb:
            make = REPO / "benchmarks/make_big_kineto.py"
            subprocess.run([sys.executable, str(make), str(t), "--mb", str(mb)], check=True)
    load = open("/proc/loadavg").read().split()[:3]
    if a.second_open:
        results = [second_opens(t, a.cache / t.stem, a.shots, a.second_open) for t, _ in traces]
    else:
        results = [bench(t, a.cache / t.stem, a.shots, a.reference_max_gb, tuple(a.cold_views.split(",")),
                         window=not a.no_window) for t, _ in traces]
    print(f"\n{os.cpu_count()} CPUs; load average before: {' '.join(load)}, after: "
          f"{' '.join(open('/proc/loadavg').read().split()[:3])}")
    print("peak: resident memory of the command and all its child processes together (sampled sum)\n")
    print("CPU s: user + system time of the command and its children; MB/s (CPU, 2 cores): the size over")
    print("the CPU time spread on 2 cores (json.load: on its one), what an idle 2-core machine reaches when")
    print("the work keeps both busy\n")
    print("| trace | what | wall s | MB/s | CPU s | MB/s (CPU, 2 cores) | peak MiB | peak / file |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for b in results:
        name = f"{b.trace.name} ({b.size / 1e6:,.0f} MB)"
        for what, wall, rate, peak, cpu in b.rows:
            r = f"{rate:,.0f}" if rate else ""
            cores = 1 if "json.load" in what else 2  # json.load is one process: one core
            ideal = f"{b.size / 1e6 / (cpu / cores):,.0f}" if rate and cpu > 0 else ""
            print(f"| {name} | {what} | {wall:,.2f} | {r} | {cpu:,.2f} | {ideal} | {peak:,.0f} "
                  f"| {peak * 2**20 / b.size:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
