"""A big table's columns read from the SQLite pages by a child process, into ``.npy`` files.

The page reader (:mod:`engine.reports.nsys.pages`) is numpy work driven from Python, so two
reads in two threads of one process mostly take turns on Python's lock: reading the kernels while
the CUDA API calls are read (a summary), or while the window draws (the GUI), gains nothing. In a
child process each big read gets a core of its own (real10m: kernels 2.2 s and 21M calls 3.2 s at
the same time, instead of 5.2 s each in two threads), and the parent's thread only waits.

The child is run by the engine's child runner (:mod:`engine.system.child`: a JSON request on
stdin, a result file; ``python -S``, with numpy's folder only). Parent side, :func:`read_in_child`:
the child writes each column into the file it is given (``engine.reports.nsys.pages.NpyFile``, the
cache file's temporary name), and its result says which columns it wrote; the parent renames and
maps them. Any failure (the child cannot start, the reader does not handle the table, the child is
killed) returns False: the caller reads in-process.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: leaf pages from which a table is read in a child (~100 rows a leaf: about a million rows)
CHILD_LEAVES = 10_000


def read_in_child(path: Path, table: str, exprs: dict[str, str], narrow: frozenset[str],
                  files: dict[str, Path], null: int) -> bool:
    """Have a child read ``exprs`` of ``table`` into ``files`` (name -> .npy path); True on success."""
    from engine.system.child import run_child
    from engine.system.errors import KernelscopeError

    request = {"path": str(path), "table": table, "exprs": exprs, "narrow": sorted(narrow),
               "files": {n: str(f) for n, f in files.items()}, "null": null}
    try:
        data = run_child("engine.reports.nsys.page_child", request, needs="numpy",
                         what=f"The process reading {table}", hint="it is read in this process instead.")
        answer = json.loads(data.decode() or "{}")
    except (KernelscopeError, ValueError):
        return False
    return bool(answer.get("written") == sorted(exprs))


def handle(request: dict[str, Any], _progress: Callable[[str], None]) -> bytes:
    """Child: write the columns of the request into its files; the result names those written."""
    from engine.reports.nsys.pages import NpyFile, read_columns
    from engine.system.errors import KernelscopeError

    files = {n: Path(f) for n, f in request["files"].items()}

    def alloc(name: str, dtype: type, rows: int) -> NpyFile:
        if rows == 0:  # (an empty file is not made here; the parent reads such a table itself)
            raise ValueError("no rows")
        return NpyFile(files[name], dtype, rows)

    got = read_columns(Path(request["path"]), request["table"], request["exprs"], int(request["null"]),
                       n_threads=1, narrow=frozenset(request["narrow"]), alloc=alloc)
    if got is None:
        raise KernelscopeError(f"The page reader does not read {request['table']}; SQLite reads it.")
    for col in got.values():  # (written with pwrite: the parent sees them through the OS cache)
        if isinstance(col, NpyFile):
            col.close()
    return json.dumps({"written": sorted(got)}).encode()


if __name__ == "__main__":
    from engine.system.child import serve

    sys.exit(serve(handle))
