"""Computed objects pickled on disk under the report's identity (the file and the engine's code).

The pickles are read only from this user's cache directory (the entry of
:func:`engine.system.cache.file_identity`, as the overview's cache,
:mod:`engine.analysis.findings.overview_store`); one that cannot be read or written only costs the
speed-up. :mod:`engine.analysis.pytorch.kept_results` says what is kept.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

#: bump when a kept type changes shape (the identity covers the engine's code anyway)
SCHEMA = 1
T = TypeVar("T")


def cached_file(path: Path, name: str) -> Path | None:
    """Where ``name``'s result of the report at ``path`` is kept (None when it cannot be read)."""
    from engine.system.cache import cache_root, file_identity

    try:
        identity = file_identity(Path(path))
    except OSError:
        return None
    return cache_root() / "results" / identity / f"pytorch-v{SCHEMA}-{name}.pickle"


def _load(file: Path, kind: type[Any]) -> Any:
    try:
        data = file.read_bytes()
    except OSError:
        return None
    try:
        value = pickle.loads(data)  # noqa: S301 - our own cache only
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        return None
    return value if isinstance(value, kind) else None


def _store(file: Path, value: Any) -> None:
    from engine.system.atomic import atomic_write_bytes

    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):  # a cache is never worth a failure
        return
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(file, data, fsync=False)
    except OSError:
        pass


def on_disk(trace: Any, name: str, make: Callable[[], T], kind: type[Any]) -> T:
    """``make()``'s value (an instance of ``kind``) for ``trace``, kept on disk by ``name``."""
    path = getattr(getattr(trace, "info", None), "path", None)
    file = cached_file(path, name) if path is not None else None
    if file is not None:
        got = _load(file, kind)
        if got is not None:
            return got  # type: ignore[no-any-return]
    value = make()
    if file is not None:
        _store(file, value)
    return value
