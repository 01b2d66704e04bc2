"""A Kineto trace's columns kept on disk: read once, memory-mapped by every later open.

Streaming a multi-GB trace into columns (:mod:`engine.reports.kineto_stream`) takes seconds per
GB; the columns it gives are a few hundred bytes per event. They are kept as ``.npy`` files (one
per column) and one ``tables.json`` (the distinct names, categories, processes, threads and the
document's other keys) under ``<cache root>/columns/<file key>/``, beside the nsys reports' column
caches. The key covers the trace's real path, size, mtime and inode and this format's version,
so an edited or replaced trace is read again. Writes go to a temporary folder renamed into place;
a cache that cannot be written only costs the speed-up.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from engine.reports.kineto_columns import (
    ARRAY_NAMES,
    CODED,
    INT_ARGS,
    MEMORY_FIELDS,
    TEXT_ARGS,
    Codes,
    KinetoColumns,
)
from engine.reports.kineto_stream import BLOCK, cuts, read_columns, read_part_to_files
from engine.reports.npy import load_npy

FORMAT = "kineto-1"  # bump when the files' meaning changes
#: column files smaller than this are read, not mapped (a map of an empty file fails)
_MAP_BYTES = 1 << 16


def cache_dir(path: Path) -> Path | None:
    """Where the columns of the trace at ``path`` are kept; None when the file cannot be identified."""
    from engine.system.cache import cache_root

    try:
        st = path.stat()
        raw = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{FORMAT}"
        return cache_root() / "columns" / hashlib.sha256(raw.encode()).hexdigest()[:32]
    except OSError:
        return None


def _arrays(cols: KinetoColumns) -> dict[str, Any]:
    out: dict[str, Any] = {k: getattr(cols, k) for k in ("cat", "name", "pid", "tid", "ts", "dur")}
    out.update({f"int.{i}": cols.ints[k] for i, k in enumerate(INT_ARGS)})
    out.update({f"text.{i}": cols.texts[k] for i, k in enumerate(TEXT_ARGS)})
    out.update({f"memory.{k}": cols.memory[k] for k in MEMORY_FIELDS})
    return out


def _tables(cols: KinetoColumns) -> dict[str, Any]:
    return {"format": FORMAT, "int_args": list(INT_ARGS), "text_args": list(TEXT_ARGS), "n": cols.n,
            "cats": cols.cats, "names": cols.names, "pids": cols.pids, "tids": cols.tids,
            "text_values": cols.text_values, "processes": cols.processes, "threads": cols.threads,
            "meta": cols.meta, "origin_us": cols.origin_us if math.isfinite(cols.origin_us) else None}


def save(cols: KinetoColumns, folder: Path) -> bool:
    """Keep ``cols`` in ``folder`` (atomically: all files or none); False when it cannot be written."""
    tmp = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        for name, arr in _arrays(cols).items():
            with open(tmp / f"{name}.npy", "wb") as fh:
                np.save(fh, np.ascontiguousarray(arr), allow_pickle=False)
        (tmp / "tables.json").write_text(json.dumps(_tables(cols)), encoding="utf-8")
        os.replace(tmp, folder)
        return True
    except OSError:
        return False  # a read-only or full cache, or another process put it there first
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load(folder: Path) -> KinetoColumns | None:
    """The columns kept in ``folder`` (arrays memory-mapped), or None when there are none (or stale)."""
    try:
        t = json.loads((folder / "tables.json").read_text(encoding="utf-8"))
        if t.get("format") != FORMAT or t["int_args"] != list(INT_ARGS) or t["text_args"] != list(TEXT_ARGS):
            return None

        def arr(name: str) -> Any:
            f = folder / f"{name}.npy"
            return load_npy(f, mmap_mode="r") if f.stat().st_size > _MAP_BYTES else load_npy(f)

        cols = KinetoColumns(
            cat=arr("cat"), name=arr("name"), pid=arr("pid"), tid=arr("tid"), ts=arr("ts"), dur=arr("dur"),
            cats=t["cats"], names=t["names"], pids=t["pids"], tids=t["tids"],
            ints={k: arr(f"int.{i}") for i, k in enumerate(INT_ARGS)},
            texts={k: arr(f"text.{i}") for i, k in enumerate(TEXT_ARGS)}, text_values=t["text_values"],
            memory={k: arr(f"memory.{k}") for k in MEMORY_FIELDS},
            processes=[(p, n) for p, n in t["processes"]], threads=[(p, i, n) for p, i, n in t["threads"]],
            meta=t["meta"], origin_us=math.inf if t["origin_us"] is None else float(t["origin_us"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return cols if cols.n == t["n"] else None


def columns_of(path: Path, *, workers: int | None = None) -> KinetoColumns:
    """The columns of the trace at ``path``: from the cache, else streamed (and then kept there).

    A big uncompressed trace is read by ``workers`` processes (default: up to 2, one per core; one,
    in this process, inside a pool's worker, which may not start processes of its own), each
    writing its part's columns to files, joined here a column at a time
    (:func:`write_parts`): no process ever holds all the columns in memory.

    Raises:
        TraceFormatError: not a trace, or broken JSON; OSError: the file cannot be read.

    """
    folder = cache_dir(path)
    if folder is not None:
        got = load(folder)
        if got is not None:
            return got
    if workers is None:
        import multiprocessing

        daemon = multiprocessing.current_process().daemon  # a Pool's worker (several ranks read at once)
        workers = 1 if daemon else max(1, min(2, os.cpu_count() or 1))
    parts = cuts(path, _part_count(path, workers)) if workers > 1 and folder is not None else None
    if parts is not None and folder is not None:
        written = write_parts(path, parts, folder, workers=workers)
        if written is not None:
            return written
    cols = read_columns(path, workers=workers)
    if folder is not None and cols.n and save(cols, folder):
        mapped = load(folder)  # the mapped files instead of the arrays in memory
        if mapped is not None:
            return mapped
    return cols


#: a trace read by N processes is cut in up to this many parts per process, each at least MIN_PART bytes:
#: parts cost unequal time (one kind of event is slower to read than another), and a process that
#: finishes early takes the next part instead of waiting for the slowest of N halves
PARTS_PER_WORKER, MIN_PART = 4, 64 * 2**20


def _part_count(path: Path, workers: int) -> int:
    """How many parts ``workers`` processes read the trace at ``path`` in."""
    try:
        size = path.stat().st_size
    except OSError:
        return workers
    return max(workers, min(workers * PARTS_PER_WORKER, size // MIN_PART))


def write_parts(path: Path, parts: list[int], folder: Path, block: int = BLOCK,
                workers: int | None = None) -> KinetoColumns | None:
    """Read the parts ``parts[k]:parts[k + 1]`` into ``folder`` and map them.

    ``workers`` processes read them (default: one per part), each taking the next part when done.

    Each process writes its columns under a temporary folder; the codes of each part (names,
    categories, ...) are then moved onto one table and the parts joined file by file. None when the
    cache cannot be written (the caller reads in memory then).

    Raises:
        TraceFormatError: not a trace, or broken JSON; OSError: the file cannot be read.

    """
    from concurrent.futures import ProcessPoolExecutor

    tmp = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")
    ranges = list(zip(parts[:-1], parts[1:], strict=True))
    try:
        tmp.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    try:
        with ProcessPoolExecutor(max_workers=min(workers or len(ranges), len(ranges))) as pool:
            futures = [pool.submit(read_part_to_files, path, a, None if b == parts[-1] else b,
                                   tmp / f"part{k}", block) for k, (a, b) in enumerate(ranges)]
            tables = [f.result() for f in futures]
        _join(tmp, tables)
        os.replace(tmp, folder)
    except OSError:
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return load(folder)


def _join(tmp: Path, parts: list[dict[str, Any]]) -> None:
    """Join the parts' files in ``tmp/part<k>`` into ``tmp`` (codes onto one table) and write tables.json."""
    tables = {t: Codes() for t in set(CODED.values())}
    luts = [{t: np.array([tables[t].code(v) for v in p[t]] or [0], dtype=np.int32) for t in tables}
            for p in parts]
    for name in ARRAY_NAMES:
        pieces = []
        for k, lut in enumerate(luts):
            a = load_npy(tmp / f"part{k}" / f"{name}.npy")
            pieces.append(lut[CODED[name]][a] if name in CODED else a)
        joined = np.concatenate(pieces)
        del pieces
        with open(tmp / f"{name}.npy", "wb") as fh:
            np.save(fh, joined, allow_pickle=False)
        del joined
        for k in range(len(parts)):
            (tmp / f"part{k}" / f"{name}.npy").unlink()
    origin = min(p["origin_us"] for p in parts)
    out = {"format": FORMAT, "int_args": list(INT_ARGS), "text_args": list(TEXT_ARGS),
           "n": sum(p["n"] for p in parts), "cats": [str(c) for c in tables["cats"].values],
           "names": tables["names"].values, "pids": tables["pids"].values, "tids": tables["tids"].values,
           "text_values": tables["text_values"].values,
           "processes": [x for p in parts for x in p["processes"]],
           "threads": [x for p in parts for x in p["threads"]],
           "meta": {**parts[0]["meta"], **parts[-1]["meta"]},
           "origin_us": origin if math.isfinite(origin) else None}
    (tmp / "tables.json").write_text(json.dumps(out), encoding="utf-8")
