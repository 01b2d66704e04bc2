"""The ``nsys analyze`` rules Kernelscope runs: one registered function each.

A rule is a module under :mod:`engine.analysis.nsys.analyze.rules` whose function is declared with
:func:`rule`::

    @rule("gpu_gaps", title="GPU Gaps", options={"gap": "minimum gap duration in ms (default 500)"},
          defaults={"gap": 500})
    def gpu_gaps(trace: Trace, opts: dict[str, Any]) -> RuleResult: ...

It gets any opened trace and its resolved options (the common ``rows``, ``start``, ``end``,
``nvtx`` and its own) and returns a :class:`~engine.analysis.nsys.analyze.common.RuleResult`. The
modules are found by listing the package: adding a rule is adding one module (and its test).
:func:`engine.analysis.nsys.analyze.run` is the one way to run one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from engine.analysis.nsys.plugins import FieldView, Plugins

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace

Compute = Callable[["Trace", dict[str, Any]], "RuleResult"]
F = TypeVar("F", bound=Compute)

@dataclass
class RuleResult:
    """What one rule found.

    Attributes:
        name: the rule's name (a key of :data:`RULES`).
        table: the offending records, with nsys's column names; empty (with columns) if none.
        explanation: a plain sentence saying what was found and why it costs time.
        fix: a concrete way to remove the problem; empty when nothing was found.
        options: the option values the rule ran with.

    """

    name: str
    table: pd.DataFrame
    explanation: str
    fix: str
    options: dict[str, Any] = field(default_factory=dict)


#: The options every rule takes (nsys's), with their help.
COMMON_OPTIONS = {
    "rows": "maximum number of rows returned (default 50; a negative value means no limit)",
    "start": "start time in ns: only records starting at or after it",
    "end": "end time in ns: only records ending at or before it",
    "nvtx": "range[@domain]: only records inside the first NVTX range with that text",
}


@dataclass(frozen=True)
class Rule:
    """One ``nsys analyze`` rule: name, one-line title, its options (with help) and their defaults."""

    name: str
    title: str
    options: dict[str, str]
    compute: Compute
    defaults: dict[str, Any] = field(default_factory=dict)


_PLUGINS: Plugins[Rule] = Plugins(f"{__package__}.rules", "rule")


def rule(name: str, *, title: str, options: dict[str, str] | None = None,
         defaults: dict[str, Any] | None = None) -> Callable[[F], F]:
    """Register the decorated function as the ``nsys analyze`` rule ``name``.

    Args:
        name: the rule's name as nsys 2023+ spells it (``gpu_gaps``).
        title: nsys's one-line title of the rule.
        options: the rule's own options beyond :data:`COMMON_OPTIONS`, name -> help.
        defaults: default values of the options (``rows`` defaults to 50 for every rule).

    """

    def register(fn: F) -> F:
        _PLUGINS.add(name, Rule(name, title, {**COMMON_OPTIONS, **(options or {})}, fn,
                                 {"rows": 50, **(defaults or {})}), lambda e: e.compute is fn)
        return fn

    return register


def registry() -> dict[str, Rule]:
    """Every rule, by name (the rule modules are imported on the first call)."""
    return _PLUGINS.all()


class RuleField(FieldView[Rule]):
    """A read-only view ``name -> one field of its Rule``."""

    def __init__(self, field_of: Callable[[Rule], Any]) -> None:
        super().__init__(registry, field_of)
