"""Steps found from the GPU's own work: the period of the repeating sequence of operations.

A training (or decode, or benchmark) loop makes each GPU run the same sequence of kernels, copies
and memsets again and again. Per process, the operations are put in program order (by the start of
the API call that issued them, ``GpuOps.launch``) and each is given a token (its kernel name, its
copy direction, "memset"). A marker that occurs once per iteration cuts the sequence into units
that all hold the same tokens the same number of times; the step is the finest such cut:

- candidate markers are tokens and runs of 2 or 3 tokens whose places are evenly spread, found in a
  window of the middle of a long sequence; per count of places, the most even one;
- a cut is a *repeat* when at least :data:`SEGMENT_SHARE` of its units have the most common
  content (an order-free hash of their tokens) and those units hold at least :data:`OP_SHARE` of
  the operations (a layer repeated inside a step fails the second test: the unit that holds the
  loss, the backward pass and the optimizer is one of many but holds most of the work); where the
  content varies (a decode loop's GEMMs change with the sequence length) units match loosely (as
  many operations ±10 %, half of them the same kinds); units that differ in a cycle of k (half
  steps, accumulated micro-batches) are parts of a step, left to a coarser cut, unless each unit
  holds every loop mark on its own (its copy and its optimizer update: steps whose inputs cycle,
  such as sequence lengths taken in turn, which are steps however their GEMMs differ);
- the repeat with the most units is the step (an every-other-step marker gives a coarser one).

A repeat is taken as a step only when each unit holds something a loop iteration does and a layer
does not: a copy between host and GPU, a blocking synchronization, a collective, a graph launch or
an optimizer kernel. Otherwise (one inference pass through identical layers, a single kernel timed
in a loop) there are no steps, and :func:`engine.analysis.stepfind.no_steps_reason` says why.

Units are timed on the GPU (:func:`gpu_step_times`: they tile the GPU's time, so their durations
are the job's pace), with the host-side time of each beside it. NVTX ranges only place and name the
boundaries (:mod:`engine.analysis.stepfind`).

Everything here is numpy over integer columns (no Python object per operation or per step).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from engine.analysis.tables import small_codes, trace_cache
from engine.reports.base import NULL
from engine.system.arrays import distinct

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy.typing as npt

    from engine.reports.base import Trace

#: a cut is a repeat when this share of its segments have the most common content ...
SEGMENT_SHARE = 0.8
#: ... and those segments hold this share of the operations between the first and last cut
OP_SHARE = 0.6
#: the looped region (first to last cut) must hold this share of the operations or of the GPU time span
GPU_SHARE = 0.3
#: at most this many distinct counts are tried, and at most this many operations hashed per try
MAX_COUNTS = 64
WINDOW_OPS = 400_000
#: candidate markers are looked for in this many operations from the middle of a long sequence
MARKER_WINDOW = 60_000
#: token bases: kernels by name code; copies and memsets apart
_COPY, _MEMSET = 1 << 40, 1 << 41
_OPTIMIZER = ("multi_tensor_apply", "adam", "sgd", "lamb", "lion", "optimizer", "fused_", "_foreach")
_COLLECTIVE = ("nccl", "allreduce", "all_reduce", "allgather", "reducescatter", "reduce_scatter",
               "alltoall", "broadcast", "sendrecv")
_GRAPH_CALLS = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})


@dataclass(frozen=True)
class OpSequence:
    """One process's GPU operations in program order (the order their API calls started).

    Attributes:
        rows: each operation's row in ``gpu_op_columns(trace)``.
        token: int64 token per operation (kernel name code; copies and memsets apart).
        launch, start, end: int64 ns (host launch, GPU start and end).
        names: token -> display name, for the tokens that occur.

    """

    pid: str
    rows: npt.NDArray[np.int64]
    token: npt.NDArray[np.int64]
    launch: npt.NDArray[np.int64]
    start: npt.NDArray[np.int64]
    end: npt.NDArray[np.int64]
    names: dict[int, str]

    @property
    def n(self) -> int:
        """Number of operations."""
        return len(self.rows)


@dataclass(frozen=True)
class Repeat:
    """The GPU work of one process cut into units that repeat (see the module docstring).

    Attributes:
        cuts: index (into the OpSequence) of each unit's first operation, ascending.
        period_ops: operations per unit (the median).
        op_share: share of the operations in units of the common content.
        segment_share: share of the units that have the common content.
        modal: which units have the common content.
        marker: the token that cuts it, with its name.
        anchors: what in each unit makes it a loop iteration ("copy", "sync", "collective", ...).

    """

    cuts: npt.NDArray[np.int64]
    period_ops: int
    op_share: float
    segment_share: float
    modal: npt.NDArray[np.bool_]
    marker: str
    anchors: tuple[str, ...]

    @property
    def count(self) -> int:
        """Number of units."""
        return len(self.cuts)

    @property
    def confidence(self) -> float:
        """How sure the cut is (0..1): the shares of units and operations that repeat exactly."""
        return round(min(1.0, self.op_share) * min(1.0, self.segment_share / 0.95), 3)


def op_sequences(trace: Trace) -> dict[str, OpSequence]:
    """Every process's operations in program order, with tokens (built once per trace)."""
    out: dict[str, OpSequence] = trace_cache(trace, "op_sequences", lambda: _op_sequences(trace))
    return out


def _tokens(trace: Trace, counts: dict[str, int]) -> tuple[npt.NDArray[np.int64], dict[int, str]]:
    """A token per operation in ``gpu_op_columns`` order (kernels, copies, memsets), with names."""
    parts: list[npt.NDArray[np.int64]] = []
    names: dict[int, str] = {}
    n_k = counts.get("kernels", 0)
    if n_k:
        codes, labels = _kernel_names(trace, n_k)
        parts.append(codes)
        names.update(enumerate(labels))
    n_c = counts.get("memcpy", 0)
    if n_c:
        kinds = _copy_kinds(trace, n_c)
        parts.append(_COPY + kinds)
        for k in distinct(kinds).tolist():
            names[_COPY + int(k)] = _COPY_NAMES.get(int(k), f"memcpy kind {k}")
    n_s = counts.get("memset", 0)
    if n_s:
        parts.append(np.full(n_s, _MEMSET, dtype=np.int64))
        names[_MEMSET] = "memset"
    if not parts:
        return np.zeros(0, dtype=np.int64), names
    return np.concatenate(parts).astype(np.int64, copy=False), names


_COPY_NAMES = {1: "memcpy HtoD", 2: "memcpy DtoH", 8: "memcpy DtoD", 10: "memcpy PtoP", 3: "memcpy HtoA",
               4: "memcpy AtoH", 11: "memcpy HtoH"}


def _kernel_names(trace: Trace, n: int) -> tuple[npt.NDArray[np.int64], list[str]]:
    """Kernel name codes (short names where the trace has any, else full names) and each code's name.

    From the names' ids (``trace.columns("kernels", ...)``, texts in ``trace.strings()``), coded in
    order of first appearance (a few names among many kernels: no sort of every row); a kernel
    without a name is named "".
    """
    ids = np.zeros(0, dtype=np.int64)
    for col in ("shortNameId", "nameId"):
        ids = np.asarray(trace.columns("kernels", [col])[col], dtype=np.int64)
        if not n or bool((ids != NULL).any()):
            break
    if len(ids) != n:
        return np.zeros(n, dtype=np.int64), ["kernel"]
    null = ids == NULL
    has_null = bool(null.any())
    # NULL as code 0 (named ""), every id one up: small_codes takes non-negative values
    codes, uniq = small_codes(np.where(null, 0, ids + 1) if has_null else ids)
    strings = trace.strings()
    names = [str(strings.get(int(u), int(u))) for u in (uniq - 1 if has_null else uniq).tolist()]
    if has_null:
        names = ["" if int(u) == 0 else x for u, x in zip(uniq.tolist(), names, strict=True)]
    merged: dict[str, int] = {}  # one code per distinct name ("" and a NULL name, say)
    remap = np.array([merged.setdefault(x, len(merged)) for x in names] or [0], dtype=np.int64)
    out = np.asarray(codes, dtype=np.int64)
    return (remap[out] if len(merged) < len(names) else out), list(merged)


def _copy_kinds(trace: Trace, n: int) -> npt.NDArray[np.int64]:
    """Each copy's kind (1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP ...), 0 unknown."""
    k = np.asarray(trace.columns("memcpy", ["copyKind"])["copyKind"], dtype=np.int64)
    if len(k) != n:
        return np.zeros(n, dtype=np.int64)
    return np.where(k < 0, 0, k)


def _op_sequences(trace: Trace) -> dict[str, OpSequence]:
    from engine.analysis.file_backed import move_to_files
    from engine.analysis.ops import gpu_op_columns

    o = gpu_op_columns(trace)
    if not o.n:
        return {}
    tok, names = _tokens(trace, o.counts)
    if len(tok) != o.n:
        return {}
    launch = o.launch
    out: dict[str, OpSequence] = {}
    for code, pk in enumerate(o.pids):
        if len(o.pids) > 1:
            rows = np.flatnonzero(o.pid == code)
            rows = rows[np.lexsort((o.start[rows], launch[rows]))].astype(np.int64)
        else:  # one process: its columns sorted as they are (no copies of 35M-row columns)
            rows = np.lexsort((o.start, launch)).astype(np.int64, copy=False)
        # each column to a file mapping as it is built (file_backed): a 35M-op report's five
        # 280 MB columns are not all on the heap beside their sources at once
        rows = move_to_files(rows)
        t = move_to_files(tok[rows])
        labels = {int(k): names.get(int(k), str(k)) for k in distinct(t).tolist()}
        out[pk] = OpSequence(pk, rows, t, move_to_files(launch[rows]), move_to_files(o.start[rows]),
                             move_to_files(o.end[rows]), labels)
    return out


# -- the repeat ----------------------------------------------------------------------------------
def _hashes(token: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    """A random 64-bit value per token (the same for a token wherever it occurs)."""
    x = (token.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15))
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    out: npt.NDArray[np.uint64] = x ^ (x >> np.uint64(31))
    return out


def _markers(tok: npt.NDArray[np.int64], h: npt.NDArray[np.uint64]
             ) -> list[tuple[int, float, npt.NDArray[np.int64], str]]:
    """Candidate cuts: (count, spread, positions, label) of tokens and of 2- and 3-token runs.

    A run ("memcpy HtoD after multi_tensor_apply_kernel") is once per step where every single token
    occurs several times per step. Only evenly spread candidates (spread ≤ 0.5) are kept; per count,
    the most even one.
    """
    n = len(tok)
    best: dict[int, tuple[float, npt.NDArray[np.int64], str]] = {}
    key = h
    for g in (1, 2, 3):
        if g > 1:
            with np.errstate(over="ignore"):
                key = key[:-1] * np.uint64(0x100000001B3) ^ h[g - 1:]  # runs ending at i + g - 1
        uniq, inv, counts = np.unique(key, return_inverse=True, return_counts=True)
        ok = np.flatnonzero((counts >= 3) & (counts <= n // 2))
        if not len(ok):
            continue
        order = np.argsort(inv, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(counts)])
        # the 400 most frequent keys per order at most (every count of interest has them)
        ok = ok[np.argsort(-counts[ok], kind="stable")][:400]
        for k in ok.tolist():
            pos = order[bounds[k]:bounds[k + 1]].astype(np.int64) + (g - 1)
            gaps = np.diff(pos)
            med = float(np.median(gaps))
            if med < 2:
                continue
            spread = float(np.mean(np.abs(gaps - med))) / med
            c = len(pos)
            if spread > 0.5 or (c in best and best[c][0] <= spread):
                continue
            best[c] = (spread, pos, f"{g}:{int(tok[pos[0]])}")
    return sorted(((c, sp, pos, lab) for c, (sp, pos, lab) in best.items()), key=lambda x: -x[0])


def find_repeat(seq: OpSequence,
                host_anchors: Callable[[npt.NDArray[np.int64]], tuple[str, ...]] | None = None
                ) -> tuple[Repeat | None, Repeat | None]:
    """(the finest cut of ``seq`` into loop iterations, the finest repeat without a loop's marks).

    The second is what repeats when nothing marks an iteration (identical layers of one pass): it
    explains why there are no steps. ``host_anchors(cuts)`` adds what the host does once per unit
    (a synchronization, a graph launch).
    """
    n = seq.n
    if n < 6:
        return None, None
    with np.errstate(over="ignore"):
        h = _hashes(seq.token)
    bare: Repeat | None = None
    # candidates from a window of the middle of the sequence (a long capture repeats the same loop):
    # each candidate's places in the whole sequence are found again only when it is judged
    lo = 0
    if n > MARKER_WINDOW:
        lo = (n - MARKER_WINDOW) // 2
    win = slice(lo, lo + min(n, MARKER_WINDOW))
    for _c, _spread, wcuts, label in _markers(seq.token[win], h[win])[:MAX_COUNTS]:
        if lo or n > MARKER_WINDOW:
            # judged on the window first: most candidates fail there, before their places in the
            # whole sequence are looked for
            if len(wcuts) < 3 or _judge(seq, h, wcuts + lo, "", whole=False) is None:
                continue
            cuts = _all_places(seq.token, h, label, wcuts + lo)
        else:
            cuts = wcuts
        if len(cuts) < 3:
            continue
        g, tok = label.split(":")
        name = seq.names.get(int(tok), tok)
        marker = name if g == "1" else f"{name} (after {int(g) - 1} other operation{'s' if g != '2' else ''})"
        rep = _judge(seq, h, cuts, marker)
        if rep is None:
            continue
        extra = host_anchors(rep.cuts) if host_anchors is not None else ()
        if extra:
            rep = replace(rep, anchors=rep.anchors + tuple(a for a in extra if a not in rep.anchors))
        if rep.anchors:
            return rep, bare
        if bare is None:
            bare = rep
    return None, bare


def _all_places(tok: npt.NDArray[np.int64], h: npt.NDArray[np.uint64], label: str,
                seen: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Every place in the whole sequence of the marker found at ``seen`` in a window.

    The marker is the run of ``g`` tokens that ends there; its places are the runs' last tokens, as
    ``_markers`` gives them.
    """
    g = int(label.split(":")[0])
    p = int(seen[0])
    if g == 1:
        return np.flatnonzero(tok == tok[p]).astype(np.int64)
    hit = tok[g - 1:] == tok[p]
    for j in range(1, g):
        hit &= tok[g - 1 - j:len(tok) - j] == tok[p - j]
    return (np.flatnonzero(hit) + (g - 1)).astype(np.int64)


def _similar(seq: OpSequence, edges: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """Each segment's likeness (0..1) to the median segment: shared operations by token.

    Used where the exact content varies (a decode loop picks other GEMM kernels as its sequence
    grows): per segment, the operations it shares with the median histogram of tokens.
    """
    nseg = len(edges) - 1
    tok = seq.token[int(edges[0]):int(edges[-1])]
    uniq, inv = np.unique(tok, return_inverse=True)
    if nseg * len(uniq) > 20_000_000:
        return np.zeros(nseg)
    seg = np.repeat(np.arange(nseg), np.diff(edges))
    hist = np.bincount(seg * len(uniq) + inv, minlength=nseg * len(uniq)).reshape(nseg, len(uniq))
    ref = np.median(hist, axis=0)
    shared = np.minimum(hist, ref[None, :]).sum(axis=1)
    size = np.maximum(hist.sum(axis=1), ref.sum())
    out: npt.NDArray[np.float64] = shared / np.maximum(size, 1)
    return out


def _judge(seq: OpSequence, h: npt.NDArray[np.uint64], cuts: npt.NDArray[np.int64], marker: str, *,
           whole: bool = True) -> Repeat | None:
    """The cut at ``cuts`` as a Repeat when its segments repeat (the tests in the module docstring).

    With ``whole=False`` (cuts in a window of the sequence) the looped region's share of the whole
    is not asked for.
    """
    n = seq.n
    gaps = np.diff(cuts)
    period = int(np.median(gaps))
    last_end = min(n, int(cuts[-1]) + period)
    edges = np.append(cuts, last_end)
    # judged on a window of the middle cuts when the sequence is long
    lo, hi = 0, len(cuts)
    if last_end - int(cuts[0]) > WINDOW_OPS:
        mid = len(cuts) // 2
        per = max(3, int(WINDOW_OPS // max(period, 1)))
        lo, hi = max(0, mid - per // 2), min(len(cuts), mid + per // 2 + 1)
    w_edges = edges[lo:hi + 1]
    with np.errstate(over="ignore"):
        cum = np.concatenate([[np.uint64(0)],
                              np.cumsum(h[int(w_edges[0]):int(w_edges[-1])], dtype=np.uint64)])
        rel = w_edges - w_edges[0]
        seg_hash = cum[rel[1:]] - cum[rel[:-1]]
    w_len = np.diff(w_edges)
    _vals, inv, cnt = np.unique(seg_hash, return_inverse=True, return_counts=True)
    modal = inv == int(np.argmax(cnt))
    exact = True
    if float(modal.mean()) < SEGMENT_SHARE or float(w_len[modal].sum()) < OP_SHARE * float(w_len.sum()):
        exact = False
        # units that differ in a cycle of k (half steps, micro-batches of an accumulated step) are
        # parts of a step: a coarser cut finds it. Unless each unit holds every loop mark on its own
        # (its copy, its optimizer update): then they are steps whose inputs cycle (sequence lengths
        # taken in turn), matched loosely below
        shares = _mark_shares(seq, w_edges)
        whole = bool(shares) and min(shares.values()) >= SEGMENT_SHARE
        if len(seg_hash) >= 6:
            nxt = float((seg_hash[1:] == seg_hash[:-1]).mean())
            if nxt < 0.6 and any(float((seg_hash[k:] == seg_hash[:-k]).mean()) >= 0.8
                                 for k in (2, 3, 4, 5, 6, 8) if k < len(seg_hash)) and not whole:
                return None
        # a weight update (or a gradient collective) in only some units: they are micro-batches, however
        # alike (a cycle too long to see above: 3 micro-batches a step over 8 lengths in turn)
        if any(shares.get(k, 1.0) < SEGMENT_SHARE for k in ("optimizer", "collective")):
            return None
        # loose: as many operations (±10 %) and at least half of them the same kinds
        med_len = float(np.median(w_len))
        modal = (_similar(seq, w_edges) >= 0.5) & (np.abs(w_len - med_len) <= 0.1 * med_len + 1)
    seg_share = float(modal.mean())
    op_share = float(w_len[modal].sum()) / max(1, int(w_len.sum()))
    if seg_share < SEGMENT_SHARE or op_share < OP_SHARE:
        return None
    # the looped region holds enough of the process's operations or of its GPU time span
    span = float(seq.end.max() - seq.start.min())
    region = float(seq.end[int(cuts[0]):last_end].max() - seq.start[int(cuts[0]):last_end].min())
    if whole and (last_end - int(cuts[0])) < GPU_SHARE * n and region < GPU_SHARE * span:
        return None
    full = np.zeros(len(cuts), dtype=bool)
    full[lo:hi] = modal
    if not exact:
        seg_share *= 0.9
    anchors = _anchors(seq, cuts, last_end, full)
    return Repeat(cuts, period, op_share, seg_share, full, marker, anchors)


def _anchor_ops(seq: OpSequence, lo: int, hi: int) -> dict[str, npt.NDArray[np.bool_]]:
    """Per operation in [lo, hi): is it a host copy, a collective, an optimizer kernel.

    Copies between host and GPU only (layers make device-to-device ones too; split-K GEMMs memsets).
    """
    tok = seq.token[lo:hi]
    out = {"copy": np.isin(tok, np.array([_COPY + 1, _COPY + 2], dtype=np.int64))}
    kernels = distinct(tok[tok < _COPY]).tolist()
    for kind, words in (("collective", _COLLECTIVE), ("optimizer", _OPTIMIZER)):
        hit = [t for t in kernels if any(c in seq.names.get(int(t), "").lower() for c in words)]
        out[kind] = np.isin(tok, np.array(hit, dtype=np.int64))
    return out


def _mark_shares(seq: OpSequence, edges: npt.NDArray[np.int64]) -> dict[str, float]:
    """For each kind of loop mark in the units (copy, collective, optimizer): the share of units with one.

    Micro-batches of an accumulated step each copy their batch in, but only the last updates the
    weights; halves of a step split the copy from the optimizer. Steps whose inputs cycle hold all.
    """
    lo, hi = int(edges[0]), int(edges[-1])
    out = {}
    for kind, hit in _anchor_ops(seq, lo, hi).items():
        if not hit.any():
            continue
        cum = np.concatenate([[0], np.cumsum(hit, dtype=np.int64)])
        per = cum[edges[1:] - lo] - cum[edges[:-1] - lo]
        out[kind] = float((per > 0).mean())
    return out


def _anchors(seq: OpSequence, cuts: npt.NDArray[np.int64], last_end: int, modal: npt.NDArray[np.bool_]
             ) -> tuple[str, ...]:
    """What a common unit holds that marks a loop iteration (host copies, collectives, optimizer)."""
    k = int(np.flatnonzero(modal)[len(np.flatnonzero(modal)) // 2])
    hi = int(cuts[k + 1]) if k + 1 < len(cuts) else last_end
    return tuple(kind for kind, hit in _anchor_ops(seq, int(cuts[k]), hi).items() if hit.any())


def host_marks(trace: Trace, seq: OpSequence, cuts: npt.NDArray[np.int64]) -> tuple[str, ...]:
    """Host API calls that fall once or more in each unit: "sync", "graph launch"."""
    from engine.analysis.calls import api_calls, is_blocking_sync

    calls = api_calls(trace)
    if not calls.n or len(cuts) < 3:
        return ()
    code = calls.pid_code(seq.pid)
    if code < 0:
        return ()
    names = calls.names
    want = {"sync": [i for i, nm in enumerate(names) if is_blocking_sync(nm)],
            "graph launch": [i for i, nm in enumerate(names) if re.sub(r"_v\d+$", "", nm) in _GRAPH_CALLS]}
    t = seq.launch[cuts]
    out = []
    mine = calls.pid == code
    for label, ids in want.items():
        if not ids:
            continue
        sel = mine & np.isin(calls.name, np.array(ids, dtype=calls.name.dtype))
        st = np.sort(calls.start[sel])
        if not len(st):
            continue
        per = np.diff(np.searchsorted(st, t))  # calls between consecutive unit starts
        if len(per) and float((per > 0).mean()) >= 0.8:
            out.append(label)
    return tuple(out)


def boundary_rotation(seq: OpSequence, rep: Repeat) -> npt.NDArray[np.int64]:
    """The cuts moved to the unit's natural start: after the host's longest pause in the unit.

    Among the operations at the same offset in every common unit, the offset whose launch follows
    the longest (median) pause since the previous launch starts each unit: where the loop's top
    is (data loading, a synchronization, the Python between iterations).
    """
    cuts = rep.cuts
    if rep.count < 3:
        return cuts
    p = rep.period_ops
    modal_idx = np.flatnonzero(rep.modal[:-1] if len(rep.modal) == len(cuts) else rep.modal)
    # only units whose length is the period: offsets line up there
    lens = np.diff(np.append(cuts, seq.n))
    same = modal_idx[lens[modal_idx] == p]
    if len(same) < 2 or p < 2:
        return cuts
    gap = np.diff(seq.launch, prepend=seq.launch[0])
    idx = cuts[same][:, None] + np.arange(p)[None, :]
    idx = idx[(idx < seq.n).all(axis=1)]
    if not len(idx):
        return cuts
    med = np.median(gap[idx], axis=0)
    off = int(np.argmax(med))
    if off == 0:
        return cuts
    shifted = cuts + off
    return shifted[shifted < seq.n]


def describe_anchors(anchors: tuple[str, ...]) -> str:
    """'a copy, a synchronization and an optimizer kernel' for the anchors found."""
    words = {"copy": "a copy", "collective": "a collective", "optimizer": "optimizer kernels",
             "sync": "a host synchronization", "graph launch": "a graph launch"}
    parts = [words.get(a, a) for a in anchors]
    if not parts:
        return "nothing"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def gpu_step_times(seq: OpSequence, cuts: npt.NDArray[np.int64]
                   ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64],
                              npt.NDArray[np.int64]]:
    """(GPU starts, GPU ends, host starts, host ends) of the units that start at ``cuts``.

    On the GPU a unit starts when the GPU could start it: at its first operation's start, or
    earlier, at the end of the previous unit's last operation when the GPU idled between them (a
    pause at the top of a loop belongs to the step that pauses, as a timer at the loop's top sees
    it). It ends where the next unit starts (the last at the end of its last operation), so the
    units tile the GPU's time. On the host a unit runs from its first launch (or the previous
    unit's last GPU end, when the host waited for it) to the next unit's start.
    """
    edges = np.append(cuts, seq.n)
    lo, hi = edges[:-1], edges[1:]
    valid = hi > lo
    lo, hi = lo[valid], hi[valid]
    if not len(lo):
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, z
    first = np.minimum.reduceat(seq.start, lo)  # each piece is [lo[i], lo[i+1]); the last to the end
    last_end = np.maximum.reduceat(seq.end, lo)
    # what came before the first unit: the operations before its cut
    prev_end = np.empty(len(lo), dtype=np.int64)
    prev_end[1:] = last_end[:-1]
    prev_end[0] = int(seq.end[:int(lo[0])].max()) if lo[0] > 0 else int(first[0])
    gs = np.where(prev_end < first, prev_end, first)
    gs[0] = first[0]  # before the first unit is set-up (or nothing): the first starts with its work
    gs = np.maximum.accumulate(gs)
    ge = np.append(gs[1:], int(last_end[-1]))
    ge = np.maximum(ge, gs)
    launch_first = seq.launch[lo]
    launch_last_prev = np.empty(len(lo), dtype=np.int64)
    launch_last_prev[1:] = seq.launch[hi[:-1] - 1]
    launch_last_prev[0] = launch_first[0]
    hs = np.minimum(launch_first, np.maximum(launch_last_prev, prev_end))
    hs[0] = launch_first[0]
    hs = np.maximum.accumulate(hs)
    he = np.append(hs[1:], int(seq.launch[int(hi[-1]) - 1]))
    he = np.maximum(he, hs)
    return gs.astype(np.int64), ge.astype(np.int64), hs.astype(np.int64), he.astype(np.int64)
