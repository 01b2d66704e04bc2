"""Ranks out of reports: which process of which report is which rank, on which GPU and host, at which UTC.

A rank is a process that ran GPU work. Per-rank reports (``NAME_rank3.nsys-rep``, a Kineto trace with
``distributedInfo``) hold one each; a report recorded around the launcher holds one per process, and
those are numbered by GPU.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.steps import Steps, pid_key, steps_per_process

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd

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


@dataclass
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
    nccl_launch: npt.NDArray[np.int64]
    nccl_name: list[str]
    api_start: npt.NDArray[np.int64]
    api_end: npt.NDArray[np.int64]
    steps: Steps | None
    named_rank: int | None = None
    nccl_bytes: list[int | None] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    rank: int = -1
    #: one typical steady step: its operations' names in order and their median GPU durations
    unit: Any = None


def _int(v: Any) -> int | None:
    try:
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return None
        return int(v)
    except (TypeError, ValueError):
        return None


def report_host(trace: Trace) -> str | None:
    """The host name the report was recorded on (nsys's TARGET_INFO_SYSTEM_ENV), if recorded."""
    query = getattr(trace, "query", None)
    has = getattr(trace, "has_sqlite_table", None)
    if query is not None and has is not None and has("TARGET_INFO_SYSTEM_ENV"):
        try:
            df = query("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname' LIMIT 1")
        except Exception:  # noqa: BLE001 - an odd schema: the host is simply not known
            return None
        return str(df.iloc[0, 0]) if len(df) else None
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


def nccl_calls(trace: Trace, pidk: str) -> Counter[str]:
    """How many times the process called each NCCL operation.

    From the NCCL NVTX domain (``ncclAllReduce`` ranges) or the profiler's ``nccl:all_reduce``
    annotations; empty when neither was recorded.
    """
    nv = trace.table("nvtx", ["text", "domain", "pid", "eventType"])
    if not len(nv):
        return Counter()
    text_all = nv["text"].fillna("").astype(str)
    maybe = text_all.str.startswith("nccl").to_numpy(dtype=bool)  # only these rows can count
    mine = nv[maybe & (_pid_keys(nv["pid"]) == pidk) & nv["eventType"].isin([59, 60]).to_numpy(dtype=bool)]
    out: Counter[str] = Counter()
    for domain, text in zip(mine["domain"].fillna(""), mine["text"].fillna(""), strict=True):
        t = str(text)
        if str(domain) == "NCCL" and t.startswith("nccl"):  # ncclAllToAll, ncclAllReduce, opId=7 ...
            m = _NVTX_OP.match(t, 4)
            op = m.group(0) if m else ""
        elif t.startswith("nccl:"):  # nccl:all_reduce -> AllReduce
            m = _TORCH_OP.match(t, 5)
            words = m.group(0).split("_") if m else []
            op = "".join(w.capitalize() for w in words if w not in _TORCH_VARIANT)
        else:
            continue
        if op in NCCL_OPS:  # not ncclCommInitRank, ncclGroupStart, ncclMemAlloc ...
            out[op] += 1
    return out


def _pid_keys(values: pd.Series) -> npt.NDArray[Any]:
    """Process ids as text (:func:`pid_key`), computed once per distinct value (millions of rows)."""
    import pandas as pd

    series = pd.Series(values).reset_index(drop=True)
    keys = {v: pid_key(v) for v in pd.unique(series)}
    return series.map(keys).fillna("").to_numpy(dtype=object)


def _main_tid_api(api: pd.DataFrame) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """API calls of the thread that launches the most kernels (the training loop's thread)."""
    if not len(api):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    names = api["name"].fillna("").astype(str)
    launches = api[names.str.match(_LAUNCH.pattern)]
    pool = launches if len(launches) else api
    tid = pool["tid"].value_counts().index[0]
    mine = api[api["tid"] == tid]
    return mine["start"].to_numpy(np.int64), mine["end"].to_numpy(np.int64)


def _unit(trace: Trace, st: Steps | None) -> Any:
    from engine.analysis.stepfind import typical_unit

    return typical_unit(trace, st) if st is not None else None


def ranks_of(trace: Trace, *, range_name: str | None = None) -> list[RankInput]:
    """The ranks in one report (processes with GPU work), each with its tables and steps."""
    import pandas as pd

    path = str(trace.info.path)
    offset, _how = report_utc_offset_ns(trace)
    host = report_host(trace)
    k = trace.table("kernels", ["start", "end", "deviceId", "correlationId", "pid", "name"])
    if not len(k):
        return []
    frames = [pd.DataFrame({"start": k["start"], "end": k["end"], "pid": k["pid"]})]
    for kind in ("memcpy", "memset"):
        t = trace.table(kind, ["start", "end", "pid"])
        if len(t):
            frames.append(t[["start", "end", "pid"]])
    ops = pd.concat(frames, ignore_index=True)
    ops_pk = _pid_keys(ops["pid"])
    k_pk = _pid_keys(k["pid"])
    api = trace.table("api", ["start", "end", "pid", "tid", "correlationId", "name"])
    api_pk = _pid_keys(api["pid"])
    steps = {s.pid: s for s in steps_per_process(trace, range_name=range_name)}
    names = k["name"].fillna("").astype(str).to_numpy()
    codes, uniq = pd.factorize(names)  # a few distinct kernel names among many launches
    is_nccl = np.array([bool(NCCL_KERNEL.match(str(n))) for n in uniq] + [False], dtype=bool)[codes]
    ops_nccl = np.concatenate([is_nccl, np.zeros(len(ops) - len(k), dtype=bool)])  # kernels come first
    named = RANK_IN_NAME.search(Path(path).name)
    kineto_rank = _kineto_rank(trace)
    sizes = _kineto_nccl_bytes(trace)
    out: list[RankInput] = []
    for pk in dict.fromkeys(k_pk):
        sel = k_pk == pk
        dev = Counter(int(d) for d in k["deviceId"][sel] if _int(d) is not None).most_common(1)
        osel = (ops_pk == pk) & ~ops_nccl
        nsel = sel & is_nccl
        nk = k[nsel]
        launch = nk["start"].to_numpy(np.int64).copy()
        my_api = api[api_pk == pk] if len(api) else api
        if len(my_api) and len(nk):
            a = pd.DataFrame({"corr": my_api["correlationId"].to_numpy(), "launch": my_api["start"]
                              .to_numpy(np.int64)}).drop_duplicates("corr")
            j = pd.DataFrame({"corr": nk["correlationId"].to_numpy()}).merge(a, how="left", on="corr")
            got = j["launch"].notna().to_numpy()
            launch[got] = j["launch"].to_numpy()[got].astype(np.int64)
        a_s, a_e = _main_tid_api(my_api)
        nstart = nk["start"].to_numpy(np.int64)
        out.append(RankInput(
            report=path, pid=_int(pk), device=dev[0][0] if dev else None, host=host,
            offset_ns=offset or 0,
            compute_start=ops["start"].to_numpy(np.int64)[osel],
            compute_end=ops["end"].to_numpy(np.int64)[osel],
            nccl_start=nstart, nccl_end=nk["end"].to_numpy(np.int64), nccl_launch=launch,
            nccl_name=[str(n) for n in names[nsel]], api_start=a_s, api_end=a_e,
            steps=steps.get(str(pk)),
            nccl_bytes=[sizes.get(c) for c in nk["correlationId"]] if sizes else [None] * len(nstart),
            calls=nccl_calls(trace, str(pk)),
            unit=_unit(trace, steps.get(str(pk))),
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


def align_step_ranges(traces: list[Trace], inputs: list[RankInput]) -> None:
    """Make every rank use the same step range (the one most ranks chose)."""
    chosen = Counter(r.steps.range_name for r in inputs if r.steps is not None)
    if len(chosen) <= 1 or any(r.steps is not None and r.steps.method.startswith("gpu") for r in inputs):
        return  # steps found from the GPU's work are each rank's own (their unit lengths may differ)
    name = chosen.most_common(1)[0][0]
    by_report = {str(t.info.path): t for t in traces}
    for r in inputs:
        if r.steps is not None and r.steps.range_name != name and r.report in by_report:
            again = {s.pid: s for s in steps_per_process(by_report[r.report], range_name=name)}
            r.steps = again.get(pid_key(r.pid), r.steps)
