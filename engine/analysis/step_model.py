"""Steps as values: one iteration (:class:`Step`), the iterations of a process (:class:`Steps`), range labels.

The step finders (:mod:`engine.analysis.steps` by NVTX structure, :mod:`engine.analysis.stepfind` from
the GPU's work) build these; every consumer (summary, findings, ranks, compare, the window) reads them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from engine.analysis.tables import disjoint_sorted

if TYPE_CHECKING:
    import numpy.typing as npt

#: a range counts as warm-up while it is this many times the median of the steps after it
WARMUP_FACTOR = 1.5
#: a steady step this many times the steady median is an outlier (a stall)
OUTLIER_FACTOR = 1.5
_TRAILING_NUMBER = re.compile(r"(?<=\D)\d+$")
_LIBRARY_DOMAINS = frozenset({"nccl", "cublas", "cublaslt", "cudnn", "cufft", "cusparse", "cusolver",
                              "curand", "nvshmem", "cutlass", "tensorrt", "nvjpeg"})
_LIBRARY_TEXT = re.compile(
    r"^(aten::|nccl|cublas|cudnn|cufft|cusparse|c10d::|autograd::|record_param_comms)"
    r"|, (op_id|seq) = ", re.IGNORECASE)
_DOMAIN = re.compile(r"^([^:]+):(?!:)(.*)$")


def normalise_range(text: str) -> str:
    """A range name with its trailing number replaced by ``N`` ("train_step 12" → "train_step N")."""
    t = str(text).strip()
    return _TRAILING_NUMBER.sub("N", t)


def range_label(domain: str | None, text: str) -> str:
    """How a range is named to users: ``text`` or ``domain:text`` for a named NVTX domain."""
    d = str(domain or "").strip()
    return f"{d}:{text}" if d else str(text)


def split_label(label: str) -> tuple[str, str]:
    """(domain, text) of a range label; "" for the domain of a plain range ("aten::mm" has none)."""
    m = _DOMAIN.match(label)
    return (m.group(1), m.group(2)) if m else ("", label)


def is_library_range(label: str) -> bool:
    """True for ranges that libraries emit (NCCL, cuBLAS, cuDNN, aten operator ranges)."""
    domain, text = split_label(label)
    if domain.strip().lower() in _LIBRARY_DOMAINS:
        return True
    return bool(_LIBRARY_TEXT.search(text))


@dataclass(frozen=True)
class Step:
    """One iteration: an instance of the step range."""

    index: int
    start_ns: int
    end_ns: int
    warmup: bool

    @property
    def duration_ns(self) -> int:
        """End − start."""
        return self.end_ns - self.start_ns

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"index": self.index, "start_ns": self.start_ns, "end_ns": self.end_ns,
                "duration_ns": self.duration_ns, "warmup": self.warmup}


class StepList(Sequence[Step]):
    """Steps as three arrays (starts, ends, warm-up flags): a :class:`Step` is made only when one is read.

    A capture can hold millions of steps (5M in a 10M-kernel report): as objects they took 735 MB,
    as arrays 17 bytes each. Indexing, iterating, ``len`` and equality behave as the tuple of
    :class:`Step` values they stand for; ``index`` is the position unless other indices are given.
    """

    __slots__ = ("starts", "ends", "warmup", "_index")

    def __init__(self, starts: Any, ends: Any, warmup: Any, index: Any = None) -> None:
        self.starts: npt.NDArray[np.int64] = np.asarray(starts, dtype=np.int64)
        self.ends: npt.NDArray[np.int64] = np.asarray(ends, dtype=np.int64)
        self.warmup: npt.NDArray[np.bool_] = np.asarray(warmup, dtype=bool)
        if index is not None:
            index = np.asarray(index, dtype=np.int64)
            if np.array_equal(index, np.arange(len(index))):
                index = None
        self._index: npt.NDArray[np.int64] | None = index

    @classmethod
    def of(cls, steps: Any) -> StepList:
        """``steps`` as a StepList (a StepList as it is; any iterable of :class:`Step` converted)."""
        if isinstance(steps, StepList):
            return steps
        items = list(steps)
        return cls([x.start_ns for x in items], [x.end_ns for x in items], [x.warmup for x in items],
                   [x.index for x in items])

    @property
    def indices(self) -> npt.NDArray[np.int64]:
        """Each step's index."""
        return np.arange(len(self.starts), dtype=np.int64) if self._index is None else self._index

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, i: int) -> Step: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[Step, ...]: ...

    def __getitem__(self, i: int | slice) -> Step | tuple[Step, ...]:
        if isinstance(i, slice):
            return tuple(self[k] for k in range(*i.indices(len(self))))
        k = range(len(self))[i]  # negative indices, IndexError past the end
        idx = k if self._index is None else int(self._index[k])
        return Step(idx, int(self.starts[k]), int(self.ends[k]), bool(self.warmup[k]))

    def __iter__(self) -> Iterator[Step]:
        step = 1 << 16  # converted a block at a time: no list of every step's values at once
        for lo in range(0, len(self), step):
            idx = self.indices[lo:lo + step].tolist()
            yield from map(Step, idx, self.starts[lo:lo + step].tolist(), self.ends[lo:lo + step].tolist(),
                           self.warmup[lo:lo + step].tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, list)):
            other = StepList.of(other)
        if not isinstance(other, StepList):
            return NotImplemented
        return (np.array_equal(self.starts, other.starts) and np.array_equal(self.ends, other.ends)
                and np.array_equal(self.warmup, other.warmup) and np.array_equal(self.indices, other.indices))

    def __hash__(self) -> int:
        return hash((len(self), self.starts[:4].tobytes(), self.ends[-4:].tobytes()))

    def __repr__(self) -> str:
        return f"StepList({len(self)} steps)"

    def __getstate__(self) -> tuple[Any, ...]:
        return self.starts, self.ends, self.warmup, self._index

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.starts, self.ends, self.warmup, self._index = state


@dataclass(frozen=True)
class Steps:
    """The iterations of one process.

    Attributes:
        range_name: the normalised range ("train_step N", "NCCL:ncclAllReduce").
        source: "nvtx" (a user range), "profiler" (PyTorch's ProfilerStep#N) or "library".
        pid: the process, as text.
        steps: every instance in time order, warm-up first (a :class:`StepList`: arrays; a tuple of
            :class:`Step` given here is converted).
        gpu_ns: GPU time (kernels, copies, memsets) launched inside the steps.
        gpu_total_ns: GPU time launched by the process in the whole capture.
        chosen_by: "structure" (picked here) or "user" (``range_name`` given).

    """

    range_name: str
    source: str
    pid: str
    steps: StepList
    gpu_ns: int
    gpu_total_ns: int
    chosen_by: str = "structure"
    #: how the steps were found: "gpu" (the GPU's work repeats), "gpu+nvtx" (it repeats and an NVTX
    #: range places the boundaries), "nvtx" (an NVTX range only: the GPU's work does not repeat)
    method: str = "nvtx"
    #: how sure (0..1) the cut is: the share of units and operations that repeat exactly
    confidence: float = 1.0
    #: one sentence on how the steps were found (what repeats, what marks a step)
    why: str = ""
    #: host-side start and end of each step (launch of its first operation), beside the GPU's
    host_starts: Any = field(default=None, compare=False, repr=False)
    host_ends: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.steps, StepList):
            object.__setattr__(self, "steps", StepList.of(self.steps))

    # Derived values are computed once per Steps (a capture can hold 200k steps and the rules ask
    # for them dozens of times); functools.cached_property stores them beside the frozen fields.
    @property
    def count(self) -> int:
        """Number of steps, warm-up included."""
        return len(self.steps)

    @cached_property
    def warmup_count(self) -> int:
        """Leading steps that are warm-up."""
        return int(self.steps.warmup.sum())

    @property
    def steady(self) -> StepList:
        """The steps after warm-up (made on each use: :attr:`steady_count` is what most callers need)."""
        m = ~self.steps.warmup
        return StepList(self.steps.starts[m], self.steps.ends[m], self.steps.warmup[m], self.steps.indices[m])

    @cached_property
    def steady_count(self) -> int:
        """Number of steps after warm-up."""
        return len(self.steps) - self.warmup_count

    @property
    def warmup_flags(self) -> npt.NDArray[np.bool_]:
        """Each step's warm-up flag, in time order."""
        return self.steps.warmup

    @property
    def durations_ns(self) -> list[int]:
        """Every step's duration, in time order."""
        out: list[int] = self._durations.tolist()
        return out

    @cached_property
    def _durations(self) -> npt.NDArray[np.int64]:
        return self._ends - self._starts

    @property
    def _starts(self) -> npt.NDArray[np.int64]:
        return self.steps.starts

    @property
    def _ends(self) -> npt.NDArray[np.int64]:
        return self.steps.ends

    @cached_property
    def _steady_mask(self) -> npt.NDArray[np.bool_]:
        return ~self.steps.warmup

    @cached_property
    def steady_median_ns(self) -> float:
        """Median duration of the steady-state steps (all steps when every one is warm-up)."""
        d = self._durations[self._steady_mask] if self.steady_count else self._durations
        return float(np.median(d))

    @cached_property
    def outlier_mask(self) -> npt.NDArray[np.bool_]:
        """Steady steps that took more than OUTLIER_FACTOR × the steady median (a stall, a checkpoint)."""
        d = self._durations
        out: npt.NDArray[np.bool_] = self._steady_mask & (d > OUTLIER_FACTOR * self.steady_median_ns)
        return out

    @property
    def outlier_count(self) -> int:
        """Number of outlier steps."""
        return int(self.outlier_mask.sum())

    @cached_property
    def host_steady_median_ns(self) -> float | None:
        """Median host-side duration of the steady steps (None when not known)."""
        if self.host_starts is None or not len(self.host_starts):
            return None
        d = np.asarray(self.host_ends, dtype=np.int64) - np.asarray(self.host_starts, dtype=np.int64)
        steady = self.steady_count and len(d) == len(self._steady_mask)
        m = self._steady_mask if steady else np.ones(len(d), bool)
        return float(np.median(d[m])) if m.any() else None

    @property
    def starts_ns(self) -> npt.NDArray[np.int64]:
        """Step starts (sorted)."""
        return self._starts.copy()

    @property
    def ends_ns(self) -> npt.NDArray[np.int64]:
        """Step ends."""
        return self._ends.copy()

    @cached_property
    def _blocks(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        return merged(*self.window())

    @cached_property
    def _steady_blocks(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        return merged(*self.window(steady_only=True))

    def contains(self, t: npt.NDArray[np.int64], *, steady_only: bool = False) -> npt.NDArray[np.bool_]:
        """Which times fall inside a step (a steady one with ``steady_only``): :func:`inside`."""
        s, e = self._steady_blocks if steady_only else self._blocks
        return _inside_blocks(s, e, np.asarray(t, dtype=np.int64))

    def locate(self, t: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """(``contains(t)``, ``contains(t, steady_only=True)``) with one search of the times.

        Steps found by structure never overlap: a time is in a step when it is before the end of
        the last step starting at or before it, and in a steady one when that step is steady.
        """
        s, e = self._starts, self._ends
        if not disjoint_sorted(s, e):
            return self.contains(t), self.contains(t, steady_only=True)
        t = np.asarray(t, dtype=np.int64)
        floor = np.array([np.iinfo(np.int64).min], dtype=np.int64)
        e_pad = np.concatenate([floor, e])
        # no steady step: "steady" means every step, as window(steady_only=True) gives them
        mask = self._steady_mask if self.steady_count else np.ones(len(s), bool)
        steady_pad = np.concatenate([[False], mask])
        in_any = np.zeros(len(t), dtype=bool)
        in_steady = np.zeros(len(t), dtype=bool)
        step = 1 << 21
        for lo in range(0, len(t), step):
            tt = t[lo:lo + step]
            k = np.searchsorted(s, tt, side="right")
            inside_k = tt < e_pad[k]
            in_any[lo:lo + step] = inside_k
            in_steady[lo:lo + step] = inside_k & steady_pad[k]
        return in_any, in_steady

    @cached_property
    def _host_steps(self) -> Steps | None:
        """The same steps on the host's clock (each from its first launch): where host calls belong."""
        if self.host_starts is None or len(self.host_starts) != len(self.steps):
            return None
        hs = np.asarray(self.host_starts, dtype=np.int64)
        he = np.maximum(np.asarray(self.host_ends, dtype=np.int64), hs)
        return retimed(self, hs, he, host_starts=None, host_ends=None)

    def locate_host(self, t: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """:meth:`locate` for host times (API calls): against the steps' host-side windows.

        A host that runs ahead issues step k's calls long before the GPU runs it; its calls belong to
        the step it was issuing, not to the one the GPU was running.
        """
        h = self._host_steps
        return self.locate(t) if h is None else h.locate(t)

    def contains_host(self, t: npt.NDArray[np.int64], *, steady_only: bool = False) -> npt.NDArray[np.bool_]:
        """:meth:`contains` for host times."""
        h = self._host_steps
        if h is None:
            return self.contains(t, steady_only=steady_only)
        return h.contains(t, steady_only=steady_only)

    def window(self, *, steady_only: bool = False) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(starts, ends) of the steps, optionally of the steady ones only."""
        if steady_only and self.steady_count:
            m = self._steady_mask
            return self._starts[m], self._ends[m]
        return self._starts.copy(), self._ends.copy()

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "range": self.range_name, "source": self.source, "pid": self.pid,
            "chosen_by": self.chosen_by, "count": self.count, "warmup_count": self.warmup_count,
            "steady_median_ns": self.steady_median_ns, "gpu_ns": self.gpu_ns,
            "gpu_total_ns": self.gpu_total_ns, "method": self.method, "confidence": self.confidence,
            "why": self.why, "timed_on": "gpu" if self.method != "host" else "host",
            "host_steady_median_ns": self.host_steady_median_ns,
            "outlier_steps": np.flatnonzero(self.outlier_mask).tolist(),
            "steps": [s.to_json() for s in self.steps],
        }


def merged(starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64], *, touching: bool = True
           ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The union of intervals as sorted, disjoint blocks.

    With ``touching=False``, [0, 5) and [5, 9) stay two blocks, as two consecutive steps do.
    """
    if not len(starts):
        return starts.astype(np.int64), ends.astype(np.int64)
    order = np.argsort(starts, kind="stable")
    s = np.asarray(starts, dtype=np.int64)[order]
    e = np.maximum.accumulate(np.asarray(ends, dtype=np.int64)[order])
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > e[:-1] if touching else s[1:] >= e[:-1]
    idx = np.flatnonzero(new)
    return s[idx], np.append(e[idx[1:] - 1], e[-1])


def inside(starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64], t: npt.NDArray[np.int64]
           ) -> npt.NDArray[np.bool_]:
    """Which times ``t`` fall in one of the intervals (merged first, so they may overlap)."""
    t = np.asarray(t, dtype=np.int64)
    if not len(starts) or not len(t):
        return np.zeros(len(t), dtype=bool)
    s, e = merged(np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64))
    return _inside_blocks(s, e, t)


def _inside_blocks(s: npt.NDArray[np.int64], e: npt.NDArray[np.int64], t: npt.NDArray[np.int64]
                   ) -> npt.NDArray[np.bool_]:
    """Which times ``t`` fall in one of the disjoint sorted blocks [s, e) (2M times at a time)."""
    res = np.zeros(len(t), dtype=bool)
    if not len(s) or not len(t):
        return res
    # ends with a floor in front: a time before every block picks it (never inside)
    e_pad = np.concatenate([np.array([np.iinfo(np.int64).min], dtype=np.int64),
                            np.asarray(e, dtype=np.int64)])
    step = 1 << 21
    for lo in range(0, len(t), step):
        tt = t[lo:lo + step]
        res[lo:lo + step] = tt < e_pad[np.searchsorted(s, tt, side="right")]
    return res


def _warmup_flags(durations: list[int]) -> list[bool]:
    """Leading steps slower than WARMUP_FACTOR × the median of the steps after them (at most half)."""
    flags = [False] * len(durations)
    arr = np.asarray(durations)  # (once: a list of 200k steps is not converted per step)
    w = 0
    while w < len(durations) // 2 + (1 if len(durations) == 2 else 0) and w + 1 < len(durations):
        rest = float(np.median(arr[w + 1:]))
        if durations[w] > WARMUP_FACTOR * rest:
            flags[w] = True
            w += 1
        else:
            break
    return flags


#: Steps' cached properties that depend on its steps only
_DERIVED = frozenset({"_steady_mask", "warmup_count", "steady_count", "_durations",
                      "steady_median_ns", "_blocks", "_steady_blocks"})



#: how steps were found (``Steps.method``), in words for the summary's text and the window
METHOD_WORDS = {"gpu": "found from the GPU's repeating work",
                "gpu+nvtx": "found from the GPU's repeating work, placed by NVTX",
                "nvtx": "an NVTX range", "marker": "cut at a marker operation the user named"}


def _with(st: Steps, **kw: Any) -> Steps:
    """``st`` with other field values (the same steps: the arrays it has computed are kept)."""
    out = replace(st, **kw)
    out.__dict__.update({k: v for k, v in st.__dict__.items() if k in _DERIVED})
    return out


def steps_from_arrays(range_name: str, source: str, pid: str, starts: npt.NDArray[np.int64],
                      ends: npt.NDArray[np.int64], warmup: Any, gpu_ns: int, gpu_total_ns: int,
                      **fields: Any) -> Steps:
    """Steps from their starts, ends and warm-up flags (``fields``: Steps' other fields)."""
    steps = StepList(starts, ends, warmup)
    return Steps(range_name, source, pid, steps, gpu_ns, gpu_total_ns, **fields)


def retimed(st: Steps, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64], **fields: Any) -> Steps:
    """``st`` with step k moved to [starts[k], ends[k]) (warm-up flags and indices kept)."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    if len(s) != len(st.steps) or len(e) != len(st.steps):
        raise ValueError(f"{len(s)} starts and {len(e)} ends for {len(st.steps)} steps")
    steps = StepList(s, e, st.steps.warmup, st.steps._index)
    out = replace(st, steps=steps, **fields)
    out.__dict__.update(_steady_mask=st._steady_mask, warmup_count=st.warmup_count)
    return out
