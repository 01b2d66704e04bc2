"""Make a 64-rank job of real size from the real 4-rank recording, with one injected straggler.

    python benchmarks/make_ranks64.py            # 64 ranks x ~400k kernels -> /work/bigdata/ranks64
    python benchmarks/make_ranks64.py --ranks 8 --kernels 4000 --out /tmp/ranks8     # a small one (tests)

Sources: ``tests/data/recordings/zoo/ddp4/ddp4_base_rank{0..3}.sqlite.xz`` (4-rank DDP on 4x H200, phases
``data``, ``forward+backward``, ``optimizer``, no straggler; 11.76 ms per step). Rank ``r`` of the job is
a copy of source rank ``r % 4``. (The 2-rank recordings, ``nsys/ddp/ddp_rank{0,1}``, are another program
with other collectives: ``--source ddp2`` makes the job from them instead; the two cannot be mixed in
one job, because the k-th collective of one program is not the k-th of the other.)

How:

1. each source rank is scaled once with ``../shared/tools/scale_nsys_sqlite.py`` (its capture repeated
   K times along time, K = kernels per rank / the recording's kernels);
2. each job rank is a file copy of its source's scaled export whose every timestamp (kernels, copies,
   memsets, CUDA API, synchronization, NVTX, ...) is moved by one SQL UPDATE through a piecewise-linear
   time warp (a small table the UPDATE looks up), which
   * puts the K copies of every source on one common period (the tool repeats each rank by its own
     span, which differ by a few ms across ranks);
   * stretches the rank's GPU optimizer phase of every step (the span of the kernels launched inside
     the NVTX ``optimizer`` range) by its extra compute: ``--extra-ms`` for the straggler, plus a
     random jitter in [0, ``--jitter-us``] for every rank and step;
   * makes every rank wait in its first NCCL kernel after that phase until the slowest rank of the
     step arrives (the kernel's start stays, its end and everything after move by the difference),
     so the collectives stay lined up across ranks, as they would in a real job;
   * offsets the rank's clock: every timestamp moves by a per-rank offset, the session's UTC start
     moves back by the same offset plus a per-node clock error (ranks on one node share it), which
     the analysis must remove by lining up collective ends;
3. ranks are spread over nodes of 8 GPUs (host name ``node03``, device ``rank % 8``).

``truth.json`` beside the reports says what was injected: the straggler, the phase, the extra time per
step, the jitter, the clock offsets and errors, and the seed.
"""

from __future__ import annotations

import argparse
import json
import lzma
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SCALE_TOOL = REPO.parent / "shared" / "tools" / "scale_nsys_sqlite.py"
SOURCES = {
    "ddp4": [REPO / f"tests/data/recordings/zoo/ddp4/ddp4_base_rank{i}.sqlite.xz" for i in range(4)],
    "ddp2": [REPO / f"tests/data/recordings/nsys/ddp/ddp_rank{i}.sqlite.xz" for i in range(2)],
}
#: the tables whose rows carry times (the scaling tool's, and the two it does not repeat)
TIMED = ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
         "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS", "OSRT_API",
         "CUPTI_ACTIVITY_KIND_CUDA_EVENT"]
SCALED = TIMED[:7]
FAR = 1 << 62


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("select name from sqlite_master where type='table'")}


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in db.execute(f"pragma table_info({table})")]


def source_span(path: Path) -> tuple[int, int]:
    """(lo, span) as the scaling tool computes them: copy i of a row at t is (t - lo) // span."""
    db = sqlite3.connect(path)
    names = _tables(db)
    lo = hi = None
    for t in SCALED:
        if t in names:
            a, b = db.execute(f"select min(start), max(coalesce(end, start)) from {t}").fetchone()
            if a is not None:
                lo = a if lo is None else min(lo, a)
                hi = b if hi is None else max(hi, b)
    db.close()
    assert lo is not None and hi is not None
    return int(lo), int(hi - lo) + 1000


def phase_windows(path: Path, phase: str) -> tuple[np.ndarray, np.ndarray]:
    """Per step: the GPU span [start, end] of the kernels launched inside the NVTX range ``phase``."""
    db = sqlite3.connect(path)
    rng = np.array(db.execute("select n.start, n.end, n.globalTid from NVTX_EVENTS n left join StringIds s "
                              "on s.id = n.textId where coalesce(n.text, s.value) = ? and n.end is not null "
                              "order by n.start", (phase,)).fetchall(), dtype=np.int64).reshape(-1, 3)
    api = np.array(db.execute("select start, correlationId, globalTid from CUPTI_ACTIVITY_KIND_RUNTIME "
                              "where correlationId is not null").fetchall(), dtype=np.int64).reshape(-1, 3)
    k = np.array(db.execute("select start, end, correlationId from CUPTI_ACTIVITY_KIND_KERNEL").fetchall(),
                 dtype=np.int64).reshape(-1, 3)
    db.close()
    if not len(rng):
        sys.exit(f"{path.name}: no NVTX range named {phase!r}; choose another --phase.")
    order = np.argsort(api[:, 1])
    pos = np.minimum(np.searchsorted(api[order, 1], k[:, 2]), len(order) - 1)
    hit = api[order[pos], 1] == k[:, 2]
    launch = np.where(hit, api[order[pos], 0], -1)
    tid = np.where(hit, api[order[pos], 2], -1)
    step = np.searchsorted(rng[:, 0], launch, side="right") - 1
    at = np.maximum(step, 0)
    inside = hit & (step >= 0) & (launch <= rng[at, 1]) & (tid == rng[at, 2])
    lo = np.full(len(rng), FAR, dtype=np.int64)
    hi = np.full(len(rng), -FAR, dtype=np.int64)
    np.minimum.at(lo, step[inside], k[inside, 0])
    np.maximum.at(hi, step[inside], k[inside, 1])
    ok = lo < hi
    return lo[ok], hi[ok]


def warp_table(lo: np.ndarray, hi: np.ndarray, extra: np.ndarray, slowest: np.ndarray, offset: int,
               copy_lo: int, span: int, period: int, copies: int,
               wait_in_nccl: bool) -> list[tuple[int, int, float]]:
    """The piecewise-linear shift of one rank: rows (x0, shift at x0, rate) sorted by x0.

    ``shift(t) = shift0 + (t - x0) * rate`` for the last x0 <= t. Parts: the clock offset; the copies
    moved onto one ``period``; per step, the phase [lo, hi] stretched by ``extra``, and the wait up to
    the ``slowest`` rank's extra: just before the next step's phase (the rank's GPU idles there, its
    last collective not done), or, for the ends of NCCL kernels (``wait_in_nccl``), right after the
    phase (every collective between ends when the slowest rank's does).
    """
    cum = np.concatenate([[0], np.cumsum(slowest)])[:-1]  # the wait-up of the steps before
    xs: list[tuple[int, int, float]] = []
    for s in range(len(lo)):
        width = max(1, int(hi[s] - lo[s]))
        xs.append((int(lo[s]), int(cum[s]), float(extra[s]) / width))
        xs.append((int(hi[s]), int(cum[s] + extra[s]), 0.0))
        if wait_in_nccl:
            xs.append((int(hi[s]) + 1, int(cum[s] + slowest[s]), 0.0))
    warp = sorted(xs)
    bx = np.array([x for x, _, _ in warp], dtype=np.int64)
    out: list[tuple[int, int, float]] = [(-FAR, offset, 0.0)]
    cuts = [copy_lo + i * span for i in range(1, copies)]
    for x in sorted(set(bx.tolist()) | set(cuts)):
        i = int(np.searchsorted(bx, x, side="right")) - 1
        wx, ws, wr = warp[i] if i >= 0 else (x, 0, 0.0)
        copy = max(0, min(copies - 1, (x - copy_lo) // span))
        out.append((x, offset + ws + int((x - wx) * wr) + copy * (period - span), wr))
    return out


Warp = list[tuple[int, int, float]]


def apply_warp(path: Path, warp: Warp, nccl_end: Warp) -> None:
    """Move every timestamp of the report through the warp (one UPDATE per table); NCCL kernels' ends
    through ``nccl_end``."""
    db = sqlite3.connect(path)
    db.execute("pragma journal_mode = off")
    db.execute("pragma synchronous = off")
    for name, rows in (("warp", warp), ("warp_nccl", nccl_end)):
        db.execute(f"create temp table {name} (x0 integer primary key, s0 integer, rate real)")
        db.executemany(f"insert into {name} values (?, ?, ?)", rows)
    names = _tables(db)
    ids = db.execute("select id from StringIds where value like 'nccl%Kernel%'")
    nccl = ", ".join(str(r[0]) for r in ids)

    def moved(col: str, table: str, warp: str = "warp") -> str:
        return (f"{col} + (select w.s0 + cast(({table}.{col} - w.x0) * w.rate as integer) from {warp} w "
                f"where w.x0 <= {table}.{col} order by w.x0 desc limit 1)")

    for t in TIMED:
        cols = _columns(db, t) if t in names else []
        sets = [f"{c} = case when {c} is null then null else {moved(c, t)} end"
                for c in ("start", "end", "timestamp") if c in cols]
        if t == "CUPTI_ACTIVITY_KIND_KERNEL" and nccl:
            sets[-1] = (f"end = case when shortName in ({nccl}) then {moved('end', t, 'warp_nccl')} "
                        f"else {moved('end', t)} end")
        if sets:
            db.execute(f"update {t} set {', '.join(sets)}")
    db.commit()
    db.close()


def make_rank(args: tuple[Any, ...]) -> float:
    """Copy the source's scaled export to the rank's report and warp it; seconds taken."""
    rank, base, out, warp, nccl_end, utc_start, host, device = args
    t0 = time.perf_counter()
    tmp = out.with_suffix(".sqlite.part")
    shutil.copyfile(base, tmp)
    apply_warp(tmp, warp, nccl_end)
    db = sqlite3.connect(tmp)
    db.execute("update TARGET_INFO_SESSION_START_TIME set utcEpochNs = ?", (utc_start,))
    db.execute("update TARGET_INFO_SYSTEM_ENV set value = ? where name = 'Hostname'", (host,))
    db.execute("update CUPTI_ACTIVITY_KIND_KERNEL set deviceId = ?", (device,))
    db.commit()
    db.close()
    os.replace(tmp, out)
    return time.perf_counter() - t0


def _scale(src_xz: Path, work: Path, copies: int) -> tuple[Path, Path]:
    plain = work / src_xz.name.removesuffix(".xz")
    if not plain.exists():
        plain.write_bytes(lzma.decompress(src_xz.read_bytes()))
    scaled = work / f"scaled{copies}_{plain.name}"
    if not scaled.exists():
        subprocess.run([sys.executable, str(SCALE_TOOL), str(plain), str(scaled) + ".part", str(copies)],
                       check=True, stdout=subprocess.DEVNULL)
        os.replace(str(scaled) + ".part", scaled)
    return plain, scaled


def main(argv: list[str] | None = None) -> int:
    """Make the job (see the module)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="/work/bigdata/ranks64", type=Path)
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--kernels", type=int, default=400_000, help="kernels per rank (about)")
    p.add_argument("--source", choices=sorted(SOURCES), default="ddp4")
    p.add_argument("--straggler", type=int, default=None, help="the slow rank (default: 2/3 of the ranks)")
    p.add_argument("--phase", default="optimizer",
                   help="the NVTX phase whose GPU work the straggler stretches")
    p.add_argument("--extra-ms", type=float, default=2.0, help="the straggler's extra GPU time per step")
    p.add_argument("--jitter-us", type=float, default=150.0,
                   help="every rank's random extra per step, at most")
    p.add_argument("--clock-error-us", type=float, default=400.0, help="per-node clock error, at most")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--seed", type=int, default=26)
    p.add_argument("--jobs", type=int, default=2)
    a = p.parse_args(argv)
    sources = SOURCES[a.source]
    straggler = a.straggler if a.straggler is not None else (2 * a.ranks) // 3 + 1
    if not 0 <= straggler < a.ranks:
        sys.exit(f"--straggler {straggler}: the job has ranks 0..{a.ranks - 1}.")
    work = a.out / "_base"
    work.mkdir(parents=True, exist_ok=True)
    for old in a.out.glob("*_rank*.sqlite"):
        old.unlink()
    t0 = time.perf_counter()
    plain0 = work / sources[0].name.removesuffix(".xz")
    if not plain0.exists():
        plain0.write_bytes(lzma.decompress(sources[0].read_bytes()))
    n0 = sqlite3.connect(plain0).execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    copies = max(1, math.ceil(a.kernels / n0))
    bases = [_scale(s, work, copies) for s in sources]
    spans = [source_span(plain) for plain, _ in bases]
    period = max(s for _, s in spans)
    windows = [phase_windows(scaled, a.phase) for _, scaled in bases]
    steps = min(len(w[0]) for w in windows)
    rng = np.random.default_rng(a.seed)
    extra = rng.uniform(0, a.jitter_us * 1e3, size=(a.ranks, steps)).astype(np.int64)
    extra[straggler] += int(a.extra_ms * 1e6)
    slowest = extra.max(axis=0)
    nodes = (a.ranks + a.gpus_per_node - 1) // a.gpus_per_node
    clock_error = rng.uniform(-a.clock_error_us, a.clock_error_us, size=nodes) * 1e3
    clock_error[0] = 0.0  # node 0 is the reference
    offsets = rng.integers(0, 50_000_000, size=a.ranks)  # each rank's clock starts elsewhere (< 50 ms)
    utc0 = [sqlite3.connect(plain).execute("select utcEpochNs from TARGET_INFO_SESSION_START_TIME")
            .fetchone()[0] for plain, _ in bases]
    jobs = []
    for r in range(a.ranks):
        j = r % len(sources)
        lo, hi = (w[:steps] for w in windows[j])
        copy_lo, span = spans[j]
        warp, nccl_end = (warp_table(lo, hi, extra[r], slowest, int(offsets[r]), copy_lo, span, period,
                                     copies, wait_in_nccl) for wait_in_nccl in (False, True))
        utc = int(utc0[j] - offsets[r] + clock_error[r // a.gpus_per_node])
        jobs.append((r, bases[j][1], a.out / f"ranks{a.ranks}_rank{r}.sqlite", warp, nccl_end, utc,
                     f"node{r // a.gpus_per_node:02d}", r % a.gpus_per_node))
    with ProcessPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for (r, *_), sec in zip(jobs, pool.map(make_rank, jobs), strict=True):
            print(f"rank {r}: {sec:.1f} s", flush=True)
    truth = {"ranks": a.ranks, "straggler": straggler, "phase": a.phase, "extra_ms": a.extra_ms,
             "jitter_us": a.jitter_us, "seed": a.seed, "source": [s.name for s in sources],
             "copies": copies, "kernels_per_rank": copies * n0, "steps_per_rank": steps,
             "period_ns": period, "clock_offset_ns": offsets.tolist(),
             "node_clock_error_ns": [int(x) for x in clock_error], "gpus_per_node": a.gpus_per_node,
             "median_others_wait_ns": int(np.median(slowest - np.delete(extra, straggler, axis=0)))}
    (a.out / "truth.json").write_text(json.dumps(truth, indent=1))
    size = sum(f.stat().st_size for f in a.out.glob("*_rank*.sqlite"))
    print(f"{a.ranks} ranks x {copies * n0:,} kernels, {size / 1e9:.2f} GB in {a.out}, straggler rank "
          f"{straggler} (+{a.extra_ms} ms per step in {a.phase}), {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
