"""Read Nsight Compute results: ``.ncu-rep`` files and ``ncu --import ... --csv`` exports.

The one way in is :func:`read_ncu`; callers outside this package import only the names below (an
import-linter contract in pyproject.toml holds them to it). It gives an :class:`NcuReport` whose
rows stand for these pandas tables, built on first use:

- ``kernels``: one row per profiled kernel (action) with its launch configuration and duration;
- ``metrics``: the ``--page details`` rows, long format, text exactly as ``ncu --print-units base``
  prints it, plus a numeric ``value`` column;
- ``raw``: the ``--page raw`` table, wide (one column per metric), text as ncu prints it, with the
  units in ``raw_units``.

A ``.ncu-rep`` is read by the first decoder of one ordered list that applies
(:mod:`~engine.reports.ncu.decoders`: the on-disk cache, our own reader of the file's protobuf
blocks, NVIDIA's ``ncu_report`` in child processes, ``ncu_report`` in this process). CSV exports
(``--page details`` or ``--page raw``, with or without ``--print-units base``, with locale thousands
separators) are read into the same tables, converted to base units
(:mod:`~engine.reports.ncu.csv_export`). Input files are only ever opened for reading.

Inside, the modules are named by what they answer: ``model`` (the tables), ``rep_file`` (the file's
headers), ``section_defs`` and ``wire`` (the protobuf blocks), ``pb_results``/``pb_parts``/
``own_reader`` (our reader), ``nvidia_reader``/``decode``/``children`` (``ncu_report``, in or out of
process), ``unit_lookup``, ``cache``, ``lazy_report``, ``sources``, ``kernel_names``, ``units``,
``metrics`` (the metric catalogue) and ``trace`` (a report as a :class:`~engine.reports.base.Trace`).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.reports.ncu.lazy_report import LazyNcuReport
    from engine.reports.ncu.metrics import (
        ACHIEVED_OCC,
        DENSE_TENSOR_PEAKS,
        DRAM_PCT,
        DURATION,
        LAYOUT,
        LEVELS,
        LIMITERS,
        MEM_PCT,
        PEAK_INST,
        SCALAR,
        SM_HZ,
        SM_PCT,
        SMSP_HZ,
        SMSP_INST,
        STALL_PREFIX,
        STALL_SUFFIX,
        TENSOR_PATHS,
        THEORETICAL_OCC,
        VERDICT_KEYS,
        summary_metrics,
        top_stalls,
    )
    from engine.reports.ncu.model import (
        DETAILS_COLUMNS,
        ID_COLUMNS,
        KERNEL_COLUMNS,
        LINE_COLUMNS,
        NVTX_COLUMNS,
        RULE_COLUMNS,
        RULE_TABLE_COLUMNS,
        SOURCE_COLUMNS,
        NcuReport,
    )
    from engine.reports.ncu.rep_file import (
        KNOWN_FORMAT,
        NO_RESULTS_LINE,
        NoResultsError,
        report_format_version,
    )
    from engine.reports.ncu.sources import resolve_all_sources, resolve_sources
    from engine.reports.ncu.trace import NCU_KIND, NOT_A_TIMELINE, NcuTrace, is_ncu
    from engine.reports.ncu.units import format_number, format_speedup, parse_number, to_base_unit

#: The module of the package that defines each public name. They are imported on first use: a child
#: process that runs one module of the package (``python -m engine.reports.ncu.decode``) pays for
#: that module's imports only (the whole reader costs ~10-25 ms more to start).
_DEFINED_IN = {
    **dict.fromkeys(["LazyNcuReport"], "lazy_report"),
    **dict.fromkeys([
        "ACHIEVED_OCC", "DENSE_TENSOR_PEAKS", "DRAM_PCT", "DURATION", "LAYOUT", "LEVELS", "LIMITERS",
        "MEM_PCT", "PEAK_INST", "SCALAR", "SM_HZ", "SM_PCT", "SMSP_HZ", "SMSP_INST", "STALL_PREFIX",
        "STALL_SUFFIX", "TENSOR_PATHS", "THEORETICAL_OCC", "VERDICT_KEYS", "summary_metrics", "top_stalls",
    ], "metrics"),
    **dict.fromkeys([
        "DETAILS_COLUMNS", "ID_COLUMNS", "KERNEL_COLUMNS", "LINE_COLUMNS", "NVTX_COLUMNS", "RULE_COLUMNS",
        "RULE_TABLE_COLUMNS", "SOURCE_COLUMNS", "NcuReport",
    ], "model"),
    **dict.fromkeys(["KNOWN_FORMAT", "NO_RESULTS_LINE", "NoResultsError", "report_format_version"],
                    "rep_file"),
    **dict.fromkeys(["resolve_all_sources", "resolve_sources"], "sources"),
    **dict.fromkeys(["NCU_KIND", "NOT_A_TIMELINE", "NcuTrace", "is_ncu"], "trace"),
    **dict.fromkeys(["format_number", "format_speedup", "parse_number", "to_base_unit"], "units"),
}

__all__ = [  # the names of _DEFINED_IN, and the two functions below
    "ACHIEVED_OCC", "DENSE_TENSOR_PEAKS", "DETAILS_COLUMNS", "DRAM_PCT", "DURATION", "ID_COLUMNS",
    "KERNEL_COLUMNS", "KNOWN_FORMAT", "LAYOUT", "LEVELS", "LIMITERS", "LINE_COLUMNS", "MEM_PCT", "NCU_KIND",
    "NOT_A_TIMELINE", "NO_RESULTS_LINE", "NVTX_COLUMNS", "PEAK_INST", "RULE_COLUMNS", "RULE_TABLE_COLUMNS",
    "SCALAR", "SMSP_HZ", "SMSP_INST", "SM_HZ", "SM_PCT", "SOURCE_COLUMNS", "STALL_PREFIX", "STALL_SUFFIX",
    "TENSOR_PATHS", "THEORETICAL_OCC", "VERDICT_KEYS", "LazyNcuReport", "NcuReport", "NcuTrace",
    "NoResultsError", "format_number", "format_speedup", "is_ncu", "open_ncu", "parse_number", "read_ncu",
    "report_format_version", "resolve_all_sources", "resolve_sources", "summary_metrics", "to_base_unit",
    "top_stalls",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (see :data:`_DEFINED_IN`)."""
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def read_ncu(path: str | Path, *, sources: bool = False, use_cache: bool = True) -> NcuReport:
    """Read an Nsight Compute report (``.ncu-rep``) or its CSV export (``.csv``).

    Args:
        path: The report or export.
        sources: Also disassemble every kernel's hottest instructions (``.ncu-rep`` only).
        use_cache: Read and write the on-disk cache of decoded tables (``.ncu-rep`` only).

    Raises:
        ReportError: The file cannot be read; the message says what to do.
    """
    p = Path(path)
    if p.suffix.lower() == ".csv":
        from engine.reports.ncu.csv_export import read_ncu_csv

        return read_ncu_csv(p)
    from engine.reports.ncu.decoders import read_ncu_rep

    return read_ncu_rep(p, use_cache=use_cache, sources=sources)


def open_ncu(path: str | Path) -> NcuTrace:
    """Read an ``.ncu-rep`` or ncu CSV export into an :class:`NcuTrace` (listed beside timelines).

    Raises:
        ReportError: The file cannot be read; the message says what to do.
    """
    from engine.reports.ncu.trace import NcuTrace

    return NcuTrace(read_ncu(path))
