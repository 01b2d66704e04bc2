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

Steps are found first from the GPU's own work (:mod:`engine.analysis.stepfind`, NVTX ranges only
placing and naming the boundaries); the NVTX structure below is the fallback where the GPU's work does
not repeat, and the path for a range the user names. The values are in :mod:`engine.analysis.step_model`
(re-exported here).
"""


from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis import stepfind
from engine.analysis.file_backed import filled, hand_back
from engine.analysis.step_model import _DERIVED as _DERIVED
from engine.analysis.step_model import OUTLIER_FACTOR as OUTLIER_FACTOR
from engine.analysis.step_model import WARMUP_FACTOR as WARMUP_FACTOR
from engine.analysis.step_model import Step as Step
from engine.analysis.step_model import Steps as Steps
from engine.analysis.step_model import _inside_blocks as _inside_blocks
from engine.analysis.step_model import _warmup_flags as _warmup_flags
from engine.analysis.step_model import inside as inside
from engine.analysis.step_model import is_library_range as is_library_range
from engine.analysis.step_model import merged as merged
from engine.analysis.step_model import normalise_range as normalise_range
from engine.analysis.step_model import range_label as range_label
from engine.analysis.step_model import split_label as split_label
from engine.analysis.step_model import steps_from_arrays
from engine.analysis.tables import UNION_CHUNK, blocks_sorted, unique_first
from engine.analysis.tables import corr_keys as corr_keys  # re-exported: callers import them from here
from engine.analysis.tables import factorize_rows as factorize_rows
from engine.analysis.tables import match_first as match_first
from engine.analysis.tables import pandas_order as pandas_order
from engine.analysis.tables import pid_key as pid_key
from engine.analysis.tables import pid_keys as pid_keys
from engine.analysis.tables import trace_cache as trace_cache

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd

    from engine.analysis.ranges import Ranges
    from engine.reports.base import Trace

#: ranges whose GPU coverage is within this fraction of the best compete on instance count
COVERAGE_TOLERANCE = 0.95
_PROFILER_STEP = re.compile(r"^ProfilerStep#N$")


def _obj(values: npt.NDArray[Any]) -> Any:
    """A text column kept as Python objects, not copied into Arrow strings.

    A DataFrame would otherwise convert it (seconds for a few hundred thousand rows).
    """
    import pandas as pd

    return pd.Series(values, dtype=object, copy=False)


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
    if len(order) < 2**31:
        order = order.astype(np.int32)  # (20M ranges: 80 MB less held while the groups are measured)
    key_s = key[order]
    del key
    cuts = np.flatnonzero(np.diff(key_s)) + 1
    first_rows = np.concatenate([[0], cuts])
    counts = np.diff(np.concatenate([first_rows, [len(key_s)]]))
    group_keys = key_s[first_rows]
    del key_s, cuts
    if rows is not None:
        order = rows[order]
    # Per process: launches sorted once, with the cumulative GPU time, so the GPU time launched
    # inside a range's instances costs two binary searches per instance.
    by_pid: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
    per_pid = launches_per_pid(trace)
    for pk in list(per_pid):
        launch, dur = per_pid.pop(pk)  # dropped as soon as sorted (10M launches: 80 MB each)
        if len(launch) < 2 or bool((launch[1:] >= launch[:-1]).all()):
            ls, d = launch, dur  # (in launch order already: the op sequences)
        else:
            lorder = np.argsort(launch, kind="stable")
            ls, d = launch[lorder], dur[lorder]
            del lorder
        del launch, dur
        by_pid[pk] = (ls, running_sums(d))
        del d
    groups = []  # (process key, name, rows) of the ranges with 2+ instances, as groupby sorts them
    for lo, n, k in zip(first_rows.tolist(), counts.tolist(), group_keys.tolist(), strict=True):
        if n >= 2:
            groups.append((r.pids[k // n_names], r.names[k % n_names], order[lo:lo + n]))
    groups.sort(key=lambda g: (g[0], g[1]))
    out: list[RangeCandidate] = []
    for pk, name, sub in groups:
        gpu = 0
        s, e = r.start[sub], r.end[sub]
        total = int((e - s).sum())
        if pk in by_pid:
            # ranges in start order (the usual case): merged a chunk at a time, no sort
            bs, be = blocks_sorted(s, e) if _starts_rise(s) else merged(s, e)
            del s, e
            gpu = _launched_in(*by_pid[pk], bs, be)
            del bs, be
        out.append(RangeCandidate(name, pk, len(sub), total, gpu, is_library_range(str(name))))
    out.sort(key=lambda c: (-c.gpu_ns, -c.total_ns, c.name))
    return out


def _launched_in(launch: npt.NDArray[np.int64], cum: npt.NDArray[np.int64], bs: npt.NDArray[np.int64],
                 be: npt.NDArray[np.int64]) -> int:
    """GPU time of the operations launched inside the blocks [bs, be) (``cum``: running sums).

    A chunk of blocks at a time, the mapped pages of ``launch`` and ``cum`` handed back after each.
    """
    gpu = 0
    for lo in range(0, len(bs), UNION_CHUNK):
        i0 = np.searchsorted(launch, bs[lo:lo + UNION_CHUNK], side="left")
        i1 = np.searchsorted(launch, be[lo:lo + UNION_CHUNK], side="left")
        gpu += int((cum[i1] - cum[i0]).sum())
        hand_back()
    return gpu


def running_sums(d: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """0, then the running sums of ``d`` (int64), a chunk at a time into a file mapping when big.

    ``np.concatenate([[0], np.cumsum(d)])`` without a full-length temporary on the heap
    (``file_backed.filled``: 35M operations, 0.28 GB).
    """
    return running_sums_by(len(d), lambda lo, hi: d[lo:hi])


def running_sums_by(n: int, values: Callable[[int, int], npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    """:func:`running_sums` of ``n`` values given a chunk at a time (``values(lo, hi)``: rows lo:hi).

    The mapped pages read are handed back after each chunk (``file_backed.hand_back``).
    """
    carry = [0]  # the sum of the values before the chunk being filled

    def fill(lo: int, hi: int) -> npt.NDArray[np.int64]:
        v = np.asarray(values(lo, min(hi, n)), dtype=np.int64)  # row i of the sums needs values < i
        part = np.empty(hi - lo, dtype=np.int64)
        part[0] = carry[0]
        np.cumsum(v[:hi - lo - 1], out=part[1:])
        part[1:] += carry[0]
        carry[0] = int(part[-1]) + (int(v[hi - lo - 1]) if len(v) == hi - lo else 0)
        hand_back()
        return part

    return filled(n + 1, np.int64, fill)


def _starts_rise(s: npt.NDArray[np.int64]) -> bool:
    """True when ``s`` never falls (checked a chunk at a time)."""
    for lo in range(0, len(s), UNION_CHUNK):
        c = s[lo:lo + UNION_CHUNK + 1]
        if not bool((c[1:] >= c[:-1]).all()):
            return False
    return True


def launches_per_pid(trace: Trace) -> dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
    """Process key -> (launch times, durations) of its GPU operations.

    From the op sequences (``iterations.op_sequences``: cached, in launch order) where they are built,
    else from ``ops.gpu_op_columns`` in row order. Every caller sums durations over launch windows:
    the order of the operations does not change what it reads.
    """
    from engine.analysis.iterations import op_sequences
    from engine.analysis.ops import gpu_op_columns

    o = gpu_op_columns(trace)
    seqs = op_sequences(trace)
    if seqs and sum(q.n for q in seqs.values()) == o.n:  # no 35M-row launch join again (big10m)
        return {pk: (q.launch, _durations(q.start, q.end)) for pk, q in seqs.items()}
    res = {}
    for code, pk in enumerate(o.pids):
        if len(o.pids) == 1:  # one process: its columns as they are
            res[pk] = (o.launch, o.dur)
            continue
        mine = o.pid == code
        res[pk] = (o.launch[mine], o.dur[mine])
    return res  # not kept: asked twice per trace (candidates, then steps), freed after each


def _durations(start: npt.NDArray[np.int64], end: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``end - start``, a chunk at a time into a file mapping when big, the mapped pages read handed back."""
    def part(lo: int, hi: int) -> npt.NDArray[np.int64]:
        out: npt.NDArray[np.int64] = end[lo:hi] - start[lo:hi]
        hand_back()
        return out

    return filled(len(start), np.result_type(end, start), part)


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
    flags = _warmup_flags((e - s).tolist())
    gpu = total = 0
    if pk in ops and len(ops[pk][0]):
        launch, d = ops[pk]
        total = int(d.sum())
        gpu = int(d[inside(s, e, launch)].sum())
    if _PROFILER_STEP.match(split_label(name)[1]):
        source = "profiler"
    else:
        source = "library" if is_library_range(name) else "nvtx"
    return steps_from_arrays(name, source, pk, s, e, flags, gpu, total, chosen_by=chosen_by)


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

    if range_name is not None and range_name.startswith(stepfind.MARKER_PREFIXES):
        found = stepfind.marker_steps(trace, range_name)
        return sorted(found, key=lambda s: (-s.gpu_total_ns, -s.count, s.pid))
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
            st = stepfind.gpu_steps(trace, pk, r)
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
            out.append(stepfind.nvtx_steps_on_gpu(trace, st, why, conf, chosen_by))
    out.sort(key=lambda s: (-s.gpu_total_ns, -s.count, s.pid))
    return out


def summary_steps(trace: Trace, iterations: Any) -> list[Steps]:
    """The steps a summary's ``iterations`` were measured in, every process's.

    As the summary chose them: found by structure, or the range the user named.
    """
    name = iterations.range if iterations.chosen_by == "user" else None
    return steps_per_process(trace, range_name=name)


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
