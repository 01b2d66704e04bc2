"""The units of a report's metrics: asked of ``ncu_report`` once, in a small child, and cached.

A ``.ncu-rep`` stores metric values but not units: ``ncu_report`` gives them from its metric
database, and works a derived metric's unit out from the units asked before it in the same process
(:func:`engine.reports.ncu.decode.settle_units`). So units are asked as that function asks them (the
first kernel of each distinct metric list, in kernel order, every name in ``metric_names()`` order)
in a child process (``python -m engine.reports.ncu.unit_lookup``, :class:`UnitLookup`: ~0.2 s
and ~150 MB for one ``--set full`` kernel, gone when it exits), and kept in the user cache under
a key of everything the answer depends on: the ``ncu-report`` version, the metric lists in that
order, the section definitions stored with them (derived metrics' expressions) and the GPU
(architecture, chip). A second report of the same kind needs no child at all.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

_FORMAT = 1
#: the units child in a failure's sentence, and what happens then
_WHAT = "The process asking ncu_report for the metrics' units"
_HINT = "the report is decoded by ncu_report instead."


def _wheel_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ncu-report")
    except PackageNotFoundError:
        return None


def units_key(lists: list[tuple[str, ...]], extra: list[bytes]) -> str | None:
    """The cache key of the units of ``lists`` (distinct metric lists, in order); None without the wheel."""
    wheel = _wheel_version()
    if wheel is None:
        return None
    h = hashlib.blake2b(digest_size=20)
    h.update(f"{_FORMAT}|{wheel}|{sys.version_info[:2]}".encode())
    for names in lists:
        h.update(b"\x00L")
        h.update("\n".join(names).encode())
    for part in extra:
        h.update(b"\x00X")
        h.update(part)
    return h.hexdigest()


def _cache_file(key: str) -> Path:
    from engine.system.cache import cache_root

    return cache_root() / "ncu-units" / f"{key}.json"


def cached_units(key: str) -> dict[str, str] | None:
    """The units stored under ``key``, or None."""
    try:
        with _cache_file(key).open(encoding="utf-8") as f:
            got = json.load(f)
    except (OSError, ValueError):
        return None
    return got if isinstance(got, dict) else None


def _store(key: str, units: dict[str, str]) -> None:
    from engine.system.atomic import atomic_write

    try:
        atomic_write(_cache_file(key), lambda f: f.write(json.dumps(units, separators=(",", ":"))),
                     fsync=False)
    except OSError:
        pass  # a read-only or full cache only costs speed


class UnitLookup:
    """A child asking ``ncu_report`` for units, started at once and read with :meth:`result`.

    The child is run by the engine's child runner (:mod:`engine.system.child`; ``python -S``, with
    ``ncu_report``'s folder only): a JSON request, the units as JSON in its result file.
    """

    def __init__(self, path: Path, refs: list[tuple[int, int]], count: int, key: str) -> None:
        from engine.system.child import Child
        from engine.system.errors import KernelscopeError

        self.key = key
        self.child: Child | None = None
        self.why = ""  # why there is no child: one sentence
        try:
            self.child = Child("engine.reports.ncu.unit_lookup", needs="ncu_report", what=_WHAT, hint=_HINT)
        except KernelscopeError as exc:
            self.why = str(exc)
            return
        self.child.send({"path": str(path), "count": count, "refs": refs})

    def result(self, timeout: float = 120.0) -> dict[str, str]:
        """The units (name -> unit), stored in the cache.

        Raises:
            KernelscopeError: the child could not start, failed, ran past ``timeout`` seconds or gave
                no units, in one sentence.

        """
        from engine.system.errors import KernelscopeError

        if self.child is None:
            raise KernelscopeError(self.why)
        data = self.child.result(timeout_s=timeout)
        try:
            units = json.loads(data)
        except ValueError:
            units = None
        if not isinstance(units, dict):
            raise KernelscopeError(f"{_WHAT} gave no units; {_HINT}")
        _store(self.key, units)
        return units

    def cancel(self) -> None:
        """End the child (its answer is not needed)."""
        if self.child is not None:
            self.child.close()


def ask_units(ctx: Any, refs: list[tuple[int, int]]) -> dict[str, str]:
    """What :func:`engine.reports.ncu.decode.settle_units` answers for the actions ``refs`` of ``ctx``."""
    units: dict[str, str] = {}
    for r, a in refs:
        action = ctx.range_by_idx(r).action_by_idx(a)
        for name in map(str, action.metric_names()):
            m = action.metric_by_name(name)
            if m is not None:
                units.setdefault(name, str(m.unit()))
    return units


def handle(request: dict[str, Any], _progress: Callable[[str], None]) -> bytes:
    """Child: the JSON units of the actions ``refs`` (``[range, action]`` pairs) of report ``path``.

    Raises:
        KernelscopeError: ``ncu_report`` does not hold the report's ``count`` results as one range
            (as :mod:`engine.reports.ncu.own_reader` numbers them).

    """
    import ncu_report  # noqa: PLC0415 - native module, only in the child

    from engine.system.errors import KernelscopeError

    ctx = ncu_report.load_report(request["path"])
    if ctx.num_ranges() != 1 or ctx.range_by_idx(0).num_actions() != int(request["count"]):
        raise KernelscopeError(f"NVIDIA's ncu_report does not hold the report's {request['count']} results "
                               f"as one range; {_HINT}")
    refs = [(int(r), int(a)) for r, a in request["refs"]]
    return json.dumps(ask_units(ctx, refs), separators=(",", ":")).encode()


if __name__ == "__main__":
    from engine.system.child import serve

    sys.exit(serve(handle))
