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

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.analysis.ranks.costs import local_costs, step_costs
from engine.analysis.ranks.load import (
    NCCL_KERNEL,
    RankInput,
    align_step_ranges,
    number_ranks,
    ranks_of,
)
from engine.analysis.ranks.model import (
    ClockInfo,
    CollectiveTable,
    RankLanes,
    RankRow,
    RanksResult,
    StepCosts,
)
from engine.analysis.ranks.straggler import duration_text as _ms
from engine.analysis.ranks.straggler import find_straggler, pace_row
from engine.analysis.steps import merged
from engine.system.arrays import distinct
from engine.system.errors import ReportError

if TYPE_CHECKING:
    import numpy.typing as npt

    from engine.reports.base import Trace

I64 = np.int64
#: collectives no rank can finish before every rank joined (their ends line up across ranks)
SYMMETRIC = frozenset({"AllReduce", "AllGather", "ReduceScatter", "AllToAll"})
#: NCCL calls that run as SendRecv kernels (grouped: many calls, one kernel)
P2P = frozenset({"AllToAll", "AllToAllv", "Send", "Recv", "Gather", "Scatter", "SendRecv"})
#: a collective's key: its operation's code times this, plus k (its k-th kernel of that operation)
_KEY = 1 << 32


def _op(name: str) -> str:
    m = NCCL_KERNEL.match(name)
    return m.group(1) if m else name


class _Ops:
    """The NCCL operations of a job, numbered in order of first sight (kernel names looked up once each)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._code: dict[str, int] = {}
        self._of_kernel: dict[str, int] = {}

    def codes(self, kernel_names: list[str]) -> npt.NDArray[np.int64]:
        """Each kernel's operation code."""
        out = np.empty(len(kernel_names), dtype=I64)
        for i, n in enumerate(kernel_names):
            c = self._of_kernel.get(n)
            if c is None:
                op = _op(n)
                c = self._of_kernel[n] = self._code.setdefault(op, len(self._code))
                if c == len(self.names):
                    self.names.append(op)
            out[i] = c
        return out


def _keyed(r: RankInput, ops: _Ops) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """A rank's NCCL kernels in start order (their indices) and the key of each.

    The key is (operation, k): the kernel is the rank's k-th of that operation in start order.
    """
    order = np.argsort(r.nccl_start, kind="stable")
    code = ops.codes(r.nccl_name)[order] if len(order) else np.zeros(0, dtype=I64)
    k = np.empty(len(order), dtype=I64)
    for c in distinct(code).tolist():
        at = np.flatnonzero(code == c)
        k[at] = np.arange(len(at), dtype=I64)
    return order, code * _KEY + k


def _symmetric_codes(ops: _Ops) -> npt.NDArray[np.int64]:
    return np.array([i for i, n in enumerate(ops.names) if n in SYMMETRIC], dtype=I64)


def _collectives(inputs: list[RankInput], zero: int, ops: _Ops
                 ) -> tuple[CollectiveTable, list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]],
                            int | None, int]:
    """Match NCCL kernels across ranks; (collectives, per rank (kernel start, wait), end spread, clipped).

    One matrix of collective × rank (the job's keys seen on two ranks or more): the last rank to
    start (ties: the highest rank), each rank's wait (its kernel's start to the last start, never
    past its own end), the spread of the ends.
    """
    keyed = [_keyed(r, ops) for r in inputs]
    uniq, first, count = np.unique(np.concatenate([k for _, k in keyed]), return_index=True,
                                   return_counts=True)
    keys, first = uniq[count >= 2], first[count >= 2]
    n, m = len(keys), len(inputs)
    idx = np.full((n, m), -1, dtype=I64)
    for j, (order, k) in enumerate(keyed):
        pos = np.minimum(np.searchsorted(keys, k), max(n - 1, 0))
        hit = keys[pos] == k if n else np.zeros(len(k), dtype=bool)
        idx[pos[hit], j] = order[hit]
    present = idx >= 0
    starts = np.zeros((n, m), dtype=I64)
    ends = np.zeros((n, m), dtype=I64)
    for j, r in enumerate(inputs):
        at = present[:, j]
        starts[at, j] = r.nccl_start[idx[at, j]] + r.offset_ns - zero
        ends[at, j] = r.nccl_end[idx[at, j]] + r.offset_ns - zero
    lowest, highest = np.iinfo(I64).min, np.iinfo(I64).max
    latest = np.where(present, starts, lowest).max(axis=1, initial=lowest)
    last_j = m - 1 - np.argmax((present & (starts == latest[:, None]))[:, ::-1], axis=1)
    wait = latest[:, None] - starts
    dur = ends - starts
    sym = np.isin(keys // _KEY, _symmetric_codes(ops))
    clipped = int((present & (wait > dur))[sym].sum())  # a broadcast root may finish before the others start
    w = np.where(present, np.maximum(0, np.minimum(wait, dur)), -1)
    latest_end = np.where(present, ends, lowest).max(axis=1, initial=lowest)
    spreads = (latest_end - np.where(present, ends, highest).min(axis=1, initial=highest))[sym]
    earliest = np.where(present, starts, highest).min(axis=1, initial=highest)
    op_code = keys // _KEY
    alpha = np.argsort(np.argsort(np.array(ops.names + [""], dtype=object)))  # op names' sort order
    rows = np.lexsort((first, alpha[op_code], earliest))  # by (start, op), then in order first seen
    first_j = np.argmax(present, axis=1)
    names: dict[str, int] = {}
    name_code = np.empty(n, dtype=I64)
    nbytes = np.full(n, -1, dtype=I64)
    for u in range(n):
        r, i = inputs[int(first_j[u])], int(idx[u, first_j[u]])
        name_code[u] = names.setdefault(r.nccl_name[i], len(names))
        b = r.nccl_bytes[i] if i < len(r.nccl_bytes) else None
        nbytes[u] = -1 if b is None else int(b)
    ranks = [r.rank for r in inputs]
    table = CollectiveTable(ops=ops.names, op_code=op_code[rows], names=list(names),
                            name_code=name_code[rows], nbytes=nbytes[rows], start=earliest[rows],
                            end=latest_end[rows], skew=(latest - earliest)[rows],
                            last_rank=np.array(ranks, dtype=I64)[last_j][rows], ranks=ranks, waits=w[rows])
    waits = []
    for j, r in enumerate(inputs):
        at = present[:, j]
        waits.append((r.nccl_start[idx[at, j]].astype(I64), w[at, j]))
    return table, waits, (int(np.median(spreads)) if len(spreads) else None), clipped


def _row(r: RankInput, costs: StepCosts) -> RankRow:
    warm = costs.column("warmup")
    steady = ~warm if not warm.all() else np.ones(len(warm), dtype=bool)
    has_steps = r.steps is not None and r.steps.count > 0

    def total(name: str) -> int:
        return int(costs.column(name)[steady].sum())

    durations = costs.column("duration_ns")[steady]
    return RankRow(
        rank=r.rank, report=r.report, pid=r.pid, device=r.device, host=r.host,
        steps=r.steps.count if r.steps is not None else 0,
        step_range=r.steps.range_name if r.steps is not None else None,
        step_median_ns=int(np.median(durations)) if has_steps and len(durations) else None,
        compute_ns=total("compute_ns"), nccl_ns=total("nccl_ns"), nccl_wait_ns=total("nccl_wait_ns"),
        idle_ns=total("idle_ns"), host_ns=total("host_ns"), nccl_kernels=len(r.nccl_start), per_step=costs,
        exposed_wait_ns=total("exposed_wait_ns"),
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
    ops = _Ops()
    sym_codes: list[npt.NDArray[np.int64]] = []

    def ends(r: RankInput) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Keys and ends (UTC) of the rank's symmetric collectives, in start order."""
        order, keys = _keyed(r, ops)
        sym_codes[:] = [_symmetric_codes(ops)]
        is_sym = np.isin(keys // _KEY, sym_codes[0])
        return keys[is_sym], r.nccl_end[order[is_sym]].astype(I64) + r.offset_ns

    if len(inputs) < 2:
        return []
    ref_keys, ref_ends = ends(inputs[0])
    ref_sorted = np.argsort(ref_keys)
    notes = []
    for r in inputs[1:]:
        mine_keys, mine_ends = ends(r)
        pos = np.searchsorted(ref_keys[ref_sorted], mine_keys)
        pos = np.minimum(pos, max(len(ref_keys) - 1, 0))
        shared = (ref_keys[ref_sorted][pos] == mine_keys) if len(ref_keys) else np.zeros(len(mine_keys), bool)
        keys = mine_keys[shared]
        if len(keys) < 3:
            continue
        x = mine_ends[shared].astype(np.float64)
        y = ref_ends[ref_sorted][pos[shared]].astype(np.float64) - x
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
        if r.lanes is not None:
            r.lanes = tuple((move(a), move(b)) for a, b in r.lanes)
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


#: at most this many clock moves are told one by one in the clock sentence (the rest: in the details)
MAX_CLOCK_SENTENCES = 4

#: (report, step range) -> that report's ranks measured in that range (only steps and local are read)
Restep = Callable[[str, str], list[RankInput]]


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
    for t in traces:
        inputs += ranks_of(t, range_name=range_name)
    if not inputs:
        names = ", ".join(Path(str(t.info.path)).name for t in traces)
        raise ReportError(f"No GPU work was found in {names}; record the job with CUDA tracing "
                          "(nsys --trace=cuda or torch.profiler with CUDA activities).")
    by_report = {str(t.info.path): t for t in traces}

    def restep(report: str, name: str) -> list[RankInput]:
        return ranks_of(by_report[report], range_name=name) if report in by_report else []

    return analyze_inputs(inputs, range_name=range_name, restep=restep)


def analyze_inputs(inputs: list[RankInput], *, range_name: str | None = None,
                   restep: Restep | None = None) -> RanksResult:
    """The rank analysis of one job from its ranks as read (:func:`ranks_of`, or the cache's).

    ``restep`` measures a report's ranks in another step range (when the ranks chose different ones).
    """
    if not inputs:
        raise ReportError("No GPU work was found in the job's reports; record the job with CUDA tracing "
                          "(nsys --trace=cuda or torch.profiler with CUDA activities).")
    methods = {r.clock_method for r in inputs}
    notes = number_ranks(inputs)
    if range_name is None and restep is not None:
        align_step_ranges(inputs, restep)
    fitted = _fit_clocks(inputs)
    for r in inputs:  # read here (not cached): the partition on the clock the ranks are lined up on
        if r.local is None:
            r.local = local_costs(r)
    # one time origin with the other views: the capture start (a report's own times count from its
    # capture's start), the earliest of the ranks' on the job's clock
    zero = min(r.offset_ns for r in inputs)
    colls, waits, spread, clipped = _collectives(inputs, zero, _Ops())
    rows = [_row(r, step_costs(r, r.local, ws, wn, r.offset_ns - zero))
            for r, (ws, wn) in zip(inputs, waits, strict=True)]
    missing = [r.rank for r in rows if not r.steps]
    if missing:
        notes.append(f"No repeating step range on rank(s) {', '.join(map(str, missing))}: their numbers "
                     "cover the whole capture as one step.")
    call_note, details = _call_notes(inputs)
    notes += call_note
    if not len(colls):
        notes.append("No NCCL kernels (ncclDevKernel_*) matched across ranks, so there are no waits to "
                     "measure; trace CUDA on every rank.")
    strag, why = find_straggler(rows, colls, {r.rank: r.unit for r in inputs})
    if why:
        notes.append(why)
    clock = _clock(inputs, methods, zero, spread, clipped)
    if fitted:
        from dataclasses import replace

        told = fitted if len(fitted) <= MAX_CLOCK_SENTENCES else [
            f"{len(fitted)} ranks' clocks moved to line up their collectives' ends with rank "
            f"{inputs[0].rank}'s (each rank's move: --json note_details)"]
        if len(fitted) > MAX_CLOCK_SENTENCES:
            details = [*details, *(f[0].upper() + f[1:] for f in fitted)]
        clock = replace(clock, sentence=clock.sentence + " Clocks lined up on collective ends: "
                        + "; ".join(told) + ".")
    pace = pace_row(rows, strag.rank if strag is not None else None)
    return RanksResult(tuple(rows), colls, strag, clock,
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
        kernels: Counter[str] = Counter()
        for name, n in Counter(r.nccl_name).items():  # a few distinct names among many kernels
            kernels["SendRecv" if _op(name) in P2P else _op(name)] += n
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
    if r.lanes is not None:
        (cs, ce), (ns, ne) = r.lanes
    else:
        cs, ce = merged(r.compute_start, r.compute_end)
        ns, ne = merged(r.nccl_start, r.nccl_end)
    return RankLanes(r.rank, cs + shift, ce + shift, ns + shift, ne + shift)


def analyze_paths(paths: Sequence[str | Path], *, range_name: str | None = None, workers: int | None = None,
                  inputs: Sequence[list[RankInput]] | None = None) -> RanksResult:
    """Analyse the reports as one job, each report read once (kept in the cache, ``store``).

    Args:
        paths: The reports.
        range_name: The step range (None: found by structure).
        workers: Reader processes for the reports not cached yet (default 2 a core, at most 4; 0: here).
        inputs: Each report's ranks, already read (``store.read_ranks`` on a Dask worker, say).
    """
    from engine.analysis.ranks.store import read_all, read_ranks

    per_report = list(inputs) if inputs is not None else read_all(paths, range_name, workers=workers)
    ranks = [r for got in per_report for r in got]
    if not ranks:
        names = ", ".join(Path(str(p)).name for p in paths)
        raise ReportError(f"No GPU work was found in {names}; record the job with CUDA tracing "
                          "(nsys --trace=cuda or torch.profiler with CUDA activities).")
    return analyze_inputs(ranks, range_name=range_name, restep=lambda report, name: read_ranks(report, name))
