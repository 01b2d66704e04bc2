"""Unified memory reports: ``um_sum``, ``um_total_sum``, ``um_cpu_page_faults_sum``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.trace_tables import (
    empty_frame,
)
from engine.reports.nsys import stats_reads as reads

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace


@report(
    "um_sum",
    title="Unified Memory Analysis Summary: migrations and page faults per virtual address",
    columns=(
        "Virtual Address", "HtoD Migration size (MB)", "DtoH Migration size (MB)", "CPU Page Faults",
        " GPU Page Faults", "Migration Throughput (MB/s)",
    ),
    needs=(),
)
def um_sum(trace: Trace, csv: bool) -> pd.DataFrame:
    """Per virtual address (the 10 busiest): migrated MB each way, page faults, throughput."""
    return per_address_frame(trace)


@report(
    "um_total_sum",
    title="Unified Memory Totals Summary",
    columns=(
        "Total HtoD Migration Size (MB)", "Total DtoH Migration Size (MB)", "Total CPU Page Faults",
        "Total GPU PageFaults", "Minimum Virtual Address", "Maximum Virtual Address",
    ),
    needs=(),
)
def um_total_sum(trace: Trace, csv: bool) -> pd.DataFrame:
    """Migrated MB each way, CPU and GPU page faults, address range."""
    return totals_frame(trace)


@report(
    "um_cpu_page_faults_sum",
    title="Unified Memory CPU Page Faults Summary: faults per CPU instruction",
    columns=(
        "CPU Page Faults", "CPU Instruction Address", "Source File", "Source Line",
    ),
    needs=(),
)
def um_cpu_page_faults_sum(trace: Trace, csv: bool) -> pd.DataFrame:
    """CPU page faults per CPU instruction and source line."""
    return cpu_page_faults_frame(trace)


def cpu_page_faults_frame(trace: Trace) -> pd.DataFrame:
    """CPU page faults on unified memory, counted per CPU instruction and source line."""
    df = reads.um_cpu_faults_by_instruction(trace)
    if df is None:
        return empty_frame("um_cpu_page_faults_sum")
    import pandas as pd

    out = pd.DataFrame({"CPU Page Faults": df["n"].astype("int64"),
                        "CPU Instruction Address": df["addr"].astype("object"),
                        "Source File": df["file"].astype("object"),
                        "Source Line": pd.to_numeric(df["line"], errors="coerce").astype("Int64")})
    return out.sort_values("CPU Page Faults", ascending=False, kind="stable").reset_index(drop=True)


_UM_HTOD, _UM_DTOH = reads.UM_HTOD, reads.UM_DTOH
_um_parts = reads.um_parts


def totals_frame(trace: Trace) -> pd.DataFrame:
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


def per_address_frame(trace: Trace, rows: int = 10) -> pd.DataFrame:
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
