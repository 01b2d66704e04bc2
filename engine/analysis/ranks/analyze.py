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
* the straggler is the rank the others waited for longest; its cost per step is the others' median
  NCCL wait per step.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    Straggler,
)
from engine.analysis.steps import merged
from engine.system.errors import ReportError

if TYPE_CHECKING:
    import numpy.typing as npt

    from engine.reports.base import Trace

I64 = np.int64
#: collectives no rank can finish before every rank joined (their ends line up across ranks)
SYMMETRIC = frozenset({"AllReduce", "AllGather", "ReduceScatter", "AllToAll"})
#: a straggler is named only when the others wait at least this share of a step for it ...
MIN_WAIT_SHARE = 0.02
#: ... and at least this long per step
MIN_WAIT_NS = 20_000


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
    # NCCL waits belong to the step whose window holds the kernel's launch (windows may overlap: each
    # window sums the waits launched inside it)
    order = np.argsort(np.array([a for a, _, _s in waits], dtype=I64), kind="stable")
    w_launch = np.array([a for a, _, _s in waits], dtype=I64)[order]
    w_each = np.array([b for _, b, _s in waits], dtype=I64)[order]
    w_cum = np.concatenate([[0], np.cumsum(w_each)]).astype(I64)
    wait = w_cum[np.searchsorted(w_launch, hi, side="left")] - \
        w_cum[np.searchsorted(w_launch, lo, side="left")]
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
    )


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f} ms" if abs(ns) >= 1e5 else f"{ns / 1e3:,.1f} µs"


def _median(values: list[int]) -> int:
    return int(np.median(values)) if values else 0


def _aligned_steps(rows: list[RankRow]) -> list[dict[int, StepCost]]:
    """The steady steps of the first rank with every rank's step that overlaps it most (shared clock)."""
    ref = rows[0]
    out = []
    others = {r.rank: (np.array([c.start_ns for c in r.per_step], dtype=I64),
                       np.array([c.end_ns for c in r.per_step], dtype=I64), r.per_step) for r in rows[1:]}
    for c in ref.per_step:
        if c.warmup:
            continue
        got = {ref.rank: c}
        for k, (st, en, per) in others.items():
            if not len(st):
                continue
            ov = np.minimum(en, c.end_ns) - np.maximum(st, c.start_ns)
            j = int(np.argmax(ov))
            if ov[j] > 0 and not per[j].warmup:
                got[k] = per[j]
        if len(got) == len(rows):
            out.append(got)
    return out


def _lcs_unmatched(a: list[str], b: list[str]) -> list[int]:
    """Positions of ``a`` that a diff against ``b`` leaves unmatched (what ``a`` runs more).

    difflib's matching blocks (a longest-matching-block diff, close to a longest common subsequence
    for two runs of the same program, and fast on sequences that mostly agree: a 5,000-operation
    step in milliseconds); steps of more than 50,000 operations are not compared.
    """
    import difflib

    if len(a) > 50_000 or len(b) > 50_000:
        return []
    matched = [False] * len(a)
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for blk in sm.get_matching_blocks():
        for k in range(blk.a, blk.a + blk.size):
            matched[k] = True
    return [k for k, ok in enumerate(matched) if not ok]


def _extra_work(units: dict[int, Any], s: int, others: list[int]) -> tuple[int, str]:
    """GPU work per step the straggler runs beyond the others: a diff of one typical step.

    The straggler's typical step (its operations in order, NCCL kernels left out) is diffed against
    each other rank's (:func:`_lcs_unmatched`); the operations only the straggler runs are its extra
    work, at their own median durations. The smallest extra over the other ranks is kept.
    """
    from collections import Counter

    mine = units.get(s)
    if not mine:
        return 0, ""
    names = list(mine[0])
    keep = [i for i, n in enumerate(names) if not NCCL_KERNEL.match(n)]
    a = [names[i] for i in keep]
    best: tuple[int, str] | None = None
    for o in others:
        theirs = units.get(o)
        if not theirs:
            continue
        b = [n for n in theirs[0] if not NCCL_KERNEL.match(n)]
        extra = _lcs_unmatched(a, b)
        ns = int(sum(float(mine[1][keep[i]]) for i in extra))
        top = Counter(a[i] for i in extra).most_common(1)
        text = f"{top[0][1]} × {top[0][0][:60]}" if top else ""
        if best is None or ns < best[0]:
            best = (ns, text)
    return best if best is not None else (0, "")


def _straggler(rows: list[RankRow], colls: list[Collective],
               units: dict[int, Any] | None = None) -> tuple[Straggler | None, str | None]:
    """The rank the others wait for, and what it costs as a what-if (see ``Straggler``).

    Per steady step (lined up across ranks on the shared clock), each rank's exposed wait is the time
    it waited for another rank with nothing else to run. The rank that waited least is the one the
    others waited for in that step, at the cost of the smallest exposed wait among the others; the
    straggler is the rank that cost the most over the steps (steps where another rank was slow show
    whether it moves). What it costs is then its extra time on the critical path: the GPU work only
    it runs (:func:`_extra_work`) or the host time its GPU idles, at least the others' exposed wait
    and at most a step.
    """
    if len(rows) < 2 or not colls:
        return None, None
    steps = _aligned_steps(rows)
    if not steps:
        return None, "No steps line up across the ranks, so no straggler can be named."
    step_med = _median([r.step_median_ns or 0 for r in rows])
    floor = max(MIN_WAIT_NS, MIN_WAIT_SHARE * step_med)
    per: list[tuple[int, int, int]] = []
    cost_by: dict[int, list[int]] = defaultdict(list)
    for got in steps:
        e = {k: c.exposed_wait_ns for k, c in got.items()}
        slow = min(e, key=lambda k: (e[k], k))
        cost = min(v for k, v in e.items() if k != slow)
        if cost < floor:
            per.append((got[rows[0].rank].index, -1, int(cost)))
            continue
        per.append((got[rows[0].rank].index, slow, int(cost)))
        cost_by[slow].append(int(cost))
    if not cost_by:
        worst = max(c for _, _, c in per) if per else 0
        return None, (f"No rank makes the others wait: the largest wait with nothing else to run is "
                      f"{_ms(worst)}"
                      + (f" in a {_ms(step_med)} step (GPU)." if step_med else "."))
    s = max(cost_by, key=lambda k: (sum(cost_by[k]), -k))
    n_steps = len(per)
    share = len(cost_by[s]) / n_steps
    cost_slow = _median(cost_by[s])  # in the steps where it is slow
    cost_mean = int(sum(cost_by[s]) / n_steps)  # spread over every steady step
    if cost_mean < floor:  # a rank late in a step or two now and then: jitter, not a straggler
        return None, (f"No rank makes the others wait: rank {s} was late in {len(cost_by[s])} of {n_steps} "
                      f"steady steps, {_ms(cost_mean)} per step over all of them"
                      + (f" in a {_ms(step_med)} step (GPU)." if step_med else "."))
    row = next(r for r in rows if r.rank == s)
    others = [r for r in rows if r.rank != s]

    slow_in = [g for g, p in zip(steps, per, strict=True) if p[1] == s]

    def med(rank: int, attr: str) -> int:  # the median over the steps where it is slow
        return _median([getattr(g[rank], attr) for g in slow_in] or [getattr(g[rank], attr) for g in steps])

    deltas = {}
    for attr, label in (("gpu_compute_ns", "GPU compute"),
                        ("host_ns", "host time (its GPU idle while the host works)")):
        mine = med(s, attr)
        theirs = _median([med(r.rank, attr) for r in others])
        deltas[label] = (mine - theirs, mine, theirs)
    cause, (delta, mine, theirs) = max(deltas.items(), key=lambda kv: kv[1][0])
    extra_host = deltas["host time (its GPU idle while the host works)"][0]
    extra_gpu, top = _extra_work(units or {}, s, [r.rank for r in others])
    # what-if: the straggler's extra time on its critical path (extra GPU work it runs, or the host
    # time its GPU idles), at least what the others wait with nothing else to run, at most a step
    what_if = extra_gpu if cause == "GPU compute" else max(0, extra_host)
    wait_cost = cost_slow
    cost_slow = int(min(max(what_if, cost_slow), 0.95 * step_med)) if step_med else max(what_if, cost_slow)
    if cause == "GPU compute" and extra_gpu:
        cause_text = (f"+{_ms(extra_gpu)} of GPU compute per step (most of it: {top} per step that the "
                      f"others do not run)")
    else:
        cause_text = f"{'+' if delta >= 0 else ''}{_ms(delta)} of {cause} per step"
    slow_steps = [k for k, r, _ in per if r == s]
    moving = {r: sum(1 for _, x, _ in per if x == r) for r in {x for _, x, _ in per if x >= 0}}
    if share >= 0.8:
        when = f"in {len(slow_steps)} of {n_steps} steady steps (steady)"
    else:
        when = (f"in {len(slow_steps)} of {n_steps} steady steps (intermittent: steps "
                f"{', '.join(map(str, slow_steps[:8]))}{' …' if len(slow_steps) > 8 else ''})")
    evidence = [
        f"Rank {s} is the rank the others wait for {when}"
        + ("" if len(moving) < 2 else "; the slow rank moves: " + ", ".join(
            f"rank {r} in {n} step{'s' if n != 1 else ''}" for r, n in sorted(moving.items()))) + ".",
        f"What it costs: the step would be about {_ms(cost_slow)} shorter in those steps without its extra "
        f"time; the others wait {_ms(wait_cost)} with nothing else to run ("
        + ", ".join(f"rank {r.rank}: {_ms(med(r.rank, 'exposed_wait_ns'))}" for r in others)
        + f"; {_ms(cost_mean)} per step over all steady steps), and their own work is slowed while "
          "their NCCL kernels wait.",
        f"Where its extra time is: {cause_text} (its {cause}: {_ms(mine)} per step, the others: "
        f"{_ms(theirs)}).",
    ]
    if step_med:
        evidence.append(f"Steps take {_ms(step_med)} on the GPU (median of the ranks): the job runs at rank "
                        f"{s}'s pace; the wait is {cost_slow / step_med:.0%} of a step.")
    last_count = sum(1 for c in colls if c.last_rank == s)
    evidence.append(f"Rank {s} started last in {last_count} of {len(colls)} NCCL collectives.")
    return Straggler(s, row.device, tuple(evidence), cost_slow, last_count / len(colls), extra_host,
                     cost_slow, cause_text, share,
                     tuple(per)), None


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
    firsts = []
    for r in inputs:
        cand = [a.min() for a in (r.compute_start, r.nccl_start, r.api_start) if len(a)]
        if r.steps is not None and r.steps.count:
            cand.append(r.steps.steps[0].start_ns)
        firsts.append(int(min(cand)) + r.offset_ns)
    zero = min(firsts)
    colls, waits, spread, clipped = _collectives(inputs, zero)
    rows = [_row(r, _step_costs(r, waits[r.rank], r.offset_ns - zero)) for r in inputs]
    missing = [r.rank for r in rows if not r.steps]
    if missing:
        notes.append(f"No repeating step range on rank(s) {', '.join(map(str, missing))}: their numbers "
                     "cover the whole capture as one step.")
    for r in inputs:
        kernels: dict[str, int] = defaultdict(int)
        for n in r.nccl_name:
            kernels[_op(n)] += 1
        off = [f"{n} {op} call(s) but {kernels.get(op, 0)} kernel(s)" for op, n in sorted(r.calls.items())
               if n != kernels.get(op, 0)]
        if r.calls and off:
            notes.append(f"Rank {r.rank}: the NCCL NVTX ranges and the NCCL kernels disagree "
                         f"({'; '.join(off)}).")
    if not colls:
        notes.append("No NCCL kernels (ncclDevKernel_*) matched across ranks, so there are no waits to "
                     "measure; trace CUDA on every rank.")
    strag, why = _straggler(rows, colls, {r.rank: r.unit for r in inputs})
    if why:
        notes.append(why)
    clock = _clock(inputs, methods, zero, spread, clipped)
    if fitted:
        from dataclasses import replace

        clock = replace(clock, sentence=clock.sentence + " Clocks lined up on collective ends: "
                        + "; ".join(fitted) + ".")
    return RanksResult(tuple(rows), tuple(colls), strag, clock,
                       tuple(notes), tuple(_lanes(r, r.offset_ns - zero) for r in inputs))


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
