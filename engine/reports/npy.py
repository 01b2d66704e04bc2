"""Loading ``.npy`` column files from the caches, safely from several threads."""

from __future__ import annotations

import threading
from typing import Any

#: np.load parses each .npy header with ast.literal_eval; CPython 3.11's compiler is not safe to run
#: in several threads at once ("AST constructor recursion depth mismatch"), so loads take turns
#: (only the header: the arrays are memory-mapped)
_NPY_LOCK = threading.Lock()


def load_npy(path: Any, **kwargs: Any) -> Any:
    """``np.load`` with the header parse serialised across threads (see :data:`_NPY_LOCK`)."""
    import numpy as np

    with _NPY_LOCK:
        return np.load(path, **kwargs)
