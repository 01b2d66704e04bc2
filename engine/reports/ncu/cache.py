"""The on-disk cache of decoded ``.ncu-rep`` tables (pickles under the user cache directory)."""

from __future__ import annotations

from pathlib import Path

from engine.reports.ncu.model import NcuReport
from engine.system.atomic import atomic_write

_CACHE_FORMAT = 11  # 9: nvtx cells, range results; 10: stored section lists; 11: plain rows


def cache_file(path: Path) -> Path:
    """Where the tables of ``path`` are cached (keyed by the file's identity and the engine's code)."""
    from engine.system.cache import cache_root, file_identity

    return cache_root() / "ncu-report" / f"{file_identity(path)}-{_CACHE_FORMAT}.pickle"


def cache_load(path: Path) -> NcuReport | None:
    """The cached tables of ``path``, or None when there are none (or they cannot be read)."""
    import pickle

    try:
        with cache_file(path).open("rb") as f:
            report = pickle.load(f)  # noqa: S301 - our own cache in the user's cache directory
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None
    if not isinstance(report, NcuReport):
        return None
    report.path = path
    return report


def cache_store(path: Path, report: NcuReport) -> None:
    """Cache the tables of ``path``; a read-only or full cache directory is ignored."""
    import pickle

    target = cache_file(path)
    try:
        atomic_write(target, lambda f: pickle.dump(report, f, protocol=pickle.HIGHEST_PROTOCOL),
                     binary=True, fsync=False)
    except OSError:
        pass  # a read-only or full cache only costs speed
