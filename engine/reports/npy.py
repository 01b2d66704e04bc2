"""Loading ``.npy`` column files from the caches, safely from several threads."""

from __future__ import annotations

import threading
from typing import Any

#: np.load parses each .npy header with ast.literal_eval; CPython 3.11's compiler is not safe to run
#: in several threads at once ("AST constructor recursion depth mismatch"), so loads take turns
#: (only the header: the arrays are memory-mapped)
_NPY_LOCK = threading.Lock()


def load_npy(path: Any, **kwargs: Any) -> Any:
    """``np.load`` with the header parse serialised across threads (see :data:`_NPY_LOCK`).

    A read-only mapping (``mmap_mode="r"``) is registered for the hand-back of its resident pages
    (:mod:`engine.system.shared_maps`).
    """
    import numpy as np

    from engine.system.shared_maps import register_array

    with _NPY_LOCK:
        got = np.load(path, **kwargs)
    if kwargs.get("mmap_mode") == "r":
        register_array(got)
    return got
