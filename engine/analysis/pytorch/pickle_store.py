"""Computed objects pickled on disk under the report's identity (the file and the engine's code).

The pickles are read only from this user's cache directory (the entry of
:func:`engine.system.cache.file_identity`, as the overview's cache,
:mod:`engine.analysis.findings.overview_store`); one that cannot be read or written only costs the
speed-up. :mod:`engine.analysis.pytorch.kept_results` says what is kept.

With ``map_arrays`` (the PyTorch events of a trace: 650 MB of columns for a 4 GB Kineto trace), the
value's big arrays (at least ``file_backed.min_bytes()``) are left out of the pickle (protocol 5's
out-of-band buffers) and written to a file beside it (``.arrays``); a load maps that file read-only
and the arrays are views of the map: no copy, no unpickling, and their pages belong to the OS's
cache (handed back as the other mapped arrays are, ``engine.system.shared_maps``). The pickle
names the arrays file by a random token and its size, so a pickle never reads another's arrays.
"""

from __future__ import annotations

import mmap
import os
import pickle
import struct
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


#: the start of a pickle whose big arrays are in its ``.arrays`` file
_MAPPED = b"KSMAPPED1\n"
#: each array's offset in the arrays file is a multiple of this (any dtype's alignment)
_ALIGN = 64
_ERRORS = (pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError,
           IndexError, struct.error)


def _arrays_file(file: Path) -> Path:
    return file.with_suffix(".arrays")


def _load(file: Path, kind: type[Any]) -> Any:
    try:
        data = file.read_bytes()
    except OSError:
        return None
    try:
        if data.startswith(_MAPPED):
            value = _load_mapped(file, memoryview(data)[len(_MAPPED):])
        else:
            value = pickle.loads(data)  # noqa: S301 - our own cache only
    except (*_ERRORS, OSError):
        return None
    return value if isinstance(value, kind) else None


def _load_mapped(file: Path, data: memoryview) -> Any:
    """A pickle whose big arrays are views of its mapped ``.arrays`` file (None: the two do not match)."""
    from engine.system.shared_maps import register

    (head,) = struct.unpack_from("<Q", data)
    token, size, spans = pickle.loads(data[8:8 + head])  # noqa: S301 - our own cache only
    with open(_arrays_file(file), "rb") as fh:
        if os.fstat(fh.fileno()).st_size != size or fh.read(len(token)) != token:
            return None
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    register(mm)
    whole = memoryview(mm)
    return pickle.loads(data[8 + head:], buffers=[whole[a:a + n] for a, n in spans])  # noqa: S301


def _store(file: Path, value: Any, *, map_arrays: bool = False) -> None:
    from engine.system.atomic import atomic_write_bytes

    big: list[pickle.PickleBuffer] = []
    threshold = _map_threshold() if map_arrays else None

    def out_of_band(buf: pickle.PickleBuffer) -> bool:
        if threshold is not None and buf.raw().nbytes >= threshold:
            big.append(buf)
            return False
        return True

    try:
        data = pickle.dumps(value, protocol=5, buffer_callback=out_of_band)
    except (pickle.PicklingError, TypeError, AttributeError, BufferError):  # never worth a failure
        return
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        if big:
            data = _write_arrays(file, big, data)
        atomic_write_bytes(file, data, fsync=False)
    except OSError:
        pass


def _map_threshold() -> int | None:
    from engine.analysis.file_backed import min_bytes

    return min_bytes()


def _write_arrays(file: Path, big: list[pickle.PickleBuffer], data: bytes) -> bytes:
    """Write the arrays file; the pickle to keep beside it (its header names the arrays)."""
    from engine.system.atomic import atomic_write

    token = os.urandom(16)
    spans: list[tuple[int, int]] = []
    at = _ALIGN
    for buf in big:
        spans.append((at, buf.raw().nbytes))
        at += -(-buf.raw().nbytes // _ALIGN) * _ALIGN

    def write(fh: Any) -> None:
        fh.write(token.ljust(_ALIGN, b"\0"))
        for buf, (a, _n) in zip(big, spans, strict=True):
            fh.seek(a)
            fh.write(buf.raw())
        fh.truncate(max(at, _ALIGN))

    atomic_write(_arrays_file(file), write, binary=True, fsync=False)
    head = pickle.dumps((token, max(at, _ALIGN), spans), protocol=5)
    return _MAPPED + struct.pack("<Q", len(head)) + head + data


def on_disk(trace: Any, name: str, make: Callable[[], T], kind: type[Any], *, map_arrays: bool = False) -> T:
    """``make()``'s value (an instance of ``kind``) for ``trace``, kept on disk by ``name``.

    ``map_arrays``: keep the big arrays in a file of their own, mapped read-only on a load (see the
    module docstring); the value's arrays must not be written to.
    """
    path = getattr(getattr(trace, "info", None), "path", None)
    file = cached_file(path, name) if path is not None else None
    if file is not None:
        got = _load(file, kind)
        if got is not None:
            return got  # type: ignore[no-any-return]
    value = make()
    if file is not None:
        _store(file, value, map_arrays=map_arrays)
        if map_arrays:  # the arrays just written, mapped: their heap copies go (no second copy to files)
            got = _load(file, kind)
            if got is not None:
                return got  # type: ignore[no-any-return]
    return value
