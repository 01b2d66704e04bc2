"""The other ``nsys stats`` reports of nsys 2025.3 for CUDA, NVTX, OS runtime and unified memory.

Traces (one row per call or range) and summaries that read the export's own tables (OSRT_API,
CUDA_UM_*_PAGE_FAULT_EVENTS, OPENMP_EVENT_KIND_*) as well as the common tables. Reports over
tables only an nsys export has are empty for other traces. The formulas are the public ones of
the nsys user guide's report descriptions, checked against nsys 2025.3.1 oracles in tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.frames import (
    _api_names,
    _durations,
    _time_summary,
    _usable,
    empty_frame,
    group_stats,
)

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace

#: Event types of NVTX_EVENTS: push/pop and start/end ranges (and their NVTXT twins), domain create.
PUSHPOP, STARTEND, DOMAIN_CREATE = (59, 70), (60, 71), 75


def sql_rows(trace: Trace, table: str, sql: str) -> pd.DataFrame | None:
    """Run ``sql`` over an nsys export that has ``table`` with rows; None otherwise."""
    has = getattr(trace, "has_sqlite_table", None)
    query = getattr(trace, "query", None)
    if has is None or query is None or not has(table):
        return None
    df: pd.DataFrame = query(sql)
    return None if df.empty else df


def _named_summary(trace: Trace, table: str, count_col: str, report: str, where: str = "") -> pd.DataFrame:
    """Durations of ``table`` grouped by their nameId's string (osrt_sum, openmp_sum)."""
    import pandas as pd

    df = sql_rows(trace, table, f'SELECT t."start", t."end", s.value AS name FROM {table} AS t '
                            f"LEFT JOIN StringIds AS s ON s.id = t.nameId {where}")
    if df is None:
        return empty_frame(report)
    stats = group_stats(pd.DataFrame({"name": df["name"].fillna("").astype(str)}), _durations(df))
    return _time_summary(stats, count_col, {"Name": "name"})


def osrt_sum(trace: Trace) -> pd.DataFrame:
    """OS runtime calls (OSRT_API) grouped by function name (event class 27: the calls)."""
    has: list[str] = getattr(trace, "column_names", lambda t: [])("OSRT_API")
    where = "WHERE t.eventClass = 27" if "eventClass" in has else ""
    return _named_summary(trace, "OSRT_API", "Num Calls", "osrt_sum", where)


def openmp_sum(trace: Trace) -> pd.DataFrame:
    """OpenMP events of every OPENMP_EVENT_KIND_* table, grouped by name."""
    import pandas as pd

    tables: list[str] = getattr(trace, "sqlite_tables", lambda: [])()
    parts = [df for t in sorted(tables) if t.startswith("OPENMP_EVENT_KIND_")
             if (df := sql_rows(trace, t, f'SELECT t."start", t."end", s.value AS name FROM {t} AS t '
                                      "LEFT JOIN StringIds AS s ON s.id = t.nameId")) is not None]
    if not parts:
        return empty_frame("openmp_sum")
    df = pd.concat(parts, ignore_index=True)
    stats = group_stats(pd.DataFrame({"name": df["name"].fillna("").astype(str)}), _durations(df))
    return _time_summary(stats, "Count", {"Name": "name"})


def _nvtx_ranges(trace: Trace, styles: tuple[int, ...]) -> pd.DataFrame | None:
    """Closed NVTX ranges of the given event types with their ``domain:text`` label."""
    import pandas as pd

    rows = getattr(trace, "rows", None)
    has = getattr(trace, "has_sqlite_table", None)
    if rows is not None and has is not None:  # none of these styles: skip loading every event
        if not has("NVTX_EVENTS") or not rows(
                "SELECT 1 FROM NVTX_EVENTS WHERE eventType IN "
                f"({', '.join(str(int(t)) for t in styles)}) AND \"end\" IS NOT NULL LIMIT 1"):
            return None
    nvtx = _usable(trace, "nvtx")
    if nvtx is None:
        return None
    etype = pd.to_numeric(nvtx["eventType"])
    ranges = nvtx[etype.isin(list(styles)) & nvtx["end"].notna()]
    if ranges.empty:
        return None
    ranges = ranges.assign(label=ranges["domain"].fillna("").astype(str) + ":"
                           + ranges["text"].fillna("").astype(str))
    return ranges


def _nvtx_style_sum(trace: Trace, styles: tuple[int, ...], report: str) -> pd.DataFrame:
    import pandas as pd

    ranges = _nvtx_ranges(trace, styles)
    if ranges is None:
        return empty_frame(report)
    stats = group_stats(pd.DataFrame({"range": ranges["label"]}), _durations(ranges))
    return _time_summary(stats, "Instances", {"Range": "range"})


def nvtx_pushpop_sum(trace: Trace) -> pd.DataFrame:
    """NVTX push/pop ranges grouped by name."""
    return _nvtx_style_sum(trace, PUSHPOP, "nvtx_pushpop_sum")


def nvtx_startend_sum(trace: Trace) -> pd.DataFrame:
    """NVTX start/end ranges grouped by name."""
    return _nvtx_style_sum(trace, STARTEND, "nvtx_startend_sum")


def _xyz(df: pd.DataFrame, prefix: str) -> pd.Series:
    """'%4d %4d %4d' of a kernel's grid or block dimensions, as nsys prints GridXYZ/BlockXYZ."""
    import pandas as pd

    parts = [pd.to_numeric(df[f"{prefix}{a}"]).fillna(0).astype("int64").astype(str).str.rjust(4)
             for a in "XYZ"]
    out: pd.Series = parts[0] + " " + parts[1] + " " + parts[2]
    return out


def cuda_gpu_kern_gb_sum(trace: Trace) -> pd.DataFrame:
    """Kernels grouped by name, grid and block dimensions."""
    import pandas as pd

    k = _usable(trace, "kernels", ["start", "end", "name", "gridX", "gridY", "gridZ", "blockX",
                                   "blockY", "blockZ"])
    if k is None:
        return empty_frame("cuda_gpu_kern_gb_sum")
    keys = pd.DataFrame({"name": k["name"].fillna("").astype(str), "grid": _xyz(k, "grid"),
                         "block": _xyz(k, "block")})
    stats = group_stats(keys, _durations(k))
    return _time_summary(stats, "Instances", {"GridXYZ": "grid", "BlockXYZ": "block", "Name": "name"})


def cuda_api_trace(trace: Trace) -> pd.DataFrame:
    """One row per CUDA API call, by start time, with its thread's name and priority."""
    import pandas as pd

    api = _usable(trace, "api", ["start", "end", "name", "returnValue", "correlationId", "pid",
                                 "tid", "globalTid"])
    if api is None:
        return empty_frame("cuda_api_trace")
    threads = sql_rows(trace, "ThreadNames",
                   "SELECT t.globalTid, t.priority, s.value AS tname FROM ThreadNames AS t "
                   "LEFT JOIN StringIds AS s ON s.id = t.nameId")
    prio: dict[int, object] = {}
    tname: dict[int, object] = {}
    if threads is not None:
        first = threads.drop_duplicates("globalTid")
        prio = dict(zip(first["globalTid"], first["priority"], strict=True))
        tname = dict(zip(first["globalTid"], first["tname"], strict=True))
    gtid = pd.to_numeric(api["globalTid"], errors="coerce")
    out = pd.DataFrame({
        "Start (ns)": pd.to_numeric(api["start"]).astype("int64"),
        "Duration (ns)": _durations(api),
        "Name": _api_names(api),
        "Result": pd.to_numeric(api["returnValue"], errors="coerce").astype("Int64"),
        "CorrID": pd.to_numeric(api["correlationId"], errors="coerce").astype("Int64"),
        "Pid": pd.to_numeric(api["pid"], errors="coerce").astype("Int64"),
        "Tid": pd.to_numeric(api["tid"], errors="coerce").astype("Int64"),
        "T-Pri": pd.to_numeric(gtid.map(prio), errors="coerce").astype("Int64"),
        "Thread Name": gtid.map(tname).astype("object"),
    })
    return out.sort_values("Start (ns)", kind="stable").reset_index(drop=True)


def cuda_kern_exec_trace(trace: Trace) -> pd.DataFrame:
    """Each kernel with its launch call: API, queue and kernel times, by API start."""
    import numpy as np
    import pandas as pd

    k = _usable(trace, "kernels", ["start", "end", "correlationId", "globalPid", "deviceId", "name",
                                   "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"])
    api = _usable(trace, "api", ["start", "end", "correlationId", "globalTid", "pid", "tid", "name"])
    if k is None or api is None:
        return empty_frame("cuda_kern_exec_trace")
    left = pd.DataFrame({
        "proc": pd.to_numeric(k["globalPid"], errors="coerce") // (1 << 24),
        "corr": pd.to_numeric(k["correlationId"]),
        "k_start": pd.to_numeric(k["start"]).astype("int64"),
        "k_end": pd.to_numeric(k["end"]).astype("int64"),
        "dev": pd.to_numeric(k["deviceId"], errors="coerce").astype("Int64"),
        "grid": _xyz(k, "grid"), "block": _xyz(k, "block"),
        "kname": k["name"].fillna("").astype(str),
    })
    right = pd.DataFrame({
        "proc": pd.to_numeric(api["globalTid"], errors="coerce") // (1 << 24),
        "corr": pd.to_numeric(api["correlationId"]),
        "a_start": pd.to_numeric(api["start"]).astype("int64"),
        "a_end": pd.to_numeric(api["end"]).astype("int64"),
        "pid": pd.to_numeric(api["pid"], errors="coerce").astype("Int64"),
        "tid": pd.to_numeric(api["tid"], errors="coerce").astype("Int64"),
        "aname": _api_names(api),
    })
    if left["proc"].isna().any() or right["proc"].isna().any():  # Kineto: correlation ids suffice
        left["proc"], right["proc"] = 0, 0
    j = left.merge(right[right["corr"].notna()], on=["proc", "corr"], how="inner")
    if j.empty:
        return empty_frame("cuda_kern_exec_trace")
    queued = j["k_start"] - j["a_end"] >= 0
    out = pd.DataFrame({
        "API Start (ns)": j["a_start"],
        "API Dur (ns)": j["a_end"] - j["a_start"],
        "Queue Start (ns)": j["a_end"].where(queued).astype("Int64"),
        "Queue Dur (ns)": (j["k_start"] - j["a_end"]).where(queued).astype("Int64"),
        "Kernel Start (ns)": j["k_start"],
        "Kernel Dur (ns)": j["k_end"] - j["k_start"],
        "Total Dur (ns)": np.maximum(j["a_end"], j["k_end"]) - j["a_start"],
        "PID": j["pid"], "TID": j["tid"], "DevId": j["dev"],
        "API Function": j["aname"], "GridXYZ": j["grid"], "BlockXYZ": j["block"],
        "Kernel Name": j["kname"],
    })
    return out.sort_values("API Start (ns)", kind="stable").reset_index(drop=True)


def um_cpu_page_faults_sum(trace: Trace) -> pd.DataFrame:
    """CPU page faults on unified memory, counted per CPU instruction and source line."""
    table = "CUDA_UM_CPU_PAGE_FAULT_EVENTS"
    has: set[str] = set(getattr(trace, "column_names", lambda t: [])(table))
    src = "e.sourceFile" if "sourceFile" in has else "NULL"
    line = "e.sourceLine" if "sourceLine" in has else "NULL"
    df = sql_rows(trace, table,
              f"SELECT count(*) AS n, i.value AS addr, f.value AS file, {line} AS line "
              f"FROM {table} AS e LEFT JOIN StringIds AS i ON i.id = e.CpuInstruction "
              f"LEFT JOIN StringIds AS f ON f.id = {src} GROUP BY e.CpuInstruction, {src}, {line}")
    if df is None:
        return empty_frame("um_cpu_page_faults_sum")
    import pandas as pd

    out = pd.DataFrame({"CPU Page Faults": df["n"].astype("int64"),
                        "CPU Instruction Address": df["addr"].astype("object"),
                        "Source File": df["file"].astype("object"),
                        "Source Line": pd.to_numeric(df["line"], errors="coerce").astype("Int64")})
    return out.sort_values("CPU Page Faults", ascending=False, kind="stable").reset_index(drop=True)


_UM_TABLES = ("CUDA_UM_CPU_PAGE_FAULT_EVENTS", "CUDA_UM_GPU_PAGE_FAULT_EVENTS")
_UM_HTOD, _UM_DTOH = 11, 12


def _um_parts(trace: Trace) -> tuple[pd.DataFrame | None, pd.DataFrame | None, pd.DataFrame | None]:
    """(CPU faults: address; GPU faults: address, n; UM migrations: address, kind, bytes, dur)."""
    cpu = sql_rows(trace, _UM_TABLES[0], f"SELECT address FROM {_UM_TABLES[0]}")
    gpu = sql_rows(trace, _UM_TABLES[1], f"SELECT address, numberOfPageFaults AS n FROM {_UM_TABLES[1]}")
    mig = None
    has: list[str] = getattr(trace, "column_names", lambda t: [])("CUPTI_ACTIVITY_KIND_MEMCPY")
    if "virtualAddress" in has:
        mig = sql_rows(trace, "CUPTI_ACTIVITY_KIND_MEMCPY",
                   'SELECT virtualAddress AS address, copyKind AS kind, bytes, "end" - "start" AS dur '
                   f"FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind IN ({_UM_HTOD}, {_UM_DTOH})")
    return cpu, gpu, mig


def um_total_sum(trace: Trace) -> pd.DataFrame:
    """Unified memory totals: migrated MB each way, CPU and GPU page faults, address range."""
    import pandas as pd

    cpu, gpu, mig = _um_parts(trace)
    if cpu is None and gpu is None and mig is None:
        return empty_frame("um_total_sum")
    addrs = [pd.to_numeric(d["address"], errors="coerce").dropna() for d in (cpu, gpu, mig)
             if d is not None]
    every = pd.concat(addrs) if addrs else pd.Series(dtype="float64")

    def moved(kind: int) -> float | None:
        if mig is None or not (mig["kind"] == kind).any():
            return None
        return float(pd.to_numeric(mig.loc[mig["kind"] == kind, "bytes"]).sum()) / 1e6

    out = pd.DataFrame({
        "Total HtoD Migration Size (MB)": [moved(_UM_HTOD)],
        "Total DtoH Migration Size (MB)": [moved(_UM_DTOH)],
        "Total CPU Page Faults": pd.array([len(cpu) if cpu is not None else 0], dtype="Int64"),
        "Total GPU PageFaults": pd.array([int(pd.to_numeric(gpu["n"]).sum()) if gpu is not None else 0],
                                         dtype="Int64"),
        "Minimum Virtual Address": [_hex(every.min()) if len(every) else None],
        "Maximum Virtual Address": [_hex(every.max()) if len(every) else None],
    })
    return out


def _hex(v: object) -> str:
    return f"0x{int(v):X}"  # type: ignore[call-overload]


def um_sum(trace: Trace, rows: int = 10) -> pd.DataFrame:
    """Unified memory per virtual address: migrated MB each way, page faults, throughput.

    Addresses with page faults or migrations (an outer join), highest migration throughput
    first (none last), ties by address; the first ``rows`` (nsys's default: 10).
    """
    import pandas as pd

    cpu, gpu, mig = _um_parts(trace)
    if cpu is None and gpu is None and mig is None:
        return empty_frame("um_sum")
    frames = []
    if cpu is not None:
        frames.append(cpu.groupby("address").size().rename("cpu"))
    if gpu is not None:
        frames.append(pd.to_numeric(gpu["n"]).groupby(gpu["address"]).sum().rename("gpu"))
    if mig is not None:
        for kind, col in ((_UM_HTOD, "h2d"), (_UM_DTOH, "d2h")):
            part = mig[mig["kind"] == kind]
            frames.append(pd.to_numeric(part["bytes"]).groupby(part["address"]).sum().rename(col))
            frames.append(pd.to_numeric(part["dur"]).groupby(part["address"]).sum().rename(col + "_dur"))
    per = pd.concat(frames, axis=1).sort_index()
    for col in ("cpu", "gpu", "h2d", "d2h", "h2d_dur", "d2h_dur"):
        if col not in per:
            per[col] = float("nan")
    moved = per["h2d"].notna() | per["d2h"].notna()
    total = per["h2d"].fillna(0) + per["d2h"].fillna(0)
    dur = per["h2d_dur"].fillna(0) + per["d2h_dur"].fillna(0)
    per["tput"] = (total / 1e6 * (1e9 // dur)).where(moved & (dur > 0))
    per = per.sort_values("tput", ascending=False, kind="stable", na_position="last").head(rows)
    return pd.DataFrame({
        "Virtual Address": [_hex(a) for a in per.index],
        "HtoD Migration size (MB)": (per["h2d"] / 1e6).to_numpy(),
        "DtoH Migration size (MB)": (per["d2h"] / 1e6).to_numpy(),
        "CPU Page Faults": per["cpu"].astype("Int64").to_numpy(),
        " GPU Page Faults": per["gpu"].astype("Int64").to_numpy(),
        "Migration Throughput (MB/s)": per["tput"].to_numpy(),
    })


def nvtx_pushpop_trace(trace: Trace) -> pd.DataFrame:
    """Every NVTX push/pop range with its place in its thread's tree, by start time.

    A range's parent is the innermost range of the same thread that contains it; DurChild sums
    its direct children, RangeId is the event's row id, RangeStack the ids from the root, and
    NameTree the name indented by two dashes per level. Ranges never popped end at the last
    timestamp of the NVTX table.
    """
    import pandas as pd

    df = sql_rows(trace, "NVTX_EVENTS",
              'SELECT e.rowid AS id, e."start", e."end", e.eventType, e.text, e.textId, e.domainId, '
              "e.globalTid, s.value AS stext FROM NVTX_EVENTS AS e "
              "LEFT JOIN StringIds AS s ON s.id = e.textId")
    if df is None:
        return empty_frame("nvtx_pushpop_trace")
    domains = {d: (t if t is not None else s) for d, t, s in
               df.loc[df["eventType"] == DOMAIN_CREATE, ["domainId", "text", "stext"]]
               .itertuples(index=False)}
    last = int(pd.concat([df["start"], df["end"]]).max())
    r = df[df["eventType"].isin(list(PUSHPOP))].copy()
    if r.empty:
        return empty_frame("nvtx_pushpop_trace")
    r["end"] = pd.to_numeric(r["end"]).fillna(last).astype("int64")
    r = r.sort_values(["globalTid", "start", "end", "id"], ascending=[True, True, False, True],
                      kind="stable")
    ids, starts, ends, tids = (r[c].tolist() for c in ("id", "start", "end", "globalTid"))
    parent: dict[int, int | None] = {}
    level: dict[int, int] = {}
    path: dict[int, str] = {}
    stack: list[tuple[int, int, int]] = []  # (id, end, tid)
    for i, s, e, t in zip(ids, starts, ends, tids, strict=True):
        while stack and (stack[-1][2] != t or stack[-1][1] < e or stack[-1][1] < s):
            stack.pop()
        p = stack[-1][0] if stack else None
        parent[i], level[i] = p, (level[p] + 1 if p is not None else 0)
        path[i] = (path[p] if p is not None else "") + f":{i}"
        stack.append((i, e, t))
    dur = dict(zip(ids, (e - s for s, e in zip(starts, ends, strict=True)), strict=True))
    child_dur: dict[int, int] = {}
    n_child: dict[int, int] = {}
    for i, p in parent.items():
        if p is not None:
            child_dur[p] = child_dur.get(p, 0) + dur[i]
            n_child[p] = n_child.get(p, 0) + 1
    text = r["stext"].where(r["stext"].notna(), r["text"])
    name = [f"{'' if (d := domains.get(dom)) is None else d}:{'' if x is None else x}"
            for dom, x in zip(r["domainId"], text, strict=True)]
    gtid = pd.to_numeric(r["globalTid"])
    out = pd.DataFrame({
        "Start (ns)": starts, "End (ns)": ends, "Duration (ns)": [dur[i] for i in ids],
        "DurChild (ns)": [child_dur.get(i, 0) for i in ids],
        "DurNonChild (ns)": [dur[i] - child_dur.get(i, 0) for i in ids],
        "Name": name, "PID": ((gtid // (1 << 24)) % (1 << 24)).to_numpy(),
        "TID": (gtid % (1 << 24)).to_numpy(), "Lvl": [level[i] for i in ids],
        "NumChild": [n_child.get(i, 0) for i in ids], "RangeId": ids,
        "ParentId": pd.array([parent[i] for i in ids], dtype="Int64"),
        "RangeStack": [path[i] for i in ids],
        "NameTree": ["--" * level[i] + n for i, n in zip(ids, name, strict=True)],
    })
    return out.sort_values(["Start (ns)", "RangeId"], kind="stable").reset_index(drop=True)


_MPI_TABLES = ("MPI_P2P_EVENTS", "MPI_COLLECTIVES_EVENTS", "MPI_START_WAIT_EVENTS", "MPI_OTHER_EVENTS",
               "MPI_RANKS")


def _mpi(trace: Trace, report: str) -> pd.DataFrame:
    """MPI reports: empty for captures without MPI (as nsys prints them); MPI data is not read yet."""
    from engine.system.errors import KernelscopeError

    has = getattr(trace, "has_sqlite_table", lambda t: False)
    if any(has(t) for t in _MPI_TABLES):
        raise KernelscopeError(
            f"This report has MPI data, which Kernelscope does not summarise yet; run "
            f"`nsys stats -r {report}` on it for the {report} report."
        )
    return empty_frame(report)


def mpi_event_sum(trace: Trace) -> pd.DataFrame:
    """MPI events summary (empty for captures without MPI tracing)."""
    return _mpi(trace, "mpi_event_sum")


def mpi_event_trace(trace: Trace) -> pd.DataFrame:
    """MPI events trace (empty for captures without MPI tracing)."""
    return _mpi(trace, "mpi_event_trace")
