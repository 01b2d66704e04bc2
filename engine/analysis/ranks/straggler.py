"""The straggler of a job: the rank the others wait for, what it costs, and where its extra time is.

Every number a sentence here quotes is named for what it is, and the per-rank ones are the rows' own
(:meth:`RankRow.means`): the others' wait per step is their row's exposed wait (mean over their
steady steps); the job's step is the straggler's row's step (mean over its steady steps). The what-if
(how much shorter a step would be without the straggler's extra time) is a median over the steps
where it is slow, and is always labelled as such.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.ranks.load import NCCL_KERNEL
from engine.analysis.ranks.model import Collective, RankRow, StepCosts, Straggler

if TYPE_CHECKING:
    import numpy.typing as npt

I64 = np.int64
#: a straggler is named only when the others wait at least this share of a step for it ...
MIN_WAIT_SHARE = 0.02
#: ... and at least this long per step
MIN_WAIT_NS = 20_000
#: the what-if never exceeds this share of the straggler's step
MAX_COST_SHARE = 0.95


def duration_text(ns: float) -> str:
    """A duration in a sentence: ``19.65 ms``, ``34.7 µs`` (ms with 2 decimals, as the tables)."""
    return f"{ns / 1e6:,.2f} ms" if abs(ns) >= 1e5 else f"{ns / 1e3:,.1f} µs"


_ms = duration_text


def _median(values: list[int]) -> int:
    return int(np.median(values)) if values else 0


def pace_row(rows: list[RankRow], straggler: int | None) -> RankRow | None:
    """The row whose step is the job's step: the straggler's, else the longest step's (lowest rank)."""
    if not rows:
        return None
    if straggler is not None:
        return next(r for r in rows if r.rank == straggler)
    return max(rows, key=lambda r: (r.step_ns, -r.rank))


def step_sentence(row: RankRow) -> str:
    """``rank 3's step, 11.90 ms (mean over its 38 steady steps, as in its row; median 11.76 ms)``."""
    median = f"; median {_ms(row.step_median_ns)}" if row.step_median_ns is not None else ""
    return (f"rank {row.rank}'s step, {_ms(row.step_ns)} (mean over its {len(row.counted_steps)} steady "
            f"steps, as in its row{median})")


class Aligned:
    """The steady steps of the first rank, each with every rank's step that overlaps it most (shared clock).

    ``index[k, j]``: the position in ``rows[j].per_step`` of rank j's step lined up with the k-th;
    only steps every rank has (steady) are kept.
    """

    def __init__(self, rows: list[RankRow]) -> None:
        self.rows = rows
        self.ranks = [r.rank for r in rows]
        ref = StepCosts.of(rows[0].per_step)
        steady = np.flatnonzero(~ref.column("warmup"))
        lo, hi = ref.column("start_ns")[steady], ref.column("end_ns")[steady]
        cols = [steady]
        keep = np.ones(len(steady), dtype=bool)
        for r in rows[1:]:
            j = _best_overlap(StepCosts.of(r.per_step), lo, hi)
            keep &= j >= 0
            cols.append(j)
        self.index = np.stack(cols, axis=1)[keep] if len(rows) else np.zeros((0, 0), dtype=I64)
        self._costs = [StepCosts.of(r.per_step) for r in rows]

    def __len__(self) -> int:
        return len(self.index)

    def values(self, name: str, where: npt.NDArray[np.bool_] | None = None) -> npt.NDArray[np.int64]:
        """A StepCost field of each lined-up step (row) of each rank (column)."""
        idx = self.index if where is None else self.index[where]
        out = np.empty(idx.shape, dtype=I64)
        for j, c in enumerate(self._costs):
            out[:, j] = c.column(name)[idx[:, j]]
        return out

    def step_numbers(self) -> npt.NDArray[np.int64]:
        """The first rank's step index of each lined-up step."""
        return self._costs[0].column("index")[self.index[:, 0]]


def _best_overlap(steps: StepCosts, lo: npt.NDArray[np.int64],
                  hi: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Per window [lo, hi): the step overlapping it most (the first such).

    -1 where none overlaps, or the one that does most is warm-up.
    """
    st, en, warm = steps.column("start_ns"), steps.column("end_ns"), steps.column("warmup")
    out = np.full(len(lo), -1, dtype=I64)
    if not len(st) or not len(lo):
        return out
    a = np.searchsorted(en, lo, side="right")  # steps ending after lo ...
    b = np.searchsorted(st, hi, side="left")  # ... and starting before hi overlap the window
    span = int((b - a).max(initial=0))
    if np.all(np.diff(st) >= 0) and np.all(np.diff(en) >= 0) and span <= 64:
        best = np.zeros(len(lo), dtype=I64)
        for d in range(span):
            j = a + d
            inside = j < b
            jj = np.minimum(j, len(st) - 1)
            ov = np.where(inside, np.minimum(en[jj], hi) - np.maximum(st[jj], lo), 0)
            better = inside & (ov > best)
            best = np.where(better, ov, best)
            out = np.where(better, jj, out)
    else:  # steps out of order, or many in one window: every step, as the rule says
        for k in range(len(lo)):
            ov = np.minimum(en, hi[k]) - np.maximum(st, lo[k])
            best_j = int(np.argmax(ov))
            out[k] = best_j if ov[best_j] > 0 else -1
    ok = out >= 0
    out[ok & warm[np.maximum(out, 0)]] = -1
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


def _slow_per_step(rows: list[RankRow], steps: Aligned, floor: float
                   ) -> tuple[list[tuple[int, int, int]], dict[int, list[int]], npt.NDArray[np.int64],
                              Counter[tuple[int, ...]]]:
    """Per aligned step: (step, the rank the others waited for or -1, the cost), and more.

    Also the costs per slow rank, the slow rank's column per step (-1: nobody) and how often each
    group of slow ranks was slow together. The rank that waited least is the one the others waited
    for (ties: the lowest rank); the ranks that waited less than ``floor`` more than it were as late
    (several ranks can be slow together: one slow host of a job makes its GPUs late as one), and the
    cost is the smallest exposed wait among the ranks that did wait.
    """
    e = steps.values("exposed_wait_ns")
    order = np.argsort(np.array(steps.ranks), kind="stable")  # ties go to the lowest rank
    slow_j = order[np.argmin(e[:, order], axis=1)]
    least = e[np.arange(len(e)), slow_j]
    waited = e >= least[:, None] + floor
    cost = np.where(waited, e, np.iinfo(I64).max).min(axis=1)
    nobody = ~waited.any(axis=1)
    cost = np.where(nobody, least if len(e) else cost, cost)
    slow = np.where(nobody, -1, np.array(steps.ranks, dtype=I64)[slow_j])
    per = list(zip(steps.step_numbers().tolist(), slow.tolist(), cost.tolist(), strict=True))
    cost_by: dict[int, list[int]] = defaultdict(list)
    for r, c in zip(slow.tolist(), cost.tolist(), strict=True):
        if r >= 0:
            cost_by[r].append(c)
    ranks = np.array(steps.ranks, dtype=I64)
    groups = Counter(tuple(sorted(ranks[~w].tolist())) for w in waited[~nobody])
    return per, cost_by, np.where(nobody, -1, slow_j), groups


def find_straggler(rows: list[RankRow], colls: Sequence[Collective],
                   units: dict[int, Any] | None = None) -> tuple[Straggler | None, str | None]:
    """The rank the others wait for, and what it costs as a what-if (see ``Straggler``); or a note.

    Per steady step (lined up across ranks on the shared clock), each rank's exposed wait is the time
    it waited for another rank with nothing else to run. The rank that waited least is the one the
    others waited for in that step, at the cost of the smallest exposed wait among the others; the
    straggler is the rank that cost the most over the steps (steps where another rank was slow show
    whether it moves). What it costs is then its extra time on the critical path: the GPU work only
    it runs (:func:`_extra_work`) or the host time its GPU idles, at least the others' exposed wait
    and at most a step.
    """
    if len(rows) < 2 or not len(colls):
        return None, None
    steps = Aligned(rows)
    if not len(steps):
        return None, "No steps line up across the ranks, so no straggler can be named."
    step_med = _median([r.step_median_ns or 0 for r in rows])  # thresholds only, never printed
    floor = max(MIN_WAIT_NS, MIN_WAIT_SHARE * step_med)
    per, cost_by, slow_j, groups = _slow_per_step(rows, steps, floor)
    pace = pace_row(rows, None)
    against = f", against the job's step: {step_sentence(pace)}" if pace is not None and pace.steps else ""
    if not cost_by:
        worst = max(c for _, _, c in per) if per else 0
        return None, (f"No rank makes the others wait: the largest wait with nothing else to run in a steady "
                      f"step is {_ms(worst)}{against}.")
    s = max(cost_by, key=lambda k: (sum(cost_by[k]), -k))
    cost_mean = int(sum(cost_by[s]) / len(per))  # spread over every steady step
    if cost_mean < floor:  # a rank late in a step or two now and then: jitter, not a straggler
        return None, (f"No rank makes the others wait: rank {s} was late in {len(cost_by[s])} of {len(per)} "
                      f"steady steps, {_ms(cost_mean)} per step over all of them{against}.")
    slow_in = slow_j == steps.ranks.index(s)
    group = max((g for g in groups if s in g), key=lambda g: (groups[g], -len(g)), default=(s,))
    return _verdict(rows, colls, steps, per, s, _median(cost_by[s]), units or {}, slow_in,
                    (group, groups.get(group, 0))), None


def _cause(rows: list[RankRow], s: int, steps: Aligned, slow_in: npt.NDArray[np.bool_],
           units: dict[int, Any], group: tuple[int, ...] = ()) -> tuple[str, int, int, str, int, int]:
    """Where the straggler's extra time is: (cause, its, the others', sentence, what-if, extra host).

    It is compared with the ranks that wait for it (not the ranks of its group, as late as it).
    """
    others = [r.rank for r in rows if r.rank != s and r.rank not in group] or [r.rank for r in rows
                                                                                if r.rank != s]
    col = {rank: j for j, rank in enumerate(steps.ranks)}

    deltas = {}
    for attr, label in (("gpu_compute_ns", "GPU compute"),
                        ("host_ns", "host time (its GPU idle while the host works)")):
        # medians over the steps where it is slow (every lined-up step when it is slow in none)
        v = steps.values(attr, slow_in if slow_in.any() else None)
        med = {rank: int(np.median(v[:, j])) if len(v) else 0 for rank, j in col.items()}
        mine = med[s]
        theirs = _median([med[r] for r in others])
        deltas[label] = (mine - theirs, mine, theirs)
    cause, (delta, mine, theirs) = max(deltas.items(), key=lambda kv: kv[1][0])
    extra_host = deltas["host time (its GPU idle while the host works)"][0]
    extra_gpu, top = _extra_work(units, s, others)
    # what-if: the straggler's extra time on its critical path (extra GPU work it runs, or the host
    # time its GPU idles)
    what_if = extra_gpu if cause == "GPU compute" else max(0, extra_host)
    if cause == "GPU compute" and extra_gpu:
        text = (f"+{_ms(extra_gpu)} of GPU compute per step (most of it: {top} per step that the "
                f"others do not run)")
    elif delta > 0:
        text = f"+{_ms(delta)} of {cause} per step"
    else:  # never "-11.76 ms more": it does no more of either than the others
        text = "no more GPU compute or host time per step than the others"
    return cause, mine, theirs, text, what_if, max(0, extra_host)


#: at most this many other ranks are named one by one in a sentence (more: their median and extremes)
MAX_NAMED = 8


def others_wait_text(others_wait: Sequence[tuple[int, int]]) -> str:
    """The others' exposed waits per step: one by one for a few ranks, else their median and extremes."""
    if len(others_wait) <= MAX_NAMED:
        return ", ".join(f"rank {r}: {_ms(ns)}" for r, ns in others_wait)
    least = min(others_wait, key=lambda x: (x[1], x[0]))
    most = max(others_wait, key=lambda x: (x[1], -x[0]))
    med = _median([ns for _, ns in others_wait])
    return (f"median {_ms(med)} over the {len(others_wait)} others (least: rank {least[0]}, {_ms(least[1])}; "
            f"most: rank {most[0]}, {_ms(most[1])})")


def _group_text(s: int, group: tuple[tuple[int, ...], int], n_steps: int) -> str:
    """``Ranks 3, 5 and 7 are as late as rank 1 in 40 of 40 steady steps: ...`` (empty: it is late alone)."""
    ranks, times = group
    mates = [r for r in ranks if r != s]
    if not mates or not times:
        return ""
    more = len(mates) - MAX_NAMED
    names = ", ".join(map(str, mates[:MAX_NAMED])) + (f" and {more} more" if more > 0 else "")
    many = len(mates) > 1
    return (f"Rank{'s' if many else ''} {names} {'are' if many else 'is'} as late as rank {s} in {times} of "
            f"{n_steps} steady steps: the others wait for all {len(ranks)} of them (ranks slow together: "
            f"often one host or node), so the what-if holds only with all {len(ranks)} fixed, and where "
            f"its extra time is compares rank {s} with the ranks that wait.")


def _verdict(rows: list[RankRow], colls: Sequence[Collective], steps: Aligned,
             per: list[tuple[int, int, int]], s: int, wait_cost: int, units: dict[int, Any],
             slow_in: npt.NDArray[np.bool_], group: tuple[tuple[int, ...], int] = ((), 0)) -> Straggler:
    """The straggler ``s`` with its evidence; every number labelled for what it is."""
    row = next(r for r in rows if r.rank == s)
    others = [r for r in rows if r.rank != s]
    cause, mine, theirs, cause_text, what_if, extra_host = _cause(rows, s, steps, slow_in, units, group[0])
    cap = MAX_COST_SHARE * min(row.step_ns, row.step_median_ns or row.step_ns)
    cost = int(min(max(what_if, wait_cost), cap)) if cap > 0 else max(what_if, wait_cost)
    n_steps = len(per)
    slow_steps = [k for k, r, _ in per if r == s]
    share = len(slow_steps) / n_steps
    moving = Counter(x for _, x, _ in per if x >= 0)
    in_group = len(group[0]) > 1 and group[1] >= 0.8 * n_steps  # late with its group in nearly every step
    if in_group:  # which of the group is the very last moves from step to step: its group is steady
        share = max(share, group[1] / n_steps)
        when = (f"in {len(slow_steps)} of {n_steps} steady steps, as the last of a group of {len(group[0])} "
                f"ranks late together in {group[1]} (steady)")
    elif share >= 0.8:
        when = f"in {len(slow_steps)} of {n_steps} steady steps (steady)"
    else:
        when = (f"in {len(slow_steps)} of {n_steps} steady steps (intermittent: steps "
                f"{', '.join(map(str, slow_steps[:8]))}{' …' if len(slow_steps) > 8 else ''})")
    waiting = [o for o in others if o.rank not in group[0]] or others  # not the ranks as late as it
    others_wait = tuple((o.rank, o.means()["exposed_wait_ns"]) for o in waiting)
    table = others_wait_text(others_wait)
    k = len(slow_steps)
    movers = sorted(moving.items())
    if len(movers) > MAX_NAMED:  # the most often slow ones, then how many more
        top = sorted(sorted(moving.items(), key=lambda x: (-x[1], x[0]))[:MAX_NAMED])
        rest = len(movers) - MAX_NAMED
        moves = ", ".join(f"rank {r} in {n} step{'s' if n != 1 else ''}" for r, n in top) + \
            f" and {rest} more rank{'s' if rest != 1 else ''}"
    else:
        moves = ", ".join(f"rank {r} in {n} step{'s' if n != 1 else ''}" for r, n in movers)
    evidence = [
        f"Rank {s} is the rank the others wait for {when}"
        + ("" if len(moving) < 2 else "; the slow rank moves: " + moves) + ".",
        f"What it costs: in the {k} step{'s' if k != 1 else ''} where it is slow, the others wait "
        f"{_ms(wait_cost)} per step with nothing else to run (median over those steps, the rank that waited "
        f"least), and a step would be about {_ms(cost)} shorter without its extra time (what-if, median over "
        f"those steps). Over all their steady steps the others wait, with nothing else to run, per step "
        f"(mean, the table's 'exposed' column): {table}.",
        f"Where its extra time is: {cause_text} (its {cause}: {_ms(mine)} per step, the others: "
        f"{_ms(theirs)}; medians over the steps where it is slow).",
        f"The job runs at rank {s}'s pace: {step_sentence(row)}; the what-if is "
        f"{cost / max(1, row.step_ns):.0%} of that step.",
    ]
    together = _group_text(s, group, n_steps)
    if together:
        evidence.insert(1, together)
    last = getattr(colls, "last_rank", None)
    last_count = int((last == s).sum()) if isinstance(last, np.ndarray) else sum(1 for c in colls
                                                                                 if c.last_rank == s)
    evidence.append(f"Rank {s} started last in {last_count} of {len(colls)} NCCL collectives.")
    return Straggler(s, row.device, tuple(evidence), cost, last_count / len(colls), extra_host, cost,
                     cause_text, share, tuple(per), slow_wait_ns=wait_cost, others_wait_ns=others_wait)
