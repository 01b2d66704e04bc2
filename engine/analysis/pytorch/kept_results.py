"""The PyTorch views' computed objects kept on disk under the report's identity.

On a 1 GB Kineto trace the PyTorch events take ~2 s to build from the mapped columns, the operator
tables, the kernel table and the module tree a few seconds more; the next window or command that
opens the same file loads them pickled (~0.1 s) from the cache entry of the report's identity
(:func:`engine.system.cache.file_identity`: the file and the engine's code, as the overview's
cache, :mod:`engine.analysis.findings.overview_store`). Within a process each is kept for the trace's
life (:func:`engine.analysis.tables.trace_cache`). The pickles are read only from this user's cache
directory (:mod:`engine.analysis.pytorch.pickle_store`); one that cannot be read or written only
costs the speed-up.

    table = operators(trace, "name")      # the operator table: built once, then loaded
    ev = torch_events(trace)              # the events: engine.analysis.pytorch.events keeps them here
    steps = summary_steps(trace, it)      # the steps a summary measured (the Timeline's step bands)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from engine.analysis.pytorch.events import torch_events
from engine.analysis.pytorch.pickle_store import on_disk
from engine.analysis.tables import trace_cache

T = TypeVar("T")

if TYPE_CHECKING:
    from engine.analysis.pytorch.kernels import KernelTable
    from engine.analysis.pytorch.memory import MemoryTimeline
    from engine.analysis.pytorch.modules import ModuleTree
    from engine.analysis.pytorch.operators import OpTable
    from engine.analysis.step_model import Steps


def kept(trace: Any, name: str, make: Callable[[], T], kind: type[Any]) -> T:
    """:func:`on_disk`, kept in memory too for the trace's life."""
    out: T = trace_cache(trace, f"pytorch.kept.{name}", lambda: on_disk(trace, name, make, kind))
    return out


def operators(trace: Any, by: str, sums: Callable[[], Any] | None = None) -> OpTable:
    """The operator table of ``trace`` grouped ``by`` name or shapes.

    ``sums``: gives :func:`engine.analysis.pytorch.operators.self_and_total` of the trace's events
    (the same for both groupings: :func:`views` makes them once for the two tables).
    """
    from engine.analysis.pytorch.operators import OpTable, operator_table

    def make() -> OpTable:
        return operator_table(torch_events(trace), by, sums=None if sums is None else sums())

    return kept(trace, f"ops-{by}", make, OpTable)


def kernels(trace: Any) -> KernelTable:
    """The kernel table of ``trace``."""
    from engine.analysis.pytorch.kernels import KernelTable, kernel_table

    return kept(trace, "kernels", lambda: kernel_table(torch_events(trace)), KernelTable)


def modules(trace: Any) -> ModuleTree:
    """The module tree of ``trace`` (its steps as :func:`engine.analysis.steps.find_steps` finds them)."""
    from engine.analysis.pytorch.events import STEP
    from engine.analysis.pytorch.modules import ModuleTree, module_tree
    from engine.analysis.steps import find_steps

    def make() -> ModuleTree:
        ev = torch_events(trace)
        # the steps found from the GPU's work count only where the trace has no profiler steps
        return module_tree(ev, None if (ev.cat == STEP).any() else find_steps(trace))

    return kept(trace, "modules", make, ModuleTree)


def memory(trace: Any) -> MemoryTimeline:
    """The memory curves of ``trace``."""
    from engine.analysis.pytorch.memory import MemoryTimeline, memory_timeline

    return kept(trace, "memory", lambda: memory_timeline(trace), MemoryTimeline)


def views(trace: Any) -> dict[str, Any]:
    """Every table the PyTorch views show, each kept (on disk and for the trace's life).

    ``memory``; except for a memory snapshot, ``ops`` (by name and by shapes), ``kernels`` and
    ``modules``. The window's PyTorch view and the command line's first question about a Kineto
    trace (:func:`engine.cli.cached.overview_of`) build this same set.
    """
    out: dict[str, Any] = {"memory": memory(trace)}
    if trace.info.kind == "snapshot":
        return out
    from functools import cache

    from engine.analysis.pytorch.operators import self_and_total

    sums = cache(lambda: self_and_total(torch_events(trace)))  # (dropped when this returns)
    out["ops"] = {by: operators(trace, by, sums) for by in ("name", "shapes")}
    out["kernels"] = kernels(trace)
    out["modules"] = modules(trace)
    return out


def summary_steps(trace: Any, iterations: Any) -> list[Steps]:
    """The steps a summary's ``iterations`` were measured in, every process's, kept.

    As :func:`engine.analysis.steps.summary_steps` finds them (on a 1 GB trace ~0.7 CPU s).
    """
    import hashlib

    from engine.analysis.steps import summary_steps as find

    name = iterations.range if iterations.chosen_by == "user" else ""
    key = hashlib.sha256(name.encode()).hexdigest()[:16] if name else "structure"
    return kept(trace, f"steps-{key}", lambda: find(trace, iterations), list)
