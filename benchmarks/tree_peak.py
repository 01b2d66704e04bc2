"""Run a command and measure the peak memory of it and all its child processes together, and its CPU time.

``benchmarks/peak.py`` reads one process's high-water mark (VmHWM). A reader that starts worker
processes, or a window that starts a summary child, needs the sum over the process tree at the same
moment: this samples the resident size (VmRSS) of the command and every descendant every
``interval`` seconds and keeps the largest sum, and also reads each process's VmHWM just before it
is gone where it can (the larger of the two is reported). The sum counts pages that processes share
(a forked worker's copy-on-write pages, a memory-mapped cache file) once per process: an upper bound.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path


def _status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line[:5]] = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return out


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text().split()
            kids.extend(int(k) for k in text)
    except (OSError, ValueError):
        pass
    return kids


def _tree(root: int) -> list[int]:
    todo, seen = [root], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo.extend(_children(p))
    return seen


def run(argv: list[str], *, env: dict[str, str] | None = None, interval: float = 0.02,
        timeout: float = 3600.0) -> tuple[float, float, str, float]:
    """Wall seconds, peak MiB of the process tree (see the module docstring), stdout of ``argv``, and
    the CPU seconds (user + system) of the command and every child it waited for.

    The CPU time tells what the command costs on an idle machine where the wall time is taken on a
    loaded one: a reader that keeps two cores busy for 20 CPU seconds needs about 10 s on an idle
    2-core machine.
    """
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, **(env or {})))
    peak_kb = 0
    hwm: dict[int, int] = {}
    import threading

    out: list[str] = []
    err: list[str] = []
    readers = [threading.Thread(target=lambda: out.append(proc.stdout.read() if proc.stdout else "")),
               threading.Thread(target=lambda: err.append(proc.stderr.read() if proc.stderr else ""))]
    for r in readers:
        r.start()
    while proc.poll() is None:
        total = 0
        for pid in _tree(proc.pid):
            st = _status(pid)
            total += st.get("VmRSS", 0)
            hwm[pid] = max(hwm.get(pid, 0), st.get("VmHWM", 0))
        peak_kb = max(peak_kb, total)
        if time.perf_counter() - t0 > timeout:
            proc.kill()
            break
        time.sleep(interval)
    wall = time.perf_counter() - t0
    for r in readers:
        r.join()
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, argv, "".join(out), "".join(err))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # the root's own high-water mark can be above every sample (a spike between two)
    peak_kb = max(peak_kb, hwm.get(proc.pid, 0))
    return wall, peak_kb / 1024, "".join(out), cpu
