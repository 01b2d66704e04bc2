"""Steps of one process from its GPU work, with NVTX ranges as a hint (see :mod:`engine.analysis.iterations`).

    st = gpu_steps(trace, pid_key, ranges_table(trace))   # Steps timed on the GPU, or None
    why = no_steps_reason(trace, pid_key)                  # why there are none

The order of preference (``steps.steps_per_process`` applies it):
1. the GPU's work repeats with a loop's marks (:func:`iterations.find_repeat`): steps are its units;
   an NVTX range (or the phases) that repeats once per unit places the boundaries and names them;
2. else a repeating NVTX range that is not a library's (``aten::``, NCCL...) with 3+ instances,
   projected onto the GPU (its instances' first operations), with a low confidence;
3. else no steps, with the reason.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis import iterations as it
from engine.analysis.step_model import (
    Steps,
    _warmup_flags,
    _with,
    is_library_range,
    retimed,
    steps_from_arrays,
)
from engine.analysis.tables import trace_cache
from engine.system.arrays import distinct

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy.typing as npt

    from engine.analysis.ranges import Ranges
    from engine.reports.base import Trace

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
    for code in distinct(names).tolist():
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


def _steps_from_cuts(seq: it.OpSequence, cuts: npt.NDArray[np.int64], name: str, source: str,
                     pk: str, chosen_by: str, method: str, confidence: float, why: str,
                     leading_warmup: int = 0) -> Steps | None:
    cuts = distinct(cuts[(cuts >= 0) & (cuts < seq.n)])
    if len(cuts) < 2:
        return None
    gs, ge, hs, he = it.gpu_step_times(seq, cuts)
    flags = _warmup_flags((ge - gs).tolist())
    for i in range(min(leading_warmup, len(flags) - 1)):
        flags[i] = True
    dur = seq.end - seq.start
    return steps_from_arrays(name, source, pk, gs, ge, flags, int(dur[int(cuts[0]):].sum()), int(dur.sum()),
                             chosen_by=chosen_by, method=method, confidence=confidence, why=why,
                             host_starts=hs, host_ends=he)


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
        st = _steps_from_cuts(seq, first, name, source, pk, "structure", "gpu+nvtx",
                              rep.confidence, f"{base_why}; {how}")
        if st is not None:
            return st
    elif groups:
        top = _top(groups)
        g = max(top, key=lambda a: len(a[1]))
        k = round(float(np.median(np.diff(g[1]))) / max(1, rep.period_ops))
        st = _steps_from_cuts(seq, g[1], g[0], "nvtx", pk, "structure", "gpu+nvtx", rep.confidence,
                              f"{base_why}; NVTX range {g[0]} holds {k} repeats each and marks the step")
        if st is not None:
            return st
    name = f"GPU repeat of {rep.period_ops} ops"
    return _steps_from_cuts(seq, cuts, name, "gpu", pk, "structure", "gpu", rep.confidence, base_why,
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
    got = _steps_from_cuts(seq, first[first >= 0], st.range_name, st.source, st.pid, chosen_by,
                           "nvtx", confidence, why)
    return got if got is not None else st


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
    steady = np.flatnonzero(st._steady_mask[:len(lo)]) if st.steady_count else np.arange(len(lo))
    if not len(steady):
        return None
    with np.errstate(over="ignore"):
        h = it._hashes(seq.token)
        cum = np.concatenate([[np.uint64(0)], np.cumsum(h, dtype=np.uint64)])
        sums = cum[hi[steady]] - cum[lo[steady]]
    keys = list(zip((hi[steady] - lo[steady]).tolist(), sums.tolist(), strict=True))
    common = Counter(keys).most_common(1)[0][0]
    length = common[0]
    same = [k for k, key in zip(steady.tolist(), keys, strict=True) if key == common]
    if not length or not same:
        return None
    idx = lo[np.array(same)][:, None] + np.arange(length)[None, :]
    durs = np.median((seq.end - seq.start)[idx], axis=0).astype(np.float64)
    names = [seq.names.get(int(t), str(t)) for t in seq.token[idx[0]].tolist()]
    return names, durs


def shifted_steps(st: Steps, move: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]]) -> Steps:
    """``st`` with every time moved by ``move`` (another rank's clock lined up with this one's)."""
    hs = None if st.host_starts is None else move(np.asarray(st.host_starts, dtype=np.int64))
    he = None if st.host_ends is None else move(np.asarray(st.host_ends, dtype=np.int64))
    return retimed(st, move(st._starts), move(st._ends), host_starts=hs, host_ends=he)


#: ``--range marker:NAME`` (or ``kernel:NAME``): a step starts at each operation whose name holds NAME
MARKER_PREFIXES = ("marker:", "kernel:")


def marker_steps(trace: Trace, range_name: str) -> list[Steps]:
    """Steps cut by the user at a marker operation, in every process that has it.

    Each operation whose name contains the text after ``marker:`` (a kernel, "memcpy HtoD", "memset")
    starts a step.
    """
    needle = range_name.split(":", 1)[1].strip().lower()
    out = []
    for pk, seq in it.op_sequences(trace).items():
        hits = [t for t, nm in seq.names.items() if needle and needle in nm.lower()]
        if not hits:
            continue
        cuts = np.flatnonzero(np.isin(seq.token, np.array(hits, dtype=np.int64))).astype(np.int64)
        st = _steps_from_cuts(seq, cuts, range_name, "marker", pk, "user", "marker", 1.0,
                              f"a step starts at each of the {len(cuts)} operations named like {needle!r} "
                              "(chosen by the user)")
        if st is not None:
            out.append(st)
    return out
