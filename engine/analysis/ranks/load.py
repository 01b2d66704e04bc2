"""Ranks out of reports: which process of which report is which rank, on which GPU and host, at which UTC.

A rank is a process that ran GPU work. Per-rank reports (``NAME_rank3.nsys-rep``, a Kineto trace with
``distributedInfo``) hold one each; a report recorded around the launcher holds one per process, and
those are numbered by GPU.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.steps import Steps, pid_key, steps_per_process
from engine.reports.base import decode_global_tid
from engine.system.arrays import distinct
from engine.system.errors import ReportError

if TYPE_CHECKING:
    import numpy.typing as npt

    from engine.reports.base import Trace

#: the rank number in a per-rank report's file name (``train_rank3.nsys-rep``, ``rank-3.json``)
RANK_IN_NAME = re.compile(r"rank[_-]?(\d+)(?!.*rank[_-]?\d)", re.IGNORECASE)
#: NCCL's device kernels: ``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` (2.19+), ``ncclKernel_AllReduce_...``
NCCL_KERNEL = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
#: the operations NCCL's NVTX ranges and the profiler's ``nccl:`` annotations name (calls, not kernels)
NCCL_OPS = frozenset({"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "AllToAll",
                      "AllToAllv", "Send", "Recv", "Gather", "Scatter", "SendRecv"})
_NVTX_OP = re.compile(r"[A-Za-z]+")
_TORCH_OP = re.compile(r"[a-z_]+")
#: words of the profiler's annotation that name a variant, not the operation (_all_gather_base, ...)
_TORCH_VARIANT = frozenset({"", "base", "coalesced", "into", "tensor", "single"})
_LAUNCH = re.compile(r"^(cuda|cu)(LaunchKernel|LaunchCooperativeKernel|GraphLaunch|LaunchKernelEx)")


@dataclass(eq=False)  # a rank is itself: its arrays are not compared
class RankInput:
    """One rank's tables, in its report's own clock (``offset_ns`` adds the report's UTC zero)."""

    report: str
    pid: int | None
    device: int | None
    host: str | None
    offset_ns: int
    compute_start: npt.NDArray[np.int64]
    compute_end: npt.NDArray[np.int64]
    nccl_start: npt.NDArray[np.int64]
    nccl_end: npt.NDArray[np.int64]
    #: when each NCCL kernel was launched (kept for callers; no result reads it: ranks_of gives the start)
    nccl_launch: npt.NDArray[np.int64]
    nccl_name: list[str]
    #: the launching thread's CUDA API calls (empty once the partition is measured: store.slim)
    api_start: npt.NDArray[np.int64]
    api_end: npt.NDArray[np.int64]
    steps: Steps | None
    named_rank: int | None = None
    nccl_bytes: list[int | None] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    rank: int = -1
    #: one typical steady step: its operations' names in order and their median GPU durations
    unit: Any = None
    #: how the report's clock is put on UTC (``report_utc_offset_ns``)
    clock_method: str = "none"
    #: its steps' partition, measured where the rank was read (engine.analysis.ranks.costs)
    local: Any = None
    #: what a view draws of it, when kept apart from the arrays above (store.slim): ((compute starts,
    #: ends), (NCCL starts, ends)) as merged blocks
    lanes: Any = None


#: the columns read of each big table: what a rank needs and what the steps engine reads of it (its GPU
#: operations, engine.analysis.ops, and their names and copy kinds, engine.analysis.iterations): read
#: together, a table is scanned once (a column the report lacks is left out)
_GPU_OP = ["start", "end", "pid", "correlationId", "deviceId", "streamId", "globalPid", "contextId"]
READ_COLUMNS = {"kernels": [*_GPU_OP, "nameId", "shortNameId"],
                "memcpy": [*_GPU_OP, "copyKind", "srcKind", "dstKind", "bytes"],
                "memset": [*_GPU_OP, "bytes"],
                "api": ["start", "end", "pid", "tid", "nameId", "correlationId"]}
#: a missing value in ``trace.columns``
NULL_ID = -(2**62)


def _int(v: Any) -> int | None:
    try:
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return None
        return int(v)
    except (TypeError, ValueError):
        return None


def report_host(trace: Trace) -> str | None:
    """The host name the report was recorded on (nsys's system environment), if recorded."""
    try:
        host = trace.system_env("Hostname")
    except Exception:  # noqa: BLE001 - an odd schema: the host is simply not known
        return None
    if host is not None:
        return host
    doc = getattr(trace, "meta", None)  # a Kineto trace's top-level keys
    if isinstance(doc, dict):
        for key in ("hostName", "hostname"):
            if doc.get(key):
                return str(doc[key])
    return None


def report_utc_offset_ns(trace: Trace) -> tuple[int | None, str]:
    """(UTC ns of the report's time zero, how it is known) or (None, "none")."""
    start = getattr(trace, "session_start_utc_ns", None)
    if callable(start):
        v = start()
        if v is not None:
            return int(v), "session start (UTC)"
        return None, "none"
    base_us = getattr(trace, "base_ts_us", None)
    if base_us is not None:
        base_time = getattr(trace, "base_time_ns", None)
        extra = int(base_time) if isinstance(base_time, (int, float)) else 0
        return extra + round(float(base_us) * 1000.0), "trace base time (UTC)"
    return None, "none"


def _kineto_rank(trace: Trace) -> int | None:
    doc = getattr(trace, "meta", None)
    if isinstance(doc, dict) and isinstance(doc.get("distributedInfo"), dict):
        return _int(doc["distributedInfo"].get("rank"))
    return None


_DTYPE_BYTES = {"float": 4, "double": 8, "half": 2, "bfloat16": 2, "int": 4, "long": 8, "short": 2,
                "byte": 1, "char": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1, "uint8": 1}


def _kineto_nccl_bytes(trace: Trace) -> dict[Any, int]:
    """Correlation id -> message bytes of each NCCL kernel (Kineto only).

    From the profiler's ``In msg nelems`` and ``dtype`` kernel arguments (PyTorch 2.x); nsys exports
    the NCCL NVTX payloads' schemas but not their values, so nsys reports give no sizes.
    """
    args_of = getattr(trace, "args_of", None)  # a Kineto trace's kernel args
    out: dict[Any, int] = {}
    if args_of is None:
        return out
    k = trace.table("kernels", ["name"])
    args = args_of("kernels", ["correlation", "In msg nelems", "dtype"])
    null = -(1 << 62)  # an arg the kernel does not have
    for name, corr, n, dtype in zip(k["name"], args["correlation"].tolist(), args["In msg nelems"].tolist(),
                                    args["dtype"], strict=True):
        size = _DTYPE_BYTES.get(str(dtype).lower())
        if n != null and size is not None and corr != null and NCCL_KERNEL.match(str(name)):
            out[corr] = n * size
    return out


def nccl_op(domain: str, text: str) -> str | None:
    """The NCCL operation an NVTX range or profiler annotation names (None: not an NCCL call).

    ``NCCL:ncclAllReduce, opId=7`` (NCCL's NVTX domain) and ``nccl:all_reduce`` (the profiler) are
    AllReduce; ``ncclCommInitRank``, ``ncclGroupStart``, ``ncclMemAlloc`` ... are none.
    """
    if domain == "NCCL" and text.startswith("nccl"):  # ncclAllToAll, ncclAllReduce, opId=7 ...
        m = _NVTX_OP.match(text, 4)
        op = m.group(0) if m else ""
    elif text.startswith("nccl:"):  # nccl:all_reduce -> AllReduce
        m = _TORCH_OP.match(text, 5)
        words = m.group(0).split("_") if m else []
        op = "".join(w.capitalize() for w in words if w not in _TORCH_VARIANT)
    else:
        return None
    return op if op in NCCL_OPS else None


def nccl_calls(trace: Trace, pidk: str) -> Counter[str]:
    """How many times the process called each NCCL operation.

    From the NCCL NVTX domain (``ncclAllReduce`` ranges) or the profiler's ``nccl:all_reduce``
    annotations; empty when neither was recorded.
    """
    from engine.analysis.tables import trace_cache

    by_pid = trace_cache(trace, "ranks:nccl_calls", lambda: nccl_calls_by_columns(trace))
    if by_pid is not None:
        return Counter(by_pid.get(pidk, {}))
    nv = trace.table("nvtx", ["text", "domain", "pid", "eventType"])
    if not len(nv):
        return Counter()
    text_all = nv["text"].fillna("").astype(str)
    maybe = text_all.str.startswith("nccl").to_numpy(dtype=bool)  # only these rows can count
    mine = nv[maybe & (_pid_keys(nv["pid"]) == pidk) & nv["eventType"].isin([59, 60]).to_numpy(dtype=bool)]
    out: Counter[str] = Counter()
    for domain, text in zip(mine["domain"].fillna(""), mine["text"].fillna(""), strict=True):
        op = nccl_op(str(domain), str(text))
        if op is not None:
            out[op] += 1
    return out


def nccl_calls_by_columns(trace: Trace) -> dict[str, Counter[str]] | None:
    """Every process's NCCL calls (pid key -> operation -> calls) from an export's NVTX columns, or None.

    The closed ranges come with their names as codes into a few distinct (domain, text) pairs
    (``nvtx_range_columns``), so each name is parsed once and no text column is built (the table
    path: 0.5 s a 400k-kernel rank). None where the trace has no such reader, or where a push/pop or
    start/end range never ended (the table path counts those too).
    """
    from engine.reports.trace_columns import NVTX_PUSH_POP, NVTX_START_END, Clause, Where

    read = getattr(trace, "nvtx_range_columns", None)
    if read is None or not trace.has("nvtx"):
        return None
    try:
        got = read(["globalTid"])
        if got is None:
            return None
        open_ranges = Where((Clause("eventType", "in", (NVTX_PUSH_POP, NVTX_START_END)),
                             Clause("end", "is null")))
        if len(trace.columns("nvtx", ["start"], where=open_ranges)["start"]):
            return None
    except ReportError:
        return None
    cols, name_code, pairs = got
    ops = [nccl_op("" if d is None else str(d), "" if t is None else str(t)) for d, t in pairs]
    op_names = sorted({op for op in ops if op is not None})
    op_of_pair = np.array([-1 if op is None else op_names.index(op) for op in ops] or [-1], dtype=np.int64)
    row_op = op_of_pair[np.asarray(name_code, dtype=np.int64)] if len(name_code) else np.zeros(0, np.int64)
    hit = row_op >= 0
    out: dict[str, Counter[str]] = {}
    if not hit.any():
        return out
    gtid = np.asarray(cols["globalTid"])[hit]
    null = gtid == NULL_ID
    pids = decode_global_tid(np.where(null, np.nan, gtid) if null.any() else gtid)[0]
    keys = _pid_keys(pids)
    for pk in dict.fromkeys(keys.tolist()):
        counts = np.bincount(row_op[hit][keys == pk], minlength=len(op_names))
        out[str(pk)] = Counter({op: int(n) for op, n in zip(op_names, counts.tolist(), strict=True) if n})
    return out


def _pid_keys(values: Any) -> npt.NDArray[Any]:
    """Process ids as text (:func:`pid_key`), computed once per distinct value (millions of rows)."""
    from engine.analysis.tables import pid_keys

    return pid_keys(values)


def _rows_of(pids: npt.NDArray[Any]) -> dict[str, npt.NDArray[np.bool_]]:
    """Each process's rows, by pid key: a few distinct pids among millions of rows, compared as numbers."""
    import pandas as pd

    out: dict[str, npt.NDArray[np.bool_]] = {}
    for v in pd.unique(pids):
        key = pid_key(v)
        mask = pids == v
        out[key] = out[key] | mask if key in out else mask
    return out


def _main_tid_api(api: dict[str, npt.NDArray[Any]], sel: npt.NDArray[np.bool_] | None,
                  names: dict[int, str]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """API calls (of the rows ``sel``) of the thread that launches the most kernels (the training loop's)."""
    import pandas as pd

    if sel is None or not sel.any():
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    codes, uniq = pd.factorize(api["nameId"][sel])  # hashed: a few hundred names among millions of calls
    is_launch = np.array([bool(_LAUNCH.match(names.get(int(u), ""))) for u in uniq], dtype=bool)[codes]
    tids = api["tid"][sel]
    pool = tids[is_launch] if is_launch.any() else tids
    tcodes, tvalues = pd.factorize(pool)  # in order of first appearance
    counts = np.bincount(tcodes)
    tid = tvalues[int(np.argmax(counts))]  # the most calls; ties: the first seen (as value_counts)
    mine = tids == tid
    return api["start"][sel][mine].astype(np.int64), api["end"][sel][mine].astype(np.int64)


def _unit(trace: Trace, st: Steps | None) -> Any:
    from engine.analysis.stepfind import typical_unit

    return typical_unit(trace, st) if st is not None else None


def _gpu_ops(trace: Trace, kernels: dict[str, npt.NDArray[Any]]
             ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[Any]]:
    """Kernels, then copies, then memsets: (start, end, pid key) of every GPU operation."""
    starts, ends, pids = [kernels["start"]], [kernels["end"]], [kernels["pid"]]
    for kind in ("memcpy", "memset"):
        if trace.has(kind):
            t = trace.columns(kind, ["start", "end", "pid"])
            starts.append(t["start"])
            ends.append(t["end"])
            pids.append(t["pid"])
    return (np.concatenate(starts).astype(np.int64), np.concatenate(ends).astype(np.int64),
            _pid_keys(np.concatenate(pids)))


def ranks_of(trace: Trace, *, range_name: str | None = None) -> list[RankInput]:
    """The ranks in one report (processes with GPU work), each with its tables and steps.

    Reads only the columns it needs, as arrays (``trace.columns``): names are ids until a few distinct
    ones are looked up.
    """
    path = str(trace.info.path)
    offset, how = report_utc_offset_ns(trace)
    host = report_host(trace)
    if not trace.has("kernels"):
        return []
    for table, names in READ_COLUMNS.items():  # one pass over each table for this and the steps engine
        if trace.has(table):
            trace.prefetch_columns(table, [c for c in names if trace.has_columns(table, [c])])
    k = trace.columns("kernels", ["start", "end", "deviceId", "correlationId", "pid", "nameId"])
    if not len(k["start"]):
        return []
    strings = trace.strings()
    ops_start, ops_end, ops_pk = _gpu_ops(trace, k)
    k_pk = ops_pk[:len(k["start"])]
    api = (trace.columns("api", ["start", "end", "pid", "tid", "nameId"]) if trace.has("api")
           else {c: np.zeros(0, dtype=np.int64) for c in ("start", "end", "pid", "tid", "nameId")})
    api_rows = _rows_of(api["pid"])
    api_names = {int(u): strings.get(int(u), "") for u in distinct(api["nameId"])}
    steps = {s.pid: s for s in steps_per_process(trace, range_name=range_name)}
    uniq, codes = np.unique(k["nameId"], return_inverse=True)  # a few distinct kernel names
    uniq_names = [strings.get(int(u), "") for u in uniq]
    is_nccl = np.array([bool(NCCL_KERNEL.match(n)) for n in uniq_names], dtype=bool)[codes]
    ops_nccl = np.concatenate([is_nccl, np.zeros(len(ops_start) - len(is_nccl), dtype=bool)])
    named = RANK_IN_NAME.search(Path(path).name)
    kineto_rank = _kineto_rank(trace)
    sizes = _kineto_nccl_bytes(trace)
    out: list[RankInput] = []
    for pk in dict.fromkeys(k_pk.tolist()):
        sel = k_pk == pk
        devs = k["deviceId"][sel]
        devs = devs[devs != NULL_ID]
        dev = Counter(devs.tolist()).most_common(1)
        osel = (ops_pk == pk) & ~ops_nccl
        nsel = sel & is_nccl
        nstart = k["start"][nsel].astype(np.int64)
        a_s, a_e = _main_tid_api(api, api_rows.get(pk), api_names)
        corr = k["correlationId"][nsel]
        out.append(RankInput(
            report=path, pid=_int(pk), device=int(dev[0][0]) if dev else None, host=host,
            offset_ns=offset or 0,
            compute_start=ops_start[osel], compute_end=ops_end[osel],
            nccl_start=nstart, nccl_end=k["end"][nsel].astype(np.int64), nccl_launch=nstart.copy(),
            nccl_name=[uniq_names[c] for c in codes[nsel].tolist()], api_start=a_s, api_end=a_e,
            steps=steps.get(str(pk)),
            nccl_bytes=[sizes.get(c) for c in corr.tolist()] if sizes else [None] * len(nstart),
            calls=nccl_calls(trace, str(pk)),
            unit=_unit(trace, steps.get(str(pk))), clock_method=how,
        ))
    if len(out) == 1:
        out[0].named_rank = kineto_rank if kineto_rank is not None else (
            int(named.group(1)) if named else None)
    return out


def number_ranks(inputs: list[RankInput]) -> list[str]:
    """Give every input its rank number in place; return notes on how they were numbered.

    A per-rank report's own number (file name or Kineto ``distributedInfo``) is kept; the processes
    of a report around the launcher are numbered by GPU; numbers that collide are reassigned in order.
    """
    notes: list[str] = []
    taken: set[int] = set()
    for r in inputs:
        if r.named_rank is not None and r.named_rank not in taken:
            r.rank = r.named_rank
            taken.add(r.rank)
    rest = [r for r in inputs if r.rank < 0]
    rest.sort(key=lambda r: (inputs.index(r) if r.named_rank is not None else -1,
                             r.report, r.device if r.device is not None else 1 << 30, r.pid or 0))
    if rest:
        by_gpu = all(r.named_rank is None for r in rest)
        nxt = 0
        for r in rest:
            if by_gpu and r.device is not None and r.device not in taken:
                r.rank = r.device
            else:
                while nxt in taken:
                    nxt += 1
                r.rank = nxt
            taken.add(r.rank)
        if by_gpu and len(rest) > 1:
            notes.append("Ranks without a recorded rank number are numbered by GPU (device id).")
        elif not by_gpu:
            notes.append("Some reports carried the same rank number; the later ones were renumbered.")
    inputs.sort(key=lambda r: r.rank)
    return notes


def align_step_ranges(inputs: list[RankInput], restep: Callable[[str, str], list[RankInput]]) -> None:
    """Make every rank use the same step range (the one most ranks chose).

    ``restep(report, name)`` gives the report's ranks measured in range ``name``: their steps (and
    partition, when measured) replace those of the ranks that chose another range.
    """
    chosen = Counter(r.steps.range_name for r in inputs if r.steps is not None)
    if len(chosen) <= 1 or any(r.steps is not None and r.steps.method.startswith("gpu") for r in inputs):
        return  # steps found from the GPU's work are each rank's own (their unit lengths may differ)
    name = chosen.most_common(1)[0][0]
    again: dict[str, dict[str, RankInput]] = {}
    for r in inputs:
        if r.steps is not None and r.steps.range_name != name:
            if r.report not in again:
                again[r.report] = {pid_key(x.pid): x for x in restep(r.report, name)}
            other = again[r.report].get(pid_key(r.pid))
            if other is not None and other.steps is not None:
                r.steps, r.local = other.steps, other.local
