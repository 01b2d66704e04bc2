"""Kernelscope's on-disk cache: where it lives and a small cache of computed results.

Layout under the cache root (``$KERNELSCOPE_CACHE`` or the platform's user cache dir):
``nsys-export/`` SQLite exports of .nsys-rep files, ``results/<identity>/`` computed report texts.
A result's identity covers the input file (real path, size, mtime, inode) and the engine code
that produced it (its source files' mtimes and the package version), so an edited report or an
upgraded Kernelscope never reads a stale entry. Writes are atomic (temp file + rename).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from engine import __version__
from engine.system.atomic import atomic_write_text

_ENGINE_DIR = Path(__file__).resolve().parents[1]


def cache_root() -> Path:
    """The cache root (``$KERNELSCOPE_CACHE`` overrides the user cache directory)."""
    env = os.environ.get("KERNELSCOPE_CACHE")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("kernelscope"))


def _code_stamp() -> str:
    parts = [__version__]
    for sub in ("reports", "analysis"):
        for p in sorted((_ENGINE_DIR / sub).rglob("*.py")):  # subpackages too (analysis/ncu/pages.py)
            st = p.stat()
            parts.append(f"{p.relative_to(_ENGINE_DIR)}:{st.st_mtime_ns}:{st.st_size}")
    return "|".join(parts)


def file_identity(path: Path) -> str:
    """A key that changes whenever the file or the engine code changes (no content hashing)."""
    st = path.stat()
    raw = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{_code_stamp()}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def result_get(identity: str, key: str) -> str | None:
    """A cached result text, or None."""
    p = cache_root() / "results" / identity / key
    try:
        return p.read_text(encoding="utf-8")
    except OSError:
        return None


def result_put(identity: str, key: str, text: str) -> None:
    """Store a result text atomically; failures (read-only cache, full disk) are ignored."""
    d = cache_root() / "results" / identity
    try:
        atomic_write_text(d / key, text, fsync=False)
    except OSError:
        pass
