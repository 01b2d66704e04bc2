"""``nvtx_gpu_proj_trace`` and ``nvtx_gpu_proj_sum``: NVTX ranges projected onto the GPU work in them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.nvtx_ranges import _gpu_op_calls, _pairs, _parents, nvtx_ranges
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.trace_tables import (
    empty_frame,
    group_stats,
)

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace


@report(
    "nvtx_gpu_proj_trace",
    title="NVTX GPU Projection Trace: ranges projected onto the GPU work they launched",
    columns=(
        "Name", "Projected Start (ns)", "Projected Duration (ns)", "Orig Start (ns)", "Orig Duration (ns)",
        "Style", "PID", "TID", "NumGPUOps", "Lvl", "NumChild", "RangeId", "ParentId", "RangeStack",
    ),
    needs=("nvtx", "api", "kernels", "memcpy", "memset"),
)
def nvtx_gpu_proj_trace(trace: Trace, csv: bool) -> pd.DataFrame:
    """Each range projected onto the GPU operations its thread launched inside it."""
    return proj_trace_frame(trace)


@report(
    "nvtx_gpu_proj_sum",
    title="NVTX GPU Projection Summary: projected ranges grouped by name and style",
    columns=(
        "Range", "Style", "Total Proj Time (ns)", "Total Range Time (ns)", "Range Instances", "Proj Avg (ns)",
        "Proj Med (ns)", "Proj Min (ns)", "Proj Max (ns)", "Proj StdDev (ns)", "Total GPU Ops", "Avg GPU Ops",
        "Avg Range Lvl", "Avg Num Child",
    ),
    needs=("nvtx", "api", "kernels", "memcpy", "memset"),
)
def nvtx_gpu_proj_sum(trace: Trace, csv: bool) -> pd.DataFrame:
    """Projected ranges grouped by name and style."""
    return proj_sum_frame(trace)


def proj_trace_frame(trace: Trace) -> pd.DataFrame:
    """NVTX ranges projected onto the GPU: from the first to the last GPU operation they launched.

    A GPU operation belongs to every range of its launching thread that contains the launch call;
    ranges without GPU operations are left out. Parents are the tightest enclosing range of the
    thread (push/pop or start/end), NumChild counts children that have GPU operations.
    """
    import pandas as pd

    ranges = nvtx_ranges(trace)
    ops = _gpu_op_calls(trace)
    if ranges is None or ops is None:
        return empty_frame("nvtx_gpu_proj_trace")
    pairs = _pairs(ops, ranges)
    if pairs.empty:
        return empty_frame("nvtx_gpu_proj_trace")
    joined = pd.DataFrame({
        "range": pairs["range"].to_numpy(),
        "start": ops.loc[pairs["call"], "start"].to_numpy(),
        "end": ops.loc[pairs["call"], "end"].to_numpy(),
        "corr": ops.loc[pairs["call"], "corr"].to_numpy(),
    })
    g = joined.groupby("range", sort=True)
    proj = pd.DataFrame({"pstart": g["start"].min(), "pend": g["end"].max(), "ops": g["corr"].nunique()})
    rg = ranges.loc[proj.index]
    parent = _parents(ranges)
    level: dict[int, int] = {}
    stack: dict[int, str] = {}

    def walk(i: int) -> tuple[int, str]:
        if i not in level:
            chain, p = [i], parent.get(i)
            while p is not None and p not in level and p not in chain:
                chain.append(p)
                p = parent.get(p)
            base_lvl, base_stack = (level[p], stack[p]) if p is not None and p in level else (-1, "")
            for j in reversed(chain):
                base_lvl, base_stack = base_lvl + 1, f"{base_stack}:{j}"
                level[j], stack[j] = base_lvl, base_stack
        return level[i], stack[i]

    ids = rg["id"].astype("int64").tolist()
    children: dict[int, int] = {}
    for i in ids:
        p = parent.get(i)
        if p is not None:
            children[p] = children.get(p, 0) + 1
    gt = pd.to_numeric(rg["globalTid"])
    out = pd.DataFrame({
        "Name": rg["name"].to_numpy(), "Projected Start (ns)": proj["pstart"].astype("int64").to_numpy(),
        "Projected Duration (ns)": (proj["pend"] - proj["pstart"]).astype("int64").to_numpy(),
        "Orig Start (ns)": rg["start"].to_numpy(), "Orig Duration (ns)": (rg["end"] - rg["start"]).to_numpy(),
        "Style": rg["style"].to_numpy(), "PID": ((gt // (1 << 24)) % (1 << 24)).to_numpy(),
        "TID": (gt % (1 << 24)).to_numpy(), "NumGPUOps": proj["ops"].astype("int64").to_numpy(),
        "Lvl": [walk(i)[0] for i in ids], "NumChild": [children.get(i, 0) for i in ids],
        "RangeId": ids, "ParentId": pd.array([parent.get(i) for i in ids], dtype="Int64"),
        "RangeStack": [walk(i)[1] for i in ids],
    })
    # nsys 2025.3 lists them by the range's own start (not the projected one, as 2022.4 did).
    return out.sort_values(["Orig Start (ns)", "RangeId"], kind="stable").reset_index(drop=True)


def proj_sum_frame(trace: Trace) -> pd.DataFrame:
    """:func:`nvtx_gpu_proj_trace` grouped by range name and style, most projected time first."""
    import pandas as pd

    t = proj_trace_frame(trace)
    if t.empty:
        return empty_frame("nvtx_gpu_proj_sum")
    keys = pd.DataFrame({"name": t["Name"], "style": t["Style"]})
    stats = group_stats(keys, t["Projected Duration (ns)"].astype("int64"))
    g = pd.concat([keys, t], axis=1).groupby(["name", "style"], sort=True, dropna=False)
    out = pd.DataFrame({
        "Range": stats["name"], "Style": stats["style"],
        "Total Proj Time (ns)": stats["sum"].astype("int64"),
        "Total Range Time (ns)": g["Orig Duration (ns)"].sum().to_numpy().astype("int64"),
        "Range Instances": stats["count"].astype("int64"),
        "Proj Avg (ns)": stats["mean"], "Proj Med (ns)": stats["median"],
        "Proj Min (ns)": stats["min"].astype("int64"), "Proj Max (ns)": stats["max"].astype("int64"),
        "Proj StdDev (ns)": stats["std"],
        "Total GPU Ops": g["NumGPUOps"].sum().to_numpy().astype("int64"),
        "Avg GPU Ops": g["NumGPUOps"].mean().to_numpy(),
        "Avg Range Lvl": g["Lvl"].mean().to_numpy(),
        "Avg Num Child": g["NumChild"].mean().to_numpy(),
    })
    return out.sort_values("Total Proj Time (ns)", ascending=False, kind="stable").reset_index(drop=True)
