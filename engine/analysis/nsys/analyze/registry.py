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

import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from engine.analysis.nsys.analyze.common import RuleResult
    from engine.reports.base import Trace

Compute = Callable[["Trace", dict[str, Any]], "RuleResult"]
F = TypeVar("F", bound=Compute)

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


_REGISTERED: dict[str, Rule] = {}
_LOADED: dict[str, Rule] = {}
_LOCK = threading.Lock()


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
        if name in _REGISTERED and _REGISTERED[name].compute is not fn:
            raise ValueError(f"rule {name!r} is registered twice")
        _REGISTERED[name] = Rule(name, title, {**COMMON_OPTIONS, **(options or {})}, fn,
                                 {"rows": 50, **(defaults or {})})
        return fn

    return register


def registry() -> dict[str, Rule]:
    """Every rule, by name (the rule modules are imported on the first call)."""
    if not _LOADED:
        with _LOCK:
            if not _LOADED:
                # found by name, not imported by the registry's code: the modules import the registry
                rules = importlib.import_module(f"{__package__}.rules")
                for mod in sorted(m.name for m in pkgutil.iter_modules(rules.__path__)):
                    importlib.import_module(f"{rules.__name__}.{mod}")
                _LOADED.update({n: _REGISTERED[n] for n in sorted(_REGISTERED)})
    return _LOADED


class RuleField(Mapping[str, Any]):
    """A read-only view ``rule name -> one field of its Rule`` (RULES, RULE_OPTIONS)."""

    def __init__(self, field_of: Callable[[Rule], Any]) -> None:
        self._field = field_of

    def __getitem__(self, name: str) -> Any:
        return self._field(registry()[name])

    def __iter__(self) -> Iterator[str]:
        return iter(registry())

    def __len__(self) -> int:
        return len(registry())
