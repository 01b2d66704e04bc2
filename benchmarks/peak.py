"""Run a Python snippet in a fresh process: its wall time, peak memory and output (for the benchmarks).

The snippet ends with :data:`PEAK`, which prints the process's peak resident size in MiB (VmHWM of
its own memory map; ``getrusage``'s maxrss would carry the forking parent's size across exec), or
the larger of that and its children's when it starts workers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PEAK = ("import resource;"
        "own = int([x for x in open('/proc/self/status') if x.startswith('VmHWM')][0].split()[1]);"
        "kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss;"
        "print(max(own, kids) / 1024)")


def measure(code: str, *args: str) -> tuple[float, float, list[str]]:
    """Wall seconds, peak MiB and the output lines before the peak of ``python -c code args``."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    t0 = time.perf_counter()
    run = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                         check=True)
    wall = time.perf_counter() - t0
    lines = run.stdout.strip().splitlines()
    return wall, float(lines[-1]), lines[:-1]
