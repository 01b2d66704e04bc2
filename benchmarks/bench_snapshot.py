"""Open a big PyTorch memory snapshot: time and peak memory, against a plain ``pickle.load``.

Makes a snapshot of about ``--mb`` MB by repeating the allocator events of a real one (the H200
training-step recording in tests/data/recordings/torch) along time, with the stacks shared as
torch shares them, then measures, each in a fresh process:

- ``pickle.load`` of the file (what a viewer that loads the snapshot does first), the reference;
- ``kernelscope memory`` cold (the pickle is read as a stream into columns);
- the same command again (from the column cache);
- the window's work (the memory curve and what is alive at the peak) in the caller.

    python benchmarks/bench_snapshot.py [--mb 1024] [--keep DIR]
"""

from __future__ import annotations

import argparse
import lzma
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from peak import PEAK  # noqa: E402 - the benchmarks folder is not a package
from peak import measure as peak_of  # noqa: E402

SOURCE = REPO / "tests/data/recordings/torch/torch_train_snapshot.pickle.xz"


def make(out: Path, mb: int) -> int:
    doc = pickle.loads(lzma.decompress(SOURCE.read_bytes()))
    trace = doc["device_traces"][0]
    base = len(pickle.dumps(doc, protocol=4))
    again = [{**e, "frames": list(e["frames"]), "compile_context": "".join(["N/", "A"])} for e in trace]
    doc["device_traces"] = [trace + again]  # the second copy costs what each repeat costs
    per = (len(pickle.dumps(doc, protocol=4)) - base) / len(trace)
    reps = max(1, int(mb * 2**20 / per / len(trace)))
    span = trace[-1]["time_us"] - trace[0]["time_us"] + 1000
    big = []
    for r in range(reps):
        shift = r * span
        lists: dict[int, list[object]] = {}
        for e in trace:
            if r and e["action"].startswith("segment"):
                continue  # the segments stay reserved: a repeat allocates and frees blocks in them
            # as torch writes them: frame dicts shared, a new frames list per allocation (its free
            # events refer to the same list), a new compile-context string per event
            frames = lists.setdefault(id(e["frames"]), list(e["frames"]))
            big.append({**e, "time_us": e["time_us"] + shift, "frames": frames,
                        "compile_context": "".join(["N/", "A"])})
    doc["device_traces"] = [big]
    with open(out, "wb") as f:
        pickle.dump(doc, f, protocol=4)
    return len(big)


def measure(code: str, *args: str) -> tuple[float, float, str]:
    """Wall seconds, peak MiB and the output of ``python -c code args``."""
    wall, peak, lines = peak_of(code, *args)
    return wall, peak, "\n".join(lines)


_PICKLE = ("import pickle,sys; d = pickle.load(open(sys.argv[1], 'rb')); print(len(d['device_traces'][0]));"
           + PEAK)
_OURS = ("import sys; from engine.reports import open_report;"
         "from engine.analysis.pytorch.memory import memory_timeline, alive_at_peak;"
         "t = open_report(sys.argv[1]); m = memory_timeline(t); c = m.curves[0];"
         "a = alive_at_peak(t.columns_, c); print(c.peak_allocated, len(c.time_ns), len(a));" + PEAK)


# the window, offscreen, showing the PyTorch view's Memory page; peak of the window process
_GUI = ("import os, resource, subprocess, sys, tempfile;"
        "out = os.path.join(tempfile.mkdtemp(), 'w.png');"
        "subprocess.run([sys.executable, '-m', 'gui.app', sys.argv[1], '--screenshot', out,"
        " '--view', 'pytorch'], check=True, capture_output=True,"
        " env=dict(os.environ, QT_QPA_PLATFORM='offscreen'));"
        "print(out);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--keep", type=Path, help="make (or reuse) the big snapshot in this folder")
    a = ap.parse_args()
    work = a.keep or Path(tempfile.mkdtemp(prefix="ks_snap_"))
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"snapshot_{a.mb}mb.pickle"
    cache = work / "cache"
    os.environ["KERNELSCOPE_CACHE"] = str(cache)
    if not path.exists():
        t0 = time.perf_counter()
        n = make(path, a.mb)
        print(f"made {path} ({path.stat().st_size / 2**20:,.0f} MiB, {n:,} events) in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    size = path.stat().st_size / 2**20
    import shutil

    shutil.rmtree(cache, ignore_errors=True)
    rows = [("pickle.load (reference)", *measure(_PICKLE, str(path)))]
    rows.append(("kernelscope: open + memory curve, cold (stream reader)", *measure(_OURS, str(path))))
    rows.append(("kernelscope: the same, cached", *measure(_OURS, str(path))))
    rows.append(("the window on it, cached (kernelscope-gui --screenshot)", *measure(_GUI, str(path))))
    print(f"\nsnapshot: {size:,.0f} MiB on {os.cpu_count()} CPUs ({os.uname().machine})\n")
    print(f"{'what':58} {'wall s':>8} {'peak MiB':>10} {'x file':>7}  result")
    for what, wall, rss, out in rows:
        print(f"{what:58} {wall:8.1f} {rss:10,.0f} {rss / size:7.2f}  {out.replace(chr(10), ' ')}")
    ref_wall, ref_rss = rows[0][1], rows[0][2]
    print(f"\ncold open vs pickle.load: {rows[1][1] / ref_wall:.2f}x the time; a later open holds "
          f"{rows[2][2]:,.0f} MiB in all ({rows[2][2] / ref_rss:.2f}x pickle.load's peak), "
          f"in {rows[2][1]:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
