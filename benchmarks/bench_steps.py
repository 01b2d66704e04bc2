#!/usr/bin/env python3
"""What finding the steps from the GPU's work adds to `summary` (issue 22: under 10 % at 400k kernels).

    python benchmarks/bench_steps.py [--scale K] [--rounds 3] [--source NAME]

Makes a big report from a real zoo recording (tests/data/recordings/zoo/tuned/NAME, a training loop
recorded on an H200) repeated K times with ../shared/tools/scale_nsys_sqlite.py (default: `nonvtx`,
2,590 GPU operations, x 160 = 414k operations, 362k kernels). With the columnar cache built once
beforehand, each round runs in fresh processes `summary` as shipped (which finds the steps) and the
same with the GPU's step detection switched off (KERNELSCOPE_STEPS=nvtx: NVTX ranges only, as before
issue 22); it prints the median wall time of each, what the detection adds as a share of the latter,
and the steps found (count, median), so a regression in what is found shows up beside the time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SCALE_TOOL = ROOT.parent / "shared" / "tools" / "scale_nsys_sqlite.py"
GOAL = 0.10

_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from engine.reports import open_report
what, path = sys.argv[2], sys.argv[3]
t0 = time.perf_counter()
t = open_report(path)
if what == "overview":  # the CLI's `summary`: the summary and the findings on it
    from engine.analysis.findings.overview import overview
    s, _found = overview(t)
else:
    from engine.analysis.summary import summarize
    s = summarize(t)
it = s.iterations
out = {"steps": it.count if it else 0, "median_ms": it.steady_median_ns / 1e6 if it else None}
out["seconds"] = time.perf_counter() - t0
print(json.dumps(out))
"""


def run(what: str, path: Path, env: dict[str, str]) -> dict:
    res = subprocess.run([sys.executable, "-c", _CHILD, str(ROOT), what, str(path)], capture_output=True,
                         text=True, env=env, check=True, timeout=1800)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=160)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--source", default="nonvtx")
    a = ap.parse_args()
    from benchmarks.check_steps_zoo import ZOO, sqlite_of

    src = sqlite_of(ZOO / "tuned" / f"{a.source}.sqlite.xz")
    work = Path(tempfile.gettempdir()) / "ks_bench_steps"
    work.mkdir(exist_ok=True)
    big = work / f"{a.source}_x{a.scale}.sqlite"
    if not big.exists():
        if not SCALE_TOOL.exists():
            print(f"{SCALE_TOOL} is missing: put ../shared beside the checkout")
            return 2
        subprocess.run([sys.executable, str(SCALE_TOOL), str(src), str(big) + ".tmp", str(a.scale)],
                       check=True)
        os.replace(str(big) + ".tmp", big)
    import sqlite3

    con = sqlite3.connect(big)
    kernels = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    con.close()
    env = dict(os.environ, KERNELSCOPE_CACHE=str(work / "cache"))
    run("summary", big, env)  # builds the columnar cache once: both rows then read it alike
    nvtx = dict(env, KERNELSCOPE_STEPS="nvtx")
    envs = {"summary": ("summary", env), "summary, NVTX steps only": ("summary", nvtx),
            "summary + findings": ("overview", env), "summary + findings, NVTX only": ("overview", nvtx)}
    rows: dict[str, list[dict]] = {w: [] for w in envs}
    for _ in range(a.rounds):
        for what, (kind, e) in envs.items():
            rows[what].append(run(kind, big, e))
    med = {w: statistics.median(r["seconds"] for r in rs) for w, rs in rows.items()}
    base = med["summary, NVTX steps only"]
    share = (med["summary"] - base) / base
    base2 = med["summary + findings, NVTX only"]
    both = (med["summary + findings"] - base2) / base2
    print(f"report: {big.name}, {kernels:,} kernels ({a.source} × {a.scale}), {a.rounds} rounds, cache warm")
    print(f"{'what':30} {'median s':>9}  steps found")
    for w in envs:
        r = rows[w][-1]
        print(f"{w:30} {med[w]:9.3f}  {r['steps']} steps, median {r['median_ms'] or float('nan'):.3f} ms")
    print(f"the GPU's step detection adds {share:+.1%} to summary (goal < {GOAL:.0%}): "
          f"{'met' if share < GOAL else 'NOT met'}")
    print(f"with the findings on top (the CLI's `summary`; the rules then also measure what the steps make "
          f"measurable: idle causes, per-step copy gains): {both:+.1%}")
    return 0 if share < GOAL else 1


if __name__ == "__main__":
    raise SystemExit(main())
