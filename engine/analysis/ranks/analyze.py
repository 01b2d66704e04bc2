"""Line the ranks of a job up: steps per rank, NCCL collectives across ranks, the straggler.

    result = analyze_ranks([open_report(p) for p in paths])     # or analyze_paths(paths)
    result.straggler.rank, result.straggler.wait_per_step_ns

How it works:

* every rank's times move to one clock: the report's UTC zero (nsys's session start, Kineto's base
  time) plus its own times, minus the earliest event of the job;
* the steps are each rank's step range (engine.analysis.steps); inside a step every instant is NCCL
  (an ``ncclDevKernel_*`` runs), else compute (other GPU work), else idle; idle time while the
  rank's launching thread is outside CUDA calls is host time;
* the k-th NCCL kernel of one operation on each rank is one collective; an NCCL kernel cannot finish
  before every rank joined, so the time between a rank's kernel start and the last rank's start is
  that rank's wait, and the last rank is the one it waited for;
* a rank's wait in a step is the union of its waits inside the step (so never longer than the step);
  its exposed wait is the part of that with no other GPU work;
* the straggler is the rank the others waited for longest (engine.analysis.ranks.straggler).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.analysis.ranks.load import (
    NCCL_KERNEL,
    RankInput,
    align_step_ranges,
    number_ranks,
    ranks_of,
    report_utc_offset_ns,
)
from engine.analysis.ranks.model import (
    ClockInfo,
    Collective,
    RankLanes,
    RankRow,
    RanksResult,
    StepCost,
)
from engine.analysis.ranks.straggler import duration_text as _ms
from engine.analysis.ranks.straggler import find_straggler, pace_row
from engine.analysis.steps import merged
from engine.system.errors import ReportError

if TYPE_CHECKING:
    import numpy.typing as npt

    from engine.reports.base import Trace

I64 = np.int64
#: collectives no rank can finish before every rank joined (their ends line up across ranks)
SYMMETRIC = frozenset({"AllReduce", "AllGather", "ReduceScatter", "AllToAll"})
#: NCCL calls that run as SendRecv kernels (grouped: many calls, one kernel)
P2P = frozenset({"AllToAll", "AllToAllv", "Send", "Recv", "Gather", "Scatter", "SendRecv"})


class _Blocks:
    """Sorted disjoint intervals with prefix sums: covered length inside any window in O(log n)."""

    def __init__(self, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]) -> None:
        self.s, self.e = merged(np.asarray(starts, dtype=I64), np.asarray(ends, dtype=I64))
        self.cum = np.concatenate([[0], np.cumsum(self.e - self.s)]).astype(I64)

    def covered(self, lo: npt.NDArray[np.int64], hi: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Covered length inside each window [lo[k], hi[k]) (vectorised)."""
        lo, hi = np.asarray(lo, dtype=I64), np.asarray(hi, dtype=I64)
        out = np.zeros(len(lo), dtype=I64)
        if not len(self.s) or not len(lo):
            return out
        i = np.searchsorted(self.e, lo, side="right")  # first block ending after lo
        j = np.searchsorted(self.s, hi, side="left")  # blocks starting before hi
        ok = (j > i) & (hi > lo)
        i, j, lo_ok, hi_ok = i[ok], j[ok], lo[ok], hi[ok]
        total = self.cum[j] - self.cum[i]
        total -= np.maximum(0, lo_ok - self.s[i])
        total -= np.maximum(0, self.e[j - 1] - hi_ok)
        out[ok] = total
        return out


def _cat(*pairs: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]) -> _Blocks:
    return _Blocks(np.concatenate([p[0] for p in pairs]), np.concatenate([p[1] for p in pairs]))


def _op(name: str) -> str:
    m = NCCL_KERNEL.match(name)
    return m.group(1) if m else name


#: per rank: (launch, wait, kernel start on the rank's own clock) of each of its NCCL kernels
_Waits = dict[int, list[tuple[int, int, int]]]


def _collectives(inputs: list[RankInput], zero: int) -> tuple[list[Collective], _Waits, int | None, int]:
    """Match NCCL kernels across ranks; (collectives, per rank waits, end spread, clipped)."""
    per_rank = {r.rank: _keyed(r) for r in inputs}
    all_keys: dict[tuple[str, int], int] = defaultdict(int)
    for keys in per_rank.values():
        for key in keys:
            all_keys[key] += 1
    waits: _Waits = {r.rank: [] for r in inputs}
    rows = []
    spreads = []
    clipped = 0
    for key, n in all_keys.items():
        if n < 2:
            continue
        members = [(r, per_rank[r.rank][key]) for r in inputs if key in per_rank[r.rank]]
        starts = {r.rank: int(r.nccl_start[i]) + r.offset_ns - zero for r, i in members}
        ends = {r.rank: int(r.nccl_end[i]) + r.offset_ns - zero for r, i in members}
        last = max(starts, key=lambda k: (starts[k], k))
        latest = starts[last]
        w: dict[str, int] = {}
        for r, i in members:
            own = starts[r.rank]
            wait = latest - own
            dur = ends[r.rank] - own
            if wait > dur:
                clipped += key[0] in SYMMETRIC  # a broadcast root may finish before the others start
                wait = dur
            w[str(r.rank)] = max(0, wait)
            waits[r.rank].append((int(r.nccl_launch[i]), w[str(r.rank)], int(r.nccl_start[i])))
        if key[0] in SYMMETRIC:  # every rank must join before any can finish: ends line up
            spreads.append(max(ends.values()) - min(ends.values()))
        first_r, first_i = members[0]
        rows.append((min(starts.values()), key[0], first_r.nccl_name[first_i], first_r.nccl_bytes[first_i],
                     max(ends.values()), latest - min(starts.values()), last, w))
    rows.sort(key=lambda x: (x[0], x[1]))
    out = [Collective(i, op, name, nbytes, start, end, skew, last, w)
           for i, (start, op, name, nbytes, end, skew, last, w) in enumerate(rows)]
    return out, waits, (int(np.median(spreads)) if spreads else None), clipped


def _keyed(r: RankInput) -> dict[tuple[str, int], int]:
    """A rank's NCCL kernels by (operation, k): its k-th kernel of that operation in start order."""
    seen: dict[str, int] = defaultdict(int)
    keys: dict[tuple[str, int], int] = {}
    for i in np.argsort(r.nccl_start, kind="stable").tolist():
        op = _op(r.nccl_name[i])
        keys[(op, seen[op])] = int(i)
        seen[op] += 1
    return keys


def _step_costs(r: RankInput, waits: list[tuple[int, int, int]], shift: int) -> list[StepCost]:
    """Per step of one rank: the NCCL / compute / idle partition, waits and host time."""
    comp = (r.compute_start, r.compute_end)
    nccl = (r.nccl_start, r.nccl_end)
    n_b, g_b = _Blocks(*nccl), _cat(comp, nccl)
    c_b = _Blocks(*comp)
    ag_b = _cat(comp, nccl, (r.api_start, r.api_end))
    if r.steps is not None and r.steps.count:
        windows = [(s.index, s.start_ns, s.end_ns, s.warmup) for s in r.steps.steps]
    else:
        every = np.concatenate([r.compute_start, r.nccl_start])
        ends = np.concatenate([r.compute_end, r.nccl_end])
        windows = [(0, int(every.min()), int(ends.max()), False)] if len(every) else []
    lo = np.array([w[1] for w in windows], dtype=I64)
    hi = np.array([w[2] for w in windows], dtype=I64)
    span = hi - lo
    busy = g_b.covered(lo, hi)
    nccl_ns = n_b.covered(lo, hi)
    overlap = nccl_ns + c_b.covered(lo, hi) - busy
    host = span - ag_b.covered(lo, hi)
    compute_all = c_b.covered(lo, hi)
    # each wait as an interval on the rank's own clock (from its kernel's start), their union minus
    # the rank's compute: the time it waited with nothing else to run
    ws = np.array([s for _, w, s in waits if w > 0], dtype=I64)
    we = ws + np.array([w for _, w, _s in waits if w > 0], dtype=I64)
    exposed = _cat(comp, (ws, we)).covered(lo, hi) - compute_all
    # the step's wait: the union of the waits inside its window (collectives that wait at the same
    # time count once), so it is within the step's NCCL time and the step
    wait = _Blocks(ws, we).covered(lo, hi)
    return [StepCost(index, int(a) + shift, int(b) + shift, int(bu - nc), int(nc), int(wt), int(sp - bu),
                     int(ho), int(ov), warm, int(ca), int(ex))
            for (index, _, _, warm), a, b, bu, nc, wt, sp, ho, ov, ca, ex
            in zip(windows, lo, hi, busy, nccl_ns, wait, span, host, overlap, compute_all, exposed,
                   strict=True)]


def _row(r: RankInput, costs: list[StepCost]) -> RankRow:
    steady = [c for c in costs if not c.warmup] or costs
    has_steps = r.steps is not None and r.steps.count > 0
    return RankRow(
        rank=r.rank, report=r.report, pid=r.pid, device=r.device, host=r.host,
        steps=r.steps.count if r.steps is not None else 0,
        step_range=r.steps.range_name if r.steps is not None else None,
        step_median_ns=int(np.median([c.duration_ns for c in steady])) if has_steps and steady else None,
        compute_ns=sum(c.compute_ns for c in steady), nccl_ns=sum(c.nccl_ns for c in steady),
        nccl_wait_ns=sum(c.nccl_wait_ns for c in steady), idle_ns=sum(c.idle_ns for c in steady),
        host_ns=sum(c.host_ns for c in steady), nccl_kernels=len(r.nccl_start), per_step=tuple(costs),
        exposed_wait_ns=sum(c.exposed_wait_ns for c in steady),
    )


#: clocks are moved onto the first rank's when the ends of shared collectives disagree by more than this
#: (median): one host's ranks agree within ~15 µs
CLOCK_FIT_NS = 50_000


def _fit_clocks(inputs: list[RankInput]) -> list[str]:
    """Line every rank's clock up with the first rank's on the ends of the collectives they share.

    An all-reduce (all-gather, reduce-scatter, all-to-all) ends on every rank within microseconds,
    so the difference of its end times is the clocks' disagreement. Per rank, an offset and a drift
    (a straight line over time, refitted once without the points 3 MADs off) are fitted when the
    ends disagree by more than CLOCK_FIT_NS (median), and the rank's times are moved. Returns one
    sentence per rank moved.
    """
    def ends(r: RankInput) -> dict[tuple[str, int], int]:
        return {k: int(r.nccl_end[i]) + r.offset_ns for k, i in _keyed(r).items() if k[0] in SYMMETRIC}

    if len(inputs) < 2:
        return []
    ref = ends(inputs[0])
    notes = []
    for r in inputs[1:]:
        mine = ends(r)
        keys = [k for k in mine if k in ref]
        if len(keys) < 3:
            continue
        x = np.array([mine[k] for k in keys], dtype=np.float64)
        y = np.array([ref[k] for k in keys], dtype=np.float64) - x
        x0 = float(x[0])
        b, a = np.polyfit(x - x0, y, 1) if len(keys) >= 5 else (0.0, float(np.median(y)))
        res = y - (a + b * (x - x0))
        mad = float(np.median(np.abs(res - np.median(res)))) or 1.0
        ok = np.abs(res) <= 3 * 1.4826 * mad + 1000
        if ok.sum() >= 5:
            b, a = np.polyfit((x - x0)[ok], y[ok], 1)
        if float(np.median(np.abs(y))) <= CLOCK_FIT_NS:
            continue  # the clocks agree (to what an all-reduce's end varies): moving them adds noise
        a_i, b_f, off = int(round(a)), float(b), r.offset_ns

        def move(t: npt.NDArray[np.int64], a_i: int = a_i, b_f: float = b_f, off: int = off,
                 x0: float = x0) -> npt.NDArray[np.int64]:
            t = np.asarray(t, dtype=np.int64)
            return t + a_i + np.round(b_f * (t + off - x0)).astype(np.int64)

        for name in ("compute_start", "compute_end", "nccl_start", "nccl_end", "nccl_launch", "api_start",
                     "api_end"):
            setattr(r, name, move(getattr(r, name)))
        if r.steps is not None:
            from engine.analysis.stepfind import shifted_steps

            r.steps = shifted_steps(r.steps, move)
        after = np.abs(res[ok] - np.median(res[ok])) if ok.any() else np.abs(res)
        notes.append(f"rank {r.rank}'s clock moved by {a / 1e6:+,.3f} ms and {b * 1e6:+,.1f} µs/s "
                     f"to line up the ends of {len(keys)} collectives with rank {inputs[0].rank}'s; "
                     f"they then agree within {_ms(float(np.median(after)))} (median)")
    return notes


def _clock(inputs: list[RankInput], methods: set[str], zero: int, spread: int | None,
           clipped: int) -> ClockInfo:
    hosts = tuple(sorted({r.host for r in inputs if r.host}))
    method = next(iter(methods)) if len(methods) == 1 else ("mixed: " + ", ".join(sorted(methods)))
    reports = len({r.report for r in inputs})
    where = f"{len(hosts)} host{'s' if len(hosts) != 1 else ''}" if hosts else "unknown hosts"
    if reports == 1:
        text = f"All ranks come from one report, so they share its clock ({where})."
    else:
        text = f"{reports} reports on {where} placed on one clock by their {method}."
    if spread is not None:
        text += (f" A collective ends within {_ms(spread)} across ranks (median), which bounds how "
                 "far the clocks disagree.")
    if clipped:
        text += (f" {clipped} NCCL kernel(s) ended before the last rank started the same collective: "
                 "the clocks disagree by more than those kernels last.")
    return ClockInfo(method, hosts, zero if "none" not in methods else None, spread, text)


def analyze_ranks(traces: Sequence[Trace], *, range_name: str | None = None) -> RanksResult:
    """The rank analysis of one job.

    Args:
        traces: Per-rank reports, or one (or more) reports holding several processes.
        range_name: The step range to use on every rank (default: chosen by structure, the one most
            ranks agree on).

    Raises:
        ReportError: no report has GPU work.
    """
    inputs: list[RankInput] = []
    methods: set[str] = set()
    for t in traces:
        got = ranks_of(t, range_name=range_name)
        inputs += got
        if got:
            methods.add(report_utc_offset_ns(t)[1])
    if not inputs:
        names = ", ".join(Path(str(t.info.path)).name for t in traces)
        raise ReportError(f"No GPU work was found in {names}; record the job with CUDA tracing "
                          "(nsys --trace=cuda or torch.profiler with CUDA activities).")
    notes = number_ranks(inputs)
    if range_name is None:
        align_step_ranges(list(traces), inputs)
    fitted = _fit_clocks(inputs)
    # one time origin with the other views: the capture start (a report's own times count from its
    # capture's start), the earliest of the ranks' on the job's clock
    zero = min(r.offset_ns for r in inputs)
    colls, waits, spread, clipped = _collectives(inputs, zero)
    rows = [_row(r, _step_costs(r, waits[r.rank], r.offset_ns - zero)) for r in inputs]
    missing = [r.rank for r in rows if not r.steps]
    if missing:
        notes.append(f"No repeating step range on rank(s) {', '.join(map(str, missing))}: their numbers "
                     "cover the whole capture as one step.")
    call_note, details = _call_notes(inputs)
    notes += call_note
    if not colls:
        notes.append("No NCCL kernels (ncclDevKernel_*) matched across ranks, so there are no waits to "
                     "measure; trace CUDA on every rank.")
    strag, why = find_straggler(rows, colls, {r.rank: r.unit for r in inputs})
    if why:
        notes.append(why)
    clock = _clock(inputs, methods, zero, spread, clipped)
    if fitted:
        from dataclasses import replace

        clock = replace(clock, sentence=clock.sentence + " Clocks lined up on collective ends: "
                        + "; ".join(fitted) + ".")
    pace = pace_row(rows, strag.rank if strag is not None else None)
    return RanksResult(tuple(rows), tuple(colls), strag, clock,
                       tuple(notes), tuple(_lanes(r, r.offset_ns - zero) for r in inputs),
                       pace_rank=pace.rank if pace is not None else None, details=tuple(details))


def _call_notes(inputs: list[RankInput]) -> tuple[list[str], list[str]]:
    """Where the NCCL NVTX ranges and the NCCL kernels disagree: (one summary sentence, the details).

    Point-to-point calls (AllToAll, Send, Recv, ...) run as SendRecv kernels, several grouped calls as
    one: they disagree only when calls were made and no such kernel ran.
    """
    details = []
    for r in inputs:
        if not r.calls:
            continue
        kernels: Counter[str] = Counter("SendRecv" if _op(n) in P2P else _op(n) for n in r.nccl_name)
        calls: Counter[str] = Counter()
        for op, n in r.calls.items():
            calls["SendRecv" if op in P2P else op] += n
        for op, n in sorted(calls.items()):
            got = kernels.get(op, 0)
            if (op == "SendRecv" and got == 0) or (op != "SendRecv" and n != got):
                what = "point-to-point (AllToAll, Send, Recv, ...)" if op == "SendRecv" else op
                details.append(f"Rank {r.rank}: {n} {what} call(s) but {got} kernel(s)")
    if not details:
        return [], []
    ranks = sorted({d.split(":", 1)[0] for d in details}, key=lambda x: int(x.split()[1]))
    more = f"; {len(details) - 1} more in the details" if len(details) > 1 else ""
    return [f"The NCCL NVTX ranges and the NCCL kernels disagree on {len(details)} operation(s) over "
            f"{len(ranks)} rank(s) (e.g. {details[0][0].lower()}{details[0][1:]}{more}): calls grouped "
            "into one kernel, or kernels the capture lost."], details


def _lanes(r: RankInput, shift: int) -> RankLanes:
    cs, ce = merged(r.compute_start, r.compute_end)
    ns, ne = merged(r.nccl_start, r.nccl_end)
    return RankLanes(r.rank, cs + shift, ce + shift, ns + shift, ne + shift)


def analyze_paths(paths: Sequence[str | Path], *, range_name: str | None = None) -> RanksResult:
    """Open every report (by content), analyse them as one job, close them."""
    from engine.reports.open import open_report

    traces: list[Trace] = []
    try:
        for p in paths:
            traces.append(open_report(p))
        return analyze_ranks(traces, range_name=range_name)
    finally:
        for t in traces:
            t.close()
