"""A big table's columns read from the SQLite pages by a child process, into ``.npy`` files.

The page reader (:mod:`engine.reports.nsys.pages`) is numpy work driven from Python, so two
reads in two threads of one process mostly take turns on Python's lock: reading the kernels while
the CUDA API calls are read (a summary), or while the window draws (the GUI), gains nothing. In a
child process each big read gets a core of its own (real10m: kernels 2.2 s and 21M calls 3.2 s at
the same time, instead of 5.2 s each in two threads), and the parent's thread only waits.

Parent side, :func:`read_in_child`: the child writes each column into the file it is given
(``engine.reports.nsys.pages.NpyFile``, the cache file's temporary name), and says on stdout which
columns it wrote; the parent renames and maps them. Any failure (the child cannot start, the
reader does not handle the table, the child is killed) returns None: the caller reads in-process.

Child side: ``python -S -m engine.reports.nsys.page_child`` with a JSON request on stdin.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

#: leaf pages from which a table is read in a child (~100 rows a leaf: about a million rows)
CHILD_LEAVES = 10_000


def read_in_child(path: Path, table: str, exprs: dict[str, str], narrow: frozenset[str],
                  files: dict[str, Path], null: int) -> bool:
    """Have a child read ``exprs`` of ``table`` into ``files`` (name -> .npy path); True on success."""
    from engine.system.pychild import child_env

    env = child_env("numpy")
    if env is None:
        return False
    request = {"path": str(path), "table": table, "exprs": exprs, "narrow": sorted(narrow),
               "files": {n: str(f) for n, f in files.items()}, "null": null}
    try:
        # -S: without site (.pth files, ~70 ms): the child needs only this code and numpy
        proc = subprocess.run([sys.executable, "-S", "-m", "engine.reports.nsys.page_child"],
                              input=json.dumps(request).encode(), capture_output=True, env=env,
                              check=False)
    except OSError:
        return False
    if proc.returncode != 0:
        return False
    try:
        answer = json.loads(proc.stdout.decode() or "{}")
    except ValueError:
        return False
    return bool(answer.get("written") == sorted(exprs))


def main() -> int:
    """Child: read the request from stdin, write the columns, print which were written."""
    from engine.reports.nsys.pages import NpyFile, read_columns

    req = json.loads(sys.stdin.read())
    files = {n: Path(f) for n, f in req["files"].items()}

    def alloc(name: str, dtype: type, rows: int) -> NpyFile:
        if rows == 0:  # (an empty file is not made here; the parent reads such a table itself)
            raise ValueError("no rows")
        return NpyFile(files[name], dtype, rows)

    got = read_columns(Path(req["path"]), req["table"], req["exprs"], int(req["null"]),
                       n_threads=1, narrow=frozenset(req["narrow"]), alloc=alloc)
    if got is None:
        return 1
    for col in got.values():  # (written with pwrite: the parent sees them through the OS cache)
        if isinstance(col, NpyFile):
            col.close()
    print(json.dumps({"written": sorted(got)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
