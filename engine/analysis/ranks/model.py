"""The typed results of a rank analysis (``kernelscope.ranks/1``): frozen values with ``to_json()``.

Times are integer nanoseconds. Times on the job's clock (``*_start_ns``, ``*_end_ns``) are relative to
``job_start_utc_ns`` (the earliest event of any rank, in UTC), so every rank sits on one axis.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

SCHEMA = "kernelscope.ranks/1"


@dataclass(frozen=True)
class StepCost:
    """Where one step of one rank went: each instant is NCCL, else compute, else idle.

    Attributes:
        index: The step's number in the rank's step range (warm-up steps included).
        start_ns: Start on the job's clock.
        end_ns: End on the job's clock.
        compute_ns: GPU busy with kernels, copies or memsets while no NCCL kernel runs.
        nccl_ns: An NCCL kernel runs (overlap with compute counts here, see ``overlap_ns``).
        nccl_wait_ns: Time in the step during which an NCCL kernel of this rank waited for the last rank
            to start the same collective: the union of those waits inside the step (collectives that
            wait at once count once), so it is within ``nccl_ns`` and the step.
        idle_ns: No GPU work at all.
        host_ns: GPU idle while the rank's CPU thread is outside any CUDA API call (the GPU waits
            for host work: Python, data loading, a sleep).
        overlap_ns: NCCL kernels that run while compute also runs on another stream.
        warmup: The step is warm-up (much slower than the ones after it).
    """

    index: int
    start_ns: int
    end_ns: int
    compute_ns: int
    nccl_ns: int
    nccl_wait_ns: int
    idle_ns: int
    host_ns: int
    overlap_ns: int
    warmup: bool
    #: GPU busy with non-NCCL work (kernels, copies, memsets), overlap with NCCL included
    gpu_compute_ns: int = 0
    #: time this rank waited for another rank with nothing else to run: its waits' union minus its
    #: compute (overlapping collectives' waits are counted once)
    exposed_wait_ns: int = 0

    @property
    def duration_ns(self) -> int:
        """End − start."""
        return self.end_ns - self.start_ns

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"index": self.index, "start_ns": self.start_ns, "end_ns": self.end_ns,
                "duration_ns": self.duration_ns, "compute_ns": self.compute_ns,
                "nccl_ns": self.nccl_ns, "nccl_wait_ns": self.nccl_wait_ns, "idle_ns": self.idle_ns,
                "host_ns": self.host_ns, "overlap_ns": self.overlap_ns, "warmup": self.warmup,
                "gpu_compute_ns": self.gpu_compute_ns, "exposed_wait_ns": self.exposed_wait_ns}


#: StepCost's fields, in order (the columns of :class:`StepCosts`)
STEP_FIELDS = ("index", "start_ns", "end_ns", "compute_ns", "nccl_ns", "nccl_wait_ns", "idle_ns", "host_ns",
               "overlap_ns", "warmup", "gpu_compute_ns", "exposed_wait_ns")


class StepCosts(Sequence[StepCost]):
    """The steps of one rank as columns (one int64 array per :class:`StepCost` field, warm-up as bool).

    A 64-rank job of 8,520 steps each is 545k steps: as objects they took hundreds of MB; a
    :class:`StepCost` is made only when one is read. Indexing, iterating, ``len`` and equality behave
    as the tuple of StepCost values they stand for; :meth:`column` gives a field as an array.
    """

    __slots__ = ("_cols",)

    def __init__(self, columns: dict[str, Any] | None = None) -> None:
        cols = columns or {}
        self._cols: dict[str, npt.NDArray[Any]] = {
            f: np.asarray(cols.get(f, ()), dtype=bool if f == "warmup" else np.int64) for f in STEP_FIELDS}

    @classmethod
    def of(cls, steps: Any) -> StepCosts:
        """``steps`` as StepCosts (StepCosts as they are; any iterable of :class:`StepCost` converted)."""
        if isinstance(steps, StepCosts):
            return steps
        items = list(steps)
        return cls({f: [getattr(x, f) for x in items] for f in STEP_FIELDS})

    def column(self, name: str) -> npt.NDArray[Any]:
        """One field of every step (``duration_ns`` too), as an array (do not modify it)."""
        if name == "duration_ns":
            dur: npt.NDArray[Any] = self._cols["end_ns"] - self._cols["start_ns"]
            return dur
        out: npt.NDArray[Any] = self._cols[name]
        return out

    def select(self, mask: npt.NDArray[np.bool_]) -> StepCosts:
        """The steps where ``mask`` is true."""
        return StepCosts({f: a[mask] for f, a in self._cols.items()})

    def __len__(self) -> int:
        return len(self._cols["index"])

    @overload
    def __getitem__(self, i: int) -> StepCost: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[StepCost, ...]: ...

    def __getitem__(self, i: int | slice) -> StepCost | tuple[StepCost, ...]:
        if isinstance(i, slice):
            return tuple(self[k] for k in range(*i.indices(len(self))))
        k = range(len(self))[i]
        values: list[Any] = [bool(a[k]) if f == "warmup" else int(a[k]) for f, a in self._cols.items()]
        return StepCost(*values)

    def __iter__(self) -> Iterator[StepCost]:
        cols = [self._cols[f].tolist() for f in STEP_FIELDS]
        return map(StepCost, *cols)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, list)):
            other = StepCosts.of(other)
        if not isinstance(other, StepCosts):
            return NotImplemented
        return all(np.array_equal(a, other._cols[f]) for f, a in self._cols.items())

    def __hash__(self) -> int:
        return hash((len(self), self._cols["start_ns"][:4].tobytes(), self._cols["end_ns"][-4:].tobytes()))

    def __repr__(self) -> str:
        return f"StepCosts({len(self)} steps)"

    def __getstate__(self) -> dict[str, Any]:
        return self._cols

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._cols = state


@dataclass(frozen=True)
class RankRow:
    """One rank: a process with GPU work, from one report.

    ``compute_ns``, ``nccl_ns``, ``nccl_wait_ns``, ``exposed_wait_ns``, ``idle_ns`` and ``host_ns`` are
    totals over the rank's counted steps (its steady steps: warm-up left out; every step when all are
    warm-up, the whole capture when no step range was found); ``compute_ns + nccl_ns + idle_ns`` is
    their summed duration. What a page shows per step is the mean over those steps
    (:meth:`per_step_mean`): the rank's step (``step_ns``) is ``compute + nccl + idle`` per step, so
    every part is within it; ``step_median_ns`` is the median step, a different statistic, and is
    always labelled so.
    """

    rank: int
    report: str
    pid: int | None
    device: int | None
    host: str | None
    steps: int
    step_range: str | None
    step_median_ns: int | None
    compute_ns: int
    nccl_ns: int
    nccl_wait_ns: int
    idle_ns: int
    host_ns: int
    nccl_kernels: int
    per_step: Sequence[StepCost] = ()
    #: total over the counted steps of the wait with nothing else to run (``StepCost.exposed_wait_ns``)
    exposed_wait_ns: int = 0

    @property
    def counted_steps(self) -> Sequence[StepCost]:
        """The steps the totals are over."""
        if isinstance(self.per_step, StepCosts):
            warm = self.per_step.column("warmup")
            return self.per_step.select(~warm) if not warm.all() else self.per_step
        steady = tuple(s for s in self.per_step if not s.warmup)
        return steady or self.per_step

    @property
    def counted_count(self) -> int:
        """How many steps the totals are over."""
        if isinstance(self.per_step, StepCosts):
            warm = self.per_step.column("warmup")
            steady = int((~warm).sum())
            return steady or len(warm)
        return len(self.counted_steps)

    def per_step_mean(self, total_ns: int) -> int:
        """A total over the counted steps as a mean per step (ns, rounded)."""
        return round(total_ns / max(1, self.counted_count))

    @property
    def step_ns(self) -> int:
        """The rank's step: mean over the counted steps (= compute + nccl + idle per step)."""
        return self.per_step_mean(self.compute_ns + self.nccl_ns + self.idle_ns)

    def means(self) -> dict[str, int]:
        """Every per-step figure a page shows: means over the counted steps (ns)."""
        return {"step_ns": self.step_ns, "compute_ns": self.per_step_mean(self.compute_ns),
                "nccl_ns": self.per_step_mean(self.nccl_ns), "wait_ns": self.per_step_mean(self.nccl_wait_ns),
                "exposed_wait_ns": self.per_step_mean(self.exposed_wait_ns),
                "idle_ns": self.per_step_mean(self.idle_ns), "host_ns": self.per_step_mean(self.host_ns)}

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (the keys of ``kernelscope.ranks/1`` first).

        ``step_ns`` and ``wait_ns`` are per step (means over ``steady_steps``, as the table shows
        them, with the other means in ``mean_per_step``); ``compute_ns`` ... ``host_ns`` are totals.
        """
        return {"rank": self.rank, "report": self.report, "pid": self.pid, "device": self.device,
                "host": self.host, "steps": self.steps, "steady_steps": self.counted_count,
                "step_ns": self.step_ns, "step_median_ns": self.step_median_ns,
                "wait_ns": self.per_step_mean(self.nccl_wait_ns), "mean_per_step": self.means(),
                "compute_ns": self.compute_ns, "nccl_ns": self.nccl_ns,
                "nccl_wait_ns": self.nccl_wait_ns, "exposed_wait_ns": self.exposed_wait_ns,
                "idle_ns": self.idle_ns, "host_ns": self.host_ns,
                "step_range": self.step_range, "nccl_kernels": self.nccl_kernels,
                "per_step": [s.to_json() for s in self.per_step]}


@dataclass(frozen=True)
class Collective:
    """One collective matched across ranks (the k-th NCCL kernel of one operation on each rank).

    Attributes:
        index: Position among the job's collectives, in time order.
        op: The operation (``AllReduce``, ``AllGather``, ``ReduceScatter``, ``Broadcast``, ...).
        name: The kernel name on the first rank.
        bytes: Message size from the NCCL NVTX range or the profiler's arguments (None: not recorded).
        start_ns: The earliest start across ranks (job clock).
        end_ns: The latest end across ranks (job clock).
        start_skew_ns: Latest start − earliest start.
        last_rank: The rank that started last (the one the others waited for).
        waits_ns: Per rank (as text, for JSON), how long its kernel ran before the last rank started.
    """

    index: int
    op: str
    name: str
    bytes: int | None
    start_ns: int
    end_ns: int
    start_skew_ns: int
    last_rank: int
    waits_ns: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"index": self.index, "op": self.op, "name": self.name, "bytes": self.bytes,
                "start_ns": self.start_ns, "end_ns": self.end_ns, "start_skew_ns": self.start_skew_ns,
                "last_rank": self.last_rank, "waits_ns": dict(self.waits_ns)}


class CollectiveTable(Sequence[Collective]):
    """The job's collectives as columns: a :class:`Collective` is made only when one is read.

    A 64-rank job of 34k collectives holds 2.2M waits: a matrix here (collective × rank, -1 where the
    rank has no kernel of that collective), a dict per collective as objects. Indexing, iterating and
    ``len`` behave as the tuple of Collective values they stand for.
    """

    def __init__(self, *, ops: Sequence[str], op_code: Any, names: Sequence[str], name_code: Any, nbytes: Any,
                 start: Any, end: Any, skew: Any, last_rank: Any, ranks: Sequence[int], waits: Any) -> None:
        self.ops, self.names, self.ranks = list(ops), list(names), [int(r) for r in ranks]
        self.op_code = np.asarray(op_code, dtype=np.int64)
        self.name_code = np.asarray(name_code, dtype=np.int64)
        #: message bytes (-1: not recorded)
        self.nbytes = np.asarray(nbytes, dtype=np.int64)
        self.start_ns = np.asarray(start, dtype=np.int64)
        self.end_ns = np.asarray(end, dtype=np.int64)
        self.skew_ns = np.asarray(skew, dtype=np.int64)
        #: the rank that started last, per collective
        self.last_rank = np.asarray(last_rank, dtype=np.int64)
        #: collective × rank (in ``ranks`` order): the rank's wait, -1 where it has no kernel in it
        self.waits = np.asarray(waits, dtype=np.int64).reshape(len(self.start_ns), len(self.ranks))

    def __len__(self) -> int:
        return len(self.start_ns)

    @overload
    def __getitem__(self, i: int) -> Collective: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[Collective, ...]: ...

    def __getitem__(self, i: int | slice) -> Collective | tuple[Collective, ...]:
        if isinstance(i, slice):
            return tuple(self[k] for k in range(*i.indices(len(self))))
        k = range(len(self))[i]
        row = self.waits[k]
        waits = {str(r): int(w) for r, w in zip(self.ranks, row.tolist(), strict=True) if w >= 0}
        nb = int(self.nbytes[k])
        return Collective(k, self.ops[int(self.op_code[k])], self.names[int(self.name_code[k])],
                          None if nb < 0 else nb, int(self.start_ns[k]), int(self.end_ns[k]),
                          int(self.skew_ns[k]), int(self.last_rank[k]), waits)

    def __iter__(self) -> Iterator[Collective]:
        return (self[k] for k in range(len(self)))

    def __repr__(self) -> str:
        return f"CollectiveTable({len(self)} collectives over {len(self.ranks)} ranks)"


@dataclass(frozen=True)
class Straggler:
    """The rank the others wait for.

    Attributes:
        rank: Its number.
        device: Its GPU.
        evidence: Sentences with the numbers behind the verdict.
        wait_per_step_ns: What it costs per step: the what-if, the same as ``cost_per_step_ns`` (how
            much shorter a step would be without its extra time, median over the steps where it is
            slow). Not a wait any rank measured: the waits are ``slow_wait_ns`` and
            ``others_wait_ns``.
        last_share: Fraction of the collectives where it started last.
        extra_host_per_step_ns: Its median host time per step minus the others' median (0 when not more).
    """

    rank: int
    device: int | None
    evidence: tuple[str, ...]
    wait_per_step_ns: int
    last_share: float
    extra_host_per_step_ns: int
    #: what-if: how much shorter the median step would be without the straggler's extra time
    cost_per_step_ns: int = 0
    #: where the extra time is: "GPU compute", "host", an NVTX phase ...
    cause: str = ""
    #: share of the steady steps in which this rank was the one the others waited for
    slow_step_share: float = 1.0
    #: per steady step: the rank the others waited for (-1: nobody waited) and what it cost
    per_step: tuple[tuple[int, int, int], ...] = ()
    #: in the steps where it is slow, the wait with nothing else to run of the rank that waited least
    #: among the others (median over those steps)
    slow_wait_ns: int = 0
    #: per other rank: its wait with nothing else to run per step, mean over its steady steps (the
    #: same number as that rank's row: ``RankRow.means()["exposed_wait_ns"]``)
    others_wait_ns: tuple[tuple[int, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"rank": self.rank, "device": self.device, "evidence": list(self.evidence),
                "wait_per_step_ns": self.wait_per_step_ns, "last_share": round(self.last_share, 4),
                "extra_host_per_step_ns": self.extra_host_per_step_ns,
                "cost_per_step_ns": self.cost_per_step_ns, "cause": self.cause,
                "slow_step_share": round(self.slow_step_share, 4),
                "slow_wait_ns": self.slow_wait_ns,
                "others_exposed_wait_per_step_ns": {str(r): ns for r, ns in self.others_wait_ns},
                "per_step": [{"step": k, "slow_rank": r, "cost_ns": c} for k, r, c in self.per_step]}


@dataclass(frozen=True)
class ClockInfo:
    """How the ranks were put on one clock, and how well the clocks agree.

    Attributes:
        method: ``session start (UTC)`` (nsys), ``trace base time (UTC)`` (Kineto), or ``none``.
        hosts: The distinct host names.
        job_start_utc_ns: UTC time of the job clock's zero.
        nccl_end_spread_ns: Median over collectives of (latest end − earliest end) across ranks:
            a collective ends at nearly the same moment on every rank, so this bounds the clock
            disagreement (None without collectives).
        sentence: The same in words.
    """

    method: str
    hosts: tuple[str, ...]
    job_start_utc_ns: int | None
    nccl_end_spread_ns: int | None
    sentence: str

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"method": self.method, "hosts": list(self.hosts), "job_start_utc_ns": self.job_start_utc_ns,
                "nccl_end_spread_ns": self.nccl_end_spread_ns, "sentence": self.sentence}


@dataclass(frozen=True)
class RankLanes:
    """What a timeline of one rank draws, on the job's clock: merged busy blocks (not in the JSON).

    Attributes:
        rank: The rank.
        compute_start: Starts of the merged blocks of non-NCCL GPU work (kernels, copies, memsets).
        compute_end: Their ends.
        nccl_start: Starts of the merged blocks of NCCL kernels.
        nccl_end: Their ends.
    """

    rank: int
    compute_start: npt.NDArray[np.int64]
    compute_end: npt.NDArray[np.int64]
    nccl_start: npt.NDArray[np.int64]
    nccl_end: npt.NDArray[np.int64]


@dataclass(frozen=True)
class RanksResult:
    """A whole job: its ranks, collectives, straggler and clock (and the lanes a view draws).

    ``pace_rank`` is the rank whose step is the job's step: the straggler, else the rank with the
    longest step (mean over its steady steps); every page quotes the job's step as that rank's row.
    ``notes`` are one sentence each; ``details`` are the long lists behind some of them (shown on
    demand: a tooltip, ``--json``).
    """

    ranks: tuple[RankRow, ...]
    collectives: Sequence[Collective]
    straggler: Straggler | None
    clock: ClockInfo
    notes: tuple[str, ...] = ()
    lanes: tuple[RankLanes, ...] = ()
    pace_rank: int | None = None
    details: tuple[str, ...] = ()

    def rank(self, number: int) -> RankRow:
        """The row of rank ``number``."""
        return next(r for r in self.ranks if r.rank == number)

    @property
    def pace(self) -> RankRow | None:
        """The row whose step is the job's step (see the class)."""
        return next((r for r in self.ranks if r.rank == self.pace_rank), None)

    def to_json(self) -> dict[str, Any]:
        """The ``kernelscope.ranks/1`` document."""
        pace = self.pace
        return {"schema": SCHEMA, "ranks": [r.to_json() for r in self.ranks],
                "collectives": [c.to_json() for c in self.collectives],
                "straggler": self.straggler.to_json() if self.straggler else None,
                "clock": self.clock.to_json(), "notes": list(self.notes),
                "note_details": list(self.details),
                "job_step": None if pace is None else {
                    "rank": pace.rank, "step_ns": pace.step_ns, "step_median_ns": pace.step_median_ns,
                    "statistic": "mean over the rank's steady steps (its row's step_ns)"}}
