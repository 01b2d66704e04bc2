"""The straggler of a job: the rank the others wait for, what it costs, and where its extra time is.

Every number a sentence here quotes is named for what it is, and the per-rank ones are the rows' own
(:meth:`RankRow.means`): the others' wait per step is their row's exposed wait (mean over their
steady steps); the job's step is the straggler's row's step (mean over its steady steps). The what-if
(how much shorter a step would be without the straggler's extra time) is a median over the steps
where it is slow, and is always labelled as such.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np

from engine.analysis.ranks.load import NCCL_KERNEL
from engine.analysis.ranks.model import Collective, RankRow, StepCost, Straggler

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


def aligned_steps(rows: list[RankRow]) -> list[dict[int, StepCost]]:
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


def _slow_per_step(rows: list[RankRow], steps: list[dict[int, StepCost]],
                   floor: float) -> tuple[list[tuple[int, int, int]], dict[int, list[int]]]:
    """Per aligned step: (step, the rank the others waited for or -1, the cost); costs per slow rank.

    The rank that waited least is the one the others waited for, at the cost of the smallest exposed
    wait among the others.
    """
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
    return per, cost_by


def find_straggler(rows: list[RankRow], colls: list[Collective],
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
    if len(rows) < 2 or not colls:
        return None, None
    steps = aligned_steps(rows)
    if not steps:
        return None, "No steps line up across the ranks, so no straggler can be named."
    step_med = _median([r.step_median_ns or 0 for r in rows])  # thresholds only, never printed
    floor = max(MIN_WAIT_NS, MIN_WAIT_SHARE * step_med)
    per, cost_by = _slow_per_step(rows, steps, floor)
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
    return _verdict(rows, colls, steps, per, s, _median(cost_by[s]), units or {}), None


def _cause(rows: list[RankRow], s: int, steps: list[dict[int, StepCost]], slow_in: list[dict[int, StepCost]],
           units: dict[int, Any]) -> tuple[str, int, int, str, int, int]:
    """Where the straggler's extra time is: (cause, its, the others', sentence, what-if, extra host)."""
    others = [r.rank for r in rows if r.rank != s]

    def med(rank: int, attr: str) -> int:  # the median over the steps where it is slow
        return _median([getattr(g[rank], attr) for g in slow_in] or [getattr(g[rank], attr) for g in steps])

    deltas = {}
    for attr, label in (("gpu_compute_ns", "GPU compute"),
                        ("host_ns", "host time (its GPU idle while the host works)")):
        mine = med(s, attr)
        theirs = _median([med(r, attr) for r in others])
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


def _verdict(rows: list[RankRow], colls: list[Collective], steps: list[dict[int, StepCost]],
             per: list[tuple[int, int, int]], s: int, wait_cost: int, units: dict[int, Any]) -> Straggler:
    """The straggler ``s`` with its evidence; every number labelled for what it is."""
    row = next(r for r in rows if r.rank == s)
    others = [r for r in rows if r.rank != s]
    slow_in = [g for g, p in zip(steps, per, strict=True) if p[1] == s]
    cause, mine, theirs, cause_text, what_if, extra_host = _cause(rows, s, steps, slow_in, units)
    cap = MAX_COST_SHARE * min(row.step_ns, row.step_median_ns or row.step_ns)
    cost = int(min(max(what_if, wait_cost), cap)) if cap > 0 else max(what_if, wait_cost)
    n_steps = len(per)
    slow_steps = [k for k, r, _ in per if r == s]
    share = len(slow_steps) / n_steps
    moving = Counter(x for _, x, _ in per if x >= 0)
    if share >= 0.8:
        when = f"in {len(slow_steps)} of {n_steps} steady steps (steady)"
    else:
        when = (f"in {len(slow_steps)} of {n_steps} steady steps (intermittent: steps "
                f"{', '.join(map(str, slow_steps[:8]))}{' …' if len(slow_steps) > 8 else ''})")
    others_wait = tuple((o.rank, o.means()["exposed_wait_ns"]) for o in others)
    table = ", ".join(f"rank {r}: {_ms(ns)}" for r, ns in others_wait)
    k = len(slow_steps)
    evidence = [
        f"Rank {s} is the rank the others wait for {when}"
        + ("" if len(moving) < 2 else "; the slow rank moves: " + ", ".join(
            f"rank {r} in {n} step{'s' if n != 1 else ''}" for r, n in sorted(moving.items()))) + ".",
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
    last_count = sum(1 for c in colls if c.last_rank == s)
    evidence.append(f"Rank {s} started last in {last_count} of {len(colls)} NCCL collectives.")
    return Straggler(s, row.device, tuple(evidence), cost, last_count / len(colls), extra_host, cost,
                     cause_text, share, tuple(per), slow_wait_ns=wait_cost, others_wait_ns=others_wait)
