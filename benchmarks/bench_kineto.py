"""Read a big Kineto trace: ``json.load`` (the reference) against the streaming column reader.

Makes (or reuses) a trace of about ``--mb`` MB from the H200 training-step recording
(benchmarks/make_big_kineto.py: more steps of the same program), then measures, each in a fresh
process: ``json.load`` of the file; :func:`engine.reports.kineto_stream.read_columns` with one
process and with ``--workers`` processes. Peak memory is each process's VmHWM (its workers' too).

    python benchmarks/bench_kineto.py [--mb 1024] [--workers 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from peak import PEAK  # noqa: E402 - the benchmarks folder is not a package
from peak import measure as peak_of  # noqa: E402

_JSON = "import json, sys; d = json.load(open(sys.argv[1])); print(len(d['traceEvents']));" + PEAK
_OURS = ("import sys; from engine.reports.kineto_stream import read_columns;"
         "c = read_columns(sys.argv[1], workers=int(sys.argv[2])); print(c.n);" + PEAK)


def measure(code: str, *args: str) -> tuple[float, float, str]:
    """Wall seconds, peak MiB and the first output line of ``python -c code args``."""
    wall, peak, lines = peak_of(code, *args)
    return wall, peak, lines[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep", type=Path, help="make (or reuse) the trace in this folder")
    a = ap.parse_args()
    work = a.keep or Path(tempfile.mkdtemp(prefix="ks_kineto_"))
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"kineto_{a.mb}mb.json"
    if not path.exists():
        subprocess.run([sys.executable, str(REPO / "benchmarks/make_big_kineto.py"), str(path), "--mb",
                        str(a.mb)], check=True)
    size = path.stat().st_size / 2**20
    rows = [("json.load (reference)", *measure(_JSON, str(path))),
            ("read_columns, 1 process", *measure(_OURS, str(path), "1")),
            (f"read_columns, {a.workers} processes", *measure(_OURS, str(path), str(a.workers)))]
    print(f"\ntrace: {size:,.0f} MiB on {os.cpu_count()} CPUs\n")
    print(f"{'what':36} {'wall s':>8} {'MiB/s':>8} {'peak MiB':>10} {'x file':>7}  events")
    for what, wall, peak, out in rows:
        print(f"{what:36} {wall:8.1f} {size / wall:8.0f} {peak:10,.0f} {peak / size:7.2f}  {out}")
    ref = rows[0]
    best = min(rows[1:], key=lambda r: r[1])
    print(f"\nfastest stream read vs json.load: {best[1] / ref[1]:.2f}x the time, "
          f"{best[2] / ref[2]:.2f}x the memory (goal of issue 26: >= 100 MB/s, <= 1.5x the file)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
