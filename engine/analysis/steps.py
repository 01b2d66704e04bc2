"""Iterations found by structure: which repeated range is the training (or benchmark) step.

A step is an instance of a repeated NVTX range (nsys) or ``record_function`` annotation (Kineto).
Trailing numbers are normalised, so ``train_step 0`` … ``train_step 39`` are one range
``train_step N`` and PyTorch's ``ProfilerStep#12`` is ``ProfilerStep#N``. Among the ranges that
repeat inside one process, the step is the one whose instances launch the most GPU work (kernels,
copies and memsets whose launching API call starts inside an instance); among ranges within 5 % of
that coverage the one with the most instances wins, so an outer ``epoch`` loses to the
``train_step`` inside it. Library ranges (NCCL, cuBLAS, cuDNN, ``aten::`` operator ranges) are used
only when no other range repeats. Leading steps much slower than the rest are warm-up.

    steps = find_steps(trace)                      # the chosen range, the main process
    steps = find_steps(trace, range_name="train_step N", pid=1234)
    for s in steps_per_process(trace): ...         # one Steps per process that has the range

Every function here is pure (tables in, frozen values out) and never raises on odd input: a trace
with no repeating range gives ``None``.

Steps of one process from its GPU work, with NVTX ranges as a hint (see
:mod:`engine.analysis.iterations`)::

    st = gpu_steps(trace, pid_key, ranges_table(trace))   # Steps timed on the GPU, or None
    why = no_steps_reason(trace, pid_key)                  # why there are none

The order of preference:
1. the GPU's work repeats with a loop's marks (:func:`iterations.find_repeat`): steps are its units;
   an NVTX range (or the phases) that repeats once per unit places the boundaries and names them;
2. else a repeating NVTX range that is not a library's (``aten::``, NCCL...) with 3+ instances,
   projected onto the GPU (its instances' first operations), with a low confidence;
3. else no steps, with the reason.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis import iterations as it
from engine.analysis.tables import corr_keys as corr_keys  # re-exported: callers import them from here
from engine.analysis.tables import disjoint_sorted, unique_first
from engine.analysis.tables import factorize_rows as factorize_rows
from engine.analysis.tables import match_first as match_first
from engine.analysis.tables import pandas_order as pandas_order
from engine.analysis.tables import pid_key as pid_key
from engine.analysis.tables import pid_keys as pid_keys
from engine.analysis.tables import trace_cache as trace_cache

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy.typing as npt
    import pandas as pd

    from engine.analysis.ranges import Ranges
    from engine.reports.base import Trace

#: a range counts as warm-up while it is this many times the median of the steps after it
WARMUP_FACTOR = 1.5
#: a steady step this many times the steady median is an outlier (a stall)
OUTLIER_FACTOR = 1.5
#: ranges whose GPU coverage is within this fraction of the best compete on instance count
COVERAGE_TOLERANCE = 0.95
_TRAILING_NUMBER = re.compile(r"(?<=\D)\d+$")
_LIBRARY_DOMAINS = frozenset({"nccl", "cublas", "cublaslt", "cudnn", "cufft", "cusparse", "cusolver",
                              "curand", "nvshmem", "cutlass", "tensorrt", "nvjpeg"})
_LIBRARY_TEXT = re.compile(
    r"^(aten::|nccl|cublas|cudnn|cufft|cusparse|c10d::|autograd::|record_param_comms)"
    r"|, (op_id|seq) = ", re.IGNORECASE)
_PROFILER_STEP = re.compile(r"^ProfilerStep#N$")
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


def _obj(values: npt.NDArray[Any]) -> Any:
    """A text column kept as Python objects, not copied into Arrow strings.

    A DataFrame would otherwise convert it (seconds for a few hundred thousand rows).
    """
    import pandas as pd

    return pd.Series(values, dtype=object, copy=False)


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


@dataclass(frozen=True)
class RangeCandidate:
    """A range that repeats in one process, with how much GPU work its instances launch."""

    name: str
    pid: str
    count: int
    total_ns: int
    gpu_ns: int
    library: bool

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"name": self.name, "pid": self.pid, "count": self.count, "total_ns": self.total_ns,
                "gpu_ns": self.gpu_ns, "library": self.library}


@dataclass(frozen=True)
class Steps:
    """The iterations of one process.

    Attributes:
        range_name: the normalised range ("train_step N", "NCCL:ncclAllReduce").
        source: "nvtx" (a user range), "profiler" (PyTorch's ProfilerStep#N) or "library".
        pid: the process, as text.
        steps: every instance in time order, warm-up first.
        gpu_ns: GPU time (kernels, copies, memsets) launched inside the steps.
        gpu_total_ns: GPU time launched by the process in the whole capture.
        chosen_by: "structure" (picked here) or "user" (``range_name`` given).

    """

    range_name: str
    source: str
    pid: str
    steps: tuple[Step, ...]
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

    # Derived values are computed once per Steps (a capture can hold 200k steps and the rules ask
    # for them dozens of times); functools.cached_property stores them beside the frozen fields.
    @property
    def count(self) -> int:
        """Number of steps, warm-up included."""
        return len(self.steps)

    @cached_property
    def warmup_count(self) -> int:
        """Leading steps that are warm-up."""
        return sum(1 for s in self.steps if s.warmup)

    @cached_property
    def steady(self) -> tuple[Step, ...]:
        """The steps after warm-up."""
        return tuple(s for s in self.steps if not s.warmup)

    @property
    def durations_ns(self) -> list[int]:
        """Every step's duration, in time order."""
        out: list[int] = self._durations.tolist()
        return out

    @cached_property
    def _durations(self) -> npt.NDArray[np.int64]:
        return self._ends - self._starts

    @cached_property
    def _starts(self) -> npt.NDArray[np.int64]:
        return np.fromiter((s.start_ns for s in self.steps), dtype=np.int64, count=len(self.steps))

    @cached_property
    def _ends(self) -> npt.NDArray[np.int64]:
        return np.fromiter((s.end_ns for s in self.steps), dtype=np.int64, count=len(self.steps))

    @cached_property
    def _steady_mask(self) -> npt.NDArray[np.bool_]:
        return np.fromiter((not s.warmup for s in self.steps), dtype=bool, count=len(self.steps))

    @cached_property
    def steady_median_ns(self) -> float:
        """Median duration of the steady-state steps (all steps when every one is warm-up)."""
        d = self._durations[self._steady_mask] if self.steady else self._durations
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
        m = self._steady_mask if self.steady and len(d) == len(self._steady_mask) else np.ones(len(d), bool)
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
        steady_pad = np.concatenate([[False], self._steady_mask if self.steady else np.ones(len(s), bool)])
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
        steps = tuple(Step(x.index, int(a), int(b), x.warmup)
                      for x, a, b in zip(self.steps, hs.tolist(), he.tolist(), strict=True))
        out = replace(self, steps=steps, host_starts=None, host_ends=None)
        out.__dict__.update(_starts=hs, _ends=he, _steady_mask=self._steady_mask,
                            warmup_count=self.warmup_count)
        return out

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
        if steady_only and self.steady:
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


# -- tables ----------------------------------------------------------------------------------------
def ranges_table(trace: Trace) -> Ranges:
    """Closed ranges: ``start``, ``end``, ``name`` (normalised label), process and thread (see Ranges)."""
    out: Ranges = trace_cache(trace, "ranges", lambda: _ranges_table(trace))
    return out


def _ranges_table(trace: Trace) -> Ranges:
    """Closed push/pop and start/end ranges with their normalised labels, process and thread keys."""
    from engine.analysis.ranges import Ranges, ranges_columns

    fast = ranges_columns(trace, lambda d, t: range_label(d, normalise_range(t)))
    if fast is not None:  # an nsys export: from integer columns, each name labelled once
        return fast
    nv = trace.table("nvtx", ["start", "end", "eventType", "text", "domain", "pid", "tid"])
    r = nv[nv["eventType"].isin([59, 60]) & nv["end"].notna() & nv["start"].notna()]
    if not len(r):
        return Ranges.empty()
    # Each distinct (domain, text) is labelled once: a big trace repeats a few names many times.
    codes, uniq = factorize_rows(r["domain"].fillna("").astype(str).to_numpy(dtype=object),
                                 r["text"].fillna("").astype(str).to_numpy(dtype=object))
    labels = np.array([range_label(d, normalise_range(t)) for d, t in uniq], dtype=object)
    return Ranges.from_labels(r["start"].to_numpy(dtype=np.int64), r["end"].to_numpy(dtype=np.int64),
                              labels[codes], pid_keys(r["pid"]), pid_keys(r["tid"]))


def gpu_ops(trace: Trace) -> pd.DataFrame:
    """Every kernel, copy and memset, with the time its launching API call started (cached per trace).

    Columns: ``start``, ``end``, ``deviceId``, ``streamId``, ``pidk`` (pid as text), ``kind`` and
    ``launch`` (start of the API call that issued it, or its own start when that call is unknown).
    """
    out: pd.DataFrame = trace_cache(trace, "gpu_ops", lambda: _gpu_ops(trace))
    return out


def _gpu_ops(trace: Trace) -> pd.DataFrame:
    """Every kernel, copy and memset, with the time its launching API call started.

    Columns: ``start``, ``end``, ``deviceId``, ``streamId``, ``pidk`` (pid as text), ``kind`` and
    ``launch`` (start of the API call that issued it, or its own start when that call is unknown).
    """
    import pandas as pd

    frames = []
    for kind in ("kernels", "memcpy", "memset"):
        df = trace.table(kind, ["start", "end", "deviceId", "streamId", "correlationId", "pid"])
        if len(df):
            frames.append(df.assign(kind=kind))
    if not frames:
        return pd.DataFrame(columns=["start", "end", "deviceId", "streamId", "pidk", "launch", "kind"])
    ops = pd.concat(frames, ignore_index=True)
    out = pd.DataFrame({
        "start": ops["start"].to_numpy(dtype=np.int64), "end": ops["end"].to_numpy(dtype=np.int64),
        "deviceId": ops["deviceId"].to_numpy(), "streamId": ops["streamId"].to_numpy(),
        "pidk": _obj(pid_keys(ops["pid"])), "kind": _obj(ops["kind"].to_numpy()),
    })
    from engine.analysis.calls import api_calls

    calls = api_calls(trace)
    launch = out["start"].to_numpy(dtype=np.int64).copy()
    if calls.n:
        # join on integers: each op's process key as the calls' process code, with the correlation id
        idx = match_first((calls.codes_of(out["pidk"].to_numpy(object)), corr_keys(ops["correlationId"])),
                          (calls.pid.astype(np.int64), calls.corr))
        got = idx >= 0
        launch[got] = calls.start[idx[got]]
    out["launch"] = launch
    return out


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


# -- candidates and choice -------------------------------------------------------------------------
def range_candidates(trace: Trace, *, pid: Any = None) -> list[RangeCandidate]:
    """Ranges that repeat (≥ 2 instances) in a process, most GPU work first.

    Args:
        trace: any opened nsys or Kineto trace.
        pid: only this process (None: every process; one entry per process and range).

    """
    if pid is None:  # every process: built once per trace
        every = trace_cache(trace, "range_candidates", lambda: _range_candidates(trace, None))
        return list(every)
    return _range_candidates(trace, pid)


def _range_candidates(trace: Trace, pid: Any) -> list[RangeCandidate]:
    r = ranges_table(trace)
    if not len(r):
        return []
    rows = None
    if pid is not None:
        rows = np.flatnonzero(r.pid == r.code(r.pids, pid_key(pid)))
    n_names = max(len(r.names), 1)
    key = r.pid * n_names + r.name if rows is None else r.pid[rows] * n_names + r.name[rows]
    order = np.argsort(key, kind="stable")  # each (process, name)'s rows in table order
    key_s = key[order]
    cuts = np.flatnonzero(np.diff(key_s)) + 1
    first_rows = np.concatenate([[0], cuts])
    counts = np.diff(np.concatenate([first_rows, [len(key_s)]]))
    if rows is not None:
        order = rows[order]
    # Per process: launches sorted once, with the cumulative GPU time, so the GPU time launched
    # inside a range's instances costs two binary searches per instance.
    by_pid: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
    per_pid = launches_per_pid(trace)
    for pk in list(per_pid):
        launch, dur = per_pid.pop(pk)  # dropped as soon as sorted (10M launches: 80 MB each)
        lorder = np.argsort(launch, kind="stable")
        ls, d = launch[lorder], dur[lorder]
        del launch, dur, lorder
        cum = np.zeros(len(d) + 1, dtype=np.int64)
        np.cumsum(d, out=cum[1:])
        by_pid[pk] = (ls, cum)
    groups = []  # (process key, name, rows) of the ranges with 2+ instances, as groupby sorts them
    for lo, n in zip(first_rows.tolist(), counts.tolist(), strict=True):
        if n >= 2:
            k = int(key_s[lo])
            groups.append((r.pids[k // n_names], r.names[k % n_names], order[lo:lo + n]))
    groups.sort(key=lambda g: (g[0], g[1]))
    out: list[RangeCandidate] = []
    for pk, name, sub in groups:
        gpu = 0
        s, e = r.start[sub], r.end[sub]
        if pk in by_pid:
            launch, cum = by_pid[pk]
            bs, be = merged(s, e)
            i0 = np.searchsorted(launch, bs, side="left")
            i1 = np.searchsorted(launch, be, side="left")
            gpu = int((cum[i1] - cum[i0]).sum())
        total = int((e - s).sum())
        out.append(RangeCandidate(name, pk, len(sub), total, gpu, is_library_range(str(name))))
    out.sort(key=lambda c: (-c.gpu_ns, -c.total_ns, c.name))
    return out


def launches_per_pid(trace: Trace) -> dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
    """Process key -> (launch times, durations) of its GPU operations, in row order.

    From ``ops.gpu_op_columns`` (integer columns).
    """

    def make() -> dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
        from engine.analysis.ops import gpu_op_columns

        o = gpu_op_columns(trace)
        res = {}
        for code, pk in enumerate(o.pids):
            if len(o.pids) == 1:  # one process: its columns as they are
                res[pk] = (o.launch, o.dur)
                continue
            mine = o.pid == code
            res[pk] = (o.launch[mine], o.dur[mine])
        return res

    return make()  # not kept: asked twice per trace (candidates, then steps), freed after each


def _choose(cands: list[RangeCandidate]) -> RangeCandidate | None:
    """The step range among one process's candidates (see the module docstring)."""
    for pool in ([c for c in cands if not c.library], [c for c in cands if c.library]):
        if not pool:
            continue
        best_gpu = max(c.gpu_ns for c in pool)
        if best_gpu <= 0:  # no GPU work under any range: the longest repeated range in total
            return max(pool, key=lambda c: (c.total_ns, c.count))
        near = [c for c in pool if c.gpu_ns >= COVERAGE_TOLERANCE * best_gpu]
        return max(near, key=lambda c: (c.count, c.gpu_ns, c.total_ns))
    return None


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


def _matches(name: str, wanted: str) -> bool:
    """True when the user's ``wanted`` (raw or normalised, with or without its domain) is ``name``."""
    w = wanted.strip()
    domain, text = split_label(w)
    norm = range_label(domain, normalise_range(text))
    return name in (w, norm) or split_label(name)[1] == normalise_range(text) and not domain


def _build(r: Ranges, ops: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]],
           pk: str, name: str, chosen_by: str) -> Steps | None:
    rows = np.flatnonzero((r.pid == r.code(r.pids, pk)) & (r.name == r.code(r.names, name)))
    if not len(rows):
        return None
    # Several threads with the range: the thread with the most instances holds the loop (ties:
    # the first to appear, as value_counts orders them).
    tids = r.tid[rows]
    first_seen = unique_first(tids)
    by_appearance = first_seen[0][np.argsort(first_seen[1], kind="stable")]
    counts = np.array([int((tids == t).sum()) for t in by_appearance.tolist()], dtype=np.int64)
    tid = by_appearance[pandas_order(counts, ascending=False)[0]]
    rows = rows[tids == tid]
    rows = rows[np.lexsort((r.end[rows], r.start[rows]))]  # by start, then end
    # Nested instances of the same name (recursion) collapse into their outermost one.
    s, e = merged(r.start[rows], r.end[rows], touching=False)
    durs = (e - s).tolist()
    flags = _warmup_flags(durs)
    steps = tuple(map(Step, range(len(durs)), s.tolist(), e.tolist(), flags))
    gpu = total = 0
    if pk in ops and len(ops[pk][0]):
        launch, d = ops[pk]
        total = int(d.sum())
        gpu = int(d[inside(s, e, launch)].sum())
    if _PROFILER_STEP.match(split_label(name)[1]):
        source = "profiler"
    else:
        source = "library" if is_library_range(name) else "nvtx"
    out = Steps(name, source, pk, steps, gpu, total, chosen_by)
    # the arrays its cached properties would build from the Step objects (200k steps: 0.1 s)
    flag = np.array(flags, dtype=bool)
    out.__dict__.update(_starts=s, _ends=e, _steady_mask=~flag, warmup_count=int(flag.sum()))
    return out


def _rechosen(st: Steps, chosen_by: str) -> Steps:
    """``st`` as chosen by ``chosen_by``, with the arrays it has computed (the same steps)."""
    out = replace(st, chosen_by=chosen_by)
    out.__dict__.update({k: v for k, v in st.__dict__.items() if k in _DERIVED})
    return out


#: Steps' cached properties that depend on its steps only
_DERIVED = frozenset({"_starts", "_ends", "_steady_mask", "warmup_count", "steady", "_durations",
                      "steady_median_ns", "_blocks", "_steady_blocks"})


# Steps of one process from its GPU work, with NVTX ranges as a hint (see the module docstring).

#: an NVTX range places the boundaries when its instances start in this share of the units
ALIGN_SHARE = 0.8


def repeat_of(trace: Trace, pk: str) -> tuple[it.Repeat | None, it.Repeat | None]:
    """(:func:`iterations.find_repeat` of the process, the repeat without loop marks), cached."""
    def make() -> tuple[it.Repeat | None, it.Repeat | None]:
        seq = it.op_sequences(trace).get(pk)
        if seq is None:
            return None, None
        return it.find_repeat(seq, lambda c: it.host_marks(trace, seq, c))

    out: tuple[it.Repeat | None, it.Repeat | None] = trace_cache(trace, f"repeat:{pk}", make)
    return out


def _first_ops(seq: it.OpSequence, s: npt.NDArray[np.int64], e: npt.NDArray[np.int64]
               ) -> npt.NDArray[np.int64]:
    """Index of the first operation launched inside each [s, e) (-1 where none is)."""
    i0 = np.searchsorted(seq.launch, s, side="left")
    i1 = np.searchsorted(seq.launch, e, side="left")
    return np.where(i1 > i0, i0, -1).astype(np.int64)


def _aligned(seq: it.OpSequence, rep: it.Repeat, r: Ranges, pk: str
             ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Non-library ranges of the process that start once per unit, and ones that hold k ≥ 2 units each.

    A range's instances are compared by their first operations: the median distance between them
    (in operations) is the unit's length (aligned) or a whole multiple of it (a group of units: an
    "iteration" range around 16 chunks that each repeat), and 80 % of the distances are within
    10 % of that median. Returns two lists of (name, first operation of each instance, total
    duration, first start, starts, ends).
    """
    pcode = r.code(r.pids, pk)
    if pcode < 0:
        return [], []
    mine = np.flatnonzero(r.pid == pcode)
    aligned: list[tuple[Any, ...]] = []
    groups: list[tuple[Any, ...]] = []
    names = r.name[mine]
    period = max(1, rep.period_ops)
    for code in np.unique(names).tolist():
        label = r.names[code]
        if is_library_range(label):
            continue
        rows = mine[names == code]
        if len(rows) < 3:
            continue
        rows = rows[np.argsort(r.start[rows], kind="stable")]
        first = _first_ops(seq, r.start[rows], r.end[rows])
        ok = first >= 0
        if ok.sum() < 3:
            continue
        d = np.diff(first[ok])
        med = float(np.median(d))
        if med <= 0 or float((np.abs(d - med) <= 0.1 * med + 1).mean()) < ALIGN_SHARE:
            continue
        ratio = med / period
        entry = (label, first[ok], int((r.end[rows] - r.start[rows]).sum()), int(r.start[rows[0]]),
                 r.start[rows], r.end[rows])
        if abs(ratio - 1) <= 0.1:
            aligned.append(entry)
        elif ratio >= 1.9 and abs(ratio - round(ratio)) <= 0.1 * ratio:
            groups.append(entry)
    return aligned, groups


def _inside(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """True when most instances of range ``a`` start inside an instance of ``b``."""
    k = np.searchsorted(b[4], a[4], side="right") - 1
    ok = (k >= 0) & (a[4] < b[5][np.maximum(k, 0)])
    return float(ok.mean()) >= 0.8


def _top(ranges: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The ranges not inside a longer one of the list, in the order their first instances start."""
    top = [a for a in ranges if not any(b is not a and b[2] > a[2] and _inside(a, b) for b in ranges)]
    return sorted(top, key=lambda a: a[3])


def _steps_from_cuts(trace: Trace, seq: it.OpSequence, cuts: npt.NDArray[np.int64], name: str, source: str,
                     pk: str, chosen_by: str, method: str, confidence: float, why: str,
                     leading_warmup: int = 0) -> Steps | None:
    cuts = np.unique(cuts[(cuts >= 0) & (cuts < seq.n)])
    if len(cuts) < 2:
        return None
    gs, ge, hs, he = it.gpu_step_times(seq, cuts)
    durs = (ge - gs).tolist()
    flags = _warmup_flags(durs)
    for i in range(min(leading_warmup, len(flags) - 1)):
        flags[i] = True
    steps = tuple(map(Step, range(len(durs)), gs.tolist(), ge.tolist(), flags))
    dur = seq.end - seq.start
    total = int(dur.sum())
    gpu = int(dur[int(cuts[0]):].sum())
    out = Steps(name, source, pk, steps, gpu, total, chosen_by, method, confidence, why, hs, he)
    flag = np.array(flags, dtype=bool)
    out.__dict__.update(_starts=gs, _ends=ge, _steady_mask=~flag, warmup_count=int(flag.sum()))
    return out


def gpu_steps(trace: Trace, pk: str, r: Ranges) -> Steps | None:
    """The steps of process ``pk`` from its GPU work (see the module docstring), or None."""
    seq = it.op_sequences(trace).get(pk)
    if seq is None:
        return None
    rep, _bare = repeat_of(trace, pk)
    if rep is None:
        return None
    cuts = it.boundary_rotation(seq, rep)
    # leading units without the common content are setup, not steps: keep only the last one of them
    first_modal = int(np.argmax(rep.modal)) if rep.modal.any() else 0
    lead = 0
    if first_modal > 0 and len(cuts) == len(rep.cuts):
        # the unit just before the first common one is a warm-up step when it is about as long
        # (first-step extras: optimizer state, cuDNN/cuBLAS choices); else it is set-up, left out
        n_lead = int(cuts[first_modal] - cuts[first_modal - 1])
        keep = 0.5 * rep.period_ops <= n_lead <= 2 * rep.period_ops
        cuts = cuts[first_modal - 1:] if keep else cuts[first_modal:]
        lead = 1 if keep else 0
    marks = it.describe_anchors(rep.anchors)
    base_why = (f"the GPU's work repeats every {rep.period_ops} operations ({rep.count} times, cut at "
                f"{rep.marker}); each repeat holds {marks}")
    aligned, groups = _aligned(seq, rep, r, pk) if len(r) else ([], [])
    if aligned:
        # ranges inside another aligned range are its phases; the outermost ones place the boundaries
        top = _top(aligned)
        if len(top) == 1:
            name, first = top[0][0], top[0][1]
            how = f"NVTX range {name} marks each step"
        else:
            name = " → ".join(a[0] for a in top)
            first = top[0][1]
            how = f"NVTX phases {name} tile each step"
        source = "profiler" if name.startswith("ProfilerStep#") else "nvtx"
        st = _steps_from_cuts(trace, seq, first, name, source, pk, "structure", "gpu+nvtx",
                              rep.confidence, f"{base_why}; {how}")
        if st is not None:
            return st
    elif groups:
        top = _top(groups)
        g = max(top, key=lambda a: len(a[1]))
        k = round(float(np.median(np.diff(g[1]))) / max(1, rep.period_ops))
        st = _steps_from_cuts(trace, seq, g[1], g[0], "nvtx", pk, "structure", "gpu+nvtx", rep.confidence,
                              f"{base_why}; NVTX range {g[0]} holds {k} repeats each and marks the step")
        if st is not None:
            return st
    name = f"GPU repeat of {rep.period_ops} ops"
    return _steps_from_cuts(trace, seq, cuts, name, "gpu", pk, "structure", "gpu", rep.confidence, base_why,
                            leading_warmup=lead)


def nvtx_steps_on_gpu(trace: Trace, st: Steps, why: str, confidence: float, chosen_by: str) -> Steps:
    """NVTX steps (host ranges) timed on the GPU: each instance from its first operation's start.

    Instances that launch nothing keep their host times (the process has no GPU work in them).
    """
    seq = it.op_sequences(trace).get(st.pid)
    host_s, host_e = st.starts_ns, st.ends_ns
    if seq is None or not seq.n:
        return _with(st, why=why, confidence=confidence, method="nvtx", chosen_by=chosen_by,
                     host_starts=host_s, host_ends=host_e)
    first = _first_ops(seq, host_s, host_e)
    if (first >= 0).sum() < 2:
        return _with(st, why=why, confidence=confidence, method="nvtx", chosen_by=chosen_by,
                     host_starts=host_s, host_ends=host_e)
    got = _steps_from_cuts(trace, seq, first[first >= 0], st.range_name, st.source, st.pid, chosen_by,
                           "nvtx", confidence, why)
    return got if got is not None else st


def _with(st: Steps, **kw: Any) -> Steps:
    out = replace(st, **kw)
    out.__dict__.update({k: v for k, v in st.__dict__.items() if k in _DERIVED})
    return out


def no_steps_reason(trace: Trace, pk: str | None = None) -> str:
    """Why a process (the busiest when None) has no steps: one sentence."""
    seqs = it.op_sequences(trace)
    if not seqs:
        return "no repeating steps: the capture has no GPU work"
    if pk is None or pk not in seqs:
        pk = max(seqs, key=lambda k: seqs[k].n)
    rep, bare = repeat_of(trace, pk)
    if rep is not None:
        return ""
    seq = seqs[pk]
    n = seq.n
    uniq, counts = np.unique(seq.token, return_counts=True)
    top = int(np.argmax(counts)) if len(counts) else -1
    if top >= 0 and counts[top] >= 3 and counts[top] >= 0.5 * n:
        name = seq.names.get(int(uniq[top]), "one operation")
        return (f"no repeating steps: one operation ({name[:60]}) runs {int(counts[top])} times of the "
                f"capture's {n}: a micro-benchmark or one repeated kernel, not a loop of steps; findings "
                f"speak of the whole capture")
    if bare is not None:
        return (f"no repeating steps: the GPU's work repeats every {bare.period_ops} operations "
                f"({bare.count} times) but nothing in a repeat marks a loop iteration (no copy to or "
                f"from the host, synchronization, collective, graph launch or optimizer kernel): "
                f"identical layers of one pass, not steps; name a range with --range to choose steps "
                f"yourself")
    return (f"no repeating steps: the {n} GPU operations of the capture do not repeat (a single pass "
            f"or a one-off run); findings speak of the whole capture")


def typical_unit(trace: Trace, st: Steps) -> tuple[list[str], npt.NDArray[np.float64]] | None:
    """The most common operation sequence of the steady steps, with each position's median duration.

    A step's operations are those launched between its host-side start and the next step's; the
    steady steps with the most common sequence of tokens give the names and the per-position
    median GPU durations (what one step runs). None when the steps have no host times.
    """
    seq = it.op_sequences(trace).get(st.pid)
    if seq is None or st.host_starts is None or st.count < 2:
        return None
    hs = np.asarray(st.host_starts, dtype=np.int64)
    lo = np.searchsorted(seq.launch, hs, side="left")
    hi = np.append(lo[1:], seq.n)
    steady = np.flatnonzero(st._steady_mask[:len(lo)]) if st.steady else np.arange(len(lo))
    if not len(steady):
        return None
    with np.errstate(over="ignore"):
        h = it._hashes(seq.token)
        cum = np.concatenate([[np.uint64(0)], np.cumsum(h, dtype=np.uint64)])
        sums = cum[hi[steady]] - cum[lo[steady]]
    keys = list(zip((hi[steady] - lo[steady]).tolist(), sums.tolist(), strict=True))
    (length, _), _n = Counter(keys).most_common(1)[0]
    same = [k for k, key in zip(steady.tolist(), keys, strict=True)
            if key == Counter(keys).most_common(1)[0][0]]
    if not length or not same:
        return None
    idx = lo[np.array(same)][:, None] + np.arange(length)[None, :]
    durs = np.median((seq.end - seq.start)[idx], axis=0).astype(np.float64)
    names = [seq.names.get(int(t), str(t)) for t in seq.token[idx[0]].tolist()]
    return names, durs


def shifted_steps(st: Steps, move: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]]) -> Steps:
    """``st`` with every time moved by ``move`` (another rank's clock lined up with this one's)."""
    s, e = move(st._starts), move(st._ends)
    steps = tuple(Step(x.index, int(a), int(b), x.warmup)
                  for x, a, b in zip(st.steps, s.tolist(), e.tolist(), strict=True))
    hs = None if st.host_starts is None else move(np.asarray(st.host_starts, dtype=np.int64))
    he = None if st.host_ends is None else move(np.asarray(st.host_ends, dtype=np.int64))
    out = replace(st, steps=steps, host_starts=hs, host_ends=he)
    out.__dict__.update(_starts=s, _ends=e, _steady_mask=st._steady_mask, warmup_count=st.warmup_count)
    return out


def steps_per_process(trace: Trace, *, range_name: str | None = None) -> list[Steps]:
    """The steps of every process that has a repeating range, the busiest process first.

    Args:
        trace: any opened nsys or Kineto trace.
        range_name: use this range (raw or normalised, with or without ``domain:``) instead of
            the one chosen by structure.

    """
    # Built once per trace and range (the summary and the findings rules both ask); Steps is frozen.
    every: list[Steps] = trace_cache(trace, f"steps_per_process:{range_name!r}",
                                     lambda: _steps_per_process(trace, range_name))
    return list(every)


def _steps_per_process(trace: Trace, range_name: str | None) -> list[Steps]:
    from engine.analysis.iterations import op_sequences

    if range_name is not None:  # the name of steps found by structure ("GPU repeat of 64 ops", phases)
        same = [st for st in steps_per_process(trace) if st.range_name == range_name]
        if same:
            return same

    r = ranges_table(trace)
    seqs = op_sequences(trace)
    out: list[Steps] = []
    import os

    # KERNELSCOPE_STEPS=nvtx: NVTX ranges only, as before issue 22 (to measure what the GPU's adds)
    if range_name is None and os.environ.get("KERNELSCOPE_STEPS", "") != "nvtx":
        # 1. the GPU's own work (NVTX ranges only place the boundaries)
        for pk in seqs:
            st = gpu_steps(trace, pk, r)
            if st is not None:
                out.append(st)
    done = {s.pid for s in out}
    if len(r):
        ops = launches_per_pid(trace)
        cands = range_candidates(trace)
        for pk in dict.fromkeys(c.pid for c in cands):
            if pk in done:
                continue
            mine = [c for c in cands if c.pid == pk]
            if range_name is not None:
                pick = next((c for c in mine if _matches(c.name, range_name)), None)
                chosen_by = "user"
            else:
                # 2. an NVTX range of the program's own (never a library's or one per operator)
                # with 3+ instances, where the GPU's work does not repeat
                pick, chosen_by = _choose([c for c in mine if not c.library and c.count >= 3]), "structure"
            if pick is None:
                continue
            name = pick.name
            st = trace_cache(trace, f"steps_build:{pk!r}:{name!r}",
                             lambda pk=pk, name=name: _build(r, ops, pk, name, "structure"))
            if st is None:
                continue
            if chosen_by == "user":
                why, conf = f"NVTX range {name} named by the user, timed on the GPU", 1.0
            else:
                why, conf = (f"the GPU's work does not repeat; NVTX range {name} repeats {st.count} times "
                             "(timed on the GPU from each instance's first operation)"), 0.4
            out.append(nvtx_steps_on_gpu(trace, st, why, conf, chosen_by))
    out.sort(key=lambda s: (-s.gpu_total_ns, -s.count, s.pid))
    return out


def find_steps(trace: Trace, *, pid: Any = None, range_name: str | None = None) -> Steps | None:
    """The iterations of one process.

    Args:
        trace: any opened nsys or Kineto trace.
        pid: the process (None: the process that launched the most GPU work among those with a
            repeating range).
        range_name: use this range instead of the one chosen by structure (see
            :func:`steps_per_process`).

    Returns:
        The steps, or None when no range repeats (or ``range_name`` is not in the trace).

    """
    every = steps_per_process(trace, range_name=range_name)
    if pid is None:
        return every[0] if every else None
    want = pid_key(pid)
    return next((s for s in every if s.pid == want), None)


def range_names(trace: Trace) -> list[str]:
    """Every repeating range (normalised), most GPU work first: the choices offered to users."""
    seen: dict[str, int] = {}
    for c in range_candidates(trace):
        seen[c.name] = seen.get(c.name, 0) + c.gpu_ns
    return sorted(seen, key=lambda n: -seen[n])
