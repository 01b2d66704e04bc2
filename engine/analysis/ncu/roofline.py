"""Roofline points per kernel, computed as Nsight Compute's roofline charts compute them.

Achieved work per second (``SpeedOfLight_*RooflineChart`` sections):

- FP32: (fadd + fmul + 2·ffma) thread instructions per elapsed cycle ×
  ``smsp__cycles_elapsed.avg.per_second``, each
  ``smsp__sass_thread_inst_executed_op_<op>_pred_on.sum.per_cycle_elapsed``;
- FP64: the same with dadd, dmul, dfma;
- FP16: 2·hadd + 2·hmul + 4·hfma (packed half2 instructions: the factors of the report's own
  ``derived__smsp__sass_thread_inst_executed_op_h*_pred_on_x2/_x4`` metrics);
- Tensor: ``sm__ops_path_tensor_src_<type>.sum.per_cycle_elapsed`` × ``sm__cycles_elapsed.avg.per_second``,
  one point per data type that did any work.

Bytes per second per memory level: DRAM ``dram__bytes.sum.per_second``, L2
``derived__lts__lts2xbar_bytes.sum.per_second``, L1
``derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.per_second``.
Arithmetic intensity = FLOP/s ÷ bytes/s of that level.

Ceilings: peak FP32 = 2 × ``sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained`` ×
``sm__cycles_elapsed.avg.per_second`` (FP64 2 × dfma, FP16 4 × hfma, tensor the dense
instruction path's ``.sum.peak_sustained``, see :data:`DENSE_TENSOR_PEAKS`); peak DRAM =
``dram__bytes.sum.peak_sustained`` × ``dram__cycles_elapsed.avg.per_second`` (L2 and L1
likewise with ``lts__``/``l1tex__cycles_elapsed``).
A calibration (measured ceilings, e.g. from ``kernelscope calibrate``) adds rows with source
"calibration".
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.reports.ncu import (  # noqa: F401 - re-exported
    DENSE_TENSOR_PEAKS,
    LEVELS,
    PEAK_INST,
    SCALAR,
    SM_HZ,
    SMSP_HZ,
    SMSP_INST,
    TENSOR_PATHS,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd

    from engine.reports.ncu import NcuReport

POINT_COLUMNS = [
    "id", "kernel", "precision", "path", "level", "flops_per_s", "bytes_per_s",
    "intensity_flop_per_byte", "peak_flops_per_s", "peak_bytes_per_s", "attainable_flops_per_s",
    "pct_of_roof", "bound",
]
CEILING_COLUMNS = ["name", "kind", "value", "unit", "source"]

@dataclass
class Roofline:
    """Roofline points of every kernel and the ceilings to draw them against.

    ``ceilings`` holds one row per ceiling (the median over kernels of the report's peaks, which
    differ only with the clocks), plus calibration rows when measured ceilings were given;
    ``kernel_ceilings`` the report's ceilings per kernel (column ``id``); ``notes`` says what was
    not collected and how to collect it.
    """

    points: pd.DataFrame
    ceilings: pd.DataFrame
    kernel_ceilings: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def _mul(*xs: float | None) -> float | None:
    out = 1.0
    for x in xs:
        if x is None:
            return None
        out *= x
    return out


def kernel_ceilings(report: NcuReport, kid: int) -> dict[str, tuple[str, float]]:
    """The report's ceilings for one kernel: name → (kind, value in FLOP/s or byte/s)."""
    v = report.value
    out: dict[str, tuple[str, float]] = {}
    for prec, (_ops, (inst, factor)) in SCALAR.items():
        peak = _mul(v(kid, PEAK_INST.format(inst)), v(kid, SM_HZ))
        if peak is not None:
            out[prec] = ("compute", factor * peak)
    for path, label in TENSOR_PATHS.items():
        per_cycle = None
        for dense in DENSE_TENSOR_PEAKS.get(path, ()):
            per_cycle = v(kid, f"sm__ops_path_tensor_op_{dense}.sum.peak_sustained")
            if per_cycle is not None:
                break
        if per_cycle is None:
            per_cycle = v(kid, f"sm__ops_path_tensor_src_{path}.sum.peak_sustained")
        peak = _mul(per_cycle, v(kid, SM_HZ))
        if peak is not None:
            out[f"Tensor {label}"] = ("compute", peak)
    for level, (_bw, level_per_cycle, hz) in LEVELS.items():
        peak = _mul(v(kid, level_per_cycle), v(kid, hz))
        if peak is not None:
            out[level] = ("memory", peak)
    return out


def _achieved(report: NcuReport, kid: int) -> list[tuple[str, str, float]]:
    """(precision, path, FLOP/s) of one kernel: FP64/FP32/FP16 always, tensor paths with work."""
    v = report.value
    out: list[tuple[str, str, float]] = []
    hz = v(kid, SMSP_HZ)
    for prec, (ops, _peak) in SCALAR.items():
        per_cycle = [v(kid, SMSP_INST.format(op)) for op, _f in ops]
        if hz is None or any(x is None for x in per_cycle):
            continue
        total = sum(f * float(x) for (_op, f), x in zip(ops, per_cycle, strict=True) if x is not None)
        out.append((prec, "", total * hz))
    sm_hz = v(kid, SM_HZ)
    for path, label in TENSOR_PATHS.items():
        rate = _mul(v(kid, f"sm__ops_path_tensor_src_{path}.sum.per_cycle_elapsed"), sm_hz)
        if rate is not None and rate > 0:
            out.append(("Tensor", label, rate))
    return out


def _ceiling_aliases(name: str) -> str:
    """A calibration key in the names this module uses ("dram_bytes_per_s" → "DRAM", "fp32" → "FP32")."""
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    for suffix in ("_flops_per_s", "_flop_per_s", "_bytes_per_s", "_byte_per_s", "_per_s", "_bw", "_peak"):
        if key.endswith(suffix):
            key = key[: -len(suffix)]
    simple = {"dram": "DRAM", "hbm": "DRAM", "l2": "L2", "l1": "L1", "fp64": "FP64", "fp32": "FP32",
              "fp16": "FP16"}
    if key in simple:
        return simple[key]
    if key.startswith("tensor"):
        rest = key[len("tensor"):].strip("_")
        for label in TENSOR_PATHS.values():
            if rest == label.lower().replace(" ", "_"):
                return f"Tensor {label}"
        return "Tensor " + rest.upper() if rest else "Tensor"
    return name


def roofline(report: NcuReport, ceilings: Mapping[str, float] | None = None) -> Roofline:
    """Roofline points for every kernel, hierarchical where the report has L2/L1 metrics.

    Args:
        report: A report read by :func:`engine.reports.ncu.read_ncu`.
        ceilings: Optional measured ceilings, name → value in FLOP/s (compute) or byte/s (memory).
            Names: "DRAM", "L2", "L1", "FP64", "FP32", "FP16", "Tensor FP16", ... (case and
            ``_bytes_per_s``/``_flops_per_s`` suffixes are ignored). They are added to
            ``ceilings`` with source "calibration" and used for ``attainable_flops_per_s``.

    Returns:
        The points (columns :data:`POINT_COLUMNS`), the ceilings and notes on what is missing.
    """
    import pandas as pd

    points, rows, per_kernel, notes = roofline_rows(report, ceilings)
    return Roofline(pd.DataFrame(points, columns=POINT_COLUMNS), pd.DataFrame(rows, columns=CEILING_COLUMNS),
                    pd.DataFrame(per_kernel, columns=["id", *CEILING_COLUMNS]), notes)


def roofline_rows(
    report: NcuReport, ceilings: Mapping[str, float] | None = None
) -> tuple[list[list[object]], list[list[object]], list[list[object]], list[str]]:
    """:func:`roofline` as plain rows: (points, ceilings, per-kernel ceilings with ``id`` first, notes)."""
    calibration = {_ceiling_aliases(k): float(x) for k, x in (ceilings or {}).items()}
    points: list[list[object]] = []
    per_kernel: list[list[object]] = []
    missing_compute: list[str] = []
    missing_levels: set[str] = set()
    for k in report.kernel_records():
        kid = int(k["ID"])
        kname = str(k["Kernel Name"])
        ceil = kernel_ceilings(report, kid)
        for name, (kind, value) in ceil.items():
            per_kernel.append([kid, name, kind, value, "FLOP/s" if kind == "compute" else "byte/s", "report"])
        achieved = _achieved(report, kid)
        if not achieved:
            missing_compute.append(kname)
        for prec, path, flops in achieved:
            cname = prec if prec != "Tensor" else f"Tensor {path}"
            peak_c = calibration.get(cname, ceil.get(cname, ("", math.nan))[1])
            for level, (bw_metric, _pc, _hz) in LEVELS.items():
                bw = report.value(kid, bw_metric)
                if bw is None:
                    missing_levels.add(level)
                    continue
                peak_m = calibration.get(level, ceil.get(level, ("", math.nan))[1])
                ai = flops / bw if bw > 0 else math.nan
                attainable = min(peak_c, ai * peak_m) if not math.isnan(ai) else math.nan
                bound = "" if math.isnan(ai) or math.isnan(peak_c) or math.isnan(peak_m) else (
                    "memory" if ai * peak_m < peak_c else "compute")
                pct = flops / attainable * 100 if attainable and not math.isnan(attainable) else math.nan
                points.append([kid, kname, prec, path, level, flops, bw, ai, peak_c, peak_m,
                               attainable, pct, bound])

    # The median over kernels per (name, kind, unit), in order of first appearance (as pandas'
    # groupby(sort=False).median(): the middle value, or the mean of the two middle ones).
    groups: dict[tuple[object, object, object], list[float]] = {}
    for r in per_kernel:
        groups.setdefault((r[1], r[2], r[4]), []).append(float(r[3]))  # type: ignore[arg-type]
    rows: list[list[object]] = [[key[0], key[1], statistics.median(vals), key[2], "report"]
                                for key, vals in groups.items()]
    for name, value in calibration.items():
        kind = "memory" if name in LEVELS else "compute"
        rows.append([name, kind, value, "FLOP/s" if kind == "compute" else "byte/s", "calibration"])
    notes = []
    if missing_compute:
        notes.append(
            "Roofline metrics were not collected for " + ", ".join(sorted(set(missing_compute))[:3])
            + ("..." if len(set(missing_compute)) > 3 else "")
            + "; profile with `ncu --section SpeedOfLight_RooflineChart` (or `--set full`)."
        )
    if missing_levels:
        notes.append(
            f"No {'/'.join(sorted(missing_levels))} bandwidth in the report; profile with "
            "`ncu --section SpeedOfLight_HierarchicalSingleRooflineChart` (or `--set full`) for the "
            "hierarchical roofline."
        )
    return points, rows, per_kernel, notes
