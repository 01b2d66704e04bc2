"""The ``nsys stats`` reports Kernelscope computes: one registered function each.

A report is a module under :mod:`engine.analysis.nsys.stats.reports` whose function is declared
with :func:`report`::

    @report("cuda_api_sum", title="CUDA API Summary: ...", columns=(...), needs=("api",))
    def cuda_api_sum(trace: Trace, csv: bool) -> Table: ...

The function gets any opened trace (nsys export or Kineto) and returns the report's table: a
:class:`~engine.analysis.nsys.stats.table.SummaryTable`, a DataFrame with ``columns``, or (when
``csv`` is true and the report is a long trace) a
:class:`~engine.analysis.nsys.stats.rendered.RenderedReport` already rendered as CSV. The modules are
found by listing the package: adding a report is adding one module (and its test).
:func:`engine.analysis.nsys.stats.run` is the one way to run one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from engine.analysis.nsys.plugins import FieldView, Plugins

if TYPE_CHECKING:
    from engine.reports.base import Trace

#: What a report's function returns (SummaryTable, DataFrame or RenderedReport).
Table = Any
Compute = Callable[["Trace", bool], Table]
F = TypeVar("F", bound=Compute)


@dataclass(frozen=True)
class Report:
    """One ``nsys stats`` report: its name, one-line title, nsys's columns and the tables it reads.

    ``needs`` are the engine's table names (``api``, ``kernels``, ``memcpy``, ...); where none of
    them was captured, the report is empty and that is why.
    """

    name: str
    title: str
    columns: tuple[str, ...]
    needs: tuple[str, ...]
    compute: Compute
    shares_reads: bool = False


_PLUGINS: Plugins[Report] = Plugins(f"{__package__}.reports", "report")


def report(
    name: str, *, title: str, columns: tuple[str, ...], needs: tuple[str, ...] = (),
    shares_reads: bool = False,
) -> Callable[[F], F]:
    """Register the decorated function as the ``nsys stats`` report ``name``.

    Args:
        name: the report's name as nsys 2024+ spells it (``cuda_gpu_kern_sum``).
        title: one line: what the report answers (shown in ``--help``, the window's report list).
        columns: the header nsys prints, in its order.
        needs: the engine tables the report reads (see :data:`engine.reports.base.TABLES`).
        shares_reads: it groups ``needs`` through :mod:`.named_durations`, whose reads the reports
            of one command share (:func:`engine.analysis.nsys.stats.run_many` starts them early).

    """
    from engine.reports.base import TABLES

    unknown = [t for t in needs if t not in TABLES]
    if unknown:
        raise ValueError(f"report {name!r} needs unknown tables {unknown}; the tables are {list(TABLES)}")

    def register(fn: F) -> F:
        entry = Report(name, title, tuple(columns), tuple(needs), fn, shares_reads)
        _PLUGINS.add(name, entry, lambda e: e.compute is fn)
        return fn

    return register


def registry() -> dict[str, Report]:
    """Every report, by name (the report modules are imported on the first call)."""
    return _PLUGINS.all()


class ReportField(FieldView[Report]):
    """A read-only view ``name -> one field of its Report``."""

    def __init__(self, field_of: Callable[[Report], Any]) -> None:
        super().__init__(registry, field_of)
