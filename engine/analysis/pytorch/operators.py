"""The operator view: every ``aten::`` operator and ``record_function`` range, with its times.

Each row has the calls, the host self/total time and the GPU time of the kernels it launched.

The times follow ``torch.profiler``'s ``key_averages()``: an operator's *self* host time is its
duration less its child operators'; its *self GPU* time is the GPU work linked to it (the innermost
operator of each launch); its *total GPU* time adds its child operators'. So the self GPU times of
all rows add up to the GPU time of every linked operation, each counted once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from engine.analysis.pytorch.events import ANNOTATION, API, MODULE, OP, PYTHON, STEP, TorchEvents
from engine.analysis.pytorch.nesting import depths, in_own_group, marked_below, subtree_ends, subtree_sums
from engine.analysis.tables import small_codes

BY_CHOICES = ("name", "shapes")


@dataclass
class OpRow:
    """One operator (or one operator with one set of input shapes).

    Attributes:
        key: the row's identity: the name, or "name [shapes]".
        kind: "operator" or "annotation" (``record_function``, NVTX, profiler steps).
        host_total_ns, host_self_ns, gpu_self_ns, gpu_total_ns: sums over the calls.
        gpu_ops: GPU operations it launched itself.
        example: one call (a host event index) for its call stack and kernels.

    """

    key: str
    name: str
    kind: str
    shapes: str
    dtypes: str
    calls: int
    host_total_ns: int
    host_self_ns: int
    gpu_self_ns: int
    gpu_total_ns: int
    gpu_ops: int
    example: int

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON-ready dict (without the example call)."""
        return {"key": self.key, "name": self.name, "kind": self.kind, "input_shapes": self.shapes,
                "input_types": self.dtypes, "calls": self.calls, "host_total_ns": self.host_total_ns,
                "host_self_ns": self.host_self_ns, "gpu_self_ns": self.gpu_self_ns,
                "gpu_total_ns": self.gpu_total_ns, "gpu_ops": self.gpu_ops}


@dataclass
class OpTable:
    """The operator table of one program.

    Attributes:
        rows: by self GPU time, then self host time, largest first.
        gpu_ns: the GPU time of every GPU operation in the trace; ``linked_gpu_ns`` the part
            linked to an operator (the rest ran outside any recorded operator).
        by: "name" or "shapes".

    """

    rows: list[OpRow]
    gpu_ns: int
    linked_gpu_ns: int
    by: str
    source: str
    notes: list[str] = field(default_factory=list)

    def row(self, key: str) -> OpRow:
        """The row whose key is ``key`` (KeyError when there is none)."""
        for r in self.rows:
            if r.key == key:
                return r
        raise KeyError(key)


class OpSums(NamedTuple):
    """Per host range: host self time, GPU self time, GPU total time, GPU operation count; block ends.

    ``ends``: the operator tree's block ends (:func:`engine.analysis.pytorch.nesting.subtree_ends`;
    None when the operator parents are not in pre-order).
    """

    host_self: Any
    gpu_self: Any
    gpu_total: Any
    gpu_count: Any
    ends: Any


def self_and_total(ev: TorchEvents) -> OpSums:
    """The :class:`OpSums` of ``ev``.

    The same for every grouping: the tables by name and by shapes of one trace can share it
    (``operator_table``'s ``sums``).
    """
    dur = (ev.end - ev.start).astype(np.int64)
    counted = (ev.cat == OP) | (ev.cat == ANNOTATION) | (ev.cat == STEP) | (ev.cat == API)
    kids = np.flatnonzero(counted & (ev.op_parent >= 0) & ~ev.merged)
    child_sum = np.bincount(ev.op_parent[kids], weights=dur[kids], minlength=ev.n).astype(np.int64)
    host_self = dur - child_sum
    linked = ev.gpu_op >= 0
    gdur = (ev.gpu_end - ev.gpu_start).astype(np.int64)
    gpu_self = np.bincount(ev.gpu_op[linked], weights=gdur[linked], minlength=ev.n).astype(np.int64)
    gpu_count = np.bincount(ev.gpu_op[linked], minlength=ev.n).astype(np.int64)
    depth = depths(ev.op_parent)  # (one tree walk for both)
    return OpSums(host_self, gpu_self, subtree_sums(gpu_self, ev.op_parent, depth), gpu_count,
                  subtree_ends(ev.op_parent, depth))


def operator_table(ev: TorchEvents, by: str = "name", *, annotations: bool = True,
                   sums: OpSums | None = None) -> OpTable:
    """The operator table (``by``: "name" or "shapes"); ``annotations`` keeps record_function rows.

    ``sums``: :func:`self_and_total` of ``ev`` when the caller has it already.
    """
    if by not in BY_CHOICES:
        raise ValueError(f"by must be one of {', '.join(BY_CHOICES)}")
    host_self, gpu_self, gpu_total, gpu_count, ends = self_and_total(ev) if sums is None else sums
    keep = ((ev.cat == OP) | ((ev.cat == ANNOTATION) if annotations else False)) & ~ev.merged
    idx = np.flatnonzero(keep)
    group, keys, first = _groups(ev, idx, by)
    gid = np.full(ev.n, -1, dtype=np.int64)
    gid[idx] = group
    dur = (ev.end - ev.start).astype(np.int64)
    k = len(keys)

    def total(values: Any, rows: Any = idx) -> list[int]:
        out = np.zeros(k, dtype=np.int64)
        np.add.at(out, gid[rows], np.asarray(values, dtype=np.int64)[rows])
        return out.tolist()

    outer = idx[~in_own_group(gid, ev.op_parent, ends)[idx]]  # a call nested in one of its group: once
    calls = np.bincount(group, minlength=k).tolist()
    host_total, host_self_sum = total(dur), total(host_self)
    gpu_self_sum, gpu_ops, gpu_total_sum = total(gpu_self), total(gpu_count), total(gpu_total, outer)
    rows = []
    for g, key in enumerate(keys):
        f = int(first[g])
        rows.append(OpRow(
            key=key, name=ev.label(f), kind="operator" if ev.cat[f] == OP else "annotation",
            shapes=ev.shapes[f] if by == "shapes" else "", dtypes=ev.dtypes[f] if by == "shapes" else "",
            calls=calls[g], host_total_ns=host_total[g], host_self_ns=host_self_sum[g],
            gpu_self_ns=gpu_self_sum[g], gpu_total_ns=gpu_total_sum[g], gpu_ops=gpu_ops[g], example=f))
    rows.sort(key=lambda r: (-r.gpu_self_ns, -r.host_self_ns, r.key))
    gdur = ev.gpu_end - ev.gpu_start
    notes = list(ev.notes)
    if not np.any(ev.cat == OP) and ev.n:
        notes.append("No aten operators were recorded; the rows are record_function / NVTX ranges.")
    return OpTable(rows=rows, gpu_ns=int(gdur.sum()), linked_gpu_ns=int(gdur[ev.gpu_op >= 0].sum()),
                   by=by, source=ev.source, notes=notes)


def _groups(ev: TorchEvents, idx: Any, by: str) -> tuple[Any, list[str], Any]:
    """Each range of ``idx``'s row (0..k-1), the rows' keys and each row's first range.

    A row is a name ("name") or a name with its input shapes ("shapes": ``"name shapes"``, the name
    alone without shapes); the rows are numbered in order of their first range.
    """
    texts = ev.shapes.texts
    width = len(texts) + 1
    code = ev.name[idx].astype(np.int64)
    if by == "shapes":
        code = code * width + ev.shapes.codes[idx]

    def key_of(c: int) -> str:
        if by != "shapes":
            return ev.names[c]
        name, shape = ev.names[c // width], texts[c % width]
        return f"{name} {shape}" if shape else name

    # the distinct pairs by first range; two pairs may spell the same key: one row
    pair_code, pairs = small_codes(code)
    row_of: dict[str, int] = {}
    pair_row = np.array([row_of.setdefault(key_of(p), len(row_of)) for p in pairs.tolist()], dtype=np.int64)
    group = pair_row[pair_code] if len(idx) else np.zeros(0, dtype=np.int64)
    first = np.full(len(row_of), len(idx), dtype=np.int64)
    np.minimum.at(first, group, np.arange(len(idx), dtype=np.int64))
    return group, list(row_of), idx[first] if len(idx) else first


def descendants_gpu(ev: TorchEvents, calls: list[int], *, self_only: bool = False) -> Any:
    """The GPU operations launched by these host ranges (and, unless ``self_only``, their children)."""
    if self_only or not len(calls):
        return np.flatnonzero(np.isin(ev.gpu_op, np.asarray(calls, dtype=np.int64)))
    inside = np.zeros(ev.n, dtype=bool)
    inside[np.asarray(calls, dtype=np.int64)] = True
    inside = marked_below(inside, ev.op_parent)
    linked = ev.gpu_op >= 0
    out = np.zeros(len(ev.gpu_op), dtype=bool)
    out[linked] = inside[ev.gpu_op[linked]]
    return np.flatnonzero(out)


def calls_of(ev: TorchEvents, table: OpTable, key: str) -> list[int]:
    """The host ranges of one row of ``table``."""
    row = table.row(key)
    named = np.flatnonzero(ev.name == ev.names.index(row.name))
    if table.by == "shapes" and row.shapes:
        return [i for i in named.tolist() if ev.shapes[i] == row.shapes]
    if table.by == "shapes":
        return [i for i in named.tolist() if not ev.shapes[i]]
    return named.tolist()


def call_stack(ev: TorchEvents, i: int, *, limit: int = 12) -> list[str]:
    """The Python frames and modules around host range ``i``, innermost first (empty if not recorded)."""
    out: list[str] = []
    p = int(ev.parent[i])
    while p >= 0 and len(out) < limit:
        if ev.cat[p] in (PYTHON, MODULE):
            out.append(ev.label(p))
        p = int(ev.parent[p])
    return out


def op_kernels(ev: TorchEvents, gpu: Any) -> list[dict[str, Any]]:
    """GPU operations grouped by name: count, total and mean time (ns), largest total first."""
    groups: dict[int, list[int]] = {}
    for j in np.asarray(gpu).tolist():
        groups.setdefault(int(ev.gpu_name[j]), []).append(j)
    dur = ev.gpu_end - ev.gpu_start
    rows: list[dict[str, Any]] = []
    for code, members in groups.items():
        d = dur[np.asarray(members)]
        rows.append({"name": ev.gpu_names[code], "count": len(members), "total_ns": int(d.sum()),
                     "mean_ns": int(d.mean()), "indices": members})
    rows.sort(key=lambda r: -r["total_ns"])
    return rows


def forward_of(ev: TorchEvents, i: int) -> int:
    """For a backward-pass range, the forward operator whose autograd node it runs (-1: none).

    Autograd gives the backward function the forward operator's sequence number.
    """
    p = i
    while p >= 0 and ev.seq[p] < 0:
        p = int(ev.op_parent[p])
    if p < 0 or not ev.backward[i]:
        return -1
    hits = np.flatnonzero((ev.seq == ev.seq[p]) & ~ev.backward & (ev.cat == OP))
    return int(hits[0]) if len(hits) else -1
