#!/usr/bin/env python3
"""Measure the telemetry sampler on a real GPU.

    python benchmarks/bench_telemetry.py --seconds 60 [--load] [--gpu 0]

1. CPU cost at 10 Hz over --seconds: process CPU time / wall time, as % of one core (target <= 1 %).
2. Timestamp jitter at 10 Hz: p50/p99 of |interval - period| and of the drift from the fixed grid.
3. Cost of one NvmlSource.read() and the highest period the sampler sustains (>= 95 % of ticks).
4. With --load: GPM SM/tensor/DRAM utilisation while idle vs while a bf16 GEMM loop runs (torch,
   imported only then): do the GPM values move?
Needs only the repo (no install): numpy-free, uses engine.telemetry and nvidia-ml-py.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.telemetry.nvml import nvml_available  # noqa: E402
from engine.telemetry.sampler import Sampler  # noqa: E402
from engine.telemetry.snapshot import Snapshot  # noqa: E402
from engine.telemetry.sources import NvmlSource  # noqa: E402


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


def run_sampler(period: float, seconds: float, gpus: str) -> tuple[list[Snapshot], float, float, int]:
    """Snapshots, CPU % of one core, wall seconds, missed ticks."""
    sampler = Sampler(NvmlSource(), period_s=period, gpus=gpus, ring_size=int(seconds / period) + 100)
    c0, w0 = time.process_time(), time.monotonic()
    sampler.start()
    time.sleep(seconds)
    sampler.stop()
    c1, w1 = time.process_time(), time.monotonic()
    return sampler.history(), 100.0 * (c1 - c0) / (w1 - w0), w1 - w0, sampler.missed_ticks


def jitter(snaps: list[Snapshot], period: float) -> tuple[list[float], list[float]]:
    ts = [s.timestamp_ns for s in snaps]
    interval_err = [abs((b - a) / 1e9 - period) * 1e3 for a, b in zip(ts, ts[1:], strict=False)]
    grid_err = []
    for t in ts:
        rel = (t - ts[0]) / 1e9
        grid_err.append(abs(rel - round(rel / period) * period) * 1e3)
    return interval_err, grid_err


def mean_of(snaps: list[Snapshot], field: str) -> float | None:
    vals = [getattr(g, field) for s in snaps for g in s.gpus if getattr(g, field) is not None]
    return statistics.fmean(vals) if vals else None


def gemm_load(stop: threading.Event, ready: threading.Event, device: int) -> None:
    import torch

    dev = torch.device("cuda", device)
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    torch.cuda.synchronize(dev)
    ready.set()
    while not stop.is_set():
        for _ in range(20):
            a @ b
        torch.cuda.synchronize(dev)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0, help="length of the 10 Hz run (default 60)")
    ap.add_argument("--gpu", default="0", help="GPU index or 'all' (default 0)")
    ap.add_argument("--load", action="store_true", help="also run a torch GEMM and compare GPM values")
    args = ap.parse_args()
    ok, reason = nvml_available()
    if not ok:
        print(reason, file=sys.stderr)
        return 1
    print(reason)
    rows: list[tuple[str, str, str]] = []

    # 1-2. 10 Hz: CPU cost and jitter
    snaps, cpu, wall, missed = run_sampler(0.1, args.seconds, args.gpu)
    ierr, gerr = jitter(snaps, 0.1)
    gaps = sum(s.gap for s in snaps)
    first = snaps[-1].gpus[0] if snaps and snaps[-1].gpus else None
    gpm_on = first is not None and first.gpm_sm_util_pct is not None
    rows += [
        ("GPU", first.name if first else "-", f"GPM {'supported' if gpm_on else 'not available'}"),
        ("10 Hz snapshots", f"{len(snaps)} in {wall:.1f} s", f"missed ticks {missed}, gaps {gaps}"),
        ("10 Hz CPU (% of one core)", f"{cpu:.2f} %", "target <= 1 %: " + ("PASS" if cpu <= 1.0 else "FAIL")),
        ("interval error p50 / p99", f"{pct(ierr, 50):.3f} / {pct(ierr, 99):.3f} ms", "|dt - 100 ms|"),
        ("grid drift p50 / p99 / last", f"{pct(gerr, 50):.3f} / {pct(gerr, 99):.3f} / "
         f"{gerr[-1] if gerr else float('nan'):.3f} ms", "distance from t0 + k*period"),
    ]

    # 3. one read, and the highest sustained rate
    src = NvmlSource()
    src.open(None if args.gpu == "all" else frozenset(int(x) for x in args.gpu.split(",")))
    costs = []
    for _ in range(300):
        t = time.perf_counter()
        src.read()
        costs.append((time.perf_counter() - t) * 1e3)
    src.close()
    rows.append(("NvmlSource.read() p50 / p99", f"{pct(costs, 50):.3f} / {pct(costs, 99):.3f} ms",
                 f"~{1000 / pct(costs, 50):.0f} reads/s ceiling"))
    best = None
    step_s = max(2.0, args.seconds / 20)
    for period in (0.05, 0.02, 0.01, 0.005, 0.002, 0.001):
        s, c, w, m = run_sampler(period, step_s, args.gpu)
        achieved = len(s) / w
        sustained = achieved >= 0.95 / period
        rows.append((f"  period {period * 1e3:g} ms", f"{achieved:.0f} Hz, CPU {c:.1f} %",
                     f"missed {m}" + (" (sustained)" if sustained else " (NOT sustained)")))
        if sustained:
            best = 1 / period
        else:
            break
    rows.append(("highest sustained rate", f"{best:.0f} Hz" if best else "< 20 Hz",
                 f"{step_s:.0f} s per step"))

    # 4. GPM under load
    if args.load:
        dev = 0 if args.gpu == "all" else int(args.gpu.split(",")[0])
        idle, _, _, _ = run_sampler(0.1, 3.0, str(dev))
        stop, ready = threading.Event(), threading.Event()
        th = threading.Thread(target=gemm_load, args=(stop, ready, dev), daemon=True)
        th.start()
        ready.wait(120)
        time.sleep(1.0)
        busy, _, _, _ = run_sampler(0.1, max(5.0, min(15.0, args.seconds / 4)), str(dev))
        stop.set()
        th.join()
        for field in ("util_gpu_pct", "gpm_sm_util_pct", "gpm_sm_occupancy_pct", "gpm_tensor_util_pct",
                      "gpm_dram_bw_util_pct", "power_w"):
            a, b = mean_of(idle, field), mean_of(busy, field)
            moved = a is not None and b is not None and b > a + 5
            rows.append((f"load: {field}", f"idle {_f(a)} -> GEMM {_f(b)}",
                         "moves" if moved else "no change"))

    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    print()
    for name, value, note in rows:
        print(f"{name:<{w0}}  {value:<{w1}}  {note}")
    return 0


def _f(v: float | None) -> str:
    return "NA" if v is None else f"{v:.1f}"


if __name__ == "__main__":
    sys.exit(main())
