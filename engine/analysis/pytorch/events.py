"""A PyTorch program's host events and GPU work, read once from a Kineto trace or an nsys report.

``torch_events(trace)`` gives one :class:`TorchEvents` per trace (cached): the host ranges (aten
operators, ``record_function`` annotations, Python frames and ``nn.Module`` calls, profiler steps)
as columns with their nesting, and the GPU operations (kernels, copies, memsets) each linked to the
operator that launched it.

- **Kineto** (``torch.profiler``): operators are ``cpu_op`` events; a GPU event names its launching
  operator by ``External id`` (the innermost operator, as ``key_averages()`` attributes it);
  ``with_stack`` / ``with_modules`` add ``python_function`` events, a module's being named
  ``nn.Module: Class_N``; ``record_shapes`` adds ``Input Dims`` and ``Input type``.
- **nsys** with PyTorch NVTX (``--pytorch=autograd-nvtx`` / ``autograd-shapes-nvtx``,
  ``torch.autograd.profiler.emit_nvtx``, ``record_function``): operators are NVTX ranges whose text
  starts with the op name (``aten::addmm, seq = 12, op_id = 40, sizes = [[...]]``); a GPU operation
  belongs to the innermost operator range open on its launching thread when its API call started.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.tables import trace_cache
from engine.reports.kineto_columns import NULL
from engine.system.arrays import distinct

if TYPE_CHECKING:
    import numpy.typing as npt

    from engine.reports.base import Trace

#: host event categories
OP, ANNOTATION, PYTHON, MODULE, STEP, API = 0, 1, 2, 3, 4, 5
CATEGORY_NAMES = ("operator", "annotation", "python", "module", "step", "cuda api")
#: GPU operation kinds
KERNEL, MEMCPY, MEMSET = 0, 1, 2
GPU_KIND_NAMES = ("kernel", "memcpy", "memset")

_MODULE_PREFIX = "nn.Module: "
_BACKWARD_PREFIX = "autograd::engine::evaluate_function"
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
_NVTX_OP_RE = re.compile(r"^(.+?), (?:seq|op_id) = \d+")
_NVTX_SEQ_RE = re.compile(r"seq = (\d+)")
_NVTX_OP_MARK = re.compile(r", (?:seq|op_id) = ")
_NVTX_SIZES_RE = re.compile(r"sizes = (.*?)(?:, input_op_ids = |$)")


class CodedTexts:
    """A text per event, as a code into a list of distinct texts (4 bytes an event, not one ``str``).

    ``t[i]`` is event ``i``'s text; ``t[rows]`` (an index array, mask or slice) the texts of those rows.
    """

    __slots__ = ("codes", "texts")

    def __init__(self, codes: npt.NDArray[np.int32], texts: list[str]) -> None:
        self.codes = codes
        self.texts = texts

    @classmethod
    def of(cls, values: list[str]) -> CodedTexts:
        """The texts of a list, coded in order of first appearance."""
        code: dict[str, int] = {}
        codes = np.fromiter((code.setdefault(v, len(code)) for v in values), dtype=np.int32,
                            count=len(values))
        return cls(codes, list(code))

    @classmethod
    def blank(cls, n: int) -> CodedTexts:
        """``n`` empty texts."""
        return cls(np.zeros(n, dtype=np.int32), [""])

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, (int, np.integer)):
            return self.texts[int(self.codes[i])]
        return CodedTexts(self.codes[i], self.texts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CodedTexts) and self.tolist() == other.tolist()

    __hash__ = None  # type: ignore[assignment]

    def tolist(self) -> list[str]:
        """Every event's text."""
        texts = self.texts
        return [texts[c] for c in self.codes.tolist()]


@dataclass
class TorchEvents:
    """Host ranges and GPU operations of one program, as columns (times in ns from the trace start).

    Attributes:
        names: the distinct host event names; ``name`` codes into it.
        cat: the category (:data:`OP`, :data:`ANNOTATION`, :data:`PYTHON`, :data:`MODULE`, :data:`STEP`).
        start, end: host time of each range.
        thread: a code per (process, thread); ``threads`` holds the labels.
        seq: the autograd sequence number (-1: none); ``fwd``: 1 on the backward pass's operators.
        shapes, dtypes: the input shapes and types as text ("" when not recorded), :class:`CodedTexts`.
        parent: the enclosing range on the same thread (-1: none); ranges are sorted by thread, start.
        op_parent: the nearest enclosing operator or annotation (what a self time is taken from).
        gpu_*: the GPU operations: name, kind, start, end, device, stream, grid, block, bytes and
            ``gpu_op``, the index of the host range that launched it (-1: not known).
        merged: an operator that is the only child of an operator of the same name (a dispatch
            layer calling the op again, e.g. under autocast): counted as part of its parent, as
            ``key_averages()`` does; its GPU work and children belong to the parent.
        source: "kineto" or "nsys"; ``notes``: sentences about what the trace lacks.

    """

    names: list[str]
    name: npt.NDArray[np.int32]
    cat: npt.NDArray[np.int8]
    start: npt.NDArray[np.int64]
    end: npt.NDArray[np.int64]
    thread: npt.NDArray[np.int32]
    threads: list[str]
    seq: npt.NDArray[np.int64]
    backward: npt.NDArray[np.bool_]
    shapes: CodedTexts
    dtypes: CodedTexts
    parent: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    op_parent: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    gpu_names: list[str] = field(default_factory=list)
    gpu_name: npt.NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    gpu_kind: npt.NDArray[np.int8] = field(default_factory=lambda: np.zeros(0, np.int8))
    gpu_start: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    gpu_end: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    gpu_device: npt.NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    gpu_stream: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    gpu_bytes: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    gpu_grid: CodedTexts = field(default_factory=lambda: CodedTexts.blank(0))
    gpu_block: CodedTexts = field(default_factory=lambda: CodedTexts.blank(0))
    gpu_op: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    merged: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, np.bool_))
    source: str = "kineto"
    notes: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        """The number of host ranges."""
        return len(self.start)

    def label(self, i: int) -> str:
        """The name of host range ``i``."""
        return self.names[int(self.name[i])]

    def gpu_label(self, j: int) -> str:
        """The name of GPU operation ``j``."""
        return self.gpu_names[int(self.gpu_name[j])]

    def has_operators(self) -> bool:
        """True when any host range is an operator."""
        return bool(np.any(self.cat == OP))


def is_pytorch(trace: Trace) -> bool:
    """True for a Kineto trace, or an nsys report with PyTorch operator ranges (cheap to ask)."""
    if trace.info.kind == "kineto":
        return True
    if trace.info.kind == "snapshot" or not trace.has("nvtx"):
        return False
    out: bool = trace_cache(trace, "pytorch.is", lambda: _has_op_ranges(trace))
    return out


def _has_op_ranges(trace: Trace) -> bool:
    """Whether any NVTX range is a PyTorch operator's (read through the pandas-free range table)."""
    from engine.analysis.steps import ranges_table

    return any(_NVTX_OP_MARK.search(label) for label in ranges_table(trace).names)


def torch_events(trace: Trace) -> TorchEvents:
    """The PyTorch events of ``trace`` (built once per trace and file; see the module docstring)."""
    from engine.analysis.pytorch.pickle_store import on_disk

    out: TorchEvents = trace_cache(trace, "pytorch.events",
                                   lambda: on_disk(trace, "events", lambda: _build(trace), TorchEvents,
                                                   map_arrays=True))
    return out


def _build(trace: Trace) -> TorchEvents:
    if trace.info.kind == "kineto":
        ev = _from_kineto(trace)
    else:
        ev = _from_nsys(trace)
    _nest(ev)
    _mark_backward(ev)
    _merge_dispatch_duplicates(ev)
    return ev


class _Rows:
    """Host ranges collected row by row, then turned into columns."""

    def __init__(self) -> None:
        self.name: list[str] = []
        self.cat: list[int] = []
        self.start: list[int] = []
        self.end: list[int] = []
        self.thread: list[Any] = []
        self.seq: list[int] = []
        self.backward: list[bool] = []
        self.shapes: list[str] = []
        self.dtypes: list[str] = []
        self.ext: list[int] = []

    def add(self, name: str, cat: int, start: int, end: int, thread: str, *, seq: int = -1,
            backward: bool = False, shapes: str = "", dtypes: str = "", ext: int = -1) -> None:
        self.name.append(name)
        self.cat.append(cat)
        self.start.append(start)
        self.end.append(end)
        self.thread.append(thread)
        self.seq.append(seq)
        self.backward.append(backward)
        self.shapes.append(shapes)
        self.dtypes.append(dtypes)
        self.ext.append(ext)

    def columns(self, source: str) -> tuple[TorchEvents, npt.NDArray[np.int64]]:
        """The events sorted by thread, start and longest first, with each one's ``External id``."""
        start = np.asarray(self.start, dtype=np.int64)
        threads = sorted(set(self.thread))
        tcode = {t: i for i, t in enumerate(threads)}
        thread = np.fromiter((tcode[t] for t in self.thread), dtype=np.int32, count=len(self.thread))
        order = np.lexsort((-np.asarray(self.end, dtype=np.int64), start, thread))
        names = sorted(set(self.name))
        ncode = {t: i for i, t in enumerate(names)}

        def pick(values: list[Any], dtype: Any) -> Any:
            return np.asarray(values, dtype=dtype)[order]

        ev = TorchEvents(
            names=names,
            name=np.fromiter((ncode[t] for t in self.name), dtype=np.int32, count=len(self.name))[order],
            cat=pick(self.cat, np.int8), start=start[order], end=pick(self.end, np.int64),
            thread=thread[order], threads=threads, seq=pick(self.seq, np.int64),
            backward=pick(self.backward, np.bool_),
            shapes=CodedTexts.of(self.shapes)[order], dtypes=CodedTexts.of(self.dtypes)[order],
            source=source)
        return ev, pick(self.ext, np.int64)


def thread_label(pid: Any, tid: Any) -> str:
    """One text per (process, thread), the same from JSON numbers, table columns and API calls."""
    def text(v: Any) -> str:
        try:
            return str(int(v))
        except (TypeError, ValueError):
            return str(v)

    return f"{text(pid)}/{text(tid)}"


# -- Kineto ----------------------------------------------------------------------------------------
_GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset")


def _from_kineto(trace: Any) -> TorchEvents:
    """The host ranges and GPU operations from the trace's columns (numpy; per distinct name in Python)."""
    c = trace.events
    kind_of = np.array([-1] * len(c.cats), dtype=np.int64)
    for code, cat in enumerate(c.cats):
        k = _kineto_category(cat, "")
        kind_of[code] = -2 if cat in _GPU_CATS else (-1 if k is None else k)
    names = c.names
    step_name = np.array([bool(_STEP_RE.match(x)) for x in names] or [False], dtype=bool)
    module_name = np.array([x.startswith(_MODULE_PREFIX) for x in names] or [False], dtype=bool)
    cat = kind_of[np.asarray(c.cat)]
    name = np.asarray(c.name)
    cat = np.where((cat == ANNOTATION) & step_name[name], STEP, cat)
    cat = np.where((cat == PYTHON) & module_name[name], MODULE, cat)
    host = np.flatnonzero(cat >= 0)
    ev, ext = _kineto_host(trace, host, cat[host])
    _kineto_gpu(trace, ev, np.flatnonzero(cat == -2), ext)
    return ev


def _kineto_host(trace: Any, i: npt.NDArray[np.int64],
                 cat: npt.NDArray[np.int64]) -> tuple[TorchEvents, npt.NDArray[np.int64]]:
    """The host ranges ``i`` sorted by thread, start and longest first, with each one's ``External id``."""
    c = trace.events
    start, end = trace.times_ns(i)
    pid, tid = np.asarray(c.pid[i], dtype=np.int64), np.asarray(c.tid[i], dtype=np.int64)
    pairs, pair_code = _dense_unique(pid * max(len(c.tids), 1) + tid)
    labels = [thread_label(c.pids[p // max(len(c.tids), 1)], c.tids[p % max(len(c.tids), 1)])
              for p in pairs.tolist()]
    threads = sorted(set(labels))
    tcode = {t: k for k, t in enumerate(threads)}
    thread = np.array([tcode[t] for t in labels] or [0], dtype=np.int32)[pair_code.reshape(-1)]
    order = np.lexsort((-end, start, thread))
    used, name_code = _dense_unique(np.asarray(c.name[i], dtype=np.int64))
    names = sorted({c.names[k] for k in used.tolist()})
    ncode = {t: k for k, t in enumerate(names)}
    name = np.array([ncode[c.names[k]] for k in used.tolist()] or [0], dtype=np.int32)[name_code.reshape(-1)]
    ints = c.ints
    seq = np.asarray(ints["Sequence number"][i])
    ext = np.asarray(ints["External id"][i])
    ext = np.where(((cat == OP) | (cat == ANNOTATION)) & (ext != NULL), ext, -1)
    texts = list(c.text_values)

    def coded(column: Any) -> CodedTexts:  # gathered in file order (i rises), then put in the events'
        return CodedTexts(np.asarray(column[i], dtype=np.int32)[order], texts)

    ev = TorchEvents(
        names=names, name=name[order], cat=cat[order].astype(np.int8), start=start[order], end=end[order],
        thread=thread[order], threads=threads, seq=np.where(seq == NULL, -1, seq)[order],
        backward=np.zeros(len(i), dtype=np.bool_),
        shapes=coded(c.texts["Input Dims"]), dtypes=coded(c.texts["Input type"]), source="kineto")
    return ev, ext[order]


def _dense_unique(codes: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``np.unique(codes, return_inverse=True)`` for small non-negative codes, in linear time."""
    if not len(codes):
        return codes, codes
    used = np.flatnonzero(np.bincount(codes))
    remap = np.zeros(int(used[-1]) + 1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    return used, remap[codes]


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _kineto_category(cat: Any, name: str) -> int | None:
    if cat in ("cpu_op", "Operator"):
        return OP
    if cat == "user_annotation":
        return STEP if _STEP_RE.match(name) else ANNOTATION
    if cat == "python_function":
        return MODULE if name.startswith(_MODULE_PREFIX) else PYTHON
    if cat in ("cuda_runtime", "cuda_driver", "Runtime", "Driver"):
        return API  # children whose time is not an operator's self time (as key_averages counts it)
    return None


def _kineto_gpu(trace: Any, ev: TorchEvents, i: npt.NDArray[np.int64], ext: npt.NDArray[np.int64]) -> None:
    """Fill the GPU columns; each operation's launcher is the operator with its ``External id``."""
    c = trace.events
    i = i[np.argsort(np.asarray(c.ts[i]), kind="stable")]
    # the launcher: the first host range (in the sorted order) with that id, not a later annotation
    linked = np.flatnonzero(ext >= 0)
    ids, first = np.unique(ext[linked], return_index=True)
    want = np.asarray(c.ints["External id"][i])
    pos = np.clip(np.searchsorted(ids, want), 0, max(len(ids) - 1, 0))
    hit = (ids[pos] == want) & (want >= 0) if len(ids) else np.zeros(len(i), dtype=bool)
    ev.gpu_op = np.where(hit, linked[first[pos]] if len(ids) else -1, -1).astype(np.int64)
    # names coded in order of first appearance
    raw = np.asarray(c.name[i])
    used, at, inv = np.unique(raw, return_index=True, return_inverse=True)
    rank = np.empty(len(used), dtype=np.int32)
    rank[np.argsort(at, kind="stable")] = np.arange(len(used), dtype=np.int32)
    ev.gpu_names = [c.names[k] for k in used[np.argsort(at, kind="stable")].tolist()]
    ev.gpu_name = rank[inv.reshape(-1)] if len(i) else np.zeros(0, dtype=np.int32)
    kind_of = np.array([KERNEL if x in ("kernel", "Kernel") else MEMCPY if x in ("gpu_memcpy", "Memcpy")
                        else MEMSET for x in c.cats] or [0], dtype=np.int8)
    ev.gpu_kind = kind_of[np.asarray(c.cat[i])]
    ev.gpu_start, ev.gpu_end = trace.times_ns(i)

    def arg(key: str) -> npt.NDArray[np.int64]:
        v = np.asarray(c.ints[key][i])
        return np.where(v == NULL, 0, v)

    ev.gpu_device = arg("device").astype(np.int32)
    ev.gpu_stream = arg("stream")
    ev.gpu_bytes = arg("bytes")
    texts = list(c.text_values)
    ev.gpu_grid = CodedTexts(np.asarray(c.texts["grid"][i], dtype=np.int32), texts)
    ev.gpu_block = CodedTexts(np.asarray(c.texts["block"][i], dtype=np.int32), texts)


# -- nsys ------------------------------------------------------------------------------------------
def _from_nsys(trace: Trace) -> TorchEvents:
    rows = _Rows()
    notes: list[str] = []
    if trace.has("nvtx"):
        nv = trace.table("nvtx", ["start", "end", "eventType", "text", "pid", "tid", "domain"])
        # the default domain: PyTorch's and the user's ranges (libraries such as CCCL have their own)
        nv = nv[nv["end"].notna() & nv["text"].notna() & (nv["domain"].fillna("") == "")]
        for s, t, text, pid, tid in zip(nv["start"].to_numpy(np.int64), nv["end"].to_numpy(np.int64),
                                        nv["text"].astype(str), nv["pid"], nv["tid"], strict=True):
            _nsys_row(rows, text, int(s), int(t), thread_label(pid, tid))
    ev, _ext = rows.columns("nsys")
    if not ev.has_operators():
        notes.append("The report has no PyTorch operator ranges: record it with nsys profile "
                     "--pytorch=autograd-shapes-nvtx (or torch.autograd.profiler.emit_nvtx()).")
    ev.notes = notes
    _nsys_gpu(trace, ev)
    return ev


def _nsys_row(rows: _Rows, text: str, s: int, t: int, thread: str) -> None:
    m = _NVTX_OP_RE.match(text)
    if m is None:
        kind = STEP if _STEP_RE.match(text) else ANNOTATION
        rows.add(text, kind, s, t, thread)
        return
    seq = _NVTX_SEQ_RE.search(text)
    sizes = _NVTX_SIZES_RE.search(text)
    rows.add(m.group(1), OP, s, t, thread, seq=int(seq.group(1)) if seq else -1,
             shapes=sizes.group(1).replace(" ", "") if sizes else "")


def _nsys_gpu(trace: Trace, ev: TorchEvents) -> None:
    """The GPU operations with the innermost operator open on the launching thread at the launch."""
    from engine.analysis.ops import gpu_op_columns

    cols = gpu_op_columns(trace)
    names, codes = _gpu_op_names(trace, cols)
    ev.gpu_names, ev.gpu_name = names, codes
    ev.gpu_kind = np.asarray(cols.kind, dtype=np.int8)
    ev.gpu_start = np.asarray(cols.start, dtype=np.int64)
    ev.gpu_end = np.asarray(cols.end, dtype=np.int64)
    ev.gpu_device = np.asarray([_int(cols.devs[d], 0) for d in cols.dev], dtype=np.int32)
    ev.gpu_stream = np.asarray([_int(cols.streams[s], 0) for s in cols.stream], dtype=np.int64)
    ev.gpu_bytes = np.zeros(len(ev.gpu_start), dtype=np.int64)
    ev.gpu_grid = CodedTexts.blank(len(ev.gpu_start))
    ev.gpu_block = CodedTexts.blank(len(ev.gpu_start))
    ev.gpu_op = _innermost_at(ev, np.asarray(cols.launch, dtype=np.int64), _launch_threads(trace, cols, ev))


def _gpu_op_names(trace: Trace, cols: Any) -> tuple[list[str], npt.NDArray[np.int32]]:
    """Kernel names (copies and memsets by their kind) in the order of ``gpu_op_columns``."""
    k = trace.table("kernels", ["shortName", "name"]) if trace.has("kernels") else None
    kernel_names = [] if k is None else [str(x) for x in (k["name"] if "name" in k else k["shortName"])]
    labels = kernel_names + ["[CUDA memcpy]"] * cols.counts.get("memcpy", 0) + \
        ["[CUDA memset]"] * cols.counts.get("memset", 0)
    names = sorted(set(labels))
    code = {t: i for i, t in enumerate(names)}
    return names, np.fromiter((code[t] for t in labels), dtype=np.int32, count=len(labels))


def _launch_threads(trace: Trace, cols: Any, ev: TorchEvents) -> npt.NDArray[np.int32]:
    """The host thread code (into ``ev.threads``) of each GPU operation's API call (-1: unknown)."""
    from engine.analysis.calls import api_calls

    calls = api_calls(trace)
    out = np.full(len(cols.start), -1, dtype=np.int32)
    row = cols.call_row
    got = row >= 0
    if not calls.n or not got.any():
        return out
    code = {t: i for i, t in enumerate(ev.threads)}
    pairs = calls.pid[row[got]].astype(np.int64) * (1 << 32) + calls.tid[row[got]]
    uniq, inv = np.unique(pairs, return_inverse=True)
    lut = np.array([code.get(thread_label(calls.pids[u >> 32], calls.tids[u & 0xFFFFFFFF]), -1)
                    for u in uniq.tolist()], dtype=np.int32)
    out[got] = lut[inv]
    return out


def _innermost_at(ev: TorchEvents, when: npt.NDArray[np.int64],
                  thread: npt.NDArray[np.int32]) -> npt.NDArray[np.int64]:
    """For each (time, thread) the innermost operator or annotation open then (-1: none)."""
    out = np.full(len(when), -1, dtype=np.int64)
    opish = np.flatnonzero((ev.cat == OP) | (ev.cat == ANNOTATION))
    for t in distinct(thread[thread >= 0]):
        mine = opish[ev.thread[opish] == t]
        if not len(mine):
            continue
        jobs = np.flatnonzero(thread == t)
        jobs = jobs[np.argsort(when[jobs], kind="stable")]
        starts, ends = ev.start[mine], ev.end[mine]
        # ranges sorted by start; the innermost open range is the last started one still open
        stack: list[int] = []
        k = 0
        for j in jobs:
            w = when[j]
            while k < len(mine) and starts[k] <= w:
                while stack and ends[stack[-1]] < starts[k]:
                    stack.pop()
                stack.append(k)
                k += 1
            while stack and ends[stack[-1]] < w:
                stack.pop()
            out[j] = int(mine[stack[-1]]) if stack else -1
    return out


# -- nesting ---------------------------------------------------------------------------------------
def _nest(ev: TorchEvents) -> None:
    """``parent`` (any enclosing range) and ``op_parent`` (the nearest enclosing operator/annotation)."""
    from engine.analysis.pytorch.nesting import parents

    opish = (ev.cat == OP) | (ev.cat == ANNOTATION) | (ev.cat == STEP)
    ev.parent, ev.op_parent = parents(ev.start, ev.end, ev.thread, opish)


def _merge_dispatch_duplicates(ev: TorchEvents) -> None:
    """Fold an operator into its parent where it is the parent's only child and has its name."""
    merged = np.zeros(ev.n, dtype=bool)
    counted = np.flatnonzero(((ev.cat == OP) | (ev.cat == ANNOTATION) | (ev.cat == API))
                             & (ev.op_parent >= 0))
    kids = np.bincount(ev.op_parent[counted], minlength=ev.n)
    cand = np.flatnonzero((ev.cat == OP) & (ev.op_parent >= 0))
    p = ev.op_parent[cand]
    hit = cand[(ev.name[cand] == ev.name[p]) & (kids[p] == 1) & (ev.cat[p] == OP)]
    if not len(hit):
        ev.merged = merged
        return
    merged[hit] = True
    target = np.arange(ev.n, dtype=np.int64)
    for i in hit.tolist():  # parents sort first: a chain of three folds into the top one
        target[i] = target[int(ev.op_parent[i])]
    has = ev.op_parent >= 0
    ev.op_parent = np.where(has, target[np.maximum(ev.op_parent, 0)], -1)
    linked = ev.gpu_op >= 0
    ev.gpu_op = np.where(linked, target[np.maximum(ev.gpu_op, 0)], -1)
    ev.merged = merged


def _mark_backward(ev: TorchEvents) -> None:
    """The backward pass: every range inside an autograd engine function (by its operator parents)."""
    from engine.analysis.pytorch.nesting import marked_below

    code = [i for i, t in enumerate(ev.names) if t.startswith(_BACKWARD_PREFIX)]
    ev.backward = marked_below(np.isin(ev.name, code), ev.op_parent)
