"""Read Nsight Compute results: ``.ncu-rep`` files and ``ncu --import ... --csv`` exports.

A ``.ncu-rep`` is decoded by our own reader of its protobuf blocks (:mod:`engine.reports.ncu.own_reader`),
with the units from NVIDIA's ``ncu_report`` module (PyPI ``ncu-report``, asked once in a child and
cached), or, where ours does not apply, read through ``ncu_report`` itself, into plain rows
(:mod:`engine.reports.ncu.lazy_report`: the pages print from them without pandas) that stand for these
pandas tables, built on first use:

- ``kernels``: one row per profiled kernel (action) with its launch configuration and duration;
- ``metrics``: the ``--page details`` rows, long format, text exactly as ``ncu --print-units base``
  prints it, plus a numeric ``value`` column;
- ``raw``: the ``--page raw`` table, wide (one column per metric), text as ncu prints it, with the
  units in ``raw_units``.

CSV exports (``--page details`` or ``--page raw``, with or without ``--print-units base``, with
locale thousands separators) are read into the same tables, converted to base units. Input files are
only ever opened for reading.

The reader is split by what each part knows: :mod:`engine.reports.ncu.model` (the tables and the
sections ncu prints), :mod:`engine.reports.ncu.decoders` (``.ncu-rep`` files, with
:mod:`engine.reports.ncu.actions` decoding each kernel, :mod:`engine.reports.ncu.section_defs`
the section definitions a report stores and :mod:`engine.reports.ncu.cache` the on-disk cache),
:mod:`engine.reports.ncu.csv_export` (CSV exports) and :mod:`engine.reports.ncu.units` (numbers and
units as ncu prints them). This module is the entry point: :func:`read_ncu` and the names callers use.
"""

from __future__ import annotations

from pathlib import Path

from engine.reports.ncu.csv_export import read_ncu_csv
from engine.reports.ncu.lazy_report import LazyNcuReport
from engine.reports.ncu.model import (
    DETAILS_COLUMNS,
    ID_COLUMNS,
    KERNEL_COLUMNS,
    LINE_COLUMNS,
    RULE_COLUMNS,
    RULE_TABLE_COLUMNS,
    SOURCE_COLUMNS,
    NcuReport,
)
from engine.reports.ncu.decoders import (
    KNOWN_FORMAT,
    read_ncu_rep,
    report_format_version,
    resolve_all_sources,
    resolve_sources,
)
from engine.reports.ncu.units import format_number, format_speedup, parse_number, to_base_unit

__all__ = [
    "DETAILS_COLUMNS", "ID_COLUMNS", "KERNEL_COLUMNS", "KNOWN_FORMAT", "LINE_COLUMNS", "RULE_COLUMNS",
    "RULE_TABLE_COLUMNS", "SOURCE_COLUMNS", "LazyNcuReport", "NcuReport", "format_number", "format_speedup",
    "parse_number", "read_ncu", "read_ncu_csv", "read_ncu_rep", "report_format_version",
    "resolve_all_sources",
    "resolve_sources", "to_base_unit",
]


def read_ncu(path: str | Path, *, sources: bool = False) -> NcuReport:
    """Read an Nsight Compute report (``.ncu-rep``) or its CSV export (``.csv``).

    ``sources``: also disassemble every kernel's hottest instructions (``.ncu-rep`` only).

    Raises:
        ReportError: The file cannot be read; the message says what to do.
    """
    p = Path(path)
    if p.suffix.lower() == ".csv":
        return read_ncu_csv(p)
    return read_ncu_rep(p, sources=sources)
