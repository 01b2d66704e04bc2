"""The environment of a ``python -S -m engine...`` child process.

``-S`` skips ``site`` (its ``.pth`` files cost ~70 ms of a child's start): the child then finds
only this repository's code and the packages put on ``PYTHONPATH`` here.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path


def child_env(package: str) -> dict[str, str] | None:
    """``os.environ`` with this repository and ``package``'s folder on ``PYTHONPATH``.

    None when ``package`` is not installed (the caller does the work in-process).
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    where = str(Path(next(iter(spec.submodule_search_locations))).parent)
    repo = str(Path(__file__).resolve().parents[2])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [repo, where, os.environ.get("PYTHONPATH")])))
