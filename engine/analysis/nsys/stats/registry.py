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

import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

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


_REGISTERED: dict[str, Report] = {}
_LOADED: dict[str, Report] = {}
_LOCK = threading.Lock()


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
        if name in _REGISTERED and _REGISTERED[name].compute is not fn:
            raise ValueError(f"report {name!r} is registered twice")
        _REGISTERED[name] = Report(name, title, tuple(columns), tuple(needs), fn, shares_reads)
        return fn

    return register


def registry() -> dict[str, Report]:
    """Every report, by name (the report modules are imported on the first call)."""
    if not _LOADED:
        with _LOCK:
            if not _LOADED:
                # found by name, not imported by the registry's code: the modules import the registry
                reports = importlib.import_module(f"{__package__}.reports")
                for mod in sorted(m.name for m in pkgutil.iter_modules(reports.__path__)):
                    importlib.import_module(f"{reports.__name__}.{mod}")
                _LOADED.update({n: _REGISTERED[n] for n in sorted(_REGISTERED)})
    return _LOADED


class ReportField(Mapping[str, Any]):
    """A read-only view ``report name -> one field of its Report`` (REPORTS, COLUMNS)."""

    def __init__(self, field: Callable[[Report], Any]) -> None:
        self._field = field

    def __getitem__(self, name: str) -> Any:
        return self._field(registry()[name])

    def __iter__(self) -> Iterator[str]:
        return iter(registry())

    def __len__(self) -> int:
        return len(registry())
