"""The units of a report's metrics: asked of ``ncu_report`` once, in a small child, and cached.

A ``.ncu-rep`` stores metric values but not units: ``ncu_report`` gives them from its metric
database, and works a derived metric's unit out from the units asked before it in the same process
(:func:`engine.reports.ncu.decode.settle_units`). So units are asked as that function asks them (the
first kernel of each distinct metric list, in kernel order, every name in ``metric_names()`` order)
in a child process (``python -m engine.reports.ncu.unit_lookup PATH RANGE:ACTION ...``: ~0.2 s
and ~150 MB for one ``--set full`` kernel, gone when it exits), and kept in the user cache under
a key of everything the answer depends on: the ``ncu-report`` version, the metric lists in that
order, the section definitions stored with them (derived metrics' expressions) and the GPU
(architecture, chip). A second report of the same kind needs no child at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

_FORMAT = 1


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
    """A child asking ``ncu_report`` for units, started at once and read with :meth:`result`."""

    def __init__(self, path: Path, refs: list[tuple[int, int]], count: int, key: str) -> None:
        self.key = key
        self.proc: subprocess.Popen[bytes] | None = None
        import importlib.util

        spec = importlib.util.find_spec("ncu_report")
        if spec is None or not spec.submodule_search_locations:
            return
        where = str(Path(next(iter(spec.submodule_search_locations))).parent)
        repo = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [repo, where,
                                                                       os.environ.get("PYTHONPATH")])))
        # -S: no site (.pth files); the child needs this file and ncu_report only.
        argv = [sys.executable, "-S", "-m", "engine.reports.ncu.unit_lookup", str(path), str(count),
                *(f"{r}:{a}" for r, a in refs)]
        try:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         stdin=subprocess.DEVNULL, env=env)
        except OSError:
            self.proc = None

    def result(self, timeout: float = 120.0) -> dict[str, str] | None:
        """The units (name -> unit), stored in the cache; None when the child failed."""
        if self.proc is None:
            return None
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            return None
        if self.proc.returncode != 0:
            return None
        try:
            units = json.loads(out)
        except ValueError:
            return None
        if not isinstance(units, dict):
            return None
        _store(self.key, units)
        return units

    def cancel(self) -> None:
        """End the child (its answer is not needed)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


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


def main() -> None:
    """Child: print the JSON units of the actions ``RANGE:ACTION ...`` of report ``PATH``.

    Arguments ``PATH COUNT RANGE:ACTION ...``; exits 3 unless ``ncu_report`` holds the report's
    COUNT results as one range (as :mod:`engine.reports.ncu.own_reader` numbers them).
    """
    import ncu_report  # noqa: PLC0415 - native module, only in the child

    ctx = ncu_report.load_report(sys.argv[1])
    if ctx.num_ranges() != 1 or ctx.range_by_idx(0).num_actions() != int(sys.argv[2]):
        sys.exit(3)
    refs = [(int(r), int(a)) for r, a in (arg.split(":") for arg in sys.argv[3:])]
    sys.stdout.write(json.dumps(ask_units(ctx, refs), separators=(",", ":")))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
