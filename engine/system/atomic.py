"""One way to write a file so that a reader never sees half of it.

The data goes to a temporary file in the target's folder, is flushed and fsynced, and then renamed
over the target (``os.replace`` is atomic on POSIX and Windows). On any failure the temporary file
is removed, so a full disk or a killed write leaves the old file intact and no litter behind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


def atomic_write(path: Path | str, write: Callable[[IO[Any]], object], *, binary: bool = False,
                 shared: bool = False, fsync: bool = True) -> None:
    """Write ``path`` atomically through ``write(fh)``.

    Args:
        path: The target; its folder is created when missing.
        write: Called once with the open temporary file.
        binary: Open the temporary file in binary mode.
        shared: Give the file the usual 0666 & ~umask mode (``mkstemp`` makes 0600), for files
            meant to be read by others (exported reports).
        fsync: Flush to disk before the rename (off for caches, where speed matters more).

    Raises:
        OSError: the folder cannot be created or written; the target is left as it was.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        fh: IO[Any]
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")) as fh:
            write(fh)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        if shared:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path | str, text: str, *, shared: bool = False, fsync: bool = True) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; see :func:`atomic_write`."""
    atomic_write(path, lambda fh: fh.write(text), shared=shared, fsync=fsync)


def atomic_write_bytes(path: Path | str, data: bytes, *, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` atomically; see :func:`atomic_write`."""
    atomic_write(path, lambda fh: fh.write(data), binary=True, fsync=fsync)
