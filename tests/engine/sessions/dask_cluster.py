"""A real Dask scheduler and workers on 127.0.0.1, started as `dask scheduler` / `dask worker` processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DASK = Path(sys.executable).parent / "dask"


@contextmanager
def dask_cluster(folder: Path, workers: int = 2) -> Iterator[tuple[str, Path]]:
    """Yield (scheduler address, scheduler file) once ``workers`` workers have joined."""
    folder.mkdir(parents=True, exist_ok=True)
    sched_file = folder / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False", "PYTHONPATH": str(Path.cwd())}
    procs: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        log = (folder / "scheduler.log").open("wb")
        logs.append(log)
        procs.append(subprocess.Popen(
            [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(sched_file)], stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True))
        deadline = time.monotonic() + 60
        while not sched_file.exists() or not sched_file.read_text().strip():
            if time.monotonic() > deadline or procs[0].poll() is not None:
                raise RuntimeError("dask scheduler did not start: " + (folder / "scheduler.log").read_text())
            time.sleep(0.1)
        address = json.loads(sched_file.read_text())["address"]
        for i in range(workers):
            log = (folder / f"worker{i}.log").open("wb")
            logs.append(log)
            procs.append(subprocess.Popen(
                [str(DASK), "worker", address, "--nworkers", "1", "--nthreads", "1", "--no-dashboard",
                 "--host", "127.0.0.1", "--name", f"w{i}"], stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True))
        from distributed import Client

        with Client(address, timeout="30s") as c:
            c.wait_for_workers(workers, timeout=90)
        yield address, sched_file
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for log in logs:
            log.close()
